//! TLS for the webhook: a certificate resolver that reloads the serving pair
//! from disk without a restart, and keeps the last good pair when a new one
//! is broken; a client certificate verifier that reloads the client CA
//! bundle (`--client-ca`) the same way, so a rotated CA is honoured and the
//! old one refused without a restart; and a warning when the serving key
//! may be read by others than its owner.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use notify::event::{AccessKind, AccessMode, MetadataKind, ModifyKind};
use notify::{EventKind, RecursiveMode, Watcher};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::UnixTime;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig};
use tracing::{debug, info, warn};

use crate::metrics::Metrics;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: PathBuf },
    #[error("{path} holds no usable PEM private key: {message}")]
    Key { path: PathBuf, message: String },
    #[error("the certificate and key do not form a usable pair: {0}")]
    Pair(rustls::Error),
    #[error("the client CA bundle is unusable: {0}")]
    ClientCa(String),
    #[error("{path} expired at {at}: the pair in use is kept")]
    Expired { path: PathBuf, at: String },
    #[error("{path} is not valid before {at}: the pair in use is kept")]
    NotYetValid { path: PathBuf, at: String },
}

/// The serving certificate and key files.
#[derive(Clone, Debug)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A loaded pair, with the bytes it came from to tell when the files change.
struct Loaded {
    key: Arc<CertifiedKey>,
    bytes: (Vec<u8>, Vec<u8>),
    not_after: i64,
    not_before: i64,
}

/// The bytes in use, and those last refused since.
struct Seen<B = (Vec<u8>, Vec<u8>)> {
    current: B,
    refused: Option<B>,
}

/// Serves the current certificate to every handshake; `reload` swaps it.
pub struct ReloadingCert {
    files: CertFiles,
    provider: Arc<CryptoProvider>,
    current: ArcSwap<CertifiedKey>,
    seen: Mutex<Seen>,
    /// Calls of `reload`: what the watch loop did, for `Debug` and tests.
    attempts: AtomicU64,
    metrics: Metrics,
}

impl std::fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingCert")
            .field("files", &self.files)
            .field("reloads_attempted", &self.attempts.load(Ordering::Relaxed))
            .finish()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

fn load(files: &CertFiles, provider: &CryptoProvider) -> Result<Loaded, TlsError> {
    parse(files, read(&files.cert)?, read(&files.key)?, provider)
}

/// The pair in `cert_pem` and `key_pem`, read from `files` (named in errors).
fn parse(
    files: &CertFiles,
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    provider: &CryptoProvider,
) -> Result<Loaded, TlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .filter_map(Result::ok)
        .collect();
    let Some(leaf) = chain.first() else {
        return Err(TlsError::NoCertificate {
            path: files.cert.clone(),
        });
    };
    let (not_before, not_after) = x509_parser::parse_x509_certificate(leaf)
        .map(|(_, c)| {
            let validity = c.validity();
            (
                validity.not_before.timestamp(),
                validity.not_after.timestamp(),
            )
        })
        .map_err(|e| TlsError::Key {
            path: files.cert.clone(),
            message: format!("the certificate does not parse: {e}"),
        })?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| TlsError::Key {
        path: files.key.clone(),
        message: e.to_string(),
    })?;
    let certified = CertifiedKey::from_der(chain, key, provider).map_err(TlsError::Pair)?;
    Ok(Loaded {
        key: Arc::new(certified),
        bytes: (cert_pem, key_pem),
        not_after,
        not_before,
    })
}

impl ReloadingCert {
    /// Loads the pair once; fails when it is unusable.
    pub fn load(
        files: CertFiles,
        provider: Arc<CryptoProvider>,
        metrics: Metrics,
    ) -> Result<Self, TlsError> {
        let loaded = load(&files, &provider)?;
        metrics.tls.certificate_expires_at(loaded.not_after);
        warn_if_others_may_read(&files.key);
        Ok(Self {
            files,
            provider,
            current: ArcSwap::new(loaded.key),
            seen: Mutex::new(Seen {
                current: loaded.bytes,
                refused: None,
            }),
            attempts: AtomicU64::new(0),
            metrics,
        })
    }

