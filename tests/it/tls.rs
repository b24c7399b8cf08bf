//! The gate over real TLS on loopback, with a rustls client.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use preflight_gate::certs;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::{Layout, Options, Running, new_pair, start};
use crate::reviews::Review;

#[tokio::test]
async fn answers_every_shape_of_review_over_tls() {
    let gate = start(Options::default()).await;
    let client = gate.client();
    let cases: Vec<(&str, Vec<u8>, bool, &str)> = vec![
        ("oc adm upgrade merge patch", Review::merge_patch_to("4.15.3").uid("m").body(), false, "preflight for 4.15.3 failed: 2 blocking checks failed"),
        ("console JSON patch", Review::json_patch_to("4.15.3").uid("j").body(), false, "preflight for 4.15.3 failed"),
        ("console JSON patch to a passing target", Review::json_patch_to("4.14.12").uid("p").body(), true, ""),
        ("CREATE", Review::create_to("4.15.3").uid("c").body(), false, "preflight for 4.15.3 failed"),
        ("status-only change", Review::status_only().uid("s").body(), true, ""),
        ("malformed JSON", b"{\"request\": {\"uid\": \"x\"".to_vec(), false, "not valid JSON"),
        ("wrong kind", br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"w","operation":"CREATE","resource":{"group":"","version":"v1","resource":"configmaps"}}}"#.to_vec(), false, "not configmaps"),
        ("missing uid", Review::merge_patch_to("4.15.3").uid("").body(), false, "has no uid"),
    ];
    for (name, body, allowed, says) in cases {
        let uid = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["request"]["uid"].as_str().map(str::to_owned))
            .unwrap_or_default();
        let (status, json) = gate.post(&client, body).await;
        assert_eq!(status, 200, "{name}");
        assert_eq!(json["kind"], "AdmissionReview", "{name}");
        assert_eq!(
            json["response"]["uid"],
            uid.as_str(),
            "{name}: the uid is echoed"
        );
        assert_eq!(json["response"]["allowed"], allowed, "{name}: {json}");
        let message = json["response"]["status"]["message"].as_str().unwrap_or("");
        assert!(message.contains(says), "{name}: {message}");
    }
    // A status write is counted as not gated: it never looked anything up.
    assert_eq!(
        gate.metric(
            "preflight_gate_admission_reviews_total",
            &[r#"reason="not_gated""#]
        ),
        1.0
    );
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_with_413() {
    let gate = start(Options::default()).await;
    let big = vec![b' '; 7 * 1024 * 1024 + 1];
    let response = gate
        .client()
        .post(&gate.url)
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 413);
}

#[tokio::test]
async fn speaks_tls_1_2_and_1_3_only() {
    let gate = start(Options::default()).await;
    for version in [
        reqwest::tls::Version::TLS_1_2,
        reqwest::tls::Version::TLS_1_3,
    ] {
        let client = gate
            .client_builder()
            .min_tls_version(version)
            .max_tls_version(version)
            .build()
            .unwrap();
        let (status, _) = gate
            .post(&client, Review::merge_patch_to("4.14.12").body())
            .await;
        assert_eq!(status, 200, "{version:?}");
    }
    // A TLS 1.0 ClientHello is refused with an alert record (type 21).
    let mut stream = TcpStream::connect(gate.addr).await.unwrap();
    stream.write_all(&TLS10_CLIENT_HELLO).await.unwrap();
    let mut reply = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut reply))
        .await
        .expect("the server answers at once")
        .unwrap();
    assert!(
        n > 0 && reply[0] == 0x15,
        "expected an alert, got {:?}",
        &reply[..n]
    );
}

/// A minimal ClientHello that offers only TLS 1.0.
const TLS10_CLIENT_HELLO: [u8; 50] = [
    0x16, 0x03, 0x01, 0x00, 0x2d, // record: handshake, TLS 1.0, length 45
    0x01, 0x00, 0x00, 0x29, // ClientHello, length 41
    0x03, 0x01, // client version TLS 1.0
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0,    // random
    0x00, // session id length
    0x00, 0x02, 0x00, 0x2f, // one cipher suite: TLS_RSA_WITH_AES_128_CBC_SHA
    0x01, 0x00, // compression: null
];

