//! Docs that run: every command of README.md, CONTRIBUTING.md, docs/install.md,
//! docs/upgrading.md, docs/support.md, docs/fleet.md and docs/runbooks/*.md, taken from the documents
//! themselves, is run here against a real API server, or, where the block
//! says why (`<!-- rendered: ... -->` just before it), at least parsed and
//! rendered. A command added to a document without a test fails
//! `every_doc_command_is_run_or_rendered`, naming the document and the line.
//!
//! The commands run through `bash -euo pipefail` with an `oc` on PATH (the
//! real one where tests/common/oc.rs finds it, else kubectl standing in),
//! a `cargo` that runs this build's binary for `cargo run --`, and the
//! documents' placeholders (`<name>`, `NODE`, ...) replaced by each test,
//! which first asserts they are there. Install, upgrade, backup and restore,
//! break-glass and uninstall run on a control plane of their own
//! (tests/control-plane/up with a state dir of the test's), so that
//! uninstalling does not take the shared world's CRDs and results with it.
//! The install on plain Kubernetes, which needs cert-manager, a node and an
//! API server to configure, is the node suite's: tests/node/install.rs
//! follows those sections of docs/install.md, and Verify and Uninstall
//! again, on a node of its own; the table below names it for the commands
//! only it runs.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cluster::{User, World, lock};
use crate::oc::NO_OC;
use crate::support::{free_port, not_run_here, wait_for};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const GATE: &str = env!("CARGO_BIN_EXE_preflight-gate");

const README: &str = "README.md";
/// Its blocks run the suites, lints and goldens themselves: each is only
/// rendered, as its `<!-- rendered: why -->` says.
const CONTRIBUTING: &str = "CONTRIBUTING.md";
const INSTALL: &str = "docs/install.md";
const UPGRADING: &str = "docs/upgrading.md";
const SUPPORT: &str = "docs/support.md";
/// Its commands need real OpenShift clusters or a hub running OCM's
/// controllers: each is rendered, and tests/e2e/fleet.rs applies its
/// manifests and makes the writes its tools make.
const FLEET: &str = "docs/fleet.md";

// The tests that run the documents' commands.
const SHARED: &str = "day_two_commands_run_on_the_shared_control_plane";
const OWN: &str = "install_upgrade_break_glass_and_uninstall_run_on_a_control_plane_of_their_own";
const SERVE: &str = "the_readmes_serve_curl_and_check_commands_run";
const GATHER: &str = "the_support_inspect_gathers_the_gates_objects_and_events";
/// A test of another file, as `file: name`: the node suite's install on
/// plain Kubernetes.
const NODE_INSTALL: &str = "tests/node/install.rs: \
    the_guides_install_on_plain_kubernetes_runs_the_production_image_on_a_real_node";

fn runbook(name: &str) -> String {
    format!("docs/runbooks/{name}.md")
}

/// Which test runs which command: the document, how the command begins
/// (every command it matches in the document must be the same text), and
/// the test. A command of a document that no entry matches, and that no
/// `rendered:` comment excuses, fails the accounting test.
fn runs() -> Vec<(String, &'static str, &'static str)> {
    let mut all: Vec<(String, &str, &str)> = Vec::new();
    let mut add = |doc: &str, test: &'static str, commands: &[&'static str]| {
        for c in commands {
            all.push((doc.to_owned(), c, test));
        }
    };
    add(
        README,
        SERVE,
        &[
            "cargo run --release -- serve",
            "curl --cacert certs/ca.crt",
            "cargo run --release -- check --to 4.15.3",
            "preflight-gate check --to 4.15.3 --snapshot ./must-gather/",
            "preflight-gate check --to 4.15.3 --snapshot must-gather.tar.gz",
            "preflight-gate check --to 4.15.3 --kubeconfig ~/.kube/config",
            "preflight-gate check --snapshot ./management/ --hosted-cluster clusters/prod --hosted-snapshot ./prod-must-gather/ --to",
            "preflight-gate check --snapshot ./management/ --hosted-cluster clusters/prod --hosted-snapshot ./prod-must-gather/ --nodepool",
            "preflight-gate fleet --to 4.15.3 snapshots/*/",
            "preflight-gate fleet --to 4.15.3 -o json prod-*.kubeconfig",
            "preflight-gate fleet --to 4.15.3 -o html",
        ],
    );
    add(
        INSTALL,
        OWN,
        &[
            // The image override, then the install.
            "oc kustomize my-cluster | grep 'image:'",
            "oc apply -k my-cluster",
            // Verify.
            "oc -n preflight-gate rollout status deployment/preflight-gate",
            "oc -n preflight-gate get pods -o wide",
            "oc get validatingwebhookconfiguration preflight-gate -o jsonpath=",
            "oc -n preflight-gate get lease preflight-gate-controller",
            "oc get updatepreflights",
            "oc patch clusterversion version --type merge --dry-run=server",
            // Uninstall: the audit trail exported first.
            "mkdir -p preflight-gate-audit",
            "oc get events --all-namespaces --field-selector reportingComponent=preflight-gate -o yaml",
            "oc get clusterversion version -o jsonpath='{.metadata.annotations}'",
            "oc get updatepreflights -o yaml",
            "oc delete validatingwebhookconfiguration preflight-gate --ignore-not-found",
            "oc delete -k my-cluster --ignore-not-found",
            "for role in preflight-gate-override preflight-gate-window preflight-gate-updater; do",
            "oc annotate clusterversion version preflight.dev/override-",
            // Break-glass and restore.
            "oc get validatingwebhookconfiguration preflight-gate -o yaml",
            "oc delete validatingwebhookconfiguration preflight-gate",
            "oc apply -f preflight-gate-webhook-*.yaml",
            // Development.
            "eval \"$(tests/control-plane/up)\"",
            "for ns in openshift-config",
            "\"$KUBECTL\" apply --server-side -k deploy/overlays/dev",
            "cargo run -- certs",
            "ca=$(base64 -w0 certs/ca.crt)",
            "\"$KUBECTL\" patch validatingwebhookconfiguration preflight-gate",
            "cargo run -- serve --kubeconfig \"$KUBECONFIG\"",
        ],
    );
    add(
        INSTALL,
        NODE_INSTALL,
        &[
            // A cluster without a registry: the image loaded on the node.
            "ctr -n k8s.io images import",
            "ctr -n k8s.io images tag",
            // Install on plain Kubernetes, and the API server's client
            // certificate.
            "kubectl apply -k my-cluster",
            "kubectl -n preflight-gate wait --for=condition=Ready",
            "mkdir -p -m 700 /etc/kubernetes/preflight-gate",
            "kubectl -n preflight-gate get secret preflight-gate-apiserver-client -o jsonpath='{.data.tls\\.crt}'",
            "kubectl -n preflight-gate get secret preflight-gate-apiserver-client -o jsonpath='{.data.tls\\.key}'",
            "chmod 600 /etc/kubernetes/preflight-gate/client.key",
        ],
    );
    add(
        INSTALL,
        SHARED,
        &[
            "oc annotate --overwrite clusterversion version preflight.dev/override=",
            "oc annotate --overwrite clusterversion version preflight.dev/accept=",
            "oc annotate --overwrite clusterversion version preflight.dev/claimed-generation=",
            "oc get upf",
            "oc get upf -o wide",
            "oc get upf <name> -o yaml",
            "oc annotate upf <name> --overwrite",
            "oc get upf <name> -w",
            "oc get clusterversion version -o jsonpath='{.status.availableUpdates",
        ],
    );
    add(
        UPGRADING,
        OWN,
        &[
            "oc get -o yaml validatingwebhookconfiguration/preflight-gate",
            "oc get crd updatepreflights.preflight.dev",
            "oc get upf -o yaml",
            "oc apply -k my-cluster",
            "oc -n preflight-gate rollout status deployment/preflight-gate",
            "oc apply -f preflight-gate-crds-before.yaml",
            "oc delete validatingwebhookconfiguration preflight-gate",
            "oc delete upf -l preflight.dev/auto-created=true",
        ],
    );
    add(
        SUPPORT,
        GATHER,
        &[
            "oc adm inspect --dest-dir=preflight-gate-inspect ns/",
            "oc adm inspect --dest-dir=preflight-gate-inspect updatepreflights",
            "oc adm inspect --dest-dir=preflight-gate-inspect -n default events",
            "tar -czf preflight-gate-inspect.tar.gz",
        ],
    );
    add(
        &runbook("ClusterUpdateBlockedByPreflight"),
        SHARED,
        &[
            "oc describe clusterversion version",
            "oc get updatepreflight -o wide",
            "oc get updatepreflight <name> -o yaml",
            "oc get upf",
            "oc annotate upf <name> --overwrite",
            "oc get upf <name> -w",
            "oc adm upgrade --to <version>",
        ],
    );
    add(
        &runbook("PreflightGateCertificateExpiringSoon"),
        OWN,
        &["oc -n preflight-gate get secret preflight-gate-tls"],
    );
    add(
        &runbook("PreflightGateConnectionsSaturated"),
        OWN,
        &[
            "oc -n preflight-gate get networkpolicy",
            "oc get pods -A -o wide --field-selector spec.nodeName=NODE",
            "oc -n preflight-gate set env deploy/preflight-gate",
        ],
    );
    add(
        &runbook("PreflightGateDegraded"),
        OWN,
        &[
            "oc -n preflight-gate get deployment preflight-gate",
            "oc -n preflight-gate get pods -o wide",
            "oc -n preflight-gate get events --sort-by=.lastTimestamp | tail -20",
            "oc -n preflight-gate describe pods -l app.kubernetes.io/name=preflight-gate",
        ],
    );
    add(
        &runbook("PreflightGateDown"),
        OWN,
        &[
            "oc -n preflight-gate get pods -o wide",
            "oc -n preflight-gate describe deploy/preflight-gate",
            "oc -n preflight-gate get endpointslices",
            "oc get validatingwebhookconfiguration preflight-gate -o yaml",
            "oc delete validatingwebhookconfiguration preflight-gate",
        ],
    );
    add(
        &runbook("PreflightGateOverrideUsed"),
        SHARED,
        &[
            "oc describe clusterversion version",
            "oc get clusterversion version -o jsonpath='{.metadata.annotations}'",
        ],
    );
    add(
        &runbook("PreflightResultsStale"),
        SHARED,
        &[
            "oc -n preflight-gate get lease preflight-gate-controller",
            "oc get updatepreflight -o wide",
        ],
    );
    add(
        &runbook("UpdatePreflightFailing"),
        SHARED,
        &[
            "oc get updatepreflight -o wide",
            "oc get updatepreflight <name> -o jsonpath=",
            "oc get upf",
            "oc annotate upf <name> --overwrite",
            "oc get upf <name> -w",
        ],
    );
    all
}

