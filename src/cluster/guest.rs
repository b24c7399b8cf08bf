//! Reading a hosted cluster (the guest) through its admin kubeconfig, the
//! Secret its HostedCluster's `status.kubeconfig` names. The kubeconfig is
//! data another party wrote, so only what it holds inline is used: one that
//! would run a command (`exec`), call an auth provider or read a file of
//! this pod's (a token, certificate, key or CA file) is refused, as is one
//! that sends the guest's traffic through a proxy. The guest is only read.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};

use super::live::{self, Reads};
use crate::model::hosted::HostedCluster;
use crate::view::ClusterView;

/// The key of the admin kubeconfig in its Secret.
pub const KUBECONFIG_KEY: &str = "kubeconfig";

/// Why a hosted cluster could not be read. Its text becomes the message
/// of the run's `HostedClusterReachable` error.
#[derive(Debug, thiserror::Error)]
pub enum GuestError {
    #[error("the HostedCluster names no admin kubeconfig yet (status.kubeconfig)")]
    NoKubeconfig,
    #[error("cannot read the Secret {name} of its admin kubeconfig: {error}")]
    Secret { name: String, error: kube::Error },
    #[error("the Secret {0} holds no {KUBECONFIG_KEY} key")]
    NoKey(String),
    #[error("its admin kubeconfig cannot be read: {0}")]
    Unreadable(String),
    #[error("its admin kubeconfig {0}; only credentials held inline are used")]
    Refused(String),
    #[error("cannot connect with its admin kubeconfig: {0}")]
    Client(String),
    #[error("reading it failed: {0}")]
    Read(kube::Error),
    #[error("reading it took longer than {0:?}")]
    TimedOut(Duration),
}

/// What of a kubeconfig the gate refuses, in words; `Ok` when everything
/// it would use is held inline.
pub fn refuse_outside_data(config: &Kubeconfig) -> Result<(), GuestError> {
    let refused = |what: String| Err(GuestError::Refused(what));
    for named in &config.auth_infos {
        let Some(user) = &named.auth_info else {
            continue;
        };
        let name = &named.name;
        if user.exec.is_some() {
            return refused(format!("runs a command (exec) for user {name:?}"));
        }
        if user.auth_provider.is_some() {
            return refused(format!("calls an auth provider for user {name:?}"));
        }
        let files = [
            ("tokenFile", &user.token_file),
            ("client-certificate", &user.client_certificate),
            ("client-key", &user.client_key),
        ];
        if let Some((field, _)) = files.iter().find(|(_, path)| path.is_some()) {
            return refused(format!("reads a file ({field}) for user {name:?}"));
        }
    }
    for named in &config.clusters {
        let Some(cluster) = &named.cluster else {
            continue;
        };
        let name = &named.name;
        if cluster.certificate_authority.is_some() {
            return refused(format!(
                "reads a file (certificate-authority) for cluster {name:?}"
            ));
        }
        if cluster.proxy_url.is_some() {
            return refused(format!("sends through a proxy for cluster {name:?}"));
        }
    }
    Ok(())
}

/// A client of the guest from the kubeconfig's text, refused as
/// [`refuse_outside_data`] says.
pub async fn client_from(text: &str) -> Result<kube::Client, GuestError> {
    let config = Kubeconfig::from_yaml(text).map_err(|e| GuestError::Unreadable(e.to_string()))?;
    refuse_outside_data(&config)?;
    let config = kube::Config::from_custom_kubeconfig(config, &KubeConfigOptions::default())
        .await
        .map_err(|e| GuestError::Client(e.to_string()))?;
    kube::Client::try_from(config).map_err(|e| GuestError::Client(e.to_string()))
}

/// How long reading a guest may take, its Secret and connection included.
pub const READ_LIMIT: Duration = Duration::from_secs(60);

/// Reads the guest of `cluster` with the management cluster's `client`:
/// its admin kubeconfig, then the cluster itself (what `reads` allows),
/// all within `limit`.
pub async fn read(
    client: &kube::Client,
    cluster: &HostedCluster,
    reads: Reads,
    limit: Duration,
) -> Result<Arc<ClusterView>, GuestError> {
    tokio::time::timeout(limit, read_unlimited(client, cluster, reads))
        .await
        .unwrap_or(Err(GuestError::TimedOut(limit)))
}

async fn read_unlimited(
    client: &kube::Client,
    cluster: &HostedCluster,
    reads: Reads,
) -> Result<Arc<ClusterView>, GuestError> {
    let name = cluster
        .status
        .kubeconfig
        .as_ref()
        .map(|k| k.name.clone())
        .filter(|n| !n.is_empty())
        .ok_or(GuestError::NoKubeconfig)?;
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let secret = secrets
        .get(&name)
        .await
        .map_err(|error| GuestError::Secret {
            name: name.clone(),
            error,
        })?;
    let text = secret
        .data
        .as_ref()
        .and_then(|d| d.get(KUBECONFIG_KEY))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .ok_or_else(|| GuestError::NoKey(name.clone()))?;
    let guest = client_from(&text).await?;
    let view = live::load(&guest, reads).await.map_err(GuestError::Read)?;
    Ok(Arc::new(view))
}

#[cfg(test)]
mod tests {
    use super::*;

