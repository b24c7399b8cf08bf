//! IngressCertificateCompatible: the default ingress certificate meets the
//! target's TLS policy, which newer OpenSSL enforces (the enhancement's
//! story of routes that stop working after an update). An RSA key under
//! 2048 bits, a SHA-1 signature or an expired certificate fails.
//!
//! The certificate is the IngressController `default`'s
//! `spec.defaultCertificate` in `openshift-ingress`, else the generated
//! `router-certs-default`.

use super::x509::leaf;
use super::{Check, Context, qualified, require};
use crate::model::Finding;
use crate::model::Severity;
use crate::view::k8s::TlsSecret;
use crate::view::kinds;

pub struct IngressCertificateCompatible;

const URL: &str = "https://docs.openshift.com/container-platform/latest/security/certificates/replacing-default-ingress-certificate.html";
const NAMESPACE: &str = "openshift-ingress";
const GENERATED: &str = "router-certs-default";
const MIN_RSA_BITS: usize = 2048;

impl Check for IngressCertificateCompatible {
    fn name(&self) -> &'static str {
        "IngressCertificateCompatible"
    }

    fn severity(&self) -> Severity {
        Severity::Blocking
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        if let Err(skip) = require(ctx.view, &[kinds::SECRET]) {
            return skip;
        }
        let custom = ctx
            .view
            .ingress_controllers
            .iter()
            .find(|ic| ic.metadata.name == "default")
            .and_then(|ic| ic.spec.default_certificate.as_ref())
            .map(|r| r.name.as_str());
        let name = custom.unwrap_or(GENERATED);
        let Some(secret) = find(&ctx.view.tls_secrets, name) else {
            return Finding::skipped(format!(
                "the default ingress certificate {NAMESPACE}/{name} is not in the cluster data"
            ));
        };
        let secret_name = qualified(NAMESPACE, name);
        let cert = match leaf(&secret.certificate) {
            Ok(cert) => cert,
            Err(e) => return Finding::fail(format!("{secret_name}: {e}")).with_url(URL),
        };
        let mut problems = Vec::new();
        if let Some(bits) = cert.rsa_bits.filter(|b| *b < MIN_RSA_BITS) {
            problems.push(format!(
                "an RSA key of {bits} bits (at least {MIN_RSA_BITS} needed)"
            ));
        }
        if cert.sha1 {
            problems.push(format!("a SHA-1 signature ({})", cert.signature));
        }
        if cert.not_after <= ctx.now {
            problems.push(format!("expired at {}", cert.not_after));
        }
        if problems.is_empty() {
            Finding::pass(format!(
                "{secret_name} ({}) meets the TLS policy of {}",
                cert.subject,
                ctx.target_name()
            ))
        } else {
            Finding::fail(format!(
                "the default ingress certificate {secret_name} ({}) has {}; routes would fail TLS after the update",
                cert.subject,
                problems.join(", ")
            ))
            .with_url(URL)
        }
    }
}

fn find<'a>(secrets: &'a [TlsSecret], name: &str) -> Option<&'a TlsSecret> {
    secrets
        .iter()
        .find(|s| s.namespace == NAMESPACE && s.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixture;
    use crate::model::Outcome;
    use base64::Engine;
    use rstest::rstest;
    use serde_json::{Value, json};

    pub fn secret(name: &str, pem: &str) -> Value {
        json!({"kind": "Secret", "type": "kubernetes.io/tls",
               "metadata": {"name": name, "namespace": NAMESPACE},
               "data": {"tls.crt": base64::engine::general_purpose::STANDARD.encode(pem), "tls.key": "c2VjcmV0"}})
    }

    fn expired() -> String {
        let mut params = rcgen::CertificateParams::new(vec!["*.apps.old.example".into()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().pem()
    }

    #[rstest]
    #[case::good(include_str!("../../tests/data/certs/rsa2048-sha256.pem").to_owned(), Outcome::Pass, "meets the TLS policy of 4.16.0")]
    #[case::weak_key(include_str!("../../tests/data/certs/rsa1024-sha256.pem").to_owned(), Outcome::Fail, "an RSA key of 1024 bits")]
    #[case::sha1(include_str!("../../tests/data/certs/rsa2048-sha1.pem").to_owned(), Outcome::Fail, "a SHA-1 signature (sha1WithRSAEncryption)")]
    #[case::expired(expired(), Outcome::Fail, "expired at 2021-01-01")]
    #[case::garbage("not a certificate".to_owned(), Outcome::Fail, "openshift-ingress/router-certs-default: no PEM certificate")]
    fn certificates(#[case] pem: String, #[case] outcome: Outcome, #[case] says: &str) {
        let view = fixture::view(vec![
            fixture::cluster_version("4.15.3"),
            secret(GENERATED, &pem),
        ]);
        let finding = fixture::evaluate(&IngressCertificateCompatible, &view, "4.16.0");
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    #[test]
    fn a_custom_default_certificate_is_the_one_checked() {
        let controller = json!({"kind": "IngressController", "metadata": {"name": "default", "namespace": "openshift-ingress-operator"},
                                "spec": {"defaultCertificate": {"name": "custom"}}});
        let view = fixture::view(vec![
            fixture::cluster_version("4.15.3"),
            controller,
            secret(
                GENERATED,
                include_str!("../../tests/data/certs/rsa2048-sha256.pem"),
            ),
            secret(
                "custom",
                include_str!("../../tests/data/certs/rsa1024-sha256.pem"),
            ),
        ]);
        let finding = fixture::evaluate(&IngressCertificateCompatible, &view, "4.16.0");
        assert_eq!(finding.outcome, Outcome::Fail);
        assert!(
            finding.message.contains("openshift-ingress/custom"),
            "{}",
            finding.message
        );
    }
}
