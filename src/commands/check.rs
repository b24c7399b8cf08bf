//! `preflight-gate check`: load the cluster (a snapshot directory, the API
//! server, or the embedded sample) and, if asked, alerts from Prometheus;
//! resolve the target, run the catalogue, hold the plan to the maintenance
//! window if one is given, print the report and turn it into an exit code.
//! A hosted cluster's update (`--hosted-cluster`) is read in `hosted`.

mod hosted;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::checks::{self, Context};
use crate::cli::CheckArgs;
use crate::model::CheckResult;
use crate::model::release::is_image;
use crate::model::standing::{self, Exemptions};
use crate::model::window::{self, WindowFit};
use crate::report::{Format, Report};
use crate::suite;
use crate::view::ClusterView;

/// Exit code when the cluster cannot be read or the report not written.
pub(crate) const EXIT_ERROR: u8 = 1;
/// Exit code for arguments that make no sense together, and for a
/// snapshot that is not the snapshot of one cluster.
pub(crate) const EXIT_USAGE: u8 = 2;

#[derive(Debug, thiserror::Error)]
pub(crate) enum CheckError {
    #[error(transparent)]
    Snapshot(#[from] crate::cluster::snapshot::SnapshotError),
    #[error("cannot read the cluster: {0:#}")]
    Live(anyhow::Error),
    #[error("--to is empty: give a version (4.16.3) or a release image")]
    NoTarget,
    #[error(
        "--to {0:?} is neither a version (4.16.3, 4.17.0-ec.2) nor a release image pullspec (quay.io/openshift-release-dev/ocp-release@sha256:...)"
    )]
    BadTarget(String),
    #[error("--accept {0}")]
    UnknownAccept(String),
    #[error("{0}; give the end of the maintenance window as an RFC 3339 time to come")]
    Window(window::TimeError),
    /// `--hosted-cluster` and its flags do not fit what is given.
    #[error("{0}")]
    Hosted(String),
    #[error(transparent)]
    Management(crate::cluster::management::ManagementError),
}

