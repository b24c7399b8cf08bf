//! A management cluster's snapshot (hosted control planes): its
//! HostedClusters, NodePools and the HyperShift operator's
//! `hypershift/supported-versions` ConfigMap, read from a directory of
//! `oc get -o yaml` or `-o json` output or one such file. What the
//! hosted cluster holds is read from its own snapshot; a management
//! cluster's ClusterVersion is none of the update's business, so none is
//! asked for. Live ([`read_live`]), the same objects from the API server;
//! the hosted cluster itself is read through its admin kubeconfig by
//! [`super::guest`].

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::model::hosted::{
    GROUP, HostedCluster, NodePool, SUPPORTED_VERSIONS_NAME, SUPPORTED_VERSIONS_NAMESPACE,
    SupportError, SupportedVersions,
};

/// What a management cluster's snapshot holds of hosted clusters.
#[derive(Debug)]
pub struct Management {
    pub clusters: Vec<HostedCluster>,
    pub pools: Vec<NodePool>,
    /// The operator's supported versions, or why they cannot be read.
    pub supported: Result<SupportedVersions, SupportError>,
}

/// Why a management cluster's snapshot cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ManagementError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not YAML or JSON of Kubernetes objects: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: a {kind} does not fit HyperShift's schema: {message}")]
    Object {
        path: PathBuf,
        kind: &'static str,
        message: String,
    },
    #[error("{path} holds no HostedCluster ({GROUP}): not the snapshot of a management cluster")]
    NoHostedCluster { path: PathBuf },
}

impl ManagementError {
    /// Whether what was given is not a management cluster's snapshot (a
    /// usage error), rather than a file that cannot be read at all.
    pub fn is_not_a_snapshot(&self) -> bool {
        !matches!(self, Self::Read { .. })
    }
}

/// Reads `path`: a directory (each `.yaml`, `.yml` and `.json` file under
/// it) or one file.
pub fn load(path: &Path) -> Result<Management, ManagementError> {
    let mut files = Vec::new();
    collect(path, &mut files)?;
    files.sort();
    let mut found = Found::default();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|source| ManagementError::Read {
            path: file.clone(),
            source,
        })?;
        found.add_file(file, &text)?;
    }
    if found.clusters.is_empty() {
        return Err(ManagementError::NoHostedCluster {
            path: path.to_owned(),
        });
    }
    Ok(Management {
        clusters: found.clusters,
        pools: found.pools,
        supported: found.supported.unwrap_or(Err(SupportError::Missing)),
    })
}

fn collect(path: &Path, files: &mut Vec<PathBuf>) -> Result<(), ManagementError> {
    let read_error = |source| ManagementError::Read {
        path: path.to_owned(),
        source,
    };
    if std::fs::metadata(path).map_err(read_error)?.is_file() {
        files.push(path.to_owned());
        return Ok(());
    }
    for entry in std::fs::read_dir(path).map_err(read_error)? {
        let entry = entry.map_err(read_error)?.path();
        if entry.is_dir() {
            collect(&entry, files)?;
        } else if entry
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
        {
            files.push(entry);
        }
    }
    Ok(())
}

#[derive(Default)]
struct Found {
    clusters: Vec<HostedCluster>,
    pools: Vec<NodePool>,
    supported: Option<Result<SupportedVersions, SupportError>>,
}

impl Found {
    fn add_file(&mut self, path: &Path, text: &str) -> Result<(), ManagementError> {
        let parse = |message: String| ManagementError::Parse {
            path: path.to_owned(),
            message,
        };
        let documents: Vec<Value> = if text.trim_start().starts_with('{') {
            vec![serde_json::from_str(text).map_err(|e| parse(e.to_string()))?]
        } else {
            serde_saphyr::from_str_multiple::<Value, Vec<Value>>(text)
                .map_err(|e| parse(e.to_string()))?
        };
        for document in documents {
            match document.get("items").and_then(Value::as_array) {
                Some(items) if kind(&document).ends_with("List") => {
                    for item in items {
                        self.add(path, item)?;
                    }
                }
                _ => self.add(path, &document)?,
            }
        }
        Ok(())
    }

