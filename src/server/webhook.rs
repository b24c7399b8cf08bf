//! The webhook endpoint: read the review, decide, ask about an override when
//! one is claimed, carry out side effects, answer. Everything but the
//! authorization question is answered from memory.
//!
//! The API server's `?timeout=` is one deadline for the whole review, the
//! body's arrival included, and nothing is held while a slow client
//! dawdles: the body's bytes are reserved from a memory budget as they
//! arrive, and a decision permit is taken only once the whole body is in.
//! So slow or idle clients cannot starve the reviews of a fail-closed
//! webhook.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use http_body_util::BodyExt;
use jiff::Timestamp;
use tokio::sync::Semaphore;
use tokio::time::timeout_at;
use tracing::{Span, debug, field::Empty, info, instrument};

use crate::admission::audit;
use crate::admission::decision::Gated;
use crate::admission::ports::{OverrideAuthorizer, ResultLookup};
use crate::admission::run_requests::{self, RunRequests};
use crate::admission::{
    self, Authorization, Decision, Effect, Policy, Reason, review, review::Request,
};
use crate::cluster::EventRecorder;
use crate::cluster::witness::{AllowedChange, Settled, Witness};
use crate::metrics::{EffectKind, Metrics};
use crate::model::cluster_version::ClusterVersion;
use crate::model::hosted::{HostedCluster, NodePool};

/// The ClusterVersion's path.
pub const PATH: &str = ClusterVersion::PATH;

/// The path of run requests (UpdatePreflights created, stamped or changed).
pub const RUN_REQUESTS_PATH: &str = "/validate/updatepreflight";

/// The largest review body accepted (the API server's own request limit is 3 MiB
/// of object, twice over for old and new).
pub(crate) const MAX_BODY_BYTES: usize = 7 * 1024 * 1024;

/// The API server's longest webhook timeout, used when it sends none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How many body bytes may be in memory at once, across reviews: well under
/// the Deployment's 512 Mi limit, and room for nine reviews at the largest.
pub(crate) const BODY_BUDGET_BYTES: usize = 64 * 1024 * 1024;

/// The unit the body budget is counted in.
const BUDGET_UNIT: usize = 1024;

/// Everything a review is decided with.
pub struct Gate {
    /// The decision's read-only port.
    pub results: Arc<dyn ResultLookup>,
    pub authorizer: Arc<dyn OverrideAuthorizer>,
    /// Publishes a denial's Events at once.
    pub events: Option<EventRecorder>,
    /// Records an allowed change once the API server stored it.
    pub witness: Arc<Witness>,
    pub policy: Policy,
    /// Run requests taken per requester.
    pub run_requests: RunRequests,
    pub metrics: Metrics,
}

/// The gate and what bounds the reviews in flight.
struct Served {
    gate: Arc<Gate>,
    /// Reviews being decided at once.
    deciding: Semaphore,
    /// Body bytes in memory, in [`BUDGET_UNIT`]s.
    bodies: Semaphore,
}

/// The webhook's router. It needs no socket, so tests drive it directly.
pub fn app(gate: Arc<Gate>, max_concurrency: usize) -> Router {
    let served = Served {
        gate,
        deciding: Semaphore::new(max_concurrency.max(1)),
        bodies: Semaphore::new(BODY_BUDGET_BYTES / BUDGET_UNIT),
    };
    serve_kinds(Router::new())
        .route(RUN_REQUESTS_PATH, post(validate_run_request))
        .with_state(Arc::new(served))
}

/// The kinds table: each kind of object the gate decides on, served at its
/// own path (its webhook in `deploy/`). A new kind is its file under
/// `admission/decision/`, its row here and its [`ServedKind`].
fn serve_kinds(router: Router<Arc<Served>>) -> Router<Arc<Served>> {
    router
        .route(ClusterVersion::PATH, post(validate::<ClusterVersion>))
        .route(HostedCluster::PATH, post(validate::<HostedCluster>))
        .route(NodePool::PATH, post(validate::<NodePool>))
}

/// A kind the webhook serves: its decision ([`Gated`]), and how an allowed
/// write of it is recorded once the API server has stored it.
trait ServedKind: Gated + Send + 'static {
    /// Whether its denials leave Events and count blocked targets.
    const RECORDED: bool;
    fn witness(gate: &Gate, object: &Self, change: AllowedChange);
}

