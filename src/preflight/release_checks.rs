//! Checks the target release declares (openshift/enhancements #363): Job
//! manifests in the payload's `release-manifests/` annotated
//! `openshift.io/preflight-check: "true"`, run from the target's own
//! images. An extraction pod runs the target release image (as the CVO's
//! `version-*` pod does), prints those manifests and `image-references`
//! between markers, and ends; the gate reads its log (or, where no log can
//! be read, its termination message). Answers are cached per digest.
//!
//! The pod is owned by the run's `UpdatePreflight` (as its controller), so
//! `oc adm drain` evicts it like any managed pod and the garbage collector
//! removes it with its owner. An extraction that a drain or the API server
//! cut short is started again within the run, with backoff; the pods an
//! earlier leader left are deleted when a replica starts leading
//! ([`collect_orphans`]).
//!
//! The pure parts: the pod ([`extraction_pod`]), reading its output
//! ([`parse_extraction`]) and turning a declared Job into a
//! [`PreflightCheck`] ([`declared_check`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tracing::{info, warn};

use super::jobs::settings::JobSettings;
use crate::model::ClusterVersion;
use crate::model::EnvVar;
use crate::model::FailurePolicy;
use crate::model::Severity;
use crate::model::UpdatePreflight;
// Optional annotations on a declared Job: its result name, severity and
// failure policy, and whether its pod gets an API token.
use crate::model::annotations::{CHECK_NAME, FAILURE_POLICY, NEEDS_API, SEVERITY};
use crate::model::preflight_check::{PreflightCheck, PreflightCheckSpec};
use crate::model::release::ReleaseKey;

/// The annotation that marks a Job manifest as a preflight check.
pub(crate) const DECLARED: &str = "openshift.io/preflight-check";
/// Label on extraction pods.
pub(crate) const EXTRACTION: &str = "preflight.dev/release-extraction";

/// The most of the extraction pod's log the gate reads: 4 MiB. A release's
/// `image-references` and declared Jobs are well under 1 MiB; a log longer
/// than this is refused whole (a cut manifest is never parsed), and the API
/// server is asked for no more of it.
pub(crate) const MAX_EXTRACTION_LOG: usize = 4 * 1024 * 1024;

const BEGIN: &str = "--- preflight-gate begin ";
const END: &str = "--- preflight-gate end";

/// What a release declares.
#[derive(Clone, Debug, Default)]
pub struct Declared {
    /// Component name to pullspec, from `image-references`.
    pub images: BTreeMap<String, String>,
    /// The declared checks, ready to run.
    pub checks: Vec<PreflightCheck>,
    /// The release's version, from its own `release-metadata`.
    pub version: Option<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DiscoveryError {
    #[error("the extraction pod printed no image-references")]
    NoImageReferences,
    #[error("cannot read image-references: {0}")]
    ImageReferences(String),
    #[error("cannot read {file}: {reason}")]
    Manifest { file: String, reason: String },
    #[error("the extraction pod failed: {0}")]
    Pod(String),
    #[error(
        "the extraction pod was deleted before it finished (a node drain, say), and so was its replacement"
    )]
    Gone,
    #[error(
        "the release printed more than {limit} bytes of image-references and declared checks, more than the gate reads"
    )]
    TooLong { limit: usize },
    #[error("{0}")]
    Api(String),
}

/// The script of the extraction pod: print `image-references` and every
/// manifest file that mentions the annotation, each between markers.
pub(crate) fn extraction_script() -> String {
    format!(
        r#"set -eu
cd /release-manifests
out=/dev/termination-log
{{ echo '{BEGIN}image-references'; cat image-references; echo '{END}'
if [ -f release-metadata ]; then echo '{BEGIN}release-metadata'; cat release-metadata; echo '{END}'; fi
for f in $(grep -lE 'openshift\.io/preflight-check' -- *.yaml *.yml 2>/dev/null || true); do
  echo "{BEGIN}$f"; cat -- "$f"; echo '{END}'
done; }} | tee "$out""#
    )
}

impl DiscoveryError {
    /// A failure that another extraction may mend: the pod deleted under
    /// it (a drain), or the API server not answering for a moment. A pull
    /// failure, a bad answer or a pod that failed is not.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Gone | Self::Api(_))
    }
}

