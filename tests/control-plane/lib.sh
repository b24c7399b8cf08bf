# shellcheck shell=bash
# What this file sets is used by the scripts that source it, which the
# lint cannot see from here (it checks those with this file followed).
# shellcheck disable=SC2034
# Shared settings for build, up and down. Sourced, never run.
#
# Sets:
#   CP_HARNESS_DIR  this directory
#   CP_CACHE        cache root (PREFLIGHT_GATE_CACHE, default $HOME/.cache/preflight-gate)
#   CP_DIR          state dir of a running control plane (PREFLIGHT_GATE_CP_DIR)
#   K8S_VERSION, ETCD_VERSION  versions pinned by the wrapper modules
#   KUBE_APISERVER_BIN, KUBECTL_BIN, ETCD_BIN  where build puts the binaries

CP_HARNESS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CP_CACHE="${PREFLIGHT_GATE_CACHE:-$HOME/.cache/preflight-gate}"
CP_DIR="${PREFLIGHT_GATE_CP_DIR:-${TMPDIR:-/tmp}/preflight-gate-cp}"

# Marker file that says "this directory belongs to the harness", so that down
# never removes a directory it did not make.
CP_MARKER=".preflight-gate-control-plane"

# True if directory $1 was made by up: it holds the marker, or (should the
# marker have been lost, as a copy of the directory that drops empty or
# hidden files loses it) the env file up writes, naming this very directory.
cp_made_by_up() {
    [[ -f "$1/$CP_MARKER" ]] && return 0
    [[ -f "$1/env" ]] || return 1
    head -n1 "$1/env" | grep -qxF '# Written by tests/control-plane/up; source it.' &&
        grep -qxF "export CP_DIR=$1" "$1/env"
}

# True if PID $1 is alive and is one of this control plane's: its command
# line names the state dir (every process that up starts has it in a flag),
# so a PID file whose process is gone never makes us signal another's.
cp_owns_pid() {
    [[ -r "/proc/$1/cmdline" ]] && tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" | grep -qF "$CP_DIR/"
}

cp_log() { printf '[control-plane] %s\n' "$*" >&2; }
cp_die() { cp_log "error: $*"; exit 1; }

# Version of module $2 as required in go.mod $1.
cp_module_version() {
    awk -v mod="$2" '{ sub(/^require[ \t]+/, "") } $1 == mod && $2 ~ /^v/ { print $2; exit }' "$1"
}

# Short hash of the files that decide what a binary is.
cp_inputs_hash() {
    (cd "$1" && sha256sum "${@:2}") | sha256sum | cut -c1-12
}

K8S_MODULE_DIR="$CP_HARNESS_DIR/kubernetes"
ETCD_MODULE_DIR="$CP_HARNESS_DIR/etcd"

K8S_VERSION="$(cp_module_version "$K8S_MODULE_DIR/go.mod" k8s.io/kubernetes)"
ETCD_VERSION="$(cp_module_version "$ETCD_MODULE_DIR/go.mod" go.etcd.io/etcd/server/v3)"
[[ -n "$K8S_VERSION" && -n "$ETCD_VERSION" ]] || cp_die "cannot read versions from the wrapper go.mod files"

K8S_HASH="$(cp_inputs_hash "$K8S_MODULE_DIR" go.mod go.sum apiserver/main.go kubectl/main.go)"
ETCD_HASH="$(cp_inputs_hash "$ETCD_MODULE_DIR" go.mod go.sum main.go)"

KUBE_APISERVER_BIN="$CP_CACHE/bin/kube-apiserver-$K8S_VERSION-$K8S_HASH/kube-apiserver"
KUBECTL_BIN="$CP_CACHE/bin/kubectl-$K8S_VERSION-$K8S_HASH/kubectl"
ETCD_BIN="$CP_CACHE/bin/etcd-$ETCD_VERSION-$ETCD_HASH/etcd"