    /// Reloads the pair if the files changed. A broken new pair is refused
    /// and the last good one kept. Returns whether the pair was swapped.
    ///
    /// A refused pair is remembered: the same bytes found again are no
    /// change, so a broken or expired pair left in place is refused, warned
    /// about and counted once, not at every wake-up. A different pair is
    /// tried afresh.
    pub fn reload(&self) -> Result<bool, TlsError> {
        self.attempts.fetch_add(1, Ordering::Relaxed);
        let bytes = (read(&self.files.cert)?, read(&self.files.key)?);
        {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            if seen.current == bytes {
                // Back to the pair in use: a refused one coming again later
                // is news again.
                seen.refused = None;
                return Ok(false);
            }
            if seen.refused.as_ref() == Some(&bytes) {
                return Ok(false);
            }
        }
        let (cert, key) = bytes.clone();
        let loaded = parse(&self.files, cert, key, &self.provider).and_then(|loaded| {
            // A pair that matches but has expired is no better than a
            // broken one: every API server would refuse the handshake.
            let now = jiff::Timestamp::now().as_second();
            let at = |second: i64| {
                jiff::Timestamp::from_second(second)
                    .map_or_else(|_| second.to_string(), |t| t.to_string())
            };
            if loaded.not_after <= now {
                return Err(TlsError::Expired {
                    path: self.files.cert.clone(),
                    at: at(loaded.not_after),
                });
            }
            // Nor one not valid yet (a renewal dated ahead, a clock behind):
            // the API server would refuse it until then.
            if loaded.not_before > now {
                return Err(TlsError::NotYetValid {
                    path: self.files.cert.clone(),
                    at: at(loaded.not_before),
                });
            }
            Ok(loaded)
        });
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        match loaded {
            Ok(loaded) => {
                self.current.store(loaded.key);
                *seen = Seen {
                    current: loaded.bytes,
                    refused: None,
                };
                self.metrics.tls.reloaded(loaded.not_after);
                warn_if_others_may_read(&self.files.key);
                Ok(true)
            }
            Err(e) => {
                seen.refused = Some(bytes);
                self.metrics.tls.reload_failed();
                Err(e)
            }
        }
    }

    /// Reloads whenever the certificate's directory changes, and every
    /// `interval` in case a change went unseen ([`watch`]).
    pub async fn watch(self: Arc<Self>, interval: Duration) {
        watch(self, interval).await
    }
}

/// What [`watch`] keeps current: its files, and how to read them again.
trait Reload: Send + Sync + 'static {
    /// What it is, for the log: "serving certificate", "client CA".
    const WHAT: &'static str;
    fn files(&self) -> Vec<&Path>;
    /// Whether what is in use was replaced; an error when a change was
    /// refused (and what is in use kept).
    fn reload(&self) -> Result<bool, TlsError>;
}

impl Reload for ReloadingCert {
    const WHAT: &'static str = "serving certificate";
    fn files(&self) -> Vec<&Path> {
        vec![&self.files.cert, &self.files.key]
    }
    fn reload(&self) -> Result<bool, TlsError> {
        ReloadingCert::reload(self)
    }
}

