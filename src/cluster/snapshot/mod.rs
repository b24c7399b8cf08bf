//! Reading a cluster from a snapshot: `oc get -o yaml` output (Lists or
//! single objects, YAML or JSON, several documents per file) or a
//! must-gather, as a directory searched recursively or as a `.tar`,
//! `.tar.gz` or `.tar.xz` archive read as a stream, plus alerts in
//! Prometheus' `/api/v1/alerts` format (`alerts.json`) or the
//! `/api/v1/rules` format a must-gather stores (`monitoring/alerts.json`
//! in 4.6 to 4.8, `monitoring/prometheus/rules.json` since 4.9).
//!
//! Every object is matched by kind and API version (see
//! [`kinds`](mod@crate::view::kinds)); the rest are counted by kind and left
//! out. The data's own time is the must-gather's `timestamp` file, else
//! the newest time the ClusterVersion and ClusterOperators record
//! (`ClusterView::time_of_the_data`). Two ClusterVersions of
//! different clusters, or two must-gathers, in one snapshot are an error.
//!
//! JSON is read without building a tree of the whole file: each List item
//! is deserialized straight into its lean type, which is what lets a
//! snapshot of 150,000 pods load in well under a second. An object met
//! twice (a must-gather holds pods both in `core/pods.yaml` and one file
//! per pod) is kept once.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::Deserialize;
use serde_json::value::RawValue;

pub mod sample;
mod yaml;

use crate::view::alerts::read_alert_file;
use crate::view::kinds::{self, Kind};
use crate::view::{AsOf, ClusterView};

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("cannot read {path}")]
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
    /// The snapshot mixes clusters, or must-gathers: no verdict can be
    /// trusted, whichever files were read first.
    #[error("{path} holds {what}: {first} and {second}; give the snapshot of one cluster")]
    Mixed {
        path: PathBuf,
        what: &'static str,
        first: String,
        second: String,
    },
    /// The same object in two captures (two folders, neither inside the
    /// other, not of one must-gather): which copy wins would depend on the
    /// folders' names, so no verdict can be trusted.
    #[error(
        "{path} holds two captures: {object} is both in {first} and in {second}; give the snapshot of one capture"
    )]
    Duplicate {
        path: PathBuf,
        object: String,
        first: PathBuf,
        second: PathBuf,
    },
    /// No ClusterVersion: not the snapshot of a cluster that can be
    /// updated, whatever else it holds.
    #[error(
        "{path} holds no ClusterVersion (config.openshift.io/v1), so there is no cluster to judge; give a must-gather or add `oc get clusterversion version -o yaml`"
    )]
    NoClusterVersion { path: PathBuf },
    /// An archive whose stream breaks off or does not decompress: cut
    /// short by a copy, or damaged.
    #[error("{path} is a truncated or corrupt archive: it breaks off after {files} entries")]
    Corrupt { path: PathBuf, files: usize },
    /// A file named or compressed as an archive that holds no tar: a
    /// report, a log, a single YAML file compressed on its own.
    #[error("{path} is not a tar archive: {why}")]
    NotTar { path: PathBuf, why: &'static str },
}

impl SnapshotError {
    /// Whether what was given is not the snapshot of one cluster (broken,
    /// empty, truncated, not an archive, no cluster or two): a usage error,
    /// never a verdict. Only a file that cannot be read at all is not.
    pub(crate) fn is_not_a_snapshot(&self) -> bool {
        !matches!(self, Self::Read { .. })
    }
}

/// The file name of alerts in a snapshot (either format).
pub(crate) const ALERTS_FILE: &str = "alerts.json";
/// The file name of a 4.9+ must-gather's alerting rules and their alerts.
pub const RULES_FILE: &str = "rules.json";
/// The file `oc adm must-gather` writes the time it started and ended into.
pub(crate) const TIMESTAMP_FILE: &str = "timestamp";

