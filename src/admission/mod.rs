//! The admission decision: parse a review, resolve the target, read cached
//! results, apply overrides, and say allow or deny. Pure and sync: no HTTP
//! and no API server in here.

pub mod audit;
pub mod decision;
pub mod message;
pub mod overrides;
pub mod ports;
pub mod readiness;
pub mod review;
pub mod run_requests;

pub use decision::{
    Authorization, Decision, Effect, EventNote, OnPending, PendingOverride, Policy, Reason,
    Verdict, decide,
};
pub use review::{Malformed, Request, Response, ResponseBody, UserInfo};

#[cfg(test)]
mod hosted_tests;
#[cfg(test)]
mod tests;
