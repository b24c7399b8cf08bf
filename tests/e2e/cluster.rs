//! The shared world of the end-to-end tests: the control plane, the CRDs,
//! RBAC, the ClusterVersion `version`, the gate and its webhook
//! registration. Set up once per run; tests take turns through `lock()`
//! because they share the one ClusterVersion.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const WEBHOOK: &str = "clusterversions.preflight.dev";

/// What `oc adm upgrade --clear` amounts to: `spec.desiredUpdate` removed.
pub const CLEAR_TARGET: [&str; 6] = [
    "patch",
    "clusterversion",
    "version",
    "--type=json",
    "-p",
    r#"[{"op":"remove","path":"/spec/desiredUpdate"}]"#,
];
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// OpenShift's own CRDs (openshift/api, Apache-2.0), in the repository.
pub const OPENSHIFT_CRDS: &str = "tests/data/openshift-crds";

/// Who runs a kubectl command.
#[derive(Clone, Copy, Debug)]
pub enum User {
    /// `system:masters`.
    Admin,
    /// May patch the ClusterVersion, but not override.
    Alice,
    /// May patch the ClusterVersion and override.
    Bob,
}

impl User {
    /// The user name the API server authenticates (the certificate's CN).
    pub fn name(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Alice => "alice",
            Self::Bob => "bob",
        }
    }
}

pub struct World {
    env: HashMap<String, String>,
    pub gate_port: u16,
    pub admin_port: u16,
    pub ca_bundle: String,
    /// The in-process controller replicas; the first is started with the world.
    pub replicas: Mutex<Vec<Replica>>,
    _dir: tempfile::TempDir,
}

/// Lease duration of the test replicas: short, so a takeover is quick.
pub const LEASE_SECONDS: u64 = 6;
/// How long the gate trusts its cache with the watch down.
pub const STALE_AFTER_SECONDS: u64 = 3;
/// How long the test replicas let a check's pod go unscheduled.
pub const JOB_SCHEDULE_SECONDS: u64 = 8;
/// Checks the test replicas run: the ones whose data the test cluster has.
const CHECKS: &str = "ClusterVersionState,ClusterOperatorsHealthy";

