//! Run requests, limited per requester. Creating an UpdatePreflight, or
//! stamping or changing one, asks the controller for a run: the built-in
//! suite and every administrator's check Job. Whoever may create them (an
//! updater) could otherwise keep the cluster busy running checks, so each
//! requester gets `max` requests in a sliding `window`, answered from
//! memory. The gate's own controller and the API server's superusers
//! (`system:masters`) are not counted; a dry run asks for nothing and is
//! not counted. Each replica counts what it answers, so with two replicas a
//! requester may get up to twice `max` through.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;

use super::UserInfo;
use super::review::{Malformed, Operation, Response, ResponseBody, Status};

/// The window requests are counted in.
pub const WINDOW: Duration = Duration::from_secs(600);

/// Most requesters remembered; past it, those with nothing in the window
/// are forgotten first, then the one heard from longest ago.
const MAX_REQUESTERS: usize = 4096;

/// The API server's superusers, never limited.
const SUPERUSERS: &str = "system:masters";

const GROUP: &str = "preflight.dev";
const RESOURCE: &str = "updatepreflights";

/// A review of a run request: only what the limit reads.
#[derive(Debug)]
pub struct RunRequest {
    pub uid: String,
    pub api_version: String,
    pub operation: Operation,
    pub user: UserInfo,
    pub dry_run: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    api_version: Option<String>,
    kind: Option<String>,
    request: Option<WireRequest>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireRequest {
    #[serde(default)]
    uid: String,
    resource: Option<WireResource>,
    operation: Option<Operation>,
    #[serde(default)]
    user_info: UserInfo,
    dry_run: Option<bool>,
}

#[derive(Deserialize)]
struct WireResource {
    #[serde(default)]
    group: String,
    #[serde(default)]
    resource: String,
}

/// Reads a review of `updatepreflights.preflight.dev`; anything else is
/// malformed, said as such.
pub fn parse(body: &[u8]) -> Result<RunRequest, Malformed> {
    let wire: Wire = serde_json::from_slice(body).map_err(|e| Malformed {
        uid: String::new(),
        api_version: String::new(),
        message: format!("the AdmissionReview is not valid JSON of the expected shape: {e}"),
    })?;
    let api_version = wire.api_version.unwrap_or_default();
    let malformed = |uid: &str, message: String| Malformed {
        uid: uid.to_owned(),
        api_version: api_version.clone(),
        message,
    };
    let Some(request) = wire
        .request
        .filter(|_| wire.kind.as_deref() == Some("AdmissionReview"))
    else {
        return Err(malformed("", "the body is not an AdmissionReview".into()));
    };
    if request.uid.is_empty() {
        return Err(malformed(
            "",
            "the AdmissionReview request has no uid".into(),
        ));
    }
    let uid = request.uid.as_str();
    match &request.resource {
        Some(r) if r.group == GROUP && r.resource == RESOURCE => {}
        _ => {
            return Err(malformed(
                uid,
                format!("this path reviews only {RESOURCE}.{GROUP}"),
            ));
        }
    }
    let Some(operation) = request.operation else {
        return Err(malformed(
            uid,
            "the AdmissionReview request has no operation".into(),
        ));
    };
    Ok(RunRequest {
        uid: request.uid,
        api_version,
        operation,
        user: request.user_info,
        dry_run: request.dry_run.unwrap_or(false),
    })
}

/// Counts each requester's run requests in the window.
pub struct RunRequests {
    /// Requests per requester in [`WINDOW`]; 0 takes any number.
    max: usize,
    /// The gate's own account, whose controller asks for runs itself.
    own: String,
    seen: Mutex<HashMap<String, VecDeque<Duration>>>,
}

impl RunRequests {
    /// At most `max` requests per requester in [`WINDOW`] (0: no limit);
    /// `own` is the gate's own user name, never counted.
    pub fn new(max: usize, own: impl Into<String>) -> Self {
        Self {
            max,
            own: own.into(),
            seen: Mutex::default(),
        }
    }

    /// The user name of the gate's ServiceAccount in `namespace`.
    pub fn own_account(namespace: &str) -> String {
        format!("system:serviceaccount:{namespace}:preflight-gate")
    }

    /// The answer to `request` at `now` (the time since any fixed point:
    /// the module reads no clock), counting it when it is taken.
    pub fn answer(&self, request: &RunRequest, now: Duration) -> Response {
        let body = match self.take(request, now) {
            Ok(()) => ResponseBody {
                uid: request.uid.clone(),
                allowed: true,
                status: None,
                warnings: Vec::new(),
                audit_annotations: Default::default(),
            },
            Err(retry) => ResponseBody {
                uid: request.uid.clone(),
                allowed: false,
                status: Some(Status {
                    code: 429,
                    reason: "TooManyRequests",
                    message: refused(&request.user.username, self.max, retry),
                }),
                warnings: Vec::new(),
                audit_annotations: Default::default(),
            },
        };
        Response::new(&request.api_version, body)
    }

