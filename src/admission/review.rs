//! The AdmissionReview wire format, parsed only as far as the decision needs,
//! and the response that always echoes the request's uid.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::model::cluster_version::ClusterVersion;

/// The parts of an `AdmissionReview` request that the gate reads, with its
/// objects of kind `O`.
#[derive(Debug)]
pub struct Request<O = ClusterVersion> {
    pub uid: String,
    pub api_version: String,
    pub operation: Operation,
    pub sub_resource: Option<String>,
    pub name: String,
    pub user: UserInfo,
    pub dry_run: bool,
    pub object: Option<O>,
    pub old_object: Option<O>,
}

impl<O> Request<O> {
    /// The same request with its objects read as another kind's: a
    /// HostedCluster's as the ClusterVersion write it amounts to.
    pub fn read_as<P>(&self, read: impl Fn(&O) -> P) -> Request<P> {
        Request {
            uid: self.uid.clone(),
            api_version: self.api_version.clone(),
            operation: self.operation,
            sub_resource: self.sub_resource.clone(),
            name: self.name.clone(),
            user: self.user.clone(),
            dry_run: self.dry_run,
            object: self.object.as_ref().map(&read),
            old_object: self.old_object.as_ref().map(&read),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
            Self::Connect => "CONNECT",
        }
    }
}

/// The requesting user, as the API server authenticated it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct UserInfo {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// A review that cannot be decided on; the message says what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Malformed {
    /// The uid, when it could still be read, so that the answer echoes it.
    pub uid: String,
    pub api_version: String,
    pub message: String,
}

/// A kind of object the gate reviews: what its reviews name, and how its
/// object is read off the wire. Each kind's reviews come to their own path,
/// so the body is read once, straight into the kind's lean shape.
pub trait Reviewable: Sized {
    /// The API group and resource its reviews name, and its kind.
    const GROUP: &'static str;
    const RESOURCE: &'static str;
    const KIND: &'static str;
    /// The object as a review carries it, read only as far as the decision needs.
    type Wire: DeserializeOwned + Into<Self>;
}

/// The review on the wire. `O` is the object type: the kind's
/// [`Reviewable::Wire`] for the single-pass fast path, [`RawValue`] to diagnose a review that did
/// not parse that way.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireReview<O> {
    api_version: Option<String>,
    kind: Option<String>,
    request: Option<WireRequest<O>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireRequest<O> {
    #[serde(default)]
    uid: String,
    kind: Option<GroupVersionKind>,
    resource: Option<GroupVersionResource>,
    #[serde(default)]
    sub_resource: Option<String>,
    #[serde(default)]
    name: String,
    operation: Option<Operation>,
    #[serde(default)]
    user_info: UserInfo,
    #[serde(default)]
    dry_run: Option<bool>,
    #[serde(default = "Option::default")]
    object: Option<O>,
    #[serde(default = "Option::default")]
    old_object: Option<O>,
}

#[derive(Deserialize)]
struct GroupVersionKind {
    #[serde(default)]
    group: String,
    #[serde(default)]
    kind: String,
}

#[derive(Deserialize)]
struct GroupVersionResource {
    #[serde(default)]
    group: String,
    #[serde(default)]
    resource: String,
}

/// The uid alone, for answering a review that does not parse as a whole.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UidOnly {
    api_version: Option<String>,
    request: Option<UidOnlyRequest>,
}

#[derive(Deserialize)]
struct UidOnlyRequest {
    uid: Option<String>,
}

const V1: &str = "admission.k8s.io/v1";

/// Parses a review body. Status history, risks and every other field the
/// decision does not read are skipped, not built. The body is read once; only
/// a review that fails that way is read again, to say precisely what is wrong.
pub fn parse<K: Reviewable>(body: &[u8]) -> Result<Request<K>, Malformed> {
    if let Ok(wire) = serde_json::from_slice::<WireReview<K::Wire>>(body) {
        return check(wire, |object| Ok(object.into()));
    }
    let wire: WireReview<&RawValue> = serde_json::from_slice(body).map_err(|e| {
        let (uid, api_version) = salvage_uid(body);
        Malformed {
            uid,
            api_version,
            message: format!("the AdmissionReview is not valid JSON of the expected shape: {e}"),
        }
    })?;
    check(wire, |raw: &RawValue| {
        serde_json::from_str::<K::Wire>(raw.get())
            .map(Into::into)
            .map_err(|e| e.to_string())
    })
}

