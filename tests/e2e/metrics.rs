//! Metrics and alerts against the real thing. After an end-to-end scenario
//! (a denial, a dry run, accepted risks), a scrape of the gate's admin port
//! says what happened and passes `promtool check metrics`; the leader
//! exports the results the objects hold. A real Prometheus server on
//! loopback (Debian's `prometheus` package) scrapes the gate every second
//! with deploy/monitoring's rules loaded and shows
//! ClusterUpdateBlockedByPreflight firing on a denied update and resolving
//! once the risks are accepted, and UpdatePreflightFailing firing for the
//! leader's failing results.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cluster::{CLEAR_TARGET, User, World, http_get_on, lock, merge_patch_args, metric};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const BLOCKED_4153: &[&str] = &[r#"target_version="4.15.3""#];

fn now() -> f64 {
    jiff::Timestamp::now().as_millisecond() as f64 / 1000.0
}

/// What 4.15.3's two failing checks find in the sample result.
const FOUND_4153: &str = r#"{"ClusterOperatorsHealthy":["machine-config Degraded"],"MachineConfigPoolsHealthy":["worker Degraded"]}"#;

/// The claim that accepts 4.15.3's two failing checks for four hours, as
/// they fail in the sample result.
fn accept_4153() -> [String; 5] {
    [
        "preflight.dev/accept=ClusterOperatorsHealthy,MachineConfigPoolsHealthy".to_owned(),
        format!("preflight.dev/accept-findings={FOUND_4153}"),
        "preflight.dev/accept-for=4.15.3".to_owned(),
        "preflight.dev/accept-reason=machine-config degradation understood".to_owned(),
        format!("preflight.dev/accept-until={}", crate::flows::in_hours(4)),
    ]
}

/// Writes claims as `user`, who records themself as their writer.
fn annotate(world: &World, user: User, pairs: &[&str]) {
    let claimed_by = format!("preflight.dev/claimed-by={}", user.name());
    let mut args = vec!["annotate", "--overwrite", "clusterversion", "version"];
    args.extend(pairs);
    args.push(&claimed_by);
    let out = world.kubectl(user, &args);
    assert!(out.ok, "{}", out.stderr);
}

/// The sample result for 4.15.3 (two blocking checks fail), completed just
/// now, as the world seeds it: another test may have had it rerun.
fn reseed_4153(world: &World) {
    reseed_4153_with(world, |_| {});
}

/// [`reseed_4153`], with its status changed by `change` before it is signed.
fn reseed_4153_with(world: &World, change: impl FnOnce(&mut Value)) {
    let text =
        std::fs::read_to_string(Path::new(ROOT).join("examples/results/4.15.3-failing.yaml"))
            .unwrap();
    let object: Value = serde_saphyr::from_str(&text).unwrap();
    let name = object["metadata"]["name"].as_str().unwrap();
    let generation = world.admin(&[
        "get",
        "updatepreflight",
        name,
        "-o",
        "jsonpath={.metadata.generation}",
    ]);
    let mut status = object["status"].clone();
    let now = jiff::Timestamp::now().to_string();
    status["startTime"] = json!(now);
    status["completionTime"] = json!(now);
    status["observedGeneration"] = json!(generation.trim().parse::<i64>().unwrap());
    change(&mut status);
    // Signed as the gate signs its results (docs/security.md, 3d), with
    // nothing of a later write left beside it.
    status["signature"] = json!(world.sign_as_the_gate(&object, &status));
    status["plan"] = Value::Null;
    status["observedRequest"] = Value::Null;
    world.write_status_as_the_gates_manager(name, &status);
}

