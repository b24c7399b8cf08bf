//! docs/install.md on plain Kubernetes, as a reader follows it: the blocks
//! of "Before you install: the image" and "Install on plain Kubernetes",
//! read from the guide itself and run in its order, then those of "Verify"
//! and "Uninstall", on a node-backed control plane of the test's own
//! (`tests/control-plane/up --node`, apart from the shared world's, which
//! the guide's install would collide with) with the real cert-manager
//! (tests/node/cert-manager). The image is the production image
//! deploy/image/build made, loaded as the guide says for a cluster without
//! a registry; it must end up running, Ready, and answering the API server
//! through mutual TLS.
//!
//! The guide's blocks run through `bash -euo pipefail` as written. What is
//! substituted is only what the guide tells the reader to make their own:
//! the digest (theirs), the overlay's resource (`kubernetes` on plain
//! Kubernetes), the directory the API server reads the client certificate
//! from (any will do), and `kubectl` for `oc`, which is OpenShift's. A
//! block the guide marks `<!-- rendered: why -->` is skipped and said; a
//! block this test does not know how to follow fails it, so a guide that
//! grows a step is followed or this test breaks.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::poll_every;
use crate::world::{
    ControlPlane, OPERATORS, ROOT, cp_dir, example_cluster_version, gate_image, merge_patch_args,
    operator_status, run, turn, vars, wait_for,
};

const GUIDE: &str = "docs/install.md";
const NAMESPACE: &str = "preflight-gate";
const WEBHOOK: &str = "clusterversions.preflight.dev";
/// The target the guide's examples ask for; the test's cluster offers it.
const TARGET: &str = "4.15.3";
/// The guide's example digest, which the reader replaces with theirs.
const EXAMPLE_DIGEST: &str =
    "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
/// Where the guide keeps the API server's client certificate; any
/// directory the API server reads will do, it says.
const HOST_DIR: &str = "/etc/kubernetes/preflight-gate";

/// One fenced block of the guide.
#[derive(Debug)]
struct Block {
    line: usize,
    lang: String,
    text: String,
    /// The HTML comment just before it, if any.
    comment: Option<String>,
}

impl Block {
    fn rendered(&self) -> Option<&str> {
        let c = self.comment.as_deref()?;
        let why = c
            .trim_start_matches("<!--")
            .trim_start()
            .strip_prefix("rendered:")?;
        Some(why.trim_end_matches("-->").trim())
    }
}

/// The fenced blocks of the guide's section `heading` (a `## ` heading),
/// its subsections included, in order.
fn section(guide: &str, heading: &str) -> Vec<Block> {
    let lines: Vec<&str> = guide.lines().collect();
    let start = lines
        .iter()
        .position(|l| *l == format!("## {heading}"))
        .unwrap_or_else(|| panic!("{GUIDE} has no section \"{heading}\""));
    let mut blocks = Vec::new();
    let mut comment: Option<String> = None;
    let mut i = start + 1;
    while i < lines.len() && !lines[i].starts_with("## ") {
        let trimmed = lines[i].trim_start();
        if trimmed.starts_with("<!--") {
            let mut text = String::new();
            loop {
                text.push_str(lines[i].trim());
                text.push(' ');
                if lines[i].contains("-->") {
                    break;
                }
                i += 1;
            }
            comment = Some(text.trim().to_owned());
        } else if let Some(lang) = trimmed.strip_prefix("```") {
            let indent = lines[i].len() - trimmed.len();
            let mut end = i + 1;
            while !lines[end].trim_start().starts_with("```") {
                end += 1;
            }
            let text: Vec<&str> = lines[i + 1..end]
                .iter()
                .map(|l| &l[indent.min(l.len() - l.trim_start().len())..])
                .collect();
            blocks.push(Block {
                line: i + 1,
                lang: lang.trim().to_owned(),
                text: text.join("\n") + "\n",
                comment: comment.take(),
            });
            i = end;
        } else if !trimmed.is_empty() {
            comment = None;
        }
        i += 1;
    }
    blocks
}

