//! A gate served in-process on loopback over real TLS, with the fakes that
//! stand in for the parts no test here can run (the cluster's access review
//! and the controller's results).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use preflight_gate::admission::ports::{BoxFuture, Lookup, OverrideAuthorizer, ResultLookup, Verb};
use preflight_gate::admission::{Authorization, Policy, UserInfo};
use preflight_gate::certs;
use preflight_gate::cluster::api_server::ApiServerAddresses;
use preflight_gate::cluster::witness::Witness;
use preflight_gate::metrics::Metrics;
use preflight_gate::model::release::ReleaseKey;
use preflight_gate::preflight::DirectorySource;
use preflight_gate::server::{
    self, CertFiles, ClientCa, Gate, Health, Listen, MinBodyRate, ReloadingCert,
};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The embedded sample results, served as a cluster's gate serves the
/// results its controller writes: every target is one it checks by itself,
/// unless [`SampleSource::checking_nothing_itself`].
pub struct SampleSource {
    inner: DirectorySource,
    checks_itself: bool,
}

impl SampleSource {
    pub fn new() -> Self {
        Self {
            inner: DirectorySource::embedded(),
            checks_itself: true,
        }
    }

    /// As a gate whose own watch of the ClusterVersion offers none of the
    /// targets reviews name.
    pub fn checking_nothing_itself() -> Self {
        Self {
            checks_itself: false,
            ..Self::new()
        }
    }
}

impl ResultLookup for SampleSource {
    fn lookup(&self, key: &ReleaseKey) -> Lookup {
        self.inner.lookup(key)
    }
    fn is_ready(&self) -> bool {
        true
    }
    fn runs_checks(&self) -> bool {
        true
    }
    fn checks_itself(&self, _key: &ReleaseKey) -> bool {
        self.checks_itself
    }
}

/// Answers access reviews with a fixed answer after a delay.
pub struct FixedAuthorizer {
    pub answer: Authorization,
    pub delay: Duration,
    pub asked: Mutex<Vec<String>>,
}

impl FixedAuthorizer {
    pub fn new(answer: Authorization) -> Arc<Self> {
        Arc::new(Self {
            answer,
            delay: Duration::ZERO,
            asked: Mutex::new(Vec::new()),
        })
    }
    pub fn slow(answer: Authorization, delay: Duration) -> Arc<Self> {
        Arc::new(Self {
            answer,
            delay,
            asked: Mutex::new(Vec::new()),
        })
    }
}

impl OverrideAuthorizer for FixedAuthorizer {
    fn allows<'a>(&'a self, user: &'a UserInfo, _verb: Verb) -> BoxFuture<'a, Authorization> {
        self.asked.lock().unwrap().push(user.username.clone());
        Box::pin(async move {
            tokio::time::sleep(self.delay).await;
            self.answer.clone()
        })
    }
}

/// Builds the webhook state over the sample results.
pub fn sample_gate(authorizer: Arc<dyn OverrideAuthorizer>) -> (Arc<Gate>, Arc<SampleSource>) {
    gate_over(SampleSource::new(), authorizer)
}

/// Builds the webhook state over `source`.
pub fn gate_over(
    source: SampleSource,
    authorizer: Arc<dyn OverrideAuthorizer>,
) -> (Arc<Gate>, Arc<SampleSource>) {
    let source = Arc::new(source);
    let metrics = Metrics::new().unwrap();
    let gate = Arc::new(Gate {
        results: source.clone(),
        authorizer,
        events: None,
        witness: Witness::unwatched(metrics.clone()),
        run_requests: preflight_gate::admission::run_requests::RunRequests::new(10, "gate"),
        policy: Policy::default(),
        metrics,
    });
    (gate, source)
}

/// Where the serving pair lives.
pub enum Layout {
    /// `tls.crt` and `tls.key` as plain files.
    Plain,
    /// As a Kubernetes Secret volume mounts them: `tls.crt -> ..data/tls.crt`,
    /// `..data -> ..<timestamp>/`.
    SecretVolume,
}

pub struct Options {
    pub authorizer: Arc<dyn OverrideAuthorizer>,
    pub layout: Layout,
    pub client_ca: Option<PathBuf>,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub handshake_timeout: Duration,
    pub shutdown_delay: Duration,
    /// Serve the admin port over TLS too.
    pub admin_tls: bool,
    pub max_concurrency: usize,
    pub max_connections: usize,
    pub max_busy_per_peer: usize,
    pub reserved_connections: usize,
    /// The API server's addresses, as the gate would know them from the
    /// `kubernetes` Service's endpoints.
    pub api_server: Vec<std::net::IpAddr>,
    pub min_body_rate: MinBodyRate,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            authorizer: FixedAuthorizer::new(Authorization::Denied),
            layout: Layout::Plain,
            client_ca: None,
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(120),
            handshake_timeout: Duration::from_secs(5),
            shutdown_delay: Duration::ZERO,
            admin_tls: false,
            max_concurrency: 64,
            max_connections: 1024,
            // `serve`'s defaults.
            max_busy_per_peer: 16,
            reserved_connections: 64,
            api_server: Vec::new(),
            min_body_rate: MinBodyRate::new(512),
        }
    }
}

