//! `preflight-gate check --hosted-cluster` as a person runs it, offline:
//! the made-up management cluster and hosted cluster of tests/data/hosted,
//! one test per HyperShift rule, what does not apply in a hosted cluster,
//! the plan of its NodePools and the usage errors.

use std::process::{Command, Output};

use serde_json::Value;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/hosted");

fn check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_preflight-gate"))
        .arg("check")
        .args(args)
        .env_remove("PREFLIGHT_GATE_KUBECONFIG")
        .env_remove("PREFLIGHT_GATE_SNAPSHOT")
        .env_remove("PREFLIGHT_GATE_HOSTED_CLUSTER")
        .env_remove("PREFLIGHT_GATE_HOSTED_SNAPSHOT")
        .env_remove("PREFLIGHT_GATE_NODEPOOL")
        .output()
        .expect("the binary runs")
}

/// `check` of `cluster` with the guest `guest`, to `to`, with `extra`
/// flags, as JSON, and its exit code.
fn hosted_in(guest: &str, cluster: &str, to: &str, extra: &[&str]) -> (Value, Option<i32>) {
    let management = format!("{DATA}/management");
    let mut args = vec![
        "--snapshot",
        &management,
        "--hosted-cluster",
        cluster,
        "--hosted-snapshot",
        guest,
        "--to",
        to,
        "-o",
        "json",
    ];
    args.extend(extra);
    let out = check(&args);
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (report, out.status.code())
}

fn hosted(cluster: &str, to: &str, extra: &[&str]) -> (Value, Option<i32>) {
    hosted_in(&format!("{DATA}/guest"), cluster, to, extra)
}

