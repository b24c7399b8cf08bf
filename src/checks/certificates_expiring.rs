//! CertificatesExpiringSoon: no serving certificate (a `kubernetes.io/tls`
//! Secret) that a person must renew expires within the update window, when
//! operators restart and nodes reboot and a rotation is most likely to be
//! missed. Certificates something renews by itself (the service CA
//! operator, an OpenShift operator's certificate rotation, a platform
//! component that owns the certificate, cert-manager: see
//! `ROTATION_ANNOTATIONS`, and `PLATFORM_ROTATED` for the platform's own
//! that older releases ship unannotated, such as OLM's daily `pprof-cert`)
//! are counted, not listed. OLM's certificates for an operator's webhooks
//! and API services (owned by a ClusterServiceVersion, or annotated
//! `olmcahash`) are rotated by OLM too: one that has expired is listed as
//! OLM's rotation stuck, naming its CSV, never as one to renew by hand.
//! Expiry is judged at the time of the data.

use std::time::Duration;

use super::x509::leaf;
use super::{Check, Context, qualified, require};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::text::list;
use crate::view::k8s::OLM;
use crate::view::kinds;

pub struct CertificatesExpiringSoon;

/// How long an update is assumed to take, node reboots included.
pub(crate) const UPDATE_WINDOW: Duration = Duration::from_secs(72 * 3600);

const URL: &str = "https://docs.openshift.com/container-platform/latest/security/certificate_types_descriptions/index.html";