/// Reloads whenever the files' directories change, and every `interval`
/// in case a change went unseen (e.g. on some volume types). Watching the
/// directory, not the files, catches the `..data` symlink swap of a
/// Kubernetes Secret volume. Events that are only reads (the loop's own
/// among them) wake nothing: see `may_change_files`.
async fn watch<R: Reload>(reloader: Arc<R>, interval: Duration) {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(1);
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // An error (e.g. a queue overflow) may hide a change: look.
        if event.is_ok_and(|e| !may_change_files(&e.kind)) {
            return;
        }
        let _ = tx.try_send(());
    });
    let dirs: std::collections::BTreeSet<PathBuf> = reloader
        .files()
        .iter()
        .filter_map(|p| p.parent().map(Path::to_owned))
        .map(|p| {
            if p.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                p
            }
        })
        .collect();
    match watcher.as_mut() {
        Ok(w) => {
            for dir in &dirs {
                if let Err(e) = w.watch(dir, RecursiveMode::NonRecursive) {
                    warn!(dir = %dir.display(), error = %e, "cannot watch the {} directory; polling only", R::WHAT);
                }
            }
        }
        Err(e) => warn!(error = %e, "cannot watch files; polling only"),
    }
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            Some(()) = rx.recv() => {
                // Let a writer finish every file before reading them.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        match reloader.reload() {
            Ok(true) => {
                let file = reloader.files()[0].display().to_string();
                info!(%file, "{} reloaded", R::WHAT)
            }
            Ok(false) => {}
            Err(e) => {
                warn!(
                    error = crate::model::text::chain(&e),
                    "new {} refused; keeping the last good one",
                    R::WHAT
                )
            }
        }
    }
}

/// Whether a watch event in the certificate's directory may mean the files
/// changed. Reads change nothing, and the reloader's own reads of the files
/// (open, access, close after reading) must not wake it again, or it would
/// reload in a loop. A close after writing is the one access event that
/// says a writer has finished; the reloader only ever opens to read, so it
/// never causes one.
fn may_change_files(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        EventKind::Modify(ModifyKind::Metadata(MetadataKind::AccessTime)) => false,
        EventKind::Any
        | EventKind::Create(_)
        | EventKind::Modify(_)
        | EventKind::Remove(_)
        | EventKind::Other => true,
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// The client CA bundle (`--client-ca`), reloaded when its file changes:
/// a bundle that does not parse, or holds no certificate, is refused and
/// the last good one kept, counted once until the file changes again.
///
/// Its verifier hints no CA names to clients (an empty
/// `certificate_authorities`, which asks a client for whatever certificate
/// it has): the names would be borrowed from a bundle that may be replaced
/// under them, and the API server has one client certificate per webhook.
pub struct ClientCa {
    path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: ArcSwap<Verifier>,
    seen: Mutex<Seen<Vec<u8>>>,
    metrics: Metrics,
}

/// A verifier of one bundle.
struct Verifier(Arc<dyn ClientCertVerifier>);

impl std::fmt::Debug for ClientCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCa")
            .field("path", &self.path)
            .finish()
    }
}

/// A verifier of client certificates against the CAs in `pem`.
fn client_verifier(
    pem: &[u8],
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| TlsError::ClientCa(e.to_string()))?;
        roots
            .add(cert)
            .map_err(|e| TlsError::ClientCa(e.to_string()))?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| TlsError::ClientCa(e.to_string()))
}

impl ClientCa {
    /// Loads the bundle once; fails when it is unusable.
    pub fn load(
        path: PathBuf,
        provider: Arc<CryptoProvider>,
        metrics: Metrics,
    ) -> Result<Arc<Self>, TlsError> {
        let pem = read(&path)?;
        let verifier = client_verifier(&pem, &provider)?;
        Ok(Arc::new(Self {
            path,
            provider,
            current: ArcSwap::from_pointee(Verifier(verifier)),
            seen: Mutex::new(Seen {
                current: pem,
                refused: None,
            }),
            metrics,
        }))
    }

    /// Reloads the bundle if the file changed; whether it was swapped. A
    /// broken one is refused and the last good one kept.
    pub fn reload(&self) -> Result<bool, TlsError> {
        let pem = read(&self.path)?;
        {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            if seen.current == pem {
                seen.refused = None;
                return Ok(false);
            }
            if seen.refused.as_ref() == Some(&pem) {
                return Ok(false);
            }
        }
        let verifier = client_verifier(&pem, &self.provider);
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        match verifier {
            Ok(verifier) => {
                self.current.store(Arc::new(Verifier(verifier)));
                *seen = Seen {
                    current: pem,
                    refused: None,
                };
                self.metrics.tls.client_ca_reloaded();
                Ok(true)
            }
            Err(e) => {
                seen.refused = Some(pem);
                self.metrics.tls.client_ca_reload_failed();
                Err(e)
            }
        }
    }

