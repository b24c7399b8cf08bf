//! deploy/image/build: the image assembled here without a base image is the
//! Containerfile's image in what a runtime reads from it (entrypoint,
//! command, user, ports), and its archive is a valid OCI layout whose
//! manifest digest is the one printed.

use std::collections::{BTreeSet, HashMap};
use std::io::Read;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The final stage's instructions of the Containerfile, joined across
/// continuation lines.
fn containerfile() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(format!("{ROOT}/Containerfile")).unwrap();
    let mut joined = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || (line.is_empty() && current.is_empty()) {
            continue;
        }
        if let Some(part) = line.strip_suffix('\\') {
            current.push_str(part);
            current.push(' ');
            continue;
        }
        current.push_str(line);
        if !current.trim().is_empty() {
            joined.push(std::mem::take(&mut current));
        }
    }
    let last_from = joined
        .iter()
        .rposition(|l| l.to_ascii_uppercase().starts_with("FROM "))
        .expect("the Containerfile has a FROM");
    joined[last_from..]
        .iter()
        .filter_map(|l| {
            let (op, rest) = l.split_once(char::is_whitespace)?;
            Some((op.to_ascii_uppercase(), rest.trim().to_owned()))
        })
        .collect()
}

fn instruction(stage: &[(String, String)], op: &str) -> Option<String> {
    stage
        .iter()
        .rev()
        .find(|(o, _)| o == op)
        .map(|(_, v)| v.clone())
}

/// The regular files of a tar archive (gzip'ed or not), by name, read
/// with the system's tar.
fn members(path: &Path) -> HashMap<String, Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("tar")
        .arg("-xf")
        .arg(path)
        .arg("-C")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tar -xf {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut files = HashMap::new();
    let mut stack = vec![dir.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                let mut data = Vec::new();
                std::fs::File::open(entry.path())
                    .unwrap()
                    .read_to_end(&mut data)
                    .unwrap();
                let name = entry
                    .path()
                    .strip_prefix(dir.path())
                    .unwrap()
                    .display()
                    .to_string();
                files.insert(name, data);
            }
        }
    }
    files
}

/// Name, mode and owner of every member of a tar archive, as
/// `tar --numeric-owner -tvf` lists them.
fn listing(path: &Path) -> Vec<(String, String, String)> {
    let out = Command::new("tar")
        .args(["--numeric-owner", "-tvf"])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            Some((
                fields.get(5)?.to_string(),
                fields.first()?.to_string(),
                fields.get(1)?.to_string(),
            ))
        })
        .collect()
}

