//! Files the tests generate and the repository keeps (rendered manifests,
//! the CRDs, the bundle, the alert rules, golden reports, must-gathers):
//! each test compares what it generates with the checked-in copy, and with
//! `PREFLIGHT_GATE_BLESS=1` rewrites the copy first. Paths are relative to
//! the repository; `filter` names the tests that write a file
//! (`cargo test --test it <filter>`), for the message that says how.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Set, this run rewrites the checked-in files instead of failing on them.
const BLESS: &str = "PREFLIGHT_GATE_BLESS";

/// Whether this run rewrites the checked-in files.
fn blessing() -> bool {
    std::env::var_os(BLESS).is_some()
}

fn absolute(relative: &str) -> PathBuf {
    Path::new(ROOT).join(relative)
}

/// The checked-in file `relative` is `generated`.
pub fn file(relative: &str, generated: &str, filter: &str) {
    files([(relative, generated)], filter);
}

/// Each checked-in file is what was generated for it; every stale one is
/// named at once.
pub fn files<'a>(generated: impl IntoIterator<Item = (&'a str, &'a str)>, filter: &str) {
    let mut stale = Vec::new();
    for (relative, text) in generated {
        let path = absolute(relative);
        if blessing() {
            write(&path, text);
        }
        if let Some(why) = differs(&path, text) {
            stale.push(format!("{relative}: {why}"));
        }
    }
    assert_fresh(&stale, filter);
}

/// The directory `relative` holds exactly `generated` (keyed by paths
/// relative to it): no file missing, none different, none that is not
/// generated. Blessing removes those and writes the rest.
pub fn tree(relative: &str, generated: &BTreeMap<String, String>, filter: &str) {
    let dir = absolute(relative);
    if blessing() {
        for extra in files_under(&dir)
            .into_iter()
            .filter(|f| !generated.contains_key(f))
        {
            std::fs::remove_file(dir.join(extra)).unwrap();
        }
        for (path, text) in generated {
            write(&dir.join(path), text);
        }
        remove_empty_dirs(&dir);
    }
    let mut stale: Vec<String> = generated
        .iter()
        .filter_map(|(path, text)| {
            let why = differs(&dir.join(path), text)?;
            Some(format!("{relative}/{path}: {why}"))
        })
        .collect();
    stale.extend(
        files_under(&dir)
            .into_iter()
            .filter(|f| !generated.contains_key(f))
            .map(|f| format!("{relative}/{f}: not generated")),
    );
    assert_fresh(&stale, filter);
}

fn assert_fresh(stale: &[String], filter: &str) {
    assert!(
        stale.is_empty(),
        "stale:\n  {}\nrun {BLESS}=1 cargo test --test it {filter}, and review the diff",
        stale.join("\n  ")
    );
}

/// Written beside, then renamed: other tests read these files meanwhile.
fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp.{}", std::process::id()));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// How the file at `path` differs from `expected`: missing, or its first
/// line that does not match; None when it is the same.
fn differs(path: &Path, expected: &str) -> Option<String> {
    let found = match std::fs::read_to_string(path) {
        Ok(found) => found,
        Err(e) => return Some(format!("cannot read it ({e})")),
    };
    if found == expected {
        return None;
    }
    let (mut found_lines, mut expected_lines) = (found.lines(), expected.lines());
    for number in 1.. {
        match (found_lines.next(), expected_lines.next()) {
            (Some(a), Some(b)) if a == b => continue,
            (None, None) => break,
            (a, b) => {
                return Some(format!(
                    "line {number} is {:?}, generated {:?}",
                    a.unwrap_or("(end of file)"),
                    b.unwrap_or("(end of file)")
                ));
            }
        }
    }
    Some("differs only in line endings or the final newline".into())
}

/// Every file under `dir`, by its path relative to it; none when there is
/// no `dir`.
fn files_under(dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, base, out);
            } else {
                out.push(path.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Directories under `dir` left empty by removing what is not generated.
fn remove_empty_dirs(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            remove_empty_dirs(&path);
            // Fails, as it should, unless the directory is now empty.
            let _ = std::fs::remove_dir(&path);
        }
    }
}