    /// Reloads whenever the bundle's directory changes, and every
    /// `interval` in case a change went unseen ([`watch`]).
    pub async fn watch(self: Arc<Self>, interval: Duration) {
        watch(self, interval).await
    }
}

impl Reload for ClientCa {
    const WHAT: &'static str = "client CA";
    fn files(&self) -> Vec<&Path> {
        vec![&self.path]
    }
    fn reload(&self) -> Result<bool, TlsError> {
        ClientCa::reload(self)
    }
}

impl ClientCertVerifier for ClientCa {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.current
            .load()
            .0
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current
            .load()
            .0
            .verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current
            .load()
            .0
            .verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.current.load().0.supported_verify_schemes()
    }
}

/// A rustls server configuration: TLS 1.2 and 1.3, HTTP/2 and HTTP/1.1,
/// and client certificates verified against `client_ca` when given.
///
/// With a client CA, no session is resumed: a resumed session skips the
/// client's certificate, so a client the CA in use no longer admits could
/// resume one it began under the old CA. The API server keeps its
/// connections open, so it seldom handshakes at all.
pub fn server_config(
    cert: Arc<ReloadingCert>,
    provider: Arc<CryptoProvider>,
    client_ca: Option<Arc<ClientCa>>,
) -> Result<ServerConfig, TlsError> {
    let builder = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(TlsError::Pair)?;
    let mutual = client_ca.is_some();
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(client_ca) => builder.with_client_cert_verifier(client_ca),
    };
    let mut config = builder.with_cert_resolver(cert);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    if mutual {
        config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        config.send_tls13_tickets = 0;
    }
    Ok(config)
}

/// Warns, once per pair loaded, when the serving key may be read by others
/// than its owner (group or world bits): whoever reads it can be the gate.
///
/// Not in a Kubernetes volume (a `..data` link beside the key): the
/// kubelet writes those with the pod spec's mode (0644 by default, and
/// group-readable under an `fsGroup` whatever it says), and only this pod
/// mounts them.
fn warn_if_others_may_read(key: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let kubelet_volume = key
        .parent()
        .is_some_and(|dir| dir.join("..data").symlink_metadata().is_ok());
    let Ok(mode) = std::fs::metadata(key).map(|m| m.permissions().mode()) else {
        return;
    };
    match others_may_read(mode) {
        Some(bits) if !kubelet_volume => warn!(
            key = %key.display(),
            mode = format!("{:04o}", mode & 0o7777),
            "the serving key may be read by its {bits}: make it readable by its owner alone (chmod 600)"
        ),
        Some(_) => {
            debug!(key = %key.display(), "the serving key is in a Kubernetes volume: its mode is the pod's")
        }
        None => {}
    }
}

