//! Reading a cluster from a snapshot: `oc get -o yaml` output (Lists or
//! single objects, YAML or JSON, several documents per file) or a
//! must-gather tree, searched recursively, plus an optional `alerts.json`
//! in Prometheus `/api/v1/alerts` format.
//!
//! JSON is read without building a tree of the whole file: each List item
//! is deserialized straight into its lean type, which is what lets a
//! snapshot of 150,000 pods load in well under a second. An object met
//! twice (a must-gather holds pods both in `core/pods.yaml` and one file
//! per pod) is kept once.

use std::borrow::Cow;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::value::RawValue;

mod yaml;

use super::alerts::AlertsResponse;
use super::view::ClusterView;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not valid YAML or JSON: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: a {kind} that does not match its schema: {message}")]
    Object {
        path: PathBuf,
        kind: String,
        message: String,
    },
    #[error("{path} holds no Kubernetes objects")]
    Empty { path: PathBuf },
}

/// The file name of alerts in a snapshot.
pub const ALERTS_FILE: &str = "alerts.json";

/// Loads every object of a kind the checks read from `dir`.
pub fn load(dir: &Path) -> Result<ClusterView, SnapshotError> {
    let mut files = Vec::new();
    collect(dir, &mut files)?;
    files.sort();
    let mut snapshot = Snapshot::default();
    for path in &files {
        let text = std::fs::read_to_string(path).map_err(|source| SnapshotError::Read {
            path: path.to_owned(),
            source,
        })?;
        snapshot.add_file(path, &text)?;
    }
    snapshot.finish(dir)
}

/// Loads a snapshot held in memory as `(file name, text)` pairs, such as
/// the sample compiled into the binary.
pub fn load_files(files: &[(&str, &str)]) -> Result<ClusterView, SnapshotError> {
    let mut snapshot = Snapshot::default();
    for (name, text) in files {
        snapshot.add_file(Path::new(name), text)?;
    }
    snapshot.finish(Path::new("(embedded snapshot)"))
}

/// A snapshot being read: the view so far, and the objects already seen.
#[derive(Default)]
pub struct Snapshot {
    pub view: ClusterView,
    /// Hashes of (kind, namespace, name): a 64-bit hash is enough to tell
    /// millions of objects apart, at a fraction of the memory of the names.
    seen: HashSet<u64>,
    kept: usize,
}

impl Snapshot {
    /// The view, or an error naming `source` if it holds no object at all.
    pub fn finish(self, source: &Path) -> Result<ClusterView, SnapshotError> {
        if self.kept == 0 {
            return Err(SnapshotError::Empty {
                path: source.to_owned(),
            });
        }
        Ok(self.view)
    }

    /// Whether this is the first time the object is met; objects without a
    /// name are always new.
    fn first_time(&mut self, kind: &str, namespace: &str, name: &str) -> bool {
        use std::hash::{Hash, Hasher};
        if name.is_empty() {
            return true;
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (kind, namespace, name).hash(&mut hasher);
        self.seen.insert(hasher.finish())
    }

    /// Adds the objects of one file; returns how many were kept (alerts
    /// count as one).
    pub fn add_file(&mut self, path: &Path, text: &str) -> Result<usize, SnapshotError> {
        let kept = add_file(self, path, text)?;
        self.kept += kept;
        Ok(kept)
    }
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), SnapshotError> {
    let entries = std::fs::read_dir(dir).map_err(|source| SnapshotError::Read {
        path: dir.to_owned(),
        source,
    })?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, files)?;
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            files.push(path);
        }
    }
    Ok(())
}

fn add_file(snapshot: &mut Snapshot, path: &Path, text: &str) -> Result<usize, SnapshotError> {
    let parse_error = |message: String| SnapshotError::Parse {
        path: path.to_owned(),
        message,
    };
    if path.file_name().and_then(|n| n.to_str()) == Some(ALERTS_FILE) {
        let response: AlertsResponse =
            serde_json::from_str(text).map_err(|e| parse_error(e.to_string()))?;
        if response.status != "success" {
            return Err(parse_error(
                "not a successful Prometheus /api/v1/alerts response".to_owned(),
            ));
        }
        snapshot.view.add_alerts(response.data.alerts);
        return Ok(1);
    }
    if text.trim_start().starts_with('{') {
        return add_json(snapshot, path, text);
    }
    yaml::add(snapshot, path, text)
}