/// Loads every object of a kind the checks read from `path`: a directory,
/// a tar archive (plain, gzip or xz) or a single YAML or JSON file. A
/// snapshot without a ClusterVersion, or with one object in two captures,
/// is an error naming it.
pub fn load(path: &Path) -> Result<ClusterView, SnapshotError> {
    let view = read(path)?;
    if view.cluster_version.is_none() {
        return Err(SnapshotError::NoClusterVersion {
            path: path.to_owned(),
        });
    }
    Ok(view)
}

fn read(path: &Path) -> Result<ClusterView, SnapshotError> {
    let read_error = |source| SnapshotError::Read {
        path: path.to_owned(),
        source,
    };
    let metadata = std::fs::metadata(path).map_err(read_error)?;
    if metadata.is_file() {
        return if wanted(path) {
            let text = std::fs::read_to_string(path).map_err(read_error)?;
            let mut snapshot = Snapshot::default();
            snapshot.add_file(path, &text)?;
            snapshot.complete(path)
        } else {
            load_archive(path)
        };
    }
    let mut files = Vec::new();
    collect(path, &mut files)?;
    files.sort();
    let mut snapshot = Snapshot::default();
    let listed: HashSet<PathBuf> = files.iter().cloned().collect();
    for file in &files {
        if let Some(resource) = unread(file, |list| listed.contains(list)) {
            *snapshot.view.unread_files.entry(resource).or_default() += 1;
            continue;
        }
        let text = std::fs::read_to_string(file).map_err(|source| SnapshotError::Read {
            path: file.to_owned(),
            source,
        })?;
        snapshot.add_file(file, &text)?;
    }
    snapshot.complete(path)
}

/// Loads a must-gather archive, one entry at a time: `.tar`, `.tar.gz`
/// (`.tgz`) or `.tar.xz`, told apart by their first bytes.
fn load_archive(path: &Path) -> Result<ClusterView, SnapshotError> {
    let read_error = |source| SnapshotError::Read {
        path: path.to_owned(),
        source,
    };
    let mut file = BufReader::new(std::fs::File::open(path).map_err(read_error)?);
    let magic = std::io::BufRead::fill_buf(&mut file).map_err(read_error)?;
    let stream: Box<dyn Read> = if magic.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::bufread::MultiGzDecoder::new(file))
    } else if magic.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Box::new(xz2::bufread::XzDecoder::new_multi_decoder(file))
    } else if magic.len() > 262 && &magic[257..262] == b"ustar" {
        Box::new(file)
    } else if named_as_archive(path) {
        return Err(SnapshotError::NotTar {
            path: path.to_owned(),
            why: "it is neither a tar nor gzip- or xz-compressed",
        });
    } else {
        return Err(SnapshotError::Parse {
            path: path.to_owned(),
            message:
                "neither a directory, a YAML or JSON file, nor a .tar, .tar.gz or .tar.xz archive"
                    .to_owned(),
        });
    };
    // Past the first bytes, a read that fails is the archive's fault: the
    // decompressor's or tar's words ("incomplete deflate stream") tell a
    // person less than this.
    let corrupt = |files| SnapshotError::Corrupt {
        path: path.to_owned(),
        files,
    };
    // A compressed file is a tar only if it decompresses to one: its first
    // header names the `ustar` format (POSIX and GNU tar, and Go's, which
    // `oc` uses, all write it). A whole stream shorter than a header is no
    // tar either; one that breaks off before it is truncated.
    let mut head = Vec::with_capacity(TAR_HEADER);
    let stream = {
        let mut stream = stream;
        (&mut stream)
            .take(TAR_HEADER as u64)
            .read_to_end(&mut head)
            .map_err(|_| corrupt(0))?;
        if head.len() < TAR_HEADER || &head[257..262] != b"ustar" {
            return Err(SnapshotError::NotTar {
                path: path.to_owned(),
                why: "it decompresses to something else",
            });
        }
        std::io::Cursor::new(head).chain(stream)
    };
    let mut archive = tar::Archive::new(stream);
    let mut snapshot = Snapshot::default();
    let entries = archive.entries().map_err(|_| corrupt(0))?;
    let mut lists_read = HashSet::new();
    for (files, entry) in entries.enumerate() {
        let mut entry = entry.map_err(|_| corrupt(files))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let inner = path.join(entry.path().map_err(read_error)?);
        if !wanted(&inner) {
            continue;
        }
        // Entries come in any order: a pod's own file met before its
        // namespace's list is read, and kept once with it.
        if let Some(resource) = unread(&inner, |list| lists_read.contains(list)) {
            *snapshot.view.unread_files.entry(resource).or_default() += 1;
            continue;
        }
        if inner.ends_with("core/pods.yaml") {
            lists_read.insert(inner.clone());
        }
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).map_err(|_| corrupt(files))?;
        let text = String::from_utf8(bytes).map_err(|_| SnapshotError::Parse {
            path: inner.clone(),
            message: "not UTF-8 text".to_owned(),
        })?;
        snapshot.add_file(&inner, &text)?;
    }
    snapshot.complete(path)
}

