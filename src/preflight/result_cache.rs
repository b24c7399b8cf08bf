//! An in-memory index of `UpdatePreflight` objects by release key, which
//! the result sources fill and the decision reads through them: shared,
//! mutable state behind a lock, so it lives with the runtime, not on the
//! pure model floor.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use crate::model::UpdatePreflight;
use crate::model::release::ReleaseKey;

/// Objects indexed by the release they describe. Several objects may describe
/// one release (one made by an administrator, one by the gate); `get` returns
/// only the gate's own, named after the release's digest, whatever the
/// others hold.
#[derive(Default)]
pub struct ResultCache {
    by_release: RwLock<HashMap<ReleaseKey, BTreeMap<String, Arc<UpdatePreflight>>>>,
}

impl ResultCache {
    /// Inserts or replaces an object.
    pub fn apply(&self, object: UpdatePreflight) {
        let name = object.metadata.name.clone().unwrap_or_default();
        let key = ReleaseKey::from_image(&object.spec.image);
        let mut map = self.by_release.write().unwrap_or_else(|e| e.into_inner());
        // The image of an object may have been edited: drop the old entry.
        for objects in map.values_mut() {
            objects.remove(&name);
        }
        map.retain(|_, objects| !objects.is_empty());
        map.entry(key).or_default().insert(name, Arc::new(object));
    }

    /// Removes an object by name.
    pub fn delete(&self, name: &str) {
        let mut map = self.by_release.write().unwrap_or_else(|e| e.into_inner());
        for objects in map.values_mut() {
            objects.remove(name);
        }
        map.retain(|_, objects| !objects.is_empty());
    }

    /// Replaces the whole content, as after a relist.
    pub fn replace(&self, objects: impl IntoIterator<Item = UpdatePreflight>) {
        let mut fresh: HashMap<ReleaseKey, BTreeMap<String, Arc<UpdatePreflight>>> = HashMap::new();
        for object in objects {
            let name = object.metadata.name.clone().unwrap_or_default();
            fresh
                .entry(ReleaseKey::from_image(&object.spec.image))
                .or_default()
                .insert(name, Arc::new(object));
        }
        *self.by_release.write().unwrap_or_else(|e| e.into_inner()) = fresh;
    }

    /// The gate's own object for a release, named after its digest
    /// (`ReleaseKey::object_name`), if the cache holds it. Other objects for
    /// the same release are requests for a run, never its result, so the
    /// newest of them does not stand in for it.
    pub fn get(&self, key: &ReleaseKey) -> Option<Arc<UpdatePreflight>> {
        let map = self.by_release.read().unwrap_or_else(|e| e.into_inner());
        map.get(key)?.get(&key.object_name()).cloned()
    }

    pub fn len(&self) -> usize {
        let map = self.by_release.read().unwrap_or_else(|e| e.into_inner());
        map.values().map(BTreeMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Phase, UpdatePreflightSpec, UpdatePreflightStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn object(name: &str, image: &str, completed: Option<&str>) -> UpdatePreflight {
        let mut o = UpdatePreflight::new(
            name,
            UpdatePreflightSpec {
                image: image.into(),
                ..Default::default()
            },
        );
        o.status = Some(UpdatePreflightStatus {
            phase: Some(Phase::Passed),
            completion_time: completed.map(|t| Time(t.parse().unwrap())),
            ..Default::default()
        });
        o
    }

    /// The gate's own object for `image`, named after its digest.
    fn own(image: &str, completed: Option<&str>) -> UpdatePreflight {
        object(
            &ReleaseKey::from_image(image).object_name(),
            image,
            completed,
        )
    }

    #[test]
    fn apply_get_delete() {
        let cache = ResultCache::default();
        let key = ReleaseKey::from_image("q.io/r@sha256:aa");
        assert!(cache.get(&key).is_none());
        cache.apply(own("q.io/r@sha256:aa", None));
        assert_eq!(
            cache.get(&key).unwrap().metadata.name.as_deref(),
            Some("release-sha256-aa")
        );
        cache.delete("release-sha256-aa");
        assert!(cache.get(&key).is_none());
        assert!(cache.is_empty());
    }

    #[test]
    fn only_the_gates_own_object_is_the_result_of_a_release() {
        let cache = ResultCache::default();
        let key = ReleaseKey::from_image("x@sha256:aa");
        // A request under another name, completed later, stands in for nothing.
        cache.apply(object(
            "manual-x7k2",
            "q.io/r@sha256:aa",
            Some("2026-02-01T00:00:00Z"),
        ));
        assert!(cache.get(&key).is_none());
        cache.apply(own(
            "mirror.local/r@sha256:aa",
            Some("2026-01-01T00:00:00Z"),
        ));
        assert_eq!(
            cache.get(&key).unwrap().metadata.name.as_deref(),
            Some("release-sha256-aa")
        );
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn editing_the_image_moves_the_object() {
        let cache = ResultCache::default();
        cache.apply(object("release-sha256-bb", "q.io/r@sha256:aa", None));
        assert!(
            cache
                .get(&ReleaseKey::from_image("q.io/r@sha256:aa"))
                .is_none(),
            "another release's name"
        );
        cache.apply(object("release-sha256-bb", "q.io/r@sha256:bb", None));
        assert!(
            cache
                .get(&ReleaseKey::from_image("q.io/r@sha256:bb"))
                .is_some()
        );
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn replace_drops_what_is_gone() {
        let cache = ResultCache::default();
        cache.apply(own("q.io/r@sha256:aa", None));
        cache.replace([own("q.io/r@sha256:bb", None)]);
        assert!(
            cache
                .get(&ReleaseKey::from_image("q.io/r@sha256:aa"))
                .is_none()
        );
        assert_eq!(cache.len(), 1);
    }
}
