//! `preflight-gate check` as a person runs it: the embedded sample, exit
//! codes, --accept, the output formats, and clear errors for bad snapshots.

use std::process::{Command, Output};

fn check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_preflight-gate"))
        .arg("check")
        .args(args)
        .env_remove("PREFLIGHT_GATE_KUBECONFIG")
        .env_remove("PREFLIGHT_GATE_SNAPSHOT")
        .output()
        .expect("the binary runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_patch_update_of_the_sample_is_blocked_by_an_alert_oc_blocks_on_until_accepted_by_its_name() {
    let out = check(&["--to", "4.14.12"]);
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains("PrecheckAlertsFiring") && text.contains("KubeContainerWaiting"),
        "{text}"
    );
    assert!(text.contains("[OpenShift: KubeContainerWaiting]"), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "no colour when not on a terminal: {text}"
    );
    // Accepted by the alert's name, as `oc adm upgrade recommend --accept`
    // takes it: a warning.
    let accepted = check(&["--to", "4.14.12", "--accept", "KubeContainerWaiting"]);
    assert_eq!(accepted.status.code(), Some(4), "{}", stdout(&accepted));
    assert!(
        stdout(&accepted)
            .contains("accepted: oc's PodImagePullAlerts firing: KubeContainerWaiting"),
        "{}",
        stdout(&accepted)
    );
}

#[test]
fn a_minor_update_of_the_sample_is_blocked_until_accepted() {
    let out = check(&["--to", "4.15.3", "--output", "json"]);
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let failing: Vec<&str> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["outcome"] == "Fail" && r["severity"] == "Blocking")
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        failing,
        ["OLMOperatorsCompatible", "PrecheckAlertsFiring"],
        "{report}"
    );
    assert_eq!(report["summary"]["failing"], 2);
    assert_eq!(report["schemaVersion"], 1);
    assert_eq!(report["verdict"], "Blocked");
    let precheck = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "PrecheckAlertsFiring")
        .unwrap();
    assert_eq!(
        precheck["risks"],
        serde_json::json!(["KubeContainerWaiting"])
    );

    // A check's name and an OpenShift name, side by side. An accepted check
    // keeps its own severity, beside the standing it got; the table shows
    // it as an accepted warning.
    let accept = |output: &str| {
        check(&[
            "--to",
            "4.15.3",
            "--accept",
            "OLMOperatorsCompatible,KubeContainerWaiting",
            "--output",
            output,
        ])
    };
    let accepted = accept("yaml");
    assert_eq!(accepted.status.code(), Some(4), "{}", stdout(&accepted));
    let report: serde_json::Value = serde_saphyr::from_str(&stdout(&accepted)).unwrap();
    assert_eq!(report["verdict"], "AllowedWithWarnings");
    let olm = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "OLMOperatorsCompatible")
        .unwrap();
    assert_eq!(olm["severity"], "Blocking", "{olm:?}");
    assert_eq!(olm["standing"], "Accepted", "{olm:?}");
    assert!(
        olm["message"]
            .as_str()
            .unwrap()
            .starts_with("operators that do not support OpenShift 4.15"),
        "{olm:?}"
    );
    let table = stdout(&accept("table"));
    assert!(
        table.contains("accepted: operators that do not support OpenShift 4.15"),
        "{table}"
    );
}

#[test]
fn a_target_by_image_is_resolved_to_its_version() {
    let image = "quay.io/openshift-release-dev/ocp-release@sha256:5e3a6c1f0b2748d9e1c7a0b8f6d3e2c1b0a9f8e7d6c5b4a39281706f5e4d3c2b";
    let out = check(&["--to", image, "--output", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["target"], "4.15.3");
    assert_eq!(report["updateKind"], "minor");
}

#[test]
fn a_snapshot_with_a_broken_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("nodes.yaml"),
        "kind: NodeList\nitems: [ {\n",
    )
    .unwrap();
    let out = check(&["--to", "4.15.3", "--snapshot", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "not a snapshot: no verdict");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nodes.yaml is not valid YAML or JSON"),
        "{err}"
    );

    let empty = tempfile::tempdir().unwrap();
    let out = check(&[
        "--to",
        "4.15.3",
        "--snapshot",
        empty.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "not a snapshot: no verdict");
    assert!(String::from_utf8_lossy(&out.stderr).contains("holds no Kubernetes objects"));
}

/// What `check` says about a snapshot that is none: exit code and stderr.
fn refused(path: &std::path::Path) -> (Option<i32>, String) {
    let out = check(&["--to", "4.15.3", "--snapshot", path.to_str().unwrap()]);
    assert!(out.stdout.is_empty(), "no report: {}", stdout(&out));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A gzip stream of `bytes`, as `gzip` writes it.
fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

#[test]
fn a_file_named_as_an_archive_that_holds_no_tar_is_a_usage_error_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n";
    let compressed = dir.path().join("nodes.tar.gz");
    std::fs::write(&compressed, gzip(yaml.as_bytes())).unwrap();
    let (code, err) = refused(&compressed);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "error: {} is not a tar archive: it decompresses to something else",
            compressed.display()
        )
    );
    let plain = dir.path().join("notes.tar.gz");
    std::fs::write(&plain, "not an archive at all\n").unwrap();
    let (code, err) = refused(&plain);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "error: {} is not a tar archive: it is neither a tar nor gzip- or xz-compressed",
            plain.display()
        )
    );
}

