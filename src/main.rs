//! The `preflight-gate` binary: parse flags, set up logging, run.

use clap::Parser;

/// Reviews allocate and free many small strings; mimalloc is cheaper at that.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use preflight_gate::cli::{Cli, Command, LogFormat};
use tracing_subscriber::EnvFilter;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    let _ = rustls::crypto::ring::default_provider().install_default();

    let runtime = || tokio::runtime::Runtime::new().map_err(anyhow::Error::from);
    let result = match cli.command {
        Command::Certs(args) => {
            preflight_gate::commands::certs(&args).map(|()| std::process::ExitCode::SUCCESS)
        }
        Command::Check(args) => return preflight_gate::commands::check(&args),
        Command::Fleet(args) => return preflight_gate::commands::fleet(&args),
        Command::Serve(args) => runtime()
            .and_then(|rt| rt.block_on(preflight_gate::commands::serve(*args)))
            .map(|()| std::process::ExitCode::SUCCESS),
        Command::Run(args) => {
            runtime().and_then(|rt| rt.block_on(preflight_gate::commands::run(args)))
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            tracing::error!("{e:#}");
            if e.is::<preflight_gate::commands::Unservable>() {
                std::process::ExitCode::from(2)
            } else {
                std::process::ExitCode::FAILURE
            }
        }
    }
}
