//! The commands a denial suggests, pasted into a shell as a person would:
//! values a graph server, a release or a check chose (quotes, `$()`, back
//! quotes, spaces, `;`, globs, braces) run nothing and reach `oc` as one
//! argument each, exactly. Through the real decision and the real answer
//! (`Response::decided`, which bounds and cleans it).

use jiff::Timestamp;
use preflight_gate::admission::ports::{Lookup, ResultLookup};
use preflight_gate::admission::review::{Request, Response, parse};
use preflight_gate::admission::{Policy, decide};
use preflight_gate::model::UpdatePreflight;
use preflight_gate::model::release::ReleaseKey;
use preflight_gate::preflight::ResultCache;
use rstest::rstest;
use serde_json::{Value, json};

const IMAGE: &str = "quay.io/ocp/release@sha256:6666";
const CURRENT: &str = "quay.io/ocp/release@sha256:0000";

fn now() -> Timestamp {
    "2026-11-30T12:00:00Z".parse().unwrap()
}

/// The results in a cache, trusted, as the gate's watch holds them.
struct Results(ResultCache);

impl ResultLookup for Results {
    fn lookup(&self, key: &ReleaseKey) -> Lookup {
        Lookup {
            trusted: true,
            ..Lookup::fixed(self.0.get(key))
        }
    }
    fn is_ready(&self) -> bool {
        true
    }
    fn runs_checks(&self) -> bool {
        false
    }
}

/// A failed result for [`IMAGE`], whose one failing check carries `risks`.
fn failing(risks: &[&str]) -> Results {
    let cache = ResultCache::default();
    let result: UpdatePreflight = serde_json::from_value(json!({
        "apiVersion": "preflight.dev/v1alpha1", "kind": "UpdatePreflight",
        "metadata": {"name": ReleaseKey::from_image(IMAGE).object_name(), "generation": 1},
        "spec": {"image": IMAGE},
        "status": {"phase": "Failed", "completionTime": "2026-11-30T11:00:00Z", "observedGeneration": 1,
                   "results": [{"name": "NodesReady", "severity": "Blocking", "outcome": "Fail",
                                "message": "not ready", "risks": risks}]}
    }))
    .unwrap();
    cache.apply(result);
    Results(cache)
}

/// What `user` sends to move the cluster to `version`, which the update
/// graph offers as [`IMAGE`], with the annotations `written`.
fn review(version: &str, user: &str, written: &[(&str, &str)]) -> Value {
    let cv = |desired: Value| {
        json!({
            "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
            "metadata": {"name": "version", "annotations": {}},
            "spec": {"channel": "stable-4.15", "clusterID": "c0ffee", "desiredUpdate": desired},
            "status": {
                "desired": {"version": "4.14.1", "image": CURRENT},
                "history": [{"state": "Completed", "version": "4.14.1", "image": CURRENT}],
                "availableUpdates": [{"version": version, "image": IMAGE}],
            }
        })
    };
    let mut object = cv(json!({"version": version}));
    for (k, v) in written {
        object["metadata"]["annotations"][k] = json!(v);
    }
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "uid-1",
            "kind": {"group": "config.openshift.io", "version": "v1", "kind": "ClusterVersion"},
            "resource": {"group": "config.openshift.io", "version": "v1", "resource": "clusterversions"},
            "name": "version", "operation": "UPDATE",
            "userInfo": {"username": user, "groups": ["system:authenticated"]},
            "object": object, "oldObject": cv(Value::Null),
        }
    })
}

/// The message of the answer the API server gets.
fn answer(review: &Value, results: &Results) -> String {
    let request: Request = parse(review.to_string().as_bytes()).unwrap();
    // A cluster whose ClusterVersion has acceptRisks: the denial offers
    // `oc adm upgrade accept` too.
    let policy = Policy {
        accept_risks_field: true,
        ..Policy::default()
    };
    let verdict = decide(&request, results, &policy, now())
        .into_final()
        .expect("no authorization needed");
    assert!(!verdict.allowed, "{verdict:?}");
    let response = serde_json::to_value(Response::decided(&request, &verdict)).unwrap();
    response["response"]["status"]["message"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The command a line of the denial suggests: what follows `prefix`, up
/// to the prose that may follow it in parentheses.
fn suggested<'a>(message: &'a str, prefix: &str) -> &'a str {
    let line = message
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line {prefix:?} in\n{message}"));
    line.split(" (spec.desiredUpdate")
        .next()
        .unwrap()
        .split(" (writes spec.desiredUpdate")
        .next()
        .unwrap()
}

