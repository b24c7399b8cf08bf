//! YAML files, streamed: the items of a List are handed to the snapshot one
//! at a time as the parser reaches them, so `oc get pods -A -o yaml` of a
//! large cluster never exists as one tree in memory.
//!
//! serde-saphyr takes a type, not a seed, so the document type finds the
//! snapshot it fills through a thread-local slot, set only for the length
//! of one parse by [`add`].

use std::cell::RefCell;
use std::fmt;
use std::path::Path;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::{Snapshot, SnapshotError};

/// What a parse is filling, and what it has found.
struct Sink {
    snapshot: Snapshot,
    kept: usize,
    /// The first object that did not fit its kind's schema.
    misfit: Option<(String, String)>,
}

thread_local! {
    static SINK: RefCell<Option<Sink>> = const { RefCell::new(None) };
}

/// Adds the objects of one YAML file (any number of documents, Lists or
/// single objects); returns how many were kept.
pub(super) fn add(
    snapshot: &mut Snapshot,
    path: &Path,
    text: &str,
) -> Result<usize, SnapshotError> {
    let sink = Sink {
        snapshot: std::mem::take(snapshot),
        kept: 0,
        misfit: None,
    };
    SINK.with(|slot| *slot.borrow_mut() = Some(sink));
    let parsed = serde_saphyr::from_str_multiple_with_options::<Document, Vec<Document>>(
        text,
        options(text),
    );
    let Some(sink) = SINK.with(|slot| slot.borrow_mut().take()) else {
        return Err(SnapshotError::Parse {
            path: path.to_owned(),
            message: "the YAML reader lost its state".to_owned(),
        });
    };
    *snapshot = sink.snapshot;
    if let Some((kind, message)) = sink.misfit {
        return Err(SnapshotError::Object {
            path: path.to_owned(),
            kind,
            message,
        });
    }
    parsed.map_err(|e| SnapshotError::Parse {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    Ok(sink.kept)
}

/// Hands one object to the snapshot being filled.
fn deliver<E: de::Error>(object: Value) -> Result<(), E> {
    SINK.with(|slot| {
        let mut slot = slot.borrow_mut();
        let sink = slot
            .as_mut()
            .ok_or_else(|| E::custom("no snapshot is being read"))?;
        match sink.snapshot.add_value(object) {
            Ok(kept) => {
                sink.kept += usize::from(kept);
                Ok(())
            }
            Err((kind, e)) => {
                let message = e.to_string();
                sink.misfit.get_or_insert((kind.clone(), message.clone()));
                Err(E::custom(format!(
                    "a {kind} that does not match its schema: {message}"
                )))
            }
        }
    })
}

/// Marks a typed List's kind loaded, if it is in the API version the view
/// keeps.
fn mark_loaded(kind: &str, api_version: Option<&str>) {
    let Some(kind) = crate::view::kinds::kept(kind, api_version) else {
        return;
    };
    SINK.with(|slot| {
        if let Some(sink) = slot.borrow_mut().as_mut() {
            sink.snapshot.view.mark_loaded(kind);
        }
    });
}

/// One YAML document; its content goes to the sink, not into this value.
struct Document;

impl<'de> de::Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DocumentVisitor)
    }
}

struct DocumentVisitor;

impl<'de> Visitor<'de> for DocumentVisitor {
    type Value = Document;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes object or List")
    }

    /// A List streams its `items`; any other mapping is one object.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Document, A::Error> {
        let mut rest = Map::new();
        let mut list = false;
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" {
                map.next_value_seed(Items)?;
                list = true;
            } else {
                rest.insert(key, map.next_value::<Value>()?);
            }
        }
        let kind = rest.get("kind").and_then(Value::as_str).unwrap_or("");
        let api_version = rest.get("apiVersion").and_then(Value::as_str);
        match kind.strip_suffix("List") {
            Some(item_kind) => mark_loaded(item_kind, api_version),
            None if list => {}
            None => deliver(Value::Object(rest))?,
        }
        Ok(Document)
    }

    /// Documents that are not objects hold nothing to read.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Document, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Document)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Document, E> {
        Ok(Document)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Document, E> {
        Ok(Document)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Document, E> {
        Ok(Document)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Document, E> {
        Ok(Document)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Document, E> {
        Ok(Document)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Document, E> {
        Ok(Document)
    }
}

/// The `items` of a List, each delivered as soon as it is read.
struct Items;

impl<'de> DeserializeSeed<'de> for Items {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Items {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of objects")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element::<Value>()? {
            deliver(item)?;
        }
        Ok(())
    }

    /// `items: null`.
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

/// The YAML parser's limits, scaled to the file: `oc get pods -A -o yaml`
/// of a large cluster has millions of nodes, far past the defaults meant
/// for configuration files. Every node, event and scalar byte takes at
/// least one byte of input, so these bounds only stop what the file's size
/// already allows; the defaults against alias expansion stay.
fn options(text: &str) -> serde_saphyr::Options {
    let size = text.len().saturating_add(1024);
    let mut budget = serde_saphyr::Budget::default();
    budget.max_nodes = budget.max_nodes.max(size);
    budget.max_events = budget.max_events.max(size.saturating_mul(2));
    budget.max_total_scalar_bytes = budget.max_total_scalar_bytes.max(size);
    budget.max_documents = budget.max_documents.max(size / 16);
    // CRDs in a must-gather nest their schemas deeply.
    budget.max_depth = 256;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}
