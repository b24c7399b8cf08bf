//! A scripted API server for tests: a `kube::Client` over a `tower-test`
//! mock, so the controller and the leader loop run their real code while a
//! test reads each request they make and answers it. Every wait is bounded,
//! so a scenario that goes wrong fails instead of hanging.

use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};
use tower_test::mock::{self, Handle, SendResponse};

/// How long a test waits for the next request before it fails.
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);

/// The test's end of the client.
pub(crate) struct ApiServer(Handle<Request<Body>, Response<Body>>);

/// A client whose every request the returned [`ApiServer`] answers.
pub(crate) fn client() -> (kube::Client, ApiServer) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    (kube::Client::new(service, "default"), ApiServer(handle))
}

/// One request, read whole.
#[derive(Debug)]
pub(crate) struct Seen {
    pub method: Method,
    pub path: String,
    pub query: String,
    pub content_type: String,
    /// The JSON body; `Null` when there is none.
    pub body: Value,
    reply: Option<SendResponse<Response<Body>>>,
}

impl Seen {
    /// Whether the query string has `key=value`.
    pub fn has_query(&self, key: &str, value: &str) -> bool {
        self.query
            .split('&')
            .any(|pair| pair == format!("{key}={value}"))
    }

    /// Answers with `status` and a JSON body.
    pub fn answer(&mut self, status: u16, body: &Value) {
        let response = Response::builder()
            .status(StatusCode::from_u16(status).expect("a status code"))
            .header("content-type", "application/json")
            .body(Body::from(serde_json::to_vec(body).expect("JSON")))
            .expect("a response");
        self.reply
            .take()
            .expect("answered once")
            .send_response(response);
    }

    /// Answers 200 with `body` as it is, as a pod's log is served.
    pub fn text(&mut self, body: Vec<u8>) {
        let response = Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "text/plain")
            .body(Body::from(body))
            .expect("a response");
        self.reply
            .take()
            .expect("answered once")
            .send_response(response);
    }

    /// Answers 200 with `body`.
    pub fn ok(&mut self, body: &Value) {
        self.answer(200, body);
    }

    /// Answers a list with no items.
    pub fn empty_list(&mut self) {
        self.ok(&json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": []}));
    }

    /// Answers with a failure `Status`, as the API server does.
    pub fn fail(&mut self, code: u16, reason: &str, message: &str) {
        let status = json!({
            "apiVersion": "v1", "kind": "Status", "metadata": {},
            "status": "Failure", "code": code, "reason": reason, "message": message,
        });
        self.answer(code, &status);
    }
}

impl ApiServer {
    /// The next request, or a panic when none comes within [`PATIENCE`] or
    /// the client is gone.
    pub async fn next(&mut self) -> Seen {
        match self.next_within(PATIENCE).await {
            Some(seen) => seen,
            None => panic!("no request came within {PATIENCE:?}"),
        }
    }

    /// The next request, if one comes within `wait` while the client lives.
    pub async fn next_within(&mut self, wait: Duration) -> Option<Seen> {
        let (request, reply) = tokio::time::timeout(wait, self.0.next_request())
            .await
            .ok()??;
        let (parts, body) = request.into_parts();
        let bytes = body.collect_bytes().await.expect("a request body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).expect("a JSON request body")
        };
        Some(Seen {
            method: parts.method,
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().unwrap_or("").to_owned(),
            content_type: parts
                .headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned(),
            body,
            reply: Some(reply),
        })
    }

    /// Whether the client made no request at all before it was dropped
    /// (or within [`PATIENCE`]); the request's path when it did.
    pub async fn silent(&mut self) -> Result<(), String> {
        match tokio::time::timeout(PATIENCE, self.0.next_request()).await {
            Ok(None) => Ok(()),
            Ok(Some((request, _))) => Err(format!("{} {}", request.method(), request.uri())),
            Err(_) => Err("the client was never dropped".to_owned()),
        }
    }
}