/// Runs `command` as a person pasting it into a shell would, with `oc` a
/// shell function that prints each argument it gets on a line of its own
/// (and `oc whoami` prints `alice`), in an empty temporary directory: the
/// arguments `oc` got, and the files the command left behind.
fn pasted(command: &str) -> (Vec<String>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "oc() {{ if [ \"$1\" = whoami ]; then echo alice; return; fi; for a in \"$@\"; do printf '%s\\n' \"$a\"; done; }}\n{command}\n"
    );
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let files = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        out.status.success(),
        "{command}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let args = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    (args, files)
}

fn words(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[rstest]
#[case::the_reported_name("4.15.4", &["ReleaseCheck;touch${IFS}x;#"])]
#[case::command_substitution("4.15.3;touch v", &["$(touch a)", "`touch b`"])]
#[case::quotes_and_spaces("4.15.3'\"$(touch q)\"'", &["Risk'A\"B", "a b; touch c #", "${IFS}"])]
#[case::globs_and_braces("~", &["*", "{d,e}", "!x", "^y", "\\z"])]
fn the_suggested_commands_pass_each_value_as_one_argument_and_run_nothing_else(
    #[case] version: &str,
    #[case] risks: &[&str],
) {
    let denial = answer(&review(version, "alice", &[]), &failing(risks));
    let names = risks.join(",");
    let until = "2026-11-30T16:00:00Z";
    let mut accept = words(&["annotate", "--overwrite", "clusterversion", "version"]);
    accept.extend([
        format!("preflight.dev/accept={names}"),
        format!("preflight.dev/accept-for={version}"),
        "preflight.dev/accept-reason=<why>".to_owned(),
        format!("preflight.dev/accept-until={until}"),
        // What the accept was written against, as JSON, one argument too.
        format!(
            "preflight.dev/accept-findings={}",
            serde_json::json!({
                "NodesReady": risks.iter().collect::<std::collections::BTreeSet<_>>()
            })
        ),
        "preflight.dev/claimed-by=alice".to_owned(),
    ]);
    assert_eq!(
        pasted(suggested(&denial, "To accept them: ")),
        (accept, vec![]),
        "{denial}"
    );
    let mut or = words(&["adm", "upgrade", "accept"]);
    or.push(names.clone());
    assert_eq!(pasted(suggested(&denial, "Or: ")), (or, vec![]), "{denial}");
    let mut force = words(&["annotate", "--overwrite", "clusterversion", "version"]);
    force.extend([
        format!("preflight.dev/override={version}"),
        "preflight.dev/override-reason=<why>".to_owned(),
        format!("preflight.dev/override-until={until}"),
        "preflight.dev/claimed-by=alice".to_owned(),
    ]);
    assert_eq!(
        pasted(suggested(&denial, "To override the gate for this target: ")),
        (force, vec![]),
        "{denial}"
    );
    let report = words(&[
        "get",
        "updatepreflight",
        "release-sha256-6666",
        "-o",
        "yaml",
    ]);
    assert_eq!(
        pasted(suggested(&denial, "Full report: ")),
        (report, vec![]),
        "{denial}"
    );
}

/// A claim written without its writer is refused with the command to
/// write one: the requester's name, whatever it is, is one argument.
#[rstest]
#[case::plain("alice")]
#[case::hostile("alice$(touch x)`touch y`'; touch z #")]
fn the_claimed_by_command_passes_the_users_name_as_one_argument(#[case] user: &str) {
    let denial = answer(
        &review("4.15.4", user, &[("preflight.dev/override", "4.15.4")]),
        &failing(&["KubeNodeNotReady"]),
    );
    let command =
        suggested(&denial, "Write it in the same command: ").replace("<annotations> ", "");
    let (args, files) = pasted(&command);
    assert_eq!(files, Vec::<String>::new(), "{denial}");
    assert_eq!(
        args.last().cloned(),
        Some(format!("preflight.dev/claimed-by={user}")),
        "{denial}"
    );
}

/// The request a denial suggests for a target nobody offered: the heredoc
/// is quoted, so nothing in the image is expanded, and the image is one
/// YAML string.
#[test]
fn the_suggested_request_expands_nothing() {
    use preflight_gate::admission::message::{Pending, pending};
    use preflight_gate::model::Target;
    let image = "quay.io/x/$(touch a)`touch b`'\"/release@sha256:7777";
    let target = Target {
        image: image.to_owned(),
        version: None,
        key: ReleaseKey::from_image(image),
        architecture: None,
    };
    let text = pending(
        &target,
        &Pending::NotOffered("no results yet".into()),
        std::time::Duration::from_secs(30),
    );
    let heredoc = &text[text.find("oc create").unwrap()..];
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("oc() {{ cat; }}\n{heredoc}\n"))
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{text}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "{text}");
    let document: Value = serde_saphyr::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    assert_eq!(document["spec"]["image"], image);
}