    fn add(&mut self, path: &Path, object: &Value) -> Result<(), ManagementError> {
        let hypershift = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| v.starts_with(&format!("{GROUP}/")));
        let misfit = |kind: &'static str, e: serde_json::Error| ManagementError::Object {
            path: path.to_owned(),
            kind,
            message: e.to_string(),
        };
        match kind(object) {
            "HostedCluster" if hypershift => self.clusters.push(
                serde_json::from_value(object.clone()).map_err(|e| misfit("HostedCluster", e))?,
            ),
            "NodePool" if hypershift => self
                .pools
                .push(serde_json::from_value(object.clone()).map_err(|e| misfit("NodePool", e))?),
            "ConfigMap" => {
                let metadata = &object["metadata"];
                if metadata["namespace"] == SUPPORTED_VERSIONS_NAMESPACE
                    && metadata["name"] == SUPPORTED_VERSIONS_NAME
                {
                    let data = &object["data"];
                    self.supported = Some(SupportedVersions::from_data(
                        data["supported-versions"].as_str(),
                        data["server-version"].as_str(),
                    ));
                }
            }
            _ => {}
        }
        Ok(())
    }
}

fn kind(object: &Value) -> &str {
    object.get("kind").and_then(Value::as_str).unwrap_or("")
}

/// The management cluster's HostedClusters and NodePools in `namespace`,
/// and the operator's supported versions, from the API server.
pub async fn read_live(client: &kube::Client, namespace: &str) -> anyhow::Result<Management> {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
    let listed = |kind: &str, plural: &str| {
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(GROUP, "v1beta1", kind),
            plural,
        );
        Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource)
    };
    let list = Default::default();
    let clusters = listed("HostedCluster", "hostedclusters")
        .list(&list)
        .await?;
    let pools = listed("NodePool", "nodepools").list(&list).await?;
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), SUPPORTED_VERSIONS_NAMESPACE);
    let supported = match config_maps.get_opt(SUPPORTED_VERSIONS_NAME).await? {
        Some(cm) => {
            let data = cm.data.unwrap_or_default();
            SupportedVersions::from_data(
                data.get("supported-versions").map(String::as_str),
                data.get("server-version").map(String::as_str),
            )
        }
        None => Err(SupportError::Missing),
    };
    Ok(Management {
        clusters: typed(clusters.items, "HostedCluster")?,
        pools: typed(pools.items, "NodePool")?,
        supported,
    })
}

/// Objects read as JSON, as HyperShift's lean types.
fn typed<T: serde::de::DeserializeOwned>(
    objects: Vec<kube::api::DynamicObject>,
    kind: &str,
) -> anyhow::Result<Vec<T>> {
    objects
        .into_iter()
        .map(|o| serde_json::from_value(serde_json::to_value(o)?))
        .collect::<Result<Vec<T>, serde_json::Error>>()
        .map_err(|e| anyhow::anyhow!("a {kind} does not fit HyperShift's schema: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_and_documents_load_alike_and_the_configmap_is_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("hc.yaml"),
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: hypershift.openshift.io/v1beta1\n  kind: HostedCluster\n  metadata: {name: prod, namespace: clusters}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("rest.yaml"),
            "apiVersion: hypershift.openshift.io/v1beta1\nkind: NodePool\nmetadata: {name: workers, namespace: clusters}\nspec: {clusterName: prod}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: supported-versions, namespace: hypershift}\ndata:\n  supported-versions: '{\"versions\":[\"4.22\",\"4.21\"]}'\n",
        )
        .unwrap();
        let management = load(dir.path()).unwrap();
        assert_eq!(management.clusters[0].metadata.name, "prod");
        assert_eq!(management.pools[0].spec.cluster_name, "prod");
        assert_eq!(management.supported.unwrap().minors.len(), 2);
    }

    #[test]
    fn a_snapshot_without_a_hosted_cluster_says_so() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cm.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: y}\n",
        )
        .unwrap();
        let e = load(dir.path()).unwrap_err();
        assert!(e.is_not_a_snapshot());
        assert!(e.to_string().ends_with("holds no HostedCluster (hypershift.openshift.io): not the snapshot of a management cluster"), "{e}");
    }
}