/// What the checks of one update run with.
pub(crate) struct Prepared {
    view: std::sync::Arc<ClusterView>,
    target: crate::model::Target,
    clock: jiff::Timestamp,
    limits: suite::Limits,
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
                    crate::report::plan_clearance(plan).exit_code(),
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
                CheckError::NoTarget
                | CheckError::BadTarget(_)
                | CheckError::UnknownAccept(_)
                | CheckError::Window(_)
                | CheckError::Hosted(_) => EXIT_USAGE,
                CheckError::Snapshot(e) if e.is_not_a_snapshot() => EXIT_USAGE,
                CheckError::Management(e) if e.is_not_a_snapshot() => EXIT_USAGE,
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
        .filter(|n| !n.is_empty() && !standing::known(n, results))
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

/// The target `--to` names, trimmed: a version or a release image.
pub(crate) fn target(to: &str) -> Result<&str, CheckError> {
    let to = to.trim();
    if to.is_empty() {
        return Err(CheckError::NoTarget);
    }
    if !is_image(to) && crate::model::release::Version::parse(to).is_none() {
        return Err(CheckError::BadTarget(to.to_owned()));
    }
    Ok(to)
}

fn report(args: &CheckArgs) -> Result<(Report, Format), CheckError> {
    report_with(args, progress_bar)
}

/// The report of one cluster, as `check` makes it; `progress` makes the
/// bar it shows while it reads and runs (`fleet` passes a hidden one).
pub(crate) fn report_with(
    args: &CheckArgs,
    progress: impl FnOnce() -> ProgressBar,
) -> Result<(Report, Format), CheckError> {
    let to = target(&args.to)?;
    let progress = progress();
    if args.hosted_cluster.is_some() {
        progress.set_message("reading the management cluster");
    }
    let mut hosted = args
        .hosted_cluster
        .as_deref()
        .map(|named| hosted::read(args, named))
        .transpose()?;
    let mut view = match &mut hosted {
        Some(read) => {
            progress.set_message("reading the hosted cluster");
            read.guest_view(args)?
        }
        None => load(
            args.snapshot.as_deref(),
            args.kubeconfig.as_deref(),
            &progress,
        )?,
    };
    view.alert_namespaces = args.alerts.namespaces();
    view.gate_namespace = Some(args.namespace.clone());
    if let Some(prometheus) = args.alerts.source() {
        progress.set_message(format!("reading alerts from {}", prometheus.url));
        // The querier's alerts replace the snapshot's; an unreachable one
        // makes the alert checks Errors that say why, as in a run of the
        // gate.
        view.alerts = None;
        view.add_alerts_read(runtime()?.block_on(prometheus.alerts()));
    }
    if let Some(now) = args.now {
        view.as_of = Some(crate::view::AsOf::new(now, "--now"));
    }
    let target = match &hosted {
        Some(read) => read.target(&view, to),
        None => view.target(to),
    };
    let view = std::sync::Arc::new(view);
    let clock = jiff::Timestamp::now();
    // The update starts now at the earliest (or at --now): the window is
    // read before anything runs, so a mistake in it is said at once.
    let start = args.now.unwrap_or(clock);
    let window = args
        .window_end
        .as_deref()
        .map(|text| window::end("--window-end", text, start, None))
        .transpose()
        .map_err(CheckError::Window)?;
    progress.set_message(format!("running {} checks", checks::catalogue().len()));
    let exemptions = Exemptions {
        fail_open: args.fail_open_checks.iter().cloned().collect(),
        accepted: args
            .accept
            .iter()
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect(),
        ..Exemptions::default()
    };
    // The plan alone runs no check.
    let prepared = Prepared {
        view: view.clone(),
        target: target.clone(),
        clock,
        limits: args.limits.limits(),
    };
    let mut results = if args.plan_only {
        Vec::new()
    } else if let Some(read) = &hosted {
        read.results(&prepared)
    } else {
        suite::run_accepting(
            view.clone(),
            &target,
            clock,
            &exemptions.accepted,
            args.limits.limits(),
        )
    };
    progress.finish_and_clear();
    let pool_view = hosted.as_ref().and_then(|read| read.report_view(&view));
    let ctx = Context::new(pool_view.as_ref().unwrap_or(&view), &target, clock);
    let hosted_plan = hosted
        .as_ref()
        .map(|read| read.update_plan(&prepared, ctx.now));
    let fit = window.map(|end| {
        let p90 = match &hosted_plan {
            Some(plan) => plan.p90_seconds,
            None => crate::plan::plan_to(ctx.view, ctx.target, ctx.kind, ctx.now).p90_seconds,
        };
        WindowFit::new(end, start, p90)
    });
    // The plan alone carries the window in the plan, and its exit code.
    if let Some(fit) = fit.as_ref().filter(|_| !args.plan_only) {
        results.push(fit.finding("--window-end"));
    }
    if !args.allow_unknown_accept
        && !args.plan_only
        && let Some(why) = unknown_accepts(&args.accept, &results)
    {
        return Err(CheckError::UnknownAccept(why));
    }
    let mut report = Report::new(&ctx, results, &exemptions);
    if hosted_plan.is_some() {
        report.plan = hosted_plan;
    }
    if let (Some(fit), Some(plan)) = (fit, report.plan.as_mut()) {
        plan.window = Some(crate::plan::Window {
            end: fit.end,
            p90_end: fit.p90_end,
            fits: fit.fits(),
        });
    }
    Ok((report, args.output))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Outcome, Severity};
    use clap::Parser;

    /// `check` of the embedded sample for 4.14.12 at a fixed time, its one
    /// blocking finding (a pod that cannot pull its image) accepted, with
    /// `extra` flags.
    fn args(extra: &[&str]) -> CheckArgs {
        let mut argv = vec![
            "preflight-gate",
            "check",
            "--to",
            "4.14.12",
            "--now",
            "2026-11-30T12:00:00Z",
            "--accept",
            "KubeContainerWaiting",
        ];
        argv.extend(extra);
        match crate::cli::Cli::try_parse_from(argv).unwrap().command {
            crate::cli::Command::Check(args) => *args,
            _ => unreachable!(),
        }
    }

