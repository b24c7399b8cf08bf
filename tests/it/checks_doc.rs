//! docs/checks.md's table of built-in checks and its sections are the
//! catalogue's (`checks::catalogue`): a row and a section for every check,
//! each row saying the check's severity and the updates it applies to, and
//! no row or section for a check that does not exist.

use std::collections::BTreeSet;

use preflight_gate::checks::{Check, catalogue};
use preflight_gate::model::UpdateKind;

const DOC: &str = include_str!("../../docs/checks.md");

/// The part of the page about the built-in checks (the rest is about
/// external ones).
fn built_in() -> &'static str {
    let start = DOC
        .find("# Built-in checks\n")
        .expect("the built-in checks' title");
    let end = DOC.find("\n# External checks").unwrap_or(DOC.len());
    &DOC[start..end]
}

/// The rows of the table whose header is `| check | severity | applies to
/// | fails when |`, as their cells.
fn rows() -> Vec<Vec<&'static str>> {
    let mut lines = built_in().lines().skip_while(|l| {
        !l.replace(' ', "")
            .starts_with("|check|severity|appliesto|failswhen|")
    });
    assert!(
        lines.next().is_some(),
        "docs/checks.md has no table of checks"
    );
    let rule = lines.next().unwrap_or_default();
    assert!(rule.starts_with("|---"), "the table's rule: {rule:?}");
    lines
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect()
}

/// The `##` headings of the built-in part that are one CamelCase word: the
/// checks' sections (the others are "Reading a snapshot" and the like).
fn sections() -> BTreeSet<&'static str> {
    built_in()
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(str::trim)
        .filter(|h| h.chars().all(|c| c.is_ascii_alphanumeric()))
        .collect()
}

/// What the "applies to" column says of a check.
fn applies_to(check: &dyn Check) -> String {
    if check.applies_to() == UpdateKind::ALL {
        return "all".into();
    }
    let kinds: Vec<String> = check
        .applies_to()
        .iter()
        .map(|k| format!("{k:?}").to_lowercase())
        .collect();
    kinds.join(", ")
}

#[test]
fn every_check_has_a_row_saying_its_severity_and_what_it_applies_to() {
    let rows = rows();
    for check in catalogue() {
        let name = check.name();
        let row = rows
            .iter()
            .find(|row| row[0] == name)
            .unwrap_or_else(|| panic!("docs/checks.md's table has no row for {name}"));
        let severity = format!("{:?}", check.severity());
        assert!(
            row[1] == severity || row[1].starts_with(&format!("{severity} (")),
            "{name}'s row says its severity is {:?}; it is {severity}",
            row[1]
        );
        assert_eq!(row[2], applies_to(&*check), "{name}'s row: applies to");
        assert!(
            !row[3].is_empty(),
            "{name}'s row says nothing of when it fails"
        );
    }
}

#[test]
fn every_row_names_a_check_once() {
    let names: BTreeSet<&str> = catalogue().iter().map(|c| c.name()).collect();
    let mut seen = BTreeSet::new();
    for row in rows() {
        assert!(
            names.contains(row[0]),
            "docs/checks.md's table names {}, which is no check",
            row[0]
        );
        assert!(
            seen.insert(row[0]),
            "docs/checks.md's table names {} twice",
            row[0]
        );
    }
}

#[test]
fn every_check_has_a_section_and_every_section_is_a_check() {
    let names: BTreeSet<&str> = catalogue().iter().map(|c| c.name()).collect();
    let sections = sections();
    let missing: Vec<_> = names.difference(&sections).collect();
    assert!(
        missing.is_empty(),
        "docs/checks.md has no section for {missing:?}"
    );
    let stray: Vec<_> = sections.difference(&names).collect();
    assert!(
        stray.is_empty(),
        "docs/checks.md has sections for {stray:?}, which are no checks"
    );
}
