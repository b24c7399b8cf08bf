# shellcheck shell=bash
# Sourced by up after lib.sh: it uses what those two set (pki, the *_BIN
# paths) and sets what up's env file reads by name, none of which the
# lint can see from here.
# shellcheck disable=SC2034,SC2153,SC2154
# The node of `up --node`: sourced by up after lib.sh, never run.
#
# Everything of a node-backed control plane runs in one network namespace
# that this harness makes (CP_NODE_NETNS): etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, containerd, the kubelet and
# kube-proxy, the CNI bridge with the pods behind it, and kube-proxy's
# iptables rules. The namespace has its loopback and a dummy interface with
# the node's address (CP_NODE_IP) on an empty bridge; pods get addresses from CP_POD_CIDR on the
# bridge cni0. Nothing is routed out of it. The host reaches the API server
# only through a loopback forwarder (socat over a Unix socket), on the same
# 127.0.0.1 port as without a node, so clients do not know the difference.
#
# Images come from nowhere outside: the pause image is made here from
# Debian's static busybox and imported into containerd; tests import theirs
# the same way (ctr, in the env file).

NODE_NAME=preflight-gate-node
NODE_CTD_DIR="$CP_DIR/containerd"
NODE_CTD_SOCK="$NODE_CTD_DIR/containerd.sock"
NODE_PAUSE_IMAGE=preflight-gate.test/pause:1
# nsenter, not `ip netns exec`: that one also gives the process a mount
# namespace of its own with a new /sys, so the kubelet's volume mounts would
# be invisible to containerd, and the cgroup mounts would be gone.
node_exec=(nsenter --net="/run/netns/$CP_NODE_NETNS")