impl Snapshot {
    /// Adds one object given as a tree, unless it was met before; returns
    /// whether it was kept, or its kind and why it does not fit.
    fn add_value(&mut self, item: serde_json::Value) -> Result<bool, (String, serde_json::Error)> {
        let kind = kind_of(&item);
        let field = |name: &str| {
            item.get("metadata")
                .and_then(|m| m.get(name))
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_owned()
        };
        let (namespace, name) = (field("namespace"), field("name"));
        if !self.first_time(&kind, &namespace, &name) {
            return Ok(false);
        }
        self.view.add(&kind, item).map_err(|e| (kind, e))
    }
}

fn kind_of(value: &serde_json::Value) -> String {
    value
        .get("kind")
        .and_then(|k| k.as_str())
        .unwrap_or("")
        .to_owned()
}

fn object_error(path: &Path, kind: &str, e: serde_json::Error) -> SnapshotError {
    SnapshotError::Object {
        path: path.to_owned(),
        kind: kind.to_owned(),
        message: e.to_string(),
    }
}

/// The kind and, for a List, its items, each left unparsed.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    items: Option<Vec<&'a RawValue>>,
}

/// The kind and identity of an object.
#[derive(Deserialize)]
struct Identity<'a> {
    #[serde(default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    metadata: Option<Names<'a>>,
}

#[derive(Deserialize, Default)]
struct Names<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    namespace: Option<Cow<'a, str>>,
}