/// A controller replica on a runtime of its own, so that killing it drops
/// every task at once, Lease renewals included, as a crashed pod would.
pub struct Replica {
    pub identity: String,
    pub metrics: preflight_gate::metrics::Metrics,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Replica {
    /// Kills the replica without releasing its Lease.
    pub fn kill(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }

    pub fn is_leader(&self) -> bool {
        self.metrics.controller.is_leader()
    }

    pub fn runs(&self) -> u64 {
        self.metrics.controller.runs_finished()
    }
}

pub struct Output {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

static WORLD: OnceLock<World> = OnceLock::new();
static TURN: Mutex<()> = Mutex::new(());

/// The world, set up on first use, and this test's turn with it. Every turn
/// starts from the ClusterVersion at rest, with the webhook registered.
pub fn lock() -> (MutexGuard<'static, ()>, &'static World) {
    let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let world = WORLD.get_or_init(World::set_up);
    world.reset();
    (turn, world)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn run(command: &mut Command) -> Output {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    Output {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Reads the variables of the control plane's env file.
fn read_env(file: &Path) -> HashMap<String, String> {
    let out = run(Command::new("bash")
        .args(["-c", "set -a; source \"$1\"; env", "env"])
        .arg(file));
    assert!(out.ok, "cannot read {}: {}", file.display(), out.stderr);
    out.stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

impl World {
    fn set_up() -> World {
        let _ = rustls::crypto::ring::default_provider().install_default();
        // RUST_LOG=info shows what the gate and the replicas do.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let up = run(&mut Command::new(format!("{ROOT}/tests/control-plane/up")));
        assert!(up.ok, "the control plane did not come up:\n{}", up.stderr);
        let env_file = up
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("source "))
            .expect("up prints the env file")
            .trim()
            .to_owned();
        let env = read_env(Path::new(&env_file));
        let dir = tempfile::tempdir().unwrap();
        let mut world = World {
            env,
            gate_port: free_port(),
            admin_port: free_port(),
            ca_bundle: String::new(),
            replicas: Mutex::new(Vec::new()),
            _dir: dir,
        };
        world.install_crds();
        world.apply_rbac();
        let _ = world.kubectl(User::Admin, &["create", "namespace", "preflight-gate"]);
        world.create_cluster_version();
        world.create_cluster_operators();
        world.seed_results();
        world.ca_bundle = world.start_gate(world.gate_port, world.admin_port, &[]);
        let first = world.start_replica("controller-a");
        world.replicas.lock().unwrap().push(first);
        // A control plane reused from an earlier run may still hold a target,
        // annotations and a registration for a gate that is gone.
        world.reset();
        world
    }

    /// Starts a controller replica in-process, as `serve` runs it.
    pub fn start_replica(&self, identity: &str) -> Replica {
        use preflight_gate::preflight::{controller, leader};
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let metrics = preflight_gate::metrics::Metrics::new().unwrap();
        let kubeconfig = PathBuf::from(self.var("ADMIN_KUBECONFIG"));
        let client = runtime
            .block_on(preflight_gate::cluster::client(Some(&kubeconfig)))
            .unwrap();
        let settings = controller::Settings {
            refresh_interval: Duration::from_secs(24 * 3600),
            run_timeout: Duration::from_secs(60),
            check_timeout: Duration::from_secs(10),
            concurrency: 2,
            gc_grace: Duration::from_secs(15),
            checks: CHECKS.split(',').map(String::from).collect(),
            jobs: Some(preflight_gate::preflight::jobs::JobSettings {
                schedule_timeout: Duration::from_secs(JOB_SCHEDULE_SECONDS),
                poll: Duration::from_millis(300),
                ..Default::default()
            }),
            reads: preflight_gate::cluster::live::Reads::ALL,
            blocking: Default::default(),
            alerts: None,
        };
        let lease = leader::LeaseSettings {
            namespace: "preflight-gate".into(),
            name: "preflight-gate-controller".into(),
            identity: identity.into(),
            duration: Duration::from_secs(LEASE_SECONDS),
        };
        let work = {
            let (client, metrics, identity) =
                (client.clone(), metrics.clone(), identity.to_owned());
            move || {
                controller::start(
                    client.clone(),
                    settings.clone(),
                    metrics.clone(),
                    identity.clone(),
                )
            }
        };
        runtime.spawn(leader::lead(
            client,
            lease,
            metrics.clone(),
            work,
            std::future::pending(),
        ));
        Replica {
            identity: identity.into(),
            metrics,
            runtime: Some(runtime),
        }
    }

    pub fn admin_kubeconfig(&self) -> &str {
        self.var("ADMIN_KUBECONFIG")
    }

    /// The holder of the controller's Lease.
    pub fn lease_holder(&self) -> String {
        self.kubectl(
            User::Admin,
            &[
                "get",
                "lease",
                "-n",
                "preflight-gate",
                "preflight-gate-controller",
                "-o",
                "jsonpath={.spec.holderIdentity}",
            ],
        )
        .stdout
    }

    /// Healthy ClusterOperators, as a cluster at rest reports them.
    fn create_cluster_operators(&self) {
        for name in ["authentication", "etcd", "kube-apiserver", "machine-config"] {
            let co = json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator", "metadata": {"name": name}, "spec": {}});
            let path = self.dir().join(format!("co-{name}.json"));
            std::fs::write(&path, co.to_string()).unwrap();
            let _ = self.kubectl(User::Admin, &["create", "-f", path.to_str().unwrap()]);
            let now = jiff::Timestamp::now().to_string();
            let conditions = json!({"status": {"conditions": [
                {"type": "Available", "status": "True", "lastTransitionTime": now, "reason": "AsExpected", "message": "ok"},
                {"type": "Degraded", "status": "False", "lastTransitionTime": now, "reason": "AsExpected", "message": "ok"},
                {"type": "Progressing", "status": "False", "lastTransitionTime": now, "reason": "AsExpected", "message": "ok"},
                {"type": "Upgradeable", "status": "True", "lastTransitionTime": now, "reason": "AsExpected", "message": "ok"}],
                "versions": [{"name": "operator", "version": "4.14.1"}]}});
            self.admin(&[
                "patch",
                "clusteroperator",
                name,
                "--subresource=status",
                "--type=merge",
                "-p",
                &conditions.to_string(),
            ]);
        }
    }

    /// The sample results from examples/results/, completed just now, as a
    /// controller would have written them.
    fn seed_results(&self) {
        for file in ["4.15.3-failing.yaml", "4.14.12-passing.yaml"] {
            let text = std::fs::read_to_string(format!("{ROOT}/examples/results/{file}")).unwrap();
            let object: Value = serde_saphyr::from_str(&text).unwrap();
            let name = object["metadata"]["name"].as_str().unwrap().to_owned();
            let spec_only = json!({"apiVersion": object["apiVersion"], "kind": object["kind"],
                "metadata": {"name": name}, "spec": object["spec"]});
            self.apply_json(&spec_only);
            let mut status = object["status"].clone();
            let now = jiff::Timestamp::now().to_string();
            status["startTime"] = json!(now);
            status["completionTime"] = json!(now);
            let generation = self.admin(&[
                "get",
                "updatepreflight",
                &name,
                "-o",
                "jsonpath={.metadata.generation}",
            ]);
            status["observedGeneration"] = json!(generation.trim().parse::<i64>().unwrap());
            let patch = json!({"status": status}).to_string();
            self.admin(&[
                "patch",
                "updatepreflight",
                &name,
                "--subresource=status",
                // As the gate writes it: only its field manager's status counts.
                "--field-manager=preflight-gate",
                "--type=merge",
                "-p",
                &patch,
            ]);
        }
    }

    pub fn var(&self, name: &str) -> &str {
        self.env
            .get(name)
            .unwrap_or_else(|| panic!("{name} is not in the control plane's env"))
    }

    pub fn dir(&self) -> &Path {
        self._dir.path()
    }

    pub fn kubectl<S: AsRef<std::ffi::OsStr>>(&self, user: User, args: &[S]) -> Output {
        let kubeconfig = match user {
            User::Admin => self.var("ADMIN_KUBECONFIG"),
            User::Alice => self.var("ALICE_KUBECONFIG"),
            User::Bob => self.var("BOB_KUBECONFIG"),
        };
        run(Command::new(self.var("KUBECTL"))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args))
    }

    /// kubectl that must succeed.
    pub fn admin<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(&self, args: &[S]) -> String {
        let out = self.kubectl(User::Admin, args);
        assert!(out.ok, "kubectl {args:?} failed: {}", out.stderr);
        out.stdout
    }

    pub fn apply_json(&self, object: &Value) {
        let path = self.dir().join(format!("apply-{}.json", rand_suffix()));
        std::fs::write(&path, serde_json::to_vec(object).unwrap()).unwrap();
        self.admin(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            path.to_str().unwrap(),
        ]);
    }

    fn install_crds(&self) {
        // OpenShift's own CRDs (tests/data/openshift-crds), so our objects
        // are validated by the real schemas.
        let crd = |file: &str| PathBuf::from(ROOT).join(OPENSHIFT_CRDS).join(file);
        let crds = [
            crd("0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml"),
            crd("0000_00_cluster-version-operator_01_clusteroperators.crd.yaml"),
            PathBuf::from(ROOT).join("deploy/crds/updatepreflights.preflight.dev.yaml"),
            PathBuf::from(ROOT).join("deploy/crds/preflightchecks.preflight.dev.yaml"),
        ];
        for crd in &crds {
            self.admin(&[
                "apply",
                "--server-side",
                "--force-conflicts",
                "-f",
                crd.to_str().unwrap(),
            ]);
        }
        self.admin(&[
            "wait",
            "--for",
            "condition=established",
            "--timeout=60s",
            "crd/clusterversions.config.openshift.io",
            "crd/clusteroperators.config.openshift.io",
            "crd/updatepreflights.preflight.dev",
            "crd/preflightchecks.preflight.dev",
        ]);
        // Established is not yet served: wait until discovery lists them.
        for resource in [
            "clusterversions",
            "clusteroperators",
            "updatepreflights",
            "preflightchecks",
        ] {
            let deadline = Instant::now() + Duration::from_secs(30);
            while !self.kubectl(User::Admin, &["get", resource]).ok {
                assert!(Instant::now() < deadline, "{resource} never served");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }

    fn apply_rbac(&self) {
        let role = |name: &str, rules: Value| {
            json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name}, "rules": rules})
        };
        let binding = |name: &str, role: &str, user: &str| {
            json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})
        };
        let editor = role(
            "e2e-clusterversion-editor",
            json!([{
            "apiGroups": ["config.openshift.io"], "resources": ["clusterversions"],
            "verbs": ["get", "list", "watch", "patch", "update"]}]),
        );
        // The same rule as deploy/'s preflight-gate-override ClusterRole.
        let override_role = role(
            "e2e-preflight-gate-override",
            json!([{
            "apiGroups": ["preflight.dev"], "resources": ["updatepreflights"], "verbs": ["override"]}]),
        );
        let bindings = [
            binding("e2e-alice-editor", "e2e-clusterversion-editor", "alice"),
            binding("e2e-bob-editor", "e2e-clusterversion-editor", "bob"),
            binding("e2e-bob-override", "e2e-preflight-gate-override", "bob"),
        ];
        let mut items = vec![editor, override_role];
        items.extend(bindings);
        self.apply_json(&json!({"apiVersion": "v1", "kind": "List", "items": items}));
    }

