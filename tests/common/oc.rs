//! The real `oc`, for the tests of both binaries (tests/it and tests/e2e
//! include this file).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The real `oc`: the one `PREFLIGHT_GATE_OC` names; else an `oc` on
/// `PATH`; else the workplace's build beside the repository
/// (../shared/tools/oc, see its README; the Go module proxy does not serve
/// openshift/oc), unpacked once into the cache the control plane's binaries
/// use. None where there is none (`tests/run` says so first).
pub fn oc() -> Option<&'static Path> {
    static OC: OnceLock<Option<PathBuf>> = OnceLock::new();
    OC.get_or_init(|| {
        if let Some(named) = std::env::var_os("PREFLIGHT_GATE_OC") {
            return Some(PathBuf::from(named));
        }
        if let Some(oc) = on_path() {
            return Some(oc);
        }
        let xz = Path::new(ROOT).join("../shared/tools/oc/oc.xz");
        if !xz.is_file() {
            return None;
        }
        let sum = Command::new("sha256sum").arg(&xz).output().ok()?;
        let sum = String::from_utf8_lossy(&sum.stdout);
        let key = sum.get(..12)?;
        let cache = std::env::var_os("PREFLIGHT_GATE_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/preflight-gate")
            });
        let dir = cache.join(format!("bin/oc-{key}"));
        let bin = dir.join("oc");
        if !bin.is_file() {
            std::fs::create_dir_all(&dir).unwrap();
            let tmp = dir.join(format!("oc.tmp.{}", std::process::id()));
            let out = Command::new("sh")
                .arg("-c")
                .arg("xz -dc \"$1\" > \"$2\" && chmod +x \"$2\"")
                .arg("sh")
                .arg(&xz)
                .arg(&tmp)
                .status()
                .expect("xz runs");
            assert!(out.success(), "cannot unpack {}", xz.display());
            std::fs::rename(&tmp, &bin).unwrap();
        }
        Some(bin)
    })
    .as_deref()
}

/// Why a test that needs the real `oc` did not run, and how to give it one.
#[allow(dead_code)]
pub const NO_OC: &str = "no real oc: set PREFLIGHT_GATE_OC, put oc on PATH, \
     or have the workplace's build at ../shared/tools/oc/oc.xz";

/// An `oc` on `PATH`, if one answers `oc version --client`.
fn on_path() -> Option<PathBuf> {
    let answers = Command::new("oc")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|out| out.status.success());
    answers.then(|| PathBuf::from("oc"))
}
