//! The shared world of the end-to-end tests: the control plane, the CRDs,
//! RBAC, the ClusterVersion `version`, the gate and its webhook
//! registration. Set up once per run; tests take turns through `lock()`
//! because they share the one ClusterVersion. The control plane's plumbing
//! is tests/common/control_plane.rs, shared with the node suite.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};

#[path = "../common/control_plane.rs"]
mod control_plane;

pub use control_plane::{
    CLEAR_TARGET, OPENSHIFT_CRDS, Output, image_patch_args, merge_patch_args, run, wait_for,
};
pub use control_plane::{ControlPlane, ROOT, example_cluster_version, operator_status, poll};

use crate::support::free_port;

pub const WEBHOOK: &str = "clusterversions.preflight.dev";

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
    /// The env file's variable naming the user's kubeconfig.
    fn kubeconfig(self) -> &'static str {
        match self {
            Self::Admin => "ADMIN_KUBECONFIG",
            Self::Alice => "ALICE_KUBECONFIG",
            Self::Bob => "BOB_KUBECONFIG",
        }
    }

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
    plane: ControlPlane,
    pub gate_port: u16,
    pub admin_port: u16,
    pub ca_bundle: String,
    /// A bearer token of a ServiceAccount bound to deploy/base's
    /// preflight-gate-metrics-reader, as Prometheus's would be: the gate
    /// reads `/metrics` only to such a token.
    pub scrape_token: String,
    /// The in-process controller replicas; the first is started with the world.
    pub replicas: Mutex<Vec<Replica>>,
}

/// Lease duration of the test replicas: short, so a takeover is quick.
pub const LEASE_SECONDS: u64 = 6;
/// How long the gate trusts its cache with the watch down.
pub const STALE_AFTER_SECONDS: u64 = 3;
/// How long the test replicas let a check's pod go unscheduled.
pub const JOB_SCHEDULE_SECONDS: u64 = 8;
/// The namespace the check Jobs and extraction pods run in, deploy/base's
/// `--jobs-namespace`: not the gate's own.
pub const JOBS_NAMESPACE: &str = "preflight-gate-checks";
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

impl World {
    fn set_up() -> World {
        let _ = rustls::crypto::ring::default_provider().install_default();
        // RUST_LOG=info shows what the gate and the replicas do.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let plane = ControlPlane::up(&mut Command::new(format!("{ROOT}/tests/control-plane/up")));
        let mut world = World {
            plane,
            gate_port: free_port(),
            admin_port: free_port(),
            ca_bundle: String::new(),
            scrape_token: String::new(),
            replicas: Mutex::new(Vec::new()),
        };
        world.install_crds();
        world.apply_rbac();
        world.scrape_token = world.service_account_token("e2e-prometheus", true);
        let _ = world.kubectl(User::Admin, &["create", "namespace", "preflight-gate"]);
        world.make_result_key_secret();
        // Where the check Jobs run, as deploy/base has it (--jobs-namespace).
        let _ = world.kubectl(User::Admin, &["create", "namespace", JOBS_NAMESPACE]);
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
            newest_runs: Default::default(),
            refresh_interval: Duration::from_secs(24 * 3600),
            run_timeout: Duration::from_secs(60),
            check_timeout: Duration::from_secs(10),
            concurrency: 2,
            gc_grace: Duration::from_secs(15),
            checks: CHECKS.split(',').map(String::from).collect(),
            jobs: Some(preflight_gate::preflight::jobs::JobSettings {
                namespace: JOBS_NAMESPACE.into(),
                schedule_timeout: Duration::from_secs(JOB_SCHEDULE_SECONDS),
                poll: Duration::from_millis(300),
                ..Default::default()
            }),
            reads: preflight_gate::cluster::live::Reads::ALL,
            exemptions: Default::default(),
            alerts: None,
            alert_namespaces: Default::default(),
            namespace: "preflight-gate".into(),
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
        for name in control_plane::OPERATORS {
            self.plane
                .put_cluster_operator(name, &control_plane::operator_status(None));
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
            // Afresh: a status left by an earlier run on a reused control
            // plane would sit beside the signed one (a merge keeps it).
            self.admin(&[
                "delete",
                "updatepreflight",
                &name,
                "--ignore-not-found",
                "--wait",
            ]);
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
            // Signed as the gate signs its results (docs/security.md, 3d).
            status["signature"] = json!(self.sign_as_the_gate(&object, &status));
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

    /// The Secret the install makes empty for the gate to fill with its
    /// key, as deploy/base has it. One an earlier design's gate made
    /// (immutable) on a reused control plane is made anew.
    fn make_result_key_secret(&self) {
        let secret = [
            "-n",
            "preflight-gate",
            "secret",
            "preflight-gate-result-key",
        ];
        let immutable = self.kubectl(
            User::Admin,
            &[
                &secret[..2],
                &["get"],
                &secret[2..],
                &["-o", "jsonpath={.immutable}"],
            ]
            .concat(),
        );
        if immutable.stdout.trim() == "true" {
            self.admin(&[&secret[..2], &["delete"], &secret[2..]].concat());
        }
        self.admin(&[
            "apply",
            "--server-side",
            "-f",
            &format!("{ROOT}/deploy/base/result-key.yaml"),
        ]);
    }

    /// The key the gate signs its results with, from its Secret (filled
    /// now when no gate filled it yet).
    pub fn result_key(&self) -> preflight_gate::model::vouch::ResultKey {
        let kubeconfig = PathBuf::from(self.var("ADMIN_KUBECONFIG"));
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let client = preflight_gate::cluster::client(Some(&kubeconfig))
                .await
                .unwrap();
            preflight_gate::preflight::result_key::load_or_fill(&client, "preflight-gate")
                .await
                .unwrap()
        })
    }