/// Loads a snapshot held in memory as `(file name, text)` pairs, such as
/// the sample compiled into the binary.
pub(crate) fn load_files(files: &[(&str, &str)]) -> Result<ClusterView, SnapshotError> {
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
    /// Hashes of (kind, namespace, name), each with the file (in `files`)
    /// it was first met in: a 64-bit hash is enough to tell millions of
    /// objects apart, at a fraction of the memory of the names.
    seen: HashMap<u64, u32>,
    /// The files read, in order; the last is the one being read.
    files: Vec<PathBuf>,
    /// Objects met again in another capture's folder: the object, and the
    /// files (in `files`) it was met in. A few are enough to tell.
    duplicates: Vec<(String, u32, u32)>,
    kept: usize,
    /// The file the ClusterVersion came from.
    cluster_version_file: Option<PathBuf>,
    /// Each must-gather `timestamp` file, and the time it ends with.
    timestamps: Vec<(PathBuf, Timestamp)>,
    /// How many files alerts were read from.
    alert_files: usize,
}

impl Snapshot {
    /// The view of a snapshot read from `path`, or the first thing that
    /// makes it none: no object at all, no ClusterVersion (a directory of
    /// manifests is that before it is two captures), one object in two
    /// captures, two must-gathers.
    fn complete(self, path: &Path) -> Result<ClusterView, SnapshotError> {
        if self.kept > 0 && self.view.cluster_version.is_none() {
            return Err(SnapshotError::NoClusterVersion {
                path: path.to_owned(),
            });
        }
        self.one_capture(path)?;
        self.finish(path)
    }

    /// The view, or an error naming `path` if it holds no object at all
    /// or more than one must-gather.
    pub fn finish(mut self, path: &Path) -> Result<ClusterView, SnapshotError> {
        if self.kept == 0 {
            return Err(SnapshotError::Empty {
                path: path.to_owned(),
            });
        }
        let mut stamps = self.timestamps.iter();
        if let Some((first, time)) = stamps.next() {
            let first_dir = first.parent().unwrap_or(Path::new(""));
            if let Some((second, _)) = stamps.find(|(p, _)| {
                let dir = p.parent().unwrap_or(Path::new(""));
                !dir.starts_with(first_dir) && !first_dir.starts_with(dir)
            }) {
                return Err(SnapshotError::Mixed {
                    path: path.to_owned(),
                    what: "two must-gathers",
                    first: first.display().to_string(),
                    second: second.display().to_string(),
                });
            }
            let newest = self
                .timestamps
                .iter()
                .map(|(_, t)| *t)
                .max()
                .unwrap_or(*time);
            self.view.as_of = Some(AsOf {
                disagreement: self.view.clocks_past(newest),
                ..AsOf::new(newest, "the must-gather's timestamp file")
            });
        } else {
            self.view.as_of = self.view.time_of_the_data();
        }
        // The same alerts read from more than one file (a must-gather's
        // rules and an alerts.json beside it) count once; one file is
        // taken as it is.
        if let Some(alerts) = self.view.alerts.as_mut().filter(|_| self.alert_files > 1) {
            crate::view::alerts::dedup(alerts);
        }
        Ok(self.view)
    }