impl ServedKind for ClusterVersion {
    const RECORDED: bool = true;
    fn witness(gate: &Gate, object: &Self, change: AllowedChange) {
        gate.witness.expect(object, change);
    }
}

/// A hosted cluster's writes are recorded by the API server's audit log
/// (the verdict's audit annotations) and the gate's log: the witness and
/// the Events follow the ClusterVersion alone, and the blocked-target
/// gauge is the management cluster's own.
fn log_hosted_change(object: &impl Gated, change: &AllowedChange) {
    let metadata = object.metadata();
    for note in &change.notes {
        info!(
            object = %format_args!("{}/{}", metadata.namespace.as_deref().unwrap_or_default(), metadata.name),
            user = %change.user,
            reason = note.reason,
            note = %note.message,
            "hosted cluster change allowed"
        );
    }
}

impl ServedKind for HostedCluster {
    const RECORDED: bool = false;
    fn witness(_: &Gate, object: &Self, change: AllowedChange) {
        log_hosted_change(object, &change);
    }
}

impl ServedKind for NodePool {
    const RECORDED: bool = false;
    fn witness(_: &Gate, object: &Self, change: AllowedChange) {
        log_hosted_change(object, &change);
    }
}

/// Why a review's body could not be read.
enum BodyFault {
    NotJson,
    TooLarge,
    Late,
    /// It fell behind the least rate ([`super::pace`]).
    Slow(super::pace::SlowBody),
    Busy,
    Broken(String),
}

impl IntoResponse for BodyFault {
    fn into_response(self) -> Response {
        match self {
            Self::NotJson => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "an AdmissionReview must be sent as application/json\n".to_owned(),
            ),
            Self::TooLarge => (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("an AdmissionReview may be at most {MAX_BODY_BYTES} bytes\n"),
            ),
            Self::Late => (
                StatusCode::REQUEST_TIMEOUT,
                "the review's body did not arrive within the API server's timeout\n".to_owned(),
            ),
            Self::Slow(slow) => (StatusCode::REQUEST_TIMEOUT, format!("{slow}\n")),
            Self::Busy => (
                StatusCode::SERVICE_UNAVAILABLE,
                "the gate is at its limit of reviews in flight; the API server may retry\n"
                    .to_owned(),
            ),
            Self::Broken(why) => (
                StatusCode::BAD_REQUEST,
                format!("the review's body could not be read: {why}\n"),
            ),
        }
        .into_response()
    }
}

/// A review's body, arrived within its budget, and the permit to decide it.
struct Admitted<'a> {
    body: Bytes,
    _reserved: Option<tokio::sync::SemaphorePermit<'a>>,
    _deciding: tokio::sync::SemaphorePermit<'a>,
}

/// Checks the body is JSON, reads it by `deadline`, then takes a decision
/// permit: a review is decided only once its whole body is here.
async fn admit<'a>(
    served: &'a Served,
    headers: &HeaderMap,
    body: Body,
    deadline: Instant,
) -> Result<Admitted<'a>, BodyFault> {
    if !is_json(headers) {
        return Err(BodyFault::NotJson);
    }
    let (body, reserved) = read_body(
        served,
        headers,
        body,
        tokio::time::Instant::from_std(deadline),
    )
    .await?;
    let remaining = deadline.saturating_duration_since(Instant::now());
    let Ok(Ok(deciding)) = tokio::time::timeout(remaining, served.deciding.acquire()).await else {
        return Err(BodyFault::Busy);
    };
    Ok(Admitted {
        body,
        _reserved: reserved,
        _deciding: deciding,
    })
}

/// Answers a run request (an UpdatePreflight created, stamped or changed):
/// allowed unless its requester is past `--max-run-requests`. From memory.
#[instrument(name = "run_request", skip_all, fields(uid = Empty, user = Empty, decision = Empty))]
async fn validate_run_request(
    State(served): State<Arc<Served>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let deadline = Instant::now() + budget(query.as_deref());
    let admitted = match admit(&served, &headers, body, deadline).await {
        Ok(admitted) => admitted,
        Err(fault) => return fault.into_response(),
    };
    let request = match run_requests::parse(&admitted.body) {
        Ok(request) => request,
        Err(malformed) => {
            info!(error = %malformed.message, "malformed run request review");
            return Json(review::Response::malformed(&malformed)).into_response();
        }
    };
    let span = Span::current();
    span.record("uid", request.uid.as_str());
    span.record("user", request.user.username.as_str());
    let answer = served.gate.run_requests.answer(&request, uptime());
    let allowed = answer.response.allowed;
    span.record("decision", if allowed { "allowed" } else { "refused" });
    if !allowed {
        info!("run request refused: its requester is past --max-run-requests");
        served.gate.metrics.admission.run_request_refused();
    }
    Json(answer).into_response()
}