    /// Counts one request; how long until the next is taken when it is
    /// over the limit.
    fn take(&self, request: &RunRequest, now: Duration) -> Result<(), Duration> {
        let user = &request.user;
        let exempt = self.max == 0
            || request.dry_run
            || request.operation == Operation::Delete
            || user.username == self.own
            || user.groups.iter().any(|g| g == SUPERUSERS);
        if exempt {
            return Ok(());
        }
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= MAX_REQUESTERS && !seen.contains_key(&user.username) {
            forget_some(&mut seen, now);
        }
        let times = seen.entry(user.username.clone()).or_default();
        while times
            .front()
            .is_some_and(|t| now.saturating_sub(*t) >= WINDOW)
        {
            times.pop_front();
        }
        if times.len() >= self.max {
            let oldest = times.front().copied().unwrap_or(now);
            return Err(WINDOW.saturating_sub(now.saturating_sub(oldest)));
        }
        times.push_back(now);
        Ok(())
    }
}

/// Makes room for a new requester: those with nothing in the window go,
/// else the one heard from longest ago.
fn forget_some(seen: &mut HashMap<String, VecDeque<Duration>>, now: Duration) {
    seen.retain(|_, times| {
        times
            .back()
            .is_some_and(|t| now.saturating_sub(*t) < WINDOW)
    });
    if seen.len() >= MAX_REQUESTERS {
        let quietest = seen
            .iter()
            .min_by_key(|(_, times)| times.back().copied())
            .map(|(user, _)| user.clone());
        if let Some(user) = quietest {
            seen.remove(&user);
        }
    }
}

/// Why a run request is refused, and when to ask again.
fn refused(user: &str, max: usize, retry: Duration) -> String {
    let minutes = WINDOW.as_secs() / 60;
    format!(
        "preflight-gate: {user} has asked for {max} preflight runs in the last {minutes} minutes, \
         the most one requester may (--max-run-requests); retry in ~{} s. \
         The gate checks every target the update graph offers by itself, without being asked.",
        retry.as_secs().max(1)
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn review(user: &str, groups: &[&str], operation: &str, dry_run: bool) -> RunRequest {
        let body = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u-1",
                "resource": {"group": GROUP, "version": "v1alpha1", "resource": RESOURCE},
                "operation": operation,
                "userInfo": {"username": user, "groups": groups},
                "dryRun": dry_run,
                "object": {"spec": {"image": "quay.io/x@sha256:aa"}},
            }
        });
        parse(body.to_string().as_bytes()).unwrap()
    }

    fn allowed(limit: &RunRequests, request: &RunRequest, at: Duration) -> bool {
        let answer = serde_json::to_value(limit.answer(request, at)).unwrap();
        answer["response"]["allowed"].as_bool().unwrap()
    }

    #[test]
    fn each_requester_gets_the_limit_in_a_sliding_window() {
        let limit = RunRequests::new(3, RunRequests::own_account("preflight-gate"));
        let start = Duration::from_secs(1000);
        let alice = review("alice", &["system:authenticated"], "CREATE", false);
        for i in 0..3 {
            assert!(allowed(&limit, &alice, start + Duration::from_secs(i)));
        }
        let answer =
            serde_json::to_value(limit.answer(&alice, start + Duration::from_secs(10))).unwrap();
        let status = &answer["response"]["status"];
        assert_eq!(answer["response"]["allowed"], false);
        assert_eq!(status["code"], 429);
        let message = status["message"].as_str().unwrap();
        assert!(
            message.contains("alice has asked for 3 preflight runs in the last 10 minutes"),
            "{message}"
        );
        // The first was taken at 0 s: it leaves the window at 600 s.
        assert!(message.contains("retry in ~590 s"), "{message}");
        // Another requester is not held by alice's.
        let bob = review("bob", &[], "UPDATE", false);
        assert!(allowed(&limit, &bob, start + Duration::from_secs(10)));
        // Once the first leaves the window, one more is taken.
        assert!(!allowed(&limit, &alice, start + Duration::from_secs(599)));
        assert!(allowed(&limit, &alice, start + WINDOW));
    }

    #[test]
    fn the_gate_superusers_dry_runs_and_deletes_are_not_counted() {
        let limit = RunRequests::new(1, RunRequests::own_account("gate-ns"));
        let now = Duration::from_secs(1000);
        for request in [
            review(
                "system:serviceaccount:gate-ns:preflight-gate",
                &[],
                "CREATE",
                false,
            ),
            review("root", &["system:masters"], "CREATE", false),
            review("alice", &[], "CREATE", true),
            review("alice", &[], "DELETE", false),
        ] {
            for _ in 0..5 {
                assert!(allowed(&limit, &request, now), "{request:?}");
            }
        }
        // The gate's account in another namespace is just a requester.
        let other = review(
            "system:serviceaccount:elsewhere:preflight-gate",
            &[],
            "CREATE",
            false,
        );
        assert!(allowed(&limit, &other, now));
        assert!(!allowed(&limit, &other, now));
    }

    #[test]
    fn no_limit_when_max_is_zero() {
        let limit = RunRequests::new(0, "gate");
        let alice = review("alice", &[], "CREATE", false);
        assert!((0..100).all(|_| allowed(&limit, &alice, Duration::ZERO)));
    }

    #[test]
    fn many_requesters_keep_a_bounded_table() {
        let limit = RunRequests::new(1, "gate");
        let start = Duration::from_secs(1000);
        for i in 0..MAX_REQUESTERS + 10 {
            let at = start + Duration::from_millis(i as u64);
            assert!(allowed(
                &limit,
                &review(&format!("u{i}"), &[], "CREATE", false),
                at
            ));
        }
        assert!(limit.seen.lock().unwrap().len() <= MAX_REQUESTERS);
    }

    #[test]
    fn a_review_of_anything_else_is_malformed_and_says_so() {
        let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-2", "operation": "CREATE",
                "resource": {"group": "config.openshift.io", "resource": "clusterversions"}}});
        let refused = parse(body.to_string().as_bytes()).unwrap_err();
        assert_eq!(refused.uid, "u-2");
        assert_eq!(
            refused.message,
            "this path reviews only updatepreflights.preflight.dev"
        );
        assert!(parse(b"{").unwrap_err().message.contains("not valid JSON"));
        let no_uid = json!({"kind": "AdmissionReview", "request": {"operation": "CREATE"}});
        assert!(
            parse(no_uid.to_string().as_bytes())
                .unwrap_err()
                .message
                .contains("no uid")
        );
    }
}
