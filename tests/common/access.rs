//! SubjectAccessReviews asked of the real API server, which its authorizer
//! answers as it would judge the account's own requests. Shared by the
//! end-to-end and node suites.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

/// The workloads that make pods: an account that may create one may make
/// pods of its own.
pub const MAKE_PODS: &[(&str, &str)] = &[
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "daemonsets"),
    ("apps", "statefulsets"),
    ("batch", "cronjobs"),
    ("", "replicationcontrollers"),
];

/// A ServiceAccount.
pub struct Account<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
}

impl Account<'_> {
    /// The review of whether the account may `verb` the `resource` (a
    /// subresource after a slash, as `pods/log`) of `group` in `namespace`,
    /// the object `name` (any when empty).
    pub fn review(
        &self,
        verb: &str,
        group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Value {
        let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
        json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {
                "user": format!("system:serviceaccount:{}:{}", self.namespace, self.name),
                "groups": ["system:serviceaccounts",
                    format!("system:serviceaccounts:{}", self.namespace), "system:authenticated"],
                "resourceAttributes": {"verb": verb, "group": group, "resource": resource,
                    "subresource": subresource, "namespace": namespace, "name": name}}})
    }
}

/// Whether the API server allows what `review` asks: written to a file in
/// `dir`, created with `create` (the suite's administrator `kubectl create
/// -f <file> -o json`), the answer read.
pub fn allowed(review: &Value, dir: &Path, create: impl FnOnce(&str) -> String) -> bool {
    static ASKED: AtomicUsize = AtomicUsize::new(0);
    let path = dir.join(format!(
        "access-review-{}-{}.json",
        std::process::id(),
        ASKED.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, review.to_string()).unwrap();
    let answer: Value = serde_json::from_str(&create(path.to_str().unwrap())).unwrap();
    let _ = std::fs::remove_file(&path);
    answer["status"]["allowed"] == true
}
