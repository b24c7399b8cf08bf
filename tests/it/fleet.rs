//! `preflight-gate fleet` as a platform team runs it, on the made-up fleet
//! of tests/data/fleet/ (the sample snapshot under other clusterIDs: one
//! cleared, two blocked by the same firing alert, one of them by a second
//! alert too) and a path that is no cluster: the table, the JSON's counts
//! and shared causes, the exit codes, the cluster that cannot be read as
//! an error of its own, and the HTML page as a real browser renders it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::not_run_here;

fn data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/fleet")
        .join(name)
        .display()
        .to_string()
}

fn fleet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_preflight-gate"))
        .arg("fleet")
        .args(args)
        .env_remove("PREFLIGHT_GATE_OUTPUT")
        .env_remove("PREFLIGHT_GATE_TO")
        .output()
        .expect("the binary runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const EAST: &str = "22222222-1e7a-4fbc-a12d-ae4109affb3d";
const WEST: &str = "33333333-1e7a-4fbc-a12d-ae4109affb3d";

/// The whole fleet, and a path that is no cluster among them, for 4.14.12.
fn whole_fleet(output: &str) -> Output {
    fleet(&[
        "--to",
        "4.14.12",
        "-o",
        output,
        "--jobs",
        "2",
        &data("cleared"),
        &data("blocked-east"),
        &data("no-such-cluster"),
        &data("blocked-west"),
    ])
}

#[test]
fn fleet_json_counts_the_verdicts_and_the_shared_causes() {
    let out = whole_fleet("json");
    assert_eq!(out.status.code(), Some(3), "blocked wins: {}", stdout(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["schemaVersion"], 1);
    assert_eq!(report["target"], "4.14.12");
    assert_eq!(
        report["summary"],
        serde_json::json!({"clusters": 4, "cleared": 1, "blocked": 2, "errors": 1})
    );
    let clusters = report["clusters"].as_array().unwrap();
    let verdicts: Vec<(&str, &str)> = clusters
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["verdict"].as_str().unwrap()))
        .collect();
    let missing = data("no-such-cluster");
    assert_eq!(
        verdicts,
        [
            ("11111111-1e7a-4fbc-a12d-ae4109affb3d", "Cleared"),
            (EAST, "Blocked"),
            (missing.as_str(), "Error"),
            (WEST, "Blocked"),
        ],
        "in the order given"
    );
    assert_eq!(clusters[1]["source"], data("blocked-east"));
    assert_eq!(clusters[1]["clusterID"], EAST);
    assert_eq!(clusters[1]["checkVerdict"], "Blocked");
    assert_eq!(
        clusters[1]["blocking"][0]["check"], "PrecheckAlertsFiring",
        "{report}"
    );
    assert_eq!(
        clusters[1]["blocking"][0]["names"],
        serde_json::json!(["KubeContainerWaiting"])
    );
    // Each judged cluster's plan in figures: the sample's 1h31m, P90 2h31m.
    for c in [&clusters[0], &clusters[1], &clusters[3]] {
        assert_eq!(c["plan"]["p50"], "1h31m", "{c}");
        assert_eq!(c["plan"]["p90"], "2h31m", "{c}");
        assert!(c["plan"]["p50Seconds"].as_u64().unwrap() > 0);
    }
    // The unreadable one: an error of its own, never a pass, no plan.
    assert!(
        clusters[2]["error"]
            .as_str()
            .unwrap()
            .contains("no-such-cluster"),
        "{}",
        clusters[2]
    );
    assert!(clusters[2].get("plan").is_none());
    assert!(clusters[2].get("checkVerdict").is_none());
    // The causes, those blocking most first.
    assert_eq!(
        report["causes"],
        serde_json::json!([
            {"check": "PrecheckAlertsFiring", "names": ["KubeContainerWaiting"], "count": 2, "clusters": [EAST, WEST]},
            {"check": "PrecheckAlertsFiring", "names": ["KubeNodeNotReady"], "count": 1, "clusters": [WEST]},
        ])
    );
}