#[tokio::test]
async fn client_certificates_are_verified_when_a_client_ca_is_given() {
    let ca_dir = tempfile::tempdir().unwrap();
    let (ca_pem, client_pem) = client_identity();
    std::fs::write(ca_dir.path().join("client-ca.crt"), &ca_pem).unwrap();
    let gate = start(Options {
        client_ca: Some(ca_dir.path().join("client-ca.crt")),
        ..Options::default()
    })
    .await;
    let anonymous = gate.client();
    let refused = anonymous
        .post(&gate.url)
        .header("content-type", "application/json")
        .body(Review::merge_patch_to("4.14.12").body())
        .send()
        .await;
    assert!(
        refused.is_err(),
        "a client without a certificate is refused"
    );
    let identified = gate
        .client_builder()
        .identity(reqwest::Identity::from_pem(client_pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let (status, json) = gate
        .post(&identified, Review::merge_patch_to("4.14.12").body())
        .await;
    assert_eq!(status, 200);
    assert_eq!(json["response"]["allowed"], true);
}

/// The client CA rotates (cert-manager renews it, the kubelet swaps the
/// Secret volume's files): a client of the new CA is answered without a
/// restart, and one of the old CA is refused from then on, also when its
/// TLS client would resume a session it began under the old CA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_client_ca_is_honoured_without_restart_and_the_old_one_refused() {
    let ca_dir = tempfile::tempdir().unwrap();
    let ca_file = ca_dir.path().join("client-ca.crt");
    let (old_ca, old_client) = client_identity();
    let (new_ca, new_client) = client_identity();
    std::fs::write(&ca_file, &old_ca).unwrap();
    let gate = start(Options {
        client_ca: Some(ca_file.clone()),
        ..Options::default()
    })
    .await;
    // Each client keeps its TLS sessions, but opens a connection a review.
    let client = |identity: &str| {
        gate.client_builder()
            .identity(reqwest::Identity::from_pem(identity.as_bytes()).unwrap())
            .pool_max_idle_per_host(0)
            .build()
            .unwrap()
    };
    let answered = |client: reqwest::Client| {
        let request = client
            .post(&gate.url)
            .header("content-type", "application/json")
            .body(Review::merge_patch_to("4.14.12").body());
        async move { request.send().await.is_ok_and(|r| r.status() == 200) }
    };
    let old = client(&old_client);
    assert!(answered(old.clone()).await, "the old CA's client, before");
    assert!(!answered(client(&new_client)).await, "not yet the new");

    // Rotated as a writer replaces a file: a new file renamed over it.
    let staged = ca_dir.path().join("client-ca.crt.new");
    std::fs::write(&staged, &new_ca).unwrap();
    std::fs::rename(&staged, &ca_file).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !answered(client(&new_client)).await {
        assert!(
            Instant::now() < deadline,
            "the new CA's client was never answered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !answered(old).await,
        "the old CA's client, its sessions kept"
    );
    assert!(!answered(client(&old_client)).await, "the old CA's client");
    assert_eq!(
        gate.metric(
            "preflight_gate_client_ca_reloads_total",
            &[r#"result="success""#]
        ),
        1.0
    );

    // A broken bundle is refused and the one in use kept.
    std::fs::write(&ca_file, "not a certificate").unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while gate.metric(
        "preflight_gate_client_ca_reloads_total",
        &[r#"result="failure""#],
    ) < 1.0
    {
        assert!(
            Instant::now() < deadline,
            "the broken bundle was never seen"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(answered(client(&new_client)).await, "the new CA is kept");
}

/// A CA and a client certificate with its key, the way an API server's
/// webhook client identity is made.
fn client_identity() -> (String, String) {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, ExtendedKeyUsagePurpose, IsCa,
        KeyPair,
    };
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let mut params = CertificateParams::new(vec!["kube-apiserver".to_owned()]).unwrap();
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    (ca.pem(), format!("{}{}", cert.pem(), key.serialize_pem()))
}

#[tokio::test]
async fn slow_clients_are_cut_off() {
    let gate = start(Options {
        handshake_timeout: Duration::from_millis(500),
        header_read_timeout: Duration::from_millis(500),
        ..Options::default()
    })
    .await;
    // No handshake at all: the server closes the connection.
    let mut silent = TcpStream::connect(gate.addr).await.unwrap();
    let started = Instant::now();
    let n = tokio::time::timeout(Duration::from_secs(5), silent.read(&mut [0u8; 64]))
        .await
        .expect("the server hangs up on a silent client")
        .unwrap_or(0);
    assert_eq!(n, 0, "closed without a word");
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "not before the timeout"
    );

    // A handshake, then headers that never finish.
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config(&gate)));
    let tcp = TcpStream::connect(gate.addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    tls.write_all(b"POST /validate/clusterversion HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the server hangs up on a slow client");
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "not before the timeout"
    );
    // And the gate still serves others.
    let (status, _) = gate
        .post(&gate.client(), Review::merge_patch_to("4.14.12").body())
        .await;
    assert_eq!(status, 200);
}

pub(crate) fn client_config(gate: &Running) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for pem in &gate.ca_pems {
        use rustls::pki_types::pem::PemObject;
        roots
            .add(rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap())
            .unwrap();
    }
    rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// The certificate a fresh connection is served, as DER.
async fn served_cert(gate: &Running) -> Vec<u8> {
    let client = gate
        .client_builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let response = client
        .post(&gate.url)
        .header("content-type", "application/json")
        .body(Review::merge_patch_to("4.14.12").body())
        .send()
        .await
        .unwrap();
    let info = response
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .unwrap();
    info.peer_certificate().unwrap().to_vec()
}

async fn wait_for_new_cert(gate: &Running, old: &[u8]) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let now = served_cert(gate).await;
        if now != old {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "the new certificate was never served"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Keeps `workers` clients posting until stopped; counts successes and failures.
fn load(
    gate: &Running,
    workers: usize,
) -> (
    Arc<std::sync::atomic::AtomicBool>,
    Vec<tokio::task::JoinHandle<(usize, usize)>>,
) {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for i in 0..workers {
        // Half the workers keep connections alive, half handshake every time.
        let builder = gate.client_builder();
        let client = if i % 2 == 0 {
            builder.build()
        } else {
            builder.pool_max_idle_per_host(0).build()
        }
        .unwrap();
        let url = gate.url.clone();
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut failed) = (0, 0);
            let body = Review::merge_patch_to("4.15.3").body();
            while !stop.load(Ordering::Relaxed) && ok + failed < 20_000 {
                let sent = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send()
                    .await;
                match sent {
                    Ok(r) if r.status() == 200 => ok += 1,
                    _ => failed += 1,
                }
            }
            (ok, failed)
        }));
    }
    (stop, tasks)
}