#[test]
fn a_truncated_archive_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut tar = tar::Builder::new(Vec::new());
    let cv = include_str!("../../examples/snapshot/clusterversion.yaml");
    let mut header = tar::Header::new_gnu();
    header.set_size(cv.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    tar.append_data(&mut header, "mg/clusterversion.yaml", cv.as_bytes())
        .unwrap();
    let archive = gzip(&tar.into_inner().unwrap());
    let cut = dir.path().join("cut.tar.gz");
    std::fs::write(&cut, &archive[..archive.len() / 2]).unwrap();
    let (code, err) = refused(&cut);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "error: {} is a truncated or corrupt archive: it breaks off after 0 entries",
            cut.display()
        )
    );
}

#[test]
fn a_directory_of_manifests_has_no_cluster_version_before_it_has_two_captures() {
    let dir = tempfile::tempdir().unwrap();
    for folder in ["base", "overlay"] {
        std::fs::create_dir(dir.path().join(folder)).unwrap();
        std::fs::write(
            dir.path().join(folder).join("pdb.yaml"),
            "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: db, namespace: shop}\nspec: {maxUnavailable: 1}\n",
        )
        .unwrap();
    }
    let (code, err) = refused(dir.path());
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "error: {} holds no ClusterVersion (config.openshift.io/v1), so there is no cluster to judge; give a must-gather or add `oc get clusterversion version -o yaml`",
            dir.path().display()
        )
    );
}

#[test]
fn a_cluster_version_alone_is_a_snapshot_whose_report_says_what_it_could_not_look_at() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("clusterversion.yaml"),
        include_str!("../../examples/snapshot/clusterversion.yaml"),
    )
    .unwrap();
    let out = check(&[
        "--to",
        "4.14.12",
        "--snapshot",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    assert!(
        text.contains("no Node objects in the cluster data: this check could not look"),
        "{text}"
    );
}

#[test]
fn an_empty_target_is_a_usage_error() {
    assert_eq!(check(&["--to", " "]).status.code(), Some(2));
    assert_eq!(check(&[]).status.code(), Some(2), "clap's own usage error");
}

#[test]
fn a_target_that_is_neither_a_version_nor_an_image_is_a_usage_error() {
    for to in ["latest", "4.x", "stable-4.15"] {
        let out = check(&["--to", to]);
        assert_eq!(out.status.code(), Some(2), "{to}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "--to {to:?} is neither a version (4.16.3, 4.17.0-ec.2) nor a release image pullspec"
            )),
            "{err}"
        );
        assert!(out.stdout.is_empty(), "no report for {to}");
    }
}

#[test]
fn an_accept_name_that_names_no_check_is_a_usage_error_unless_allowed() {
    let out = check(&[
        "--to",
        "4.15.3",
        "--accept",
        "olmoperatorscompatible,NoSuchCheck",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "--accept names no check or risk: olmoperatorscompatible (did you mean OLMOperatorsCompatible?), NoSuchCheck"
        ),
        "{err}"
    );
    // A name a result carries is suggested too.
    let out = check(&["--to", "4.15.3", "--accept", "kubecontainerwaiting"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("(did you mean KubeContainerWaiting?)"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // OpenShift's own names are known, whether or not a result carries them now.
    let known = check(&[
        "--to",
        "4.15.3",
        "--accept",
        "Failing,PodDisruptionBudgetAtLimit,ClusterOperatorUpgradeable-dns,KubeContainerWaiting",
    ]);
    assert_eq!(
        known.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&known.stderr)
    );
    // Allowed, the unknown names accept nothing: still blocked.
    let allowed = check(&[
        "--to",
        "4.15.3",
        "--accept",
        "NoSuchCheck",
        "--allow-unknown-accept",
    ]);
    assert_eq!(allowed.status.code(), Some(3), "{}", stdout(&allowed));
}

#[test]
fn json_carries_the_whole_list_a_message_shortens() {
    // The sample's minor update: the operators OLM cannot take to 4.15.
    let dir = tempfile::tempdir().unwrap();
    let csv = |i: usize| {
        format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: op{i}.v1\n  namespace: ns{i}\n  annotations:\n    olm.properties: '[{{\"type\":\"olm.maxOpenShiftVersion\",\"value\":\"4.14\"}}]'\nspec: {{}}\n"
        )
    };
    let cv = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/snapshot/clusterversion.yaml"
    ))
    .unwrap();
    std::fs::write(dir.path().join("clusterversion.yaml"), cv).unwrap();
    let csvs: Vec<String> = (0..8).map(csv).collect();
    std::fs::write(dir.path().join("csvs.yaml"), csvs.join("---\n")).unwrap();
    let out = check(&[
        "--to",
        "4.15.3",
        "--snapshot",
        dir.path().to_str().unwrap(),
        "-o",
        "json",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let olm = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "OLMOperatorsCompatible")
        .unwrap()
        .clone();
    assert!(
        olm["message"].as_str().unwrap().contains("and 3 more"),
        "{olm}"
    );
    let items: Vec<&str> = olm["items"]
        .as_array()
        .unwrap_or_else(|| panic!("{olm}"))
        .iter()
        .map(|i| i.as_str().unwrap())
        .collect();
    assert_eq!(items.len(), 8, "{items:?}");
    assert!(items.iter().any(|i| i.contains("op7")), "{items:?}");
}

/// An alert querier that answers nothing is not a failed `check`: the
/// alert checks are Errors naming it, as in a run of the gate, and the
/// snapshot's own alerts do not stand in for the ones asked for.
#[test]
fn an_unreachable_querier_makes_the_alert_checks_errors() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let out = check(&["--to", "4.14.12", "--prometheus-url", &url, "-o", "json"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    for name in ["CriticalAlertsFiring", "PrecheckAlertsFiring"] {
        let result = report["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"));
        assert_eq!(result["outcome"], "Error", "{result}");
        let message = result["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!(
                "cannot read the cluster's alerts: cannot ask {url}/api/v1/alerts"
            )),
            "{message}"
        );
    }
}