impl Check for CertificatesExpiringSoon {
    fn name(&self) -> &'static str {
        "CertificatesExpiringSoon"
    }

    fn severity(&self) -> Severity {
        Severity::Warning
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        if let Err(skip) = require(ctx.view, &[kinds::SECRET]) {
            return skip;
        }
        let Ok(horizon) = ctx.now.checked_add(UPDATE_WINDOW) else {
            return Finding::error("the update window is out of range");
        };
        // One pass: each certificate is read once, and counts either as one
        // a person renews or as one an operator renews by itself.
        let (mut by_hand, mut rotated) = (0usize, 0usize);
        let mut expiring: Vec<(jiff::Timestamp, String)> = Vec::new();
        // Certificates OLM rotates that expired all the same.
        let mut stuck: Vec<(jiff::Timestamp, String)> = Vec::new();
        for s in &ctx.view.tls_secrets {
            if s.rotated_by.is_none() {
                by_hand += 1;
            }
            let Ok(cert) = leaf(&s.certificate) else {
                continue;
            };
            if cert.not_after > horizon {
                continue;
            }
            let name = qualified(&s.namespace, &s.name);
            // OLM renews its certificates well before they expire: one
            // that has expired means its rotation is stuck, which the CSV
            // that owns it (or OLM's own logs) tells, not a person's renewal.
            if s.rotated_by == Some(OLM) && cert.not_after <= ctx.now {
                let owner = match &s.olm_csv {
                    Some(csv) => format!(" (ClusterServiceVersion {csv})"),
                    None => String::new(),
                };
                stuck.push((
                    cert.not_after,
                    format!("{name} expired at {}{owner}", cert.not_after),
                ));
                continue;
            }
            if s.rotated_by.is_some() {
                rotated += 1;
                continue;
            }
            let when = if cert.not_after <= ctx.now {
                format!("expired at {}", cert.not_after)
            } else {
                format!("expires at {}", cert.not_after)
            };
            expiring.push((cert.not_after, format!("{name} {when}")));
        }
        expiring.sort();
        stuck.sort();
        let hours = UPDATE_WINDOW.as_secs() / 3600;
        let by_operators = match rotated {
            0 => String::new(),
            n => format!(
                "; {n} that operators renew by themselves (service CA, certificate rotation, platform components, cert-manager) also expire within it and need no action"
            ),
        };
        if expiring.is_empty() && stuck.is_empty() {
            return Finding::pass(format!(
                "none of {by_hand} TLS certificates renewed by hand expires within {hours} hours of {}{by_operators}",
                ctx.now
            ));
        }
        let by_hand: Vec<String> = expiring.into_iter().map(|(_, n)| n).collect();
        let stuck: Vec<String> = stuck.into_iter().map(|(_, n)| n).collect();
        let mut said = Vec::new();
        if !by_hand.is_empty() {
            said.push(format!(
                "certificates renewed by hand that expire within the {hours}-hour update window: {}",
                list(&by_hand, 5)
            ));
        }
        if !stuck.is_empty() {
            said.push(format!(
                "certificates OLM rotates by itself that expired all the same, so its rotation is stuck (see the ClusterServiceVersion's status and OLM's logs): {}",
                list(&stuck, 5)
            ));
        }
        let items: Vec<String> = by_hand.into_iter().chain(stuck).collect();
        Finding::fail(format!("{}{by_operators}", said.join("; ")))
            .with_items(&items, 5)
            .with_url(URL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixture;
    use crate::model::Outcome;
    use base64::Engine;
    use rstest::rstest;
    use serde_json::json;

    #[test]
    fn certificates_operators_renew_are_counted_not_listed() {
        let mut rotated = secret((2026, 12, 1));
        rotated["metadata"]["name"] = json!("metrics-tls");
        rotated["metadata"]["annotations"] =
            json!({"service.beta.openshift.io/originating-service-name": "metrics"});
        let mut signer = secret((2026, 11, 30));
        signer["metadata"]["name"] = json!("aggregator-client");
        signer["metadata"]["annotations"] =
            json!({"auth.openshift.io/certificate-not-after": "2026-11-30T00:00:00Z"});
        let view = fixture::view(vec![rotated, signer, secret((2027, 6, 1))]);
        let finding = fixture::evaluate(&CertificatesExpiringSoon, &view, "4.15.4");
        assert_eq!(finding.outcome, Outcome::Pass, "{}", finding.message);
        assert!(
            finding
                .message
                .contains("none of 1 TLS certificates renewed by hand")
                && finding
                    .message
                    .contains("2 that operators renew by themselves"),
            "{}",
            finding.message
        );
    }

    fn secret(not_after: (i32, u8, u8)) -> serde_json::Value {
        let mut params = rcgen::CertificateParams::new(vec!["api.example".into()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2026, 1, 1);
        params.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, not_after.2);
        let key = rcgen::KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        json!({"kind": "Secret", "type": "kubernetes.io/tls", "metadata": {"name": "serving", "namespace": "app"},
               "data": {"tls.crt": base64::engine::general_purpose::STANDARD.encode(pem)}})
    }

    /// What the platform renews by itself, by its annotations or, for the
    /// platform's own that older releases leave unannotated, by name.
    #[rstest]
    #[case::owned_by_a_platform_component("openshift-operator-lifecycle-manager", "pprof-cert",
        json!({"openshift.io/owning-component": "Operator Framework / operator-lifecycle-manager"}), Outcome::Pass)]
    #[case::olms_pprof_cert_unannotated("openshift-operator-lifecycle-manager", "pprof-cert", json!({}), Outcome::Pass)]
    #[case::the_csr_signer("openshift-kube-controller-manager-operator", "csr-signer", json!({}), Outcome::Pass)]
    #[case::the_csr_signers_copy("openshift-kube-controller-manager", "csr-signer", json!({}), Outcome::Pass)]
    #[case::a_rotated_signer_by_its_issuer("openshift-kube-apiserver-operator", "node-system-admin-signer",
        json!({"auth.openshift.io/certificate-issuer": "openshift-kube-apiserver-operator_node-system-admin-signer@1700000000"}), Outcome::Pass)]
    #[case::the_same_name_elsewhere("shop", "pprof-cert", json!({}), Outcome::Fail)]
    #[case::a_platform_namespace_is_not_enough("openshift-ingress", "custom-certs", json!({}), Outcome::Fail)]
    fn what_the_platform_renews_itself(
        #[case] namespace: &str,
        #[case] name: &str,
        #[case] annotations: serde_json::Value,
        #[case] outcome: Outcome,
    ) {
        let mut s = secret((2026, 12, 1));
        s["metadata"] = json!({"name": name, "namespace": namespace, "annotations": annotations});
        let finding =
            fixture::evaluate(&CertificatesExpiringSoon, &fixture::view(vec![s]), "4.15.4");
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        if outcome == Outcome::Pass {
            assert!(
                finding
                    .message
                    .contains("1 that operators renew by themselves"),
                "{}",
                finding.message
            );
        }
    }

    /// OLM rotates the certificates it issues to an operator's webhooks
    /// and API services: they are never a person's to renew. Expiring soon
    /// they need nothing; expired, OLM's rotation is stuck, which is worth
    /// a warning naming the CSV.
    #[rstest]
    #[case::owned_by_a_csv_expiring_soon((2026, 12, 2), json!({}), true, Outcome::Pass,
        "1 that operators renew by themselves")]
    #[case::annotated_expiring_soon((2026, 12, 2), json!({"olm.operatorframework.io/olmcahash": "abc"}), false,
        Outcome::Pass, "1 that operators renew by themselves")]
    #[case::owned_by_a_csv_expired((2026, 11, 1), json!({}), true, Outcome::Fail,
        "certificates OLM rotates by itself that expired all the same, so its rotation is stuck (see the ClusterServiceVersion's status and OLM's logs): shop/db-operator-service-cert expired at 2026-11-01T00:00:00Z (ClusterServiceVersion db-operator.v1.2.0)")]
    #[case::annotated_expired((2026, 11, 1), json!({"olmcahash": "abc"}), false, Outcome::Fail,
        "its rotation is stuck (see the ClusterServiceVersion's status and OLM's logs): shop/db-operator-service-cert expired at 2026-11-01T00:00:00Z")]
    fn certificates_olm_rotates_are_never_renewed_by_hand(
        #[case] not_after: (i32, u8, u8),
        #[case] annotations: serde_json::Value,
        #[case] owned: bool,
        #[case] outcome: Outcome,
        #[case] says: &str,
    ) {
        let mut s = secret(not_after);
        s["metadata"] = json!({"name": "db-operator-service-cert", "namespace": "shop", "annotations": annotations});
        if owned {
            s["metadata"]["ownerReferences"] = json!([{"apiVersion": "operators.coreos.com/v1alpha1",
                "kind": "ClusterServiceVersion", "name": "db-operator.v1.2.0", "uid": "u"}]);
        }
        let finding =
            fixture::evaluate(&CertificatesExpiringSoon, &fixture::view(vec![s]), "4.15.4");
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
        assert!(
            !finding.message.contains("renewed by hand that"),
            "{}",
            finding.message
        );
    }

    #[test]
    fn another_owner_of_that_kind_is_not_olm() {
        let mut s = secret((2026, 12, 2));
        s["metadata"]["ownerReferences"] = json!([{"apiVersion": "example.com/v1",
            "kind": "ClusterServiceVersion", "name": "x", "uid": "u"}]);
        let finding =
            fixture::evaluate(&CertificatesExpiringSoon, &fixture::view(vec![s]), "4.15.4");
        assert_eq!(finding.outcome, Outcome::Fail, "{}", finding.message);
        assert!(
            finding.message.contains(
                "renewed by hand that expire within the 72-hour update window: app/serving"
            ),
            "{}",
            finding.message
        );
    }

    #[rstest]
    #[case::far((2027, 6, 1), Outcome::Pass, "none of 1 TLS certificates renewed by hand expires within 72 hours")]
    #[case::within_window((2026, 12, 2), Outcome::Fail, "app/serving expires at 2026-12-02T00:00:00Z")]
    #[case::expired((2026, 11, 1), Outcome::Fail, "app/serving expired at 2026-11-01")]
    fn expiry(#[case] not_after: (i32, u8, u8), #[case] outcome: Outcome, #[case] says: &str) {
        let finding = fixture::evaluate(
            &CertificatesExpiringSoon,
            &fixture::view(vec![secret(not_after)]),
            "4.15.4",
        );
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
    }
}
