//! Integration tests, in one binary to keep link time down.

mod alerts;
mod check_cli;
mod checks;
mod dashboard;
mod deploy;
mod generated;
mod harness;
mod image;
mod keys;
mod prometheus;
mod report;
mod reviews;
mod router;
mod shutdown;
mod tls;
