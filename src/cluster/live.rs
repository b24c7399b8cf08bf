//! Reading a cluster from the API server: paged lists of every kind in
//! [`kinds::ALL`], as each kind's listings say (its group, version,
//! resource, namespace and field selector all come from the `Kind`), each
//! page reduced to the lean types checks read before the next is fetched,
//! so a large cluster is never held whole in memory.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};

use crate::view::ClusterView;
use crate::view::kinds;

/// Page size for lists.
const PAGE: u32 = 500;

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
    for (kind, listing) in kinds::listings() {
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
        let api: Api<DynamicObject> = match listing.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let mut params = ListParams::default().limit(PAGE);
        if let Some(fields) = listing.fields {
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
            view.mark_loaded(kind);
            for item in page.items {
                let value = serde_json::to_value(item).map_err(kube::Error::SerdeError)?;
                view.add(kind, value).map_err(kube::Error::SerdeError)?;
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