    /// The example ClusterVersion (from examples/reviews/), whose offered
    /// releases the sample results cover: 4.14.12 passes, 4.15.3 fails,
    /// 4.15.16 has no results.
    fn example_cluster_version() -> Value {
        let review: Value = serde_json::from_str(include_str!(
            "../../examples/reviews/update-to-4.14.12.json"
        ))
        .unwrap();
        let mut cv = review["request"]["oldObject"].clone();
        cv["metadata"] = json!({"name": "version"});
        cv["status"]["versionHash"] = json!("XGjSjKwUh");
        cv
    }

    fn create_cluster_version(&self) {
        let cv = Self::example_cluster_version();
        let exists = self
            .kubectl(User::Admin, &["get", "clusterversion", "version"])
            .ok;
        if !exists {
            let spec_only = json!({"apiVersion": cv["apiVersion"], "kind": cv["kind"], "metadata": cv["metadata"], "spec": cv["spec"]});
            let path = self.dir().join("cv.json");
            std::fs::write(&path, spec_only.to_string()).unwrap();
            self.admin(&["create", "-f", path.to_str().unwrap()]);
        }
        // The CVO writes status through the subresource; so do we.
        let status = json!({"status": cv["status"]}).to_string();
        self.admin(&[
            "patch",
            "clusterversion",
            "version",
            "--subresource=status",
            "--type=merge",
            "-p",
            &status,
        ]);
    }