/// `text` with `from` replaced by `to`; `from` must be there.
fn fill(text: &str, from: &str, to: &str) -> String {
    assert!(
        text.contains(from),
        "the guide no longer has {from}:\n{text}"
    );
    text.replace(from, to)
}

/// `kubectl` wherever the guide's shell text runs `oc`: as a command's
/// first word, after a pipe, `xargs -r` or `$(`.
fn kubectl_for_oc(script: &str) -> String {
    let mut out = String::new();
    let mut rest = script;
    while let Some(at) = rest.find("oc ") {
        let before = rest[..at].chars().last();
        let word = before.is_none_or(|c| c.is_whitespace() || "(|;&".contains(c));
        out.push_str(&rest[..at]);
        out.push_str(if word { "kubectl " } else { "oc " });
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    out
}

/// What a block printed.
struct Ran {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// The reader's shell on the control-plane host: `kubectl` and `ctr` on
/// PATH, the admin's kubeconfig, and the node's containerd.
struct Shell {
    dir: PathBuf,
    env: Vec<(String, String)>,
}

impl Shell {
    fn run(&self, script: &str) -> Ran {
        let out = Command::new("bash")
            .args(["-euo", "pipefail", "-c", script])
            .current_dir(&self.dir)
            .env_remove("KUBECONFIG")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap();
        Ran {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs a block of the guide, which must succeed; its stdout.
    fn block(&self, block: &Block, script: &str) -> String {
        eprintln!("{GUIDE}:{}: running\n{script}", block.line);
        let ran = self.run(script);
        assert!(
            ran.ok,
            "{GUIDE}:{}: failed:\n{script}\n{}\n{}",
            block.line, ran.stdout, ran.stderr
        );
        ran.stdout
    }
}

/// The test's own node-backed control plane and cert-manager, stopped
/// (and the plane's state removed) when the test ends, however it ends.
struct Cluster {
    plane: ControlPlane,
    dir: PathBuf,
    cert_manager: Vec<(String, Child)>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, child) in &mut self.cert_manager {
            let _ = child.kill();
            let _ = child.wait();
        }
        // What went on, before `down` removes the state dir with the logs.
        if std::thread::panicking() {
            for log in ["controller.log", "cainjector.log", "kube-apiserver.log"] {
                let text = std::fs::read_to_string(self.dir.join(log)).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(20).collect();
                eprintln!("{log}, last lines:");
                for line in tail.iter().rev() {
                    eprintln!("  {line}");
                }
            }
        }
        let down = run(Command::new(format!("{ROOT}/tests/control-plane/down"))
            .env("PREFLIGHT_GATE_CP_DIR", &self.dir));
        if !down.ok {
            eprintln!(
                "tests/control-plane/down failed for {}: {}",
                self.dir.display(),
                down.stderr
            );
        }
    }
}

impl Cluster {
    /// A fresh node-backed control plane in a state dir of its own, with
    /// OpenShift's ClusterVersion offering `TARGET` (a release image built
    /// here, so that nothing is pulled), its ClusterOperators, and
    /// cert-manager.
    fn up() -> Cluster {
        let dir = PathBuf::from(format!("{}-install", cp_dir().display()));
        let plane = ControlPlane::up(
            Command::new(format!("{ROOT}/tests/control-plane/up"))
                .args(["--fresh", "--node"])
                .env("PREFLIGHT_GATE_CP_DIR", &dir),
        );
        let mut cluster = Cluster {
            plane,
            dir,
            cert_manager: Vec::new(),
        };
        cluster.plane.install_cluster_crds();
        let images = run(Command::new(format!("{ROOT}/tests/node/images"))
            .arg(cluster.plane.dir().join("images"))
            .arg(TARGET)
            .envs(cluster.plane.env()));
        assert!(images.ok, "tests/node/images failed:\n{}", images.stderr);
        let release = vars(&images.stdout)["RELEASE_IMAGE"].clone();
        let mut cv = example_cluster_version();
        cv["status"]["availableUpdates"] =
            json!([{"version": TARGET, "image": release, "channels": ["stable-4.15"]}]);
        cv["status"]["conditionalUpdates"] = json!([]);
        cluster.plane.put_cluster_version(&cv);
        // machine-config Degraded for 40 minutes (no longer settling, and
        // named by its alert), so that the gate's verdict on TARGET is a
        // denial that says why.
        let since = jiff::Timestamp::now() - jiff::SignedDuration::from_mins(40);
        for co in OPERATORS {
            let degraded = (co == "machine-config").then_some(("pool worker is Degraded", since));
            cluster
                .plane
                .put_cluster_operator(co, &operator_status(degraded));
        }
        cluster.start_cert_manager();
        cluster
    }

    /// cert-manager's CRDs, controller and cainjector, as the guide's
    /// Requirements ask for them on plain Kubernetes.
    fn start_cert_manager(&mut self) {
        let built = run(&mut Command::new(format!(
            "{ROOT}/tests/node/cert-manager/build"
        )));
        assert!(
            built.ok,
            "tests/node/cert-manager/build failed:\n{}",
            built.stderr
        );
        let built = vars(&built.stdout);
        let crds = Path::new(&built["CERT_MANAGER_CRDS"]);
        for kind in [
            "certificates",
            "certificaterequests",
            "issuers",
            "clusterissuers",
        ] {
            self.plane
                .apply_file(&crds.join(format!("cert-manager.io_{kind}.yaml")));
        }
        self.plane.wait_established(&[
            "certificates.cert-manager.io",
            "certificaterequests.cert-manager.io",
            "issuers.cert-manager.io",
            "clusterissuers.cert-manager.io",
        ]);
        for component in ["controller", "cainjector"] {
            let log = std::fs::File::create(self.dir.join(format!("{component}.log"))).unwrap();
            let child = Command::new(&built["CERT_MANAGER"])
                .arg(component)
                .arg("--kubeconfig")
                .arg(self.plane.var("ADMIN_KUBECONFIG"))
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap();
            self.cert_manager.push((component.to_owned(), child));
        }
    }

    fn kubectl(&self, args: &[&str]) -> crate::world::Output {
        self.plane.kubectl(args)
    }

    fn get_json(&self, args: &[&str]) -> Value {
        self.plane.get_json(args)
    }

    /// The gate's pods.
    fn gate_pods(&self) -> Vec<Value> {
        self.get_json(&[
            "get",
            "pods",
            "-n",
            NAMESPACE,
            "-l",
            "app.kubernetes.io/name=preflight-gate,app.kubernetes.io/component=webhook",
        ])["items"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// The API server started again with `--admission-control-config-file`
    /// naming `config`, as a control-plane host's kubelet restarts it once
    /// its manifest has the flag.
    fn restart_apiserver_with(&self, config: &Path) {
        let cmd = self.dir.join("kube-apiserver.cmd");
        let argv = std::fs::read(&cmd).unwrap();
        let flag = "--admission-control-config-file=";
        let mut found = false;
        let argv: Vec<Vec<u8>> = argv
            .split(|b| *b == 0)
            .map(|arg| {
                if arg.starts_with(flag.as_bytes()) {
                    found = true;
                    format!("{flag}{}", config.display()).into_bytes()
                } else {
                    arg.to_vec()
                }
            })
            .collect();
        assert!(found, "the API server runs without {flag}");
        std::fs::write(&cmd, argv.join(&0u8)).unwrap();
        let restarted = run(
            Command::new(format!("{ROOT}/tests/control-plane/restart-apiserver"))
                .env("PREFLIGHT_GATE_CP_DIR", &self.dir),
        );
        assert!(
            restarted.ok,
            "restart-apiserver failed: {}",
            restarted.stderr
        );
    }

    /// What the node's containerd holds under `digest`: its JSON.
    fn content(&self, digest: &str) -> Value {
        let out = run(Command::new(self.plane.var("CTR_BIN"))
            .args(["--address", self.plane.var("CONTAINERD_ADDRESS")])
            .args(["-n", "k8s.io", "content", "get", digest]));
        assert!(out.ok, "ctr content get {digest}: {}", out.stderr);
        serde_json::from_str(&out.stdout).unwrap()
    }

    /// A target change as `oc adm upgrade --to VERSION` sends it, until the
    /// gate has a verdict (it first answers that a run is under way).
    fn request_until_verdict(&self, version: &str) -> crate::world::Output {
        let args = merge_patch_args(version, &[]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        poll_every(
            "a verdict",
            Duration::from_secs(240),
            Duration::from_secs(2),
            || {
                let out = self.kubectl(&args);
                if out.ok || !out.stderr.contains("is running, retry") {
                    Ok(out)
                } else {
                    Err(out.stderr)
                }
            },
        )
    }
}

fn ready(pod: &Value) -> bool {
    pod["status"]["phase"] == "Running"
        && pod["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

#[test]
fn the_guides_install_on_plain_kubernetes_runs_the_production_image_on_a_real_node() {
    let started = Instant::now();
    let _turn = turn();
    let image = gate_image();
    let guide = std::fs::read_to_string(format!("{ROOT}/{GUIDE}")).unwrap();
    let cluster = Cluster::up();
    eprintln!("cluster and cert-manager up after {:?}", started.elapsed());

    // The reader's machine: a checkout of preflight-gate, my-cluster/
    // beside it, the image's archive, and the control-plane host's
    // directory for the API server's client certificate.
    let top = tempfile::tempdir().unwrap();
    let top = top.path();
    std::os::unix::fs::symlink(ROOT, top.join("preflight-gate")).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    std::os::unix::fs::symlink(
        &image.tar,
        top.join(format!("preflight-gate-{version}.oci.tar")),
    )
    .unwrap();
    let host_dir = format!("{}/host{HOST_DIR}", top.display());
    let bin = top.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(cluster.plane.var("KUBECTL"), bin.join("kubectl")).unwrap();
    std::os::unix::fs::symlink(cluster.plane.var("CTR_BIN"), bin.join("ctr")).unwrap();
    let shell = Shell {
        dir: top.to_owned(),
        env: vec![
            (
                "PATH".into(),
                format!(
                    "{}:{}",
                    bin.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            ),
            (
                "KUBECONFIG".into(),
                cluster.plane.var("ADMIN_KUBECONFIG").into(),
            ),
            (
                "CONTAINERD_ADDRESS".into(),
                cluster.plane.var("CONTAINERD_ADDRESS").into(),
            ),
        ],
    };
    // The reader's own: the digest their build printed, `kubectl` for
    // `oc`, the directory for the client certificate.
    let own = |text: &str| {
        kubectl_for_oc(text)
            .replace(EXAMPLE_DIGEST, &image.digest)
            .replace(HOST_DIR, &host_dir)
    };
    let mut overlay_image = None;
    let mut admission = None;

    // "Before you install: the image", then "Install on plain Kubernetes".
    for heading in [
        "Before you install: the image",
        "Install on plain Kubernetes",
    ] {
        let blocks = section(&guide, heading);
        assert!(!blocks.is_empty(), "{heading}: no blocks");
        for block in &blocks {
            if let Some(why) = block.rendered() {
                eprintln!("{GUIDE}:{}: not run here ({why})", block.line);
                continue;
            }
            let marker = block.comment.as_deref().unwrap_or("");
            match block.lang.as_str() {
                "sh" => {
                    let script = own(&block.text);
                    let printed = shell.block(block, &script);
                    if script.contains("kustomize my-cluster | grep 'image:'") {
                        let image_line = overlay_image
                            .as_deref()
                            .expect("the guide checks the overlay before it writes it");
                        assert!(printed.contains(image_line), "{printed}");
                    }
                    if script.contains("kubectl apply -k my-cluster") && heading.contains("plain") {
                        // The guide: until the API server presents the
                        // client certificate, every call fails the
                        // handshake and a target change is refused.
                        wait_for_gate(&cluster);
                        let refused = cluster.kubectl(&[
                            "patch",
                            "clusterversion",
                            "version",
                            "--type=merge",
                            "--dry-run=server",
                            "-p",
                            &json!({"spec": {"desiredUpdate": {"version": TARGET}}}).to_string(),
                        ]);
                        assert!(
                            !refused.ok && refused.stderr.contains("failed calling webhook"),
                            "a target change before the API server presents its certificate: {} {}",
                            refused.stdout,
                            refused.stderr
                        );
                    }
                }
                "yaml" if marker.starts_with("<!-- image-override") => {
                    // The guide's overlay: over the kubernetes overlay on
                    // plain Kubernetes, with the reader's digest.
                    let overlay = fill(
                        &own(&block.text),
                        "../preflight-gate/deploy/overlays/openshift",
                        "../preflight-gate/deploy/overlays/kubernetes",
                    );
                    let path = block
                        .text
                        .lines()
                        .next()
                        .and_then(|l| l.strip_prefix("# "))
                        .and_then(|l| l.split(',').next())
                        .expect("the overlay says where it goes");
                    assert_eq!(path, "my-cluster/kustomization.yaml");
                    std::fs::create_dir_all(top.join("my-cluster")).unwrap();
                    std::fs::write(top.join(path), &overlay).unwrap();
                    let image_line = overlay
                        .lines()
                        .find_map(|l| l.trim().strip_prefix("image: "))
                        .expect("the overlay names an image")
                        .to_owned();
                    assert!(image_line.ends_with(&format!("@{}", image.digest)));
                    overlay_image = Some(image_line);
                }
                "yaml" if block.text.contains("kind: AdmissionConfiguration") => {
                    // The API server's files, each where its first line
                    // says, then the API server restarted with them.
                    for document in own(&block.text).split("\n---\n") {
                        let first = document.lines().next().unwrap_or("");
                        let path = first
                            .strip_prefix("# ")
                            .and_then(|l| l.split([':', ',']).next())
                            .unwrap_or_else(|| panic!("no file named in {first}"));
                        assert!(path.starts_with(&host_dir), "{path}");
                        std::fs::write(path, document).unwrap();
                        if document.contains("kind: AdmissionConfiguration") {
                            let header: Vec<&str> = document
                                .lines()
                                .take_while(|l| l.starts_with('#'))
                                .collect();
                            let header = header.join(" ");
                            assert!(
                                header.contains("--admission-control-config-file"),
                                "{header}"
                            );
                            admission = Some(PathBuf::from(path));
                        }
                    }
                    let config = admission.as_ref().expect("the admission configuration");
                    eprintln!(
                        "{GUIDE}:{}: the API server restarts with --admission-control-config-file={}",
                        block.line,
                        config.display()
                    );
                    cluster.restart_apiserver_with(config);
                }
                "yaml" if block.text.contains("kind: NetworkPolicy") => {
                    // Optional: narrowing the webhook rule to the control
                    // plane's addresses, which the node's CNI would not
                    // enforce anyway.
                    eprintln!("{GUIDE}:{}: optional, not applied", block.line);
                }
                _ => panic!(
                    "{GUIDE}:{}: a ```{} block this test does not know how to follow:\n{}",
                    block.line, block.lang, block.text
                ),
            }
        }
    }
    let overlay_image = overlay_image.expect("the guide's overlay names the image");
    assert!(
        admission.is_some(),
        "the guide never configured the API server"
    );
    eprintln!("installed after {:?}", started.elapsed());

    // The production image, running and Ready on the node, two replicas.
    wait_for_gate(&cluster);
    let pods = cluster.gate_pods();
    assert_eq!(pods.len(), 2, "{pods:#?}");
    let mut holders = Vec::new();
    for pod in &pods {
        assert!(ready(pod), "{pod:#}");
        assert_eq!(pod["spec"]["nodeName"], cluster.plane.var("NODE_NAME"));
        assert_eq!(
            pod["spec"]["containers"][0]["image"],
            overlay_image.as_str()
        );
        let status = &pod["status"]["containerStatuses"][0];
        assert_eq!(status["ready"], true, "{status:#}");
        assert!(status["state"]["running"].is_object(), "{status:#}");
        // The kubelet reports the image it runs by the digest built here.
        let image_id = status["imageID"].as_str().unwrap_or_default();
        assert!(
            image_id.ends_with(&format!("@{}", image.digest)),
            "runs {image_id}, not the image deploy/image/build made ({})",
            image.digest
        );
        holders.push(pod["metadata"]["name"].as_str().unwrap().to_owned());
    }
    // And the node holds exactly that image: its manifest names the
    // config built here, whose labels are the production image's.
    let manifest = cluster.content(&image.digest);
    assert_eq!(manifest["config"]["digest"], image.image_id.as_str());
    let config = cluster.content(&image.image_id);
    let labels = &config["config"]["Labels"];
    assert_eq!(labels["name"], "preflight-gate", "{labels:#}");
    assert_eq!(labels["version"], version, "{labels:#}");
    assert_eq!(labels["org.opencontainers.image.version"], version);
    assert!(
        labels.get("preflight-gate.image").is_none(),
        "a test image, not the production one: {labels:#}"
    );
    assert_eq!(config["config"]["User"], "65532:65532");

    // The webhook answers a real target change through the API server,
    // over mutual TLS: the gate's denial, from a run on this cluster.
    let denied = cluster.request_until_verdict(TARGET);
    eprintln!("the gate's verdict: {}", denied.stderr.trim());
    assert!(!denied.ok, "allowed with machine-config Degraded");
    assert!(
        denied.stderr.contains(&format!(
            "admission webhook \"{WEBHOOK}\" denied the request: preflight for {TARGET} failed"
        )),
        "{}",
        denied.stderr
    );
    assert!(
        denied.stderr.contains(
            "- ClusterOperatorsHealthy [ClusterOperatorDegraded]: machine-config is Degraded"
        ),
        "{}",
        denied.stderr
    );
    let cv = cluster.get_json(&["get", "clusterversion", "version"]);
    assert!(cv["spec"].get("desiredUpdate").is_none(), "{cv:#}");
    eprintln!(
        "a verdict through the API server after {:?}",
        started.elapsed()
    );

    // "Verify", with kubectl.
    let verify = section(&guide, "Verify");
    let run_block = |block: &Block| -> Ran {
        let script = own(&block.text);
        eprintln!("{GUIDE}:{}: running\n{script}", block.line);
        shell.run(&script)
    };
    let mut ran = 0;
    for block in &verify {
        if let Some(why) = block.rendered() {
            eprintln!("{GUIDE}:{}: not run here ({why})", block.line);
            continue;
        }
        assert_eq!(block.lang, "sh", "{GUIDE}:{}", block.line);
        let out = run_block(block);
        ran += 1;
        if block.text.contains("--dry-run=server") {
            // The gate's verdict, and nothing stored.
            assert!(!out.ok, "the dry run was allowed: {}", out.stdout);
            assert!(
                out.stderr.contains(&format!(
                    "admission webhook \"{WEBHOOK}\" denied the request: preflight for {TARGET}"
                )),
                "{}",
                out.stderr
            );
            let cv = cluster.get_json(&["get", "clusterversion", "version"]);
            assert!(cv["spec"].get("desiredUpdate").is_none(), "{cv:#}");
        } else {
            assert!(out.ok, "{}\n{}", out.stdout, out.stderr);
            if block.text.contains("rollout status") {
                assert!(
                    out.stdout.contains("successfully rolled out"),
                    "{}",
                    out.stdout
                );
                for pod in &holders {
                    assert!(out.stdout.contains(pod.as_str()), "{pod}: {}", out.stdout);
                }
                // The caBundle cainjector put there: cert-manager's CA of
                // the gate's own.
                assert!(
                    out.stdout.contains("subject=CN = preflight-gate-ca")
                        && out.stdout.contains("notAfter="),
                    "{}",
                    out.stdout
                );
                assert!(
                    holders
                        .iter()
                        .any(|p| out.stdout.contains(&format!("{p}\n"))),
                    "no replica holds the Lease: {}",
                    out.stdout
                );
                assert!(out.stdout.contains(TARGET), "{}", out.stdout);
            }
        }
    }
    assert_eq!(ran, 2, "the Verify section's blocks changed");
    eprintln!("verified after {:?}", started.elapsed());

    // "Uninstall", with kubectl: the audit trail exported first.
    let mut ran = 0;
    for block in &section(&guide, "Uninstall") {
        if let Some(why) = block.rendered() {
            eprintln!("{GUIDE}:{}: not run here ({why})", block.line);
            continue;
        }
        assert_eq!(block.lang, "sh", "{GUIDE}:{}", block.line);
        let out = run_block(block);
        assert!(
            out.ok,
            "{GUIDE}:{}: {}\n{}",
            block.line, out.stdout, out.stderr
        );
        ran += 1;
    }
    assert_eq!(ran, 3, "the Uninstall section's blocks changed");
    let audit = |file: &str| {
        std::fs::read_to_string(top.join("preflight-gate-audit").join(file))
            .unwrap_or_else(|e| panic!("{file}: {e}"))
    };
    let events = audit("events.yaml");
    assert!(
        events.contains("reportingController: preflight-gate")
            || events.contains("reportingComponent: preflight-gate"),
        "the denial's Event was not exported: {events}"
    );
    assert!(audit("updatepreflights.yaml").contains(TARGET));
    audit("claims.json");
    // Gone: the webhook first, then everything the overlay made; a target
    // change no longer reaches any gate.
    assert!(
        !cluster
            .kubectl(&["get", "validatingwebhookconfiguration", "preflight-gate"])
            .ok
    );
    assert!(
        !cluster
            .kubectl(&["get", "crd", "updatepreflights.preflight.dev"])
            .ok
    );
    wait_for(
        "the gate's namespace to be gone",
        Duration::from_secs(120),
        || (!cluster.kubectl(&["get", "namespace", NAMESPACE]).ok).then_some(()),
    );
    let args = merge_patch_args(TARGET, &["--dry-run=server"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let after = cluster.kubectl(&args);
    assert!(after.ok, "{}", after.stderr);
    eprintln!(
        "the guide's install, verify and uninstall on plain Kubernetes took {:?}",
        started.elapsed()
    );
}

/// Until the gate's replicas are Ready behind its Service and cainjector
/// has given the webhook its caBundle.
fn wait_for_gate(cluster: &Cluster) {
    wait_for(
        "the gate's replicas to be Ready",
        Duration::from_secs(240),
        || {
            let pods = cluster.gate_pods();
            (pods.len() == 2 && pods.iter().all(ready)).then_some(())
        },
    );
    wait_for(
        "cainjector to give the webhook its caBundle",
        Duration::from_secs(120),
        || {
            let config =
                cluster.get_json(&["get", "validatingwebhookconfiguration", "preflight-gate"]);
            config["webhooks"][0]["clientConfig"]["caBundle"]
                .as_str()
                .is_some_and(|b| !b.is_empty())
                .then_some(())
        },
    );
}