/// One command of a document: continuation lines joined, comments dropped;
/// a loop is one command, its lines kept.
#[derive(Clone, Debug)]
struct DocCommand {
    doc: String,
    line: usize,
    text: String,
    /// Why its block is only rendered, if it is.
    rendered: Option<String>,
}

fn documents() -> Vec<String> {
    let mut docs = vec![
        README.to_owned(),
        CONTRIBUTING.to_owned(),
        INSTALL.to_owned(),
        UPGRADING.to_owned(),
        SUPPORT.to_owned(),
        FLEET.to_owned(),
    ];
    let mut books: Vec<String> = std::fs::read_dir(format!("{ROOT}/docs/runbooks"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/runbooks/{n}"))
        .collect();
    books.sort();
    docs.extend(books);
    docs
}

fn all_commands() -> Vec<DocCommand> {
    documents()
        .iter()
        .flat_map(|doc| {
            extract(
                doc,
                &std::fs::read_to_string(format!("{ROOT}/{doc}")).unwrap(),
            )
        })
        .collect()
}

/// The commands of every ```sh, ```bash and ```console block of `text`.
fn extract(doc: &str, text: &str) -> Vec<DocCommand> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    // The HTML comment just before a block (blank lines aside).
    let mut comment: Option<String> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
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
            comment = Some(text);
            i += 1;
            continue;
        }
        if let Some(lang) = trimmed.strip_prefix("```") {
            let indent = line.len() - trimmed.len();
            let start = i + 1;
            let mut end = start;
            while !lines[end].trim_start().starts_with("```") {
                end += 1;
            }
            if ["sh", "bash", "console"].contains(&lang.trim()) {
                let rendered = comment.as_deref().and_then(|c| {
                    let c = c.trim_start_matches("<!--").trim_start();
                    let why = c.strip_prefix("rendered:")?;
                    Some(why.trim().trim_end_matches("-->").trim().to_owned())
                });
                out.extend(block_commands(
                    doc,
                    &lines[start..end],
                    start + 1,
                    indent,
                    lang.trim() == "console",
                    rendered,
                ));
            }
            comment = None;
            i = end + 1;
            continue;
        }
        if !trimmed.is_empty() {
            comment = None;
        }
        i += 1;
    }
    out
}

fn block_commands(
    doc: &str,
    lines: &[&str],
    first_line: usize,
    indent: usize,
    console: bool,
    rendered: Option<String>,
) -> Vec<DocCommand> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    let mut continued = false;
    let mut depth = 0i32;
    for (n, raw) in lines.iter().enumerate() {
        let cut = raw.len() - raw.trim_start().len();
        let mut line = &raw[cut.min(indent)..];
        if console && current.is_none() {
            match line.strip_prefix("$ ") {
                Some(command) => line = command,
                None => continue,
            }
        }
        let code = strip_comment(line).trim_end();
        if code.trim().is_empty() {
            continue;
        }
        let (continues, code) = match code.strip_suffix('\\') {
            Some(code) => (true, code.trim_end()),
            None => (false, code),
        };
        if !continued {
            match code.split_whitespace().next() {
                Some("for" | "while" | "until" | "if" | "case") => depth += 1,
                Some("done" | "fi" | "esac") => depth -= 1,
                _ => {}
            }
        }
        let entry = current.get_or_insert_with(|| (first_line + n, String::new()));
        if !entry.1.is_empty() {
            entry.1.push(if continued { ' ' } else { '\n' });
        }
        entry
            .1
            .push_str(if continued { code.trim_start() } else { code });
        continued = continues;
        if !continued && depth == 0 {
            let (line, text) = current.take().unwrap();
            out.push(DocCommand {
                doc: doc.to_owned(),
                line,
                text,
                rendered: rendered.clone(),
            });
        }
    }
    assert!(
        current.is_none(),
        "{doc}:{first_line}: a block ends inside a command"
    );
    out
}

/// `line` without a shell comment (a `#` that begins a word, outside quotes).
fn strip_comment(line: &str) -> &str {
    let (mut single, mut double, mut escaped) = (false, false, false);
    let mut word_start = true;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            word_start = false;
            continue;
        }
        match c {
            '\\' if !single => escaped = true,
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && word_start => return &line[..i],
            _ => {}
        }
        word_start = c.is_whitespace();
    }
    line
}

/// The entry of `table` that claims `c`: of those of its document it
/// begins with, the longest.
fn claim<'t>(
    table: &'t [(String, &'static str, &'static str)],
    c: &DocCommand,
) -> Option<&'t (String, &'static str, &'static str)> {
    if c.rendered.is_some() {
        return None;
    }
    table
        .iter()
        .filter(|(doc, begins, _)| *doc == c.doc && c.text.starts_with(begins))
        .max_by_key(|(_, begins, _)| begins.len())
}

/// The command of `doc` that begins with `begins`, as `test` runs it: the
/// table of `runs()` must say that `test` runs it.
fn command(test: &str, doc: &str, begins: &str) -> String {
    assert!(
        runs()
            .iter()
            .any(|(d, b, t)| d == doc && *b == begins && *t == test),
        "runs() does not say that {test} runs {doc}: {begins}"
    );
    let table = runs();
    let found: Vec<DocCommand> = all_commands()
        .into_iter()
        .filter(|c| c.doc == doc && claim(&table, c).is_some_and(|(_, b, _)| *b == begins))
        .collect();
    assert!(!found.is_empty(), "{doc} has no command `{begins}...`");
    let text = &found[0].text;
    assert!(
        found.iter().all(|c| &c.text == text),
        "{doc}: `{begins}` begins different commands: {found:?}"
    );
    text.clone()
}

/// `text` with `placeholder` replaced, which must be there.
fn fill(text: &str, placeholder: &str, value: &str) -> String {
    assert!(
        text.contains(placeholder),
        "the command no longer has {placeholder}: {text}"
    );
    text.replace(placeholder, value)
}

/// The fenced block of `lang` that follows `marker` in `doc`.
fn fenced_after(doc: &str, marker: &str, lang: &str) -> String {
    let text = std::fs::read_to_string(format!("{ROOT}/{doc}")).unwrap();
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("{doc}: no {marker}"));
    let fence = format!("```{lang}\n");
    let start = at + text[at..].find(&fence).unwrap() + fence.len();
    let end = start + text[start..].find("```").unwrap();
    text[start..end].to_owned()
}

