//! Signatures made by GnuPG (tests/data/release-signatures, whose README
//! says how), verified as the CVO verifies them.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;
use rstest::rstest;

use super::*;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/release-signatures");

fn c() -> String {
    format!("sha256:{}", "c".repeat(64))
}

fn file(name: &str) -> Vec<u8> {
    std::fs::read(format!("{DATA}/{name}")).unwrap()
}

fn text(name: &str) -> String {
    String::from_utf8(file(name)).unwrap()
}

fn signature(name: &str) -> Signature {
    Signature {
        from: name.to_owned(),
        bytes: file(name),
    }
}

fn keyring(names: &[&str]) -> Keyring {
    let mut keys = Keyring::default();
    for name in names {
        keys.add(name, &text(name)).unwrap();
    }
    keys
}

fn signed_c() -> String {
    format!("sha256-{}-1", "c".repeat(64))
}

#[test]
fn a_release_signed_by_the_trusted_key_verifies() {
    let got = verify(
        &keyring(&["test-key.pub.asc"]),
        &c(),
        &[signature(&signed_c())],
    );
    assert_eq!(
        got.unwrap(),
        format!(
            "its signature verifies against test-key.pub.asc ({})",
            signed_c()
        )
    );
}

#[rstest]
#[case::another_key("untrusted-sha256-", "not signed by this key")]
#[case::another_digest("claims-sha256-", "it signs sha256:dddd")]
#[case::another_type(
    "wrong-type-sha256-",
    "type is \"something else\", not \"atomic container signature\""
)]
fn a_signature_that_is_not_the_releases_is_refused(#[case] prefix: &str, #[case] why: &str) {
    let name = if prefix == "claims-sha256-" {
        format!("{prefix}{}", "d".repeat(64))
    } else {
        format!("{prefix}{}", "c".repeat(64))
    };
    let got = verify(&keyring(&["test-key.pub.asc"]), &c(), &[signature(&name)])
        .unwrap_err()
        .to_string();
    assert!(
        got.starts_with(&format!(
            "no signature of {} verifies against test-key.pub.asc",
            c()
        )),
        "{got}"
    );
    assert!(got.contains(why), "{got}");
}

#[test]
fn every_trusted_key_must_have_signed() {
    // As the CVO: two keys configured, a signature by one of them only.
    let keys = keyring(&["test-key.pub.asc", "untrusted-key.pub.asc"]);
    let got = verify(&keys, &c(), &[signature(&signed_c())])
        .unwrap_err()
        .to_string();
    assert!(
        got.contains("verifies against untrusted-key.pub.asc"),
        "{got}"
    );
    // With the other key's signature too, it verifies.
    let both = [
        signature(&signed_c()),
        signature(&format!("untrusted-sha256-{}", "c".repeat(64))),
    ];
    assert!(verify(&keys, &c(), &both).is_ok());
}

#[rstest]
#[case::garbage(b"not a signature at all".to_vec(), "not an OpenPGP message")]
#[case::empty(Vec::new(), "not an OpenPGP message")]
#[case::too_large(vec![0xa3; MAX_SIGNATURE_BYTES + 1], "more than a release signature")]
fn garbage_is_refused_with_its_reason(#[case] bytes: Vec<u8>, #[case] why: &str) {
    let got = verify(
        &keyring(&["test-key.pub.asc"]),
        &c(),
        &[Signature {
            from: "store".into(),
            bytes,
        }],
    )
    .unwrap_err()
    .to_string();
    assert!(got.contains(why), "{got}");
}

#[test]
fn no_key_or_no_signature_is_said() {
    let none = verify(&Keyring::default(), &c(), &[signature(&signed_c())])
        .unwrap_err()
        .to_string();
    assert!(none.contains("trusts no release key"), "{none}");
    let unsigned = verify(&keyring(&["test-key.pub.asc"]), &c(), &[])
        .unwrap_err()
        .to_string();
    assert_eq!(unsigned, format!("no signature of {} was found", c()));
}

#[test]
fn a_key_that_is_not_one_is_a_problem_not_a_panic() {
    let mut keys = Keyring::default();
    let got = keys.add(
        "bad",
        "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nAAAA\n-----END PGP PUBLIC KEY BLOCK-----\n",
    );
    assert!(
        got.unwrap_err()
            .to_string()
            .starts_with("bad is not an armored OpenPGP public key")
    );
    assert!(keys.is_empty());
}

