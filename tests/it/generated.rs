//! Generated text that is checked in must match what the code generates.
//! Run with `PREFLIGHT_GATE_BLESS=1` to rewrite it.

use clap::CommandFactory;
use kube::CustomResourceExt;
use preflight_gate::cli::Cli;
use preflight_gate::model::{PreflightCheck, UpdatePreflight};

fn help(subcommand: &str) -> String {
    let mut cli = Cli::command().term_width(0);
    cli.build();
    let sub = cli
        .find_subcommand_mut(subcommand)
        .expect("a subcommand")
        .clone();
    let text = sub
        .bin_name(format!("preflight-gate {subcommand}"))
        .render_help()
        .to_string();
    text.lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Replaces the block between the markers for `name` in `text`.
fn splice(text: &str, name: &str, body: &str) -> String {
    let begin = format!("<!-- BEGIN GENERATED: {name} -->\n");
    let end = "<!-- END GENERATED -->";
    let start = text
        .find(&begin)
        .unwrap_or_else(|| panic!("no marker for {name}"))
        + begin.len();
    let stop = start + text[start..].find(end).expect("an end marker");
    format!(
        "{}```text\n{}\n```\n{}",
        &text[..start],
        body.trim_end(),
        &text[stop..]
    )
}

/// Compares a checked-in file with what the code generates, or rewrites it.
fn check_file(relative: &str, generated: &str) {
    crate::golden::file(relative, generated, "generated");
}

#[test]
fn the_crd_yaml_is_generated_from_the_rust_types() {
    let yaml = serde_saphyr::to_string(&UpdatePreflight::crd()).unwrap();
    check_file(
        "deploy/crds/updatepreflights.preflight.dev.yaml",
        &format!("# Generated from src/model/results.rs; do not edit.\n{yaml}"),
    );
}

#[test]
fn the_preflight_check_crd_yaml_is_generated_from_the_rust_types() {
    let yaml = serde_saphyr::to_string(&PreflightCheck::crd()).unwrap();
    check_file(
        "deploy/crds/preflightchecks.preflight.dev.yaml",
        &format!("# Generated from src/model/preflight_check.rs; do not edit.\n{yaml}"),
    );
}

#[test]
fn the_readme_lists_every_flag_as_help_prints_it() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let mut expected = readme.clone();
    for sub in ["serve", "certs", "check", "run", "fleet"] {
        expected = splice(
            &expected,
            &format!("preflight-gate {sub} --help"),
            &help(sub),
        );
    }
    let _ = readme;
    check_file("README.md", &expected);
}
