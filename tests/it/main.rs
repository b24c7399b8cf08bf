//! Integration tests, in one binary to keep link time down.

mod alerts;
mod bundle;
mod captures;
mod check_cli;
mod checks;
mod checks_doc;
mod connections;
mod dashboard;
mod deploy;
mod fleet;
mod generated;
mod glossary;
#[path = "../common/golden.rs"]
mod golden;
mod harness;
mod hosted;
mod image;
mod keys;
mod layering;
mod motion;
mod must_gathers;

#[path = "../common/oc.rs"]
mod oc;
mod one_policy;
mod pasted;
mod plan;
mod prometheus;
mod release;
mod report;
mod reviews;
mod risks;
mod router;
mod shutdown;
#[path = "../common/support.rs"]
mod support;
mod tls;
mod workflows;