/// How an extraction cut short is started again within the run: after
/// about 2 and 4 s (with jitter), while the run has time left.
fn backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_secs(2))
        .with_max_times(2)
        .with_jitter()
}

/// The pod that lists what the release at `image` declares, owned (as its
/// controller) by `owner`, the run's `UpdatePreflight`.
pub(crate) fn extraction_pod(
    image: &str,
    settings: &JobSettings,
    owner: Option<&UpdatePreflight>,
) -> Result<Pod, serde_json::Error> {
    let label = ReleaseKey::from_image(image).label_value();
    // Deleting the owner never waits for the pod.
    let owner_ref = owner
        .and_then(|o| o.controller_owner_ref(&()))
        .map(|mut r| {
            r.block_owner_deletion = Some(false);
            r
        });
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "generateName": "pfx-release-",
            "namespace": settings.namespace,
            "labels": {"app.kubernetes.io/managed-by": "preflight-gate", EXTRACTION: label},
            "annotations": {
                crate::preflight::jobs::REQUIRED_SCC: crate::preflight::jobs::RESTRICTED_SCC,
            },
            "ownerReferences": owner_ref.into_iter().collect::<Vec<_>>(),
        },
        "spec": {
            "serviceAccountName": settings.service_account,
            "automountServiceAccountToken": false,
            "restartPolicy": "Never",
            "activeDeadlineSeconds": 120,
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "extract",
                "image": image,
                "command": ["/bin/sh", "-c", extraction_script()],
                "terminationMessagePolicy": "File",
                "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}},
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "readOnlyRootFilesystem": true,
                    "runAsNonRoot": true,
                    "capabilities": {"drop": ["ALL"]},
                },
            }],
        },
    }))
}

/// How the extraction pod's log is read: one byte past
/// [`MAX_EXTRACTION_LOG`], so that a log cut at the limit is told from one
/// that ends there.
fn log_params() -> LogParams {
    LogParams {
        limit_bytes: Some(MAX_EXTRACTION_LOG as i64 + 1),
        ..LogParams::default()
    }
}

/// The extraction pod's log as read with [`log_params`], or
/// [`DiscoveryError::TooLong`] when it is longer than `limit` bytes. A log
/// cut inside a character does not decode, so the length of a log that
/// fails to decode counts too. Any other failure to read is passed on.
pub(crate) fn within_limit(
    log: kube::Result<String>,
    limit: usize,
) -> Result<kube::Result<String>, DiscoveryError> {
    let len = match &log {
        Ok(text) => text.len(),
        Err(kube::Error::FromUtf8(e)) => e.as_bytes().len(),
        Err(_) => 0,
    };
    if len > limit {
        return Err(DiscoveryError::TooLong { limit });
    }
    Ok(log)
}

/// Sections of the output, by name.
fn sections(output: &str) -> Vec<(&str, String)> {
    let mut out = Vec::new();
    let mut current: Option<(&str, Vec<&str>)> = None;
    for line in output.lines() {
        if let Some(name) = line.strip_prefix(BEGIN) {
            current = Some((name.trim(), Vec::new()));
        } else if line.trim_end() == END {
            if let Some((name, lines)) = current.take() {
                out.push((name, lines.join("\n")));
            }
        } else if let Some((_, lines)) = current.as_mut() {
            lines.push(line);
        }
    }
    out
}

fn image_references(text: &str) -> Result<BTreeMap<String, String>, DiscoveryError> {
    let stream: Value =
        serde_saphyr::from_str(text).map_err(|e| DiscoveryError::ImageReferences(e.to_string()))?;
    let tags = stream["spec"]["tags"]
        .as_array()
        .ok_or_else(|| DiscoveryError::ImageReferences("no spec.tags".into()))?;
    Ok(tags
        .iter()
        .filter_map(|t| {
            Some((
                t["name"].as_str()?.to_owned(),
                t["from"]["name"].as_str()?.to_owned(),
            ))
        })
        .collect())
}

