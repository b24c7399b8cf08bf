//! The node suite's world: a control plane with a real node
//! (`tests/control-plane/up --node`), the gate's image built by
//! deploy/image/build and the test images by tests/node/images, all imported
//! into the node's containerd, and the gate deployed from
//! deploy/overlays/node with a serving certificate from the test CA. Set up
//! once per run; tests take turns through `lock()`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");
pub const NAMESPACE: &str = "preflight-gate";
pub const WEBHOOK: &str = "clusterversions.preflight.dev";
pub const LEASE: &str = "preflight-gate-controller";

pub struct World {
    env: HashMap<String, String>,
    pub check_image: String,
    pub release_image: String,
    /// The manifest digest deploy/image/build printed.
    pub gate_digest: String,
    /// The image's config digest: its ID, as the kubelet reports it.
    pub gate_image_id: String,
    dir: tempfile::TempDir,
}

pub struct Output {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

static WORLD: OnceLock<World> = OnceLock::new();
static TURN: Mutex<()> = Mutex::new(());

/// The world, set up on first use, and this test's turn with it. Every turn
/// starts with the gate rolled out, the ClusterVersion without a target and
/// healthy ClusterOperators.
pub fn lock() -> (MutexGuard<'static, ()>, &'static World) {
    let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let world = WORLD.get_or_init(World::set_up);
    world.reset();
    (turn, world)
}

pub fn run(command: &mut Command) -> Output {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    Output {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `NAME=value` lines.
fn vars(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Polls `f` until it returns `Some`, for at most `limit`.
pub fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The state dir of the node suite's control plane: its own, so it never
/// shares an API server with the e2e suite.
pub fn cp_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("PREFLIGHT_GATE_NODE_CP_DIR") {
        return dir.into();
    }
    std::env::temp_dir().join("preflight-gate-node")
}

impl World {
    fn set_up() -> World {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let up = run(Command::new(format!("{ROOT}/tests/control-plane/up"))
            .arg("--node")
            .env("PREFLIGHT_GATE_CP_DIR", cp_dir()));
        assert!(up.ok, "the node did not come up:\n{}", up.stderr);
        let env_file = up
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("source "))
            .expect("up prints the env file")
            .trim()
            .to_owned();
        let sourced = run(Command::new("bash")
            .args(["-c", "set -a; source \"$1\"; env", "env"])
            .arg(&env_file));
        assert!(sourced.ok, "{}", sourced.stderr);
        let env = vars(&sourced.stdout);
        let dir = tempfile::tempdir().unwrap();
        let mut world = World {
            env,
            check_image: String::new(),
            release_image: String::new(),
            gate_digest: String::new(),
            gate_image_id: String::new(),
            dir,
        };
        (world.gate_digest, world.gate_image_id) = world.import_gate_image();
        let images = run(Command::new(format!("{ROOT}/tests/node/images"))
            .arg(world.dir().join("images"))
            .envs(&world.env));
        assert!(images.ok, "tests/node/images failed:\n{}", images.stderr);
        let images = vars(&images.stdout);
        world.check_image = images["CHECK_IMAGE"].clone();
        world.release_image = images["RELEASE_IMAGE"].clone();
        world.install_openshift_crds();
        world.create_cluster_version();
        world.deploy_gate();
        world
    }

    pub fn var(&self, name: &str) -> &str {
        self.env
            .get(name)
            .unwrap_or_else(|| panic!("{name} is not in the control plane's env file"))
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// kubectl as the admin (system:masters).
    pub fn kubectl<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Output {
        run(Command::new(self.var("KUBECTL"))
            .arg("--kubeconfig")
            .arg(self.var("ADMIN_KUBECONFIG"))
            .args(args))
    }

    /// kubectl that must succeed; its stdout.
    pub fn admin<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(&self, args: &[S]) -> String {
        let out = self.kubectl(args);
        assert!(out.ok, "kubectl {args:?} failed: {}", out.stderr);
        out.stdout
    }

    pub fn get_json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.admin(&all)).unwrap()
    }

    pub fn apply_json(&self, object: &Value) {
        let path = self.dir().join(format!("apply-{}.json", unique()));
        std::fs::write(&path, object.to_string()).unwrap();
        self.admin(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            path.to_str().unwrap(),
        ]);
    }