fn config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NAMESPACE.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn the_cvo_config_map_gives_keys_and_stores_and_signature_stores_replace_the_stores() {
    let mut cvo = config_map("release-verification");
    cvo.metadata.annotations = Some(BTreeMap::from([(CONFIG_ANNOTATION.into(), String::new())]));
    cvo.data = Some(BTreeMap::from([
        ("verifier-public-key-test".into(), text("test-key.pub.asc")),
        ("verifier-public-key-broken".into(), "not a key".into()),
        (
            "store-official".into(),
            "https://signatures.example/release\n".into(),
        ),
        ("unrelated".into(), "x".into()),
    ]));
    // Not annotated: not read, whatever it holds.
    let mut other = config_map("dashboards");
    other.data = Some(BTreeMap::from([(
        "verifier-public-key-other".into(),
        text("untrusted-key.pub.asc"),
    )]));
    let config = Config::from_cluster(&[cvo.clone(), other], &[]);
    assert_eq!(
        config.keys.names(),
        ["release-verification/verifier-public-key-test"]
    );
    assert_eq!(config.stores, ["https://signatures.example/release"]);
    assert_eq!(config.problems.len(), 1, "{:?}", config.problems);
    assert!(
        config.problems[0]
            .to_string()
            .starts_with("release-verification/verifier-public-key-broken")
    );

    let replaced = Config::from_cluster(&[cvo], &["https://mirror.example/sigs".into()]);
    assert_eq!(replaced.stores, ["https://mirror.example/sigs"]);
}

#[test]
fn signature_config_maps_give_the_digests_signatures_in_order() {
    let mut cm = config_map("mirrored-release-signatures");
    cm.metadata.labels = Some(BTreeMap::from([(SIGNATURES_LABEL.into(), String::new())]));
    let hex = "c".repeat(64);
    cm.binary_data = Some(BTreeMap::from([
        (format!("sha256-{hex}-2"), ByteString(b"second".to_vec())),
        (format!("sha256-{hex}-1"), ByteString(file(&signed_c()))),
        (
            format!("sha256-{}-1", "d".repeat(64)),
            ByteString(b"other release".to_vec()),
        ),
        (
            format!("sha256-{hex}-x"),
            ByteString(b"not numbered".to_vec()),
        ),
    ]));
    let mut unlabelled = cm.clone();
    unlabelled.metadata.labels = None;
    let found = from_config_maps(&[cm, unlabelled], &c());
    let from: Vec<&str> = found.iter().map(|s| s.from.as_str()).collect();
    assert_eq!(
        from,
        [
            format!("ConfigMap {NAMESPACE}/mirrored-release-signatures sha256-{hex}-1"),
            format!("ConfigMap {NAMESPACE}/mirrored-release-signatures sha256-{hex}-2"),
        ]
    );
    // The second is garbage; the first verifies, which is enough.
    assert!(verify(&keyring(&["test-key.pub.asc"]), &c(), &found).is_ok());
}

#[test]
fn refusals_read_as_they_always_have() {
    assert_eq!(
        SignatureError::NoKeys.to_string(),
        "the cluster trusts no release key (no verifier-public-key-* entry in a ConfigMap of openshift-config-managed annotated release.openshift.io/verification-config-map)"
    );
    let unverified = SignatureError::Unverified {
        digest: "sha256:cc".into(),
        missing: vec!["a".into(), "b".into()],
        refused: vec![
            ("one".into(), SignatureError::OtherKey),
            ("two".into(), SignatureError::NoDigest),
        ],
    };
    assert_eq!(
        unverified.to_string(),
        "no signature of sha256:cc verifies against a, b (one: not signed by this key; two: the signed claim names no digest)"
    );
    let with_problems = SignatureError::WithProblems {
        why: Box::new(SignatureError::NoSignatures {
            digest: "sha256:cc".into(),
        }),
        problems: vec![SignatureError::NotHttp {
            store: "ftp://x".into(),
        }],
    };
    assert_eq!(
        with_problems.to_string(),
        "no signature of sha256:cc was found; store ftp://x is not an http(s) URL"
    );
    assert_eq!(
        SignatureError::OtherType {
            found: serde_json::json!("x")
        }
        .to_string(),
        r#"the signed claim's type is "x", not "atomic container signature""#
    );
}