struct Out {
    ok: bool,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Where the documents' commands run: `oc` (and `cargo`, `preflight-gate`)
/// on PATH, and the environment of the cluster they run against.
struct Shell {
    _bin: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl Shell {
    fn new(kubeconfig: &Path, kubectl: &str) -> Shell {
        let bin = tempfile::tempdir().unwrap();
        // A watch (`oc get -w`) ends after a few seconds, as if the reader
        // had seen enough.
        let watch = "for a in \"$@\"; do case \"$a\" in -w|--watch) set -- \"$@\" --request-timeout=5s; break;; esac; done\n";
        let oc = match crate::oc::oc() {
            Some(oc) => format!("#!/bin/sh\n{watch}exec '{}' \"$@\"\n", oc.display()),
            None => {
                eprintln!("the real oc (../shared/tools/oc) is absent: kubectl stands in for it");
                format!(
                    "#!/bin/sh\n{watch}\
                     case \"$1 $2 $3\" in\n\
                     'whoami  ') exec '{kubectl}' auth whoami -o jsonpath='{{.status.userInfo.username}}' ;;\n\
                     'adm upgrade --to') exec '{kubectl}' patch clusterversion version --type=merge -p \"{{\\\"spec\\\":{{\\\"desiredUpdate\\\":{{\\\"version\\\":\\\"$4\\\"}}}}}}\" ;;\n\
                     'adm upgrade --clear') exec '{kubectl}' patch clusterversion version --type=json -p '[{{\"op\":\"remove\",\"path\":\"/spec/desiredUpdate\"}}]' ;;\n\
                     adm*) echo \"oc $*: needs the real oc\" >&2; exit 98 ;;\n\
                     esac\n\
                     exec '{kubectl}' \"$@\"\n"
                )
            }
        };
        // `cargo run [--release] -- ARGS` is this build's binary.
        let cargo = format!(
            "#!/bin/sh\n[ \"$1\" = run ] || {{ echo \"the test runs only cargo run: $*\" >&2; exit 99; }}\nshift\n\
             [ \"$1\" = --release ] && shift\n\
             [ \"$1\" = -- ] || {{ echo \"cargo run needs --\" >&2; exit 99; }}\nshift\nexec '{GATE}' \"$@\"\n"
        );
        use std::os::unix::fs::PermissionsExt;
        for (name, text) in [("oc", oc), ("cargo", cargo)] {
            let path = bin.path().join(name);
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::os::unix::fs::symlink(GATE, bin.path().join("preflight-gate")).unwrap();
        let path = format!(
            "{}:{}",
            bin.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Shell {
            _bin: bin,
            env: vec![
                ("PATH".into(), path),
                ("KUBECONFIG".into(), kubeconfig.display().to_string()),
                ("KUBECTL".into(), kubectl.to_owned()),
            ],
        }
    }

    fn with(mut self, name: &str, value: &str) -> Shell {
        self.env.push((name.into(), value.into()));
        self
    }

    fn command(&self, dir: &Path, script: &str) -> Command {
        let mut command = Command::new("bash");
        command
            .args(["-euo", "pipefail", "-c", script])
            .current_dir(dir)
            .env_remove("KUBECONFIG")
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        command
    }

    fn run(&self, dir: &Path, script: &str) -> Out {
        let out = self.command(dir, script).output().unwrap();
        Out {
            ok: out.status.success(),
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs `script`, which must succeed; its output.
    fn ok(&self, dir: &Path, script: &str) -> String {
        let out = self.run(dir, script);
        assert!(
            out.ok,
            "{script}\nfailed ({:?}):\n{}\n{}",
            out.code, out.stdout, out.stderr
        );
        out.stdout
    }
}

fn wait_until(what: &str, seconds: u64, mut done: impl FnMut() -> bool) {
    wait_for(what, Duration::from_secs(seconds), || done().then_some(()));
}

fn http_ok(port: u16, path: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    );
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    reply.starts_with("HTTP/1.1 200")
}

/// A process the test started, killed when the test ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn every_doc_command_is_run_or_rendered() {
    let (_turn, world) = lock();
    let commands = all_commands();
    let table = runs();
    // The extractor finds the commands: a document without any would mean
    // it reads nothing.
    for doc in documents() {
        assert!(
            commands.iter().any(|c| c.doc == doc),
            "{doc}: no command found"
        );
    }

    // Every command is run by a test, or its block says why it is only
    // rendered.
    let unaccounted: Vec<String> = commands
        .iter()
        .filter(|c| c.rendered.is_none() && claim(&table, c).is_none())
        .map(|c| format!("{}:{}: `{}`", c.doc, c.line, c.text))
        .collect();
    assert!(
        unaccounted.is_empty(),
        "commands no test runs (run them in tests/e2e/docs.rs, or mark the block \
         `<!-- rendered: why -->`):\n{}",
        unaccounted.join("\n")
    );

    // Every entry names a command of its document, one command only, and a
    // test of this file (or, as `file: name`, of another).
    for entry in &table {
        let (doc, begins, test) = entry;
        let matched: BTreeSet<&str> = commands
            .iter()
            .filter(|c| claim(&table, c) == Some(entry))
            .map(|c| c.text.as_str())
            .collect();
        assert!(matched.len() == 1, "{doc}: `{begins}` matches {matched:?}");
        let (file, name) = test.split_once(": ").unwrap_or(("tests/e2e/docs.rs", test));
        let source = std::fs::read_to_string(format!("{ROOT}/{file}")).unwrap();
        assert!(
            source.contains(&format!("fn {name}()")),
            "no test {name} in {file}"
        );
    }

    // The rendered ones parse and render.
    let rendered: Vec<&DocCommand> = commands.iter().filter(|c| c.rendered.is_some()).collect();
    assert!(!rendered.is_empty());
    for c in rendered {
        render(world, c);
    }
}

/// What can be checked of a command that is not run here: bash parses it;
/// a script of the repository it calls is there; the flags it passes to
/// the repository's release script, to oc or to kubectl are theirs; the
/// overlays it applies render.
fn render(world: &World, c: &DocCommand) {
    let at = format!("{}:{}", c.doc, c.line);
    let parse = Command::new("bash")
        .args(["-n", "-c", &c.text])
        .output()
        .unwrap();
    assert!(
        parse.status.success(),
        "{at}: bash cannot parse `{}`: {}",
        c.text,
        String::from_utf8_lossy(&parse.stderr)
    );
    for pipeline in c.text.split(['|', '\n', '&']) {
        let words: Vec<&str> = pipeline.split_whitespace().collect();
        let Some(&first) = words.first() else {
            continue;
        };
        // A script of the repository.
        if first.contains('/') && !first.starts_with(['/', '$', '"', '.']) {
            let path = Path::new(ROOT).join(first);
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path)
                .unwrap_or_else(|_| panic!("{at}: no {first}"))
                .permissions()
                .mode();
            assert!(mode & 0o111 != 0, "{at}: {first} is not executable");
            if first == "deploy/release/cut" {
                let help = Command::new(&path).arg("--help").output().unwrap();
                let help = String::from_utf8_lossy(&help.stdout).into_owned();
                for flag in words.iter().filter(|w| w.starts_with("--")) {
                    assert!(help.contains(flag), "{at}: cut takes no {flag}");
                }
            }
        }
        // Files named in the repository.
        for (i, word) in words.iter().enumerate() {
            let previous = if i > 0 { words[i - 1] } else { "" };
            if previous == "-k" && word.starts_with("deploy/") {
                let out = world.kubectl(User::Admin, &["kustomize", &format!("{ROOT}/{word}")]);
                assert!(out.ok, "{at}: {word} does not render: {}", out.stderr);
            }
            if previous == "-f" && ["Containerfile", "bundle/bundle.Dockerfile"].contains(word) {
                assert!(Path::new(ROOT).join(word).is_file(), "{at}: no {word}");
            }
        }
        if first == "cargo" && words.get(1) == Some(&"test") {
            let target = words[words.iter().position(|w| *w == "--test").unwrap() + 1];
            assert!(
                Path::new(ROOT).join("tests").join(target).is_dir(),
                "{at}: no test target {target}"
            );
        }
        // oc's and kubectl's own subcommands and flags.
        let tool = match first {
            "oc" => crate::oc::oc().map(|p| p.display().to_string()),
            "kubectl" => Some(world.var("KUBECTL").to_owned()),
            _ => None,
        };
        if let Some(tool) = tool {
            let mut rest: Vec<&str> = words[1..].to_vec();
            if rest.first() == Some(&"-n") {
                rest.drain(..2);
            }
            let mut path: Vec<&str> = rest
                .iter()
                .take_while(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
                .take(3)
                .copied()
                .collect();
            let help = loop {
                assert!(!path.is_empty(), "{at}: {first} has no such command");
                let mut args = path.clone();
                args.push("--help");
                let out = Command::new(&tool).args(&args).output().unwrap();
                if out.status.success() {
                    break String::from_utf8_lossy(&out.stdout).into_owned();
                }
                path.pop();
            };
            // oc prints its global options on stderr, kubectl on stdout.
            let options = Command::new(&tool).arg("options").output().unwrap();
            let options = format!(
                "{}{}",
                String::from_utf8_lossy(&options.stdout),
                String::from_utf8_lossy(&options.stderr)
            );
            for flag in rest.iter().filter(|w| w.starts_with("--")) {
                let flag = flag.split('=').next().unwrap();
                assert!(
                    help.contains(&format!("{flag}="))
                        || help.contains(&format!("{flag} "))
                        || help.contains(&format!("{flag}:"))
                        || options.contains(&format!("{flag}=")),
                    "{at}: `{first} {}` takes no {flag}",
                    path.join(" ")
                );
            }
        }
    }
}

#[test]
fn the_extractor_joins_lines_drops_comments_and_keeps_loops_whole() {
    let doc = "text\n\n<!-- rendered: a reason\n     on two lines -->\n```sh\n\
               a --x \\\n  --y   # note\n# only a comment\nfor i in 1 2; do\n  echo \"#$i\"\ndone\n```\n\
               ```yaml\nnot: a command\n```\n   ```sh\n   b '# kept' # dropped\n   ```\n\
               ```console\n$ c \\\n  d\noutput\n```\n";
    let found = extract("x.md", doc);
    let texts: Vec<&str> = found.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "a --x --y",
            "for i in 1 2; do\n  echo \"#$i\"\ndone",
            "b '# kept'",
            "c d"
        ]
    );
    assert_eq!(
        found.iter().map(|c| c.line).collect::<Vec<_>>(),
        [6, 9, 17, 20]
    );
    assert_eq!(found[0].rendered.as_deref(), Some("a reason on two lines"));
    assert_eq!(found[1].rendered.as_deref(), Some("a reason on two lines"));
    assert_eq!(found[2].rendered, None);
}

const FAILING_IMAGE: &str = "quay.io/openshift-release-dev/ocp-release@sha256:5e3a6c1f0b2748d9e1c7a0b8f6d3e2c1b0a9f8e7d6c5b4a39281706f5e4d3c2b";

/// The README's first run: `serve` on the sample snapshot, asked with its
/// curl line; and `check` on the sample, a must-gather, its archive and a
/// live cluster.
#[test]
fn the_readmes_serve_curl_and_check_commands_run() {
    let (_turn, world) = lock();
    let kubeconfig = PathBuf::from(world.var("ADMIN_KUBECONFIG"));
    let home = tempfile::tempdir().unwrap();
    let shell = Shell::new(&kubeconfig, world.var("KUBECTL"))
        .with("HOME", &home.path().display().to_string());
    // A directory of the user's: the repository's examples, and what the
    // commands name.
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(format!("{ROOT}/examples"), dir.path().join("examples")).unwrap();

    // serve, with no cluster: on ports of the test's (the README's
    // 8443 and 9090 may be taken on a shared machine).
    let (webhook, admin) = (free_port(), free_port());
    let serve = command(SERVE, README, "cargo run --release -- serve");
    let mut child = shell.command(dir.path(), &format!("exec {serve}"));
    child
        .env_remove("KUBECONFIG")
        .env(
            "PREFLIGHT_GATE_WEBHOOK_ADDR",
            format!("127.0.0.1:{webhook}"),
        )
        .env("PREFLIGHT_GATE_ADMIN_ADDR", format!("127.0.0.1:{admin}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _serve = Running(child.spawn().unwrap());
    wait_until("serve is ready", 60, || http_ok(admin, "/readyz"));
    let curl = fill(
        &command(SERVE, README, "curl --cacert certs/ca.crt"),
        "https://localhost:8443/",
        &format!("https://localhost:{webhook}/"),
    );
    let answer: Value = serde_json::from_str(&shell.ok(dir.path(), &curl)).unwrap();
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    let message = answer["response"]["status"]["message"].as_str().unwrap();
    assert!(message.contains("preflight for 4.15.3 failed"), "{message}");

    // check: 3 is the exit code of blocking failures, which each of these
    // targets has; the report is printed either way.
    let must_gather = format!("{ROOT}/tests/data/must-gathers/installing-4.15");
    std::os::unix::fs::symlink(&must_gather, dir.path().join("must-gather")).unwrap();
    shell.ok(dir.path(), "tar -czf must-gather.tar.gz -C must-gather .");
    std::fs::create_dir(home.path().join(".kube")).unwrap();
    std::fs::copy(&kubeconfig, home.path().join(".kube/config")).unwrap();
    std::fs::write(dir.path().join("token"), "e2e-token\n").unwrap();
    // The README's querier is an example host: a querier of the test's
    // stands in, with no alert firing.
    let querier = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let querier_url = format!("http://127.0.0.1:{}", querier.local_addr().unwrap().port());
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in querier.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let body = r#"{"status":"success","data":{"alerts":[]}}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    for begins in [
        "cargo run --release -- check --to 4.15.3",
        "preflight-gate check --to 4.15.3 --snapshot ./must-gather/",
        "preflight-gate check --to 4.15.3 --snapshot must-gather.tar.gz",
        "preflight-gate check --to 4.15.3 --kubeconfig ~/.kube/config",
    ] {
        let mut text = command(SERVE, README, begins);
        if begins.contains("--kubeconfig") {
            text = fill(&text, "https://thanos-querier.example:9091", &querier_url);
        }
        let out = shell.run(dir.path(), &text);
        assert!(
            [Some(0), Some(3), Some(4)].contains(&out.code),
            "{text}: {:?}\n{}\n{}",
            out.code,
            out.stdout,
            out.stderr
        );
        assert!(out.stdout.contains("4.15.3"), "{text}:\n{}", out.stdout);
        if begins.contains("--kubeconfig") {
            // The live cluster's own checks ran.
            assert!(out.stdout.contains("ClusterVersionState"), "{}", out.stdout);
        }
    }

    // A hosted cluster's, from the made-up pair of tests/data/hosted: the
    // management cluster's snapshot and the hosted cluster's own.
    std::os::unix::fs::symlink(
        format!("{ROOT}/tests/data/hosted/management"),
        dir.path().join("management"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        format!("{ROOT}/tests/data/hosted/guest"),
        dir.path().join("prod-must-gather"),
    )
    .unwrap();
    for (begins, says) in [
        (
            "preflight-gate check --snapshot ./management/ --hosted-cluster clusters/prod --hosted-snapshot ./prod-must-gather/ --to",
            "HostedClusterVersionSupported",
        ),
        (
            "preflight-gate check --snapshot ./management/ --hosted-cluster clusters/prod --hosted-snapshot ./prod-must-gather/ --nodepool",
            "NodePoolVersionSkew",
        ),
    ] {
        let text = command(SERVE, README, begins);
        let out = shell.run(dir.path(), &text);
        assert!(
            [Some(0), Some(3), Some(4)].contains(&out.code),
            "{text}: {:?}\n{}\n{}",
            out.code,
            out.stdout,
            out.stderr
        );
        assert!(out.stdout.contains(says), "{text}:\n{}", out.stdout);
    }

    // A fleet: two snapshots (the sample and a must-gather), and the test
    // cluster through a kubeconfig of its own.
    std::fs::create_dir(dir.path().join("snapshots")).unwrap();
    std::os::unix::fs::symlink(
        format!("{ROOT}/examples/snapshot"),
        dir.path().join("snapshots/sample"),
    )
    .unwrap();
    std::os::unix::fs::symlink(&must_gather, dir.path().join("snapshots/installing")).unwrap();
    std::fs::copy(&kubeconfig, dir.path().join("prod-a.kubeconfig")).unwrap();
    for (begins, clusters) in [
        ("preflight-gate fleet --to 4.15.3 snapshots/*/", 2),
        (
            "preflight-gate fleet --to 4.15.3 -o json prod-*.kubeconfig",
            1,
        ),
    ] {
        let text = command(SERVE, README, begins);
        let out = shell.run(dir.path(), &text);
        assert!(
            [Some(0), Some(1), Some(3)].contains(&out.code),
            "{text}: {:?}\n{}\n{}",
            out.code,
            out.stdout,
            out.stderr
        );
        let printed = match text.contains("-o html") {
            true => std::fs::read_to_string(dir.path().join("fleet.html")).unwrap(),
            false => out.stdout.clone(),
        };
        assert!(printed.contains("4.15.3"), "{text}:\n{printed}");
        if text.contains("-o html") {
            assert_eq!(printed.matches("<svg").count(), clusters, "{printed}");
        } else if text.contains("-o json") {
            let report: Value = serde_json::from_str(&out.stdout).unwrap();
            assert_eq!(
                report["clusters"].as_array().unwrap().len(),
                clusters,
                "{report}"
            );
        } else {
            assert!(
                out.stdout.contains("sample") && out.stdout.contains("installing"),
                "{}",
                out.stdout
            );
        }
    }
}

const FAILING_RESULT: &str = "release-sha256-5e3a6c1f0b2748d9e1c7a0b8f6d3e2c1b0a9f8e7d6c5b4a3";

fn in_hours(hours: i64) -> String {
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(hours);
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// What an administrator does day to day, and the runbooks' diagnoses of
/// results and overrides, on the shared world: its seeded results (4.15.3
/// fails, 4.14.12 passes) and its controller, as the admin.
#[test]
fn day_two_commands_run_on_the_shared_control_plane() {
    let (_turn, world) = lock();
    let kubeconfig = PathBuf::from(world.var("ADMIN_KUBECONFIG"));
    let shell = Shell::new(&kubeconfig, world.var("KUBECTL"));
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let sh = |doc: &str, begins: &str, fills: &[(&str, &str)]| {
        let mut text = command(SHARED, doc, begins);
        for (placeholder, value) in fills {
            text = fill(&text, placeholder, value);
        }
        shell.ok(dir, &text)
    };

    // An object of the test's own, for a target nobody asked about, made as
    // the guide says (tests/e2e/deploy.rs runs that part as an updater): its
    // runs can be asked for without touching the seeded results.
    let image = "quay.io/e2e/release@sha256:d0c5d0c5000000000000000000000000000000000000000000000000000d0c5e";
    let manifest = fenced_after(INSTALL, "<!-- run-request", "yaml")
        .replace("<the image printed above>", image)
        .replace("version: 4.15.3", "version: 4.99.2");
    std::fs::write(dir.join("upf.yaml"), &manifest).unwrap();
    let created = shell.ok(dir, "oc create -f upf.yaml -o name");
    let name = created.trim().rsplit('/').next().unwrap().to_owned();
    let finished = |o: &Value| {
        o["metadata"]["name"] == name.as_str()
            && ["Passed", "Failed"].contains(&o["status"]["phase"].as_str().unwrap_or(""))
    };
    let mut started = world.wait_for_result(image, "finished", finished)["status"]["startTime"]
        .as_str()
        .unwrap()
        .to_owned();
    // Asks for a run with `doc`'s annotate and watch, and sees it run again.
    let ask_again = |doc: &str, started: &str| -> String {
        let name = name.as_str();
        std::thread::sleep(Duration::from_millis(1100));
        let listing = sh(doc, "oc get upf", &[]);
        assert!(listing.lines().any(|l| l.starts_with(name)), "{listing}");
        sh(
            doc,
            "oc annotate upf <name> --overwrite",
            &[("<name>", name)],
        );
        let again = world.wait_for_result(image, "run again", |o| {
            finished(o)
                && o["status"]["startTime"]
                    .as_str()
                    .is_some_and(|s| s > started)
        });
        let watched = sh(doc, "oc get upf <name> -w", &[("<name>", name)]);
        assert!(watched.contains(name), "{watched}");
        again["status"]["startTime"].as_str().unwrap().to_owned()
    };

    // docs/install.md, "Asking for a run with oc".
    let listing = sh(INSTALL, "oc get upf", &[]);
    assert!(
        listing.contains(FAILING_RESULT) && listing.contains(&name),
        "{listing}"
    );
    let wide = sh(INSTALL, "oc get upf -o wide", &[]);
    assert!(wide.contains(image), "{wide}");
    let yaml = sh(INSTALL, "oc get upf <name> -o yaml", &[("<name>", &name)]);
    assert!(yaml.contains("results:"), "{yaml}");
    started = ask_again(INSTALL, &started);
    let offered = sh(
        INSTALL,
        "oc get clusterversion version -o jsonpath='{.status.availableUpdates",
        &[],
    );
    assert_eq!(offered.trim(), FAILING_IMAGE);

    // The runbook of a blocked update: the denial's Event, the report, a
    // fresh run, then the update to a passing target.
    let blocked = ClusterVersionPatch::version("4.15.3").run(world);
    assert!(
        !blocked.ok && blocked.stderr.contains("preflight for 4.15.3 failed"),
        "{}",
        blocked.stderr
    );
    let blocked_doc = runbook("ClusterUpdateBlockedByPreflight");
    let described = sh(&blocked_doc, "oc describe clusterversion version", &[]);
    assert!(
        described.contains("Name:") && described.contains("version"),
        "{described}"
    );
    let wide = sh(&blocked_doc, "oc get updatepreflight -o wide", &[]);
    assert!(wide.contains(FAILING_IMAGE), "{wide}");
    let report = sh(
        &blocked_doc,
        "oc get updatepreflight <name> -o yaml",
        &[("<name>", FAILING_RESULT)],
    );
    assert!(report.contains("remediationURL"), "{report}");
    started = ask_again(&blocked_doc, &started);
    sh(
        &blocked_doc,
        "oc adm upgrade --to <version>",
        &[("<version>", "4.14.12")],
    );
    assert_eq!(
        world.cluster_version()["spec"]["desiredUpdate"]["version"],
        "4.14.12"
    );

    // The runbook of a failing check.
    let failing_doc = runbook("UpdatePreflightFailing");
    let wide = sh(&failing_doc, "oc get updatepreflight -o wide", &[]);
    assert!(wide.contains(FAILING_RESULT), "{wide}");
    let failures = sh(
        &failing_doc,
        "oc get updatepreflight <name> -o jsonpath=",
        &[("<name>", FAILING_RESULT)],
    );
    assert!(
        failures.contains("MachineConfigPoolsHealthy\tFail\tpool worker is Degraded"),
        "{failures}"
    );
    assert!(!failures.contains("\tPass\t"), "{failures}");
    ask_again(&failing_doc, &started);

    // The runbook of stale results: the leader, and the results' ages.
    let stale_doc = runbook("PreflightResultsStale");
    let holder = sh(
        &stale_doc,
        "oc -n preflight-gate get lease preflight-gate-controller",
        &[],
    );
    assert!(!holder.trim().is_empty(), "no leader");
    sh(&stale_doc, "oc get updatepreflight -o wide", &[]);

    // docs/install.md's claims, written by the admin, who may override; the
    // guide's example time is replaced by one four hours ahead (a time past
    // or too far ahead is refused as it is written).
    let until = in_hours(4);
    for begins in [
        "oc annotate --overwrite clusterversion version preflight.dev/override=",
        "oc annotate --overwrite clusterversion version preflight.dev/accept=",
    ] {
        sh(INSTALL, begins, &[("2026-12-01T16:00:00Z", &until)]);
    }
    let annotations = &world.cluster_version()["metadata"]["annotations"];
    assert_eq!(annotations["preflight.dev/override"], "4.15.3");
    assert_eq!(annotations["preflight.dev/accept-for"], "4.15.3");
    assert_eq!(annotations["preflight.dev/claimed-by"], User::Admin.name());
    // The four-eyes approval names the spec's generation it approves.
    sh(
        INSTALL,
        "oc annotate --overwrite clusterversion version preflight.dev/claimed-generation=",
        &[("2026-12-01T16:00:00Z", &until)],
    );
    let approved = world.cluster_version();
    assert_eq!(
        approved["metadata"]["annotations"]["preflight.dev/claimed-generation"],
        approved["metadata"]["generation"].to_string()
    );

    // The runbook of a used override reads them back.
    let used_doc = runbook("PreflightGateOverrideUsed");
    sh(&used_doc, "oc describe clusterversion version", &[]);
    let read = sh(
        &used_doc,
        "oc get clusterversion version -o jsonpath='{.metadata.annotations}'",
        &[],
    );
    assert!(
        read.contains("\"preflight.dev/override\":\"4.15.3\""),
        "{read}"
    );

    let own = preflight_gate::model::ReleaseKey::from_image(image).object_name();
    world.admin(&["delete", "updatepreflight", &name]);
    world.admin(&["delete", "updatepreflight", &own, "--ignore-not-found"]);
    // The next turn clears the target and the claims.
}

/// docs/support.md's inspect set, with the real oc, on the shared world
/// after a blocked update: the archive holds the results, the webhook
/// configuration, the ClusterVersion, the CRDs, both namespaces and the
/// gate's Event, and no Secret's value. The world runs the gate in this
/// process, not as pods, so there are no replica logs to gather here.
#[test]
fn the_support_inspect_gathers_the_gates_objects_and_events() {
    // The commands are oc's own: where there is no real oc this fails
    // under CI=true, and elsewhere says loudly that it did not run.
    if crate::oc::oc().is_none() {
        not_run_here(
            "the_support_inspect_gathers_the_gates_objects_and_events",
            &format!("{NO_OC} (docs/support.md runs oc adm inspect)"),
        );
        return;
    }
    let (_turn, world) = lock();
    let kubeconfig = PathBuf::from(world.var("ADMIN_KUBECONFIG"));
    let shell = Shell::new(&kubeconfig, world.var("KUBECTL"));
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();

    // Something the gate recorded: a blocked update's Event, about the
    // cluster-scoped ClusterVersion, so in `default`.
    let blocked = ClusterVersionPatch::version("4.15.3").run(world);
    assert!(!blocked.ok, "{}", blocked.stderr);
    let event = world.wait_for_event("UpdateBlockedByPreflight", "preflight for 4.15.3 failed");
    assert_eq!(event["metadata"]["namespace"], "default", "{event}");
    let event_name = event["metadata"]["name"].as_str().unwrap();

    let script = [
        "oc adm inspect --dest-dir=preflight-gate-inspect ns/",
        "oc adm inspect --dest-dir=preflight-gate-inspect updatepreflights",
        "oc adm inspect --dest-dir=preflight-gate-inspect -n default events",
        "tar -czf preflight-gate-inspect.tar.gz",
    ]
    .map(|begins| command(GATHER, SUPPORT, begins))
    .join("\n");
    shell.ok(dir, &script);

    // What the guide says it holds, from the archive it sends.
    let unpacked = dir.join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    shell.ok(dir, "tar -xzf preflight-gate-inspect.tar.gz -C unpacked");
    let top = unpacked.join("preflight-gate-inspect");
    let read = |path: &str| {
        std::fs::read_to_string(top.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    let result = read(&format!(
        "cluster-scoped-resources/preflight.dev/updatepreflights/{FAILING_RESULT}.yaml"
    ));
    assert!(
        result.contains("kind: UpdatePreflight") && result.contains("MachineConfigPoolsHealthy"),
        "{result}"
    );
    let webhook = read(
        "cluster-scoped-resources/admissionregistration.k8s.io/validatingwebhookconfigurations/preflight-gate.yaml",
    );
    assert!(
        webhook.contains(crate::cluster::WEBHOOK)
            && webhook.contains("desired-update-or-claims-changed"),
        "{webhook}"
    );
    let cluster_version =
        read("cluster-scoped-resources/config.openshift.io/clusterversions/version.yaml");
    assert!(cluster_version.contains(FAILING_IMAGE), "{cluster_version}");
    for crd in [
        "updatepreflights.preflight.dev",
        "preflightchecks.preflight.dev",
    ] {
        let crd = read(&format!(
            "cluster-scoped-resources/apiextensions.k8s.io/customresourcedefinitions/{crd}.yaml"
        ));
        assert!(crd.contains("kind: CustomResourceDefinition"), "{crd}");
    }
    for namespace in ["preflight-gate", "preflight-gate-checks"] {
        for file in [
            format!("{namespace}.yaml"),
            "core/pods.yaml".into(),
            "core/events.yaml".into(),
            "batch/jobs.yaml".into(),
        ] {
            read(&format!("namespaces/{namespace}/{file}"));
        }
    }
    let gathered = read(&format!("namespaces/default/core/events/{event_name}.yaml"));
    assert!(
        gathered.contains("UpdateBlockedByPreflight")
            && gathered.contains("preflight for 4.15.3 failed"),
        "{gathered}"
    );

    // Secrets are listed without their values: the key the gate signs its
    // results with is named, and its value is nowhere in the archive.
    let secrets = read("namespaces/preflight-gate/core/secrets.yaml");
    assert!(secrets.contains("preflight-gate-result-key"), "{secrets}");
    let key: Value = serde_json::from_str(&world.admin(&[
        "-n",
        "preflight-gate",
        "get",
        "secret",
        "preflight-gate-result-key",
        "-o",
        "json",
    ]))
    .unwrap();
    let values: Vec<&str> = key["data"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(!values.is_empty(), "{key}");
    let leaked = shell.run(
        dir,
        &format!("grep -rlF -e {} unpacked", values.join(" -e ")),
    );
    assert_eq!(
        leaked.code,
        Some(1),
        "a Secret's value is in the archive: {}{}",
        leaked.stdout,
        leaked.stderr
    );
}

/// docs/install.md's opt-in to the sensitive grant: its lines added to the
/// guide's own overlay (my-cluster/, beside the checkout) render the
/// ClusterRole that lists Secrets, its binding to the gate's
/// ServiceAccount, and the flag on the gate's container.
#[test]
fn the_guides_tls_secrets_opt_in_renders_on_the_guides_overlay() {
    let (_turn, world) = lock();
    let top = tempfile::tempdir().unwrap();
    let top = top.path();
    std::os::unix::fs::symlink(ROOT, top.join("preflight-gate")).unwrap();
    let mut overlay: Value =
        serde_saphyr::from_str(&fenced_after(INSTALL, "<!-- image-override", "yaml")).unwrap();
    let opt_in: Value =
        serde_saphyr::from_str(&fenced_after(INSTALL, "<!-- tls-secrets", "yaml")).unwrap();
    let added = opt_in.as_object().unwrap();
    assert!(
        added.keys().all(|k| k == "components"),
        "the lines to add are components alone: {opt_in}"
    );
    let components = overlay
        .as_object_mut()
        .unwrap()
        .entry("components")
        .or_insert_with(|| json!([]));
    components
        .as_array_mut()
        .unwrap()
        .extend(added["components"].as_array().unwrap().iter().cloned());
    std::fs::create_dir(top.join("my-cluster")).unwrap();
    std::fs::write(
        top.join("my-cluster/kustomization.yaml"),
        overlay.to_string(),
    )
    .unwrap();
    let out = world.kubectl(
        User::Admin,
        &["kustomize", top.join("my-cluster").to_str().unwrap()],
    );
    assert!(
        out.ok,
        "the guide's overlay with the opt-in: {}",
        out.stderr
    );
    let objects: Vec<Value> = out
        .stdout
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str(doc).unwrap())
        .collect();
    let find = |kind: &str, name: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    };
    let role = find("ClusterRole", "preflight-gate-read-tls-secrets");
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}])
    );
    let binding = find("ClusterRoleBinding", "preflight-gate-read-tls-secrets");
    assert_eq!(
        binding["roleRef"]["name"],
        "preflight-gate-read-tls-secrets"
    );
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "preflight-gate", "namespace": "preflight-gate"}])
    );
    let deployment = find("Deployment", "preflight-gate");
    let env = &deployment["spec"]["template"]["spec"]["containers"][0]["env"];
    assert!(
        env.as_array()
            .unwrap()
            .contains(&json!({"name": "PREFLIGHT_GATE_READ_TLS_SECRETS", "value": "true"})),
        "{env}"
    );
}