#[test]
fn fleet_table_names_the_shared_cause_and_each_clusters_blockers() {
    let out = whole_fleet("table");
    assert_eq!(out.status.code(), Some(3));
    let text = stdout(&out);
    assert!(
        text.starts_with(
            "Fleet: 4 clusters for 4.14.12: 1 cleared, 2 blocked, 1 could not be judged."
        ),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "2 of 4 clusters: PrecheckAlertsFiring [KubeContainerWaiting] ({EAST}, {WEST})"
        )),
        "{text}"
    );
    assert!(text.contains("could not be judged"), "{text}");
    assert!(!text.contains('\u{1b}'), "no colour off a terminal: {text}");
}

#[test]
fn fleet_exit_codes() {
    let code = |args: &[&str]| fleet(args).status.code();
    let cleared = data("cleared");
    let missing = data("no-such-cluster");
    assert_eq!(code(&["--to", "4.14.12", &cleared]), Some(0), "all cleared");
    assert_eq!(
        code(&["--to", "4.14.12", &cleared, &missing]),
        Some(1),
        "none blocked, one not judged"
    );
    assert_eq!(code(&["--to", "4.14.12", &missing]), Some(1));
    // Usage: no clusters, a bad target, a window that has passed.
    assert_eq!(code(&["--to", "4.14.12"]), Some(2));
    let bad = fleet(&["--to", "four", &cleared]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--to \"four\" is neither a version"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    assert_eq!(
        code(&[
            "--to",
            "4.14.12",
            "--now",
            "2026-11-30T12:00:00Z",
            "--window-end",
            "2026-11-30T11:00:00Z",
            &cleared
        ]),
        Some(2)
    );
}

/// A directory that is no snapshot and a kubeconfig whose API server does
/// not answer are each an error of their own; the rest are judged.
#[test]
fn fleet_a_cluster_that_cannot_be_read_does_not_stop_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    std::fs::write(broken.join("nodes.yaml"), "kind: NodeList\nitems: [ {\n").unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster:\n    server: https://127.0.0.1:{}\ncontexts:\n- name: admin@gone\n  context:\n    cluster: gone\n    user: admin\ncurrent-context: admin@gone\nusers:\n- name: admin\n  user:\n    token: t\n",
            crate::support::free_port()
        ),
    )
    .unwrap();
    let out = fleet(&[
        "--to",
        "4.14.12",
        "-o",
        "json",
        broken.to_str().unwrap(),
        kubeconfig.to_str().unwrap(),
        &data("cleared"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let clusters = report["clusters"].as_array().unwrap();
    assert_eq!(clusters[0]["verdict"], "Error");
    assert!(
        clusters[0]["error"]
            .as_str()
            .unwrap()
            .contains("nodes.yaml is not valid YAML or JSON"),
        "{}",
        clusters[0]
    );
    assert_eq!(clusters[1]["verdict"], "Error");
    assert_eq!(
        clusters[1]["source"],
        format!("{} (context admin@gone)", kubeconfig.display())
    );
    assert!(
        clusters[1]["error"]
            .as_str()
            .unwrap()
            .starts_with("cannot read the cluster"),
        "{}",
        clusters[1]
    );
    assert_eq!(clusters[2]["verdict"], "Cleared");
}

/// The browser: `PREFLIGHT_GATE_CHROMIUM`, else Debian's chromium.
fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PREFLIGHT_GATE_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    ["chromium", "chromium-browser"]
        .into_iter()
        .find_map(|name| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|dir| dir.join(name))
                    .find(|p| p.is_file())
            })
        })
}

/// Runs headless chromium on `page` with `args`.
fn browse(chromium: &Path, profile: &Path, args: &[&str], page: &Path) -> Output {
    Command::new(chromium)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--disable-extensions",
            // Nothing outside the page: a request anywhere would fail.
            "--proxy-server=127.0.0.1:9",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs")
}

/// The text of the element whose id is `id` in a serialized DOM.
fn text_by_id<'a>(dom: &'a str, id: &str) -> &'a str {
    let at = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in the page:\n{dom}"));
    let start = at + dom[at..].find('>').unwrap() + 1;
    let end = start + dom[start..].find('<').unwrap();
    &dom[start..end]
}