    /// Writes `status` to the UpdatePreflight `name` as the gate's field
    /// manager, as anyone allowed to write `updatepreflights/status` can
    /// (and as the gate writes its results).
    pub fn write_status_as_the_gates_manager(&self, name: &str, status: &Value) {
        self.admin(&[
            "patch",
            "updatepreflight",
            name,
            "--subresource=status",
            "--field-manager=preflight-gate",
            "--type=merge",
            "-p",
            &json!({ "status": status }).to_string(),
        ]);
    }

    /// The gate's signature of `status` on the stored object named as
    /// `object` is (its uid read back: a signature binds it).
    pub fn sign_as_the_gate(&self, object: &Value, status: &Value) -> String {
        let name = object["metadata"]["name"].as_str().unwrap();
        let uid = self.admin(&[
            "get",
            "updatepreflight",
            name,
            "-o",
            "jsonpath={.metadata.uid}",
        ]);
        let signed: preflight_gate::model::UpdatePreflight = serde_json::from_value(json!({
            "apiVersion": "preflight.dev/v1alpha1", "kind": "UpdatePreflight",
            "metadata": {"name": name, "uid": uid.trim()},
            "spec": object["spec"], "status": status}))
        .unwrap();
        self.result_key().sign(&signed)
    }

    pub fn var(&self, name: &str) -> &str {
        self.plane.var(name)
    }

    pub fn dir(&self) -> &Path {
        self.plane.dir()
    }

    pub fn kubectl<S: AsRef<std::ffi::OsStr>>(&self, user: User, args: &[S]) -> Output {
        self.plane.kubectl_with(user.kubeconfig(), args)
    }

    /// kubectl that must succeed.
    pub fn admin<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(&self, args: &[S]) -> String {
        self.plane.admin(args)
    }

    pub fn apply_json(&self, object: &Value) {
        self.plane.apply_json(object);
    }

    fn install_crds(&self) {
        // OpenShift's own CRDs (tests/data/openshift-crds), so our objects
        // are validated by the real schemas; then the gate's.
        self.plane.install_cluster_crds();
        for crd in ["updatepreflights", "preflightchecks"] {
            self.plane.apply_file(
                &PathBuf::from(ROOT).join(format!("deploy/crds/{crd}.preflight.dev.yaml")),
            );
        }
        self.plane.wait_established(&[
            "updatepreflights.preflight.dev",
            "preflightchecks.preflight.dev",
        ]);
        // Established is not yet served: wait until discovery lists them.
        for resource in [
            "clusterversions",
            "clusteroperators",
            "updatepreflights",
            "preflightchecks",
        ] {
            wait_for(
                &format!("{resource} to be served"),
                Duration::from_secs(30),
                || {
                    self.kubectl(User::Admin, &["get", resource])
                        .ok
                        .then_some(())
                },
            );
        }
    }

