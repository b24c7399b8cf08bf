//! preflight-gate: a validating admission webhook that keeps an OpenShift
//! cluster from starting an update whose preflight checks fail.
//!
//! See `docs/ARCHITECTURE.md` for the map.

pub mod admission;
pub mod preflight;
pub mod release;