    fn window(report: &Report) -> &CheckResult {
        report
            .results
            .iter()
            .find(|r| r.name == window::MAINTENANCE_WINDOW)
            .expect("a MaintenanceWindow result")
    }

    /// The sample's plan: about 1h31m, P90 2h31m, from 12:00 ends at 14:31.
    #[test]
    fn an_update_past_the_windows_end_blocks_with_the_plans_figures() {
        let (report, _) = report(&args(&["--window-end", "2026-11-30T14:00:00Z"])).unwrap();
        let result = window(&report);
        assert_eq!(
            (result.outcome, result.severity),
            (Outcome::Fail, Severity::Blocking)
        );
        assert!(
            result.message.starts_with("the update may not finish within the maintenance window: its P90 of 2h31m from now ends 2026-11-30T14:31:30Z, after the maintenance window's end 2026-11-30T14:00:00Z (--window-end)"),
            "{}",
            result.message
        );
        assert_eq!(report.exit_code(), 3);
        // Accepting it changes nothing: the window is the administrator's.
        let (accepted, _) = report_accepting();
        assert_eq!(accepted.exit_code(), 3);
        assert!(
            accepted
                .summary_line()
                .contains("MaintenanceWindow cannot be accepted"),
            "{}",
            accepted.summary_line()
        );
        let plan = report.plan.as_ref().unwrap();
        assert!(!plan.window.as_ref().unwrap().fits);
        assert!(
            crate::report::render_plan(plan, Format::Table, false)
                .contains("maintenance window: ends 2026-11-30T14:00:00Z; started now, the update ends at its P90 2026-11-30T14:31:30Z: it may not finish within it")
        );
    }

    fn report_accepting() -> (Report, Format) {
        report(&args(&[
            "--window-end",
            "2026-11-30T14:00:00Z",
            "--accept",
            "KubeContainerWaiting,MaintenanceWindow",
        ]))
        .unwrap()
    }

    #[test]
    fn an_update_that_fits_passes_and_the_plan_alone_says_so() {
        let (report, _) = report(&args(&["--window-end", "2026-11-30T15:00:00Z"])).unwrap();
        let result = window(&report);
        assert_eq!(result.outcome, Outcome::Pass, "{}", result.message);
        assert!(
            result.message.contains("by the maintenance window's end"),
            "{}",
            result.message
        );
        let (plan_only, _) = super::report(&args(&[
            "--window-end",
            "2026-11-30T15:00:00Z",
            "--plan-only",
        ]))
        .unwrap();
        assert!(plan_only.results.is_empty(), "the plan alone runs no check");
        assert!(plan_only.plan.unwrap().window.unwrap().fits);
    }

    #[test]
    fn without_a_window_there_is_no_window_result() {
        let (report, _) = report(&args(&[])).unwrap();
        assert_ne!(report.exit_code(), 3, "{}", report.summary_line());
        assert!(
            !report
                .results
                .iter()
                .any(|r| r.name == window::MAINTENANCE_WINDOW)
        );
        assert!(report.plan.unwrap().window.is_none());
    }

    #[rstest::rstest]
    #[case::not_a_time(
        "Friday",
        "--window-end \"Friday\" is not an RFC 3339 time (such as 2026-11-30T22:00:00Z); give the end of the maintenance window as an RFC 3339 time to come"
    )]
    #[case::passed(
        "2026-11-30T11:00:00Z",
        "--window-end 2026-11-30T11:00:00Z has passed; give"
    )]
    fn a_window_that_cannot_be_held_to_is_a_usage_error(#[case] end: &str, #[case] says: &str) {
        let e = report(&args(&["--window-end", end])).err().unwrap();
        assert!(matches!(e, CheckError::Window(_)));
        assert!(e.to_string().starts_with(says), "{e}");
    }
}