/// The result of the check `name`: its outcome and message.
fn result(report: &Value, name: &str) -> (String, String) {
    let found = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {report:#}"));
    (
        found["outcome"].as_str().unwrap().to_owned(),
        found["message"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn a_patch_update_of_a_healthy_hosted_cluster_may_go_ahead() {
    let (report, code) = hosted("clusters/prod", "4.21.9", &[]);
    // The certificate checks warn: the snapshot holds no Secrets.
    assert_eq!(code, Some(4), "{report:#}");
    assert_eq!(report["summary"]["failing"], 0, "{report:#}");
    for name in [
        "HostedClusterReachable",
        "HostedClusterHealthy",
        "HostedClusterUpgradeable",
        "HostedClusterVersionSupported",
        "NodePoolVersionSkew",
        "NodesReady",
        "DrainsComplete",
    ] {
        assert_eq!(result(&report, name).0, "Pass", "{name}: {report:#}");
    }
}

#[test]
fn a_target_the_operator_does_not_support_names_what_it_supports() {
    let (report, code) = hosted("clusters/prod", "5.0.1", &[]);
    assert_eq!(code, Some(3));
    let (outcome, message) = result(&report, "HostedClusterVersionSupported");
    assert_eq!(outcome, "Fail");
    assert_eq!(
        message,
        "the HyperShift operator (2f6b2c1) supports 4.22, 4.21, 4.20, 4.19, not 5.0"
    );
}

#[test]
fn upgradeable_false_holds_a_minor_update_but_not_a_patch() {
    let (minor, code) = hosted("clusters/prod", "4.22.1", &[]);
    assert_eq!(code, Some(3));
    let (outcome, message) = result(&minor, "HostedClusterUpgradeable");
    assert_eq!(outcome, "Fail");
    assert!(
        message.starts_with(
            "HostedCluster clusters/prod is not upgradeable to another minor (AdminAckRequired): Kubernetes 1.35"
        ),
        "{message}"
    );
    let (patch, _) = hosted("clusters/prod", "4.21.9", &[]);
    assert_eq!(
        result(&patch, "HostedClusterUpgradeable"),
        (
            "Pass".to_owned(),
            "a patch update, which ClusterVersionUpgradeable=False does not hold".to_owned()
        )
    );
}

#[test]
fn a_nodepool_too_far_behind_the_target_fails_the_skew() {
    let (report, code) = hosted("clusters/staging", "4.22.1", &[]);
    assert_eq!(code, Some(3));
    let (outcome, message) = result(&report, "NodePoolVersionSkew");
    assert_eq!(outcome, "Fail");
    assert!(
        message.starts_with("NodePool clusters/old: ") && message.contains("4 minors older"),
        "{message}"
    );
}

#[test]
fn a_nodepool_update_waits_while_the_control_plane_updates() {
    let (report, code) = hosted("clusters/staging", "4.21.4", &["--nodepool", "old"]);
    assert_eq!(code, Some(3));
    assert_eq!(
        result(&report, "NodePoolVersionSkew"),
        (
            "Fail".to_owned(),
            "HostedCluster clusters/staging is updating its control plane; a NodePool update waits until it completes".to_owned()
        )
    );
}

#[test]
fn a_nodepool_may_not_pass_its_control_plane_and_runs_the_workers_checks() {
    let (report, code) = hosted("clusters/prod", "4.21.9", &["--nodepool", "metal"]);
    assert_eq!(code, Some(3));
    let (outcome, message) = result(&report, "NodePoolVersionSkew");
    assert_eq!(outcome, "Fail");
    assert!(
        message.contains("newer than its HostedCluster's 4.21.4"),
        "{message}"
    );
    let names: Vec<&str> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"DrainsComplete"), "{names:?}");
    assert!(
        !names.contains(&"HostedClusterVersionSupported"),
        "{names:?}"
    );
    assert!(!names.contains(&"UpdatePath"), "{names:?}");
    // The plan is of that pool alone.
    let pools = report["plan"]["nodePools"].as_array().unwrap();
    assert_eq!(pools.len(), 1);
    assert_eq!(pools[0]["name"], "clusters/metal");
}

#[test]
fn an_unhealthy_hosted_cluster_or_nodepool_blocks() {
    let (report, code) = hosted("clusters/broken", "4.21.9", &[]);
    assert_eq!(code, Some(3));
    let (outcome, message) = result(&report, "HostedClusterHealthy");
    assert_eq!(outcome, "Fail");
    assert!(
        message.contains(
            "HostedCluster clusters/broken is Degraded=True (EtcdQuorumLost): etcd has 1 of 3 members"
        ) && message.contains("NodePool clusters/sick is AllNodesHealthy=False (NodeConditionsFailed)"),
        "{message}"
    );
}

#[test]
fn a_guest_check_failing_shows_in_the_hosted_report() {
    let guest = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(format!("{DATA}/guest")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, guest.path().join(path.file_name().unwrap())).unwrap();
    }
    let operators = guest.path().join("clusteroperators.yaml");
    let text = std::fs::read_to_string(&operators).unwrap();
    // The first operator (console) Degraded for an hour.
    let degraded = text.replacen(
        "    - type: Degraded\n      status: 'False'\n      reason: AsExpected",
        "    - type: Degraded\n      status: 'True'\n      reason: RouteHealthDegraded",
        1,
    );
    assert_ne!(text, degraded);
    std::fs::write(&operators, degraded).unwrap();
    let (report, code) = hosted_in(
        guest.path().to_str().unwrap(),
        "clusters/prod",
        "4.21.9",
        &[],
    );
    assert_eq!(code, Some(3), "{report:#}");
    let (outcome, message) = result(&report, "ClusterOperatorsHealthy");
    assert_eq!(outcome, "Fail");
    assert!(message.contains("console"), "{message}");
    assert_eq!(result(&report, "HostedClusterHealthy").0, "Pass");
}

#[test]
fn what_a_hosted_cluster_does_not_have_does_not_apply() {
    let (report, _) = hosted("clusters/prod", "4.21.9", &[]);
    for name in ["MachineConfigPoolsHealthy", "EtcdHealthy"] {
        let (outcome, message) = result(&report, name);
        assert_eq!(outcome, "Skipped", "{name}");
        assert!(
            message.starts_with("does not apply: a hosted cluster's control plane and its machine configuration run on the management cluster"),
            "{name}: {message}"
        );
    }
    let (_, message) = result(&report, "DrainCapacity");
    assert!(!message.contains("master"), "{message}");
}

#[test]
fn the_plan_shows_each_nodepools_waves_by_its_upgrade_type() {
    let (report, _) = hosted("clusters/prod", "4.21.9", &[]);
    let plan = &report["plan"];
    assert_eq!(plan["controlPlane"]["source"], "history");
    assert_eq!(plan["controlPlane"]["p50Seconds"], 30 * 60);
    assert!(plan["pools"].as_array().unwrap().is_empty(), "{plan:#}");
    let pools = plan["nodePools"].as_array().unwrap();
    let workers = &pools[0];
    assert_eq!(workers["name"], "clusters/workers");
    assert_eq!(workers["rollout"]["upgradeType"], "Replace");
    assert_eq!(
        (&workers["rollout"]["surge"], &workers["rollout"]["waves"]),
        (&Value::from(1), &Value::from(3))
    );
    let metal = &pools[1];
    assert_eq!(metal["rollout"]["upgradeType"], "InPlace");
    assert_eq!(metal["rollout"]["waves"], 2);
    let unknowns: Vec<&str> = plan["unknowns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap())
        .collect();
    assert!(
        unknowns.iter().any(|u| u.starts_with(
            "NodePool clusters/workers (Replace): each of its 3 wave(s) waits for the cloud"
        )),
        "{unknowns:?}"
    );
    // The table says the same.
    let management = format!("{DATA}/management");
    let guest = format!("{DATA}/guest");
    let out = check(&[
        "--snapshot",
        &management,
        "--hosted-cluster",
        "clusters/prod",
        "--hosted-snapshot",
        &guest,
        "--to",
        "4.21.9",
        "--plan-only",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("NodePool clusters/workers: 3 machines, Replace, 3 wave(s) of 1")
            && text.contains("NodePool clusters/metal: 2 machines, InPlace, 2 wave(s) of 1"),
        "{text}"
    );
}

fn usage_error(args: &[&str]) -> String {
    let out = check(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    stderr
}

#[test]
fn usage_errors_exit_2_and_say_what_is_wrong() {
    let management = format!("{DATA}/management");
    let guest = format!("{DATA}/guest");
    // The hosted cluster `--hosted-cluster`, read from `snapshot`, with
    // `--hosted-snapshot` when given, then any flag more.
    let args = |cluster: &str, snapshot: &str, hosted: Option<&str>, more: &[&str]| {
        let mut args = vec!["--snapshot", snapshot, "--hosted-cluster", cluster];
        if let Some(hosted) = hosted {
            args.extend(["--hosted-snapshot", hosted]);
        }
        args.extend(more);
        args.extend(["--to", "4.21.9"]);
        args.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        (
            args("clusters/dev", &management, Some(&guest), &[]),
            vec![
                "no HostedCluster clusters/dev in",
                "it holds clusters/prod, clusters/staging, clusters/broken",
            ],
        ),
        (
            args("prod", &management, Some(&guest), &[]),
            vec!["--hosted-cluster \"prod\" is not NAMESPACE/NAME"],
        ),
        (
            args("clusters/prod", &management, None, &[]),
            vec!["needs --hosted-snapshot"],
        ),
        (
            ["--hosted-cluster", "clusters/prod", "--to", "4.21.9"]
                .map(str::to_owned)
                .to_vec(),
            vec!["--hosted-cluster needs the management cluster: --snapshot of it"],
        ),
        (
            ["--nodepool", "metal", "--to", "4.21.9"]
                .map(str::to_owned)
                .to_vec(),
            vec!["--hosted-cluster"],
        ),
        (
            args(
                "clusters/prod",
                &management,
                Some(&guest),
                &["--nodepool", "gpu"],
            ),
            vec![
                "no NodePool \"gpu\" of HostedCluster clusters/prod",
                "its NodePools: workers, metal",
            ],
        ),
        (
            args("clusters/prod", &guest, Some(&guest), &[]),
            vec!["holds no HostedCluster"],
        ),
    ];
    for (args, says) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let stderr = usage_error(&args);
        for said in says {
            assert!(stderr.contains(said), "{args:?}: {stderr}");
        }
    }
}

#[test]
fn a_maintenance_window_is_held_to_the_hosted_plan() {
    // The plan: the control plane's P90 of 40m, then metal's 21m in place.
    let now = ["--now", "2026-11-30T11:50:00Z"];
    let (short, code) = hosted(
        "clusters/prod",
        "4.21.9",
        &[&now[..], &["--window-end", "2026-11-30T12:30:00Z"]].concat(),
    );
    assert_eq!(code, Some(3));
    let (outcome, message) = result(&short, "MaintenanceWindow");
    assert_eq!(outcome, "Fail");
    assert!(message.contains("its P90 of 1h01m"), "{message}");
    let (long, _) = hosted(
        "clusters/prod",
        "4.21.9",
        &[&now[..], &["--window-end", "2026-11-30T13:30:00Z"]].concat(),
    );
    assert_eq!(result(&long, "MaintenanceWindow").0, "Pass");
    assert_eq!(long["plan"]["window"]["fits"], true);
}
