//! The node suite's world: a control plane with a real node
//! (`tests/control-plane/up --node`), the gate's image built by
//! deploy/image/build and the test images by tests/node/images, all imported
//! into the node's containerd, and the gate deployed from
//! deploy/overlays/node with a serving certificate from the test CA. Set up
//! once per run; tests take turns through `lock()`. The control plane's
//! plumbing is tests/common/control_plane.rs, shared with the e2e suite.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};

#[path = "../common/control_plane.rs"]
mod control_plane;

use crate::support::poll_every;
use control_plane::unique;
pub use control_plane::{
    CLEAR_TARGET, ControlPlane, OPERATORS, Output, ROOT, example_cluster_version, merge_patch_args,
    operator_status, run, vars, wait_for,
};

pub const NAMESPACE: &str = "preflight-gate";
/// Where the check Jobs and the extraction pod run (deploy/base's
/// `--jobs-namespace`), apart from the gate.
pub const CHECKS_NAMESPACE: &str = "preflight-gate-checks";
/// The Secret that gives the gate the webhook client CA (`--client-ca`).
pub const CLIENT_CA_SECRET: &str = "preflight-gate-webhook-client-ca";
pub const WEBHOOK: &str = "clusterversions.preflight.dev";
pub const LEASE: &str = "preflight-gate-controller";

pub struct World {
    plane: ControlPlane,
    pub check_image: String,
    pub release_image: String,
    /// The manifest digest deploy/image/build printed.
    pub gate_digest: String,
    /// The image's config digest: its ID, as the kubelet reports it.
    pub gate_image_id: String,
}

static WORLD: OnceLock<World> = OnceLock::new();
static TURN: Mutex<()> = Mutex::new(());

/// The world, set up on first use, and this test's turn with it. Every turn
/// starts with the gate rolled out, the ClusterVersion without a target and
/// healthy ClusterOperators.
pub fn lock() -> (MutexGuard<'static, ()>, &'static World) {
    let turn = turn();
    let world = WORLD.get_or_init(World::set_up);
    world.reset();
    (turn, world)
}

/// This test's turn with the machine, without the shared world: for a test
/// that brings up a control plane of its own and must not share the two
/// cores with another test's rollouts.
pub fn turn() -> MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// The gate's production image, as deploy/image/build made it: the OCI
/// archive and its digests. Built once per run, whichever test asks first.
pub struct GateImage {
    pub tar: PathBuf,
    /// The manifest digest deploy/image/build printed.
    pub digest: String,
    /// The image's config digest: its ID, as the kubelet reports it.
    pub image_id: String,
    _dir: Option<tempfile::TempDir>,
}

static GATE_IMAGE: OnceLock<GateImage> = OnceLock::new();

/// The gate's image: from PREFLIGHT_GATE_IMAGE_TAR (tests/run builds it
/// from the release binary), or built here by deploy/image/build from the
/// binary under test.
pub fn gate_image() -> &'static GateImage {
    GATE_IMAGE.get_or_init(|| {
        let (tar, digest, dir) = match std::env::var("PREFLIGHT_GATE_IMAGE_TAR") {
            Ok(tar) => {
                let index: Value = serde_json::from_str(&tar_member(&tar, "index.json")).unwrap();
                let digest = index["manifests"][0]["digest"].as_str().unwrap().to_owned();
                (PathBuf::from(tar), digest, None)
            }
            Err(_) => {
                let dir = tempfile::tempdir().unwrap();
                let tar = dir.path().join("preflight-gate.tar");
                let built = run(Command::new(format!("{ROOT}/deploy/image/build"))
                    .arg(&tar)
                    .env(
                        "PREFLIGHT_GATE_BINARY",
                        env!("CARGO_BIN_EXE_preflight-gate"),
                    ));
                assert!(built.ok, "deploy/image/build failed:\n{}", built.stderr);
                (tar, built.stdout.trim().to_owned(), Some(dir))
            }
        };
        let manifest: Value = serde_json::from_str(&tar_member(
            tar.to_str().unwrap(),
            &format!("blobs/sha256/{}", digest.trim_start_matches("sha256:")),
        ))
        .unwrap();
        let image_id = manifest["config"]["digest"].as_str().unwrap().to_owned();
        GateImage {
            tar,
            digest,
            image_id,
            _dir: dir,
        }
    })
}