    /// The gate's image: from PREFLIGHT_GATE_IMAGE_TAR (tests/run builds it
    /// from the release binary), or built here from the binary under test.
    /// Imported into the node's containerd; returns its manifest and config
    /// digests.
    fn import_gate_image(&self) -> (String, String) {
        let (tar, digest) = match std::env::var("PREFLIGHT_GATE_IMAGE_TAR") {
            Ok(tar) => {
                let index: Value =
                    serde_json::from_str(&self.tar_member(&tar, "index.json")).unwrap();
                let digest = index["manifests"][0]["digest"].as_str().unwrap().to_owned();
                (PathBuf::from(tar), digest)
            }
            Err(_) => {
                let tar = self.dir().join("preflight-gate.tar");
                let built = run(Command::new(format!("{ROOT}/deploy/image/build"))
                    .arg(&tar)
                    .env(
                        "PREFLIGHT_GATE_BINARY",
                        env!("CARGO_BIN_EXE_preflight-gate"),
                    ));
                assert!(built.ok, "deploy/image/build failed:\n{}", built.stderr);
                (tar, built.stdout.trim().to_owned())
            }
        };
        let imported = run(Command::new(self.var("CTR_BIN"))
            .args(["--address", self.var("CONTAINERD_ADDRESS"), "-n", "k8s.io"])
            .args(["images", "import"])
            .arg(&tar));
        assert!(
            imported.ok,
            "ctr images import failed:\n{}",
            imported.stderr
        );
        let tar = tar.to_str().unwrap();
        let manifest: Value = serde_json::from_str(&self.tar_member(
            tar,
            &format!("blobs/sha256/{}", digest.trim_start_matches("sha256:")),
        ))
        .unwrap();
        let config = manifest["config"]["digest"].as_str().unwrap().to_owned();
        (digest, config)
    }

    fn tar_member(&self, tar: &str, member: &str) -> String {
        let out = run(Command::new("tar").args(["-xOf", tar, member]));
        assert!(out.ok, "cannot read {member} from {tar}: {}", out.stderr);
        out.stdout
    }

    fn install_openshift_crds(&self) {
        // OpenShift's own CRDs, as the cluster serves them.
        let crd = |file: &str| {
            PathBuf::from(ROOT)
                .join("tests/data/openshift-crds")
                .join(file)
        };
        for crd in [
            crd("0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml"),
            crd("0000_00_cluster-version-operator_01_clusteroperators.crd.yaml"),
        ] {
            let path = crd.to_str().unwrap();
            self.admin(&["apply", "--server-side", "--force-conflicts", "-f", path]);
        }
        self.admin(&[
            "wait",
            "--for",
            "condition=established",
            "--timeout=60s",
            "crd/clusterversions.config.openshift.io",
            "crd/clusteroperators.config.openshift.io",
        ]);
    }

