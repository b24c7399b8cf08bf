//! Serving keys in every PEM form a cluster hands out (PKCS#8, PKCS#1 RSA,
//! SEC1 EC), each made by openssl and served over a real handshake.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use preflight_gate::metrics::Metrics;
use preflight_gate::server::{CertFiles, ReloadingCert};
use tokio_rustls::{TlsAcceptor, TlsConnector};

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl is installed (tests/run installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A key in `form` and a certificate for localhost signed with it.
fn make_pair(dir: &Path, form: &str) {
    match form {
        "rsa-pkcs1" => openssl(dir, &["genrsa", "-traditional", "-out", "tls.key", "2048"]),
        "rsa-pkcs8" => openssl(
            dir,
            &[
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
                "-out",
                "tls.key",
            ],
        ),
        "ec-sec1" => openssl(
            dir,
            &[
                "ecparam",
                "-name",
                "prime256v1",
                "-genkey",
                "-noout",
                "-out",
                "tls.key",
            ],
        ),
        "ec-pkcs8" => openssl(
            dir,
            &[
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-384",
                "-out",
                "tls.key",
            ],
        ),
        other => panic!("unknown form {other}"),
    }
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-x509",
            "-key",
            "tls.key",
            "-out",
            "tls.crt",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
            "-addext",
            "basicConstraints=critical,CA:FALSE",
        ],
    );
}

#[tokio::test]
async fn serves_rsa_and_ec_keys_in_pkcs1_pkcs8_and_sec1_form() {
    crate::harness::install_crypto();
    for form in ["rsa-pkcs1", "rsa-pkcs8", "ec-sec1", "ec-pkcs8"] {
        let dir = tempfile::tempdir().unwrap();
        make_pair(dir.path(), form);
        let header = std::fs::read_to_string(dir.path().join("tls.key")).unwrap();
        let expected = match form {
            "rsa-pkcs1" => "-----BEGIN RSA PRIVATE KEY-----",
            "ec-sec1" => "-----BEGIN EC PRIVATE KEY-----",
            _ => "-----BEGIN PRIVATE KEY-----",
        };
        assert!(header.starts_with(expected), "{form}: {header:.40}");

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let files = CertFiles {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
        };
        let cert = Arc::new(
            ReloadingCert::load(files, provider.clone(), Metrics::new().unwrap())
                .unwrap_or_else(|e| panic!("{form}: {e}")),
        );
        let config = preflight_gate::server::tls::server_config(cert, provider, None).unwrap();

        // One real handshake over loopback.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            acceptor.accept(tcp).await.map(|_| ())
        });
        let mut roots = rustls::RootCertStore::empty();
        use rustls::pki_types::pem::PemObject;
        roots
            .add(
                rustls::pki_types::CertificateDer::from_pem_file(dir.path().join("tls.crt"))
                    .unwrap(),
            )
            .unwrap();
        let client = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        TlsConnector::from(Arc::new(client))
            .connect(name, tcp)
            .await
            .unwrap_or_else(|e| panic!("{form}: {e}"));
        server
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("{form}: {e}"));
    }
}

#[test]
fn a_key_that_does_not_match_its_certificate_is_refused() {
    crate::harness::install_crypto();
    let dir = tempfile::tempdir().unwrap();
    make_pair(dir.path(), "ec-sec1");
    openssl(
        dir.path(),
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            "other.key",
        ],
    );
    let files = CertFiles {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("other.key"),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let err = ReloadingCert::load(files, provider, Metrics::new().unwrap()).unwrap_err();
    assert!(
        err.to_string().contains("do not form a usable pair"),
        "{err}"
    );
}