async fn finish(
    stop: Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<(usize, usize)>>,
) -> (usize, usize) {
    stop.store(true, Ordering::Relaxed);
    let mut totals = (0, 0);
    for t in tasks {
        let (ok, failed) = t.await.unwrap();
        totals.0 += ok;
        totals.1 += failed;
    }
    totals
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_rewritten_in_place_is_picked_up_under_load() {
    let mut gate = start(Options::default()).await;
    let before = served_cert(&gate).await;
    // The next pair is made first, so the clients under load trust both CAs.
    let staging = gate.dir.path().join("staging");
    let ca = new_pair(&staging);
    gate.ca_pems.push(ca);
    let (stop, tasks) = load(&gate, 4);
    tokio::time::sleep(Duration::from_millis(300)).await;

    // A broken pair is refused and the last good one kept.
    let good_cert = std::fs::read(gate.serving.join(certs::TLS_CERT)).unwrap();
    std::fs::write(
        gate.serving.join(certs::TLS_CERT),
        b"-----BEGIN CERTIFICATE-----\ngarbage\n",
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while gate.metric("preflight_gate_tls_reloads_total", &[r#"result="failure""#]) < 1.0 {
        assert!(
            Instant::now() < deadline,
            "the broken pair was never noticed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        served_cert(&gate).await,
        before,
        "still serving the last good pair"
    );
    std::fs::write(gate.serving.join(certs::TLS_CERT), good_cert).unwrap();

    // The new pair written over the old files, key first, then certificate:
    // in between the files do not match, and that state is refused too.
    for f in [certs::TLS_KEY, certs::TLS_CERT] {
        std::fs::write(
            gate.serving.join(f),
            std::fs::read(staging.join(f)).unwrap(),
        )
        .unwrap();
    }
    let after = wait_for_new_cert(&gate, &before).await;
    assert_ne!(after, before);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (ok, failed) = finish(stop, tasks).await;
    assert!(ok > 0);
    assert_eq!(failed, 0, "no request failed across the rotation ({ok} ok)");
    assert!(gate.metric("preflight_gate_tls_reloads_total", &[r#"result="success""#]) >= 1.0);
    gate.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_volume_data_swap_is_picked_up_under_load() {
    let mut gate = start(Options {
        layout: Layout::SecretVolume,
        ..Options::default()
    })
    .await;
    let before = served_cert(&gate).await;
    // The kubelet writes the new pair into a fresh timestamped directory...
    let volume = gate.serving.clone();
    let version = "..2026_11_30_0001";
    let ca = new_pair(&volume.join(version));
    gate.ca_pems.push(ca);
    let (stop, tasks) = load(&gate, 4);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // ...then renames a new ..data link over the old one, atomically.
    let tmp = volume.join("..data_tmp");
    std::os::unix::fs::symlink(version, &tmp).unwrap();
    std::fs::rename(&tmp, volume.join("..data")).unwrap();
    let after = wait_for_new_cert(&gate, &before).await;
    assert_ne!(after, before);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (ok, failed) = finish(stop, tasks).await;
    assert!(ok > 0);
    assert_eq!(failed, 0, "no request failed across the swap ({ok} ok)");
    gate.stop().await.unwrap();
}

#[tokio::test]
async fn the_admin_port_can_serve_https_with_the_same_certificate() {
    let gate = start(Options {
        admin_tls: true,
        ..Options::default()
    })
    .await;
    let https = gate
        .admin
        .replacen("http://127.0.0.1", "https://localhost", 1);
    let client = gate.client();
    let metrics = client.get(format!("{https}/metrics")).send().await.unwrap();
    assert_eq!(metrics.status().as_u16(), 200);
    assert!(
        metrics
            .text()
            .await
            .unwrap()
            .contains("preflight_gate_admission_in_flight")
    );
    let ready = client.get(format!("{https}/readyz")).send().await.unwrap();
    assert_eq!(ready.status().as_u16(), 200);
    // Plain HTTP is no longer answered there.
    let plain = reqwest::get(format!("{}/metrics", gate.admin)).await;
    assert!(plain.is_err() || plain.unwrap().status().as_u16() != 200);
}

/// A TLS connection to the gate that has sent the headers of a review, and
/// then drips its body: the API server's timeout is `timeout`.
async fn dripping(gate: &Running, timeout: &str) -> tokio_rustls::client::TlsStream<TcpStream> {
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config(gate)));
    let tcp = TcpStream::connect(gate.addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    let head = format!(
        "POST /validate/clusterversion?timeout={timeout} HTTP/1.1\r\nHost: localhost\r\n\
         Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{"
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.flush().await.unwrap();
    tls
}

#[tokio::test]
async fn bodies_that_never_finish_hold_no_permit_and_get_408_at_the_deadline() {
    // Two decisions at a time, and more slow clients than that.
    let gate = start(Options {
        max_concurrency: 2,
        ..Options::default()
    })
    .await;
    let mut slow = Vec::new();
    for _ in 0..8 {
        slow.push(dripping(&gate, "2s").await);
    }
    // A real review is answered, with its verdict, while they drip.
    let answered = tokio::time::timeout(
        Duration::from_secs(10),
        gate.post(&gate.client(), Review::merge_patch_to("4.15.3").body()),
    )
    .await
    .expect("the review is answered while slow clients hold connections");
    assert_eq!(answered.0, 200);
    assert_eq!(answered.1["response"]["allowed"], false, "{}", answered.1);

    // Each slow client is told at its deadline that its body never came.
    for mut tls in slow {
        let mut reply = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut reply)).await;
        let reply = String::from_utf8_lossy(&reply);
        assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
        assert!(
            reply.contains("the review's body did not arrive within the API server's timeout"),
            "{reply}"
        );
    }
}
