//! deploy/image/build: the production image, built here from the Debian
//! packages of deploy/image/packages.lock and the gate's binary, is the
//! Containerfile's image in what a runtime reads from it (entrypoint,
//! command, user, ports, every label); it carries dpkg's record of every
//! package, the CA bundle, the non-root user, the licence and its SBOM;
//! the same inputs give the same manifest digest; and syft, the cataloguer
//! scanners run, finds its Debian packages and the crates in its binary.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The image's time in the builds here (SOURCE_DATE_EPOCH), the same for
/// every build so that their digests can be compared.
const EPOCH: &str = "1700000000";

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

/// Shell-like words: double and single quotes group, a backslash escapes.
fn words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => {
                let w = word.get_or_insert_with(String::new);
                while let Some(q) = chars.next() {
                    match q {
                        _ if q == c => break,
                        '\\' if c == '"' => w.extend(chars.next()),
                        _ => w.push(q),
                    }
                }
            }
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            c if c.is_whitespace() => words.extend(word.take()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// The labels the Containerfile's final stage sets, with its ARGs'
/// defaults substituted (VERSION is Cargo.toml's, as deploy/release/cut
/// passes it).
fn containerfile_labels() -> BTreeMap<String, String> {
    let stage = containerfile();
    let mut args: HashMap<String, String> = stage
        .iter()
        .filter(|(op, _)| op == "ARG")
        .map(|(_, rest)| {
            let (name, default) = rest.split_once('=').unwrap_or((rest, ""));
            (name.to_owned(), default.to_owned())
        })
        .collect();
    args.insert("VERSION".into(), VERSION.into());
    let mut labels = BTreeMap::new();
    for (_, rest) in stage.iter().filter(|(op, _)| op == "LABEL") {
        for word in words(rest) {
            let (key, value) = word.split_once('=').unwrap();
            let mut value = value.to_owned();
            for (name, arg) in &args {
                value = value.replace(&format!("${{{name}}}"), arg);
            }
            assert!(!value.contains('$'), "unknown ARG in label {key}={value}");
            labels.insert(key.to_owned(), value);
        }
    }
    labels
}

/// deploy/image/packages.lock: name and version of each package.
fn locked_packages() -> Vec<(String, String)> {
    std::fs::read_to_string(format!("{ROOT}/deploy/image/packages.lock"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(fields.len(), 3, "packages.lock: {l}");
            assert_eq!(fields[2].len(), 64, "packages.lock: {l}");
            (fields[0].to_owned(), fields[1].to_owned())
        })
        .collect()
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
                fields.get(5)?.trim_end_matches('/').to_string(),
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

/// An image deploy/image/build made here, from the binary under test.
struct Built {
    _dir: tempfile::TempDir,
    archive: PathBuf,
    /// The manifest digest it printed.
    digest: String,
}

impl Built {
    fn new() -> Built {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("image.tar");
        let out = Command::new(format!("{ROOT}/deploy/image/build"))
            .arg(&archive)
            .env(
                "PREFLIGHT_GATE_BINARY",
                env!("CARGO_BIN_EXE_preflight-gate"),
            )
            .env("SOURCE_DATE_EPOCH", EPOCH)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "deploy/image/build failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert_eq!(stdout.lines().count(), 1, "one line on stdout: {stdout:?}");
        let digest = stdout.trim().to_owned();
        Built {
            _dir: dir,
            archive,
            digest,
        }
    }

    /// The SBOM written beside the archive.
    fn sbom(&self) -> Vec<u8> {
        std::fs::read(self.archive.with_extension("cdx.json")).unwrap()
    }
}

/// The image built here from the binary under test, once.
fn built_here() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(Built::new)
}

/// The image under test: the one tests/run hands over
/// (PREFLIGHT_GATE_IMAGE_TAR, from the release binary), or the one built
/// here; and the digest deploy/image/build printed, where it was built here.
fn image() -> (PathBuf, Option<&'static str>) {
    match std::env::var("PREFLIGHT_GATE_IMAGE_TAR") {
        Ok(tar) => (PathBuf::from(tar), None),
        Err(_) => {
            let built = built_here();
            (built.archive.clone(), Some(&built.digest))
        }
    }
}

/// An OCI archive read: its files by name, and its one manifest's digest,
/// manifest and config.
struct Archive {
    files: HashMap<String, Vec<u8>>,
    digest: String,
    index: Value,
    manifest: Value,
    config: Value,
}

impl Archive {
    fn read(path: &Path) -> Archive {
        let files = members(path);
        let json = |name: &str| -> Value {
            serde_json::from_slice(files.get(name).unwrap_or_else(|| panic!("no {name}"))).unwrap()
        };
        assert_eq!(json("oci-layout")["imageLayoutVersion"], "1.0.0");
        let index = json("index.json");
        let digest = index["manifests"][0]["digest"].as_str().unwrap().to_owned();
        let mut archive = Archive {
            files,
            digest,
            index,
            manifest: Value::Null,
            config: Value::Null,
        };
        archive.manifest = serde_json::from_slice(archive.blob(&archive.digest)).unwrap();
        let config = archive.manifest["config"]["digest"].as_str().unwrap();
        archive.config = serde_json::from_slice(archive.blob(config)).unwrap();
        archive
    }

    /// A blob, checked against its digest.
    fn blob(&self, digest: &str) -> &Vec<u8> {
        let hex = digest.strip_prefix("sha256:").unwrap();
        let data = &self.files[&format!("blobs/sha256/{hex}")];
        assert_eq!(sha256_hex(data), hex, "blob {digest}");
        data
    }
}

/// syft: the one PREFLIGHT_GATE_SYFT names (tests/run's), else the one
/// deploy/image/syft builds and caches (deploy/image/build needs it too,
/// so it is never missing where an image was built).
fn syft() -> PathBuf {
    if let Some(syft) = std::env::var_os("PREFLIGHT_GATE_SYFT") {
        return syft.into();
    }
    let out = Command::new(format!("{ROOT}/deploy/image/syft"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "deploy/image/syft failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

#[test]
fn the_built_image_runs_as_the_containerfile_says() {
    let (path, printed) = image();
    let archive = Archive::read(&path);
    if let Some(printed) = printed {
        assert_eq!(printed, archive.digest);
    }
    assert_eq!(
        archive.index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"],
        format!("docker.io/library/preflight-gate:{VERSION}"),
        "ctr images import names the image by its ref.name"
    );
    let config = &archive.config["config"];

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
    // Every label of the Containerfile, with the same value, and no other.
    let labels: BTreeMap<String, String> =
        serde_json::from_value(config["Labels"].clone()).unwrap();
    let expected = containerfile_labels();
    assert!(expected.len() >= 10, "{expected:?}");
    assert_eq!(labels, expected);
    // No build history or builder to tell one build from another.
    assert!(
        archive.config.get("history").is_none(),
        "{}",
        archive.config
    );

    // The one layer holds the binary where the entrypoint says, and the
    // user the image runs as exists, with its home.
    let layers = archive.manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{}", archive.manifest);
    let dir = tempfile::tempdir().unwrap();
    let layer_path = dir.path().join("layer.tar.gz");
    std::fs::write(
        &layer_path,
        archive.blob(layers[0]["digest"].as_str().unwrap()),
    )
    .unwrap();
    let paths = members(&layer_path);
    let entries: HashMap<String, (String, String)> = listing(&layer_path)
        .into_iter()
        .map(|(name, mode, owner)| (name, (mode, owner)))
        .collect();
    let binary = entrypoint[0].as_str().unwrap().trim_start_matches('/');
    assert!(paths.contains_key(binary), "no {binary} in the layer");
    assert_eq!(entries[binary].0, "-rwxr-xr-x", "{binary} is executable");
    // Every shared library it asks for, and the loader, from the packages.
    let elf = dir.path().join("binary");
    std::fs::write(&elf, &paths[binary]).unwrap();
    let dynamic = Command::new("objdump")
        .arg("-p")
        .arg(&elf)
        .output()
        .unwrap();
    assert!(dynamic.status.success(), "objdump -p {binary}");
    let needed: Vec<String> = String::from_utf8_lossy(&dynamic.stdout)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("NEEDED").map(|n| n.trim().to_owned()))
        .collect();
    assert!(needed.iter().any(|l| l == "libc.so.6"), "{needed:?}");
    for lib in needed
        .iter()
        .map(String::as_str)
        .chain(["ld-linux-x86-64.so.2"])
    {
        assert!(
            entries.contains_key(&format!("lib/x86_64-linux-gnu/{lib}"))
                || entries.contains_key(&format!("usr/lib/x86_64-linux-gnu/{lib}")),
            "{binary} needs {lib}, which the image lacks"
        );
    }
    let user = config["User"].as_str().unwrap();
    let uid = user.split(':').next().unwrap();
    let passwd = String::from_utf8(paths["etc/passwd"].clone()).unwrap();
    let entry = passwd
        .lines()
        .find(|l| l.split(':').nth(2) == Some(uid))
        .unwrap_or_else(|| panic!("no user {uid}: {passwd}"));
    let home = entry.split(':').nth(5).unwrap().trim_start_matches('/');
    assert_eq!(entries[home], ("drwx------".into(), user.replace(':', "/")));
    assert_eq!(entries["tmp"].0, "drwxrwxrwt");
    assert_eq!(
        paths["licenses/LICENSE"],
        std::fs::read(format!("{ROOT}/LICENSE")).unwrap()
    );

    // Every locked package, and dpkg's record of it, as distroless keeps it.
    for (name, version) in locked_packages() {
        let record = paths
            .get(&format!("var/lib/dpkg/status.d/{name}"))
            .unwrap_or_else(|| panic!("no dpkg record of {name}"));
        let record = String::from_utf8_lossy(record);
        assert!(
            record.lines().any(|l| l == format!("Package: {name}"))
                && record.lines().any(|l| l == format!("Version: {version}")),
            "{name} {version}: {record}"
        );
        // Its copyright, or a link to the directory that has it (libgcc-s1's
        // is gcc-12-base's).
        let doc = format!("usr/share/doc/{name}");
        assert!(
            paths.contains_key(&format!("{doc}/copyright"))
                || entries
                    .get(&doc)
                    .is_some_and(|(mode, _)| mode.starts_with('l')),
            "{name}'s copyright"
        );
    }
    // The distribution, as scanners identify it.
    let os_release = String::from_utf8_lossy(&paths["usr/lib/os-release"]).into_owned();
    assert!(
        os_release.lines().any(|l| l == "ID=debian") && os_release.contains("VERSION_ID=\"12\""),
        "{os_release}"
    );
    // The CA bundle: every certificate ca-certificates ships.
    let bundle = String::from_utf8_lossy(&paths["etc/ssl/certs/ca-certificates.crt"]).into_owned();
    let shipped = paths
        .keys()
        .filter(|p| p.starts_with("usr/share/ca-certificates/") && p.ends_with(".crt"))
        .count();
    assert!(shipped > 100, "{shipped} certificates");
    assert_eq!(
        bundle.matches("-----BEGIN CERTIFICATE-----").count(),
        shipped
    );
    // The image's SBOM, inside and (where built here) beside it.
    let sbom = &paths["usr/share/doc/preflight-gate/image.cdx.json"];
    if printed.is_some() {
        assert_eq!(sbom, &built_here().sbom());
    }
    let sbom: Value = serde_json::from_slice(sbom).unwrap();
    assert_eq!(sbom["bomFormat"], "CycloneDX");
    assert_eq!(sbom["metadata"]["component"]["name"], "preflight-gate");
    let purls: BTreeSet<&str> = sbom["components"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["purl"].as_str())
        .collect();
    for (name, version) in locked_packages() {
        let purl = format!("pkg:deb/debian/{name}@{}", version.replace('+', "%2B"));
        assert!(
            purls.iter().any(|p| p.starts_with(&purl)),
            "the SBOM has no {purl}: {purls:?}"
        );
    }
}

/// Two builds from the same binary, packages and SOURCE_DATE_EPOCH give
/// the same manifest digest, and the same SBOM.
#[test]
fn the_image_builds_reproducibly() {
    let first = built_here();
    let second = Built::new();
    assert_eq!(first.digest, second.digest);
    assert_eq!(first.sbom(), second.sbom());
}

/// syft, the cataloguer image scanners run, finds in the image every
/// Debian package of the lock at its version, the distribution, and the
/// crates the binary is built from (cargo auditable's list), at Cargo.lock's
/// versions.
#[test]
fn a_scanner_sees_the_debian_packages_and_the_crates() {
    let (path, _) = image();
    let out = Command::new(syft())
        .arg("scan")
        .arg(format!("oci-archive:{}", path.display()))
        .args(["--quiet", "-o", "syft-json"])
        .env("SYFT_CHECK_FOR_APP_UPDATE", "false")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "syft failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let found: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(found["distro"]["id"], "debian", "{}", found["distro"]);
    assert!(
        found["distro"]["versionID"]
            .as_str()
            .is_some_and(|v| v == "12" || v.starts_with("12.")),
        "{}",
        found["distro"]
    );
    let artifacts = found["artifacts"].as_array().unwrap();
    let of_type = |kind: &str| -> BTreeMap<String, String> {
        artifacts
            .iter()
            .filter(|a| a["type"] == kind)
            .map(|a| {
                (
                    a["name"].as_str().unwrap().to_owned(),
                    a["version"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let debs = of_type("deb");
    for (name, version) in locked_packages() {
        assert_eq!(
            debs.get(&name),
            Some(&version),
            "syft's Debian packages: {debs:?}"
        );
    }
    let crates = of_type("rust-crate");
    assert!(
        !crates.is_empty(),
        "syft finds no crate in the image's binary: build it with cargo auditable \
         (tests/run runs `cargo auditable test`)"
    );
    let lock = std::fs::read_to_string(format!("{ROOT}/Cargo.lock")).unwrap();
    for name in ["preflight-gate", "kube", "rustls", "axum", "tokio"] {
        let version = crates
            .get(name)
            .unwrap_or_else(|| panic!("syft does not see {name}: {crates:?}"));
        if name != "preflight-gate" {
            assert!(
                lock.contains(&format!("name = \"{name}\"\nversion = \"{version}\"")),
                "{name} {version} is not Cargo.lock's"
            );
        }
    }
    assert_eq!(crates["preflight-gate"], VERSION);
}

/// The release image carries the labels Red Hat's container certification
/// asks for, and the licence under /licenses.
#[test]
fn the_release_image_has_the_certification_labels_and_its_licence() {
    let labels = containerfile_labels();
    for key in [
        "name",
        "vendor",
        "version",
        "release",
        "summary",
        "description",
        "url",
        "io.k8s.display-name",
        "io.k8s.description",
        "maintainer",
    ] {
        assert!(
            labels.contains_key(key),
            "the release image has no {key} label: {labels:?}"
        );
    }
    assert_eq!(labels["version"], VERSION);
    // The licence, gathered by the UBI stage into the root the final stage
    // is made of.
    let text = std::fs::read_to_string(format!("{ROOT}/Containerfile")).unwrap();
    assert!(
        text.lines()
            .any(|l| l == "COPY LICENSE /rootfs/licenses/LICENSE")
            && containerfile()
                .iter()
                .any(|(op, rest)| op == "COPY" && rest == "--from=runtime /rootfs/ /"),
        "no /licenses/LICENSE"
    );
}

#[test]
fn containerfile_words_split_as_a_shell_would() {
    assert_eq!(
        words(r#"a="b c" d=e f='g h' i=j\ k "l\"m"=n"#),
        ["a=b c", "d=e", "f=g h", "i=j k", "l\"m=n"]
    );
}

/// A shell's or a package manager's name: none is in the image.
const SHELLS: [&str; 8] = ["sh", "bash", "dash", "ash", "zsh", "ksh", "csh", "busybox"];
const PACKAGE_MANAGERS: [&str; 12] = [
    "apt",
    "apt-get",
    "apt-cache",
    "aptitude",
    "dpkg",
    "dpkg-deb",
    "rpm",
    "dnf",
    "microdnf",
    "yum",
    "apk",
    "pip",
];

/// The image has no shell and no package manager (docs/security.md, L8):
/// nothing is named like one, anywhere; no locked package is one; and the
/// only programs are the gate and the libraries it loads. A script a
/// package ships is there as a file, but its interpreter is not, so it
/// cannot run.
#[test]
fn the_image_has_no_shell_and_no_package_manager() {
    let (path, _) = image();
    let archive = Archive::read(&path);
    let layers = archive.manifest["layers"].as_array().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let layer_path = dir.path().join("layer.tar.gz");
    std::fs::write(
        &layer_path,
        archive.blob(layers[0]["digest"].as_str().unwrap()),
    )
    .unwrap();
    let entries = listing(&layer_path);
    let paths = members(&layer_path);
    assert!(entries.len() > 100, "{} entries", entries.len());
    for (name, mode, _) in &entries {
        // A directory of that name holds no program (dpkg's /etc/dpkg, of
        // base-files, holds the distribution's origins).
        if mode.starts_with('d') {
            continue;
        }
        let base = name.rsplit('/').next().unwrap();
        assert!(
            !SHELLS.contains(&base) && !PACKAGE_MANAGERS.contains(&base),
            "{name} is in the image"
        );
    }
    for (package, _) in locked_packages() {
        assert!(
            !SHELLS.contains(&package.as_str())
                && !PACKAGE_MANAGERS.contains(&package.as_str())
                && !["libc-bin", "coreutils", "apt-utils"].contains(&package.as_str()),
            "packages.lock installs {package}"
        );
    }
    // Every executable file: the gate, an ELF shared object it may load,
    // or a script whose interpreter the image lacks.
    let mut programs = Vec::new();
    for (name, mode, _) in &entries {
        if !mode.starts_with('-') || !mode.contains('x') {
            continue;
        }
        let data = &paths[name];
        if data.starts_with(b"\x7fELF") {
            let shared = name.contains(".so");
            if !shared {
                programs.push(name.as_str());
            }
        } else if let Some(line) = data.strip_prefix(b"#!") {
            let line = String::from_utf8_lossy(line);
            let interpreter = line.split_whitespace().next().unwrap_or("");
            let present = entries
                .iter()
                .any(|(n, _, _)| format!("/{n}") == interpreter);
            assert!(
                !present,
                "{name} runs with {interpreter}, which is in the image"
            );
        } else {
            panic!("{name} is executable and neither ELF nor a script");
        }
    }
    assert_eq!(programs, ["usr/local/bin/preflight-gate"]);
}

/// The Containerfile's image, built where UBI can be pulled, has none
/// either: its final stage is from scratch and takes only the files the
/// UBI stage gathered, whose build fails if a shell or a package manager
/// is among them (UBI minimal has bash and microdnf).
#[test]
fn the_containerfiles_image_is_from_scratch_with_no_shell() {
    let text = std::fs::read_to_string(format!("{ROOT}/Containerfile")).unwrap();
    let stage = containerfile();
    assert!(
        text.lines().any(|l| l == "FROM scratch"),
        "the final stage is not from scratch"
    );
    let copies: Vec<&String> = stage
        .iter()
        .filter(|(op, _)| op == "COPY" || op == "ADD")
        .map(|(_, rest)| rest)
        .collect();
    assert_eq!(copies, ["--from=runtime /rootfs/ /"], "{stage:?}");
    assert!(stage.iter().all(|(op, _)| op != "RUN"));
    for tool in ["bin/sh", "bin/bash", "usr/bin/microdnf", "usr/bin/rpm"] {
        assert!(text.contains(tool), "the UBI stage does not refuse {tool}");
    }
}
