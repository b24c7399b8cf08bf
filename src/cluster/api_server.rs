//! The API server's own addresses, so that the webhook can keep connection
//! slots only they may take (`--reserved-connections`): a pod flooding the
//! port from other addresses then never keeps the API server from being
//! answered.
//!
//! They are the endpoints of the `kubernetes` Service, which every API
//! server writes itself: the EndpointSlice `kubernetes` in `default`,
//! followed by a watch of that one object in the background, never on the
//! review path. Until it has been read (no cluster, no grant, an API server
//! that keeps no endpoints) the set is empty and nothing is reserved; the
//! gate says so once, and again only when that changes.

use std::net::IpAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use futures::StreamExt;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tracing::{debug, info, warn};

use crate::metrics::TlsMetrics;

/// Where the API server keeps its own endpoints.
const NAMESPACE: &str = "default";
const SERVICE: &str = "kubernetes";

/// The addresses the API server connects from, as far as the gate knows.
#[derive(Debug, Default)]
pub struct ApiServerAddresses {
    known: ArcSwap<Vec<IpAddr>>,
}

impl ApiServerAddresses {
    /// None known: nothing is reserved.
    pub fn unknown() -> Arc<Self> {
        Arc::default()
    }

    /// These, for good (tests, and benches).
    pub fn fixed(addresses: impl IntoIterator<Item = IpAddr>) -> Arc<Self> {
        let set = Self::default();
        set.replace(addresses.into_iter().collect());
        Arc::new(set)
    }

    /// Whether `peer` is one of them.
    pub fn contains(&self, peer: IpAddr) -> bool {
        self.known.load().contains(&peer.to_canonical())
    }

    /// Whether any is known: only then is anything reserved.
    pub fn any(&self) -> bool {
        !self.known.load().is_empty()
    }

    fn replace(&self, mut addresses: Vec<IpAddr>) {
        for address in &mut addresses {
            *address = address.to_canonical();
        }
        addresses.sort();
        addresses.dedup();
        self.known.store(Arc::new(addresses));
    }

    /// Follows the `kubernetes` Service's EndpointSlice into a set, in the
    /// background. A watch that fails after a first read keeps the
    /// addresses last read (the API server's addresses rarely move, and a
    /// watch that fails for a moment is no reason to drop the reserve).
    pub fn follow(client: kube::Client, metrics: TlsMetrics) -> Arc<Self> {
        let set = Self::unknown();
        metrics.api_server_addresses(0);
        let follower = set.clone();
        tokio::spawn(async move {
            let api: Api<EndpointSlice> = Api::namespaced(client, NAMESPACE);
            let config = watcher::Config::default().fields(&format!("metadata.name={SERVICE}"));
            let mut events = watcher::watcher(api, config).default_backoff().boxed();
            // What the current listing found, until it is done.
            let mut listing: Option<Vec<IpAddr>> = None;
            // What the log last said: nothing yet, unreadable, or read.
            let mut said: Option<Said> = None;
            while let Some(event) = events.next().await {
                let addresses = match event {
                    Ok(Event::Init) => {
                        listing = Some(Vec::new());
                        continue;
                    }
                    Ok(Event::InitApply(slice)) => {
                        listing = Some(addresses_of(&slice));
                        continue;
                    }
                    Ok(Event::InitDone) => listing.take().unwrap_or_default(),
                    Ok(Event::Apply(slice)) => addresses_of(&slice),
                    Ok(Event::Delete(_)) => Vec::new(),
                    Err(e) => {
                        if follower.any() {
                            debug!(error = %e, "watch of the API server's endpoints failed; keeping the addresses known");
                        } else if said != Some(Said::Unreadable) {
                            warn!(error = %e, "cannot read the kubernetes Service's EndpointSlice in default: no connection slots are reserved for the API server");
                            said = Some(Said::Unreadable);
                        }
                        continue;
                    }
                };
                if follower.update(addresses, &metrics) || said != Some(Said::Read) {
                    follower.say();
                    said = Some(Said::Read);
                }
            }
        });
        set
    }

    /// Takes the addresses read; whether they changed.
    fn update(&self, addresses: Vec<IpAddr>, metrics: &TlsMetrics) -> bool {
        let before = self.known.load_full();
        self.replace(addresses);
        let now = self.known.load_full();
        metrics.api_server_addresses(now.len());
        before != now
    }

    /// Says what is reserved now.
    fn say(&self) {
        let now = self.known.load_full();
        if now.is_empty() {
            warn!(
                "the kubernetes Service has no endpoints: no connection slots are reserved for the API server"
            );
        } else {
            let list = now.iter().map(ToString::to_string).collect::<Vec<_>>();
            info!(addresses = %list.join(", "), "connection slots are reserved for the API server's addresses");
        }
    }
}

/// What the follower's log last said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Said {
    Unreadable,
    Read,
}

/// Every address of the slice's endpoints, ready or not: an API server
/// starting or stopping still calls webhooks.
fn addresses_of(slice: &EndpointSlice) -> Vec<IpAddr> {
    slice
        .endpoints
        .iter()
        .flatten()
        .flat_map(|e| &e.addresses)
        .filter_map(|a| a.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv4_peer_seen_as_ipv6_is_still_the_api_server() {
        let set = ApiServerAddresses::fixed(["10.0.0.1".parse().unwrap()]);
        assert!(set.contains("::ffff:10.0.0.1".parse().unwrap()));
        assert!(!set.contains("10.0.0.2".parse().unwrap()));
        assert!(!ApiServerAddresses::unknown().any());
    }

    #[test]
    fn every_endpoint_counts_ready_or_not() {
        let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "kubernetes", "namespace": "default"},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.0.0.1"], "conditions": {"ready": true}},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
                {"addresses": ["not an address"]}
            ]
        }))
        .unwrap();
        assert_eq!(
            addresses_of(&slice),
            [
                "10.0.0.1".parse::<IpAddr>().unwrap(),
                "10.0.0.2".parse().unwrap()
            ]
        );
    }
}
