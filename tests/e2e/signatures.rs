//! Release signatures on the real API server: a release runs as pods only
//! when `--trusted-releases` lists it or its signature verifies against
//! the keys of the CVO's verification ConfigMap, found in a signature
//! ConfigMap or a store, as the CVO finds them. An update graph that
//! offers a release vouches for nothing (issue: whoever may set
//! `spec.upstream` chooses the graph). The signatures are GnuPG's
//! (tests/data/release-signatures).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine;
use serde_json::{Value, json};

use crate::cluster::{User, World, lock};

const SIGNED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/release-signatures");
const NAMESPACE: &str = "openshift-config-managed";

fn hex(n: char) -> String {
    n.to_string().repeat(64)
}

fn image(n: char) -> String {
    format!("attacker.example/ocp-release@sha256:{}", hex(n))
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{SIGNED}/{name}")).unwrap()
}

/// The cluster's release keys and stores, as the CVO's manifest makes
/// them: a ConfigMap of openshift-config-managed annotated
/// release.openshift.io/verification-config-map. Deleted when dropped, with
/// every signature ConfigMap the test made.
pub(crate) struct Trust<'a> {
    world: &'a World,
}

impl<'a> Trust<'a> {
    pub(crate) fn test_key(world: &'a World, stores: &[String]) -> Trust<'a> {
        let _ = world.kubectl(User::Admin, &["create", "namespace", NAMESPACE]);
        let mut data = json!({
            "verifier-public-key-test": String::from_utf8(fixture("test-key.pub.asc")).unwrap(),
        });
        for (i, store) in stores.iter().enumerate() {
            data[format!("store-test-{i}")] = json!(store);
        }
        world.apply_json(&json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "e2e-release-verification", "namespace": NAMESPACE,
                         "annotations": {"release.openshift.io/verification-config-map": ""}},
            "data": data}));
        Trust { world }
    }

    /// A signature ConfigMap, as `oc adm release mirror` writes one.
    pub(crate) fn signature_config_map(&self, name: &str, n: char, file: &str) {
        let bytes = base64::engine::general_purpose::STANDARD.encode(fixture(file));
        self.world.apply_json(&json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NAMESPACE,
                         "labels": {"release.openshift.io/verification-signatures": "",
                                    "app.kubernetes.io/part-of": "e2e-signatures"}},
            "binaryData": {format!("sha256-{}-1", hex(n)): bytes}}));
    }
}

impl Drop for Trust<'_> {
    fn drop(&mut self) {
        let _ = self.world.kubectl(
            User::Admin,
            &[
                "delete",
                "configmap",
                "-n",
                NAMESPACE,
                "e2e-release-verification",
                "--ignore-not-found",
            ],
        );
        let _ = self.world.kubectl(
            User::Admin,
            &[
                "delete",
                "configmap",
                "-n",
                NAMESPACE,
                "-l",
                "app.kubernetes.io/part-of=e2e-signatures",
            ],
        );
    }
}

/// A signature store on loopback, as the CVO reads one:
/// `<store>/sha256=<hex>/signature-<n>`. Serves the files it is given
/// and 404 for anything else; counts the requests.
struct Store {
    url: String,
    requests: Arc<AtomicUsize>,
}

impl Store {
    fn serve(files: Vec<(String, Vec<u8>)>) -> Store {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/signatures", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                counted.fetch_add(1, Ordering::SeqCst);
                let mut line = String::new();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let _ = reader.read_line(&mut line);
                // The rest of the head, up to the blank line.
                let mut header = String::new();
                while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                    header.clear();
                }
                let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
                let body = files
                    .iter()
                    .find(|(p, _)| format!("/signatures/{p}") == path)
                    .map(|(_, b)| b.clone());
                let head = match &body {
                    Some(b) => format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        b.len()
                    ),
                    None => {
                        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            .to_owned()
                    }
                };
                let _ = stream.write_all(head.as_bytes());
                if let Some(b) = body {
                    let _ = stream.write_all(&b);
                }
            }
        });
        Store { url, requests }
    }
}

/// `jobs::trusted` as the controller calls it, with the default settings
/// (nothing listed), against the real API server.
fn trusted(world: &World, image: &str) -> Result<String, String> {
    let kubeconfig = std::path::PathBuf::from(world.var("ADMIN_KUBECONFIG"));
    let image = image.to_owned();
    std::thread::spawn(move || {
        tokio::runtime::Runtime::new().unwrap().block_on(async {
            let client = preflight_gate::cluster::client(Some(&kubeconfig))
                .await
                .unwrap();
            let settings = preflight_gate::preflight::jobs::JobSettings::default();
            preflight_gate::preflight::jobs::trusted(&client, &image, &settings).await
        })
    })
    .join()
    .unwrap()
}

/// The update graph's answer, as the ClusterVersion's status holds it.
pub(crate) fn set_available_updates(world: &World, updates: &Value) {
    world.patch_cluster_version_status(&json!({ "availableUpdates": updates }));
}

fn set_offered(world: &World, images: &[String]) {
    let updates: Vec<Value> = images
        .iter()
        .enumerate()
        .map(|(i, image)| json!({"version": format!("4.14.{}", 90 + i), "image": image}))
        .collect();
    set_available_updates(world, &json!(updates));
}

