//! Reading a cluster from the API server: paged lists of every kind in
//! [`SOURCES`], each page reduced to the lean types checks read before the
//! next is fetched, so a large cluster is never held whole in memory.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};

use super::view::ClusterView;

/// Page size for lists.
const PAGE: u32 = 500;

/// One list the live loader makes.
#[derive(Clone, Copy, Debug)]
pub struct Source {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    /// Limit the list to one namespace.
    pub namespace: Option<&'static str>,
    /// A field selector, so the API server filters (by name, type, phase).
    pub fields: Option<&'static str>,
}

const fn source(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
) -> Source {
    Source {
        group,
        version,
        kind,
        plural,
        namespace: None,
        fields: None,
    }
}

/// Everything the checks read, and how it is listed.
pub const SOURCES: &[Source] = &[
    source(
        "config.openshift.io",
        "v1",
        "ClusterVersion",
        "clusterversions",
    ),
    source(
        "config.openshift.io",
        "v1",
        "ClusterOperator",
        "clusteroperators",
    ),
    source(
        "config.openshift.io",
        "v1",
        "Infrastructure",
        "infrastructures",
    ),
    source("", "v1", "Node", "nodes"),
    Source {
        fields: Some("status.phase!=Succeeded,status.phase!=Failed"),
        ..source("", "v1", "Pod", "pods")
    },
    source(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
    ),
    source(
        "machineconfiguration.openshift.io",
        "v1",
        "MachineConfigPool",
        "machineconfigpools",
    ),
    source(
        "apiserver.openshift.io",
        "v1",
        "APIRequestCount",
        "apirequestcounts",
    ),
    Source {
        namespace: Some("openshift-config-managed"),
        fields: Some("metadata.name=admin-gates"),
        ..source("", "v1", "ConfigMap", "configmaps")
    },
    Source {
        namespace: Some("openshift-config"),
        fields: Some("metadata.name=admin-acks"),
        ..source("", "v1", "ConfigMap", "configmaps")
    },
    Source {
        fields: Some("type=kubernetes.io/tls"),
        ..source("", "v1", "Secret", "secrets")
    },
    Source {
        namespace: Some("openshift-ingress-operator"),
        ..source(
            "operator.openshift.io",
            "v1",
            "IngressController",
            "ingresscontrollers",
        )
    },
    source(
        "operators.coreos.com",
        "v1alpha1",
        "ClusterServiceVersion",
        "clusterserviceversions",
    ),
];

/// What the live source reads beyond the cluster's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reads {
    /// `kubernetes.io/tls` Secrets in every namespace, for the certificate
    /// checks. The gate reads them only when an administrator opts in
    /// (`--read-tls-secrets`, with `deploy/components/tls-secrets`): the
    /// grant can read every Secret.
    pub tls_secrets: bool,
}

impl Reads {
    /// Everything: `preflight-gate check` against a cluster, with the
    /// caller's own rights.
    pub const ALL: Reads = Reads { tls_secrets: true };
}

/// Why the certificate checks have no data when TLS Secrets are not read.
pub(crate) const TLS_SECRETS_WITHHELD: &str = "TLS Secrets are not read: the gate runs without --read-tls-secrets (docs/install.md, \"The sensitive grant: Secrets\")";

/// Lists every kind the checks read. A kind whose API is not served (say,
/// a plain Kubernetes cluster with no MachineConfigPools) is left out of
/// `ClusterView::loaded`, and one the client may not list is recorded in
/// `ClusterView::unreadable`, so checks that need it say so.
pub async fn load(client: &kube::Client, reads: Reads) -> Result<ClusterView, kube::Error> {
    load_with_progress(client, reads, |_, _| {}).await
}

/// [`load`], calling `progress(kind, objects so far)` after every page.
pub(crate) async fn load_with_progress(
    client: &kube::Client,
    reads: Reads,
    mut progress: impl FnMut(&str, usize),
) -> Result<ClusterView, kube::Error> {
    let mut view = ClusterView::default();
    for source in SOURCES {
        if source.kind == "Secret" && !reads.tls_secrets {
            view.withheld
                .insert(source.kind.to_owned(), TLS_SECRETS_WITHHELD.to_owned());
            continue;
        }
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(source.group, source.version, source.kind),
            source.plural,
        );
        let api: Api<DynamicObject> = match source.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let mut params = ListParams::default().limit(PAGE);
        if let Some(fields) = source.fields {
            params = params.fields(fields);
        }
        let mut seen = 0;
        loop {
            let page = match api.list(&params).await {
                Ok(page) => page,
                // Not served here (say, no OLM): there is nothing of the
                // kind to judge, which the checks say rather than warn
                // that data is missing.
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    view.withheld.insert(
                        source.kind.to_owned(),
                        format!("the cluster serves no {} API", source.kind),
                    );
                    break;
                }
                // Say so in the checks that need the kind, rather than give up.
                Err(kube::Error::Api(e)) if e.code == 403 => {
                    view.unreadable.insert(source.kind.to_owned(), e.message);
                    break;
                }
                Err(e) => return Err(e),
            };
            view.mark_loaded(source.kind);
            for item in page.items {
                let value = serde_json::to_value(item).map_err(kube::Error::SerdeError)?;
                view.add(source.kind, value)
                    .map_err(kube::Error::SerdeError)?;
                seen += 1;
            }
            progress(source.kind, seen);
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
    }
    Ok(view)
}
