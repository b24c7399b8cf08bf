//! The API calls of one run's external checks: the target release's
//! declared checks (through `release_checks`) and the cluster's
//! `PreflightCheck`s, each created as a Job and watched until it ends or
//! the run's deadline, all at once.

use std::collections::BTreeMap;
use std::time::Instant;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams, PropagationPolicy};
use tracing::{Instrument, info, info_span, warn};

use super::manifest::{Update, image_to_run, job_manifest};
use super::progress::{Progress, check_container, progress_of, result};
use super::settings::JobSettings;
use crate::model::CheckResult;
use crate::model::ClusterVersion;
use crate::model::Finding;
use crate::model::Outcome;
use crate::model::UpdatePreflight;
use crate::model::preflight_check::PreflightCheck;
use crate::preflight::release_checks::{Cache, Declared, listed, named_by_cluster};
use crate::preflight::signature;

/// The result name when the target release's declared checks cannot be listed.
const RELEASE_DISCOVERY: &str = "ReleaseDeclaredChecks";
/// The label the Job controller puts on a Job's pods.
const JOB_NAME: &str = "batch.kubernetes.io/job-name";

/// The `PreflightCheck`s a run includes: those named in `selection`, or all
/// when it is empty.
pub(super) fn selected<'a>(
    checks: &'a [PreflightCheck],
    selection: &[String],
) -> impl Iterator<Item = &'a PreflightCheck> {
    checks
        .iter()
        .filter(move |c| selection.is_empty() || selection.contains(&c.spec.check_name))
}

/// What the target release declares, for a run: nothing when release
/// checks are off; its declared checks when `cluster` offers or targets the
/// release ([`named_by_cluster`]) and it is trusted ([`trusted`]);
/// otherwise a result that says why they were not run.
pub async fn release_declared(
    client: &kube::Client,
    cluster: Option<&ClusterVersion>,
    owner: &UpdatePreflight,
    update: &Update,
    settings: &JobSettings,
    deadline: Instant,
    releases: &Cache,
) -> Result<Option<Declared>, CheckResult> {
    if !settings.release_checks || update.target_image.is_empty() {
        return Ok(None);
    }
    let allowed = match named_by_cluster(cluster, &update.target_image) {
        Ok(_) => trusted(client, &update.target_image, settings).await,
        Err(why) => Err(why),
    };
    if let Err(why) = allowed {
        info!(%why, "the target release's own checks are not run");
        return Err(CheckResult::new(
            RELEASE_DISCOVERY,
            crate::model::Severity::Warning,
            Outcome::Fail,
            format!(
                "the checks the target release declares were not run: {why}; only a release the cluster offers or targets, and whose signature verifies (or whose digest --trusted-releases names), runs as pods"
            ),
        ));
    }
    match releases
        .declared(
            client,
            &update.target_image,
            settings,
            Some(owner),
            deadline,
        )
        .await
    {
        Ok(found) => {
            info!(
                checks = found.checks.len(),
                version = ?found.version,
                "the target release's declared checks"
            );
            Ok(Some(found))
        }
        Err(e) => {
            warn!(error = %e, "cannot list the target release's declared checks");
            Err(CheckResult::new(
                RELEASE_DISCOVERY,
                crate::model::Severity::Blocking,
                Outcome::Error,
                format!("cannot list the checks the target release declares: {e}"),
            ))
        }
    }
}

/// Why release `image` may run as pods (its extraction pod and declared
/// Jobs), or why not: `--trusted-releases` lists it, or its signature
/// verifies as the CVO would verify it ([`signature`]). What the update
/// graph offers is never enough on its own.
pub async fn trusted(
    client: &kube::Client,
    image: &str,
    settings: &JobSettings,
) -> Result<String, String> {
    match listed(image, &settings.trusted_releases)? {
        Some(why) => Ok(why),
        None => signature::fetch::verify_release(client, image)
            .await
            .map_err(|why| format!("--trusted-releases does not list {image}, and {why}")),
    }
}

/// Runs every selected `PreflightCheck` as a Job, all at once, with the
/// checks `declared` by the target release, and returns their results.
/// Nothing here fails the run: a check that cannot be run is an Error
/// result. Unfinished checks are Errors at `deadline`.
pub async fn run_external(
    client: &kube::Client,
    owner: &UpdatePreflight,
    selection: &[String],
    update: &Update,
    settings: &JobSettings,
    deadline: Instant,
    declared: Option<&Declared>,
) -> Vec<CheckResult> {
    let mut results = Vec::new();
    let api: Api<PreflightCheck> = Api::all(client.clone());
    let checks = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        // The CRD is not installed: there are no administrators' checks.
        Err(kube::Error::Api(e)) if e.code == 404 => Vec::new(),
        Err(e) => {
            warn!(error = %e, "cannot list PreflightChecks");
            results.push(CheckResult::new(
                "PreflightChecks",
                crate::model::Severity::Blocking,
                Outcome::Error,
                format!("cannot list the PreflightChecks to run: {e}"),
            ));
            Vec::new()
        }
    };
    let images = declared.map(|d| &d.images);
    let from_release = declared.map(|d| d.checks.as_slice()).unwrap_or(&[]);
    let (all, refused): (Vec<&PreflightCheck>, Vec<&PreflightCheck>) =
        selected(from_release, selection)
            .chain(selected(&checks, selection))
            .partition(|c| c.spec.valid_name().is_ok());
    results.extend(refused_names(&refused));
    let (all, withheld) = grant_tokens(all, from_release, settings);
    results.extend(withheld);
    let runs = all.into_iter().map(|check| {
        let span = info_span!("external_check", check = %check.spec.check_name);
        run_one(client, check, owner, update, settings, deadline, images).instrument(span)
    });
    results.extend(futures::future::join_all(runs).await);
    results
}

