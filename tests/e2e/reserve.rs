//! The API server's addresses, for the webhook connection slots reserved
//! for it (`cluster::api_server`), followed on a real API server by the
//! gate's own code as its deployed ServiceAccount: the watch of one
//! EndpointSlice by name, and the RBAC that allows it and no more.
//!
//! The control plane here keeps no endpoints for the `kubernetes` Service
//! (`--endpoint-reconciler-type=none`: it serves loopback alone, which no
//! endpoint may name), so the test writes that EndpointSlice itself, as an
//! API server's endpoint reconciler does, then changes and deletes it.

use std::net::IpAddr;
use std::time::Duration;

use preflight_gate::cluster::api_server::ApiServerAddresses;
use preflight_gate::metrics::Metrics;
use serde_json::json;

use crate::cluster::{User, lock, metric};
use crate::deploy::{apply_dev, service_account_kubeconfig};
use crate::support::wait_for;

const SA: &str = "system:serviceaccount:preflight-gate:preflight-gate";

/// Waits until `done`, for up to 20 s.
fn wait_until(what: &str, done: impl Fn() -> bool) {
    wait_for(what, Duration::from_secs(20), || done().then_some(()));
}

#[test]
fn the_gate_follows_the_api_servers_endpoints_as_its_own_account() {
    let (_turn, world) = lock();
    apply_dev(world);
    let slice = |addresses: &[&str]| {
        json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "kubernetes",
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": "kubernetes"}
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": addresses, "conditions": {"ready": true}}],
            "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]
        })
    };
    let ip = |text: &str| text.parse::<IpAddr>().unwrap();
    world.apply_json(&slice(&["192.0.2.10"]));

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = service_account_kubeconfig(world, dir.path());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let metrics = Metrics::new().unwrap();
    let known = runtime.block_on(async {
        let client = preflight_gate::cluster::client(Some(&kubeconfig))
            .await
            .unwrap();
        ApiServerAddresses::follow(client, metrics.tls.clone())
    });
    wait_until("the API server's address is known", || {
        known.contains(ip("192.0.2.10"))
    });

    // The API server's replicas come and go: the set follows.
    world.apply_json(&slice(&["192.0.2.11", "192.0.2.12"]));
    wait_until("the new addresses, and only those, are known", || {
        known.contains(ip("192.0.2.11"))
            && known.contains(ip("192.0.2.12"))
            && !known.contains(ip("192.0.2.10"))
    });
    assert_eq!(
        metric(
            &metrics.render(),
            "preflight_gate_api_server_addresses",
            &[]
        ),
        2.0
    );
    // No endpoints: nothing is reserved.
    world.admin(&["delete", "endpointslice", "kubernetes", "-n", "default"]);
    wait_until("nothing is known", || !known.any());
    assert_eq!(
        metric(
            &metrics.render(),
            "preflight_gate_api_server_addresses",
            &[]
        ),
        0.0
    );

    // That one object, by name, and no other EndpointSlice.
    let can_i = |args: &[&str]| {
        let mut all = vec!["auth", "can-i", "--as", SA];
        all.extend(args);
        world.kubectl(User::Admin, &all).stdout.trim() == "yes"
    };
    for verb in ["list", "watch"] {
        assert!(can_i(&[
            verb,
            "endpointslices.discovery.k8s.io/kubernetes",
            "-n",
            "default"
        ]));
        assert!(!can_i(&[
            verb,
            "endpointslices.discovery.k8s.io",
            "-n",
            "default"
        ]));
        assert!(!can_i(&[
            verb,
            "endpointslices.discovery.k8s.io/kubernetes",
            "-n",
            "kube-system"
        ]));
    }
    drop(runtime);
}
