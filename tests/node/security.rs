//! Who may reach the deployed gate on the node, and where its account may
//! make pods: mutual TLS on the gate's pods (a caller on the node without
//! the API server's client certificate is refused at the handshake, while
//! the API server's reviews are decided), the NetworkPolicy as the API
//! server stored it, and SubjectAccessReviews for the deployed RBAC.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::access::{self, Account};
use crate::world::{CHECKS_NAMESPACE, CLIENT_CA_SECRET, NAMESPACE, World, lock, wait_for};

/// The name the serving certificate is for (the Service's).
const SERVICE_HOST: &str = "preflight-gate.preflight-gate.svc";

/// A socat inside the node's network namespace that forwards a Unix socket
/// of the state dir to a gate pod's webhook port: a caller on the node,
/// reaching the pod by its address as any pod or host process there could.
struct OnTheNode {
    socat: Child,
    socket: PathBuf,
}

impl OnTheNode {
    fn to(world: &World, pod_ip: &str) -> OnTheNode {
        let socket = world
            .dir()
            .join(format!("node-caller-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&socket);
        let socat = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", world.var("CP_NODE_NETNS")))
            .arg("socat")
            .arg(format!("UNIX-LISTEN:{},fork,mode=600", socket.display()))
            .arg(format!("TCP:{pod_ip}:8443"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nsenter and socat (the node's packages)");
        let caller = OnTheNode { socat, socket };
        wait_for("the forwarder's socket", Duration::from_secs(10), || {
            caller.socket.exists().then_some(())
        });
        caller
    }

    /// Posts `review` over TLS, presenting `identity` (certificate and key
    /// files) or no certificate; the HTTP answer, or why there was none.
    fn post(
        &self,
        review: &[u8],
        ca: &str,
        identity: Option<(&str, &str)>,
    ) -> Result<String, String> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_file(ca).unwrap())
            .unwrap();
        let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
        let config = match identity {
            Some((crt, key)) => builder
                .with_client_auth_cert(
                    CertificateDer::pem_file_iter(crt)
                        .unwrap()
                        .collect::<Result<Vec<_>, _>>()
                        .unwrap(),
                    PrivateKeyDer::from_pem_file(key).unwrap(),
                )
                .unwrap(),
            None => builder.with_no_client_auth(),
        };
        let name = ServerName::try_from(SERVICE_HOST).unwrap().to_owned();
        let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
        let sock = UnixStream::connect(&self.socket).map_err(|e| format!("connect: {e}"))?;
        sock.set_read_timeout(Some(Duration::from_secs(15)))
            .unwrap();
        let mut tls = rustls::StreamOwned::new(conn, sock);
        let head = format!(
            "POST /validate/clusterversion?timeout=10s HTTP/1.1\r\nHost: {SERVICE_HOST}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            review.len()
        );
        tls.write_all(head.as_bytes())
            .and_then(|()| tls.write_all(review))
            .and_then(|()| tls.flush())
            .map_err(|e| format!("write: {e}"))?;
        let mut answer = Vec::new();
        let read = tls.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer).into_owned();
        match read {
            _ if answer.starts_with("HTTP/1.1 ") => Ok(answer),
            Ok(_) => Err(format!("closed without an answer: {answer:?}")),
            Err(e) => Err(format!("read: {e}")),
        }
    }
}

impl Drop for OnTheNode {
    fn drop(&mut self) {
        let _ = self.socat.kill();
        let _ = self.socat.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// A dry-run review of a change of target (examples/reviews/), so that
/// answering it has no effect.
fn review() -> (Vec<u8>, String) {
    let mut review: Value =
        serde_json::from_str(include_str!("../../examples/reviews/update-to-4.15.3.json")).unwrap();
    review["request"]["dryRun"] = json!(true);
    let uid = review["request"]["uid"].as_str().unwrap().to_owned();
    (review.to_string().into_bytes(), uid)
}

#[test]
fn a_caller_on_the_node_without_the_api_servers_client_certificate_is_refused_and_the_api_server_is_answered()
 {
    let (_turn, world) = lock();
    // The gate runs with --client-ca, from the Secret that holds the CA's
    // certificate alone.
    let pods = world.gate_pods();
    let pod = pods
        .iter()
        .find(|p| p["status"]["podIP"].is_string())
        .expect("a gate pod with an address");
    let env = &pod["spec"]["containers"][0]["env"];
    assert!(
        env.as_array().unwrap().iter().any(|e| {
            e["name"] == "PREFLIGHT_GATE_CLIENT_CA"
                && e["value"] == "/etc/preflight-gate/client-ca/ca.crt"
        }),
        "{env:#}"
    );
    let secret = world.get_json(&["get", "secret", "-n", NAMESPACE, CLIENT_CA_SECRET]);
    let keys: Vec<&String> = secret["data"].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["ca.crt"],
        "the client CA's key is not in the cluster"
    );

    let ip = pod["status"]["podIP"].as_str().unwrap();
    let caller = OnTheNode::to(world, ip);
    let (body, uid) = review();
    let ca = world.var("CA_CERT");

    // No client certificate: refused at the handshake, nothing answered.
    let anonymous = caller.post(&body, ca, None);
    eprintln!("no certificate: {anonymous:?}");
    assert!(anonymous.is_err(), "answered: {anonymous:?}");
    // A certificate the API server itself trusts (the admin's, from the
    // users' CA) is not the API server's identity towards webhooks.
    let pki = Path::new(ca).parent().unwrap();
    let admin = (
        pki.join("admin.crt").display().to_string(),
        pki.join("admin.key").display().to_string(),
    );
    let forged = caller.post(&body, ca, Some((&admin.0, &admin.1)));
    eprintln!("the admin's certificate: {forged:?}");
    assert!(forged.is_err(), "answered: {forged:?}");
    // The API server's webhook client certificate, over the very same path,
    // is answered: the refusals above are the handshake's, not the path's.
    let answered = caller
        .post(
            &body,
            ca,
            Some((
                world.var("WEBHOOK_CLIENT_CERT"),
                world.var("WEBHOOK_CLIENT_KEY"),
            )),
        )
        .expect("the API server's certificate is answered");
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    assert!(answered.contains(&uid), "{answered}");

    // And the API server, presenting that certificate through its
    // AdmissionConfiguration, gets `oc adm upgrade --to-image` decided.
    let image = world.release_image.clone();
    let decided = world.request_until_verdict(&image, &[]);
    assert!(decided.ok, "{}", decided.stderr);
    assert_eq!(
        world.cluster_version()["spec"]["desiredUpdate"]["image"],
        image
    );
}

#[test]
fn the_network_policy_admits_the_gates_ports_only_from_the_node() {
    let (_turn, world) = lock();
    // Stored by the API server as the overlay has it (the bridge CNI does
    // not enforce it: the handshake above is the control on this node).
    let policy = world.get_json(&["get", "networkpolicy", "-n", NAMESPACE, "preflight-gate"]);
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"],
        json!({"app.kubernetes.io/name": "preflight-gate", "app.kubernetes.io/component": "webhook"})
    );
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]));
    let rules = policy["spec"]["ingress"].as_array().unwrap();
    assert_eq!(rules.len(), 1, "{policy:#}");
    let from: Vec<&str> = rules[0]["from"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["ipBlock"]["cidr"].as_str().expect("only address blocks"))
        .collect();
    // The node's network, and the node on the pod bridge; no pod.
    let node_ip = world.var("CP_NODE_IP");
    let node_net = format!("{}.0/24", node_ip.rsplit_once('.').unwrap().0);
    assert!(from.contains(&node_net.as_str()), "{from:?}");
    let bridge = format!(
        "{}.1/32",
        world
            .var("CP_POD_CIDR")
            .split('/')
            .next()
            .unwrap()
            .rsplit_once('.')
            .unwrap()
            .0
    );
    assert!(from.contains(&bridge.as_str()), "{from:?}");
    assert_eq!(from.len(), 2, "{from:?}");
    let ports: Vec<&Value> = rules[0]["ports"].as_array().unwrap().iter().collect();
    assert_eq!(
        ports,
        [
            &json!({"port": "webhook", "protocol": "TCP"}),
            &json!({"port": "admin", "protocol": "TCP"})
        ]
    );
}

