//! Where the webhook's results come from. `ResultSource` is read from memory
//! on the request path; a source may also start runs when asked.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::ResultCache;
use crate::model::UpdatePreflight;
use crate::model::release::ReleaseKey;

/// What the cache holds for one release.
#[derive(Clone, Debug, Default)]
pub struct Lookup {
    pub result: Option<Arc<UpdatePreflight>>,
    /// False when the source cannot vouch for its content, e.g. its watch has
    /// been down too long; results are then treated as stale.
    pub trusted: bool,
    /// Whether results age out (`--max-result-age`). A fixed directory is a
    /// report its operator chose to serve, so its results do not.
    pub expires: bool,
    /// The only field manager whose status writes count, where the source
    /// records who wrote status (the API server); see [`super::vouch`].
    pub status_writer: Option<&'static str>,
}

impl Lookup {
    /// A result from a source that does not change (a directory, a
    /// snapshot): always trusted, never aging out.
    pub fn fixed(result: Option<Arc<UpdatePreflight>>) -> Self {
        Self {
            result,
            trusted: true,
            expires: false,
            status_writer: None,
        }
    }
}

/// A request to run the preflight for a release.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunRequest {
    pub image: String,
    pub version: Option<String>,
    /// The name of an object that already describes the release.
    pub existing: Option<String>,
}

/// Results for the webhook. `lookup` must answer from memory.
pub trait ResultSource: Send + Sync + 'static {
    fn lookup(&self, key: &ReleaseKey) -> Lookup;
    /// True once the source has loaded or synced its content.
    fn is_ready(&self) -> bool;
    /// Whether `request_run` starts a run (a fixed directory cannot).
    fn runs_on_miss(&self) -> bool;
    /// Whether a review may ask for a run of `key`: in a cluster, only for
    /// releases the ClusterVersion's update graph offers, as its watch says.
    /// Anything else is run only when someone allowed to create
    /// UpdatePreflights asks for it. Answered from memory.
    fn may_run(&self, _key: &ReleaseKey) -> bool {
        true
    }
    /// Starts a run in the background; never blocks the caller.
    fn request_run(&self, request: RunRequest);
}

/// A file of results that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not valid YAML or JSON: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Object { path: PathBuf, message: String },
}

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

impl ResultSource for DirectorySource {
    fn lookup(&self, key: &ReleaseKey) -> Lookup {
        Lookup::fixed(self.cache.get(key))
    }

    fn is_ready(&self) -> bool {
        true
    }

    fn runs_on_miss(&self) -> bool {
        false
    }

    fn request_run(&self, request: RunRequest) {
        tracing::info!(image = %request.image, origin = %self.origin,
            "no run started: results come from a fixed directory");
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
        assert!(!source.runs_on_miss());
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
