//! `preflight-gate check`: load the cluster (a snapshot directory, the API
//! server, or the embedded sample) and, if asked, alerts from Prometheus;
//! resolve the target, run the catalogue, print the report and turn it into
//! an exit code.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::checks::{self, Context};
use crate::cli::CheckArgs;
use crate::cluster::ClusterView;
use crate::model::CheckResult;
use crate::model::policy::{self, Blocking};
use crate::model::release::is_image;
use crate::report::{Format, Report};
use crate::suite;

/// Exit code when the cluster cannot be read or the report not written.
pub(crate) const EXIT_ERROR: u8 = 1;
/// Exit code for arguments that make no sense together.
pub(crate) const EXIT_USAGE: u8 = 2;

#[derive(Debug, thiserror::Error)]
pub(crate) enum CheckError {
    #[error(transparent)]
    Snapshot(#[from] crate::cluster::snapshot::SnapshotError),
    #[error("cannot read the cluster: {0:#}")]
    Live(anyhow::Error),
    #[error(transparent)]
    Prometheus(#[from] crate::cluster::prometheus::PrometheusError),
    #[error("--to is empty: give a version (4.16.3) or a release image")]
    NoTarget,
    #[error(
        "--to {0:?} is neither a version (4.16.3, 4.17.0-ec.2) nor a release image pullspec (quay.io/openshift-release-dev/ocp-release@sha256:...)"
    )]
    BadTarget(String),
    #[error("--accept {0}")]
    UnknownAccept(String),
}

/// Runs the command and returns the process's exit code.
pub fn check(args: &CheckArgs) -> ExitCode {
    match report(args) {
        Ok((report, format)) => {
            let color = format == Format::Table
                && std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none();
            // `--plan-only`: the plan alone, and its own exit code.
            let (text, code) = match (&report.plan, args.plan_only) {
                (Some(plan), true) => (
                    crate::report::render_plan(plan, format, color),
                    crate::report::plan_exit_code(plan),
                ),
                _ => (report.render(format, color), report.exit_code()),
            };
            let mut out = anstream::stdout();
            if out
                .write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .is_err()
            {
                return ExitCode::from(EXIT_ERROR);
            }
            ExitCode::from(code)
        }
        Err(e) => {
            eprintln!("error: {}", crate::model::text::chain(&e));
            ExitCode::from(match e {
                CheckError::NoTarget | CheckError::BadTarget(_) | CheckError::UnknownAccept(_) => {
                    EXIT_USAGE
                }
                CheckError::Snapshot(e) if e.is_mixed() => EXIT_USAGE,
                _ => EXIT_ERROR,
            })
        }
    }
}

/// What is wrong with accept names that name nothing: no check of
/// `results`, no name one of them carries and none OpenShift is known to
/// use, with the name a wrongly capitalised one meant; `None` when every
/// name is known.
fn unknown_accepts(names: &[String], results: &[CheckResult]) -> Option<String> {
    let known: Vec<&str> = results
        .iter()
        .flat_map(|r| std::iter::once(r.name.as_str()).chain(r.risks.iter().map(String::as_str)))
        .collect();
    let unknown: Vec<String> = names
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty() && !policy::known(n, results))
        .map(|n| match known.iter().find(|k| k.eq_ignore_ascii_case(n)) {
            Some(meant) => format!("{n} (did you mean {meant}?)"),
            None => n.to_owned(),
        })
        .collect();
    (!unknown.is_empty()).then(|| {
        format!(
            "names no check or risk: {}; names are case-sensitive (docs/checks.md lists the checks and the OpenShift names they carry), or pass --allow-unknown-accept",
            unknown.join(", ")
        )
    })
}

fn report(args: &CheckArgs) -> Result<(Report, Format), CheckError> {
    let to = args.to.trim();
    if to.is_empty() {
        return Err(CheckError::NoTarget);
    }
    if !is_image(to) && crate::model::release::Version::parse(to).is_none() {
        return Err(CheckError::BadTarget(to.to_owned()));
    }
    let progress = progress_bar();
    let mut view = load(
        args.snapshot.as_deref(),
        args.kubeconfig.as_deref(),
        &progress,
    )?;
    if let Some(prometheus) = args.alerts.source() {
        progress.set_message(format!("reading alerts from {}", prometheus.url));
        view.alerts = Some(runtime()?.block_on(prometheus.alerts())?);
    }
    if let Some(now) = args.now {
        view.as_of = Some(crate::cluster::AsOf::new(now, "--now"));
    }
    let target = view.target(to);
    let view = std::sync::Arc::new(view);
    let clock = jiff::Timestamp::now();
    progress.set_message(format!("running {} checks", checks::catalogue().len()));
    let blocking = Blocking {
        fail_open: args.fail_open_checks.iter().cloned().collect(),
        accepted: args
            .accept
            .iter()
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect(),
    };
    // The plan alone runs no check.
    let results = if args.plan_only {
        Vec::new()
    } else {
        suite::run_accepting(
            view.clone(),
            &target,
            clock,
            &blocking.accepted,
            args.limits.limits(),
        )
    };
    progress.finish_and_clear();
    if !args.allow_unknown_accept
        && !args.plan_only
        && let Some(why) = unknown_accepts(&args.accept, &results)
    {
        return Err(CheckError::UnknownAccept(why));
    }
    let ctx = Context::new(&view, &target, clock);
    Ok((Report::new(&ctx, results, &blocking), args.output))
}

/// A spinner on stderr when it is a terminal; hidden otherwise.
fn progress_bar() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

fn load(
    snapshot: Option<&Path>,
    kubeconfig: Option<&Path>,
    progress: &ProgressBar,
) -> Result<ClusterView, CheckError> {
    match (snapshot, kubeconfig) {
        (Some(dir), _) => {
            progress.set_message(format!("reading {}", dir.display()));
            Ok(crate::cluster::snapshot::load(dir)?)
        }
        (None, Some(kubeconfig)) => live(kubeconfig.to_owned(), progress),
        (None, None) => {
            progress.set_message("reading the embedded sample snapshot");
            Ok(crate::cluster::snapshot::sample::load()?)
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, CheckError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CheckError::Live(e.into()))
}

fn live(kubeconfig: PathBuf, progress: &ProgressBar) -> Result<ClusterView, CheckError> {
    runtime()?.block_on(async {
        let client = crate::cluster::client(Some(&kubeconfig))
            .await
            .map_err(CheckError::Live)?;
        crate::cluster::live::load_with_progress(
            &client,
            crate::cluster::live::Reads::ALL,
            |kind, seen| {
                progress.set_message(format!("listing {kind}s: {seen}"));
            },
        )
        .await
        .map_err(|e| CheckError::Live(e.into()))
    })
}