/// The SHA-256 of `data`, in hex, by coreutils' sha256sum.
fn sha256_hex(data: &[u8]) -> String {
    use std::io::Write;
    let mut child = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(data).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn the_built_image_runs_as_the_containerfile_says() {
    // tests/run hands over the image it built from the release binary;
    // otherwise it is built here from the binary under test.
    let dir = tempfile::tempdir().unwrap();
    let (archive, printed) = match std::env::var("PREFLIGHT_GATE_IMAGE_TAR") {
        Ok(tar) => (std::path::PathBuf::from(tar), None),
        Err(_) => {
            let archive = dir.path().join("image.tar");
            let out = Command::new(format!("{ROOT}/deploy/image/build"))
                .arg(&archive)
                .env(
                    "PREFLIGHT_GATE_BINARY",
                    env!("CARGO_BIN_EXE_preflight-gate"),
                )
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "deploy/image/build failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let stdout = String::from_utf8(out.stdout).unwrap();
            assert_eq!(stdout.lines().count(), 1, "one line on stdout: {stdout:?}");
            (archive, Some(stdout.trim().to_owned()))
        }
    };
    let files = members(&archive);
    let json = |name: &str| -> Value {
        serde_json::from_slice(files.get(name).unwrap_or_else(|| panic!("no {name}"))).unwrap()
    };
    let blob = |digest: &str| -> &Vec<u8> {
        let hex = digest.strip_prefix("sha256:").unwrap();
        let data = &files[&format!("blobs/sha256/{hex}")];
        assert_eq!(sha256_hex(data), hex, "blob {digest}");
        data
    };
    assert_eq!(json("oci-layout")["imageLayoutVersion"], "1.0.0");
    let index = json("index.json");
    let desc = &index["manifests"][0];
    let digest = desc["digest"].as_str().unwrap();
    if let Some(printed) = printed {
        assert_eq!(printed, digest);
    }
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        desc["annotations"]["org.opencontainers.image.ref.name"],
        format!("preflight-gate:{version}")
    );
    assert_eq!(
        desc["annotations"]["io.containerd.image.name"],
        format!("docker.io/library/preflight-gate:{version}")
    );
    let manifest: Value = serde_json::from_slice(blob(digest)).unwrap();
    let config: Value =
        serde_json::from_slice(blob(manifest["config"]["digest"].as_str().unwrap())).unwrap();
    let config = &config["config"];

    let stage = containerfile();
    let entrypoint: Value =
        serde_json::from_str(&instruction(&stage, "ENTRYPOINT").unwrap()).unwrap();
    let cmd: Value = serde_json::from_str(&instruction(&stage, "CMD").unwrap()).unwrap();
    assert_eq!(config["Entrypoint"], entrypoint);
    assert_eq!(config["Cmd"], cmd);
    assert_eq!(config["User"], instruction(&stage, "USER").unwrap());
    let exposed: BTreeSet<String> = instruction(&stage, "EXPOSE")
        .unwrap()
        .split_whitespace()
        .map(|p| {
            if p.contains('/') {
                p.into()
            } else {
                format!("{p}/tcp")
            }
        })
        .collect();
    let ports: BTreeSet<String> = config["ExposedPorts"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(ports, exposed);

    // The one layer holds the binary where the entrypoint says, and the
    // user the image runs as exists.
    let layer_path = dir.path().join("layer.tar.gz");
    std::fs::write(
        &layer_path,
        blob(manifest["layers"][0]["digest"].as_str().unwrap()),
    )
    .unwrap();
    let paths = members(&layer_path);
    let modes: HashMap<String, String> = listing(&layer_path)
        .into_iter()
        .map(|(name, mode, _)| (name, mode))
        .collect();
    let binary = entrypoint[0].as_str().unwrap().trim_start_matches('/');
    assert!(paths.contains_key(binary), "no {binary} in the layer");
    assert_eq!(modes[binary], "-rwxr-xr-x", "{binary} is executable");
    let uid = config["User"].as_str().unwrap().split(':').next().unwrap();
    let passwd = String::from_utf8(paths["etc/passwd"].clone()).unwrap();
    assert!(
        passwd.lines().any(|l| l.split(':').nth(2) == Some(uid)),
        "{passwd}"
    );
    // It says what it is, and carries the licence as the release image does.
    assert_eq!(config["Labels"]["preflight-gate.image"], "test", "{config}");
    assert_eq!(
        paths["licenses/LICENSE"],
        std::fs::read(format!("{ROOT}/LICENSE")).unwrap()
    );
}

/// The release image carries the labels Red Hat's container certification
/// asks for, and the licence under /licenses.
#[test]
fn the_release_image_has_the_certification_labels_and_its_licence() {
    let stage = containerfile();
    let labels = instruction(&stage, "LABEL").expect("a LABEL instruction");
    for key in [
        "name=",
        "vendor=",
        "version=",
        "release=",
        "summary=",
        "description=",
        "url=",
        "io.k8s.display-name=",
        "io.k8s.description=",
        "maintainer=",
    ] {
        assert!(
            labels.split_whitespace().any(|w| w.starts_with(key)),
            "the release image has no {key} label: {labels}"
        );
    }
    assert!(
        stage
            .iter()
            .any(|(op, rest)| op == "COPY" && rest == "LICENSE /licenses/LICENSE"),
        "no /licenses/LICENSE"
    );
}