    const INLINE: &str = r#"
apiVersion: v1
kind: Config
clusters:
- name: guest
  cluster:
    server: https://api.prod.example.com:6443
    certificate-authority-data: LS0tLQ==
users:
- name: admin
  user:
    client-certificate-data: LS0tLQ==
    client-key-data: LS0tLQ==
contexts:
- name: admin
  context: {cluster: guest, user: admin}
current-context: admin
"#;

    fn refusal(text: &str) -> String {
        let config = Kubeconfig::from_yaml(text).unwrap();
        match refuse_outside_data(&config) {
            Ok(()) => "accepted".to_owned(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_kubeconfig_with_everything_inline_is_used() {
        assert_eq!(refusal(INLINE), "accepted");
        let token = INLINE.replace(
            "    client-certificate-data: LS0tLQ==\n    client-key-data: LS0tLQ==\n",
            "    token: sha256~abc\n",
        );
        assert_eq!(refusal(&token), "accepted");
    }

    #[test]
    fn a_kubeconfig_that_runs_a_command_or_reads_a_file_is_refused() {
        let user = |entry: &str| {
            INLINE.replace(
                "    client-key-data: LS0tLQ==\n",
                &format!("    client-key-data: LS0tLQ==\n{entry}"),
            )
        };
        let cases = [
            (
                user("    exec: {command: sh, apiVersion: client.authentication.k8s.io/v1}\n"),
                "its admin kubeconfig runs a command (exec) for user \"admin\"; only credentials held inline are used",
            ),
            (
                user("    auth-provider: {name: oidc}\n"),
                "its admin kubeconfig calls an auth provider for user \"admin\"; only credentials held inline are used",
            ),
            (
                user("    tokenFile: token\n"),
                "its admin kubeconfig reads a file (tokenFile) for user \"admin\"; only credentials held inline are used",
            ),
            (
                INLINE.replace("client-key-data: LS0tLQ==", "client-key: key.pem"),
                "its admin kubeconfig reads a file (client-key) for user \"admin\"; only credentials held inline are used",
            ),
            (
                INLINE.replace(
                    "certificate-authority-data: LS0tLQ==",
                    "certificate-authority: ca.crt",
                ),
                "its admin kubeconfig reads a file (certificate-authority) for cluster \"guest\"; only credentials held inline are used",
            ),
            (
                INLINE.replace(
                    "    certificate-authority-data",
                    "    proxy-url: http://proxy:3128\n    certificate-authority-data",
                ),
                "its admin kubeconfig sends through a proxy for cluster \"guest\"; only credentials held inline are used",
            ),
        ];
        for (text, said) in cases {
            assert_eq!(refusal(&text), said);
        }
    }

    /// The read asks the management cluster for the Secret alone, and
    /// says why it stops: no kubeconfig named, none in the Secret, or one
    /// refused, before the guest is ever contacted.
    #[tokio::test]
    async fn a_read_says_why_it_could_not_reach_the_guest() {
        let (client, mut api) = crate::cluster::api_mock::client();
        let mut cluster: HostedCluster = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "prod", "namespace": "clusters"}
        }))
        .unwrap();
        let limit = Duration::from_secs(5);
        let said = read(&client, &cluster, Reads { tls_secrets: false }, limit)
            .await
            .unwrap_err();
        assert!(matches!(said, GuestError::NoKubeconfig), "{said}");

        cluster.status.kubeconfig = Some(crate::model::hosted::LocalObjectReference {
            name: "prod-admin-kubeconfig".into(),
        });
        let secret = |data: serde_json::Value| {
            serde_json::json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "prod-admin-kubeconfig", "namespace": "clusters"},
                "data": data
            })
        };
        let b64 = |text: &str| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode(text)
        };
        let exec = INLINE.replace(
            "    client-key-data: LS0tLQ==\n",
            "    exec: {command: sh, apiVersion: client.authentication.k8s.io/v1}\n",
        );
        for (data, said) in [
            (
                serde_json::json!({}),
                "the Secret prod-admin-kubeconfig holds no kubeconfig key",
            ),
            (
                serde_json::json!({"kubeconfig": b64(&exec)}),
                "its admin kubeconfig runs a command (exec) for user \"admin\"; only credentials held inline are used",
            ),
        ] {
            let (reading, answered) = tokio::join!(
                read(&client, &cluster, Reads { tls_secrets: false }, limit),
                async {
                    let mut seen = api.next().await;
                    assert_eq!(seen.method, http::Method::GET);
                    assert_eq!(
                        seen.path,
                        "/api/v1/namespaces/clusters/secrets/prod-admin-kubeconfig"
                    );
                    seen.ok(&secret(data));
                }
            );
            let () = answered;
            assert_eq!(reading.unwrap_err().to_string(), said);
        }
    }

    #[tokio::test]
    async fn a_refused_kubeconfig_makes_no_client() {
        let exec = INLINE.replace(
            "    client-key-data: LS0tLQ==\n",
            "    exec: {command: touch, args: [ran], apiVersion: client.authentication.k8s.io/v1}\n",
        );
        assert!(matches!(
            client_from(&exec).await,
            Err(GuestError::Refused(_))
        ));
        assert!(matches!(
            client_from("clusters: [").await,
            Err(GuestError::Unreadable(_))
        ));
    }
}
