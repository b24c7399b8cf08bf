//! The subcommands, each built from its flags: [`serve`](fn@serve) (in `serve.rs`),
//! [`run`](fn@run) (ask the cluster for a preflight run, in `run.rs`),
//! [`certs`](fn@certs), [`check`](fn@check) (the offline report, in
//! `check.rs`) and [`fleet`](fn@fleet) (`check` across many clusters, one
//! report, in `fleet.rs`).

mod check;
mod fleet;
mod run;
mod serve;

pub use check::check;
pub use fleet::fleet;
pub use run::run;
pub use serve::{Unservable, serve};

use crate::certs;
use crate::cli::CertsArgs;

/// `preflight-gate certs`.
pub fn certs(args: &CertsArgs) -> anyhow::Result<()> {
    let written = certs::generate(&args.out, &args.names)?;
    eprintln!(
        "wrote {}, {}, {} and {} to {}",
        certs::CA_CERT,
        certs::CA_KEY,
        certs::TLS_CERT,
        certs::TLS_KEY,
        written.dir.display()
    );
    eprintln!("caBundle for the webhook configuration:");
    println!("{}", written.ca_bundle());
    Ok(())
}
