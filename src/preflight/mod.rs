//! The runtime of preflight results: the sources that fill the webhook's
//! in-memory cache ([`ResultCache`]: a directory, a snapshot checked offline, or the
//! cluster through a watch) and implement the decision's ports, and the
//! leader-elected controller that runs suites and writes their results;
//! `PreflightCheck`s, administrators' and vendors' checks, run as Jobs.

pub mod cluster_claims;
pub mod controller;
pub mod hosted;
pub mod jobs;
pub mod leader;
pub mod live;
mod offline;
pub mod release_checks;
pub mod result_cache;
pub mod result_key;
pub mod signature;
mod source;

pub use hosted::HostedSource;
pub use live::LiveSource;
pub use offline::SnapshotSource;
pub use result_cache::ResultCache;
pub use source::{DirectorySource, LoadError, Source};