fn add_json(snapshot: &mut Snapshot, path: &Path, text: &str) -> Result<usize, SnapshotError> {
    let head: Head = serde_json::from_str(text).map_err(|e| SnapshotError::Parse {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    let kind = head.kind.unwrap_or_default();
    let Some(item_kind) = kind.strip_suffix("List") else {
        return add_json_object(snapshot, path, text, &kind);
    };
    snapshot.view.mark_loaded(item_kind);
    let mut kept = 0;
    for item in head.items.unwrap_or_default() {
        kept += add_json_object(snapshot, path, item.get(), item_kind)?;
    }
    Ok(kept)
}

/// Adds one JSON object; `context` names its kind in errors when it has none.
fn add_json_object(
    snapshot: &mut Snapshot,
    path: &Path,
    text: &str,
    context: &str,
) -> Result<usize, SnapshotError> {
    let id: Identity = serde_json::from_str(text).map_err(|e| object_error(path, context, e))?;
    let kind = id.kind.unwrap_or_default();
    let names = id.metadata.unwrap_or_default();
    if !snapshot.first_time(
        &kind,
        names.namespace.as_deref().unwrap_or(""),
        names.name.as_deref().unwrap_or(""),
    ) {
        return Ok(0);
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let kept = snapshot
        .view
        .add_from(&kind, &mut de)
        .map_err(|e| object_error(path, &kind, e))?;
    Ok(usize::from(kept))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_yaml_lists_load_the_same_objects() {
        let json = r#"{"kind":"List","items":[
            {"kind":"Node","metadata":{"name":"a"},"status":{"allocatable":{"cpu":"4","memory":"16Gi"}}},
            {"kind":"Pod","metadata":{"name":"p","namespace":"x","labels":{"app":"db"}},
             "spec":{"nodeName":"a","containers":[{"resources":{"requests":{"cpu":"250m"}}}]}},
            {"kind":"Pod","metadata":{"name":"done","namespace":"x"},"status":{"phase":"Succeeded"}},
            {"kind":"Widget","metadata":{"name":"w"}}]}"#;
        let yaml =
            "kind: PodDisruptionBudgetList\nitems: []\n---\nkind: Node\nmetadata: {name: b}\n";
        let mut snapshot = Snapshot::default();
        assert_eq!(snapshot.add_file(Path::new("a.json"), json).unwrap(), 2);
        assert_eq!(snapshot.add_file(Path::new("b.yaml"), yaml).unwrap(), 1);
        let view = snapshot.finish(Path::new(".")).unwrap();
        assert_eq!(view.nodes.len(), 2);
        assert_eq!(view.nodes[0].status.allocatable.cpu_millis, 4000);
        assert_eq!(view.pods.len(), 1);
        assert_eq!(view.pods[0].requests.cpu_millis, 250);
        assert!(view.has("PodDisruptionBudget") && view.has("Pod"));
        assert!(!view.has("MachineConfigPool"));
    }

    #[test]
    fn bad_objects_name_the_file_and_kind() {
        let mut snapshot = Snapshot::default();
        let err = snapshot
            .add_file(
            Path::new("pods.json"),
            r#"{"kind":"PodList","items":[{"kind":"Pod","spec":{"containers":[{"resources":{"requests":{"cpu":"lots"}}}]}}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("pods.json") && err.contains("Pod"), "{err}");
        let err = snapshot
            .add_file(Path::new("x.json"), "{ not json")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("x.json is not valid"), "{err}");
        let err = snapshot
            .add_file(Path::new("alerts.json"), "[]")
            .unwrap_err()
            .to_string();
        assert!(err.contains("alerts.json"), "{err}");
    }

    #[test]
    fn a_must_gather_keeps_each_object_once() {
        let list = r#"{"kind":"PodList","items":[
            {"kind":"Pod","metadata":{"name":"db-0","namespace":"shop"},"spec":{"nodeName":"w1"}},
            {"kind":"Pod","metadata":{"name":"db-1","namespace":"shop"},"spec":{"nodeName":"w2"}}]}"#;
        let single = "apiVersion: v1\nkind: Pod\nmetadata: {name: db-0, namespace: shop}\nspec: {nodeName: w1}\n";
        let other_ns = r#"{"kind":"Pod","metadata":{"name":"db-0","namespace":"staging"}}"#;
        let mut snapshot = Snapshot::default();
        snapshot
            .add_file(Path::new("namespaces/shop/core/pods.json"), list)
            .unwrap();
        snapshot
            .add_file(Path::new("namespaces/shop/pods/db-0/db-0.yaml"), single)
            .unwrap();
        snapshot
            .add_file(Path::new("namespaces/staging/pods/db-0.json"), other_ns)
            .unwrap();
        let view = snapshot.finish(Path::new(".")).unwrap();
        assert_eq!(view.pods.len(), 3);
    }

    #[test]
    fn yaml_is_streamed_and_judged_like_json() {
        let mut snapshot = Snapshot::default();
        let yaml = "kind: NodeList\nitems: null\n---\njust a string\n---\n- a\n- b\n---\nkind: PodDisruptionBudgetList\n";
        assert_eq!(snapshot.add_file(Path::new("odd.yaml"), yaml).unwrap(), 0);
        assert!(snapshot.view.has("Node") && snapshot.view.has("PodDisruptionBudget"));
        let misfit = "apiVersion: v1\nitems:\n- kind: Node\n  metadata: {name: a}\n- kind: Node\n  metadata: {name: b}\n  spec: {unschedulable: maybe}\nkind: List\n";
        let err = snapshot
            .add_file(Path::new("nodes.yaml"), misfit)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("nodes.yaml: a Node that does not match its schema"),
            "{err}"
        );
    }

    #[test]
    fn yaml_larger_than_the_parsers_default_budget_loads() {
        // Past serde-saphyr's default of 250,000 nodes, as a large
        // `oc get -o yaml` is.
        let mut yaml = String::from("apiVersion: v1\nkind: List\nitems:\n");
        for i in 0..55_000 {
            yaml.push_str(&format!("- kind: Node\n  metadata:\n    name: n{i}\n"));
        }
        let mut snapshot = Snapshot::default();
        assert_eq!(
            snapshot.add_file(Path::new("nodes.yaml"), &yaml).unwrap(),
            55_000
        );
    }
}
