//! `preflight-gate run`: ask the cluster for a preflight run of a target,
//! and with `--wait` follow it, woken by its watch, to its result.

use std::process::ExitCode;

use anyhow::Context;
use kube::api::Api;

use crate::cli::RunArgs;
use crate::cluster;
use crate::model::cluster_version::{ClusterVersion, Resolution};
use crate::model::release::ReleaseKey;
use crate::model::{Phase, UpdatePreflight};
use crate::preflight::live;
use crate::preflight::live::RunRequest;

/// `preflight-gate run`: creates or refreshes the target's UpdatePreflight
/// and, with `--wait`, follows it to its result. Exit codes: 0 passed,
/// 3 blocking failures, 1 error.
pub async fn run(args: RunArgs) -> anyhow::Result<std::process::ExitCode> {
    let client = cluster::client(args.kubeconfig.as_deref())
        .await
        .context("connecting to the cluster")?;
    // Resolve the target as the gate does, from the cluster's ClusterVersion.
    let cv: ClusterVersion = match cluster::cluster_versions(&client)
        .get_opt("version")
        .await?
    {
        Some(object) => serde_json::from_value(serde_json::to_value(object)?)?,
        None => ClusterVersion::default(),
    };
    let target = match cv.resolve_named(&args.to) {
        Resolution::Target(target) => target,
        _ => anyhow::bail!(
            "{} is not offered to this cluster; give the release image instead",
            args.to
        ),
    };
    let api: Api<UpdatePreflight> = Api::all(client);
    let existing = api
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .find(|o| ReleaseKey::from_image(&o.spec.image) == target.key);
    let requested = jiff::Timestamp::now();
    let request = RunRequest {
        image: target.image.clone(),
        version: target.version.clone(),
        existing: existing.and_then(|o| o.metadata.name),
    };
    let name = live::trigger(&api, &request).await?;
    eprintln!(
        "preflight run requested for {}: updatepreflight/{name}",
        target.display()
    );
    if !args.wait {
        return Ok(ExitCode::SUCCESS);
    }

    let progress = indicatif::ProgressBar::new_spinner();
    progress.set_message(format!("waiting for the preflight of {}", target.display()));
    progress.enable_steady_tick(std::time::Duration::from_millis(120));
    // A run answers a request made after it: its start is no earlier
    // than the request (less a second of clock skew).
    let earliest = requested
        .checked_sub(jiff::SignedDuration::from_secs(1))
        .unwrap_or(requested);
    let shown = progress.clone();
    let what = target.display();
    let answered = move |object: Option<&UpdatePreflight>| {
        let Some(status) = object.and_then(|o| o.status.as_ref()) else {
            return false;
        };
        let after = status.start_time.as_ref().is_some_and(|t| t.0 >= earliest);
        match status.phase {
            Some(Phase::Passed | Phase::Failed | Phase::Error) if after => true,
            Some(phase) => {
                shown.set_message(format!("{what}: {phase:?}"));
                false
            }
            None => false,
        }
    };
    // Woken by the object's watch, not by polling it.
    let waited = tokio::time::timeout(
        args.timeout,
        kube::runtime::wait::await_condition(api, &name, answered),
    )
    .await;
    let done = match waited {
        Ok(Ok(Some(object))) => object,
        Ok(Ok(None)) => {
            progress.finish_and_clear();
            anyhow::bail!("updatepreflight/{name} was deleted while waiting for its result")
        }
        Ok(Err(e)) => {
            progress.finish_and_clear();
            return Err(anyhow::Error::from(e).context(format!("watching updatepreflight/{name}")));
        }
        Err(_) => {
            progress.finish_and_clear();
            anyhow::bail!(
                "no result within {}",
                humantime::format_duration(args.timeout)
            );
        }
    };
    progress.finish_and_clear();
    let status = done.status.unwrap_or_default();
    println!(
        "{}: {:?}",
        target.display(),
        status.phase.unwrap_or(Phase::Error)
    );
    let report = crate::report::Report::from_results(
        target.display().to_owned(),
        target.image.clone(),
        status.results.clone(),
    );
    let color = std::io::IsTerminal::is_terminal(&std::io::stdout());
    print!("{}", report.render(crate::report::Format::Table, color));
    Ok(match status.phase {
        Some(Phase::Passed) => ExitCode::SUCCESS,
        Some(Phase::Failed) => ExitCode::from(3),
        _ => ExitCode::from(1),
    })
}
