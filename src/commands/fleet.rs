//! `preflight-gate fleet`: judge every cluster given (a snapshot or a
//! kubeconfig each) as `check` judges one, on `--jobs` threads with a
//! progress bar on stderr, then print one report for the fleet
//! (`report::fleet`) and turn it into an exit code. A cluster that cannot
//! be read is an error of its own: never a pass, and never a stop for the
//! rest.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use indicatif::{ProgressBar, ProgressStyle};

use super::check::{self, CheckError, EXIT_ERROR, EXIT_USAGE};
use crate::cli::{AlertArgs, CheckArgs, FleetArgs, LimitsArgs};
use crate::report::fleet::{Fleet, Format, Judged};

/// Runs the command and returns the process's exit code.
pub fn fleet(args: &FleetArgs) -> ExitCode {
    if let Err(e) = usage(args) {
        eprintln!("error: {}", crate::model::text::chain(&e));
        return ExitCode::from(EXIT_USAGE);
    }
    let judged = judge_all(args);
    let report = Fleet::new(args.to.trim(), judged);
    let color = args.output == Format::Table
        && std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none();
    let text = report.render(args.output, color);
    let mut out = anstream::stdout();
    if out
        .write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .is_err()
    {
        return ExitCode::from(EXIT_ERROR);
    }
    ExitCode::from(report.exit_code())
}

/// The flags every cluster shares, checked once as `check` checks them:
/// the target, and the maintenance window's end.
fn usage(args: &FleetArgs) -> Result<(), CheckError> {
    check::target(&args.to)?;
    if let Some(text) = args.window_end.as_deref() {
        let start = args.now.unwrap_or_else(jiff::Timestamp::now);
        crate::model::window::end("--window-end", text, start, None).map_err(CheckError::Window)?;
    }
    Ok(())
}

/// Every cluster judged, in the order given, on at most `--jobs` threads.
fn judge_all(args: &FleetArgs) -> Vec<Judged> {
    let clusters = &args.clusters;
    let jobs = args
        .jobs
        .map(usize::from)
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1)
        .clamp(1, clusters.len().max(1));
    let progress = progress_bar(clusters.len());
    let next = AtomicUsize::new(0);
    let judged: Mutex<Vec<Option<Judged>>> = Mutex::new(
        std::iter::repeat_with(|| None)
            .take(clusters.len())
            .collect(),
    );
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(path) = clusters.get(i) else { break };
                    let one = judge(args, path);
                    progress.inc(1);
                    progress.set_message(one.from.clone());
                    if let Ok(mut all) = judged.lock() {
                        all[i] = Some(one);
                    }
                }
            });
        }
    });
    progress.finish_and_clear();
    judged
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .zip(clusters)
        .map(|(one, path)| {
            one.unwrap_or_else(|| Judged {
                from: path.display().to_string(),
                outcome: Err("its judgement did not finish".to_owned()),
            })
        })
        .collect()
}

/// A bar of the clusters judged on stderr when it is a terminal; hidden
/// otherwise.
fn progress_bar(clusters: usize) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(clusters as u64);
    if let Ok(style) =
        ProgressStyle::with_template("{bar:30} {pos}/{len} clusters judged ({elapsed}) {wide_msg}")
    {
        bar.set_style(style);
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    bar
}

/// What a path given to `fleet` is.
enum Source {
    Snapshot(PathBuf),
    /// A kubeconfig, and the context it is read with.
    Kubeconfig(PathBuf, Option<String>),
}

/// A kubeconfig is a file of kind Config; anything else is read as a
/// snapshot (whose reader says what is wrong with it).
fn source(path: &Path) -> Source {
    if path.is_file()
        && let Ok(config) = kube::config::Kubeconfig::read_from(path)
        && config.kind.as_deref() == Some("Config")
    {
        return Source::Kubeconfig(path.to_owned(), config.current_context);
    }
    Source::Snapshot(path.to_owned())
}

/// One cluster judged as `check` judges it, with the fleet's flags.
fn judge(args: &FleetArgs, path: &Path) -> Judged {
    let (snapshot, kubeconfig, name) = match source(path) {
        Source::Snapshot(path) => {
            let name = path.display().to_string();
            (Some(path), None, name)
        }
        Source::Kubeconfig(path, context) => {
            let name = match context {
                Some(context) => format!("{} (context {context})", path.display()),
                None => path.display().to_string(),
            };
            (None, Some(path), name)
        }
    };
    let one = CheckArgs {
        to: args.to.clone(),
        snapshot,
        now: args.now,
        kubeconfig,
        output: crate::report::Format::Json,
        accept: args.accept.clone(),
        // A name one cluster's results carry may be missing from another's.
        allow_unknown_accept: true,
        plan_only: false,
        window_end: args.window_end.clone(),
        limits: LimitsArgs {
            run_timeout: args.limits.run_timeout,
            check_timeout: args.limits.check_timeout,
        },
        fail_open_checks: args.fail_open_checks.clone(),
        namespace: args.namespace.clone(),
        alerts: AlertArgs {
            prometheus_url: None,
            prometheus_token_file: None,
            prometheus_ca: None,
            alert_namespaces: Vec::new(),
        },
        // Each cluster of the fleet is judged as a standalone one.
        hosted_cluster: None,
        hosted_snapshot: None,
        nodepool: None,
    };
    Judged {
        from: name,
        outcome: check::report_with(&one, ProgressBar::hidden)
            .map(|(report, _)| report)
            .map_err(|e| crate::model::text::chain(&e)),
    }
}