/// Whether the API server's authorizer lets the gate's account `verb` the
/// `resource` in `namespace`, asked with a SubjectAccessReview.
fn gate_may(world: &World, verb: &str, group: &str, resource: &str, namespace: &str) -> bool {
    let gate = Account {
        namespace: NAMESPACE,
        name: "preflight-gate",
    };
    let review = gate.review(verb, group, resource, namespace, "");
    access::allowed(&review, world.dir(), |file| {
        world.admin(&["create", "-f", file, "-o", "json"])
    })
}

#[test]
fn the_gates_account_makes_pods_only_in_the_checks_namespace() {
    let (_turn, world) = lock();
    for (verb, group, resource) in [
        ("create", "", "pods"),
        ("delete", "", "pods"),
        ("get", "", "pods/log"),
        ("create", "batch", "jobs"),
    ] {
        assert!(
            gate_may(world, verb, group, resource, CHECKS_NAMESPACE),
            "may not {verb} {resource} in {CHECKS_NAMESPACE}"
        );
        assert!(
            !gate_may(world, verb, group, resource, NAMESPACE),
            "may {verb} {resource} in its own namespace, beside its Secrets"
        );
    }
    // Nor any workload that makes pods, in either namespace; and no Secret
    // where the checks run.
    for namespace in [NAMESPACE, CHECKS_NAMESPACE] {
        for (group, resource) in access::MAKE_PODS {
            assert!(
                !gate_may(world, "create", group, resource, namespace),
                "may create {resource} in {namespace}"
            );
        }
    }
    for verb in ["create", "get", "list"] {
        assert!(
            !gate_may(world, verb, "", "secrets", CHECKS_NAMESPACE),
            "may {verb} secrets in {CHECKS_NAMESPACE}"
        );
    }
}
