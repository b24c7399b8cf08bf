//! Generated text that is checked in must match what the code generates.
//! Run with `PREFLIGHT_GATE_BLESS=1` to rewrite it.

use clap::CommandFactory;
use preflight_gate::cli::Cli;

fn help(subcommand: &str) -> String {
    let mut cli = Cli::command().term_width(0);
    cli.build();
    let sub = cli
        .find_subcommand_mut(subcommand)
        .expect("a subcommand")
        .clone();
    let text = sub.bin_name(format!("preflight-gate {subcommand}")).render_help().to_string();
    text.lines().map(str::trim_end).collect::<Vec<_>>().join("\n")
}

/// Replaces the block between the markers for `name` in `text`.
fn splice(text: &str, name: &str, body: &str) -> String {
    let begin = format!("<!-- BEGIN GENERATED: {name} -->\n");
    let end = "<!-- END GENERATED -->";
    let start = text.find(&begin).unwrap_or_else(|| panic!("no marker for {name}")) + begin.len();
    let stop = start + text[start..].find(end).expect("an end marker");
    format!("{}```text\n{}\n```\n{}", &text[..start], body.trim_end(), &text[stop..])
}

#[test]
fn the_readme_lists_every_flag_as_help_prints_it() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let mut expected = readme.clone();
    for sub in ["serve", "certs"] {
        expected = splice(&expected, &format!("preflight-gate {sub} --help"), &help(sub));
    }
    if std::env::var_os("PREFLIGHT_GATE_BLESS").is_some() {
        std::fs::write(path, &expected).unwrap();
        return;
    }
    assert!(readme == expected, "README.md's flag reference is stale: run PREFLIGHT_GATE_BLESS=1 cargo test --test it generated");
}