    /// The object's kind, if it is one the view keeps, met for the first
    /// time; objects of other kinds or API versions are counted as skipped.
    /// ClusterVersions are always handed on, so that two of different
    /// clusters are seen.
    fn admit(
        &mut self,
        kind: &str,
        api_version: Option<&str>,
        namespace: &str,
        name: &str,
    ) -> Option<&'static Kind> {
        if kind.is_empty() {
            return None;
        }
        let Some(kept) = kinds::kept(kind, api_version) else {
            self.view.skip(kind, api_version);
            return None;
        };
        let first = self.first_time(kind, namespace, name);
        (*kept == kinds::CLUSTER_VERSION || first).then_some(kept)
    }

    /// Whether the object is met for the first time; objects without a
    /// name are always new. An object met again in another capture's
    /// folder is noted for [`Self::one_capture`].
    fn first_time(&mut self, kind: &str, namespace: &str, name: &str) -> bool {
        use std::collections::hash_map::Entry;
        use std::hash::{Hash, Hasher};
        if name.is_empty() {
            return true;
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (kind, namespace, name).hash(&mut hasher);
        let file = u32::try_from(self.files.len().saturating_sub(1)).unwrap_or(u32::MAX);
        match self.seen.entry(hasher.finish()) {
            Entry::Vacant(entry) => {
                entry.insert(file);
                true
            }
            Entry::Occupied(entry) => {
                let first = *entry.get();
                if self.duplicates.len() < MAX_DUPLICATES_NOTED
                    && let (Some(a), Some(b)) = (
                        self.files.get(first as usize),
                        self.files.get(file as usize),
                    )
                    && apart(&capture_root(a), &capture_root(b))
                {
                    let object = match namespace {
                        "" => format!("{kind} {name}"),
                        ns => format!("{kind} {ns}/{name}"),
                    };
                    self.duplicates.push((object, first, file));
                }
                false
            }
        }
    }

    /// An error naming `path` if one object was met in two captures:
    /// two folders neither of which holds the other, unless both are in
    /// one must-gather (a must-gather run with several images writes one
    /// folder per image beside one `timestamp` file).
    pub(crate) fn one_capture(&self, path: &Path) -> Result<(), SnapshotError> {
        let must_gather = |file: &Path| {
            self.timestamps
                .iter()
                .filter_map(|(stamp, _)| stamp.parent())
                .find(|dir| file.starts_with(dir))
                .map(Path::to_path_buf)
        };
        for (object, first, second) in &self.duplicates {
            let (first, second) = (&self.files[*first as usize], &self.files[*second as usize]);
            let one_must_gather =
                must_gather(first).is_some_and(|a| must_gather(second) == Some(a));
            if !one_must_gather {
                return Err(SnapshotError::Duplicate {
                    path: path.to_owned(),
                    object: object.clone(),
                    first: first.clone(),
                    second: second.clone(),
                });
            }
        }
        Ok(())
    }

    /// Adds the objects of one file; returns how many were kept (alerts
    /// count as one).
    pub fn add_file(&mut self, path: &Path, text: &str) -> Result<usize, SnapshotError> {
        self.files.push(path.to_owned());
        let kept = add_file(self, path, text)?;
        self.kept += kept;
        if self.view.cluster_version.is_some() && self.cluster_version_file.is_none() {
            self.cluster_version_file = Some(path.to_owned());
        }
        if let Some(other) = &self.view.other_cluster_version {
            let first = self
                .view
                .cluster_version
                .as_ref()
                .map(describe)
                .unwrap_or_default();
            let file = self
                .cluster_version_file
                .as_deref()
                .unwrap_or(Path::new("?"))
                .display()
                .to_string();
            return Err(SnapshotError::Mixed {
                path: path.to_owned(),
                what: "two clusters",
                first: format!("{first} from {file}"),
                second: format!("{} from {}", describe(other), path.display()),
            });
        }
        Ok(kept)
    }
}

