//! Reading a cluster from the API server: paged lists, kept only as the
//! lean types checks read.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};

use super::view::ClusterView;

/// Page size for lists, so a large cluster is never held twice in memory.
const PAGE: u32 = 500;

/// The kinds the checks read: group, version, kind, plural.
const KINDS: &[(&str, &str, &str, &str)] = &[
    (
        "config.openshift.io",
        "v1",
        "ClusterVersion",
        "clusterversions",
    ),
    (
        "config.openshift.io",
        "v1",
        "ClusterOperator",
        "clusteroperators",
    ),
];

/// Lists every kind the checks read. A kind whose API is not served (say,
/// a plain Kubernetes cluster with no MachineConfigPools) is left empty.
pub async fn load(client: &kube::Client) -> Result<ClusterView, kube::Error> {
    let mut view = ClusterView::default();
    for (group, version, kind, plural) in KINDS {
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let mut params = ListParams::default().limit(PAGE);
        loop {
            let page = match api.list(&params).await {
                Ok(page) => page,
                Err(kube::Error::Api(e)) if e.code == 404 => break,
                Err(e) => return Err(e),
            };
            for item in page.items {
                let value = serde_json::to_value(item).map_err(kube::Error::SerdeError)?;
                view.add(kind, value).map_err(kube::Error::SerdeError)?;
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
    }
    Ok(view)
}
