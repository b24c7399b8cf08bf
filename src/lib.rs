//! preflight-gate: a validating admission webhook that keeps an OpenShift
//! cluster from starting an update whose preflight checks fail.
//!
//! See `docs/ARCHITECTURE.md` for the map.

pub mod admission;
pub mod certs;
pub mod checks;
pub mod cli;
pub mod cluster;
pub mod commands;
pub mod metrics;
pub mod model;
pub mod plan;
pub mod preflight;
pub mod report;
pub mod server;
pub mod suite;
pub mod view;
