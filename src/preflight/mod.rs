//! Preflight runs and results: the `UpdatePreflight` API, the in-memory
//! cache the webhook reads and the sources that fill it (a directory, a
//! snapshot checked offline, or the cluster through a watch), and the
//! leader-elected controller that runs suites and writes their results;
//! `PreflightCheck`s, administrators' and vendors' checks run as Jobs.

#[cfg(test)]
mod api_mock;
mod cache;
pub mod controller;
pub mod jobs;
pub mod leader;
pub mod live;
mod offline;
pub mod release_checks;
mod source;

pub use cache::ResultCache;
pub use live::LiveSource;
pub use offline::SnapshotSource;
pub use source::{DirectorySource, LoadError, Lookup, ResultSource, RunRequest};
