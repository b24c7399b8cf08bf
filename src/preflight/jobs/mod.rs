//! External checks, run as Jobs: `PreflightCheck`s that administrators and
//! vendors declare, and those the target release declares. `settings` says
//! where they run, `manifest` what each turns into, `progress` how one
//! ended, and `run` does the API calls around them for one run; only `run`
//! reaches `release_checks`, which in turn needs `settings` alone.
//!
//! Protocol: exit 0 is a pass, 1 a fail, anything else an error. The message
//! is the container's termination message, plain text or JSON
//! `{"outcome": ..., "message": ..., "url": ...}`.

mod manifest;
mod progress;
mod run;
pub mod settings;
#[cfg(test)]
mod tests;

pub use manifest::Update;
pub(crate) use manifest::{REQUIRED_SCC, RESTRICTED_SCC};
pub use run::{release_declared, run_external, trusted};
pub use settings::JobSettings;
