//! Preflight results: the `UpdatePreflight` API, the in-memory cache the
//! webhook reads, and the sources that fill it.

mod cache;
mod crd;
mod source;

pub use cache::ResultCache;
pub use crd::{
    CheckResult, FailurePolicy, Outcome, Phase, Severity, Summary, UpdatePreflight,
    UpdatePreflightSpec, UpdatePreflightStatus,
};
pub use source::{DirectorySource, LoadError, Lookup, ResultSource, RunRequest};
