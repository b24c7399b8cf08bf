//! Integration tests, in one binary to keep link time down.

mod alerts;
mod check_cli;
mod checks;
mod dashboard;
mod deploy;
mod generated;
mod harness;
mod keys;
mod must_gathers;
mod prometheus;
mod report;
mod reviews;
mod router;
mod shutdown;
mod tls;