/// Checks that a review asks about the kind's resource, then reads its
/// objects with `read`.
fn check<K: Reviewable, O>(
    wire: WireReview<O>,
    read: impl Fn(O) -> Result<K, String>,
) -> Result<Request<K>, Malformed> {
    let api_version = wire.api_version.unwrap_or_else(|| V1.to_owned());
    let malformed = |uid: &str, message: String| Malformed {
        uid: uid.to_owned(),
        api_version: api_version.clone(),
        message,
    };
    if wire.kind.as_deref() != Some("AdmissionReview") {
        let uid = wire.request.as_ref().map_or("", |r| r.uid.as_str());
        return Err(malformed(uid, "the body is not an AdmissionReview".into()));
    }
    let Some(request) = wire.request else {
        return Err(malformed("", "the AdmissionReview has no request".into()));
    };
    let uid = request.uid.as_str();
    if uid.is_empty() {
        return Err(malformed(
            uid,
            "the AdmissionReview request has no uid".into(),
        ));
    }
    let (group, resource) = match (&request.resource, &request.kind) {
        (Some(r), _) => (r.group.as_str(), r.resource.as_str()),
        (None, Some(k)) if k.kind == K::KIND => (k.group.as_str(), K::RESOURCE),
        _ => ("", ""),
    };
    if group != K::GROUP || resource != K::RESOURCE {
        return Err(malformed(
            uid,
            format!(
                "preflight-gate reviews only {}.{}, not {}",
                K::RESOURCE,
                K::GROUP,
                if resource.is_empty() {
                    "an unnamed resource".to_owned()
                } else if group.is_empty() {
                    resource.to_owned()
                } else {
                    format!("{resource}.{group}")
                }
            ),
        ));
    }
    let Some(operation) = request.operation else {
        return Err(malformed(
            uid,
            "the AdmissionReview request has no operation".into(),
        ));
    };
    let read_field = |value: Option<O>, field: &str| -> Result<Option<K>, Malformed> {
        value
            .map(&read)
            .transpose()
            .map_err(|e| malformed(uid, format!("request.{field} is not a {}: {e}", K::KIND)))
    };
    let object = read_field(request.object, "object")?;
    let old_object = read_field(request.old_object, "oldObject")?;
    Ok(Request {
        uid: request.uid,
        api_version,
        operation,
        sub_resource: request.sub_resource.filter(|s| !s.is_empty()),
        name: request.name,
        user: request.user_info,
        dry_run: request.dry_run.unwrap_or(false),
        object,
        old_object,
    })
}

fn salvage_uid(body: &[u8]) -> (String, String) {
    match serde_json::from_slice::<UidOnly>(body) {
        Ok(UidOnly {
            api_version,
            request,
        }) => (
            request.and_then(|r| r.uid).unwrap_or_default(),
            api_version.unwrap_or_else(|| V1.to_owned()),
        ),
        Err(_) => (String::new(), V1.to_owned()),
    }
}

/// The answer to a review.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    pub api_version: String,
    pub kind: &'static str,
    pub response: ResponseBody,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResponseBody {
    pub uid: String,
    pub allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub audit_annotations: BTreeMap<String, String>,
}

/// The `metav1.Status` of a denial.
#[derive(Debug, Serialize)]
pub struct Status {
    pub code: u16,
    pub message: String,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub reason: &'static str,
}

impl Response {
    pub fn new(api_version: &str, body: ResponseBody) -> Self {
        Self {
            api_version: if api_version.is_empty() {
                V1.to_owned()
            } else {
                api_version.to_owned()
            },
            kind: "AdmissionReview",
            response: body,
        }
    }

    /// The answer to a decided review.
    pub fn decided<O>(request: &Request<O>, verdict: &super::Verdict) -> Self {
        Self::new(
            &request.api_version,
            ResponseBody {
                uid: request.uid.clone(),
                allowed: verdict.allowed,
                status: (!verdict.allowed).then(|| Status {
                    code: verdict.code,
                    message: super::message::bounded(&verdict.message),
                    reason: if verdict.code == 400 {
                        "BadRequest"
                    } else {
                        "Forbidden"
                    },
                }),
                warnings: verdict
                    .warnings
                    .iter()
                    .map(|w| super::message::clean(w, super::message::MAX_WARNING))
                    .collect(),
                audit_annotations: verdict.audit.clone(),
            },
        )
    }