/// Leaves the ClusterVersion without a target or gate annotations, even
/// when the test fails: a control plane reused by the next run then starts
/// from rest.
struct Tidy(&'static World);

impl Drop for Tidy {
    fn drop(&mut self) {
        let world = self.0;
        let _ = world.kubectl(User::Admin, &CLEAR_TARGET);
        let _ = world.kubectl(
            User::Admin,
            &[
                "annotate",
                "clusterversion",
                "version",
                "preflight.dev/accept-",
                "preflight.dev/override-",
                "preflight.dev/override-reason-",
                "preflight.dev/override-until-",
                "preflight.dev/accept-for-",
                "preflight.dev/accept-reason-",
                "preflight.dev/accept-until-",
                "preflight.dev/accept-findings-",
                "preflight.dev/claimed-by-",
            ],
        );
    }
}

/// Trust, third pass, L3: an accept counts for what it was written
/// against. bob accepts 4.15.3's two failing checks as they fail; then the
/// machine-config pools check also finds the master pool degraded, and the
/// same accept no longer lets the update through: it says what is new.
#[test]
fn an_accept_asks_again_when_a_check_finds_more_than_it_was_written_against() {
    let (_turn, world) = lock();
    let _tidy = Tidy(world);
    reseed_4153(world);
    annotate(
        world,
        User::Bob,
        &accept_4153().each_ref().map(String::as_str),
    );
    let dry_run = || {
        world.kubectl(
            User::Bob,
            &merge_patch_args("4.15.3", &["--dry-run=server"]),
        )
    };
    let as_written = dry_run();
    assert!(as_written.ok, "{}", as_written.stderr);

    reseed_4153_with(world, |status| {
        let pools = status["results"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|r| r["name"] == "MachineConfigPoolsHealthy")
            .unwrap();
        pools["subjects"] = json!(["master Degraded", "worker Degraded"]);
    });
    // The gate answers from the result its watch has seen: wait for it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let denied = loop {
        let out = dry_run();
        if !out.ok || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(!denied.ok, "the accept still counted: {}", denied.stderr);
    assert!(
        denied.stderr.contains("Accept not counted: MachineConfigPoolsHealthy now also finds master Degraded, which preflight.dev/accept was not written against"),
        "{}",
        denied.stderr
    );
    // The denial's own command records what the checks find now, the one
    // still accepted included, since it overwrites the accept.
    assert!(
        denied.stderr.contains(r#"preflight.dev/accept-findings='{"ClusterOperatorsHealthy":["machine-config Degraded"],"MachineConfigPoolsHealthy":["master Degraded","worker Degraded"]}'"#),
        "{}",
        denied.stderr
    );
    reseed_4153(world);
}

/// Waits for an Event with `reason` whose note contains `text`, seen since
/// `since` (Unix seconds): an earlier run against the same control plane
/// left the same Event, which the recorder now counts in its series.
fn wait_for_fresh_event(world: &World, reason: &str, text: &str, since: f64) {
    let seen = |e: &Value| {
        [&e["eventTime"], &e["series"]["lastObservedTime"]]
            .into_iter()
            .filter_map(|t| t.as_str()?.parse::<jiff::Timestamp>().ok())
            .map(|t| t.as_millisecond() as f64 / 1000.0)
            .fold(0.0, f64::max)
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !world
        .events(reason)
        .iter()
        .any(|e| e["note"].as_str().unwrap_or("").contains(text) && seen(e) >= since - 1.0)
    {
        assert!(
            Instant::now() < deadline,
            "no {reason} Event mentioning {text:?} since {since}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The metrics of the replica holding the Lease, rendered.
fn leader_metrics(world: &World) -> Option<String> {
    let holder = world.lease_holder();
    let replicas = world.replicas.lock().unwrap();
    replicas
        .iter()
        .find(|r| r.identity == holder && r.is_leader())
        .map(|r| r.metrics.render())
}

/// `promtool check metrics` on an exposition, read from stdin.
fn promtool_check_metrics(exposition: &str) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package; tests/run installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The check results of the object for `version`, as the API server holds
/// them: (check, severity label, value).
fn expected_status(world: &World, version: &str) -> Vec<(String, String, f64)> {
    let objects = world.update_preflights();
    let object = objects
        .iter()
        .filter(|o| o["spec"]["version"] == version)
        .max_by_key(|o| {
            o["status"]["completionTime"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .unwrap_or_else(|| panic!("no UpdatePreflight for {version}"));
    let mut expected: Vec<(String, String, f64)> = object["status"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| {
            let value = match r["outcome"].as_str()? {
                "Pass" => 1.0,
                "Fail" => 0.0,
                "Error" => -1.0,
                _ => return None,
            };
            let severity = r["severity"].as_str().unwrap_or("Blocking").to_lowercase();
            Some((r["name"].as_str()?.to_owned(), severity, value))
        })
        .collect();
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    expected
}

fn exported_status(text: &str, version: &str) -> Vec<(String, String, f64)> {
    let mut exported: Vec<(String, String, f64)> = text
        .lines()
        .filter(|l| l.starts_with("preflight_gate_check_status{"))
        .filter(|l| l.contains(&format!(r#"target_version="{version}""#)))
        .map(|l| {
            let label = |name: &str| {
                let start = l.find(&format!(r#"{name}=""#)).unwrap() + name.len() + 2;
                l[start..start + l[start..].find('"').unwrap()].to_owned()
            };
            let value = l.rsplit(' ').next().unwrap().parse().unwrap();
            (label("check"), label("severity"), value)
        })
        .collect();
    exported.sort_by(|a, b| a.0.cmp(&b.0));
    exported
}

#[test]
fn a_scrape_after_a_blocked_update_says_so_and_passes_promtool() {
    let (_turn, world) = lock();
    let _tidy = Tidy(world);
    reseed_4153(world);

    // Start from an accepted target, so the gate's earlier history is moot.
    let asked = now();
    let allowed = world.kubectl(User::Admin, &merge_patch_args("4.14.12", &[]));
    assert!(allowed.ok, "{}", allowed.stderr);
    world.wait_for_metric(
        "preflight_gate_target_change_last_accepted_timestamp_seconds",
        &[],
        |at| at >= asked,
    );
    let started = now();

    let denied = world.kubectl(User::Alice, &merge_patch_args("4.15.3", &[]));
    assert!(!denied.ok);
    assert!(
        denied.stderr.contains("preflight for 4.15.3 failed"),
        "{}",
        denied.stderr
    );
    let after_denial = world.metrics();
    assert_eq!(
        metric(&after_denial, "preflight_gate_update_blocked", BLOCKED_4153),
        1.0
    );
    let denied_at = metric(
        &after_denial,
        "preflight_gate_update_last_denied_timestamp_seconds",
        BLOCKED_4153,
    );
    let accepted_at = metric(
        &after_denial,
        "preflight_gate_target_change_last_accepted_timestamp_seconds",
        &[],
    );
    assert!(accepted_at < started && started <= denied_at && denied_at <= now());
    assert_eq!(
        metric(
            &after_denial,
            "preflight_gate_update_blocked",
            &[r#"target_version="4.14.12""#]
        ),
        0.0,
        "4.14.12 was accepted"
    );

    // A dry run gets the same verdict, and leaves no trace in the state.
    std::thread::sleep(Duration::from_millis(1100));
    let dry = world.kubectl(
        User::Alice,
        &merge_patch_args("4.15.3", &["--dry-run=server"]),
    );
    assert!(!dry.ok);
    let after_dry_run = world.metrics();
    assert_eq!(
        metric(
            &after_dry_run,
            "preflight_gate_update_last_denied_timestamp_seconds",
            BLOCKED_4153
        ),
        denied_at
    );

    // bob accepts the two failing checks: allowed, counted, an Event left.
    annotate(
        world,
        User::Bob,
        &accept_4153().each_ref().map(String::as_str),
    );
    let accepted = world.kubectl(User::Bob, &merge_patch_args("4.15.3", &[]));
    assert!(accepted.ok, "{}", accepted.stderr);
    // Recorded once the gate's watch sees the change stored: the target
    // unblocked, then the override counted once its Event is created.
    const ACCEPTS: &[&str] = &[r#"kind="accept_risks""#];
    let accepts_before = metric(&after_denial, "preflight_gate_overrides_total", ACCEPTS);
    world.wait_for_metric("preflight_gate_update_blocked", BLOCKED_4153, |v| v == 0.0);
    let after = world.wait_for_metric("preflight_gate_overrides_total", ACCEPTS, |v| {
        v > accepts_before
    });
    assert_eq!(
        metric(&after, "preflight_gate_update_blocked", BLOCKED_4153),
        0.0
    );
    assert!(
        metric(
            &after,
            "preflight_gate_target_change_last_accepted_timestamp_seconds",
            &[]
        ) > denied_at
    );
    // Counted once, not once per replica or per review.
    assert_eq!(
        metric(&after, "preflight_gate_overrides_total", ACCEPTS),
        accepts_before + 1.0
    );
    wait_for_fresh_event(
        world,
        "PreflightChecksAccepted",
        "bob accepted failing preflight checks ClusterOperatorsHealthy, MachineConfigPoolsHealthy for 4.15.3",
        started,
    );

    // No label carries a user or an object name.
    for forbidden in ["alice", "bob", "release-sha256", "sha256:"] {
        assert!(
            !after
                .lines()
                .any(|l| !l.starts_with('#') && l.contains(forbidden)),
            "a series mentions {forbidden}"
        );
    }

    let (ok, report) = promtool_check_metrics(&after);
    assert!(
        ok,
        "promtool check metrics on the gate's scrape:\n{report}\n{after}"
    );

    // The leader exports what the objects hold; promtool accepts its
    // exposition too (the test replicas serve no admin port, so this one is
    // rendered, not scraped).
    let deadline = Instant::now() + Duration::from_secs(20);
    let leader_text = loop {
        let text = leader_metrics(world);
        let expected = expected_status(world, "4.15.3");
        // The graph recommends 4.14.12 and 4.15.3, and offers 4.15.16 only
        // conditionally.
        let graph = |text: &str, version: &str| {
            metric(
                text,
                "preflight_gate_target_recommended",
                &[&format!(r#"target_version="{version}""#)],
            )
        };
        if let Some(text) = text
            && exported_status(&text, "4.15.3") == expected
            && graph(&text, "4.15.3") == 1.0
            && graph(&text, "4.14.12") == 1.0
            && text.contains(r#"preflight_gate_target_recommended{target_version="4.15.16"} 0"#)
        {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "the leader never exported the results of 4.15.3: {expected:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        exported_status(&leader_text, "4.15.3")
            .iter()
            .any(
                |(check, severity, value)| check == "ClusterOperatorsHealthy"
                    && severity == "blocking"
                    && *value == 0.0
            ),
        "{leader_text}"
    );
    assert!(
        metric(
            &leader_text,
            "preflight_gate_result_completion_timestamp_seconds",
            BLOCKED_4153
        ) > 0.0
    );
    let (ok, report) = promtool_check_metrics(&leader_text);
    assert!(
        ok,
        "promtool check metrics on the leader's metrics:\n{report}"
    );
}

/// Serves the leader's metrics on a loopback port until dropped. The test
/// replicas run in-process without an admin server of their own, so this
/// stands in for the leader pod's `/metrics`.
struct LeaderEndpoint {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl LeaderEndpoint {
    fn start(world: &'static World) -> LeaderEndpoint {
        use std::io::{BufRead, BufReader};
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let body = leader_metrics(world).unwrap_or_default();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        LeaderEndpoint { port, stop }
    }
}

impl Drop for LeaderEndpoint {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// A Prometheus server on a random loopback port with a temporary storage
/// directory, killed when dropped.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// deploy/monitoring's rules with every `for:` cut to 2s, so the test need
/// not wait 15 minutes. Expressions, labels and annotations are unchanged.
fn rules_with_short_for() -> Value {
    let text =
        std::fs::read_to_string(Path::new(ROOT).join("deploy/monitoring/prometheusrule.yaml"))
            .unwrap();
    let rule: Value = serde_saphyr::from_str(&text).unwrap();
    let mut spec = rule["spec"].clone();
    for group in spec["groups"].as_array_mut().unwrap() {
        for rule in group["rules"].as_array_mut().unwrap() {
            if rule.get("for").is_some() {
                rule["for"] = json!("2s");
            }
        }
    }
    spec
}

impl Prometheus {
    /// Scrapes the gate's admin port and the leader's metrics every second,
    /// as the ServiceMonitor's job would (job `preflight-gate`, namespace
    /// `preflight-gate`).
    fn start(admin_port: u16, leader_port: u16, token: &str) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        // JSON is YAML: Prometheus reads both files as they are.
        std::fs::write(
            dir.path().join("rules.yaml"),
            serde_json::to_vec_pretty(&rules_with_short_for()).unwrap(),
        )
        .unwrap();
        let config = json!({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
            "rule_files": ["rules.yaml"],
            "scrape_configs": [{
                "job_name": "preflight-gate",
                // As the ServiceMonitor's bearerTokenFile: the
                // ServiceAccount's token, which the gate reviews.
                "authorization": {"credentials": token},
                "static_configs": [{
                    "targets": [format!("127.0.0.1:{admin_port}")],
                    "labels": {"namespace": "preflight-gate", "pod": "preflight-gate-0"}
                }, {
                    "targets": [format!("127.0.0.1:{leader_port}")],
                    "labels": {"namespace": "preflight-gate", "pod": "preflight-gate-leader"}
                }]
            }]
        });
        std::fs::write(
            dir.path().join("prometheus.yml"),
            serde_json::to_vec_pretty(&config).unwrap(),
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.path().join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .current_dir(dir.path())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("prometheus (Debian's prometheus package; tests/run installs it)");
        let server = Prometheus {
            child,
            port,
            _dir: dir,
        };
        server.wait("ready", Duration::from_secs(30), |p| {
            p.get("/-/ready", &[])
                .is_some_and(|(status, _)| status == 200)
        });
        server
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    fn get(&self, path: &str, query: &[(&str, &str)]) -> Option<(u16, String)> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let response = reqwest::Client::new()
                .get(format!("http://127.0.0.1:{}{path}", self.port))
                .query(query)
                .timeout(Duration::from_secs(5))
                .send()
                .await
                .ok()?;
            let status = response.status().as_u16();
            Some((status, response.text().await.ok()?))
        })
    }

    fn api(&self, path: &str, query: &[(&str, &str)]) -> Value {
        let (status, body) = self
            .get(path, query)
            .unwrap_or_else(|| panic!("Prometheus does not answer {path}:\n{}", self.log()));
        let value: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            value["status"], "success",
            "{path} {query:?}: HTTP {status}: {body}"
        );
        value["data"].clone()
    }

    /// The value of an instant query with one result, if it has one.
    fn scalar(&self, promql: &str) -> Option<f64> {
        let data = self.api("/api/v1/query", &[("query", promql)]);
        data["result"].as_array()?.first()?["value"][1]
            .as_str()?
            .parse()
            .ok()
    }

    fn firing(&self, alertname: &str) -> Vec<Value> {
        self.api("/api/v1/alerts", &[])["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["labels"]["alertname"] == alertname && a["state"] == "firing")
            .cloned()
            .collect()
    }

    fn wait(&self, what: &str, within: Duration, done: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + within;
        while !done(self) {
            assert!(
                Instant::now() < deadline,
                "Prometheus: {what} did not happen within {within:?}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

#[test]
fn a_real_prometheus_sees_the_blocked_update_alert_fire_and_resolve() {
    let (_turn, world) = lock();
    let _tidy = Tidy(world);
    reseed_4153(world);
    let leader = LeaderEndpoint::start(world);
    let prometheus = Prometheus::start(world.admin_port, leader.port, &world.scrape_token);
    prometheus.wait(
        "scraping the gate and the leader",
        Duration::from_secs(20),
        |p| p.scalar(r#"sum(up{job="preflight-gate",namespace="preflight-gate"})"#) == Some(2.0),
    );
    // Every alerting rule of deploy/monitoring is loaded.
    let rules = prometheus.api("/api/v1/rules", &[("type", "alert")]);
    let loaded = rules["groups"][0]["rules"].as_array().unwrap().len();
    let ours = rules_with_short_for()["groups"][0]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r.get("alert").is_some())
        .count();
    assert_eq!(loaded, ours, "{rules}");

    // An accepted target first: nothing is blocked, and nothing fires.
    let asked_at = now();
    let allowed = world.kubectl(User::Admin, &merge_patch_args("4.14.12", &[]));
    assert!(allowed.ok, "{}", allowed.stderr);
    // The gate stamps the change while answering, so after `asked_at`.
    prometheus.wait(
        "the accepted change scraped",
        Duration::from_secs(20),
        |p| {
            p.scalar("max(preflight_gate_target_change_last_accepted_timestamp_seconds)")
                .is_some_and(|t| t >= asked_at - 0.01)
        },
    );
    // Rules evaluate every second and `for` is 2s: give them 4s.
    std::thread::sleep(Duration::from_secs(4));
    let quiet = prometheus.firing("ClusterUpdateBlockedByPreflight");
    assert!(quiet.is_empty(), "fires with no update blocked: {quiet:?}");

    let denied = world.kubectl(User::Alice, &merge_patch_args("4.15.3", &[]));
    assert!(!denied.ok, "{}", denied.stdout);
    prometheus.wait(
        "ClusterUpdateBlockedByPreflight firing",
        Duration::from_secs(30),
        |p| !p.firing("ClusterUpdateBlockedByPreflight").is_empty(),
    );
    let alerts = prometheus.firing("ClusterUpdateBlockedByPreflight");
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    let alert = &alerts[0];
    assert_eq!(alert["labels"]["target_version"], "4.15.3");
    assert_eq!(alert["labels"]["severity"], "warning");
    assert_eq!(alert["labels"]["namespace"], "preflight-gate");
    assert_eq!(
        alert["annotations"]["summary"],
        "The update to 4.15.3 is blocked by failing preflight checks."
    );
    assert!(
        alert["annotations"]["runbook_url"]
            .as_str()
            .unwrap()
            .ends_with("docs/runbooks/ClusterUpdateBlockedByPreflight.md")
    );
    // The gate is up, so its down alert stays quiet.
    assert!(prometheus.firing("PreflightGateDown").is_empty());

    // bob accepts the failing checks: the update is accepted, the alert
    // resolves, and the override alert fires instead. (Not the force
    // annotation: flows.rs looks for the first PreflightOverridden Event of
    // bob's for 4.15.3, and one left by this test would come first on a
    // reused control plane.)
    annotate(
        world,
        User::Bob,
        &accept_4153().each_ref().map(String::as_str),
    );
    let accepted = world.kubectl(User::Bob, &merge_patch_args("4.15.3", &[]));
    assert!(accepted.ok, "{}", accepted.stderr);
    prometheus.wait("the blocked alert resolved", Duration::from_secs(30), |p| {
        p.firing("ClusterUpdateBlockedByPreflight").is_empty()
    });
    prometheus.wait(
        "PreflightGateOverrideUsed firing",
        Duration::from_secs(30),
        |p| {
            p.firing("PreflightGateOverrideUsed")
                .iter()
                .any(|a| a["labels"]["kind"] == "accept_risks" && a["labels"]["severity"] == "info")
        },
    );

    // The leader's results of 4.15.3, a recommended target, fail two
    // blocking checks: each is an update precheck alert, which
    // `oc adm upgrade recommend` picks up.
    prometheus.wait(
        "UpdatePreflightFailing firing",
        Duration::from_secs(30),
        |p| p.firing("UpdatePreflightFailing").len() >= 2,
    );
    let failing: Vec<(String, String)> = prometheus
        .firing("UpdatePreflightFailing")
        .iter()
        .inspect(|a| {
            // Never an update precheck: oc adm upgrade recommend would list
            // it against every target.
            assert!(a["labels"].get("openShiftUpdatePrecheck").is_none(), "{a}");
            assert_eq!(a["labels"]["severity"], "warning", "{a}");
        })
        .map(|a| {
            (
                a["labels"]["target_version"].as_str().unwrap().to_owned(),
                a["labels"]["check"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for check in ["ClusterOperatorsHealthy", "MachineConfigPoolsHealthy"] {
        assert!(
            failing.contains(&("4.15.3".to_owned(), check.to_owned())),
            "{failing:?}"
        );
    }
    // A passing check, and a failing one of Warning severity, do not alert.
    for check in ["UpgradeableOperators", "CriticalAlertsFiring"] {
        assert!(!failing.iter().any(|(_, c)| c == check), "{failing:?}");
    }

    // No latch: with the gate's own UpdatePreflightFailing firing, the
    // alert checks of the next run read this very Prometheus and the gate's
    // alert holds nothing: it is no update precheck (no
    // openShiftUpdatePrecheck label), and no critical alert.
    let out = Command::new(env!("CARGO_BIN_EXE_preflight-gate"))
        .args([
            "check",
            "--to",
            "4.14.12",
            "--output",
            "json",
            "--prometheus-url",
        ])
        .arg(format!("http://127.0.0.1:{}", prometheus.port))
        .env_remove("PREFLIGHT_GATE_KUBECONFIG")
        .env_remove("PREFLIGHT_GATE_SNAPSHOT")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let precheck = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "PrecheckAlertsFiring")
        .unwrap();
    assert_eq!(precheck["outcome"], "Pass", "{precheck}");
    let critical = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "CriticalAlertsFiring")
        .unwrap();
    assert_eq!(critical["outcome"], "Pass", "{critical}");

    // Every dashboard query is valid PromQL to a real server.
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(ROOT).join("deploy/monitoring/grafana-dashboard.json"))
            .unwrap(),
    )
    .unwrap();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap();
            prometheus.api("/api/v1/query", &[("query", expr)]);
        }
    }
}

/// `/metrics` is read only with a bearer token the real API server
/// authenticates (TokenReview) and allows to get `/metrics`
/// (SubjectAccessReview), as kube-rbac-proxy decides; probes stay open.
#[test]
fn metrics_are_read_only_by_a_scraper_the_api_server_allows() {
    let (_turn, world) = lock();
    let get = |token: Option<&str>| {
        http_get_on(world.admin_port, "/metrics", token).expect("the admin port answers")
    };
    let (status, body) = get(None);
    assert_eq!(status, 401, "{body}");
    let (status, body) = get(Some("not-a-token"));
    assert_eq!(status, 401, "{body}");
    let unbound = world.service_account_token("e2e-not-a-scraper", false);
    let (status, body) = get(Some(&unbound));
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("system:serviceaccount:default:e2e-not-a-scraper may not get the non-resource URL /metrics"),
        "{body}"
    );
    let (status, body) = get(Some(&world.scrape_token));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("preflight_gate_"), "{body}");
    for probe in ["/healthz", "/readyz"] {
        let (status, body) = http_get_on(world.admin_port, probe, None).unwrap();
        assert_eq!(status, 200, "{probe}: {body}");
    }
}