    /// A token of the ServiceAccount `name` in `default`, made now; bound to
    /// deploy/base's preflight-gate-metrics-reader ClusterRole when
    /// `reads_metrics`.
    pub fn service_account_token(&self, name: &str, reads_metrics: bool) -> String {
        let _ = self.kubectl(
            User::Admin,
            &["create", "serviceaccount", name, "-n", "default"],
        );
        if reads_metrics {
            let rbac = std::fs::read_to_string(format!("{ROOT}/deploy/base/rbac.yaml")).unwrap();
            let role: Value = rbac
                .split("\n---\n")
                .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap())
                .find(|doc| doc["metadata"]["name"] == "preflight-gate-metrics-reader")
                .expect("deploy/base/rbac.yaml has preflight-gate-metrics-reader");
            self.apply_json(&role);
            self.apply_json(&json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": format!("e2e-{name}-metrics-reader")},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": "preflight-gate-metrics-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}]}));
        }
        self.admin(&["create", "token", name, "-n", "default", "--duration=24h"])
            .trim()
            .to_owned()
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
            "apiGroups": ["preflight.dev"], "resources": ["updatepreflights"], "verbs": ["override", "window"]}]),
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

    /// The example ClusterVersion (see `example_cluster_version`), its
    /// status written through the subresource as the CVO writes it.
    fn create_cluster_version(&self) {
        self.plane
            .put_cluster_version(&control_plane::example_cluster_version());
    }

    /// Merges `status` into the ClusterVersion's, as the CVO writes it.
    pub fn patch_cluster_version_status(&self, status: &Value) {
        self.plane.patch_cluster_version_status(status);
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
        serve_in_process(args);
        wait_for("the gate to become ready", Duration::from_secs(30), || {
            (self.scrape_status_on(admin_port, "/readyz") == Some(200)).then_some(())
        });
        written.ca_bundle()
    }

    fn scrape_status_on(&self, admin_port: u16, path: &str) -> Option<u16> {
        let (status, _) = http_get_on(admin_port, path, Some(&self.scrape_token))?;
        Some(status)
    }

    fn http_get(&self, path: &str) -> Option<(u16, String)> {
        http_get_on(self.admin_port, path, Some(&self.scrape_token))
    }

    /// Starts one more gate, with `extra` flags, registers the webhook
    /// configuration to call it instead, and waits until the API server
    /// does. The next test's `lock()` points the webhook back at the world's
    /// own gate; this one stays up, unused, until the run ends.
    pub fn switch_to_gate_with(&self, extra: &[&str]) -> String {
        let (gate_port, admin_port) = (free_port(), free_port());
        let ca_bundle = self.start_gate(gate_port, admin_port, extra);
        let base = format!("https://127.0.0.1:{gate_port}");
        let url = format!("{base}{}", preflight_gate::server::webhook::PATH);
        let mut config = self.webhook_configuration(&base);
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

    /// The gate's metrics once the sample `name{labels}` satisfies `done`:
    /// what an allowed change leaves is recorded when the gate's watch
    /// sees the change stored, a moment after the write returns.
    pub fn wait_for_metric(
        &self,
        name: &str,
        labels: &[&str],
        done: impl Fn(f64) -> bool,
    ) -> String {
        wait_for(
            &format!("{name}{labels:?} as expected"),
            Duration::from_secs(20),
            || {
                let text = self.metrics();
                done(metric(&text, name, labels)).then_some(text)
            },
        )
    }

    /// The webhook configuration of deploy/base, each webhook pointed at
    /// its own path under `base` (`https://host:port`).
    pub fn webhook_configuration(&self, base: &str) -> Value {
        let yaml = std::fs::read_to_string(format!("{ROOT}/deploy/base/webhook.yaml")).unwrap();
        let mut config: Value = serde_saphyr::from_str(&yaml).unwrap();
        config["metadata"]["annotations"] = json!({});
        for webhook in config["webhooks"].as_array_mut().unwrap() {
            let path = webhook["clientConfig"]["service"]["path"]
                .as_str()
                .unwrap()
                .to_owned();
            webhook["clientConfig"] =
                json!({"url": format!("{base}{path}"), "caBundle": self.ca_bundle});
        }
        config
    }

    /// Posts a review straight to the gate, bypassing the API server but
    /// presenting its webhook client certificate.
    pub fn post_review(&self, review: &Value) -> Value {
        self.post_review_to(self.gate_port, review)
    }

    /// Starts one more replica of the gate beside the world's own, on the
    /// same cluster, which the API server does not call: only a caller
    /// reaching its port sends it a review. Returns its (webhook, admin)
    /// ports.
    pub fn start_other_replica(&self) -> (u16, u16) {
        let (gate_port, admin_port) = (free_port(), free_port());
        self.start_gate(gate_port, admin_port, &[]);
        (gate_port, admin_port)
    }

    /// The metrics of the gate whose admin port is `admin_port`.
    pub fn metrics_on(&self, admin_port: u16) -> String {
        http_get_on(admin_port, "/metrics", Some(&self.scrape_token))
            .expect("the admin port answers")
            .1
    }

    /// Posts a review straight to the gate on `gate_port`, presenting the
    /// API server's webhook client certificate: what any caller can do on
    /// an overlay where the API server presents none.
    pub fn post_review_to(&self, gate_port: u16, review: &Value) -> Value {
        let response = self
            .post_review_to_as(gate_port, review, Some(&self.api_server_identity()))
            .expect("the gate answers the API server's identity");
        serde_json::from_str(&response).unwrap()
    }

    fn api_server_identity(&self) -> Vec<u8> {
        [
            std::fs::read(self.var("WEBHOOK_CLIENT_CERT")).unwrap(),
            std::fs::read(self.var("WEBHOOK_CLIENT_KEY")).unwrap(),
        ]
        .concat()
    }

    /// Posts a review straight to the gate as a caller presenting
    /// `identity` (PEM certificate and key), or no certificate; returns the
    /// body, or the error of the connection.
    pub fn post_review_as(
        &self,
        review: &Value,
        identity: Option<&[u8]>,
    ) -> Result<String, reqwest::Error> {
        self.post_review_to_as(self.gate_port, review, identity)
    }

    fn post_review_to_as(
        &self,
        gate_port: u16,
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
                .add_root_certificate(
                    reqwest::Certificate::from_pem(&self.ca_pem(gate_port)).unwrap(),
                );
            if let Some(pem) = identity {
                client = client.identity(reqwest::Identity::from_pem(pem).unwrap());
            }
            let url = format!("https://localhost:{gate_port}/validate/clusterversion");
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

    fn ca_pem(&self, gate_port: u16) -> Vec<u8> {
        std::fs::read(self.dir().join(format!("certs-{gate_port}/ca.crt"))).unwrap()
    }

    /// UpdatePreflight objects, by name.
    pub fn update_preflights(&self) -> Vec<Value> {
        let list: Value =
            serde_json::from_str(&self.admin(&["get", "updatepreflights", "-o", "json"])).unwrap();
        list["items"].as_array().unwrap().clone()
    }

    /// Waits until the object for `image` satisfies `done`; returns it.
    pub fn wait_for_result(&self, image: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        wait_for(
            &format!("an UpdatePreflight for {image} {what}"),
            Duration::from_secs(90),
            || {
                self.update_preflights()
                    .into_iter()
                    .find(|o| o["spec"]["image"] == image && done(o))
            },
        )
    }

    pub fn restart_apiserver(&self, down_for: Duration) -> std::thread::JoinHandle<Output> {
        let seconds = down_for.as_secs().to_string();
        std::thread::spawn(move || {
            run(Command::new(format!("{ROOT}/tests/control-plane/restart-apiserver")).arg(seconds))
        })
    }

    pub fn gate_url(&self) -> String {
        format!("{}/validate/clusterversion", self.gate_base())
    }

    /// Where the world's gate listens, each webhook at its own path.
    pub fn gate_base(&self) -> String {
        format!("https://127.0.0.1:{}", self.gate_port)
    }

    /// Registers the webhook and waits until the API server calls it.
    pub fn register_webhook(&self) {
        self.apply_json(&self.webhook_configuration(&self.gate_base()));
        self.wait_for_webhook();
    }

    /// Waits until the API server calls the webhook as registered: a
    /// dry-run target change is denied with the sample's reasons.
    pub fn wait_for_webhook(&self) {
        poll(
            "the webhook to take effect",
            Duration::from_secs(30),
            || {
                let out = self.kubectl(
                    User::Admin,
                    &merge_patch_args("4.15.3", &["--dry-run=server"]),
                );
                if !out.ok && out.stderr.contains("preflight for 4.15.3 failed") {
                    Ok(())
                } else {
                    Err(out.stderr)
                }
            },
        );
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
        wait_for(
            &format!("a {reason} Event mentioning {text:?}"),
            Duration::from_secs(60),
            || {
                self.events(reason)
                    .into_iter()
                    .find(|e| e["note"].as_str().unwrap_or("").contains(text))
            },
        )
    }

    /// The API server's audit log, when the control plane writes one.
    pub fn audit_log(&self) -> Option<String> {
        let path = self.plane.get("AUDIT_LOG")?;
        std::fs::read_to_string(path).ok()
    }
}

/// The sum of a metric's samples with all of `labels`.
/// `preflight-gate serve` with `args` (the program's name first), in this
/// process, on a thread and a runtime of its own, until the tests end.
pub fn serve_in_process(args: Vec<String>) {
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
}

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

pub fn http_get_on(admin_port: u16, path: &str, token: Option<&str>) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", admin_port)).ok()?;
    let authorization = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\n{authorization}Connection: close\r\n\r\n"
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