# --- the node (up --node) ----------------------------------------------------
# kube-controller-manager, kube-scheduler, kubelet and kube-proxy come from
# their own wrapper module (node/), so that adding them does not change the
# hash, and so the cached build, of kube-apiserver; containerd, its runc shim
# and ctr from containerd/. runc, the CNI plugins, iptables and conntrack are
# Debian's packages (see node-packages).
NODE_MODULE_DIR="$CP_HARNESS_DIR/node"
CONTAINERD_MODULE_DIR="$CP_HARNESS_DIR/containerd"
NODE_K8S_VERSION="$(cp_module_version "$NODE_MODULE_DIR/go.mod" k8s.io/kubernetes)"
CONTAINERD_VERSION="$(cp_module_version "$CONTAINERD_MODULE_DIR/go.mod" github.com/containerd/containerd/v2)"
[[ -n "$NODE_K8S_VERSION" && -n "$CONTAINERD_VERSION" ]] || cp_die "cannot read versions from node/go.mod or containerd/go.mod"
NODE_HASH="$(cp_inputs_hash "$NODE_MODULE_DIR" go.mod go.sum controller-manager/main.go \
    scheduler/main.go kubelet/main.go proxy/main.go)"
CONTAINERD_HASH="$(cp_inputs_hash "$CONTAINERD_MODULE_DIR" go.mod go.sum main.go shim/main.go ctr/main.go)"

KUBE_CONTROLLER_MANAGER_BIN="$CP_CACHE/bin/kube-controller-manager-$NODE_K8S_VERSION-$NODE_HASH/kube-controller-manager"
KUBE_SCHEDULER_BIN="$CP_CACHE/bin/kube-scheduler-$NODE_K8S_VERSION-$NODE_HASH/kube-scheduler"
KUBELET_BIN="$CP_CACHE/bin/kubelet-$NODE_K8S_VERSION-$NODE_HASH/kubelet"
KUBE_PROXY_BIN="$CP_CACHE/bin/kube-proxy-$NODE_K8S_VERSION-$NODE_HASH/kube-proxy"
CONTAINERD_BIN="$CP_CACHE/bin/containerd-$CONTAINERD_VERSION-$CONTAINERD_HASH/containerd"
CONTAINERD_SHIM_BIN="$CP_CACHE/bin/containerd-$CONTAINERD_VERSION-$CONTAINERD_HASH/containerd-shim-runc-v2"
CTR_BIN="$CP_CACHE/bin/containerd-$CONTAINERD_VERSION-$CONTAINERD_HASH/ctr"

# The node's network namespace (one per state dir), its address there, the
# pod network on its bridge, and the cgroup its pods run under.
CP_DIR_HASH="$(printf '%s' "$CP_DIR" | sha256sum | cut -c1-8)"
CP_NODE_NETNS="preflight-gate-$CP_DIR_HASH"
CP_NODE_IP=10.250.0.1
CP_POD_CIDR=10.244.0.0/24
CP_NODE_CGROUP="preflight-gate-$CP_DIR_HASH"

# runc, built with seccomp (the restricted profile's RuntimeDefault) by
# `go install` at this version: Debian 12's runc 1.1.5 cannot start the
# sandboxes containerd 2.4 asks for ("can't get final child's PID from
# pipe: EOF").
RUNC_VERSION=v1.5.3
RUNC_BIN="$CP_CACHE/bin/runc-$RUNC_VERSION-seccomp/runc"

# Debian packages the node needs, by the file or command each provides.
CP_NODE_PACKAGES=(containernetworking-plugins:/usr/lib/cni/bridge
    iptables:iptables conntrack:conntrack ethtool:ethtool socat:socat
    libseccomp-dev:/usr/include/seccomp.h pkg-config:pkg-config gcc:gcc
    iproute2:ip util-linux:nsenter)

cp_node_binaries_present() {
    [[ -x "$KUBE_CONTROLLER_MANAGER_BIN" && -x "$KUBE_SCHEDULER_BIN" && -x "$KUBELET_BIN" \
        && -x "$KUBE_PROXY_BIN" && -x "$CONTAINERD_BIN" && -x "$CONTAINERD_SHIM_BIN" && -x "$CTR_BIN" \
        && -x "$RUNC_BIN" ]]
}

cp_binaries_present() {
    [[ -x "$KUBE_APISERVER_BIN" && -x "$KUBECTL_BIN" && -x "$ETCD_BIN" ]]
}
