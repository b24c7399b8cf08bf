//! AdmissionReview bodies in the shapes real clients produce, built from the
//! example review in `examples/reviews/`.

use serde_json::{Value, json};

const BASE: &str = include_str!("../../examples/reviews/update-to-4.15.3.json");

/// A review builder over the example ClusterVersion (at 4.14.1, offered
/// 4.14.12 which passes, 4.15.3 which fails, and 4.15.16 with no results).
#[derive(Clone)]
pub struct Review(pub Value);

impl Review {
    /// An UPDATE whose old and new objects are the same, with no target.
    pub fn unchanged() -> Self {
        let mut v: Value = serde_json::from_str(BASE).unwrap();
        let old = v["request"]["oldObject"].clone();
        v["request"]["object"] = old;
        Self(v)
    }

    /// What `oc adm upgrade --to V` produces: a JSON merge patch of
    /// `{"spec":{"desiredUpdate":{"version":V}}}` applied by the API server.
    pub fn merge_patch_to(version: &str) -> Self {
        let mut r = Self::unchanged();
        r.0["request"]["object"]["spec"]["desiredUpdate"] = json!({"version": version});
        r.0["request"]["options"] = json!({"kind": "PatchOptions", "apiVersion": "meta.k8s.io/v1"});
        r
    }

    /// What the console produces: a JSON Patch `add /spec/desiredUpdate`
    /// with both version and image, as it copies them from availableUpdates.
    pub fn json_patch_to(version: &str) -> Self {
        let mut r = Self::unchanged();
        let image = r.0["request"]["oldObject"]["status"]["availableUpdates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["version"] == version)
            .map(|u| u["image"].clone())
            .unwrap_or(Value::Null);
        r.0["request"]["object"]["spec"]["desiredUpdate"] =
            json!({"version": version, "image": image, "force": false});
        r
    }

    /// CREATE of a ClusterVersion that already names a target.
    pub fn create_to(version: &str) -> Self {
        let mut r = Self::merge_patch_to(version);
        r.0["request"]["operation"] = json!("CREATE");
        r.0["request"]["oldObject"] = Value::Null;
        r
    }

    /// A write of the `/status` subresource, as the CVO makes it.
    pub fn status_only() -> Self {
        let mut r = Self::unchanged();
        r.0["request"]["subResource"] = json!("status");
        r.0["request"]["object"]["status"]["availableUpdates"] = json!([]);
        r
    }

    pub fn uid(mut self, uid: &str) -> Self {
        self.0["request"]["uid"] = json!(uid);
        self
    }

    pub fn dry_run(mut self) -> Self {
        self.0["request"]["dryRun"] = json!(true);
        self
    }

    /// An annotation the ClusterVersion already has, before and after
    /// (a claim written earlier).
    pub fn annotate(mut self, key: &str, value: &str) -> Self {
        if !self.0["request"]["oldObject"].is_null() {
            self.0["request"]["oldObject"]["metadata"]["annotations"][key] = json!(value);
        }
        self.0["request"]["object"]["metadata"]["annotations"][key] = json!(value);
        self
    }

    /// A force override for `target`, written earlier, good for four hours.
    pub fn overridden(self, target: &str, reason: &str) -> Self {
        let until = jiff::Timestamp::now()
            .checked_add(jiff::SignedDuration::from_hours(4))
            .unwrap()
            .to_string();
        self.annotate("preflight.dev/override", target)
            .annotate("preflight.dev/override-reason", reason)
            .annotate("preflight.dev/override-until", &until)
    }

    pub fn body(&self) -> Vec<u8> {
        serde_json::to_vec(&self.0).unwrap()
    }
}