    /// Serves the gate in-process on a thread of its own, as `preflight-gate
    /// serve` with the admin kubeconfig (for access reviews and Events), and
    /// returns the CA bundle of its serving certificate.
    fn start_gate(&self, gate_port: u16, admin_port: u16, extra: &[&str]) -> String {
        let certs = self.dir().join(format!("certs-{gate_port}"));
        let written = preflight_gate::certs::generate(&certs, &[]).unwrap();
        let mut args = vec![
            "preflight-gate".to_owned(),
            "serve".into(),
            "--webhook-addr".into(),
            format!("127.0.0.1:{gate_port}"),
            "--admin-addr".into(),
            format!("127.0.0.1:{admin_port}"),
            "--tls-cert".into(),
            certs.join("tls.crt").display().to_string(),
            "--tls-key".into(),
            certs.join("tls.key").display().to_string(),
            "--kubeconfig".into(),
            self.var("ADMIN_KUBECONFIG").to_owned(),
            "--shutdown-delay".into(),
            "0s".into(),
            // The controller runs in separate replicas (see start_replica).
            "--controller=false".into(),
            "--stale-after".into(),
            format!("{STALE_AFTER_SECONDS}s"),
            // Only the API server may ask: it presents the webhook client
            // certificate that `up` configured (tests/control-plane/README.md).
            "--client-ca".into(),
            self.var("WEBHOOK_CLIENT_CA").to_owned(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        let cli = <preflight_gate::cli::Cli as clap::Parser>::try_parse_from(args).unwrap();
        let preflight_gate::cli::Command::Serve(serve) = cli.command else {
            unreachable!()
        };
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            if let Err(e) = runtime.block_on(preflight_gate::commands::serve(*serve)) {
                eprintln!("the gate stopped: {e:#}");
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.scrape_status_on(admin_port, "/readyz") != Some(200) {
            assert!(Instant::now() < deadline, "the gate never became ready");
            std::thread::sleep(Duration::from_millis(50));
        }
        written.ca_bundle()
    }

    fn scrape_status_on(&self, admin_port: u16, path: &str) -> Option<u16> {
        let (status, _) = http_get_on(admin_port, path)?;
        Some(status)
    }

    fn http_get(&self, path: &str) -> Option<(u16, String)> {
        http_get_on(self.admin_port, path)
    }

    /// Starts one more gate, with `extra` flags, registers the webhook
    /// configuration to call it instead, and waits until the API server
    /// does. The next test's `lock()` points the webhook back at the world's
    /// own gate; this one stays up, unused, until the run ends.
    pub fn switch_to_gate_with(&self, extra: &[&str]) -> String {
        let (gate_port, admin_port) = (free_port(), free_port());
        let ca_bundle = self.start_gate(gate_port, admin_port, extra);
        let url = format!(
            "https://127.0.0.1:{gate_port}{}",
            preflight_gate::server::webhook::PATH
        );
        let mut config = self.webhook_configuration(&url);
        for webhook in config["webhooks"].as_array_mut().unwrap() {
            webhook["clientConfig"]["caBundle"] = json!(ca_bundle);
        }
        self.apply_json(&config);
        self.wait_for_webhook();
        url
    }
}

impl World {
    /// The gate's metrics, as Prometheus would scrape them.
    pub fn metrics(&self) -> String {
        self.http_get("/metrics").expect("the admin port answers").1
    }

    /// The webhook configuration of deploy/base, pointed at `url`.
    pub fn webhook_configuration(&self, url: &str) -> Value {
        let yaml = std::fs::read_to_string(format!("{ROOT}/deploy/base/webhook.yaml")).unwrap();
        let mut config: Value = serde_saphyr::from_str(&yaml).unwrap();
        config["metadata"]["annotations"] = json!({});
        for webhook in config["webhooks"].as_array_mut().unwrap() {
            webhook["clientConfig"] = json!({"url": url, "caBundle": self.ca_bundle});
        }
        config
    }

    /// Posts a review straight to the gate, bypassing the API server but
    /// presenting its webhook client certificate.
    pub fn post_review(&self, review: &Value) -> Value {
        let identity = [
            std::fs::read(self.var("WEBHOOK_CLIENT_CERT")).unwrap(),
            std::fs::read(self.var("WEBHOOK_CLIENT_KEY")).unwrap(),
        ]
        .concat();
        let response = self
            .post_review_as(review, Some(&identity))
            .expect("the gate answers the API server's identity");
        serde_json::from_str(&response).unwrap()
    }

    /// Posts a review straight to the gate as a caller presenting
    /// `identity` (PEM certificate and key), or no certificate; returns the
    /// body, or the error of the connection.
    pub fn post_review_as(
        &self,
        review: &Value,
        identity: Option<&[u8]>,
    ) -> Result<String, reqwest::Error> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut client = reqwest::Client::builder()
                .use_rustls_tls()
                .tls_built_in_root_certs(false)
                .add_root_certificate(reqwest::Certificate::from_pem(&self.ca_pem()).unwrap());
            if let Some(pem) = identity {
                client = client.identity(reqwest::Identity::from_pem(pem).unwrap());
            }
            let url = format!(
                "https://localhost:{}/validate/clusterversion",
                self.gate_port
            );
            client
                .build()
                .unwrap()
                .post(url)
                .header("content-type", "application/json")
                .body(review.to_string())
                .send()
                .await?
                .text()
                .await
        })
    }