/// The clock run requests are counted by: the time since this process
/// first read it, which only goes forward.
fn uptime() -> Duration {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

/// Reads the body by `deadline`, reserving each chunk's bytes from the
/// budget as it arrives: a client that drips its body holds only what it has
/// sent. The reservation is returned with the bytes and released when
/// dropped.
async fn read_body<'a>(
    served: &'a Served,
    headers: &HeaderMap,
    mut body: Body,
    deadline: tokio::time::Instant,
) -> Result<(Bytes, Option<tokio::sync::SemaphorePermit<'a>>), BodyFault> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        return Err(BodyFault::TooLarge);
    }
    let mut bytes = Vec::with_capacity(declared.unwrap_or(0).min(64 * 1024));
    let mut reserved: Option<tokio::sync::SemaphorePermit<'a>> = None;
    loop {
        let frame = match timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(BodyFault::Late),
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                return Err(match e.into_inner().downcast::<super::pace::SlowBody>() {
                    Ok(slow) => BodyFault::Slow(*slow),
                    Err(e) => BodyFault::Broken(e.to_string()),
                });
            }
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(chunk) = frame.into_data() else {
            continue; // trailers
        };
        if bytes.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(BodyFault::TooLarge);
        }
        // Room for the chunk, in whole units, before it is kept.
        let held = reserved.as_ref().map_or(0, |r| r.num_permits()) * BUDGET_UNIT;
        let wanted = (bytes.len() + chunk.len()).saturating_sub(held);
        if wanted > 0 {
            let units =
                u32::try_from(wanted.div_ceil(BUDGET_UNIT)).map_err(|_| BodyFault::TooLarge)?;
            let more = match timeout_at(deadline, served.bodies.acquire_many(units)).await {
                Ok(Ok(permit)) => permit,
                _ => return Err(BodyFault::Busy),
            };
            match reserved.as_mut() {
                Some(held) => held.merge(more),
                None => reserved = Some(more),
            }
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok((Bytes::from(bytes), reserved))
}

/// How long the answer may take: the API server's `?timeout=` less a margin.
fn budget(query: Option<&str>) -> Duration {
    let timeout = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| pair.strip_prefix("timeout="))
        .and_then(|v| humantime::parse_duration(v).ok())
        .unwrap_or(DEFAULT_TIMEOUT)
        .min(DEFAULT_TIMEOUT);
    let margin = (timeout / 10).max(Duration::from_millis(100));
    timeout.saturating_sub(margin)
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

#[instrument(name = "review", skip_all, fields(uid = Empty, operation = Empty, target = Empty, decision = Empty, reason = Empty))]
async fn validate<K: ServedKind>(
    State(served): State<Arc<Served>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let deadline = started + budget(query.as_deref());
    let admitted = match admit(&served, &headers, body, deadline).await {
        Ok(admitted) => admitted,
        Err(fault) => return fault.into_response(),
    };
    let body = &admitted.body;
    let gate = &served.gate;
    let metrics = &gate.metrics;
    let _in_flight = metrics.admission.review_started();

    let request = match review::parse::<K>(body) {
        Ok(request) => request,
        Err(malformed) => {
            Span::current().record("uid", malformed.uid.as_str());
            info!(error = %malformed.message, "malformed review");
            metrics.admission.review_decided(
                None,
                false,
                Reason::Malformed.as_str(),
                started.elapsed(),
            );
            return Json(review::Response::malformed(&malformed)).into_response();
        }
    };
    let span = Span::current();
    span.record("uid", request.uid.as_str());
    span.record("operation", request.operation.as_str());

    let verdict = match admission::decide(&request, &*gate.results, &gate.policy, Timestamp::now())
    {
        Decision::Final(verdict) => verdict,
        Decision::NeedsAuthorization(pending) => {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let asked = gate.authorizer.allows(&pending.user, pending.verb);
            let authorization = tokio::time::timeout(remaining, asked)
                .await
                .unwrap_or_else(|_| {
                    Authorization::Unavailable("the access review timed out".into())
                });
            pending.resolve(authorization)
        }
    };

    let decision = if verdict.allowed { "allowed" } else { "denied" };
    span.record("decision", decision);
    span.record("reason", verdict.reason.as_str());
    if let Some(target) = &verdict.target {
        span.record("target", target.as_str());
    }
    if !request.dry_run {
        carry_out(gate, &request, &verdict);
    }
    if verdict.target.is_some() {
        info!(user = %request.user.username, dry_run = request.dry_run, "decided");
    } else {
        debug!("not a target change");
    }
    let response = review::Response::decided(&request, &verdict);
    metrics.admission.review_decided(
        Some(request.operation.as_str()),
        verdict.allowed,
        verdict.reason.as_str(),
        started.elapsed(),
    );
    Json(response).into_response()
}