/// A member of a tar archive, as text.
pub fn tar_member(tar: &str, member: &str) -> String {
    let out = run(Command::new("tar").args(["-xOf", tar, member]));
    assert!(out.ok, "cannot read {member} from {tar}: {}", out.stderr);
    out.stdout
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
        let plane = ControlPlane::up(
            Command::new(format!("{ROOT}/tests/control-plane/up"))
                .arg("--node")
                .env("PREFLIGHT_GATE_CP_DIR", cp_dir()),
        );
        let mut world = World {
            plane,
            check_image: String::new(),
            release_image: String::new(),
            gate_digest: String::new(),
            gate_image_id: String::new(),
        };
        (world.gate_digest, world.gate_image_id) = world.import_gate_image();
        let images = run(Command::new(format!("{ROOT}/tests/node/images"))
            .arg(world.dir().join("images"))
            .envs(world.plane.env()));
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
        self.plane.var(name)
    }

    pub fn dir(&self) -> &Path {
        self.plane.dir()
    }

    /// kubectl as the admin (system:masters).
    pub fn kubectl<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Output {
        self.plane.kubectl(args)
    }

    /// kubectl that must succeed; its stdout.
    pub fn admin<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(&self, args: &[S]) -> String {
        self.plane.admin(args)
    }

    pub fn get_json(&self, args: &[&str]) -> Value {
        self.plane.get_json(args)
    }

    pub fn apply_json(&self, object: &Value) {
        self.plane.apply_json(object);
    }

    /// The gate's image (`gate_image`), imported into the node's
    /// containerd; returns its manifest and config digests.
    fn import_gate_image(&self) -> (String, String) {
        let image = gate_image();
        let imported = run(Command::new(self.var("CTR_BIN"))
            .args(["--address", self.var("CONTAINERD_ADDRESS"), "-n", "k8s.io"])
            .args(["images", "import"])
            .arg(&image.tar));
        assert!(
            imported.ok,
            "ctr images import failed:\n{}",
            imported.stderr
        );
        (image.digest.clone(), image.image_id.clone())
    }

    fn install_openshift_crds(&self) {
        // OpenShift's own CRDs, as the cluster serves them.
        self.plane.install_cluster_crds();
    }

    /// deploy/overlays/node, the serving Secret from the test CA, the
    /// webhook client CA the API server's client certificate is signed by,
    /// the webhook's caBundle; then waits for the rollout.
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
        self.plane.wait_established(&[
            "updatepreflights.preflight.dev",
            "preflightchecks.preflight.dev",
        ]);
        self.write_serving_secret();
        // Only the API server may ask: the certificate of the CA `up` signs
        // its webhook client certificate with, never the CA's key.
        self.apply_json(&json!({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": CLIENT_CA_SECRET, "namespace": NAMESPACE},
            "data": {"ca.crt": base64(&std::fs::read(self.var("WEBHOOK_CLIENT_CA")).unwrap())},
        }));
        let ca = base64(&std::fs::read(self.var("CA_CERT")).unwrap());
        let patch = json!([
            {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": ca},
            {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": ca},
        ]);
        self.admin(&[
            "patch",
            "validatingwebhookconfiguration",
            "preflight-gate",
            "--type=json",
            "-p",
            &patch.to_string(),
        ]);
        // The world's release is built here and signed by no one: the gate
        // runs its pods because the administrator lists it by digest, as
        // docs/checks.md says to for a release the cluster cannot verify.
        self.admin(&[
            "set",
            "env",
            "-n",
            NAMESPACE,
            "deployment/preflight-gate",
            &format!("PREFLIGHT_GATE_TRUSTED_RELEASES={}", self.release_image),
        ]);
        // The Deployment names the image by tag: a node reused from an
        // earlier run still runs that run's image under it. The image's ID
        // in the pod template rolls the pods onto this one (and changes
        // nothing where they run it already).
        self.admin(&[
            "patch",
            "-n",
            NAMESPACE,
            "deployment/preflight-gate",
            "--type=merge",
            "-p",
            &json!({"spec": {"template": {"metadata": {"annotations": {
                "preflight-gate.test/image-id": self.gate_image_id,
            }}}}})
            .to_string(),
        ]);
        self.wait_for_rollout();
        wait_for(
            "the pods of an earlier image to be gone",
            Duration::from_secs(120),
            || {
                self.gate_pods()
                    .iter()
                    .all(|p| {
                        p["metadata"]["annotations"]["preflight-gate.test/image-id"]
                            == self.gate_image_id.as_str()
                    })
                    .then_some(())
            },
        );
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
        let mut cv = control_plane::example_cluster_version();
        // The update graph offers the local release image only: the gate
        // checks offered targets ahead of time, and the node must never try
        // to pull a release from outside.
        cv["status"]["availableUpdates"] = json!([{"version": "4.99.0",
            "image": self.release_image, "channels": ["stable-4.99"]}]);
        cv["status"]["conditionalUpdates"] = json!([]);
        self.plane.put_cluster_version(&cv);
        self.set_operator_degraded("machine-config", None);
    }

    /// Writes the ClusterOperator's status: healthy, or Degraded with
    /// `message`.
    pub fn set_operator_degraded(&self, name: &str, message: Option<&str>) {
        // Degraded for 40 minutes: past `oc adm upgrade status`' 5, so no
        // longer settling, and past the ClusterOperatorDegraded alert's
        // `for` of 30, so named by it (model::grace).
        let since = jiff::Timestamp::now() - jiff::SignedDuration::from_mins(40);
        for co in OPERATORS
            .iter()
            .filter(|n| message.is_none() || **n == name)
        {
            let degraded = message.filter(|_| *co == name).map(|m| (m, since));
            self.plane
                .put_cluster_operator(co, &control_plane::operator_status(degraded));
        }
    }

    /// No target, no results, no PreflightChecks, healthy operators, and
    /// the gate rolled out.
    fn reset(&self) {
        let cv = self.get_json(&["get", "clusterversion", "version"]);
        if cv["spec"].get("desiredUpdate").is_some() {
            self.admin(&CLEAR_TARGET);
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
        self.kubectl(&control_plane::image_patch_args(image, extra))
    }

    /// Requests `image` until the gate has a verdict (it first answers that
    /// a run started); returns the verdict.
    pub fn request_until_verdict(&self, image: &str, extra: &[&str]) -> Output {
        poll_every(
            "a verdict",
            Duration::from_secs(240),
            Duration::from_secs(1),
            || {
                let out = self.request_image(image, extra);
                if out.ok || !out.stderr.contains("is running, retry") {
                    Ok(out)
                } else {
                    Err(out.stderr)
                }
            },
        )
    }
}

fn rand_serial() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now()) >> 1
}

pub fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