    fn ca_pem(&self) -> Vec<u8> {
        std::fs::read(self.dir().join(format!("certs-{}/ca.crt", self.gate_port))).unwrap()
    }

    /// UpdatePreflight objects, by name.
    pub fn update_preflights(&self) -> Vec<Value> {
        let list: Value =
            serde_json::from_str(&self.admin(&["get", "updatepreflights", "-o", "json"])).unwrap();
        list["items"].as_array().unwrap().clone()
    }

    /// Waits until the object for `image` satisfies `done`; returns it.
    pub fn wait_for_result(&self, image: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Some(o) = self
                .update_preflights()
                .into_iter()
                .find(|o| o["spec"]["image"] == image && done(o))
            {
                return o;
            }
            assert!(
                Instant::now() < deadline,
                "no UpdatePreflight for {image} {what}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub fn restart_apiserver(&self, down_for: Duration) -> std::thread::JoinHandle<Output> {
        let seconds = down_for.as_secs().to_string();
        std::thread::spawn(move || {
            run(Command::new(format!("{ROOT}/tests/control-plane/restart-apiserver")).arg(seconds))
        })
    }

    pub fn gate_url(&self) -> String {
        format!(
            "https://127.0.0.1:{}/validate/clusterversion",
            self.gate_port
        )
    }

    /// Registers the webhook and waits until the API server calls it.
    pub fn register_webhook(&self) {
        self.apply_json(&self.webhook_configuration(&self.gate_url()));
        self.wait_for_webhook();
    }

    /// Waits until the API server calls the webhook as registered.
    fn wait_for_webhook(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = self.kubectl(
                User::Admin,
                &merge_patch_args("4.15.3", &["--dry-run=server"]),
            );
            if !out.ok && out.stderr.contains("preflight for 4.15.3 failed") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the webhook never took effect: {}",
                out.stderr
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Back to rest: no target, no gate annotations, the webhook registered.
    fn reset(&self) {
        let registered = self.kubectl(
            User::Admin,
            &[
                "get",
                "validatingwebhookconfiguration",
                "preflight-gate",
                "-o",
                "jsonpath={.webhooks[0].clientConfig.url}",
            ],
        );
        let ours = registered.ok && registered.stdout == self.gate_url();
        if registered.ok && !ours {
            // Left pointing elsewhere by a test: out of the way first.
            self.admin(&["delete", "validatingwebhookconfiguration", "preflight-gate"]);
        }
        let cv = self.cluster_version();
        if cv["spec"].get("desiredUpdate").is_some() {
            self.admin(&CLEAR_TARGET);
        }
        let annotations: Vec<String> = cv["metadata"]["annotations"]
            .as_object()
            .map(|a| {
                a.keys()
                    .filter(|k| k.starts_with("preflight.dev/"))
                    .map(|k| format!("{k}-"))
                    .collect()
            })
            .unwrap_or_default();
        if !annotations.is_empty() {
            let mut args = vec!["annotate", "clusterversion", "version"];
            args.extend(annotations.iter().map(String::as_str));
            self.admin(&args);
        }
        if !ours {
            self.register_webhook();
        }
    }

    pub fn cluster_version(&self) -> Value {
        serde_json::from_str(&self.admin(&["get", "clusterversion", "version", "-o", "json"]))
            .unwrap()
    }

    /// Events about the ClusterVersion with `reason`, newest last.
    pub fn events(&self, reason: &str) -> Vec<Value> {
        let list: Value =
            serde_json::from_str(&self.admin(&["get", "events.events.k8s.io", "-A", "-o", "json"]))
                .unwrap();
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| {
                e["reason"] == reason
                    && e["regarding"]["name"] == "version"
                    && e["regarding"]["kind"] == "ClusterVersion"
            })
            .cloned()
            .collect()
    }

    /// Waits for an Event with `reason` whose note contains `text`.
    pub fn wait_for_event(&self, reason: &str, text: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(e) = self
                .events(reason)
                .into_iter()
                .find(|e| e["note"].as_str().unwrap_or("").contains(text))
            {
                return e;
            }
            assert!(
                Instant::now() < deadline,
                "no {reason} Event mentioning {text:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The API server's audit log, when the control plane writes one.
    pub fn audit_log(&self) -> Option<String> {
        let path = self.env.get("AUDIT_LOG")?;
        std::fs::read_to_string(path).ok()
    }
}

fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::Relaxed).to_string()
}

/// What `oc adm upgrade --to-image IMAGE --allow-explicit-upgrade` sends.
pub fn image_patch_args(image: &str, extra: &[&str]) -> Vec<String> {
    let patch = json!({"spec": {"desiredUpdate": {"image": image, "version": "", "force": false}}})
        .to_string();
    let mut args: Vec<String> = ["patch", "clusterversion", "version", "--type=merge", "-p"]
        .map(String::from)
        .to_vec();
    args.push(patch);
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// What `oc adm upgrade --to VERSION` sends: a JSON merge patch.
pub fn merge_patch_args(version: &str, extra: &[&str]) -> Vec<String> {
    let patch = json!({"spec": {"desiredUpdate": {"version": version}}}).to_string();
    let mut args: Vec<String> = ["patch", "clusterversion", "version", "--type=merge", "-p"]
        .map(String::from)
        .to_vec();
    args.push(patch);
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// The sum of a metric's samples with all of `labels`.
pub fn metric(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .filter(|l| labels.iter().all(|label| l.contains(label)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The names of the checks in an UpdatePreflight's results, in order.
pub fn result_names(upf: &Value) -> Vec<&str> {
    upf["status"]["results"]
        .as_array()
        .map(|results| results.iter().filter_map(|r| r["name"].as_str()).collect())
        .unwrap_or_default()
}

fn http_get_on(admin_port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", admin_port)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).ok()?;
    let status = reply.split(' ').nth(1)?.parse().ok()?;
    let body = reply
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Some((status, body))
}