/// The checks that run, and the results of those that do not: a release's
/// check that asks for the API token (`preflight.dev/needs-api`) runs only
/// when an administrator grants it (`--release-checks-api-access`); the
/// release's word is not enough. An administrator's own `PreflightCheck`
/// says `apiAccess` itself.
pub(super) fn grant_tokens<'a>(
    checks: Vec<&'a PreflightCheck>,
    from_release: &[PreflightCheck],
    settings: &JobSettings,
) -> (Vec<&'a PreflightCheck>, Vec<CheckResult>) {
    let from_release = from_release.as_ptr_range();
    let (run, withheld): (Vec<&PreflightCheck>, Vec<&PreflightCheck>) =
        checks.into_iter().partition(|check| {
            !from_release.contains(&std::ptr::from_ref(*check))
                || !check.spec.api_access()
                || settings.release_api_access.contains(&check.spec.check_name)
        });
    let results = withheld
        .into_iter()
        .map(|check| {
            let why = format!(
                "not run: the release asks an API token for it ({}), which only an administrator grants (--release-checks-api-access={}); or accept it by name",
                crate::model::annotations::NEEDS_API,
                check.spec.check_name
            );
            result(check, Finding::error(why), std::time::Duration::ZERO)
        })
        .collect();
    (run, results)
}

/// The result for the checks that are not run because their name is not a
/// check name, saying which and why: none when there are none. Blocking
/// unless every one of them only warns.
pub(super) fn refused_names(refused: &[&PreflightCheck]) -> Option<CheckResult> {
    let why: Vec<String> = refused
        .iter()
        .filter_map(|c| {
            let e = c.spec.valid_name().err()?;
            Some(format!("PreflightCheck {}: checkName {e}", c.name_any()))
        })
        .collect();
    if why.is_empty() {
        return None;
    }
    let severity = if refused
        .iter()
        .all(|c| c.spec.severity == crate::model::Severity::Warning)
    {
        crate::model::Severity::Warning
    } else {
        crate::model::Severity::Blocking
    };
    Some(CheckResult::new(
        "PreflightChecks",
        severity,
        Outcome::Error,
        format!(
            "{} not run, as {} no check name: {}",
            if why.len() == 1 {
                "1 check is"
            } else {
                "some checks are"
            },
            if why.len() == 1 {
                "it has"
            } else {
                "they have"
            },
            why.join("; ")
        ),
    ))
}

async fn run_one(
    client: &kube::Client,
    check: &PreflightCheck,
    owner: &UpdatePreflight,
    update: &Update,
    settings: &JobSettings,
    deadline: Instant,
    images: Option<&BTreeMap<String, String>>,
) -> CheckResult {
    let started = Instant::now();
    let image = match image_to_run(check, update, images) {
        Ok(image) => image,
        Err(finding) => return result(check, finding, started.elapsed()),
    };
    let jobs: Api<Job> = Api::namespaced(client.clone(), &settings.namespace);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &settings.namespace);
    let manifest = match job_manifest(check, &image, owner, update, settings) {
        Ok(job) => job,
        Err(e) => {
            let finding = Finding::error(format!("cannot build the check's Job: {e}"));
            return result(check, finding, started.elapsed());
        }
    };
    let job = match jobs.create(&PostParams::default(), &manifest).await {
        Ok(job) => job,
        Err(e) => {
            let finding = Finding::error(format!(
                "cannot create the check's Job in namespace {}: {e}",
                settings.namespace
            ));
            return result(check, finding, started.elapsed());
        }
    };
    let name = job.name_any();
    info!(job = %name, %image, "check Job created");
    let by_job = ListParams::default().labels(&format!("{JOB_NAME}={name}"));
    let (finding, ended) = loop {
        let job = match jobs.get_opt(&name).await {
            Ok(Some(job)) => job,
            Ok(None) => {
                break (
                    Finding::error(format!("the Job {name} was deleted before it finished")),
                    true,
                );
            }
            Err(e) if Instant::now() + settings.poll < deadline => {
                warn!(error = %e, job = %name, "cannot read the check's Job; retrying");
                tokio::time::sleep(settings.poll).await;
                continue;
            }
            Err(e) => {
                break (
                    Finding::error(format!("cannot read the check's Job {name}: {e}")),
                    false,
                );
            }
        };
        let listed = match pods.list(&by_job).await {
            Ok(list) => list.items,
            Err(e) => {
                warn!(error = %e, job = %name, "cannot list the check's pods; retrying");
                Vec::new()
            }
        };
        let finished = job.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .flatten()
                .any(|c| matches!(c.type_.as_str(), "Complete" | "Failed") && c.status == "True")
        });
        let terminated = listed.iter().any(|p| {
            check_container(p)
                .and_then(|c| c.state.as_ref())
                .is_some_and(|s| s.terminated.is_some())
        });
        if let Progress::Done(finding) = progress_of(&job, &listed, settings, Timestamp::now()) {
            break (finding, finished || terminated);
        }
        if Instant::now() + settings.poll >= deadline {
            break (
                Finding::error(format!(
                    "the run ended before the check's Job {name} finished"
                )),
                false,
            );
        }
        tokio::time::sleep(settings.poll).await;
    };
    // A Job given up on is stopped; a finished one stays for its TTL, so its
    // pod's log can be read.
    if !ended {
        let delete = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        if let Err(e) = jobs.delete(&name, &delete).await {
            warn!(error = %e, job = %name, "cannot delete the check's Job");
        }
    }
    info!(job = %name, outcome = ?finding.outcome, "check Job ended");
    result(check, finding, started.elapsed())
}
