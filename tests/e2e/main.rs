//! End-to-end tests: a real etcd and kube-apiserver (tests/control-plane/),
//! the gate served on loopback, and kubectl acting as `oc adm upgrade`, the
//! console and administrators would.

#[path = "../common/access.rs"]
mod access;
mod checks_live;
mod cluster;
mod deploy;
mod docs;
mod external;
mod fleet;
mod flows;
mod hosted;
mod metrics;
mod motion;
#[path = "../common/oc.rs"]
mod oc;
mod openshift5;
mod prompt_exit;
mod reserve;
mod runs;
mod signatures;
#[path = "../common/support.rs"]
mod support;
mod vouch;
mod window;
