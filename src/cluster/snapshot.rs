//! Reading a cluster from a snapshot directory: `oc get -o yaml` output
//! (Lists or single objects, YAML or JSON, several documents per file) or a
//! must-gather tree, searched recursively.

use std::path::{Path, PathBuf};

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

/// Loads every object of a kind the checks read from `dir`.
pub fn load(dir: &Path) -> Result<ClusterView, SnapshotError> {
    let mut files = Vec::new();
    collect(dir, &mut files)?;
    files.sort();
    let mut view = ClusterView::default();
    let mut kept = 0;
    for path in &files {
        kept += load_file(path, &mut view)?;
    }
    if kept == 0 {
        return Err(SnapshotError::Empty {
            path: dir.to_owned(),
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

/// Adds the objects of one file; returns how many were kept.
fn load_file(path: &Path, view: &mut ClusterView) -> Result<usize, SnapshotError> {
    let text = std::fs::read_to_string(path).map_err(|source| SnapshotError::Read {
        path: path.to_owned(),
        source,
    })?;
    let documents: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| SnapshotError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
    let mut kept = 0;
    for document in documents {
        let kind = document
            .get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or("")
            .to_owned();
        let items = if kind.ends_with("List") {
            match document.get("items") {
                Some(serde_json::Value::Array(items)) => items.clone(),
                _ => Vec::new(),
            }
        } else {
            vec![document]
        };
        for item in items {
            let kind = item
                .get("kind")
                .and_then(|k| k.as_str())
                .unwrap_or("")
                .to_owned();
            let added = view.add(&kind, item).map_err(|e| SnapshotError::Object {
                path: path.to_owned(),
                kind: kind.clone(),
                message: e.to_string(),
            })?;
            kept += usize::from(added);
        }
    }
    Ok(kept)
}