/// Every value of `attribute` in a serialized DOM, in order.
fn attributes(dom: &str, attribute: &str) -> Vec<String> {
    let needle = format!(" {attribute}=\"");
    dom.match_indices(&needle)
        .map(|(at, _)| {
            let start = at + needle.len();
            dom[start..start + dom[start..].find('"').unwrap()].to_owned()
        })
        .collect()
}

/// The HTML page as a real browser renders it: the numbers it shows are
/// the JSON's, and each judged cluster's plan is an SVG timeline.
#[test]
fn fleet_html_page_renders_in_a_browser_with_the_jsons_numbers() {
    let Some(chromium) = chromium() else {
        not_run_here(
            "fleet::fleet_html_page_renders_in_a_browser_with_the_jsons_numbers",
            "no chromium on PATH (or PREFLIGHT_GATE_CHROMIUM): apt-get install chromium (tests/run does)",
        );
        return;
    };
    let json: Value = serde_json::from_slice(&whole_fleet("json").stdout).unwrap();
    let html = whole_fleet("html");
    assert_eq!(html.status.code(), Some(3));
    let page_text = stdout(&html);
    for outside in ["<script", "<link", "src=\"http", "href=\"http", "url("] {
        assert!(
            !page_text.contains(outside),
            "{outside}: the page stands alone"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("fleet.html");
    std::fs::write(&page, &html.stdout).unwrap();
    let profile = dir.path().join("profile");

    let out = browse(&chromium, &profile, &["--dump-dom"], &page);
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && dom.contains("</html>"),
        "chromium could not render the page ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = &json["summary"];
    for key in ["clusters", "cleared", "blocked", "errors"] {
        assert_eq!(
            text_by_id(&dom, key),
            summary[key].to_string(),
            "#{key} against the JSON's summary"
        );
    }
    let causes = json["causes"].as_array().unwrap();
    let counts: Vec<String> = causes.iter().map(|c| c["count"].to_string()).collect();
    assert_eq!(attributes(&dom, "data-count"), counts, "the causes' counts");
    let checks: Vec<&str> = causes
        .iter()
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert_eq!(attributes(&dom, "data-check"), checks);
    let verdicts: Vec<&str> = json["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(
        attributes(&dom, "data-verdict"),
        verdicts,
        "the clusters' rows"
    );
    // An SVG timeline for each cluster with a plan, each with the plan's
    // figures.
    let plans: Vec<String> = json["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["plan"]["p90Seconds"].as_u64())
        .map(|s| s.to_string())
        .collect();
    assert_eq!(dom.matches("<svg class=\"timeline\"").count(), plans.len());
    assert_eq!(attributes(&dom, "data-p90-seconds"), plans);
    assert!(dom.contains("<rect"), "the timelines have bars");

    // And a picture of it, as a person sees it.
    let shot = dir.path().join("fleet.png");
    let out = browse(
        &chromium,
        &profile,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1200,1600",
        ],
        &page,
    );
    let png = std::fs::read(&shot).unwrap_or_else(|e| {
        panic!(
            "no screenshot ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
}

/// Two snapshots of one cluster share its clusterID: each is named by it
/// and by where it came from, so that the causes still tell them apart.
#[test]
fn fleet_two_snapshots_of_one_cluster_are_told_apart_by_their_source() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("east-again");
    std::fs::create_dir(&copy).unwrap();
    for entry in std::fs::read_dir(data("blocked-east")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, copy.join(path.file_name().unwrap())).unwrap();
    }
    let east = data("blocked-east");
    let out = fleet(&[
        "--to",
        "4.14.12",
        "-o",
        "json",
        &east,
        copy.to_str().unwrap(),
    ]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names = [
        format!("{EAST} ({east})"),
        format!("{EAST} ({})", copy.display()),
    ];
    assert_eq!(report["causes"][0]["clusters"], serde_json::json!(names));
    assert_eq!(report["causes"][0]["count"], 2);
}