/// `my-operator-check` → `MyOperatorCheck`, a name `acceptRisks` accepts.
fn camel(name: &str) -> String {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut chars = p.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// A declared Job as a check to run: its first container's image, command,
/// args and literal env, its deadline, and the annotations. Everything else
/// of the Job (its namespace, account, security context) is the gate's.
/// `Ok(None)` for a manifest that declares no check; an error, saying why,
/// for a declared check whose name (its `preflight.dev/check-name`, else
/// its Job's name in CamelCase) is not a check name: the name reaches
/// terminals and the commands a denial suggests.
pub(crate) fn declared_check(job: &Value) -> Result<Option<PreflightCheck>, String> {
    let annotations = &job["metadata"]["annotations"];
    if annotations[DECLARED].as_str() != Some("true") || job["kind"] != "Job" {
        return Ok(None);
    }
    let Some(name) = job["metadata"]["name"].as_str() else {
        return Ok(None);
    };
    let check_name = annotations[CHECK_NAME]
        .as_str()
        .map_or_else(|| camel(name), str::to_owned);
    if let Err(refused) = crate::model::results::check_name(&check_name) {
        let from = if annotations[CHECK_NAME].is_string() {
            CHECK_NAME
        } else {
            "its name"
        };
        return Err(format!(
            "the Job {} declares a check whose name ({from}) is refused: {refused}",
            crate::model::text::escaped(name, 80)
        ));
    }
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let env = container["env"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| {
                    Some(EnvVar {
                        name: e["name"].as_str()?.to_owned(),
                        value: e["value"].as_str()?.to_owned(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let spec = PreflightCheckSpec {
        check_name,
        image: container["image"].as_str().map(str::to_owned),
        from_release: None,
        command: strings(&container["command"]),
        args: strings(&container["args"]),
        env,
        timeout_seconds: job["spec"]["activeDeadlineSeconds"]
            .as_u64()
            .and_then(|s| u32::try_from(s).ok()),
        severity: match annotations[SEVERITY].as_str() {
            Some("Warning") => Severity::Warning,
            _ => Severity::Blocking,
        },
        applies_to: Default::default(),
        failure_policy: match annotations[FAILURE_POLICY].as_str() {
            Some("FailOpen") => FailurePolicy::FailOpen,
            _ => FailurePolicy::FailClosed,
        },
        api_access: Some(annotations[NEEDS_API].as_str() == Some("true")),
    };
    Ok(Some(PreflightCheck::new(&format!("release-{name}"), spec)))
}

/// Reads what the extraction pod printed.
pub(crate) fn parse_extraction(output: &str) -> Result<Declared, DiscoveryError> {
    let sections = sections(output);
    let images = sections
        .iter()
        .find(|(name, _)| *name == "image-references")
        .ok_or(DiscoveryError::NoImageReferences)
        .and_then(|(_, text)| image_references(text))?;
    // The release's own word on its version (`cincinnati-metadata-v0`);
    // unreadable metadata leaves it unknown rather than failing discovery.
    let version = sections
        .iter()
        .find(|(name, _)| *name == "release-metadata")
        .and_then(|(_, text)| serde_json::from_str::<Value>(text).ok())
        .and_then(|m| m["version"].as_str().map(str::to_owned))
        .filter(|v| crate::model::release::Version::parse(v).is_some());
    let mut checks = Vec::new();
    for (file, text) in sections
        .iter()
        .filter(|(n, _)| !matches!(*n, "image-references" | "release-metadata"))
    {
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(text).map_err(|e| DiscoveryError::Manifest {
                file: (*file).to_owned(),
                reason: e.to_string(),
            })?;
        // A declared check with a name that is not one refuses the
        // release's declared checks whole, as a manifest that is not YAML
        // does: never silently dropped.
        for doc in &docs {
            let declared = declared_check(doc).map_err(|reason| DiscoveryError::Manifest {
                file: (*file).to_owned(),
                reason,
            })?;
            // A declared Job runs one of the release's own images, named
            // by digest: never a tag, nor an image the release does not list.
            if let Some(check) = &declared {
                let image = check.spec.image.as_deref().unwrap_or_default();
                if !image.contains("@sha256:") || !images.values().any(|listed| listed == image) {
                    return Err(DiscoveryError::Manifest {
                        file: (*file).to_owned(),
                        reason: format!(
                            "the image {image:?} of declared check {} is not one of the release's image-references, by digest",
                            check.spec.check_name
                        ),
                    });
                }
            }
            checks.extend(declared);
        }
    }
    Ok(Declared {
        images,
        checks,
        version,
    })
}

/// Whether the administrator trusts release `image` without a signature:
/// `--trusted-releases` names its digest (none by default). Ok(Some) says
/// which entry; Ok(None) leaves it to the release's signature
/// ([`crate::preflight::signature`]); Err refuses a release not named by a
/// digest outright. Only a digest is trusted, never a repository: whoever
/// can push to a repository (a mirror, in a disconnected cluster) decides
/// what its digests serve. Offered by the update graph counts for nothing
/// either: whoever may set `spec.upstream` chooses the graph. Pure.
pub(crate) fn listed(image: &str, trusted: &[String]) -> Result<Option<String>, String> {
    let key = ReleaseKey::from_image(image);
    if !key.is_digest() {
        return Err(format!(
            "{image} is not named by a digest, so what runs could not be told from what was checked"
        ));
    }
    Ok(trusted
        .iter()
        .map(|t| t.trim())
        .find(|entry| {
            let listed = ReleaseKey::from_image(entry);
            listed.is_digest() && listed == key
        })
        .map(|entry| format!("--trusted-releases lists {entry}")))
}

/// Whether the cluster itself names release `image` as a target: its
/// update graph offers the digest, or its stored target change does
/// (`spec.desiredUpdate.image`, or the release the CVO is moving to). A
/// release is extracted for no other reason: creating an object for a
/// digest, which an updater may, names nothing. Ok says which; Err why
/// not. Pure.
pub(crate) fn named_by_cluster(
    cluster: Option<&ClusterVersion>,
    image: &str,
) -> Result<&'static str, String> {
    let key = ReleaseKey::from_image(image);
    let names = |other: &str| !other.is_empty() && ReleaseKey::from_image(other) == key;
    if let Some(cv) = cluster {
        if crate::preflight::live::offered(cv)
            .iter()
            .any(|r| names(&r.image))
        {
            return Ok("the update graph offers it");
        }
        let stored = cv
            .spec
            .desired_update
            .as_ref()
            .and_then(|u| u.image.as_deref());
        if stored.is_some_and(names) || names(&cv.status.desired.image) {
            return Ok("the ClusterVersion's stored target names it");
        }
    }
    Err(format!(
        "neither the ClusterVersion's update graph offers {image} nor does its stored target name it, and a release is extracted for nothing else"
    ))
}

/// What releases declare, per digest; and the one extraction pod that may
/// run at a time, so each digest is extracted once however many runs ask.
pub struct Cache {
    declared: Mutex<HashMap<ReleaseKey, Declared>>,
    extracting: tokio::sync::Semaphore,
}

impl Default for Cache {
    fn default() -> Self {
        Self {
            declared: Mutex::default(),
            extracting: tokio::sync::Semaphore::new(1),
        }
    }
}

impl Cache {
    /// What the release at `image` declares: from the cache, else from an
    /// extraction pod owned by `owner`, one at a time, started again with
    /// [`backoff`] while a failure [`is_transient`](DiscoveryError::is_transient)
    /// and the run has time left.
    pub async fn declared(
        &self,
        client: &kube::Client,
        image: &str,
        settings: &JobSettings,
        owner: Option<&UpdatePreflight>,
        deadline: Instant,
    ) -> Result<Declared, DiscoveryError> {
        if let Some(found) = self.get(image) {
            return Ok(found);
        }
        let limit = deadline.saturating_duration_since(Instant::now());
        let _turn = tokio::time::timeout(limit, self.extracting.acquire())
            .await
            .map_err(|_| {
                DiscoveryError::Pod("another release's extraction took the run's time".into())
            })?
            .map_err(|e| DiscoveryError::Api(e.to_string()))?;
        // Another run may have extracted it while this one waited.
        if let Some(found) = self.get(image) {
            return Ok(found);
        }
        let found = (|| {
            discover(
                client,
                image,
                settings,
                owner,
                deadline.saturating_duration_since(Instant::now()),
            )
        })
        .retry(backoff())
        .when(|e| e.is_transient() && deadline > Instant::now() + Duration::from_secs(10))
        .notify(|error, after| {
            warn!(%error, ?after, "the release extraction was cut short; starting it again")
        })
        .await?;
        self.insert(image, found.clone());
        Ok(found)
    }

    pub(crate) fn get(&self, image: &str) -> Option<Declared> {
        let map = self.declared.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&ReleaseKey::from_image(image)).cloned()
    }
    pub(crate) fn insert(&self, image: &str, declared: Declared) {
        let mut map = self.declared.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(ReleaseKey::from_image(image), declared);
    }
}

/// Runs the extraction pod for `image` and reads its answer, from the log,
/// or from the termination message when no log can be read. The pod is
/// deleted afterwards.
pub(crate) async fn discover(
    client: &kube::Client,
    image: &str,
    settings: &JobSettings,
    owner: Option<&UpdatePreflight>,
    timeout: Duration,
) -> Result<Declared, DiscoveryError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &settings.namespace);
    let manifest =
        extraction_pod(image, settings, owner).map_err(|e| DiscoveryError::Api(e.to_string()))?;
    let pod = pods
        .create(&PostParams::default(), &manifest)
        .await
        .map_err(|e| DiscoveryError::Api(format!("cannot create the extraction pod: {e}")))?;
    let name = pod.name_any();
    info!(pod = %name, %image, "release extraction pod created");
    // The pod's own deadline is 120 s; allow for scheduling besides.
    let timeout = timeout.min(settings.schedule_timeout + Duration::from_secs(120));
    let deadline = Instant::now() + timeout;
    let answer = loop {
        let pod = match pods.get_opt(&name).await {
            Ok(Some(pod)) => pod,
            Ok(None) => break Err(DiscoveryError::Gone),
            Err(e) => break Err(DiscoveryError::Api(e.to_string())),
        };
        let status = pod.status.as_ref();
        let container = status
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first());
        let state = container.and_then(|c| c.state.as_ref());
        if let Some(done) = state.and_then(|s| s.terminated.as_ref()) {
            if done.exit_code != 0 {
                break Err(DiscoveryError::Pod(format!(
                    "exit code {}: {}",
                    done.exit_code,
                    done.message.as_deref().unwrap_or("")
                )));
            }
            let log = pods.logs(&name, &log_params()).await;
            let log = match within_limit(log, MAX_EXTRACTION_LOG) {
                Ok(log) => log,
                Err(too_long) => break Err(too_long),
            };
            let output = match log {
                Ok(log) if !log.trim().is_empty() => log,
                Ok(_) | Err(_) => {
                    if let Err(e) = &log {
                        warn!(error = %e, pod = %name, "cannot read the extraction pod's log; reading its termination message");
                    }
                    done.message.clone().unwrap_or_default()
                }
            };
            break parse_extraction(&output);
        }
        if let Some(waiting) = state.and_then(|s| s.waiting.as_ref())
            && let Some(reason) = waiting.reason.as_deref()
        {
            let detail = waiting
                .message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            if matches!(
                reason,
                "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName"
            ) {
                break Err(DiscoveryError::Pod(format!(
                    "cannot pull the release image {image} ({reason}){detail}"
                )));
            }
            if matches!(
                reason,
                "CreateContainerConfigError" | "CreateContainerError" | "RunContainerError"
            ) {
                break Err(DiscoveryError::Pod(format!(
                    "its container cannot start ({reason}){detail}"
                )));
            }
        }
        if Instant::now() >= deadline {
            break Err(DiscoveryError::Pod(format!(
                "it did not finish within {}",
                humantime::format_duration(timeout)
            )));
        }
        tokio::time::sleep(settings.poll).await;
    };
    if let Err(e) = pods.delete(&name, &DeleteParams::default()).await
        && !matches!(answer, Err(DiscoveryError::Gone))
    {
        warn!(error = %e, pod = %name, "cannot delete the extraction pod");
    }
    answer
}

/// Deletes the extraction pods in the jobs namespace: called when a
/// replica starts leading, before it starts any, so every one found was
/// left by an earlier leader (which lost the Lease or died mid-run).
/// Returns how many were deleted.
pub async fn collect_orphans(
    client: &kube::Client,
    settings: &JobSettings,
) -> Result<usize, kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &settings.namespace);
    let left = pods.list(&ListParams::default().labels(EXTRACTION)).await?;
    let mut deleted = 0;
    for pod in left {
        let name = pod.name_any();
        match pods.delete(&name, &DeleteParams::background()).await {
            Ok(_) => {
                info!(pod = %name, "an extraction pod an earlier leader left was deleted");
                deleted += 1;
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => warn!(error = %e, pod = %name, "cannot delete an orphaned extraction pod"),
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests;
