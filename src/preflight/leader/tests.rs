//! The leader loop against a fake Lease API (over the scripted client): the
//! work starts only while this replica holds the Lease, stops when another
//! replica holds it, and a Lease held by another is never released.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Method;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::{LeaseSettings, lead};
use crate::cluster::api_mock::{self, ApiServer, PATIENCE};
use crate::metrics::Metrics;

const NAMESPACE: &str = "preflight-gate";
const NAME: &str = "preflight-gate-leader";
const ME: &str = "preflight-gate-0";
const OTHER: &str = "preflight-gate-1";

/// Who holds the Lease, as the fake API server keeps it.
#[derive(Default)]
struct Holder {
    identity: Option<String>,
    renewed: Option<Timestamp>,
    seconds: i32,
}

impl Holder {
    fn valid(&self) -> bool {
        self.renewed
            .is_some_and(|r| Timestamp::now().duration_since(r).as_secs() < i64::from(self.seconds))
    }

    fn lease(&self) -> Value {
        serde_json::to_value(Lease {
            metadata: ObjectMeta {
                name: Some(NAME.into()),
                namespace: Some(NAMESPACE.into()),
                resource_version: Some("1".into()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: self.identity.clone(),
                renew_time: self.renewed.map(MicroTime),
                acquire_time: self.renewed.map(MicroTime),
                lease_duration_seconds: self.identity.as_ref().map(|_| self.seconds),
                ..LeaseSpec::default()
            }),
        })
        .unwrap()
    }
}

/// What the fake API server was asked to do with the Lease.
#[derive(Debug, PartialEq)]
enum Asked {
    Read,
    /// Take it (a patch naming a holder).
    Take(String),
    /// Let it go (a patch clearing the holder).
    Release,
    /// Renew it, or count a transition.
    Renew,
}

/// Answers Lease requests as an API server does, with one liberty: a
/// holder other than this replica renews its Lease whenever it is read,
/// as a live leader would. Tells the test what it was asked.
async fn fake_lease_api(
    mut api: ApiServer,
    holder: Arc<Mutex<Holder>>,
    asked: mpsc::UnboundedSender<Asked>,
) {
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{NAME}");
    while let Some(mut seen) = api.next_within(Duration::from_secs(60)).await {
        assert_eq!(seen.path, path, "{seen:?}");
        let mut h = holder.lock().unwrap();
        if h.identity.as_deref().is_some_and(|i| i != ME) {
            h.renewed = Some(Timestamp::now());
        }
        let what = match seen.method {
            Method::GET => Asked::Read,
            Method::PATCH => {
                let spec = &seen.body["spec"];
                match spec.get("holderIdentity") {
                    Some(Value::String(who)) => Asked::Take(who.clone()),
                    Some(Value::Null) => Asked::Release,
                    _ => Asked::Renew,
                }
            }
            _ => panic!("the leader loop only reads and patches its Lease: {seen:?}"),
        };
        match &what {
            Asked::Take(who) if h.identity.as_ref().is_none_or(|i| i == who) || !h.valid() => {
                h.identity = Some(who.clone());
                h.renewed = Some(Timestamp::now());
                h.seconds = seen.body["spec"]["leaseDurationSeconds"]
                    .as_i64()
                    .unwrap_or(2) as i32;
            }
            Asked::Take(_) => {
                seen.fail(409, "Conflict", "the Lease is held");
                let _ = asked.send(what);
                continue;
            }
            Asked::Release if h.identity.as_deref() == Some(ME) || !h.valid() => {
                *h = Holder::default();
            }
            Asked::Renew if h.identity.as_deref() == Some(ME) => {
                h.renewed = Some(Timestamp::now());
            }
            _ => {}
        }
        seen.ok(&h.lease());
        drop(h);
        let _ = asked.send(what);
    }
}

/// What the work did.
#[derive(Debug, PartialEq)]
enum Work {
    Started,
    Stopped,
}

struct Stopped(mpsc::UnboundedSender<Work>);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.send(Work::Stopped);
    }
}

struct Replica {
    asked: mpsc::UnboundedReceiver<Asked>,
    work: mpsc::UnboundedReceiver<Work>,
    metrics: Metrics,
    stop: oneshot::Sender<()>,
    leading: tokio::task::JoinHandle<()>,
}