/// How many objects met in two captures are noted.
const MAX_DUPLICATES_NOTED: usize = 16;

/// The folder of the capture a file belongs to: in the must-gather layout
/// the folder that holds `cluster-scoped-resources` or `namespaces`, else
/// the file's own folder.
fn capture_root(file: &Path) -> PathBuf {
    let parts: Vec<_> = file.components().collect();
    let layout = parts.iter().rposition(|c| {
        matches!(
            c.as_os_str().to_str(),
            Some("cluster-scoped-resources" | "namespaces")
        )
    });
    match layout {
        Some(i) => parts[..i].iter().collect(),
        None => file.parent().map(Path::to_path_buf).unwrap_or_default(),
    }
}

/// Whether two capture folders are apart: neither holds the other.
fn apart(a: &Path, b: &Path) -> bool {
    !a.starts_with(b) && !b.starts_with(a)
}

/// A ClusterVersion as the error about two clusters names it.
fn describe(cv: &crate::model::ClusterVersion) -> String {
    format!(
        "the ClusterVersion {} of cluster {} at {}",
        cv.metadata.name,
        cv.spec.cluster_id.as_deref().unwrap_or("(no clusterID)"),
        if cv.status.desired.version.is_empty() {
            "an unknown version"
        } else {
            &cv.status.desired.version
        }
    )
}

/// The size of a tar header block.
const TAR_HEADER: usize = 512;

/// Whether a file's name says it is a tar archive, compressed or not.
fn named_as_archive(path: &Path) -> bool {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    [".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz"]
        .iter()
        .any(|ext| name.ends_with(ext))
}

/// Whether a file may hold objects, alerts or the must-gather's time.
fn wanted(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()) == Some(TIMESTAMP_FILE)
        || matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        )
}

/// Whether a file in the must-gather layout need not be opened, and if so
/// which resource it holds (`events (core)`): a resource no check reads,
/// ConfigMaps of other namespaces than the ones checks read, or a pod's
/// own file (`namespaces/<ns>/pods/<pod>/<pod>.yaml`) beside its
/// namespace's `core/pods.yaml` (`has` tells whether a path is in the
/// snapshot). Parsing YAML is what loading costs; this keeps it to what
/// the checks read. Files outside the layout are always read.
fn unread(path: &Path, has: impl Fn(&Path) -> bool) -> Option<String> {
    let parts: Vec<&str> = path
        .components()
        .filter_map(|c| c.as_os_str().to_str())
        .collect();
    let stem = |name: &str| {
        Path::new(name)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("")
            .to_owned()
    };
    // The files of the kinds the view keeps; ConfigMaps only in the
    // namespaces of those it keeps (below).
    let is_kept = |group: &str, resource: &str| {
        kinds::ALL
            .iter()
            .any(|k| k.must_gather_group() == group && k.plural == resource)
    };
    if let Some(i) = parts.iter().rposition(|p| *p == "cluster-scoped-resources")
        && let [group, resource, _name] = &parts[i + 1..]
    {
        return (!is_kept(group, resource)).then(|| format!("{resource} ({group})"));
    }
    let i = parts.iter().rposition(|p| *p == "namespaces")?;
    match &parts[i + 1..] {
        [namespace, "pods", pod, file] if stem(file) == *pod => {
            let list: PathBuf = parts[..=i]
                .iter()
                .chain([namespace, &"core", &"pods.yaml"])
                .collect();
            has(&list).then(|| "pods (core), one file per pod beside the list".to_owned())
        }
        [namespace, group, file] => {
            let resource = stem(file);
            let config_maps = kinds::CONFIG_MAP;
            let wanted = is_kept(group, &resource)
                && (resource != config_maps.plural
                    || config_maps
                        .listings
                        .iter()
                        .any(|l| l.namespace == Some(namespace)));
            (!wanted).then(|| format!("{resource} ({group})"))
        }
        _ => None,
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
        } else if wanted(&path) {
            files.push(path);
        }
    }
    Ok(())
}