#[test]
fn a_release_the_graph_offers_runs_no_pod_until_its_signature_verifies() {
    let (_turn, world) = lock();
    let before = world.cluster_version()["status"]["availableUpdates"].clone();
    // The attacker's graph offers the release: the ClusterVersion says so.
    set_offered(world, &[image('c')]);

    // No key configured: nothing can verify, and the graph does not count.
    let refused = trusted(world, &image('c')).unwrap_err();
    assert!(
        refused.starts_with(&format!(
            "--trusted-releases does not list {}, and the cluster trusts no release key",
            image('c')
        )),
        "{refused}"
    );

    // The cluster's key, and a signature by another key only: refused,
    // saying whose signature it found.
    let trust = Trust::test_key(world, &[]);
    trust.signature_config_map(
        "e2e-untrusted-signature",
        'c',
        &format!("untrusted-sha256-{}", hex('c')),
    );
    let refused = trusted(world, &image('c')).unwrap_err();
    assert!(
        refused.contains("verifies against e2e-release-verification/verifier-public-key-test"),
        "{refused}"
    );
    assert!(refused.contains("not signed by this key"), "{refused}");

    // A signature the test key made claiming another release: refused.
    trust.signature_config_map(
        "e2e-other-claim",
        'c',
        &format!("claims-sha256-{}", hex('d')),
    );
    let refused = trusted(world, &image('c')).unwrap_err();
    assert!(
        refused.contains(&format!("it signs sha256:{}", hex('d'))),
        "{refused}"
    );

    // The release's own signature, mirrored into a ConfigMap: it verifies.
    trust.signature_config_map(
        "e2e-mirrored-signature",
        'c',
        &format!("sha256-{}-1", hex('c')),
    );
    let ok = trusted(world, &image('c')).unwrap();
    assert!(
        ok.starts_with(
            "its signature verifies against e2e-release-verification/verifier-public-key-test"
        ),
        "{ok}"
    );
    assert!(
        ok.contains("ConfigMap openshift-config-managed/e2e-mirrored-signature"),
        "{ok}"
    );

    // A tag never runs, signed or not.
    let tag = trusted(world, "attacker.example/ocp-release:4.14.90").unwrap_err();
    assert!(tag.contains("is not named by a digest"), "{tag}");

    drop(trust);
    set_available_updates(world, &before);
}

#[test]
fn signatures_are_read_from_the_configured_store_until_one_verifies() {
    let (_turn, world) = lock();
    let store = Store::serve(vec![(
        format!("sha256={}/signature-1", hex('e')),
        fixture(&format!("sha256-{}-1", hex('e'))),
    )]);
    // A store that answers nothing first: the next one is read.
    let dead = TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("http://{}/nothing", dead.local_addr().unwrap());
    drop(dead);
    let _trust = Trust::test_key(world, &[dead_url.clone(), store.url.clone()]);

    let ok = trusted(world, &image('e')).unwrap();
    assert!(
        ok.contains(&format!("{}/sha256={}/signature-1", store.url, hex('e'))),
        "{ok}"
    );
    // signature-1, then signature-2's 404 ends the search.
    assert_eq!(store.requests.load(Ordering::SeqCst), 2);

    // A release the store has no signature of: refused, the dead store said.
    let refused = trusted(world, &image('f')).unwrap_err();
    assert!(
        refused.contains(&format!("no signature of sha256:{} was found", hex('f'))),
        "{refused}"
    );
    assert!(refused.contains(&format!("store {dead_url}")), "{refused}");
}

/// The graph decides what the cluster is offered: pointing `spec.upstream`
/// elsewhere is gated like a target change the checks refuse, through the
/// real API server and the webhook's own match condition (which sends the
/// gate such writes and nothing else of the spec), and recorded when
/// allowed.
#[test]
fn changing_the_update_graph_needs_the_override_verb() {
    let (_turn, world) = lock();
    let patch = |user: User, upstream: Value| {
        world.kubectl(
            user,
            &[
                "patch",
                "clusterversion",
                "version",
                "--type=merge",
                "-p",
                &json!({"spec": {"upstream": upstream}}).to_string(),
            ],
        )
    };
    let channel_before = world.cluster_version()["spec"]["channel"].clone();
    let graph = "https://graph.attacker.example/api/upgrades_info";
    // alice may patch the ClusterVersion, not override: refused, saying so.
    let refused = patch(User::Alice, json!(graph));
    assert!(!refused.ok, "{}", refused.stdout);
    assert!(
        refused
            .stderr
            .contains("alice may not change spec.upstream"),
        "{}",
        refused.stderr
    );
    assert!(world.cluster_version()["spec"].get("upstream").is_none());
    // A channel change is none of the gate's business: it never sees it.
    let channel = world.kubectl(
        User::Alice,
        &[
            "patch",
            "clusterversion",
            "version",
            "--type=merge",
            "-p",
            r#"{"spec":{"channel":"fast-4.15"}}"#,
        ],
    );
    assert!(channel.ok, "{}", channel.stderr);
    // bob holds the override verb: allowed, and an Event says who.
    let allowed = patch(User::Bob, json!(graph));
    assert!(allowed.ok, "{}", allowed.stderr);
    world.wait_for_event("PreflightTrustChanged", "bob changed spec.upstream");
    // Back to OpenShift's graph, by an administrator: a change too.
    let back = patch(User::Admin, Value::Null);
    assert!(back.ok, "{}", back.stderr);
    world.admin(&[
        "patch",
        "clusterversion",
        "version",
        "--type=merge",
        "-p",
        &json!({"spec": {"channel": channel_before}}).to_string(),
    ]);
}