/// Starts `lead` over the fake Lease, held at first as `holder` says.
fn replica(holder: Arc<Mutex<Holder>>) -> Replica {
    let (client, api) = api_mock::client();
    let (asked_tx, asked) = mpsc::unbounded_channel();
    tokio::spawn(fake_lease_api(api, holder, asked_tx));
    let (work_tx, work) = mpsc::unbounded_channel();
    let (stop, stopped) = oneshot::channel::<()>();
    let metrics = Metrics::new().unwrap();
    let settings = LeaseSettings {
        namespace: NAMESPACE.into(),
        name: NAME.into(),
        identity: ME.into(),
        duration: Duration::from_secs(2),
    };
    let job = move || {
        let tx = work_tx.clone();
        async move {
            let _stopped = Stopped(tx.clone());
            let _ = tx.send(Work::Started);
            std::future::pending::<()>().await;
        }
    };
    let leading = tokio::spawn(lead(client, settings, metrics.clone(), job, async {
        let _ = stopped.await;
    }));
    Replica {
        asked,
        work,
        metrics,
        stop,
        leading,
    }
}

impl Replica {
    /// Stops the replica, and tells what it asked of the Lease since.
    async fn stop(mut self) -> Vec<Asked> {
        let _ = self.stop.send(());
        tokio::time::timeout(PATIENCE, self.leading)
            .await
            .expect("the leader loop stops when told to")
            .unwrap();
        let mut asked = Vec::new();
        while let Ok(a) = self.asked.try_recv() {
            asked.push(a);
        }
        asked
    }
}

fn held_by_other() -> Holder {
    Holder {
        identity: Some(OTHER.into()),
        renewed: Some(Timestamp::now()),
        seconds: 60,
    }
}

/// What the work does next, if anything within [`PATIENCE`].
async fn next(work: &mut mpsc::UnboundedReceiver<Work>) -> Option<Work> {
    tokio::time::timeout(PATIENCE, work.recv())
        .await
        .ok()
        .flatten()
}

#[tokio::test]
async fn a_lease_held_by_another_replica_never_starts_the_work() {
    let holder = Arc::new(Mutex::new(held_by_other()));
    let mut replica = replica(holder);
    // It reads the Lease, sees it held, and waits.
    let first = tokio::time::timeout(PATIENCE, replica.asked.recv())
        .await
        .unwrap();
    assert_eq!(first, Some(Asked::Read));
    let started = tokio::time::timeout(Duration::from_secs(3), replica.work.recv()).await;
    assert!(started.is_err(), "the work started: {started:?}");
    assert!(!replica.metrics.controller.is_leader());
    let asked = replica.stop().await;
    assert!(
        asked.iter().all(|a| *a == Asked::Read),
        "another's Lease is neither taken nor released: {asked:?}"
    );
}

#[tokio::test]
async fn a_lost_lease_stops_the_work() {
    let holder = Arc::new(Mutex::new(Holder::default()));
    let mut replica = replica(holder.clone());
    assert_eq!(
        next(&mut replica.work).await,
        Some(Work::Started),
        "a free Lease is taken"
    );
    assert!(replica.metrics.controller.is_leader());
    assert_eq!(holder.lock().unwrap().identity.as_deref(), Some(ME));

    // Another replica takes over (this one stalled past its Lease).
    *holder.lock().unwrap() = held_by_other();
    assert_eq!(
        next(&mut replica.work).await,
        Some(Work::Stopped),
        "the work stops"
    );
    assert!(!replica.metrics.controller.is_leader());
    let started_again = tokio::time::timeout(Duration::from_secs(3), replica.work.recv()).await;
    assert!(
        started_again.is_err(),
        "not started again: {started_again:?}"
    );

    let asked = replica.stop().await;
    assert!(asked.contains(&Asked::Take(ME.into())));
    assert!(
        !asked.contains(&Asked::Release),
        "another's Lease is not released: {asked:?}"
    );
    assert_eq!(holder.lock().unwrap().identity.as_deref(), Some(OTHER));
}