/// Reads a must-gather's `timestamp` file: one line when it started and
/// one when it ended, as Go prints a time
/// (`2021-06-10 12:59:49.123456789 +0000 UTC m=+0.1`); RFC 3339 is taken
/// too. The last time in the file is the data's.
pub(crate) fn parse_timestamp_file(text: &str) -> Option<Timestamp> {
    text.lines().filter_map(parse_time_line).next_back()
}

fn parse_time_line(line: &str) -> Option<Timestamp> {
    let line = line.trim();
    if let Ok(t) = line.parse::<Timestamp>() {
        return Some(t);
    }
    let mut words = line.split_whitespace();
    let (date, time, offset) = (words.next()?, words.next()?, words.next()?);
    let text = format!("{date} {time} {offset}");
    jiff::fmt::strtime::parse("%Y-%m-%d %H:%M:%S%.f %z", &text)
        .ok()?
        .to_timestamp()
        .ok()
}

fn add_file(snapshot: &mut Snapshot, path: &Path, text: &str) -> Result<usize, SnapshotError> {
    let parse_error = |message: String| SnapshotError::Parse {
        path: path.to_owned(),
        message,
    };
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name == TIMESTAMP_FILE {
        let time = parse_timestamp_file(text).ok_or_else(|| {
            parse_error("not a must-gather timestamp file: no time in it".to_owned())
        })?;
        snapshot.timestamps.push((path.to_owned(), time));
        return Ok(0);
    }
    if name == ALERTS_FILE || name == RULES_FILE {
        match read_alert_file(text) {
            Ok(file) => {
                snapshot.view.saw_elsewhere("alert", file.newest);
                snapshot.view.add_alerts(file.alerts);
                snapshot.alert_files += 1;
                return Ok(1);
            }
            Err(message) if name == ALERTS_FILE => return Err(parse_error(message)),
            // Some other rules.json: read it as objects.
            Err(_) => {}
        }
    }
    if text.trim_start().starts_with('{') {
        return add_json(snapshot, path, text);
    }
    yaml::add(snapshot, path, text)
}

fn str_of(value: Option<&serde_json::Value>) -> &str {
    value.and_then(|v| v.as_str()).unwrap_or("")
}

impl Snapshot {
    /// Adds one object given as a tree, unless it is of a kind the view
    /// does not keep or was met before; returns whether it was kept, or
    /// its kind and why it does not fit.
    fn add_value(&mut self, item: serde_json::Value) -> Result<bool, (String, serde_json::Error)> {
        let kind = str_of(item.get("kind")).to_owned();
        let api_version = item.get("apiVersion").and_then(|v| v.as_str());
        let metadata = item.get("metadata");
        let namespace = str_of(metadata.and_then(|m| m.get("namespace")));
        let name = str_of(metadata.and_then(|m| m.get("name")));
        let admitted = {
            let (api_version, namespace, name) = (
                api_version.map(str::to_owned),
                namespace.to_owned(),
                name.to_owned(),
            );
            self.admit(&kind, api_version.as_deref(), &namespace, &name)
        };
        let Some(kept) = admitted else {
            return Ok(false);
        };
        self.view.add(kept, item).map_err(|e| (kind, e))
    }
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
    #[serde(default, borrow, rename = "apiVersion")]
    api_version: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    items: Option<Vec<&'a RawValue>>,
}

/// The kind and identity of an object.
#[derive(Deserialize)]
struct Identity<'a> {
    #[serde(default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow, rename = "apiVersion")]
    api_version: Option<Cow<'a, str>>,
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
    let api_version = head.api_version.as_deref();
    let Some(item_kind) = kind.strip_suffix("List") else {
        return add_json_object(snapshot, path, text, ("", None));
    };
    // A typed List (`NodeList`) names its items' kind and API version,
    // which the API server leaves out of each item.
    let defaults = if item_kind.is_empty() {
        ("", None)
    } else {
        (item_kind, api_version)
    };
    if let Some(items) = kinds::kept(item_kind, api_version) {
        snapshot.view.mark_loaded(items);
    }
    let mut kept = 0;
    for item in head.items.unwrap_or_default() {
        kept += add_json_object(snapshot, path, item.get(), defaults)?;
    }
    Ok(kept)
}

