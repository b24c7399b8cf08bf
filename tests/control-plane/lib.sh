# shellcheck shell=bash
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

cp_binaries_present() {
    [[ -x "$KUBE_APISERVER_BIN" && -x "$KUBECTL_BIN" && -x "$ETCD_BIN" ]]
}