/// Carries out the verdict's effects without waiting: a denial is recorded
/// at once (its Events, and the blocked target where the gate's own watch
/// offers or stores it: a review's `status` may offer anything), since the
/// API server stores nothing of it; what an allowed change leaves (its
/// Events, the override counted, the targets it unblocks) waits for the
/// watch to show the change stored ([`Witness`]).
fn carry_out<K: ServedKind>(gate: &Gate, request: &Request<K>, verdict: &admission::Verdict) {
    let mut change = AllowedChange {
        user: request.user.username.clone(),
        ..AllowedChange::default()
    };
    for effect in &verdict.effects {
        match effect {
            Effect::Event(note) if verdict.allowed => change.notes.push(note.clone()),
            Effect::Event(note) if !K::RECORDED => {
                info!(reason = note.reason, note = %note.message, "hosted cluster change denied");
            }
            Effect::Event(note) => match (&gate.events, &request.object) {
                (Some(events), Some(object)) => {
                    gate.metrics.effects.asked_for(EffectKind::Event);
                    let metadata = object.metadata();
                    events.publish(note.clone(), &metadata.name, &metadata.uid);
                }
                _ => debug!(reason = note.reason, "no cluster: Event not published"),
            },
        }
    }
    if !verdict.allowed {
        if let (true, Reason::Failed | Reason::Pending, Some(target)) =
            (K::RECORDED, verdict.reason, &verdict.target)
            && verdict
                .release
                .as_ref()
                .is_some_and(|release| gate.results.checks_itself(release))
        {
            let now = Timestamp::now().as_millisecond() as f64 / 1000.0;
            gate.metrics.admission.target_denied(target, now);
        }
        return;
    }
    change.override_kind = verdict.override_kind;
    let said = |key: &str| verdict.audit.get(key).cloned().unwrap_or_default();
    change.override_reason = said(audit::OVERRIDE_REASON);
    change.overridden = said(audit::OVERRIDDEN_CHECKS);
    change.settled = settled(verdict);
    if let Some(object) = &request.object {
        K::witness(gate, object, change);
    }
}

/// How an allowed verdict settles the target, for `update_blocked`: a
/// target allowed unblocks every target, since the cluster no longer waits
/// on them, and so does clearing it. An unresolvable version has no label
/// (it is not in the update graph); it shows in the reviews counter only.
fn settled(verdict: &admission::Verdict) -> Option<Settled> {
    match (verdict.reason, &verdict.target) {
        (
            Reason::Passed | Reason::Overridden | Reason::RisksAccepted | Reason::PendingAllowed,
            Some(target),
        ) => Some(Settled::Target(target.clone())),
        (Reason::Cleared, _) => Some(Settled::Cleared),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_leaves_a_margin_before_the_api_servers_timeout() {
        assert_eq!(budget(Some("timeout=5s")), Duration::from_millis(4500));
        assert_eq!(budget(Some("x=1&timeout=1s")), Duration::from_millis(900));
        assert_eq!(budget(Some("timeout=30s")), Duration::from_secs(9));
        assert_eq!(budget(None), Duration::from_secs(9));
        assert_eq!(budget(Some("timeout=garbage")), Duration::from_secs(9));
    }
}
