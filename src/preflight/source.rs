//! Results read once from a directory of files, served as they are; and
//! [`Source`], what every result source implements: the decision's lookup
//! port.

use std::path::{Path, PathBuf};

use crate::admission::ports::{Lookup, ResultLookup};
use crate::model::UpdatePreflight;
use crate::model::release::ReleaseKey;
use crate::preflight::result_cache::ResultCache;

/// A file of results that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not valid YAML or JSON: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Object { path: PathBuf, message: String },
}

/// A result source, as the decision reads it.
pub trait Source: ResultLookup {}

impl<T: ResultLookup> Source for T {}

/// Results read once from a directory of `UpdatePreflight` YAML or JSON files
/// (single objects, Lists or multi-document streams).
pub struct DirectorySource {
    cache: ResultCache,
    origin: String,
}

/// The sample results shipped in `examples/results/`, compiled in so that
/// `serve` works with no cluster and no files.
const EMBEDDED: &[(&str, &str)] = &[
    (
        "examples/results/4.15.3-failing.yaml",
        include_str!("../../examples/results/4.15.3-failing.yaml"),
    ),
    (
        "examples/results/4.14.12-passing.yaml",
        include_str!("../../examples/results/4.14.12-passing.yaml"),
    ),
];

impl DirectorySource {
    /// Reads every `*.yaml`, `*.yml` and `*.json` file of `dir`.
    pub fn load(dir: &Path) -> Result<Self, LoadError> {
        let read_err = |source| LoadError::Read {
            path: dir.to_owned(),
            source,
        };
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(read_err)?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| {
                matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("yaml" | "yml" | "json")
                )
            })
            .collect();
        paths.sort();
        let mut objects = Vec::new();
        for path in paths {
            let text = std::fs::read_to_string(&path).map_err(|source| LoadError::Read {
                path: path.clone(),
                source,
            })?;
            objects.extend(parse_objects(&path, &text)?);
        }
        Ok(Self::from_objects(objects, dir.display().to_string()))
    }

    /// The compiled-in sample results.
    pub fn embedded() -> Self {
        let objects = EMBEDDED
            .iter()
            .flat_map(|(path, text)| {
                parse_objects(Path::new(path), text).expect("embedded examples are valid")
            })
            .collect();
        Self::from_objects(objects, "embedded examples".into())
    }

    fn from_objects(objects: Vec<UpdatePreflight>, origin: String) -> Self {
        let cache = ResultCache::default();
        cache.replace(objects);
        Self { cache, origin }
    }

    pub fn len(&self) -> usize {
        self.cache.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }

    pub fn origin(&self) -> &str {
        &self.origin
    }
}

impl ResultLookup for DirectorySource {
    fn lookup(&self, key: &ReleaseKey) -> Lookup {
        Lookup::fixed(self.cache.get(key))
    }

    fn is_ready(&self) -> bool {
        true
    }

    fn runs_checks(&self) -> bool {
        false
    }
}

/// Parses the `UpdatePreflight` objects of one file.
pub(crate) fn parse_objects(path: &Path, text: &str) -> Result<Vec<UpdatePreflight>, LoadError> {
    let documents: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(text).map_err(|e| LoadError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
    let object_err = |message: String| LoadError::Object {
        path: path.to_owned(),
        message,
    };
    let mut objects = Vec::new();
    for document in documents {
        if document.is_null() {
            continue;
        }
        let items = match document.get("kind").and_then(|k| k.as_str()) {
            Some(kind) if kind.ends_with("List") => match document.get("items") {
                Some(serde_json::Value::Array(items)) => items.clone(),
                _ => return Err(object_err(format!("a {kind} without items"))),
            },
            _ => vec![document],
        };
        for item in items {
            let kind = item.get("kind").and_then(|k| k.as_str()).unwrap_or("");
            if kind != "UpdatePreflight" {
                return Err(object_err(format!(
                    "expected kind UpdatePreflight, found {:?}",
                    kind
                )));
            }
            let object: UpdatePreflight = serde_json::from_value(item)
                .map_err(|e| object_err(format!("invalid UpdatePreflight: {e}")))?;
            if object.metadata.name.as_deref().unwrap_or("").is_empty() {
                return Err(object_err(
                    "an UpdatePreflight without metadata.name".into(),
                ));
            }
            objects.push(object);
        }
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_examples_load() {
        let source = DirectorySource::embedded();
        assert!(source.len() >= 2);
        assert!(source.is_ready());
        assert!(!source.runs_checks());
    }

    #[test]
    fn reads_lists_and_multi_document_streams() {
        let text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: preflight.dev/v1alpha1\n  kind: UpdatePreflight\n  metadata: {name: a}\n  spec: {image: 'q@sha256:aa'}\n---\napiVersion: preflight.dev/v1alpha1\nkind: UpdatePreflight\nmetadata: {name: b}\nspec: {image: 'q@sha256:bb'}\n";
        let objects = parse_objects(Path::new("x.yaml"), text).unwrap();
        let names: Vec<_> = objects
            .iter()
            .map(|o| o.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["a", "b"]);
    }

    #[test]
    fn garbage_and_wrong_kinds_are_named() {
        let err = parse_objects(Path::new("g.yaml"), "{{{ not yaml").unwrap_err();
        assert!(
            err.to_string().starts_with("g.yaml is not valid YAML"),
            "{err}"
        );
        let err = parse_objects(
            Path::new("c.yaml"),
            "kind: ConfigMap\nmetadata: {name: x}\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("found \"ConfigMap\""), "{err}");
        let err = parse_objects(
            Path::new("n.yaml"),
            "kind: UpdatePreflight\nmetadata: {}\nspec: {image: x}\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("without metadata.name"), "{err}");
    }

    #[test]
    fn loads_a_directory_and_reports_the_bad_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();
        std::fs::write(
            dir.path().join("a.yaml"),
            "kind: UpdatePreflight\nmetadata: {name: release-sha256-aa}\nspec: {image: 'q@sha256:aa'}\n",
        )
        .unwrap();
        let source = DirectorySource::load(dir.path()).unwrap();
        assert_eq!(source.len(), 1);
        assert!(
            source
                .lookup(&ReleaseKey::from_image("q@sha256:aa"))
                .result
                .is_some()
        );

        std::fs::write(dir.path().join("b.json"), "[1,").unwrap();
        let err = DirectorySource::load(dir.path()).err().unwrap();
        assert!(err.to_string().contains("b.json"), "{err}");
        let missing = DirectorySource::load(&dir.path().join("nope"))
            .err()
            .unwrap();
        assert!(matches!(missing, LoadError::Read { .. }));
    }
}
