//! The node suite: the gate, its check Jobs and a release image running as
//! real pods on a real node (kube-controller-manager, kube-scheduler, a
//! kubelet, kube-proxy and containerd from tests/control-plane/ `up --node`).
//! Nothing plays the kubelet here: probes, termination messages, pod logs,
//! Endpoints, rollouts and Lease takeovers are the real components' work.
//!
//! Needs root (network namespaces, mounts, cgroups), like the node itself.

#[path = "../common/access.rs"]
mod access;
mod checks;
mod gate;
mod install;
mod own_machinery;
mod plan;
mod security;
#[path = "../common/support.rs"]
mod support;
mod world;
