use super::*;
use rstest::rstest;

/// What an extraction pod prints for a release with one declared check
/// (in a file that also holds a Deployment) and an undeclared Job.
const OUTPUT: &str = r#"--- preflight-gate begin image-references
{"kind": "ImageStream", "apiVersion": "image.openshift.io/v1",
 "spec": {"tags": [
   {"name": "cli", "from": {"kind": "DockerImage", "name": "example.com/ocp@sha256:c1"}},
   {"name": "cluster-storage-operator", "from": {"kind": "DockerImage", "name": "example.com/ocp@sha256:50"}}]}}
--- preflight-gate end
--- preflight-gate begin 0000_50_cluster-storage-operator_99_preflight.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: not-a-check
  annotations:
    openshift.io/preflight-check: "true"
---
apiVersion: batch/v1
kind: Job
metadata:
  name: storage-csi-migration
  namespace: openshift-cluster-storage-operator
  annotations:
    openshift.io/preflight-check: "true"
    preflight.dev/severity: Warning
spec:
  activeDeadlineSeconds: 300
  template:
    spec:
      serviceAccountName: cluster-storage-operator
      containers:
      - name: check
        image: example.com/ocp@sha256:50
        command: ["cluster-storage-operator", "preflight"]
        args: ["--csi-migration"]
        env:
        - name: LEVEL
          value: "2"
        - name: TOKEN
          valueFrom: {secretKeyRef: {name: s, key: k}}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: not-declared
spec: {template: {spec: {containers: [{name: c, image: i}]}}}
--- preflight-gate end
"#;

#[test]
fn declared_jobs_and_image_references_are_read_from_the_output() {
    let declared = parse_extraction(OUTPUT).unwrap();
    assert_eq!(declared.images["cli"], "example.com/ocp@sha256:c1");
    assert_eq!(declared.images.len(), 2);
    assert_eq!(declared.checks.len(), 1, "{:?}", declared.checks);
    let check = &declared.checks[0];
    assert_eq!(check.name_any(), "release-storage-csi-migration");
    let spec = &check.spec;
    assert_eq!(spec.check_name, "StorageCsiMigration");
    assert_eq!(spec.image.as_deref(), Some("example.com/ocp@sha256:50"));
    assert_eq!(spec.command, ["cluster-storage-operator", "preflight"]);
    assert_eq!(spec.args, ["--csi-migration"]);
    assert_eq!(spec.timeout_seconds, Some(300));
    assert_eq!(spec.severity, Severity::Warning);
    assert_eq!(spec.failure_policy, FailurePolicy::FailClosed);
    // Only literal values: a declared check gets no Secrets.
    assert_eq!(
        spec.env,
        [EnvVar {
            name: "LEVEL".into(),
            value: "2".into()
        }]
    );
}

#[rstest]
#[case::nothing("", DiscoveryError::NoImageReferences)]
#[case::chatter("starting\nno markers here\n", DiscoveryError::NoImageReferences)]
#[case::not_an_image_stream(
    "--- preflight-gate begin image-references\n{\"kind\": \"ImageStream\"}\n--- preflight-gate end\n",
    DiscoveryError::ImageReferences("no spec.tags".into())
)]
fn output_without_what_it_must_hold_is_an_error(
    #[case] output: &str,
    #[case] expected: DiscoveryError,
) {
    assert_eq!(parse_extraction(output).unwrap_err(), expected);
}

