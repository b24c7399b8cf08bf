//! The gate's own Deployment on the node: probes, verdicts through the
//! Service, Lease failover, a rolling restart and a certificate rotation
//! under a steady stream of reviews.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::world::{LEASE, NAMESPACE, WEBHOOK, World, lock, wait_for};

const DENIED: &str = "denied the request: ";

fn ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn name(o: &Value) -> String {
    o["metadata"]["name"].as_str().unwrap().to_owned()
}

#[test]
fn both_replicas_turn_ready_and_oc_adm_upgrade_is_denied_then_allowed_through_the_service() {
    let (_turn, world) = lock();

    // Two replicas of our image, Ready through their own probes.
    let pods = world.gate_pods();
    assert_eq!(pods.len(), 2, "{pods:#?}");
    for pod in &pods {
        assert!(ready(pod), "{pod:#}");
        let container = &pod["status"]["containerStatuses"][0];
        assert_eq!(container["ready"], true);
        assert_eq!(container["started"], true);
        let image_id = container["imageID"].as_str().unwrap_or_default();
        assert!(
            image_id.ends_with(&world.gate_image_id),
            "runs {image_id}, not the image built here ({})",
            world.gate_image_id
        );
        assert_eq!(pod["spec"]["nodeName"], world.var("NODE_NAME"));
        let spec = &pod["spec"]["containers"][0];
        assert_eq!(spec["readinessProbe"]["httpGet"]["path"], "/readyz");
        assert_eq!(spec["livenessProbe"]["httpGet"]["path"], "/healthz");
    }
    // The Service has both pods as ready endpoints.
    let slices = world.get_json(&[
        "get",
        "endpointslices",
        "-n",
        NAMESPACE,
        "-l",
        "kubernetes.io/service-name=preflight-gate",
    ]);
    let ready_endpoints = slices["items"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .filter(|e| e["conditions"]["ready"] == true)
        .count();
    assert_eq!(ready_endpoints, 2, "{slices:#}");
    let config = world.get_json(&["get", "validatingwebhookconfiguration", "preflight-gate"]);
    assert_eq!(
        config["webhooks"][0]["clientConfig"]["service"]["name"],
        "preflight-gate"
    );

    // A degraded operator: the first request starts a run, the next one
    // gets the verdict, naming the failing check.
    world.set_operator_degraded("machine-config", Some("pool worker is Degraded"));
    let image = world.release_image.clone();
    let first = world.request_image(&image, &[]);
    assert!(!first.ok);
    assert!(
        first
            .stderr
            .contains(&format!("admission webhook \"{WEBHOOK}\" {DENIED}"))
            && first.stderr.contains("is running, retry"),
        "{}",
        first.stderr
    );
    let denied = world.request_until_verdict(&image, &[]);
    assert!(!denied.ok, "allowed with a degraded operator");
    assert!(
        denied.stderr.contains(&format!(
            "admission webhook \"{WEBHOOK}\" {DENIED}preflight for"
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
    assert!(
        world.cluster_version()["spec"]
            .get("desiredUpdate")
            .is_none()
    );

    // Healthy again and checked again: allowed.
    world.set_operator_degraded("machine-config", None);
    world.admin(&["delete", "updatepreflights", "--all", "--wait=true"]);
    let allowed = world.request_until_verdict(&image, &[]);
    assert!(allowed.ok, "{}", allowed.stderr);
    assert_eq!(
        world.cluster_version()["spec"]["desiredUpdate"]["image"],
        image
    );
}

#[test]
fn deleting_the_leaders_pod_hands_the_lease_to_another_replica_within_its_duration() {
    let (_turn, world) = lock();
    let pods: Vec<String> = world.gate_pods().iter().map(name).collect();
    let leader = wait_for("a leader", Duration::from_secs(60), || {
        let holder = world.lease_holder();
        pods.contains(&holder).then_some(holder)
    });
    let lease = world.get_json(&["get", "lease", "-n", NAMESPACE, LEASE]);
    let duration = lease["spec"]["leaseDurationSeconds"].as_u64().unwrap();

    // The leader releases the Lease on SIGTERM; the surviving replica or
    // the one the ReplicaSet starts in its place, whichever asks first,
    // takes it.
    let deleted = Instant::now();
    world.admin(&["delete", "pod", "-n", NAMESPACE, &leader, "--wait=false"]);
    let successor = wait_for(
        "another replica to take the Lease",
        Duration::from_secs(duration + 30),
        || {
            let holder = world.lease_holder();
            (!holder.is_empty() && holder != leader).then_some(holder)
        },
    );
    let took = deleted.elapsed();
    let survivor = pods.contains(&successor);
    eprintln!(
        "the Lease moved from {leader} to {successor} ({}) in {took:?}",
        if survivor {
            "the other replica"
        } else {
            "its replacement"
        }
    );
    assert!(
        took <= Duration::from_secs(duration),
        "took {took:?}, longer than the Lease's {duration} s"
    );

    // The new leader runs the next suite to its end.
    let out = world.request_until_verdict(&world.release_image, &[]);
    assert!(out.ok, "{}", out.stderr);
    let done = world.wait_for_result(&world.release_image, Duration::from_secs(10), |o| {
        o["status"]["phase"] == "Passed"
    });
    assert_eq!(done["status"]["phase"], "Passed");
}

/// A client that sends dry-run target changes through the API server, one
/// after the other, and counts what comes back.
struct Stream {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    allowed: Arc<AtomicU64>,
    failures: Arc<std::sync::Mutex<Vec<String>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Stream {
    fn start(world: &World, image: &str) -> Stream {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let allowed = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(std::sync::Mutex::new(Vec::new()));
        let kubeconfig = std::path::PathBuf::from(world.var("ADMIN_KUBECONFIG"));
        let (image, s, t, a, f) = (
            image.to_owned(),
            stop.clone(),
            sent.clone(),
            allowed.clone(),
            failures.clone(),
        );
        let thread = std::thread::spawn(move || {
            use kube::api::{Api, DynamicObject, Patch, PatchParams};
            use kube::core::{ApiResource, GroupVersionKind};
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let client = preflight_gate::cluster::client(Some(&kubeconfig))
                    .await
                    .unwrap();
                let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
                    "config.openshift.io",
                    "v1",
                    "ClusterVersion",
                ));
                let api: Api<DynamicObject> = Api::all_with(client, &resource);
                let params = PatchParams {
                    dry_run: true,
                    ..Default::default()
                };
                let patch = Patch::Merge(
                    json!({"spec": {"desiredUpdate": {"image": image, "version": "", "force": false}}}),
                );
                // Bounded: at most 20 minutes, whatever happens.
                let deadline = Instant::now() + Duration::from_secs(1200);
                while !s.load(Ordering::SeqCst) && Instant::now() < deadline {
                    t.fetch_add(1, Ordering::SeqCst);
                    let answer = tokio::time::timeout(
                        Duration::from_secs(30),
                        api.patch("version", &params, &patch),
                    )
                    .await;
                    match answer {
                        Ok(Ok(_)) => {
                            a.fetch_add(1, Ordering::SeqCst);
                        }
                        Ok(Err(e)) => f.lock().unwrap().push(format!(
                            "{}: {e}",
                            jiff::Timestamp::now()
                        )),
                        Err(_) => f
                            .lock()
                            .unwrap()
                            .push(format!("{}: no answer in 30 s", jiff::Timestamp::now())),
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            });
        });
        Stream {
            stop,
            sent,
            allowed,
            failures,
            thread: Some(thread),
        }
    }

    fn sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }

    /// Stops the stream; (sent, allowed, failures).
    fn finish(mut self) -> (u64, u64, Vec<String>) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap();
        let failures = self.failures.lock().unwrap().clone();
        (
            self.sent.load(Ordering::SeqCst),
            self.allowed.load(Ordering::SeqCst),
            failures,
        )
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// The gate's log lines, from every container of the pod (the API server
/// reads them from the kubelet).
fn logs(world: &World, pod: &str) -> String {
    world
        .kubectl(&["logs", "-n", NAMESPACE, pod, "--all-containers"])
        .stdout
}

/// Busy loops on every core until dropped: the machine as busy as a cold
/// CI run on a shared host makes it, so the drain's timing is tested where
/// it is tight.
struct CpuHog {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl CpuHog {
    fn start() -> CpuHog {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    // Bounded like the stream: 20 minutes at most.
                    let deadline = Instant::now() + Duration::from_secs(1200);
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                        for _ in 0..100_000 {
                            x = std::hint::black_box(
                                x.wrapping_mul(6364136223846793005).wrapping_add(1),
                            );
                        }
                    }
                })
            })
            .collect();
        CpuHog { stop, threads }
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

#[test]
fn three_rollouts_and_two_certificate_rotations_under_a_stream_of_reviews_and_a_cpu_hog_fail_no_request()
 {
    let (_turn, world) = lock();
    let image = world.release_image.clone();
    // Results that pass, so every review in the stream is allowed; then no
    // target, so each dry-run patch is a change the webhook reviews.
    let out = world.request_until_verdict(&image, &[]);
    assert!(out.ok, "{}", out.stderr);
    world.admin(&[
        "patch",
        "clusterversion",
        "version",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/desiredUpdate"}]"#,
    ]);

    let hog = CpuHog::start();
    let stream = Stream::start(world, &image);
    wait_for("the stream to start", Duration::from_secs(60), || {
        (stream.sent() >= 20).then_some(())
    });

    let mut phases = Vec::new();
    for round in 1..=3 {
        // A rolling restart: maxUnavailable 0, readiness, and a drain that
        // closes HTTP/1 connections only after an answer.
        let before: Vec<String> = world.gate_pods().iter().map(name).collect();
        let at_restart = stream.sent();
        world.admin(&[
            "rollout",
            "restart",
            "-n",
            NAMESPACE,
            "deployment/preflight-gate",
        ]);
        world.wait_for_rollout();
        wait_for("the old pods to be gone", Duration::from_secs(180), || {
            let now: Vec<String> = world.gate_pods().iter().map(name).collect();
            (!now.iter().any(|p| before.contains(p)) && now.len() == 2).then_some(())
        });
        // Reviews keep flowing through the new pods.
        let rolled_at = stream.sent();
        wait_for("reviews after the rollout", Duration::from_secs(60), || {
            (stream.sent() >= rolled_at + 20).then_some(())
        });
        phases.push((format!("rollout {round}"), stream.sent() - at_restart));
        if round == 3 {
            break;
        }

        // The serving Secret rotates: the kubelet updates the volume, the
        // gate reloads the files, and the API server (trusting the same CA)
        // notices nothing.
        let at_rotation = stream.sent();
        let serial = world.write_serving_secret();
        let pods: Vec<String> = world.gate_pods().iter().map(name).collect();
        for pod in &pods {
            wait_for(
                &format!("{pod} to reload its certificate"),
                Duration::from_secs(180),
                || {
                    logs(world, pod)
                        .contains("serving certificate reloaded")
                        .then_some(())
                },
            );
        }
        let reloaded_at = stream.sent();
        wait_for("reviews after the reload", Duration::from_secs(60), || {
            (stream.sent() >= reloaded_at + 20).then_some(())
        });
        phases.push((
            format!("rotation {round} (serial {serial})"),
            stream.sent() - at_rotation,
        ));
    }

    let (sent, allowed, failures) = stream.finish();
    drop(hog);
    eprintln!(
        "{sent} dry-run target changes beside a CPU hog: {allowed} allowed, {} failed; by phase: {phases:?}",
        failures.len()
    );
    assert!(failures.is_empty(), "failed requests: {failures:#?}");
    assert_eq!(sent, allowed);
    for (phase, reviews) in &phases {
        assert!(*reviews >= 20, "too few reviews during {phase}: {reviews}");
    }
    // The stream was dry-run: nothing was stored.
    assert!(
        world.cluster_version()["spec"]
            .get("desiredUpdate")
            .is_none()
    );
}