# Root, the Debian packages, the binaries, and the namespace itself.
node_prepare() {
    [[ $(id -u) -eq 0 ]] || cp_die "--node needs root (network namespaces, mounts, cgroups)"
    local missing=() spec
    for spec in "${CP_NODE_PACKAGES[@]}"; do
        [[ -e "${spec#*:}" ]] || command -v "${spec#*:}" >/dev/null || missing+=("${spec%%:*}")
    done
    # The static busybox (not the dynamic one of the package busybox) for
    # the pause image and the tests' images.
    dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q "ok installed" ||
        missing+=(busybox-static)
    if ((${#missing[@]})); then
        cp_log "installing ${missing[*]} with apt-get"
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
    fi
    if ! cp_node_binaries_present; then
        cp_log "node binaries not in the cache yet; building them"
        "$CP_HARNESS_DIR/build" --node >/dev/null
    fi
    [[ -d /sys/fs/cgroup/memory || -f /sys/fs/cgroup/cgroup.controllers ]] ||
        cp_die "no cgroup hierarchy under /sys/fs/cgroup"

    cp_log "making network namespace $CP_NODE_NETNS (node $CP_NODE_IP, pods $CP_POD_CIDR)"
    ip netns delete "$CP_NODE_NETNS" 2>/dev/null || true
    ip netns add "$CP_NODE_NETNS"
    "${node_exec[@]}" ip link set lo up
    # A bridge with no ports holds the node's address (this kernel may have
    # no dummy interfaces).
    "${node_exec[@]}" ip link add node0 type bridge
    "${node_exec[@]}" ip addr add "$CP_NODE_IP/24" dev node0
    "${node_exec[@]}" ip link set node0 up
    # The node's default route, so that Service addresses (DNAT'ed by
    # kube-proxy) have a route to be looked up on; nothing lies beyond it.
    "${node_exec[@]}" ip route add default dev node0
    "${node_exec[@]}" sysctl -qw net.ipv4.ip_forward=1
    "${node_exec[@]}" sysctl -qw net.ipv4.conf.all.route_localnet=1
    "${node_exec[@]}" sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
}

# Certificates of the node's components, signed by the test CA (`sign` and
# `pki` are up's).
node_certificates() {
    local client_ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
    sign kube-controller-manager "/CN=system:kube-controller-manager" "$client_ext"
    sign kube-scheduler "/CN=system:kube-scheduler" "$client_ext"
    sign kube-proxy "/CN=system:kube-proxy" "$client_ext"
    sign kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" "$client_ext"
    sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client_ext"
    sign kubelet-serving "/CN=$NODE_NAME" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:$NODE_NAME,IP:$CP_NODE_IP,IP:127.0.0.1"
}

node_kubeconfigs() {
    local user
    for user in kube-controller-manager kube-scheduler kube-proxy kubelet; do
        write_kubeconfig "$user"
    done
}

# The host's 127.0.0.1:APISERVER_PORT → a Unix socket → the namespace's
# 127.0.0.1:APISERVER_PORT. Both halves name the state dir, so down finds them.
node_forward_apiserver() {
    local sock="$CP_DIR/apiserver.sock"
    rm -f "$sock"
    setsid "${node_exec[@]}" socat "UNIX-LISTEN:$sock,fork,mode=600" "TCP:127.0.0.1:$APISERVER_PORT" \
        >"$CP_DIR/forward-in.log" 2>&1 </dev/null &
    echo $! >"$CP_DIR/forward-in.pid"
    setsid socat "TCP-LISTEN:$APISERVER_PORT,bind=127.0.0.1,fork,reuseaddr" "UNIX-CONNECT:$sock" \
        >"$CP_DIR/forward-out.log" 2>&1 </dev/null &
    echo $! >"$CP_DIR/forward-out.pid"
}

# The pause image: busybox waiting for SIGTERM, as the real pause does.
node_pause_image() {
    local dir="$CP_DIR/images/pause" busybox=/bin/busybox
    mkdir -p "$dir"
    "$CP_HARNESS_DIR/../../deploy/image/oci-archive" "$dir/pause.tar" \
        --name "$NODE_PAUSE_IMAGE" --user 65535:65535 \
        --entrypoint '["/bin/busybox", "sh", "-c", "trap \"exit 0\" TERM INT; while :; do sleep 3600 & wait; done"]' \
        --file "$busybox:/bin/busybox:0755" >/dev/null
    "$CTR_BIN" --address "$NODE_CTD_SOCK" -n k8s.io images import --no-unpack=false "$dir/pause.tar" >/dev/null
}

node_wait() {
    local what="$1" name="$2" pid="$3"
    shift 3
    local deadline=$((SECONDS + READY_TIMEOUT))
    until "$@" >/dev/null 2>&1; do
        pid_alive "$pid" || fail "$name" "$name exited"
        ((SECONDS < deadline)) || fail "$name" "$what not within $READY_TIMEOUT s"
        sleep 0.5
    done
}

node_start() {
    local kubectl=("$KUBECTL_BIN" --kubeconfig "$CP_DIR/admin.kubeconfig" --request-timeout=10s)

    # containerd, with the CRI plugin, runc and the CNI plugins; all its
    # state and the pods' network namespaces under the state dir.
    mkdir -p "$NODE_CTD_DIR" "$CP_DIR/cni/net.d"
    cat >"$CP_DIR/cni/net.d/10-preflight-gate.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "preflight-gate",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$CP_POD_CIDR"}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$CP_DIR/cni/ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
    cat >"$NODE_CTD_DIR/config.toml" <<EOF
version = 3
root = "$NODE_CTD_DIR/root"
state = "$NODE_CTD_DIR/state"
[grpc]
  address = "$NODE_CTD_SOCK"
[ttrpc]
  address = "$NODE_CTD_SOCK.ttrpc"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$NODE_PAUSE_IMAGE"
[plugins.'io.containerd.cri.v1.runtime']
  netns_mounts_under_state_dir = true
  # Sandboxes ask for -998, critical pods less than 0; lowering a score
  # needs CAP_SYS_RESOURCE, which a sandboxed machine may not give root.
  # Keep every score at or above containerd's own.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "$RUNC_BIN"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$CP_DIR/cni/net.d"
[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
EOF
    cp_log "starting containerd $CONTAINERD_VERSION"
    # The runc shim is found on PATH, next to containerd.
    CONTAINERD_PID=$(PATH="$(dirname "$CONTAINERD_SHIM_BIN"):$PATH" start containerd "$CONTAINERD_BIN" \
        --config="$NODE_CTD_DIR/config.toml" --log-level=warn)
    node_wait "containerd ready" containerd "$CONTAINERD_PID" \
        "$CTR_BIN" --address "$NODE_CTD_SOCK" version
    node_pause_image

    cp_log "starting kube-controller-manager and kube-scheduler $NODE_K8S_VERSION"
    KUBE_CONTROLLER_MANAGER_PID=$(start kube-controller-manager "$KUBE_CONTROLLER_MANAGER_BIN" \
        --kubeconfig="$CP_DIR/kube-controller-manager.kubeconfig" \
        --authentication-kubeconfig="$CP_DIR/kube-controller-manager.kubeconfig" \
        --authorization-kubeconfig="$CP_DIR/kube-controller-manager.kubeconfig" \
        --secure-port=0 \
        --leader-elect=false \
        --use-service-account-credentials=true \
        --service-account-private-key-file="$pki/sa.key" \
        --root-ca-file="$pki/ca.crt" \
        --cluster-name=preflight-gate-test \
        --controllers='*,-nodeipam,-bootstrapsigner,-tokencleaner,-csrsigning,-csrapproving' \
        --node-monitor-grace-period=20s \
        --concurrent-gc-syncs=5)
    KUBE_SCHEDULER_PID=$(start kube-scheduler "$KUBE_SCHEDULER_BIN" \
        --kubeconfig="$CP_DIR/kube-scheduler.kubeconfig" \
        --authentication-kubeconfig="$CP_DIR/kube-scheduler.kubeconfig" \
        --authorization-kubeconfig="$CP_DIR/kube-scheduler.kubeconfig" \
        --secure-port=0 \
        --leader-elect=false)

    # The kubelet: cgroupfs under a cgroup of this node's own, on cgroup v1
    # too (failCgroupV1: false), no swap check, eviction thresholds low
    # enough for a shared disk, logs and volumes under the state dir.
    local kubelet_dir="$CP_DIR/kubelet"
    mkdir -p "$kubelet_dir" "$CP_DIR/pod-logs"
    cat >"$CP_DIR/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupRoot: /$CP_NODE_CGROUP
cgroupsPerQOS: true
containerRuntimeEndpoint: unix://$NODE_CTD_SOCK
address: 0.0.0.0
port: 10250
healthzBindAddress: 127.0.0.1
healthzPort: 10248
readOnlyPort: 0
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $pki/ca.crt}
authorization:
  mode: AlwaysAllow
podLogsDir: $CP_DIR/pod-logs
resolvConf: /etc/resolv.conf
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
fileCheckFrequency: 10s
maxPods: 50
protectKernelDefaults: false
localStorageCapacityIsolation: true
EOF
    # The kubelet wants its cgroup root to exist in every hierarchy.
    local hierarchy
    for hierarchy in /sys/fs/cgroup/*/; do
        [[ -f "$hierarchy/cgroup.procs" ]] || continue
        mkdir -p "$hierarchy$CP_NODE_CGROUP"
        if [[ -f "${hierarchy}cpuset.cpus" ]]; then
            cat "${hierarchy}cpuset.cpus" >"$hierarchy$CP_NODE_CGROUP/cpuset.cpus"
            cat "${hierarchy}cpuset.mems" >"$hierarchy$CP_NODE_CGROUP/cpuset.mems"
        fi
    done
    cp_log "starting kubelet $NODE_K8S_VERSION (node $NODE_NAME)"
    KUBELET_PID=$(start kubelet "$KUBELET_BIN" \
        --config="$CP_DIR/kubelet-config.yaml" \
        --kubeconfig="$CP_DIR/kubelet.kubeconfig" \
        --root-dir="$kubelet_dir" \
        --cert-dir="$kubelet_dir/pki" \
        --hostname-override="$NODE_NAME" \
        --node-ip="$CP_NODE_IP" \
        --v=1)

    cat >"$CP_DIR/kube-proxy-config.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $CP_DIR/kube-proxy.kubeconfig
mode: iptables
hostnameOverride: $NODE_NAME
clusterCIDR: $CP_POD_CIDR
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
iptables:
  masqueradeAll: true
  syncPeriod: 5s
  minSyncPeriod: 0s
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
    cp_log "starting kube-proxy $NODE_K8S_VERSION"
    KUBE_PROXY_PID=$(start kube-proxy "$KUBE_PROXY_BIN" --config="$CP_DIR/kube-proxy-config.yaml")

    node_wait "node $NODE_NAME Ready" kubelet "$KUBELET_PID" \
        "${kubectl[@]}" wait --for=condition=Ready "node/$NODE_NAME" --timeout=2s
    # The default ServiceAccount appears once the controller-manager runs.
    node_wait "ServiceAccount default/default" kube-controller-manager "$KUBE_CONTROLLER_MANAGER_PID" \
        "${kubectl[@]}" get serviceaccount default -n default
    node_wait "kube-proxy healthy" kube-proxy "$KUBE_PROXY_PID" \
        "${node_exec[@]}" bash -c "exec 3<>/dev/tcp/127.0.0.1/10256"
}

node_env() {
    local var
    for var in NODE_NAME CP_NODE_NETNS CP_NODE_IP CP_POD_CIDR CP_NODE_CGROUP NODE_K8S_VERSION \
        CONTAINERD_VERSION NODE_PAUSE_IMAGE CTR_BIN CONTAINERD_PID KUBELET_PID KUBE_PROXY_PID \
        KUBE_CONTROLLER_MANAGER_PID KUBE_SCHEDULER_PID; do
        printf 'export %s=%q\n' "$var" "${!var}"
    done
    printf 'export CONTAINERD_ADDRESS=%q\n' "$NODE_CTD_SOCK"
}