/// What `oc adm upgrade --to VERSION` sends, as the admin's kubectl.
struct ClusterVersionPatch(Value);

impl ClusterVersionPatch {
    fn version(version: &str) -> Self {
        Self(json!({"spec": {"desiredUpdate": {"version": version}}}))
    }

    fn run(&self, world: &World) -> crate::cluster::Output {
        world.kubectl(
            User::Admin,
            &[
                "patch",
                "clusterversion",
                "version",
                "--type=merge",
                "-p",
                &self.0.to_string(),
            ],
        )
    }
}

/// A control plane of the test's own (tests/control-plane/up with a state
/// dir of its), stopped with `down` when the test ends, and the gate the
/// guide's Development section serves on it.
struct Plane {
    dir: PathBuf,
    gate: Option<Running>,
}

impl Drop for Plane {
    fn drop(&mut self) {
        self.gate.take();
        let _ = Command::new(format!("{ROOT}/tests/control-plane/down"))
            .env("PREFLIGHT_GATE_CP_DIR", &self.dir)
            .output();
    }
}

/// Kinds of OpenShift's monitoring stack, which the overlay ships and the
/// test control plane does not serve: stand-ins that keep every field.
fn monitoring_crds() -> Value {
    let crd = |kind: &str, plural: &str| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.monitoring.coreos.com")},
            "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(),
                    "listKind": format!("{kind}List")},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]}})
    };
    json!({"apiVersion": "v1", "kind": "List",
        "items": [crd("ServiceMonitor", "servicemonitors"), crd("PrometheusRule", "prometheusrules")]})
}