    /// deploy/overlays/node, the serving Secret from the test CA, the
    /// webhook's caBundle; then waits for the rollout.
    fn deploy_gate(&self) {
        for ns in [
            "openshift-config",
            "openshift-config-managed",
            "openshift-ingress-operator",
        ] {
            let _ = self.kubectl(&["create", "namespace", ns]);
        }
        self.admin(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-k",
            &format!("{ROOT}/deploy/overlays/node"),
        ]);
        self.admin(&[
            "wait",
            "--for",
            "condition=established",
            "--timeout=60s",
            "crd/updatepreflights.preflight.dev",
            "crd/preflightchecks.preflight.dev",
        ]);
        self.write_serving_secret();
        let ca = base64(&std::fs::read(self.var("CA_CERT")).unwrap());
        let patch =
            json!([{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": ca}]);
        self.admin(&[
            "patch",
            "validatingwebhookconfiguration",
            "preflight-gate",
            "--type=json",
            "-p",
            &patch.to_string(),
        ]);
        self.wait_for_rollout();
    }

    pub fn wait_for_rollout(&self) {
        self.admin(&[
            "rollout",
            "status",
            "-n",
            NAMESPACE,
            "deployment/preflight-gate",
            "--timeout=240s",
        ]);
    }

    /// A new key and certificate for the Service's names, signed by the test
    /// CA, written to the Secret preflight-gate-tls (created or replaced).
    /// Returns the certificate's serial number.
    pub fn write_serving_secret(&self) -> String {
        let dir = self.dir().join(format!("serving-{}", unique()));
        std::fs::create_dir_all(&dir).unwrap();
        let (key, csr, crt) = (
            dir.join("tls.key"),
            dir.join("tls.csr"),
            dir.join("tls.crt"),
        );
        let ext = dir.join("ext");
        std::fs::write(
            &ext,
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n\
             extendedKeyUsage=serverAuth\n\
             subjectAltName=DNS:preflight-gate.preflight-gate.svc,DNS:preflight-gate.preflight-gate.svc.cluster.local\n",
        )
        .unwrap();
        let openssl = |args: &[&std::ffi::OsStr]| {
            let out = run(Command::new("openssl").args(args));
            assert!(out.ok, "openssl {args:?}: {}", out.stderr);
            out.stdout
        };
        openssl(&[
            "genpkey".as_ref(),
            "-algorithm".as_ref(),
            "EC".as_ref(),
            "-pkeyopt".as_ref(),
            "ec_paramgen_curve:P-256".as_ref(),
            "-out".as_ref(),
            key.as_os_str(),
        ]);
        openssl(&[
            "req".as_ref(),
            "-new".as_ref(),
            "-key".as_ref(),
            key.as_os_str(),
            "-subj".as_ref(),
            "/CN=preflight-gate.preflight-gate.svc".as_ref(),
            "-out".as_ref(),
            csr.as_os_str(),
        ]);
        openssl(&[
            "x509".as_ref(),
            "-req".as_ref(),
            "-in".as_ref(),
            csr.as_os_str(),
            "-CA".as_ref(),
            self.var("CA_CERT").as_ref(),
            "-CAkey".as_ref(),
            self.var("CA_KEY").as_ref(),
            "-set_serial".as_ref(),
            format!("0x{:x}", rand_serial()).as_ref(),
            "-days".as_ref(),
            "7".as_ref(),
            "-sha256".as_ref(),
            "-extfile".as_ref(),
            ext.as_os_str(),
            "-out".as_ref(),
            crt.as_os_str(),
        ]);
        let serial = openssl(&[
            "x509".as_ref(),
            "-noout".as_ref(),
            "-serial".as_ref(),
            "-in".as_ref(),
            crt.as_os_str(),
        ]);
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "preflight-gate-tls", "namespace": NAMESPACE},
            "data": {
                "tls.crt": base64(&std::fs::read(&crt).unwrap()),
                "tls.key": base64(&std::fs::read(&key).unwrap()),
            },
        });
        self.apply_json(&secret);
        serial
            .trim()
            .trim_start_matches("serial=")
            .to_ascii_lowercase()
    }

    /// The example ClusterVersion of examples/reviews/ (at 4.14.1), its
    /// status as the CVO writes it, and healthy ClusterOperators.
    fn create_cluster_version(&self) {
        let review: Value = serde_json::from_str(include_str!(
            "../../examples/reviews/update-to-4.14.12.json"
        ))
        .unwrap();
        let mut cv = review["request"]["oldObject"].clone();
        cv["metadata"] = json!({"name": "version"});
        cv["status"]["versionHash"] = json!("XGjSjKwUh");
        // The update graph offers the local release image only: the gate
        // checks offered targets ahead of time, and the node must never try
        // to pull a release from outside.
        cv["status"]["availableUpdates"] = json!([{"version": "4.99.0",
            "image": self.release_image, "channels": ["stable-4.99"]}]);
        cv["status"]["conditionalUpdates"] = json!([]);
        if !self.kubectl(&["get", "clusterversion", "version"]).ok {
            let spec_only = json!({"apiVersion": cv["apiVersion"], "kind": cv["kind"],
                "metadata": cv["metadata"], "spec": cv["spec"]});
            let path = self.dir().join("cv.json");
            std::fs::write(&path, spec_only.to_string()).unwrap();
            self.admin(&["create", "-f", path.to_str().unwrap()]);
        }
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
        for name in ["authentication", "etcd", "kube-apiserver", "machine-config"] {
            if !self.kubectl(&["get", "clusteroperator", name]).ok {
                self.apply_json(&json!({"apiVersion": "config.openshift.io/v1",
                    "kind": "ClusterOperator", "metadata": {"name": name}, "spec": {}}));
            }
        }
        self.set_operator_degraded("machine-config", None);
    }

    /// Writes the ClusterOperator's status: healthy, or Degraded with
    /// `message`.
    pub fn set_operator_degraded(&self, name: &str, message: Option<&str>) {
        let names = ["authentication", "etcd", "kube-apiserver", "machine-config"];
        for co in names.iter().filter(|n| message.is_none() || **n == name) {
            let now = jiff::Timestamp::now();
            // Degraded for 40 minutes: past `oc adm upgrade status`' 5, so
            // no longer settling, and past the ClusterOperatorDegraded
            // alert's `for` of 30, so named by it (model::grace).
            let since = (now - jiff::SignedDuration::from_mins(40)).to_string();
            let now = now.to_string();
            let (degraded, reason, text, since) = match message {
                Some(m) if *co == name => ("True", "TestDegraded", m, since.as_str()),
                _ => ("False", "AsExpected", "ok", now.as_str()),
            };
            let status = json!({"status": {"conditions": [
                {"type": "Available", "status": "True", "lastTransitionTime": now, "reason": "AsExpected", "message": "ok"},
                {"type": "Degraded", "status": degraded, "lastTransitionTime": since, "reason": reason, "message": text},
                {"type": "Progressing", "status": "False", "lastTransitionTime": now, "reason": "AsExpected", "message": "ok"},
                {"type": "Upgradeable", "status": "True", "lastTransitionTime": now, "reason": "AsExpected", "message": "ok"}],
                "versions": [{"name": "operator", "version": "4.14.1"}]}});
            self.admin(&[
                "patch",
                "clusteroperator",
                co,
                "--subresource=status",
                "--type=merge",
                "-p",
                &status.to_string(),
            ]);
        }
    }

    /// No target, no results, no PreflightChecks, healthy operators, and
    /// the gate rolled out.
    fn reset(&self) {
        let cv = self.get_json(&["get", "clusterversion", "version"]);
        if cv["spec"].get("desiredUpdate").is_some() {
            self.admin(&[
                "patch",
                "clusterversion",
                "version",
                "--type=json",
                "-p",
                r#"[{"op":"remove","path":"/spec/desiredUpdate"}]"#,
            ]);
        }
        self.admin(&["delete", "preflightchecks", "--all", "--wait=true"]);
        self.admin(&["delete", "updatepreflights", "--all", "--wait=true"]);
        self.set_operator_degraded("machine-config", None);
        self.wait_for_rollout();
    }

    /// The ClusterVersion.
    pub fn cluster_version(&self) -> Value {
        self.get_json(&["get", "clusterversion", "version"])
    }

    pub fn update_preflights(&self) -> Vec<Value> {
        self.get_json(&["get", "updatepreflights"])["items"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// Waits until the UpdatePreflight for `image` satisfies `done`.
    pub fn wait_for_result(
        &self,
        image: &str,
        limit: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        wait_for(&format!("the UpdatePreflight of {image}"), limit, || {
            self.update_preflights()
                .into_iter()
                .find(|o| o["spec"]["image"] == image && done(o))
        })
    }

    /// The gate's pods, Running or not, oldest first.
    pub fn gate_pods(&self) -> Vec<Value> {
        let mut pods = self.get_json(&[
            "get",
            "pods",
            "-n",
            NAMESPACE,
            "-l",
            "app.kubernetes.io/name=preflight-gate,app.kubernetes.io/component=webhook",
        ])["items"]
            .as_array()
            .unwrap()
            .clone();
        pods.sort_by_key(|p| {
            p["metadata"]["creationTimestamp"]
                .as_str()
                .map(str::to_owned)
        });
        pods
    }

    pub fn lease_holder(&self) -> String {
        self.kubectl(&[
            "get",
            "lease",
            "-n",
            NAMESPACE,
            LEASE,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ])
        .stdout
    }

    /// A target change as `oc adm upgrade --to-image IMAGE
    /// --allow-explicit-upgrade` sends it (a JSON merge patch).
    pub fn request_image(&self, image: &str, extra: &[&str]) -> Output {
        let patch =
            json!({"spec": {"desiredUpdate": {"image": image, "version": "", "force": false}}});
        let mut args = vec![
            "patch".to_owned(),
            "clusterversion".into(),
            "version".into(),
            "--type=merge".into(),
            "-p".into(),
            patch.to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        self.kubectl(&args)
    }

    /// Requests `image` until the gate has a verdict (it first answers that
    /// a run started); returns the verdict.
    pub fn request_until_verdict(&self, image: &str, extra: &[&str]) -> Output {
        let deadline = Instant::now() + Duration::from_secs(240);
        loop {
            let out = self.request_image(image, extra);
            if out.ok || !out.stderr.contains("is running, retry") {
                return out;
            }
            assert!(Instant::now() < deadline, "never a verdict: {}", out.stderr);
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}

fn unique() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::Relaxed).to_string()
}

fn rand_serial() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now()) >> 1
}

pub fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