    /// A denial for a review that could not be read.
    pub fn malformed(err: &Malformed) -> Self {
        Self::new(
            &err.api_version,
            ResponseBody {
                uid: err.uid.clone(),
                allowed: false,
                status: Some(Status {
                    code: 400,
                    message: err.message.clone(),
                    reason: "BadRequest",
                }),
                warnings: Vec::new(),
                audit_annotations: BTreeMap::new(),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const GOOD: &str = include_str!("../../examples/reviews/update-to-4.15.3.json");

    #[test]
    fn parses_a_real_review() {
        let r: Request = parse(GOOD.as_bytes()).unwrap();
        assert_eq!(r.uid, "0f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a00");
        assert_eq!(r.operation, Operation::Update);
        assert_eq!(r.user.username, "system:admin");
        assert!(!r.dry_run);
        let new = r.object.unwrap();
        let du = new.spec.desired_update.unwrap();
        assert_eq!(du.version.as_deref(), Some("4.15.3"));
        assert_eq!(new.status.available_updates.len(), 2);
        assert_eq!(new.status.conditional_updates.len(), 1);
    }

    #[rstest]
    #[case::not_json("{", "", "not valid JSON")]
    #[case::array("[]", "", "not valid JSON")]
    #[case::not_a_review(
        r#"{"kind":"Pod","request":{"uid":"u1"}}"#,
        "u1",
        "not an AdmissionReview"
    )]
    #[case::no_request(r#"{"kind":"AdmissionReview"}"#, "", "has no request")]
    #[case::no_uid(
        r#"{"kind":"AdmissionReview","request":{"operation":"UPDATE"}}"#,
        "",
        "has no uid"
    )]
    #[case::wrong_kind(
        r#"{"kind":"AdmissionReview","request":{"uid":"u2","operation":"UPDATE","resource":{"group":"","version":"v1","resource":"pods"}}}"#,
        "u2",
        "not pods"
    )]
    #[case::bad_object(
        r#"{"kind":"AdmissionReview","request":{"uid":"u3","operation":"UPDATE","resource":{"group":"config.openshift.io","resource":"clusterversions"},"object":{"spec":"x"}}}"#,
        "u3",
        "request.object is not a ClusterVersion"
    )]
    #[case::bad_type_keeps_uid(
        r#"{"kind":"AdmissionReview","request":{"uid":"u4","operation":7}}"#,
        "u4",
        "not valid JSON"
    )]
    #[case::no_operation(
        r#"{"kind":"AdmissionReview","request":{"uid":"u5","resource":{"group":"config.openshift.io","resource":"clusterversions"}}}"#,
        "u5",
        "no operation"
    )]
    fn malformed_reviews_say_what_is_wrong(
        #[case] body: &str,
        #[case] uid: &str,
        #[case] message: &str,
    ) {
        let err = parse::<ClusterVersion>(body.as_bytes()).unwrap_err();
        assert_eq!(err.uid, uid);
        assert!(err.message.contains(message), "{}", err.message);
        let json = serde_json::to_value(Response::malformed(&err)).unwrap();
        assert_eq!(json["response"]["uid"], uid);
        assert_eq!(json["response"]["allowed"], false);
        assert_eq!(json["response"]["status"]["code"], 400);
        assert_eq!(json["kind"], "AdmissionReview");
    }

    /// Every truncation and many byte flips of a real review: no panic, and
    /// an answer that names the uid whenever it could be read.
    #[test]
    fn damaged_reviews_never_panic() {
        let body = GOOD.as_bytes();
        let uid = "0f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a00";
        let mut checked = 0;
        let mut check = |damaged: &[u8]| {
            checked += 1;
            match parse::<ClusterVersion>(damaged) {
                Ok(request) => assert!(!request.uid.is_empty()),
                Err(err) => {
                    assert!(err.uid.is_empty() || err.uid == uid, "{err:?}");
                    assert!(!err.message.is_empty());
                }
            }
        };
        for end in (0..body.len()).step_by(7) {
            check(&body[..end]);
        }
        let mut flipped = body.to_vec();
        for i in (0..body.len()).step_by(13) {
            for byte in [b'"', b'{', b']', b'\\', 0xff, b'0'] {
                let original = flipped[i];
                flipped[i] = byte;
                check(&flipped);
                flipped[i] = original;
            }
        }
        assert!(checked > 3000);
    }
}