#[test]
fn a_manifest_that_is_not_yaml_is_an_error_naming_the_file() {
    let output = format!(
        "{}--- preflight-gate begin broken.yaml\nkind: [unclosed\n--- preflight-gate end\n",
        OUTPUT
            .split("--- preflight-gate begin 0000")
            .next()
            .unwrap()
    );
    match parse_extraction(&output) {
        Err(DiscoveryError::Manifest { file, .. }) => assert_eq!(file, "broken.yaml"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_extraction_pod_runs_the_release_image_restricted_and_without_a_token() {
    let owner: crate::model::UpdatePreflight = serde_json::from_value(json!({
        "apiVersion": "preflight.dev/v1alpha1", "kind": "UpdatePreflight",
        "metadata": {"name": "release-sha256-aa", "uid": "0b7c1e0e-6a0f-4a57-9c3a-5d1e2f3a4b5c"},
        "spec": {"image": "example.com/ocp-release@sha256:aa"},
    }))
    .unwrap();
    let pod = extraction_pod(
        "example.com/ocp-release@sha256:aa",
        &crate::preflight::jobs::settings::JobSettings::default(),
        Some(&owner),
    )
    .unwrap();
    let p = serde_json::to_value(&pod).unwrap();
    assert_eq!(p["metadata"]["namespace"], "preflight-gate");
    // A controller, so `oc adm drain` evicts it as a managed pod, and the
    // garbage collector removes it with the run's UpdatePreflight.
    let owner_ref = &p["metadata"]["ownerReferences"][0];
    assert_eq!(owner_ref["kind"], "UpdatePreflight");
    assert_eq!(owner_ref["name"], "release-sha256-aa");
    assert_eq!(owner_ref["controller"], true);
    assert_eq!(owner_ref["blockOwnerDeletion"], false);
    assert_eq!(p["metadata"]["labels"][EXTRACTION], "release-sha256-aa");
    assert_eq!(p["spec"]["automountServiceAccountToken"], false);
    assert_eq!(p["spec"]["restartPolicy"], "Never");
    // Admitted under restricted-v2 or not at all, whatever SCC the account
    // may also hold.
    assert_eq!(
        p["metadata"]["annotations"]["openshift.io/required-scc"],
        "restricted-v2"
    );
    let c = &p["spec"]["containers"][0];
    assert_eq!(c["image"], "example.com/ocp-release@sha256:aa");
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    let script = c["command"][2].as_str().unwrap();
    assert!(script.contains("cd /release-manifests"), "{script}");
    assert!(script.contains("/dev/termination-log"), "{script}");
}

#[test]
fn extraction_pods_of_two_tags_that_differ_only_in_case_are_labelled_apart() {
    let settings = crate::preflight::jobs::settings::JobSettings::default();
    let label = |image: &str| {
        let pod = serde_json::to_value(extraction_pod(image, &settings, None).unwrap()).unwrap();
        pod["metadata"]["labels"][EXTRACTION]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let long = "registry.example/openshift-release-dev/ocp-release-nightly:4.18.0-0.nightly";
    let (one, other) = (label(long), label(&long.to_uppercase()));
    assert_ne!(one, other);
    for label in [one, other] {
        assert!(label.len() <= 63, "{label}");
        assert!(
            label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "{label}"
        );
        assert!(!label.ends_with('-'), "{label}");
    }
}

#[test]
fn the_cache_is_keyed_by_digest() {
    let cache = Cache::default();
    cache.insert("a.example/ocp@sha256:aa", parse_extraction(OUTPUT).unwrap());
    assert!(cache.get("mirror.example/ocp@sha256:aa").is_some());
    assert!(cache.get("a.example/ocp@sha256:bb").is_none());
}

#[rstest]
#[case("storage-csi-migration", "StorageCsiMigration")]
#[case("etcd.backup_check", "EtcdBackupCheck")]
fn names_become_camel_case(#[case] name: &str, #[case] camel_case: &str) {
    assert_eq!(camel(name), camel_case);
}

#[rstest]
#[case::listed_digest("q/ocp@sha256:aa", &["other/ocp@sha256:aa"], Ok(Some("--trusted-releases lists other/ocp@sha256:aa")))]
#[case::a_repository_trusts_nothing("quay.io/ocp/release@sha256:aa", &["quay.io/ocp/"], Ok(None))]
#[case::nor_the_repository_exactly("quay.io/ocp/release@sha256:aa", &["quay.io/ocp/release"], Ok(None))]
#[case::another_digest("q/ocp@sha256:bb", &["q/ocp@sha256:aa"], Ok(None))]
#[case::nothing_listed("q/ocp@sha256:aa", &[], Ok(None))]
#[case::a_tag_even_if_listed("quay.io/ocp/release:4.16.3", &["quay.io/ocp/"], Err("is not named by a digest"))]
fn only_listed_or_signed_releases_run_as_pods(
    #[case] image: &str,
    #[case] trusted: &[&str],
    #[case] expected: Result<Option<&str>, &str>,
) {
    let trusted: Vec<String> = trusted.iter().map(|t| t.to_string()).collect();
    // Ok(None): not listed, so only a verified signature lets it run
    // (preflight::signature).
    let got = listed(image, &trusted);
    match (got, expected) {
        (Ok(why), Ok(want)) => assert_eq!(why.as_deref(), want),
        (Err(why), Err(want)) => assert!(why.contains(want), "{why}"),
        (got, want) => panic!("{got:?}, expected {want:?}"),
    }
}

#[rstest]
#[case::read(
    r#"{"kind": "cincinnati-metadata-v0", "version": "4.16.3", "previous": ["4.16.2"]}"#,
    Some("4.16.3")
)]
#[case::not_a_version(r#"{"kind": "cincinnati-metadata-v0", "version": "latest"}"#, None)]
#[case::garbage("not json at all", None)]
fn the_release_metadata_gives_the_version_or_leaves_it_unknown(
    #[case] metadata: &str,
    #[case] version: Option<&str>,
) {
    let output = format!(
        "{OUTPUT}--- preflight-gate begin release-metadata\n{metadata}\n--- preflight-gate end\n"
    );
    let declared = parse_extraction(&output).unwrap();
    assert_eq!(declared.version.as_deref(), version);
    // The metadata is not read as a manifest.
    assert_eq!(declared.checks.len(), 1);
    assert_eq!(parse_extraction(OUTPUT).unwrap().version, None);
}

#[test]
fn a_declared_check_gets_an_api_token_only_when_it_asks() {
    let job = |annotations: serde_json::Value| {
        serde_json::json!({"kind": "Job", "metadata": {"name": "c", "annotations": annotations},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i@sha256:aa"}]}}}})
    };
    let quiet = declared_check(&job(serde_json::json!({DECLARED: "true"})))
        .unwrap()
        .unwrap();
    assert!(!quiet.spec.api_access());
    let reads = declared_check(&job(
        serde_json::json!({DECLARED: "true", NEEDS_API: "true"}),
    ))
    .unwrap()
    .unwrap();
    assert!(reads.spec.api_access());
}

/// What an extraction pod prints for a release whose one declared Job is
/// named `job` and annotated `preflight.dev/check-name: <check_name>`.
fn declaring(job: &str, check_name: Option<&str>) -> String {
    let annotation = check_name
        .map(|n| format!("\n    preflight.dev/check-name: {}", serde_json::json!(n)))
        .unwrap_or_default();
    format!(
        "{}--- preflight-gate begin 0000_99_vendor_preflight.yaml\n\
         apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {job}\n  annotations:\n    \
         openshift.io/preflight-check: \"true\"{annotation}\n\
         spec: {{template: {{spec: {{containers: [{{name: c, image: \"example.com/ocp@sha256:50\"}}]}}}}}}\n\
         --- preflight-gate end\n",
        OUTPUT
            .split("--- preflight-gate begin 0000")
            .next()
            .unwrap()
    )
}

/// The name a release gives its check reaches terminals and the commands a
/// denial suggests: a name that is not a check name refuses the release's
/// declared checks, saying which Job and why, and is never run, dropped or
/// renamed.
#[rstest]
#[case::shell("ReleaseCheck;touch${IFS}x;#", "character 13 is \";\"")]
#[case::command_substitution("Release$(touch x)", "character 8 is \"$\"")]
#[case::back_quotes("Release`touch x`", "character 8 is \"`\"")]
#[case::bidi("Release\u{202e}kcehC", "character 8 is \"\\u{202e}\"")]
#[case::zero_width("Release\u{200b}Check", "character 8 is \"\\u{200b}\"")]
#[case::lower_case("releaseCheck", "it starts with \"r\"")]
#[case::too_long(&format!("R{}", "e".repeat(63)), "it has 64 characters, more than 63")]
fn a_release_declaring_a_name_that_is_not_a_check_name_is_refused(
    #[case] name: &str,
    #[case] says: &str,
) {
    match parse_extraction(&declaring("vendor-check", Some(name))) {
        Err(DiscoveryError::Manifest { file, reason }) => {
            assert_eq!(file, "0000_99_vendor_preflight.yaml");
            assert!(
                reason.starts_with(
                    "the Job \"vendor-check\" declares a check whose name (preflight.dev/check-name) is refused: "
                ),
                "{reason}"
            );
            assert!(reason.contains(says), "{reason}");
            assert!(!reason.contains(['\u{202e}', '\u{200b}']), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[rstest]
#[case::annotated("vendor-check", Some("Vendor.Storage-Check"), "Vendor.Storage-Check")]
#[case::from_the_job_name("vendor-check", None, "VendorCheck")]
fn a_release_declaring_a_check_name_runs_it_under_that_name(
    #[case] job: &str,
    #[case] annotated: Option<&str>,
    #[case] runs_as: &str,
) {
    let declared = parse_extraction(&declaring(job, annotated)).unwrap();
    let names: Vec<&str> = declared
        .checks
        .iter()
        .map(|c| c.spec.check_name.as_str())
        .collect();
    assert_eq!(names, [runs_as]);
}

#[test]
fn a_job_name_that_gives_no_check_name_is_refused_too() {
    let err = parse_extraction(&declaring("0-day", None)).unwrap_err();
    assert!(
        err.to_string()
            .contains("the Job \"0-day\" declares a check whose name (its name) is refused: \"0Day\" is not a check name: it starts with \"0\""),
        "{err}"
    );
}

#[test]
fn a_log_within_the_limit_is_read_and_one_past_it_is_refused() {
    assert_eq!(within_limit(Ok("abcd".into()), 4).unwrap().unwrap(), "abcd");
    assert_eq!(
        within_limit(Ok("abcde".into()), 4).unwrap_err(),
        DiscoveryError::TooLong { limit: 4 }
    );
    // A log cut inside a character does not decode; its length still counts.
    let cut = String::from_utf8("abc\u{e9}".as_bytes()[..4].to_vec()).unwrap_err();
    assert!(matches!(
        within_limit(Err(kube::Error::FromUtf8(cut)), 3),
        Err(DiscoveryError::TooLong { limit: 3 })
    ));
    // Other failures are passed on, for the termination message to answer.
    let short = String::from_utf8(vec![0xff]).unwrap_err();
    assert!(matches!(
        within_limit(Err(kube::Error::FromUtf8(short)), 3),
        Ok(Err(kube::Error::FromUtf8(_)))
    ));
    let message = DiscoveryError::TooLong {
        limit: MAX_EXTRACTION_LOG,
    }
    .to_string();
    assert!(
        message.contains("printed more than 4194304 bytes"),
        "{message}"
    );
}

/// The status of an extraction pod of `image` that ended well, with
/// [`OUTPUT`] as its termination message.
fn finished(image: &str) -> serde_json::Value {
    json!({"containerStatuses": [{
        "name": "extract", "image": image, "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": 0, "message": OUTPUT}},
    }]})
}

/// The scripted API server's answer to the creation of the extraction pod,
/// named `name`: the pod, and the first request for it.
async fn pod_created(
    api: &mut crate::cluster::api_mock::ApiServer,
    name: &str,
) -> (serde_json::Value, crate::cluster::api_mock::Seen) {
    let mut created = api.next().await;
    assert_eq!(created.method, http::Method::POST);
    let mut pod = created.body.clone();
    pod["metadata"]["name"] = json!(name);
    created.ok(&pod);
    let get = api.next().await;
    assert_eq!(
        get.path,
        format!("/api/v1/namespaces/preflight-gate/pods/{name}")
    );
    (pod, get)
}

/// `discover` against a scripted API server, up to the log: the extraction
/// pod is created and has finished, and its log is answered with `log`.
/// Returns the answer and the log request's query.
async fn discover_with_log(log: Vec<u8>) -> (Result<Declared, DiscoveryError>, String) {
    use crate::cluster::api_mock;
    use http::Method;

    let (client, mut api) = api_mock::client();
    let settings = crate::preflight::jobs::settings::JobSettings::default();
    let image = "example.com/ocp-release@sha256:aa";
    let run = tokio::spawn(async move {
        discover(&client, image, &settings, None, Duration::from_secs(30)).await
    });
    let (mut pod, mut get) = pod_created(&mut api, "pfx-release-x1").await;
    // The termination message holds a good answer: a log refused for its
    // length must not fall back to it.
    pod["status"] = finished(image);
    get.ok(&pod);
    let mut logs = api.next().await;
    assert_eq!(
        logs.path,
        "/api/v1/namespaces/preflight-gate/pods/pfx-release-x1/log"
    );
    let query = logs.query.clone();
    logs.text(log);
    let mut deleted = api.next().await;
    assert_eq!(deleted.method, Method::DELETE);
    deleted.ok(&pod);
    (run.await.unwrap(), query)
}

#[tokio::test]
async fn an_extraction_log_past_the_limit_is_refused_not_parsed_cut() {
    // What a kubelet sends for `limitBytes`: the first bytes of a longer
    // log, here a good answer followed by more than the limit, cut inside
    // a two-byte character.
    let mut log = OUTPUT.as_bytes().to_vec();
    if (MAX_EXTRACTION_LOG + 1 - log.len()).is_multiple_of(2) {
        log.push(b'\n');
    }
    log.extend("\u{e9}".repeat(MAX_EXTRACTION_LOG).as_bytes());
    log.truncate(MAX_EXTRACTION_LOG + 1);
    assert!(std::str::from_utf8(&log).is_err(), "cut inside a character");
    let (answer, query) = discover_with_log(log).await;
    assert!(
        query
            .split('&')
            .any(|p| p == format!("limitBytes={}", MAX_EXTRACTION_LOG + 1)),
        "{query}"
    );
    assert_eq!(
        answer.unwrap_err(),
        DiscoveryError::TooLong {
            limit: MAX_EXTRACTION_LOG
        }
    );
}

#[tokio::test]
async fn an_extraction_log_at_the_limit_is_read() {
    let mut log = OUTPUT.as_bytes().to_vec();
    log.resize(MAX_EXTRACTION_LOG, b'\n');
    let (answer, _) = discover_with_log(log).await;
    let declared = answer.unwrap();
    assert_eq!(declared.checks.len(), 1);
}

/// A drain deletes the extraction pod: the run starts another (which the
/// scheduler puts on a node that is not cordoned) and reads its answer,
/// instead of an error that would block every update until the next
/// refresh.
#[tokio::test]
async fn an_extraction_pod_deleted_by_a_drain_is_started_again_within_the_run() {
    use crate::cluster::api_mock;
    use http::Method;

    let (client, mut api) = api_mock::client();
    let settings = crate::preflight::jobs::settings::JobSettings::default();
    let image = "example.com/ocp-release@sha256:aa";
    let cache = Cache::default();
    let run = tokio::spawn(async move {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        cache
            .declared(&client, image, &settings, None, deadline)
            .await
    });
    // The first pod: created, then gone (evicted and deleted).
    let (_, mut get) = pod_created(&mut api, "pfx-release-x1").await;
    get.fail(404, "NotFound", "pods \"pfx-release-x1\" not found");
    let mut deleted = api.next().await;
    assert_eq!(deleted.method, Method::DELETE);
    deleted.fail(404, "NotFound", "pods \"pfx-release-x1\" not found");
    // After the backoff, a second pod, which finishes.
    let (mut pod, mut get) = pod_created(&mut api, "pfx-release-x2").await;
    pod["status"] = finished(image);
    get.ok(&pod);
    let mut logs = api.next().await;
    assert_eq!(
        logs.path,
        "/api/v1/namespaces/preflight-gate/pods/pfx-release-x2/log"
    );
    logs.text(OUTPUT.as_bytes().to_vec());
    let mut deleted = api.next().await;
    assert_eq!(deleted.method, Method::DELETE);
    deleted.ok(&pod);
    let declared = run.await.unwrap().expect("read from the second pod");
    assert_eq!(declared.checks.len(), 1);
}

#[test]
fn only_a_pod_cut_short_or_a_silent_api_is_worth_another_extraction() {
    assert!(DiscoveryError::Gone.is_transient());
    assert!(DiscoveryError::Api("connection reset".into()).is_transient());
    assert!(!DiscoveryError::Pod("cannot pull the release image".into()).is_transient());
    assert!(!DiscoveryError::NoImageReferences.is_transient());
}

#[rstest]
#[case::a_tag("example.com/ocp:4.16.3")]
#[case::a_digest_the_release_does_not_list("attacker.example/tool@sha256:50")]
#[case::no_image("")]
fn a_declared_job_runs_only_an_image_of_the_release_by_digest(#[case] image: &str) {
    let output = OUTPUT.replace(
        "        image: example.com/ocp@sha256:50\n",
        &format!("        image: {image:?}\n"),
    );
    assert_ne!(output, OUTPUT);
    let refused = parse_extraction(&output).unwrap_err().to_string();
    assert!(
        refused.starts_with("cannot read 0000_50_cluster-storage-operator_99_preflight.yaml: the image")
            && refused.contains("of declared check StorageCsiMigration is not one of the release's image-references, by digest"),
        "{refused}"
    );
}

/// A ClusterVersion that offers `offered` and targets `stored`.
fn cluster(offered: &str, stored: Option<&str>) -> ClusterVersion {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "version"},
        "spec": {"desiredUpdate": stored.map(|image| serde_json::json!({"image": image}))},
        "status": {"availableUpdates": [{"version": "4.16.3", "image": offered}]}
    }))
    .unwrap()
}

#[rstest]
#[case::offered("mirror.local/ocp@sha256:aa", Ok("the update graph offers it"))]
#[case::stored_target("q/ocp@sha256:bb", Ok("the ClusterVersion's stored target names it"))]
#[case::an_object_alone(
    "q/ocp@sha256:cc",
    Err("neither the ClusterVersion's update graph offers q/ocp@sha256:cc")
)]
fn a_release_is_extracted_only_when_the_cluster_offers_or_targets_it(
    #[case] image: &str,
    #[case] expected: Result<&str, &str>,
) {
    let cv = cluster("q/ocp@sha256:aa", Some("q/ocp@sha256:bb"));
    match (named_by_cluster(Some(&cv), image), expected) {
        (Ok(why), Ok(want)) => assert_eq!(why, want),
        (Err(why), Err(want)) => assert!(why.starts_with(want), "{why}"),
        (got, want) => panic!("{got:?}, expected {want:?}"),
    }
    // Without a ClusterVersion nothing names it.
    assert!(named_by_cluster(None, image).is_err());
}
