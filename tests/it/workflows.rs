//! .github/workflows/: the CI workflows cannot run here (no runner, no
//! registry), so they are linted: actionlint (built and cached by
//! tests/actionlint/build, which tests/run calls) checks their syntax,
//! expressions, runner labels, permissions and action inputs, and hands
//! every `run:` script to shellcheck. Where actionlint is missing the lint
//! is skipped with a note, except under `CI=true`, where it fails.
//!
//! And what the release workflow promises, read from the file: every
//! action pinned by a full commit SHA, no permission unless a job asks,
//! the architectures the Deployment admits, and the Containerfile's bases
//! checked against their tags.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::not_run_here;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const RELEASE_WORKFLOW: &str = ".github/workflows/release-image.yml";

/// actionlint: `PREFLIGHT_GATE_ACTIONLINT`, else where tests/actionlint/build
/// puts it, else on PATH. None when there is none, which fails under CI.
fn actionlint() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PREFLIGHT_GATE_ACTIONLINT") {
        return Some(PathBuf::from(path));
    }
    let out = Command::new(format!("{ROOT}/tests/actionlint/build"))
        .arg("--where")
        .output()
        .expect("tests/actionlint/build runs");
    assert!(
        out.status.success(),
        "tests/actionlint/build --where failed"
    );
    let cached = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    if cached.is_file() {
        return Some(cached);
    }
    let on_path = Command::new("actionlint").arg("-version").output();
    if on_path.is_ok_and(|o| o.status.success()) {
        return Some(PathBuf::from("actionlint"));
    }
    not_run_here(
        "the workflows' lint",
        "no actionlint: run tests/actionlint/build (tests/run does), \
         or set PREFLIGHT_GATE_ACTIONLINT",
    );
    None
}

fn has_shellcheck() -> bool {
    Command::new("shellcheck")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs actionlint on `files` in `dir`: (success, report).
fn lint(actionlint: &Path, dir: &Path, files: &[&str]) -> (bool, String) {
    let out = Command::new(actionlint)
        .current_dir(dir)
        .args(["-no-color", "-oneline"])
        .args(files)
        .output()
        .expect("actionlint runs");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn workflows() -> Vec<String> {
    let dir = Path::new(ROOT).join(".github/workflows");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yml") || n.ends_with(".yaml"))
        .map(|n| format!(".github/workflows/{n}"))
        .collect();
    files.sort();
    assert!(files.contains(&RELEASE_WORKFLOW.to_owned()), "{files:?}");
    files
}

#[test]
fn actionlint_and_shellcheck_accept_every_workflow() {
    let Some(actionlint) = actionlint() else {
        return;
    };
    if !has_shellcheck() {
        // actionlint still checks the rest: only the scripts go unchecked.
        not_run_here(
            "shellcheck of the workflows' run: scripts",
            "shellcheck is not installed (tests/run installs it)",
        );
    }
    let files = workflows();
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    let (ok, report) = lint(&actionlint, Path::new(ROOT), &files);
    assert!(ok, "actionlint:\n{report}");
}

/// The lint is worth its "ok": the release workflow with an expression on
/// a field the `github` context does not have, and a `run:` script with an
/// unquoted expansion (shellcheck's SC2086), is refused.
#[test]
fn actionlint_catches_a_broken_workflow() {
    let Some(actionlint) = actionlint() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let workflows = dir.path().join(".github/workflows");
    std::fs::create_dir_all(&workflows).unwrap();
    let text = std::fs::read_to_string(Path::new(ROOT).join(RELEASE_WORKFLOW))
        .unwrap()
        .replace("${{ github.ref_name }}", "${{ github.no_such_field }}")
        .replace(
            "podman manifest create \"preflight-gate:$version\"",
            "podman manifest create preflight-gate:$version $REPOSITORY",
        );
    std::fs::write(workflows.join("release-image.yml"), text).unwrap();
    let (ok, report) = lint(
        &actionlint,
        dir.path(),
        &[".github/workflows/release-image.yml"],
    );
    assert!(!ok, "a broken workflow passed:\n{report}");
    assert!(report.contains("no_such_field"), "{report}");
    if has_shellcheck() {
        assert!(
            report.contains("SC2086"),
            "shellcheck did not run:\n{report}"
        );
    }
}

/// What a reviewer would check by eye, checked on every run.
#[test]
fn the_release_workflow_pins_its_actions_and_asks_for_little() {
    let text = std::fs::read_to_string(Path::new(ROOT).join(RELEASE_WORKFLOW)).unwrap();
    let workflow: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    // Every action by a full commit SHA, with the release it was named.
    let uses: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            l.trim_start()
                .trim_start_matches("- ")
                .strip_prefix("uses: ")
        })
        .collect();
    assert!(uses.len() >= 5, "{uses:?}");
    for line in uses {
        let (action, comment) = line.split_once(" # ").unwrap_or((line, ""));
        let sha = action.rsplit_once('@').map(|(_, r)| r).unwrap_or("");
        assert!(
            sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit()),
            "{action} is not pinned by a commit SHA"
        );
        assert!(comment.starts_with('v'), "{action}: say which release");
    }
    // No permission by default; id-token (keyless signing) and packages
    // (the push) only where the image is published.
    assert_eq!(workflow["permissions"], serde_json::json!({}));
    let jobs = workflow["jobs"].as_object().unwrap();
    for (name, job) in jobs {
        let permissions = job["permissions"].as_object().unwrap_or_else(|| {
            panic!("job {name} says no permissions: it gets none, say so explicitly")
        });
        for (scope, level) in permissions {
            if level == "write" {
                assert!(
                    name == "publish" && ["packages", "id-token"].contains(&scope.as_str()),
                    "job {name} writes {scope}"
                );
            }
        }
    }
    assert_eq!(
        jobs["publish"]["if"],
        "github.event_name == 'push' && github.ref_type == 'tag'"
    );
    // The architectures built are the ones the Deployment admits.
    let built: Vec<&str> = jobs["build"]["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|leg| leg["arch"].as_str().unwrap())
        .collect();
    let deployment =
        std::fs::read_to_string(Path::new(ROOT).join("deploy/base/deployment.yaml")).unwrap();
    for arch in ["amd64", "arm64"] {
        assert!(built.contains(&arch), "{built:?}");
        assert!(
            deployment.contains(arch),
            "the Deployment does not admit {arch}"
        );
    }
    // Both of the Containerfile's bases, by digest, and the workflow checks
    // them against their tags with skopeo.
    let containerfile = std::fs::read_to_string(Path::new(ROOT).join("Containerfile")).unwrap();
    for arg in ["BUILDER_IMAGE", "RUNTIME_IMAGE"] {
        let line = containerfile
            .lines()
            .find(|l| l.starts_with(&format!("ARG {arg}=")))
            .unwrap_or_else(|| panic!("no ARG {arg}"));
        let digest = line.rsplit_once("@sha256:").map(|(_, d)| d).unwrap_or("");
        assert!(
            digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()),
            "{line}"
        );
        assert!(text.contains(arg), "the workflow does not check {arg}");
    }
    assert!(text.contains("skopeo inspect --format '{{.Digest}}'"));
}
