//! Reading a cluster from the API server: paged lists of every kind in
//! [`SOURCES`], each page reduced to the lean types checks read before the
//! next is fetched, so a large cluster is never held whole in memory.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};

use crate::view::ClusterView;
use crate::view::kinds::{self, Kind};

/// Page size for lists.
const PAGE: u32 = 500;

/// One list the live loader makes.
#[derive(Clone, Copy, Debug)]
pub struct Source {
    pub kind: &'static Kind,
    /// Limit the list to one namespace.
    pub namespace: Option<&'static str>,
    /// A field selector, so the API server filters (by name, type, phase).
    pub fields: Option<&'static str>,
}

/// Every object of `kind`.
const fn every(kind: &'static Kind) -> Source {
    Source {
        kind,
        namespace: None,
        fields: None,
    }
}

/// Everything the checks read, and how it is listed: every kind of
/// [`kinds::ALL`], some narrowed by namespace or fields.
pub const SOURCES: &[Source] = &[
    every(&kinds::CLUSTER_VERSION),
    every(&kinds::CLUSTER_OPERATOR),
    every(&kinds::INFRASTRUCTURE),
    every(&kinds::NODE),
    Source {
        fields: Some("status.phase!=Succeeded,status.phase!=Failed"),
        ..every(&kinds::POD)
    },
    every(&kinds::POD_DISRUPTION_BUDGET),
    every(&kinds::MACHINE_CONFIG_POOL),
    every(&kinds::MACHINE_CONFIG_NODE),
    every(&kinds::API_REQUEST_COUNT),
    Source {
        namespace: Some("openshift-config-managed"),
        fields: Some("metadata.name=admin-gates"),
        ..every(&kinds::CONFIG_MAP)
    },
    Source {
        namespace: Some("openshift-config"),
        fields: Some("metadata.name=admin-acks"),
        ..every(&kinds::CONFIG_MAP)
    },
    Source {
        fields: Some("type=kubernetes.io/tls"),
        ..every(&kinds::SECRET)
    },
    Source {
        namespace: Some("openshift-ingress-operator"),
        ..every(&kinds::INGRESS_CONTROLLER)
    },
    every(&kinds::CLUSTER_SERVICE_VERSION),
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
        let kind = source.kind;
        if *kind == kinds::SECRET && !reads.tls_secrets {
            view.withheld.insert(
                kind.name.to_owned(),
                crate::view::TLS_SECRETS_WITHHELD.to_owned(),
            );
            continue;
        }
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(kind.group, kind.version, kind.name),
            kind.plural,
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
                        kind.name.to_owned(),
                        format!("the cluster serves no {} API", kind.name),
                    );
                    break;
                }
                // Say so in the checks that need the kind, rather than give up.
                Err(kube::Error::Api(e)) if e.code == 403 => {
                    view.unreadable.insert(kind.name.to_owned(), e.message);
                    break;
                }
                Err(e) => return Err(e),
            };
            view.mark_loaded(kind.name);
            for item in page.items {
                let value = serde_json::to_value(item).map_err(kube::Error::SerdeError)?;
                view.add(kind.name, value)
                    .map_err(kube::Error::SerdeError)?;
                seen += 1;
            }
            progress(kind.name, seen);
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
    }
    Ok(view)
}
