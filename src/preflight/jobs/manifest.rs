//! What a check turns into before anything is created, pure: [`image_to_run`] (skip,
//! or which image) and [`job_manifest`] (a restricted pod with a deadline,
//! the update in its environment, labels and an ownerReference).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::settings::JobSettings;
use crate::model::Finding;
use crate::model::UpdatePreflight;
use crate::model::annotations::UPDATE_PREFLIGHT;
use crate::model::preflight_check::{DEFAULT_TIMEOUT_SECONDS, NotApplicable, PreflightCheck};
use crate::model::release::{UpdateKind, Version};

/// The pod annotation that makes OpenShift admit a pod under the named SCC
/// or refuse it (4.14 and later).
pub(crate) const REQUIRED_SCC: &str = "openshift.io/required-scc";
/// The SCC every pod the gate starts runs under.
pub(crate) const RESTRICTED_SCC: &str = "restricted-v2";

/// The name of the check's container in the Job's pod.
pub(super) const CONTAINER: &str = "check";
/// Label on Jobs and pods: the UID of the `UpdatePreflight` the run is for.
pub(super) const OWNER_UID: &str = "preflight.dev/update-preflight-uid";
/// Label on Jobs and pods: the result name of the check.
pub(super) const CHECK: &str = "preflight.dev/check";
/// Label on Jobs and pods: the `PreflightCheck` object.
pub(super) const PREFLIGHT_CHECK: &str = "preflight.dev/preflight-check";

/// The update a run is for, as a check's environment tells it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Update {
    pub target_image: String,
    pub target_version: Option<Version>,
    pub current_image: String,
    pub current_version: Option<Version>,
}

impl Update {
    pub fn kind(&self) -> Option<UpdateKind> {
        match (&self.current_version, &self.target_version) {
            (Some(c), Some(t)) => Some(UpdateKind::between(c, t)),
            _ => None,
        }
    }
}

/// What a check's spec turns into before anything is created: the image to
/// run, or a result without running (skipped, or a spec that cannot run).
/// `images` are the target release's `image-references`, when known.
pub(super) fn image_to_run(
    check: &PreflightCheck,
    update: &Update,
    images: Option<&BTreeMap<String, String>>,
) -> Result<String, Finding> {
    let spec = &check.spec;
    match spec
        .applies_to
        .check(update.target_version.as_ref(), update.kind())
    {
        Ok(()) => {}
        Err(NotApplicable::BadRange(why)) => return Err(Finding::error(why)),
        // Whether it applies cannot be told: failing, never skipped.
        Err(NotApplicable::UnknownVersion) => {
            return Err(Finding::fail(format!(
                "version unknown: this check {}",
                NotApplicable::UnknownVersion
            )));
        }
        Err(why) => return Err(Finding::skipped(why.to_string())),
    }
    match (&spec.image, &spec.from_release) {
        (Some(image), None) if !image.trim().is_empty() => Ok(image.trim().to_owned()),
        (None, Some(component)) => match images {
            Some(images) => images.get(component.trim()).cloned().ok_or_else(|| {
                Finding::error(format!(
                    "fromRelease {component:?}: the target release has no such component in its image-references"
                ))
            }),
            None => Err(Finding::error(format!(
                "fromRelease {component:?}: the target release's image-references are not known (release checks are off, or its extraction failed)"
            ))),
        },
        _ => Err(Finding::error(
            "the PreflightCheck must give exactly one of image and fromRelease",
        )),
    }
}

/// A label value, if the text is one (63 characters of `[A-Za-z0-9._-]`,
/// alphanumeric at both ends).
fn label_value(text: &str) -> Option<String> {
    let ok = !text.is_empty()
        && text.len() <= 63
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && text.starts_with(|c: char| c.is_ascii_alphanumeric())
        && text.ends_with(|c: char| c.is_ascii_alphanumeric());
    ok.then(|| text.to_owned())
}