/// Who besides the owner may read a file of this mode.
fn others_may_read(mode: u32) -> Option<&'static str> {
    match (mode & 0o040 != 0, mode & 0o004 != 0) {
        (true, true) => Some("group and everyone"),
        (true, false) => Some("group"),
        (false, true) => Some("everyone"),
        (false, false) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed pair for localhost, valid between the two dates.
    fn pair(dir: &Path, not_before: (i32, u8, u8), not_after: (i32, u8, u8)) -> CertFiles {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.not_before = rcgen::date_time_ymd(not_before.0, not_before.1, not_before.2);
        params.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, not_after.2);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let files = CertFiles {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        };
        std::fs::write(&files.cert, cert.pem()).unwrap();
        std::fs::write(&files.key, key.serialize_pem()).unwrap();
        files
    }

    #[test]
    fn a_pair_not_valid_yet_never_replaces_a_good_one() {
        let dir = tempfile::tempdir().unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let files = pair(dir.path(), (2025, 1, 1), (2099, 1, 1));
        let metrics = Metrics::new().unwrap();
        let cert = ReloadingCert::load(files, provider, metrics).unwrap();
        let good = cert.current.load_full();
        pair(dir.path(), (2097, 1, 1), (2099, 1, 1));
        let err = cert.reload().unwrap_err();
        assert!(
            matches!(&err, TlsError::NotYetValid { at, .. } if at.starts_with("2097-01-01")),
            "{err}"
        );
        assert!(Arc::ptr_eq(&good, &cert.current.load_full()), "kept");
    }

    #[test]
    fn an_expired_pair_never_replaces_a_good_one() {
        let dir = tempfile::tempdir().unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let files = pair(dir.path(), (2025, 1, 1), (2099, 1, 1));
        let metrics = Metrics::new().unwrap();
        let cert = ReloadingCert::load(files, provider, metrics.clone()).unwrap();
        let good = cert.current.load_full();

        // The Secret is rotated to a pair that matches but has expired.
        pair(dir.path(), (2020, 1, 1), (2021, 1, 1));
        let err = cert.reload().unwrap_err();
        assert!(
            matches!(&err, TlsError::Expired { at, .. } if at.starts_with("2021-01-01")),
            "{err}"
        );
        assert!(Arc::ptr_eq(&good, &cert.current.load_full()), "kept");
        assert!(
            metrics
                .render()
                .contains(r#"preflight_gate_tls_reloads_total{result="failure"} 1"#),
            "counted"
        );

        // A good new pair is taken.
        pair(dir.path(), (2025, 1, 1), (2098, 1, 1));
        assert!(cert.reload().unwrap());
        assert!(!Arc::ptr_eq(&good, &cert.current.load_full()));
    }

    fn failures(metrics: &Metrics) -> String {
        metrics
            .render()
            .lines()
            .find(|l| l.starts_with(r#"preflight_gate_tls_reloads_total{result="failure"}"#))
            .unwrap_or_default()
            .to_owned()
    }

    #[test]
    fn a_refused_pair_is_counted_once_until_the_files_change() {
        let dir = tempfile::tempdir().unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let files = pair(dir.path(), (2025, 1, 1), (2099, 1, 1));
        let metrics = Metrics::new().unwrap();
        let cert = ReloadingCert::load(files.clone(), provider, metrics.clone()).unwrap();
        let good = cert.current.load_full();
        let counted =
            |n: u32| format!(r#"preflight_gate_tls_reloads_total{{result="failure"}} {n}"#);

        // An expired pair is refused once; found again and again, it is no
        // news: no error, no count.
        pair(dir.path(), (2020, 1, 1), (2021, 1, 1));
        assert!(matches!(cert.reload(), Err(TlsError::Expired { .. })));
        for _ in 0..5 {
            assert!(
                !cert.reload().unwrap(),
                "the same refused pair is no change"
            );
        }
        assert_eq!(failures(&metrics), counted(1));
        assert!(Arc::ptr_eq(&good, &cert.current.load_full()), "kept");

        // A different broken pair (a key that is not PEM) is refused and
        // counted again, once.
        std::fs::write(&files.key, "not a key").unwrap();
        assert!(matches!(cert.reload(), Err(TlsError::Key { .. })));
        assert!(!cert.reload().unwrap());
        assert_eq!(failures(&metrics), counted(2));
        assert!(Arc::ptr_eq(&good, &cert.current.load_full()), "kept");

        // A good pair is still taken.
        pair(dir.path(), (2025, 1, 1), (2098, 1, 1));
        assert!(cert.reload().unwrap());
        assert!(!Arc::ptr_eq(&good, &cert.current.load_full()), "taken");
        assert!(!cert.reload().unwrap());
        assert_eq!(failures(&metrics), counted(2));
    }

    #[test]
    fn a_refused_pair_that_comes_back_after_the_good_one_is_news_again() {
        let dir = tempfile::tempdir().unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let files = pair(dir.path(), (2025, 1, 1), (2099, 1, 1));
        let (good_cert, good_key) = (
            std::fs::read(&files.cert).unwrap(),
            std::fs::read(&files.key).unwrap(),
        );
        let metrics = Metrics::new().unwrap();
        let cert = ReloadingCert::load(files.clone(), provider, metrics.clone()).unwrap();

        std::fs::write(&files.key, "not a key").unwrap();
        assert!(cert.reload().is_err());
        // The pair in use is put back, then the broken one again.
        std::fs::write(&files.key, &good_key).unwrap();
        std::fs::write(&files.cert, &good_cert).unwrap();
        assert!(!cert.reload().unwrap());
        std::fs::write(&files.key, "not a key").unwrap();
        assert!(cert.reload().is_err());
        assert_eq!(
            failures(&metrics),
            r#"preflight_gate_tls_reloads_total{result="failure"} 2"#
        );
    }

    #[test]
    fn only_events_that_may_change_the_files_wake_the_reloader() {
        use notify::event::{CreateKind, DataChange, RemoveKind, RenameMode};
        let reads = [
            EventKind::Access(AccessKind::Any),
            EventKind::Access(AccessKind::Read),
            EventKind::Access(AccessKind::Open(AccessMode::Read)),
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Access(AccessKind::Other),
            EventKind::Modify(ModifyKind::Metadata(MetadataKind::AccessTime)),
        ];
        for kind in reads {
            assert!(!may_change_files(&kind), "{kind:?} is only a read");
        }
        let changes = [
            EventKind::Any,
            EventKind::Other,
            EventKind::Create(CreateKind::File),
            EventKind::Modify(ModifyKind::Any),
            EventKind::Modify(ModifyKind::Data(DataChange::Content)),
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)),
            EventKind::Modify(ModifyKind::Metadata(MetadataKind::Any)),
            EventKind::Modify(ModifyKind::Metadata(MetadataKind::Permissions)),
            EventKind::Remove(RemoveKind::File),
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
        ];
        for kind in changes {
            assert!(may_change_files(&kind), "{kind:?} may be a change");
        }
    }

    #[tokio::test]
    async fn the_watch_does_not_wake_itself_with_its_own_reads() {
        let dir = tempfile::tempdir().unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let files = pair(dir.path(), (2025, 1, 1), (2099, 1, 1));
        let cert = Arc::new(ReloadingCert::load(files, provider, Metrics::new().unwrap()).unwrap());
        let good = cert.current.load_full();
        // Polling is out of the picture: only the first tick and the
        // watcher's events wake the loop.
        let task = tokio::spawn(cert.clone().watch(Duration::from_secs(3600)));

        // Unchanged files: one reload at the first tick. Each reload reads
        // both files; were those reads to wake the loop, it would reload
        // every 100 ms, a dozen times in this while.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let attempts = cert.attempts.load(Ordering::Relaxed);
        assert!(
            (1..=2).contains(&attempts),
            "{attempts} reloads of an unchanged directory"
        );

        // The watcher does see a real change: a new pair is taken without
        // waiting for the poll.
        pair(dir.path(), (2025, 1, 1), (2098, 1, 1));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while Arc::ptr_eq(&good, &cert.current.load_full()) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the new pair was not seen"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // And settles again.
        let settled = cert.attempts.load(Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let more = cert.attempts.load(Ordering::Relaxed) - settled;
        assert!(more <= 2, "{more} more reloads after the change was taken");
        task.abort();
    }

    /// What the gate logs while `f` runs, as text.
    fn logged(f: impl FnOnce()) -> String {
        #[derive(Clone, Default)]
        struct Lines(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Lines {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        String::from_utf8(lines.0.lock().unwrap().clone()).unwrap()
    }

    fn chmod(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_key_others_may_read_is_warned_about_once_per_pair_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let files = pair(dir.path(), (2025, 1, 1), (2099, 1, 1));
        chmod(&files.key, 0o644);
        let mut cert = None;
        let said = logged(|| {
            cert = Some(
                ReloadingCert::load(files.clone(), provider.clone(), Metrics::new().unwrap())
                    .unwrap(),
            )
        });
        let cert = cert.unwrap();
        assert_eq!(said.matches("WARN").count(), 1, "{said}");
        assert!(
            said.contains("the serving key may be read by its group and everyone")
                && said.contains("mode=\"0644\"")
                && said.contains(&files.key.display().to_string()),
            "{said}"
        );
        // The same pair, found again: nothing loaded, nothing said.
        assert_eq!(logged(|| assert!(!cert.reload().unwrap())), "");
        // A new pair whose key its owner alone reads: nothing said.
        pair(dir.path(), (2025, 1, 1), (2098, 1, 1));
        chmod(&files.key, 0o600);
        assert_eq!(logged(|| assert!(cert.reload().unwrap())), "");
        // Another readable by its group: said again, once.
        pair(dir.path(), (2025, 1, 1), (2097, 1, 1));
        chmod(&files.key, 0o640);
        let said = logged(|| assert!(cert.reload().unwrap()));
        assert_eq!(said.matches("WARN").count(), 1, "{said}");
        assert!(said.contains("may be read by its group:"), "{said}");
    }

    #[test]
    fn a_key_in_a_kubernetes_volume_is_not_warned_about() {
        // tls.key -> ..data/tls.key, as the kubelet lays a Secret out, 0644
        // as it writes them by default.
        let volume = tempfile::tempdir().unwrap();
        let version = volume.path().join("..2026_11_30_0001");
        std::fs::create_dir(&version).unwrap();
        pair(&version, (2025, 1, 1), (2099, 1, 1));
        chmod(&version.join("tls.key"), 0o644);
        std::os::unix::fs::symlink("..2026_11_30_0001", volume.path().join("..data")).unwrap();
        for file in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(format!("..data/{file}"), volume.path().join(file)).unwrap();
        }
        let files = CertFiles {
            cert: volume.path().join("tls.crt"),
            key: volume.path().join("tls.key"),
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let said = logged(|| {
            ReloadingCert::load(files, provider, Metrics::new().unwrap()).unwrap();
        });
        assert!(!said.contains("WARN"), "{said}");
    }

    #[test]
    fn who_besides_the_owner_may_read() {
        assert_eq!(others_may_read(0o100600), None);
        assert_eq!(others_may_read(0o400), None);
        assert_eq!(others_may_read(0o640), Some("group"));
        assert_eq!(others_may_read(0o604), Some("everyone"));
        assert_eq!(others_may_read(0o644), Some("group and everyone"));
    }

    /// A CA, and a client certificate it signed, as DER.
    fn client_of_a_new_ca() -> (String, CertificateDer<'static>) {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let mut params = CertificateParams::new(vec!["kube-apiserver".to_owned()]).unwrap();
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params
            .signed_by(&KeyPair::generate().unwrap(), &ca)
            .unwrap();
        (ca.pem(), cert.der().clone())
    }

    #[test]
    fn a_broken_client_ca_never_replaces_a_good_one_and_is_counted_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.crt");
        let (ca_pem, client) = client_of_a_new_ca();
        std::fs::write(&path, &ca_pem).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let metrics = Metrics::new().unwrap();
        let ca = ClientCa::load(path.clone(), provider, metrics.clone()).unwrap();
        let verifies = |ca: &ClientCa| ca.verify_client_cert(&client, &[], UnixTime::now()).is_ok();
        assert!(verifies(&ca));
        let failures = || {
            metrics
                .render()
                .lines()
                .find(|l| {
                    l.starts_with(r#"preflight_gate_client_ca_reloads_total{result="failure"}"#)
                })
                .unwrap()
                .to_owned()
        };
        for broken in ["", "not PEM at all"] {
            std::fs::write(&path, broken).unwrap();
            assert!(
                matches!(ca.reload(), Err(TlsError::ClientCa(_))),
                "{broken:?}"
            );
            assert!(!ca.reload().unwrap(), "the same bundle again is no news");
            assert!(verifies(&ca), "the bundle in use is kept");
        }
        assert!(failures().ends_with(" 2"), "{}", failures());
        // Another CA is taken, and the first one's client refused.
        let (other, _) = client_of_a_new_ca();
        std::fs::write(&path, other).unwrap();
        assert!(ca.reload().unwrap());
        assert!(!verifies(&ca));
    }
}