/// Adds one JSON object; `defaults` are the kind and API version of a typed
/// List's items.
fn add_json_object(
    snapshot: &mut Snapshot,
    path: &Path,
    text: &str,
    defaults: (&str, Option<&str>),
) -> Result<usize, SnapshotError> {
    let id: Identity = serde_json::from_str(text).map_err(|e| object_error(path, defaults.0, e))?;
    let kind = id.kind.as_deref().unwrap_or(defaults.0);
    let api_version = id.api_version.as_deref().or(defaults.1);
    let names = id.metadata.unwrap_or_default();
    let Some(admitted) = snapshot.admit(
        kind,
        api_version,
        names.namespace.as_deref().unwrap_or(""),
        names.name.as_deref().unwrap_or(""),
    ) else {
        return Ok(0);
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let kept = snapshot
        .view
        .add_from(admitted, &mut de)
        .map_err(|e| object_error(path, kind, e))?;
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
        assert!(view.has(&kinds::POD_DISRUPTION_BUDGET) && view.has(&kinds::POD));
        assert!(!view.has(&kinds::MACHINE_CONFIG_POOL));
    }

    #[test]
    fn kinds_are_matched_by_api_group_and_typed_list_items_take_the_lists() {
        let nodes = r#"{"apiVersion":"v1","kind":"NodeList","items":[{"metadata":{"name":"a"}}]}"#;
        let config = "apiVersion: config.openshift.io/v1\nkind: Node\nmetadata: {name: cluster}\nspec: {cgroupMode: v2}\n";
        let other = r#"{"apiVersion":"example.com/v1","kind":"NodeList","items":[{"metadata":{"name":"b"}}]}"#;
        let mut snapshot = Snapshot::default();
        assert_eq!(
            snapshot.add_file(Path::new("nodes.json"), nodes).unwrap(),
            1
        );
        assert_eq!(
            snapshot
                .add_file(Path::new("cluster.yaml"), config)
                .unwrap(),
            0
        );
        assert_eq!(
            snapshot.add_file(Path::new("other.json"), other).unwrap(),
            0
        );
        let view = snapshot.finish(Path::new(".")).unwrap();
        assert_eq!(view.nodes.len(), 1);
        assert_eq!(view.skipped["Node (config.openshift.io/v1)"], 1);
        assert_eq!(view.skipped["Node (example.com/v1)"], 1);
    }

    #[rstest::rstest]
    #[case::go_time(
        "2021-06-10 12:57:49.123456789 +0000 UTC m=+0.041893711\n2021-06-10 12:59:49.5 +0200 CEST m=+120.2\n",
        Some("2021-06-10T10:59:49.5Z")
    )]
    #[case::rfc3339("2021-06-10T12:59:49Z\n", Some("2021-06-10T12:59:49Z"))]
    #[case::nothing("started\n", None)]
    fn timestamp_files(#[case] text: &str, #[case] time: Option<&str>) {
        assert_eq!(
            parse_timestamp_file(text),
            time.map(|t| t.parse::<Timestamp>().unwrap())
        );
    }

    #[rstest::rstest]
    #[case::events("mg/img/namespaces/shop/core/events.yaml", Some("events (core)"))]
    #[case::pods("mg/img/namespaces/shop/core/pods.yaml", None)]
    #[case::config_node(
        "mg/img/cluster-scoped-resources/config.openshift.io/nodes/cluster.yaml",
        Some("nodes (config.openshift.io)")
    )]
    #[case::nodes("mg/img/cluster-scoped-resources/core/nodes/master-0.yaml", None)]
    #[case::other_configmaps(
        "mg/img/namespaces/shop/core/configmaps.yaml",
        Some("configmaps (core)")
    )]
    #[case::admin_acks("mg/img/namespaces/openshift-config/core/configmaps.yaml", None)]
    #[case::pod_beside_its_list(
        "mg/img/namespaces/shop/pods/db-0/db-0.yaml",
        Some("pods (core), one file per pod beside the list")
    )]
    #[case::pod_without_a_list("mg/img/namespaces/staging/pods/db-0/db-0.yaml", None)]
    #[case::outside_the_layout("snapshot/events.yaml", None)]
    fn must_gather_files_no_check_reads_are_not_opened(
        #[case] path: &str,
        #[case] unread_as: Option<&str>,
    ) {
        let has = |p: &Path| p == Path::new("mg/img/namespaces/shop/core/pods.yaml");
        assert_eq!(unread(Path::new(path), has).as_deref(), unread_as);
    }

    #[test]
    fn the_data_is_judged_at_its_newest_timestamp_without_a_timestamp_file() {
        let node = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"},"status":{"conditions":[
            {"type":"Ready","status":"True","lastTransitionTime":"2024-01-01T00:00:00Z","lastHeartbeatTime":"2024-02-07T16:31:00Z"}]}}"#;
        let mut snapshot = Snapshot::default();
        snapshot.add_file(Path::new("node.json"), node).unwrap();
        let view = snapshot.finish(Path::new(".")).unwrap();
        let as_of = view.as_of.unwrap();
        assert_eq!(
            as_of.time,
            "2024-02-07T16:31:00Z".parse::<Timestamp>().unwrap()
        );
        assert_eq!(as_of.found_by, "the newest timestamp in the data");
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

    /// One object in two captures is an error; met twice within one
    /// capture (a pod's own file beside its list, two images of one
    /// must-gather, one folder inside another) it is kept once.
    #[rstest::rstest]
    #[case::two_folders(&["a/pods.json", "b/pods.json"], &[], true)]
    #[case::two_must_gathers_unstamped(&["mg1/img/namespaces/shop/core/pods.json", "mg2/img/namespaces/shop/core/pods.json"], &[], true)]
    #[case::a_pods_own_file(&["mg/img/namespaces/shop/core/pods.json", "mg/img/namespaces/shop/pods/db-0/db-0.json"], &[], false)]
    #[case::two_images_of_one_must_gather(&["mg/img1/namespaces/shop/core/pods.json", "mg/img2/namespaces/shop/core/pods.json"], &["mg/timestamp"], false)]
    #[case::one_folder_inside_another(&["snap/pods.json", "snap/more/pods.json"], &[], false)]
    #[case::one_file_twice(&["snap/pods.json", "snap/pods.json"], &[], false)]
    fn one_object_in_two_captures(
        #[case] files: &[&str],
        #[case] stamps: &[&str],
        #[case] error: bool,
    ) {
        let pod = r#"{"kind":"Pod","metadata":{"name":"db-0","namespace":"shop"}}"#;
        let mut snapshot = Snapshot::default();
        for stamp in stamps {
            snapshot
                .add_file(Path::new(stamp), "2024-01-01T00:00:00Z\n")
                .unwrap();
        }
        for file in files {
            snapshot.add_file(Path::new(file), pod).unwrap();
        }
        match snapshot.one_capture(Path::new("snap")) {
            Ok(()) => assert!(!error),
            Err(e) => {
                assert!(error, "{e}");
                let e = e.to_string();
                assert!(
                    e.starts_with("snap holds two captures: Pod shop/db-0 is both in")
                        && e.contains(files[0])
                        && e.contains(files[1]),
                    "{e}"
                );
            }
        }
    }

    #[test]
    fn yaml_is_streamed_and_judged_like_json() {
        let mut snapshot = Snapshot::default();
        let yaml = "kind: NodeList\nitems: null\n---\njust a string\n---\n- a\n- b\n---\nkind: PodDisruptionBudgetList\n";
        assert_eq!(snapshot.add_file(Path::new("odd.yaml"), yaml).unwrap(), 0);
        assert!(
            snapshot.view.has(&kinds::NODE) && snapshot.view.has(&kinds::POD_DISRUPTION_BUDGET)
        );
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
