//! Reading a cluster from a snapshot: `oc get -o yaml` output (Lists or
//! single objects, YAML or JSON, several documents per file) or a
//! must-gather tree, searched recursively, plus an optional `alerts.json`
//! in Prometheus `/api/v1/alerts` format.
//!
//! JSON is read without building a tree of the whole file: each List item
//! is deserialized straight into its lean type, which is what lets a
//! snapshot of 150,000 pods load in well under a second.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::value::RawValue;

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
    let mut view = ClusterView::default();
    let mut kept = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).map_err(|source| SnapshotError::Read {
            path: path.to_owned(),
            source,
        })?;
        kept += add_file(&mut view, path, &text)?;
    }
    if kept == 0 {
        return Err(SnapshotError::Empty {
            path: dir.to_owned(),
        });
    }
    Ok(view)
}

/// Loads a snapshot held in memory as `(file name, text)` pairs, such as
/// the sample compiled into the binary.
pub fn load_files(files: &[(&str, &str)]) -> Result<ClusterView, SnapshotError> {
    let mut view = ClusterView::default();
    let mut kept = 0;
    for (name, text) in files {
        kept += add_file(&mut view, Path::new(name), text)?;
    }
    if kept == 0 {
        return Err(SnapshotError::Empty {
            path: PathBuf::from("(embedded snapshot)"),
        });
    }
    Ok(view)
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

/// Adds the objects of one file; returns how many were kept (alerts count
/// as one).
pub fn add_file(view: &mut ClusterView, path: &Path, text: &str) -> Result<usize, SnapshotError> {
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
        view.add_alerts(response.data.alerts);
        return Ok(1);
    }
    if text.trim_start().starts_with('{') {
        return add_json(view, path, text);
    }
    let documents: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(text).map_err(|e| parse_error(e.to_string()))?;
    let mut kept = 0;
    for document in documents {
        let kind = kind_of(&document);
        let items = if let Some(item_kind) = kind.strip_suffix("List") {
            view.mark_loaded(item_kind);
            match document.get("items") {
                Some(serde_json::Value::Array(items)) => items.clone(),
                _ => Vec::new(),
            }
        } else {
            vec![document]
        };
        for item in items {
            let kind = kind_of(&item);
            kept += usize::from(
                view.add(&kind, item)
                    .map_err(|e| object_error(path, &kind, e))?,
            );
        }
    }
    Ok(kept)
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

/// Just the kind of an object.
#[derive(Deserialize)]
struct KindOnly<'a> {
    #[serde(default, borrow)]
    kind: Option<Cow<'a, str>>,
}

fn add_json(view: &mut ClusterView, path: &Path, text: &str) -> Result<usize, SnapshotError> {
    let head: Head = serde_json::from_str(text).map_err(|e| SnapshotError::Parse {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    let kind = head.kind.unwrap_or_default();
    let Some(item_kind) = kind.strip_suffix("List") else {
        let mut de = serde_json::Deserializer::from_str(text);
        let kept = view
            .add_from(&kind, &mut de)
            .map_err(|e| object_error(path, &kind, e))?;
        return Ok(usize::from(kept));
    };
    view.mark_loaded(item_kind);
    let mut kept = 0;
    for item in head.items.unwrap_or_default() {
        let kind = serde_json::from_str::<KindOnly>(item.get())
            .map_err(|e| object_error(path, item_kind, e))?
            .kind
            .unwrap_or_default();
        let mut de = serde_json::Deserializer::from_str(item.get());
        kept += usize::from(
            view.add_from(&kind, &mut de)
                .map_err(|e| object_error(path, &kind, e))?,
        );
    }
    Ok(kept)
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
        let mut view = ClusterView::default();
        assert_eq!(add_file(&mut view, Path::new("a.json"), json).unwrap(), 2);
        assert_eq!(add_file(&mut view, Path::new("b.yaml"), yaml).unwrap(), 1);
        assert_eq!(view.nodes.len(), 2);
        assert_eq!(view.nodes[0].status.allocatable.cpu_millis, 4000);
        assert_eq!(view.pods.len(), 1);
        assert_eq!(view.pods[0].requests.cpu_millis, 250);
        assert!(view.has("PodDisruptionBudget") && view.has("Pod"));
        assert!(!view.has("MachineConfigPool"));
    }

    #[test]
    fn bad_objects_name_the_file_and_kind() {
        let mut view = ClusterView::default();
        let err = add_file(
            &mut view,
            Path::new("pods.json"),
            r#"{"kind":"PodList","items":[{"kind":"Pod","spec":{"containers":[{"resources":{"requests":{"cpu":"lots"}}}]}}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("pods.json") && err.contains("Pod"), "{err}");
        let err = add_file(&mut view, Path::new("x.json"), "{ not json")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("x.json is not valid"), "{err}");
        let err = add_file(&mut view, Path::new("alerts.json"), "[]")
            .unwrap_err()
            .to_string();
        assert!(err.contains("alerts.json"), "{err}");
    }
}