/// The guide's install, verify, upgrade, backup and restore, break-glass
/// and uninstall, and the runbooks' diagnoses of the Deployment, in the
/// order an administrator meets them, on a control plane of their own.
/// No kube-controller-manager and no service-ca run there: where the guide
/// waits for them, the test does their part (the Deployment's status, the
/// serving Secret and the caBundle), and says so.
#[test]
fn install_upgrade_break_glass_and_uninstall_run_on_a_control_plane_of_their_own() {
    let (_turn, world) = lock();
    let top = tempfile::tempdir().unwrap();
    let top = top.path();
    // A checkout of the repository (certs/ is written into it), and
    // my-cluster/ beside it, as the guide lays them out.
    let checkout = top.join("preflight-gate");
    std::fs::create_dir(&checkout).unwrap();
    for entry in ["deploy", "tests", "examples"] {
        std::os::unix::fs::symlink(format!("{ROOT}/{entry}"), checkout.join(entry)).unwrap();
    }
    let mut plane = Plane {
        dir: top.join("cp"),
        gate: None,
    };
    let kubeconfig = plane.dir.join("admin.kubeconfig");
    let admin_port = free_port();
    let shell = Shell::new(&kubeconfig, world.var("KUBECTL"))
        .with("PREFLIGHT_GATE_CP_DIR", &plane.dir.display().to_string())
        // The Development gate's admin port: 9090 may be taken here.
        .with(
            "PREFLIGHT_GATE_ADMIN_ADDR",
            &format!("127.0.0.1:{admin_port}"),
        );
    let kubectl = |args: &[&str]| -> String {
        let out = Command::new(world.var("KUBECTL"))
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let apply = |object: &Value| {
        let path = top.join("object.json");
        std::fs::write(&path, object.to_string()).unwrap();
        kubectl(&["apply", "--server-side", "-f", path.to_str().unwrap()]);
    };
    let sh = |dir: &Path, doc: &str, begins: &[&str], fills: &[(&str, &str)]| {
        let mut text = begins
            .iter()
            .map(|b| command(OWN, doc, b))
            .collect::<Vec<_>>()
            .join("\n");
        for (placeholder, value) in fills {
            text = fill(&text, placeholder, value);
        }
        shell.ok(dir, &text)
    };
    let patch_target = |version: &str| {
        Command::new(world.var("KUBECTL"))
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["patch", "clusterversion", "version", "--type=merge", "-p"])
            .arg(json!({"spec": {"desiredUpdate": {"version": version}}}).to_string())
            .output()
            .unwrap()
    };

    // docs/install.md, Development: the control plane, the dev overlay,
    // the certificates, and the gate serving.
    sh(
        &checkout,
        INSTALL,
        &[
            "eval \"$(tests/control-plane/up)\"",
            "for ns in openshift-config",
            "\"$KUBECTL\" apply --server-side -k deploy/overlays/dev",
            "cargo run -- certs",
            "ca=$(base64 -w0 certs/ca.crt)",
            "\"$KUBECTL\" patch validatingwebhookconfiguration preflight-gate",
        ],
        &[],
    );
    let serve = command(
        OWN,
        INSTALL,
        "cargo run -- serve --kubeconfig \"$KUBECONFIG\"",
    );
    let mut gate = shell.command(&checkout, &format!("exec {serve}"));
    gate.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    plane.gate = Some(Running(gate.spawn().unwrap()));
    wait_until("the Development gate is ready", 90, || {
        http_ok(admin_port, "/readyz")
    });

    // The cluster's ClusterVersion: OpenShift's CRD, and `version` as the
    // examples have it (4.14.1, offered 4.14.12, 4.15.3 and 4.15.16).
    kubectl(&[
        "apply",
        "--server-side",
        "-f",
        &format!(
            "{ROOT}/tests/data/openshift-crds/0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml"
        ),
    ]);
    kubectl(&[
        "wait",
        "--for",
        "condition=established",
        "crd/clusterversions.config.openshift.io",
    ]);
    let review: Value = serde_json::from_str(include_str!(
        "../../examples/reviews/update-to-4.14.12.json"
    ))
    .unwrap();
    let example = &review["request"]["oldObject"];
    wait_until("ClusterVersions are served", 30, || {
        let path = top.join("cv.json");
        let cv = json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
            "metadata": {"name": "version"}, "spec": example["spec"]});
        std::fs::write(&path, cv.to_string()).unwrap();
        Command::new(world.var("KUBECTL"))
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["apply", "--server-side", "-f", path.to_str().unwrap()])
            .status()
            .unwrap()
            .success()
    });
    kubectl(&[
        "patch",
        "clusterversion",
        "version",
        "--subresource=status",
        "--type=merge",
        "-p",
        &json!({"status": example["status"]}).to_string().replacen(
            "{\"status\":{",
            "{\"status\":{\"versionHash\":\"XGjSjKwUh\",",
            1,
        ),
    ]);
    // Verify, against the Development gate: it answers the dry run (a
    // fresh gate says the run is under way, then gives its verdict).
    let verdict = shell.run(
        top,
        &command(
            OWN,
            INSTALL,
            "oc patch clusterversion version --type merge --dry-run=server",
        ),
    );
    assert!(
        !verdict.ok && verdict.stderr.contains("preflight for 4.15.3"),
        "{}",
        verdict.stderr
    );
    // The Development section's way out of the way, before installing as
    // a cluster would be: its webhook configuration deleted.
    kubectl(&["delete", "validatingwebhookconfiguration", "preflight-gate"]);

    // Install: the guide's own overlay, which overrides the image.
    apply(&monitoring_crds());
    let overlay = fenced_after(INSTALL, "<!-- image-override", "yaml");
    assert!(
        overlay.contains("- ../preflight-gate/deploy/overlays/openshift"),
        "{overlay}"
    );
    std::fs::create_dir(top.join("my-cluster")).unwrap();
    std::fs::write(top.join("my-cluster/kustomization.yaml"), &overlay).unwrap();
    let images = sh(
        top,
        INSTALL,
        &["oc kustomize my-cluster | grep 'image:'"],
        &[],
    );
    let mirrored = "registry.internal/platform/preflight-gate@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    assert!(images.contains(mirrored), "{images}");
    // The overlay as it is sets no image: it does not render, and says
    // what to set (tests/it/deploy.rs checks the message).
    let bare = Command::new(world.var("KUBECTL"))
        .args(["kustomize", "deploy/overlays/openshift"])
        .current_dir(&checkout)
        .output()
        .unwrap();
    assert!(
        !bare.status.success(),
        "deploy/overlays/openshift rendered with no image set"
    );
    sh(top, INSTALL, &["oc apply -k my-cluster"], &[]);
    let image = || {
        kubectl(&[
            "-n",
            "preflight-gate",
            "get",
            "deployment",
            "preflight-gate",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ])
    };
    assert_eq!(image(), mirrored);
    // Until a replica is ready behind the Service, a target change is
    // refused, never let through.
    wait_until("the webhook refuses while no replica is ready", 30, || {
        let out = patch_target("4.15.3");
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("failed calling webhook")
    });

    // What service-ca and the Deployment controller would do: the serving
    // Secret, the caBundle, and the Deployment's status once its replicas
    // are up.
    let certs = checkout.join("certs");
    kubectl(&[
        "-n",
        "preflight-gate",
        "create",
        "secret",
        "tls",
        "preflight-gate-tls",
        &format!("--cert={}", certs.join("tls.crt").display()),
        &format!("--key={}", certs.join("tls.key").display()),
    ]);
    let ca_bundle = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .encode(std::fs::read(certs.join("ca.crt")).unwrap())
    };
    let inject = || {
        kubectl(&[
            "patch",
            "validatingwebhookconfiguration",
            "preflight-gate",
            "--type=json",
            "-p",
            &json!([
                {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": ca_bundle},
                {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": ca_bundle},
            ])
            .to_string(),
        ]);
    };
    inject();
    let rolled_out = || {
        let generation = kubectl(&[
            "-n",
            "preflight-gate",
            "get",
            "deployment",
            "preflight-gate",
            "-o",
            "jsonpath={.metadata.generation}",
        ]);
        let status = json!({"status": {"observedGeneration": generation.trim().parse::<i64>().unwrap(),
            "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2}});
        kubectl(&[
            "-n",
            "preflight-gate",
            "patch",
            "deployment",
            "preflight-gate",
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ]);
    };
    rolled_out();

    // Verify.
    let rollout = sh(
        top,
        INSTALL,
        &["oc -n preflight-gate rollout status deployment/preflight-gate"],
        &[],
    );
    assert!(rollout.contains("successfully rolled out"), "{rollout}");
    sh(
        top,
        INSTALL,
        &["oc -n preflight-gate get pods -o wide"],
        &[],
    );
    let ca = sh(
        top,
        INSTALL,
        &["oc get validatingwebhookconfiguration preflight-gate -o jsonpath="],
        &[],
    );
    assert!(ca.contains("subject=") && ca.contains("notAfter="), "{ca}");
    let holder = sh(
        top,
        INSTALL,
        &["oc -n preflight-gate get lease preflight-gate-controller"],
        &[],
    );
    assert!(!holder.trim().is_empty(), "no replica holds the Lease");
    sh(top, INSTALL, &["oc get updatepreflights"], &[]);

    // The runbooks' diagnoses of the Deployment.
    let degraded = runbook("PreflightGateDegraded");
    let deployment = sh(
        top,
        &degraded,
        &["oc -n preflight-gate get deployment preflight-gate"],
        &[],
    );
    assert!(deployment.contains("2/2"), "{deployment}");
    sh(
        top,
        &degraded,
        &[
            "oc -n preflight-gate get pods -o wide",
            "oc -n preflight-gate get events --sort-by=.lastTimestamp | tail -20",
            "oc -n preflight-gate describe pods -l app.kubernetes.io/name=preflight-gate",
        ],
        &[],
    );
    let down = runbook("PreflightGateDown");
    let described = sh(
        top,
        &down,
        &[
            "oc -n preflight-gate get pods -o wide",
            "oc -n preflight-gate describe deploy/preflight-gate",
            "oc -n preflight-gate get endpointslices",
        ],
        &[],
    );
    assert!(described.contains(mirrored), "{described}");
    let saturated = runbook("PreflightGateConnectionsSaturated");
    let policies = sh(
        top,
        &saturated,
        &["oc -n preflight-gate get networkpolicy"],
        &[],
    );
    assert!(policies.contains("preflight-gate"), "{policies}");
    sh(
        top,
        &saturated,
        &["oc get pods -A -o wide --field-selector spec.nodeName=NODE"],
        &[("NODE", "worker-0")],
    );
    sh(
        top,
        &saturated,
        &["oc -n preflight-gate set env deploy/preflight-gate"],
        &[],
    );
    let env = kubectl(&[
        "-n",
        "preflight-gate",
        "get",
        "deployment",
        "preflight-gate",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].env[?(@.name==\"PREFLIGHT_GATE_MAX_CONNECTIONS\")].value}",
    ]);
    assert_eq!(env, "2048");
    let expiry = sh(
        top,
        &runbook("PreflightGateCertificateExpiringSoon"),
        &["oc -n preflight-gate get secret preflight-gate-tls"],
        &[],
    );
    assert!(expiry.starts_with("notAfter="), "{expiry}");

    // docs/upgrading.md: back up, apply a new image, go back to the backup.
    sh(
        top,
        UPGRADING,
        &[
            "oc get -o yaml validatingwebhookconfiguration/preflight-gate",
            "oc get crd updatepreflights.preflight.dev",
            "oc get upf -o yaml",
        ],
        &[],
    );
    for file in [
        "preflight-gate-before.yaml",
        "preflight-gate-crds-before.yaml",
        "preflight-gate-results-before.yaml",
    ] {
        let backup = std::fs::read_to_string(top.join(file)).unwrap();
        assert!(backup.contains("kind: List"), "{file}: {backup}");
        for stamp in ["resourceVersion", "uid", "creationTimestamp", "generation"] {
            assert!(
                !backup.contains(&format!("\n    {stamp}:")),
                "{file} keeps {stamp}"
            );
        }
    }
    let newer = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
    let moved = fill(
        &overlay,
        &mirrored[mirrored.find("sha256:").unwrap()..],
        newer,
    );
    std::fs::write(top.join("my-cluster/kustomization.yaml"), &moved).unwrap();
    sh(top, UPGRADING, &["oc apply -k my-cluster"], &[]);
    assert!(image().ends_with(newer));
    rolled_out();
    sh(
        top,
        UPGRADING,
        &["oc -n preflight-gate rollout status deployment/preflight-gate"],
        &[],
    );
    // A webhook configuration made again meanwhile (other uid, other
    // resourceVersion): the backup applies over it.
    kubectl(&["delete", "validatingwebhookconfiguration", "preflight-gate"]);
    sh(top, UPGRADING, &["oc apply -k my-cluster"], &[]);
    sh(
        top,
        UPGRADING,
        &["oc apply -f preflight-gate-crds-before.yaml"],
        &[],
    );
    assert_eq!(image(), mirrored, "the backup put the image back");
    std::fs::write(top.join("my-cluster/kustomization.yaml"), &overlay).unwrap();
    let restored: Value = serde_json::from_str(&kubectl(&[
        "get",
        "validatingwebhookconfiguration",
        "preflight-gate",
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(
        restored["webhooks"][0]["clientConfig"]["caBundle"],
        ca_bundle.as_str()
    );
    // Results are disposable: the gate's own are deleted, the rest put back.
    sh(
        top,
        UPGRADING,
        &[
            "oc delete validatingwebhookconfiguration preflight-gate",
            "oc delete upf -l preflight.dev/auto-created=true",
            "oc apply -k my-cluster",
        ],
        &[],
    );
    inject();

    // docs/install.md, Break-glass, with the gate down: the backup, the
    // configuration gone, and the update goes through.
    sh(
        top,
        INSTALL,
        &[
            "oc get validatingwebhookconfiguration preflight-gate -o yaml",
            "oc delete validatingwebhookconfiguration preflight-gate",
        ],
        &[],
    );
    let backups: Vec<PathBuf> = std::fs::read_dir(top)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("preflight-gate-webhook-")
        })
        .collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    let backup = std::fs::read_to_string(&backups[0]).unwrap();
    assert!(
        backup.contains("kind: ValidatingWebhookConfiguration"),
        "{backup}"
    );
    for stamp in ["resourceVersion", "uid", "creationTimestamp", "generation"] {
        assert!(
            !backup.contains(&format!("\n  {stamp}:")),
            "the backup keeps {stamp}"
        );
    }
    wait_until("the update goes through", 30, || {
        patch_target("4.15.3").status.success()
    });
    // Claims written meanwhile, which the uninstall below removes.
    kubectl(&[
        "annotate",
        "--overwrite",
        "clusterversion",
        "version",
        "preflight.dev/override=4.15.3",
        "preflight.dev/override-reason=left over",
        "preflight.dev/claimed-by=admin",
    ]);
    kubectl(&[
        "patch",
        "clusterversion",
        "version",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/desiredUpdate"}]"#,
    ]);
    // Restore: the overlay, then the backup over what it made.
    sh(
        top,
        INSTALL,
        &[
            "oc apply -k my-cluster",
            "oc apply -f preflight-gate-webhook-*.yaml",
        ],
        &[],
    );
    let back: Value = serde_json::from_str(&kubectl(&[
        "get",
        "validatingwebhookconfiguration",
        "preflight-gate",
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(
        back["webhooks"][0]["clientConfig"]["caBundle"],
        ca_bundle.as_str()
    );
    assert_eq!(
        back["webhooks"][0]["clientConfig"]["service"]["name"],
        "preflight-gate"
    );
    wait_until("gated again", 30, || {
        let out = patch_target("4.15.3");
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("failed calling webhook")
    });
    // The runbook's break-glass, the same way, in a directory of its own.
    let again = top.join("runbook");
    std::fs::create_dir(&again).unwrap();
    sh(
        &again,
        &down,
        &[
            "oc get validatingwebhookconfiguration preflight-gate -o yaml",
            "oc delete validatingwebhookconfiguration preflight-gate",
        ],
        &[],
    );
    wait_until("the update goes through", 30, || {
        patch_target("4.15.16").status.success()
    });
    sh(
        &again,
        INSTALL,
        &["oc apply -f preflight-gate-webhook-*.yaml"],
        &[],
    );
    kubectl(&["get", "validatingwebhookconfiguration", "preflight-gate"]);

    // Uninstall, with the guide's bindings and an Event of the gate's.
    for heading in [
        "### Who may override",
        "### Who may update but not override",
    ] {
        let binding: Value =
            serde_saphyr::from_str(&fenced_after(INSTALL, heading, "yaml")).unwrap();
        apply(&binding);
    }
    apply(&json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "preflight-gate-docs", "namespace": "default"},
        "eventTime": "2026-12-02T08:00:00.000000Z",
        "reportingController": "preflight-gate", "reportingInstance": "docs",
        "action": "Run", "reason": "PreflightPassed", "type": "Normal", "note": "left over",
        "regarding": {"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "name": "version"},
    }));
    // The gate's pods go with its Deployment.
    plane.gate.take();
    // What the namespace controller (kube-controller-manager, not run here)
    // does once the namespace is deleted: what is left in it goes, then its
    // finalizer. `oc delete -k` waits for that.
    let finalizer = {
        let (kubectl_bin, kubeconfig) = (world.var("KUBECTL").to_owned(), kubeconfig.clone());
        let file = top.join("finalize.json");
        std::thread::spawn(move || {
            let kubectl = |args: &[&str]| {
                Command::new(&kubectl_bin)
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .args(args)
                    .output()
                    .unwrap()
            };
            let deadline = Instant::now() + Duration::from_secs(120);
            // The gate's namespace and the check Jobs' (deploy/base).
            let mut left = vec!["preflight-gate", "preflight-gate-checks"];
            while Instant::now() < deadline {
                left.retain(|&name| {
                    let out = kubectl(&["get", "namespace", name, "-o", "json"]);
                    if !out.status.success() {
                        return false;
                    }
                    let mut namespace: Value = serde_json::from_slice(&out.stdout).unwrap();
                    if namespace["metadata"]["deletionTimestamp"].is_string() {
                        for kind in [
                            "leases",
                            "secrets",
                            "serviceaccounts",
                            "configmaps",
                            "events",
                        ] {
                            kubectl(&["-n", name, "delete", kind, "--all", "--wait=false"]);
                        }
                        namespace["spec"]["finalizers"] = json!([]);
                        std::fs::write(&file, namespace.to_string()).unwrap();
                        kubectl(&[
                            "replace",
                            "--raw",
                            &format!("/api/v1/namespaces/{name}/finalize"),
                            "-f",
                            file.to_str().unwrap(),
                        ]);
                    }
                    true
                });
                if left.is_empty() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(500));
            }
            panic!("the namespaces {left:?} were never deleted");
        })
    };
    sh(
        top,
        INSTALL,
        &[
            "mkdir -p preflight-gate-audit",
            "oc get events --all-namespaces --field-selector reportingComponent=preflight-gate -o yaml",
            "oc get clusterversion version -o jsonpath='{.metadata.annotations}'",
            "oc get updatepreflights -o yaml",
            "oc delete validatingwebhookconfiguration preflight-gate --ignore-not-found",
            "oc delete -k my-cluster --ignore-not-found",
            "for role in preflight-gate-override preflight-gate-window preflight-gate-updater; do",
            "oc annotate clusterversion version preflight.dev/override-",
        ],
        &[],
    );
    finalizer.join().unwrap();
    // The audit trail was exported before anything was removed: the gate's
    // Event, the claims on the ClusterVersion, the results.
    let exported = |file: &str| {
        std::fs::read_to_string(top.join("preflight-gate-audit").join(file))
            .unwrap_or_else(|e| panic!("{file} was not exported: {e}"))
    };
    assert!(
        exported("events.yaml").contains("preflight-gate-docs"),
        "{}",
        exported("events.yaml")
    );
    let claims = exported("claims.json");
    assert!(
        claims.contains("preflight.dev/override-reason") && claims.contains("left over"),
        "{claims}"
    );
    assert!(
        exported("updatepreflights.yaml").contains("kind: UpdatePreflight"),
        "{}",
        exported("updatepreflights.yaml")
    );
    // Nothing of the install is left.
    let my_cluster = top.join("my-cluster");
    let left = kubectl(&[
        "get",
        "-k",
        my_cluster.to_str().unwrap(),
        "--ignore-not-found",
        "-o",
        "name",
    ]);
    assert!(left.trim().is_empty(), "{left}");
    let webhooks = kubectl(&["get", "validatingwebhookconfigurations", "-o", "name"]);
    assert!(webhooks.trim().is_empty(), "{webhooks}");
    let crds = kubectl(&["get", "crd", "-o", "name"]);
    assert!(!crds.contains("preflight.dev"), "{crds}");
    let bindings: Value =
        serde_json::from_str(&kubectl(&["get", "clusterrolebindings", "-o", "json"])).unwrap();
    let dangling: Vec<&Value> = bindings["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| {
            [
                "preflight-gate-override",
                "preflight-gate-window",
                "preflight-gate-updater",
            ]
            .contains(&b["roleRef"]["name"].as_str().unwrap_or(""))
        })
        .collect();
    assert!(dangling.is_empty(), "bindings left: {dangling:?}");
    // The guide's own commands delete nothing of the audit trail: the
    // gate's Events are left to expire.
    let events = kubectl(&[
        "get",
        "events",
        "--all-namespaces",
        "--field-selector",
        "reportingComponent=preflight-gate",
        "-o",
        "name",
    ]);
    assert!(events.contains("preflight-gate-docs"), "events: {events}");
    let annotations = kubectl(&[
        "get",
        "clusterversion",
        "version",
        "-o",
        "jsonpath={.metadata.annotations}",
    ]);
    assert!(
        !annotations.contains("preflight.dev/"),
        "claims left: {annotations}"
    );
}