/// A running gate.
pub struct Running {
    pub url: String,
    pub admin: String,
    pub addr: std::net::SocketAddr,
    pub dir: tempfile::TempDir,
    pub serving: PathBuf,
    pub ca_pems: Vec<String>,
    pub metrics: Metrics,
    stop: Option<oneshot::Sender<()>>,
    pub task: Option<JoinHandle<anyhow::Result<()>>>,
}

/// Writes a new pair into the serving directory; returns its CA.
pub fn new_pair(dir: &Path) -> String {
    certs::generate(dir, &[]).unwrap().ca_pem
}

/// Makes a Secret-volume-style directory pointing at a fresh pair, or swaps
/// the `..data` link to a fresh pair atomically, as the kubelet does.
pub fn secret_volume_swap(volume: &Path, generation: u32) -> String {
    let version = format!("..2026_11_30_{generation:04}");
    let ca = new_pair(&volume.join(&version));
    let tmp = volume.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&version, &tmp).unwrap();
    std::fs::rename(&tmp, volume.join("..data")).unwrap();
    for f in [certs::TLS_CERT, certs::TLS_KEY] {
        let link = volume.join(f);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{f}"), &link).unwrap();
        }
    }
    ca
}

pub async fn start(options: Options) -> Running {
    install_crypto();
    let dir = tempfile::tempdir().unwrap();
    let serving = dir.path().join("serving");
    let ca = match options.layout {
        Layout::Plain => new_pair(&serving),
        Layout::SecretVolume => {
            std::fs::create_dir_all(&serving).unwrap();
            secret_volume_swap(&serving, 0)
        }
    };
    let (gate, source) = sample_gate(options.authorizer);
    let metrics = gate.metrics.clone();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cert = Arc::new(
        ReloadingCert::load(
            CertFiles {
                cert: serving.join(certs::TLS_CERT),
                key: serving.join(certs::TLS_KEY),
            },
            provider.clone(),
            metrics.clone(),
        )
        .unwrap(),
    );
    tokio::spawn(cert.clone().watch(Duration::from_millis(500)));
    let client_ca = options.client_ca.map(|path| {
        let client_ca = ClientCa::load(path, provider.clone(), metrics.clone()).unwrap();
        tokio::spawn(client_ca.clone().watch(Duration::from_millis(500)));
        client_ca
    });
    let tls = server::tls::server_config(cert.clone(), provider.clone(), client_ca).unwrap();
    let webhook = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = webhook.local_addr().unwrap();
    let admin_addr = admin.local_addr().unwrap();
    let health = Arc::new(Health {
        results: source.clone(),
        metrics: metrics.clone(),
        shutting_down: Default::default(),
        node_cordoned: Default::default(),
        scrape_access: None,
    });
    let admin_tls = options
        .admin_tls
        .then(|| server::tls::server_config(cert.clone(), provider.clone(), None).unwrap());
    let listen = Listen {
        webhook,
        admin,
        admin_tls,
        max_concurrency: options.max_concurrency,
        max_connections: options.max_connections,
        max_busy_per_peer: options.max_busy_per_peer,
        reserved_connections: options.reserved_connections,
        api_server: ApiServerAddresses::fixed(options.api_server),
        min_body_rate: options.min_body_rate,
        handshake_timeout: options.handshake_timeout,
        header_read_timeout: options.header_read_timeout,
        idle_timeout: options.idle_timeout,
        shutdown_delay: options.shutdown_delay,
        shutdown_grace: Duration::from_secs(10),
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server::serve(listen, tls, gate, health, async {
        let _ = stopped.await;
    }));
    Running {
        url: format!("https://localhost:{}{}", addr.port(), server::webhook::PATH),
        admin: format!("http://{admin_addr}"),
        addr,
        dir,
        serving,
        ca_pems: vec![ca],
        metrics,
        stop: Some(stop),
        task: Some(task),
    }
}

impl Running {
    /// A client that trusts every CA this gate has served from.
    pub fn client(&self) -> reqwest::Client {
        self.client_builder().build().unwrap()
    }

    pub fn client_builder(&self) -> reqwest::ClientBuilder {
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .tls_info(true)
            .timeout(Duration::from_secs(10));
        for pem in &self.ca_pems {
            builder = builder
                .add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).unwrap());
        }
        builder
    }

    /// Posts a review body; returns the status and the parsed answer.
    pub async fn post(&self, client: &reqwest::Client, body: Vec<u8>) -> (u16, serde_json::Value) {
        let response = client
            .post(&self.url)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("the request reaches the gate");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let json = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
        (status, json)
    }

    /// The sum of a metric's samples whose labels include all of `labels`
    /// (each written `name="value"`), read from the text exposition.
    pub fn metric(&self, name: &str, labels: &[&str]) -> f64 {
        sum_metric(&self.metrics.render(), name, labels)
    }

    /// Triggers shutdown and waits for the servers to stop.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => task.await?,
            None => Ok(()),
        }
    }

    pub fn trigger_stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Sums the samples of `name` with all of `labels` in a text exposition.
pub fn sum_metric(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .filter(|l| labels.iter().all(|label| l.contains(label)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