/// `generateName` of a check's Job: `pfc-<check>-`, a DNS label prefix.
fn generate_name(check_name: &str) -> String {
    let mut name = String::from("pfc-");
    for c in check_name.chars().flat_map(char::to_lowercase) {
        if name.len() >= 40 {
            break;
        }
        let c = if c.is_ascii_alphanumeric() { c } else { '-' };
        if !(c == '-' && name.ends_with('-')) {
            name.push(c);
        }
    }
    format!("{}-", name.trim_end_matches('-'))
}

/// The Job that runs `check` from `image` for the run of `owner`.
pub(super) fn job_manifest(
    check: &PreflightCheck,
    image: &str,
    owner: &UpdatePreflight,
    update: &Update,
    settings: &JobSettings,
) -> Result<Job, serde_json::Error> {
    let spec = &check.spec;
    let timeout = spec.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS);
    let mut labels = BTreeMap::from([(
        "app.kubernetes.io/managed-by".to_owned(),
        "preflight-gate".to_owned(),
    )]);
    if let Some(uid) = owner.meta().uid.as_deref().and_then(label_value) {
        labels.insert(OWNER_UID.into(), uid);
    }
    if let Some(name) = label_value(&spec.check_name) {
        labels.insert(CHECK.into(), name);
    }
    if let Some(name) = label_value(&check.name_any()) {
        labels.insert(PREFLIGHT_CHECK.into(), name);
    }
    let version = |v: &Option<Version>| v.as_ref().map(Version::to_string).unwrap_or_default();
    let ours = [
        ("TARGET_VERSION", version(&update.target_version)),
        ("TARGET_IMAGE", update.target_image.clone()),
        ("CURRENT_VERSION", version(&update.current_version)),
        ("CURRENT_IMAGE", update.current_image.clone()),
    ];
    let env: Vec<serde_json::Value> = spec
        .env
        .iter()
        .filter(|e| !ours.iter().any(|(name, _)| *name == e.name))
        .map(|e| json!({"name": e.name, "value": e.value}))
        .chain(
            ours.iter()
                .map(|(name, value)| json!({"name": name, "value": value})),
        )
        .collect();
    let owner_ref = owner.controller_owner_ref(&()).map(|mut r| {
        // The Job must not hold up the deletion of its UpdatePreflight.
        r.block_owner_deletion = Some(false);
        r
    });
    let mut container = json!({
        "name": CONTAINER,
        "image": image,
        "env": env,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "resources": {
            "requests": {"cpu": "50m", "memory": "64Mi"},
            "limits": {"cpu": "500m", "memory": "256Mi", "ephemeral-storage": "64Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": false,
            "readOnlyRootFilesystem": true,
            "runAsNonRoot": true,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    });
    if !spec.command.is_empty() {
        container["command"] = json!(spec.command);
    }
    if !spec.args.is_empty() {
        container["args"] = json!(spec.args);
    }
    serde_json::from_value(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "generateName": generate_name(&spec.check_name),
            "namespace": settings.namespace,
            "labels": labels,
            "annotations": {UPDATE_PREFLIGHT: owner.name_any()},
            "ownerReferences": owner_ref.into_iter().collect::<Vec<_>>(),
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": timeout,
            "ttlSecondsAfterFinished": settings.ttl_after_finished.as_secs(),
            "template": {
                // OpenShift admits the pod under restricted-v2 or not at
                // all: a broader SCC the account may hold is never chosen.
                "metadata": {"labels": labels, "annotations": {REQUIRED_SCC: RESTRICTED_SCC}},
                "spec": {
                    "serviceAccountName": settings.service_account,
                    // A release's own check reads the cluster only when it
                    // says it must (`preflight.dev/needs-api`).
                    "automountServiceAccountToken": spec.api_access(),
                    "restartPolicy": "Never",
                    "securityContext": {
                        "runAsNonRoot": true,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
                },
            },
        },
    }))
}
