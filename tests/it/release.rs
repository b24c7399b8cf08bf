//! The release: one version stamped into the binary, the image and the
//! manifests; the Containerfile on UBI with its bases pinned by digest; a
//! binary that runs on UBI 9's glibc; the install guide's image override,
//! rendered exactly as the guide says; deploy/release/; and the release
//! script, deploy/release/cut, cutting a release into a scratch directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::deploy::{IMAGE_REQUIRED, OVERLAYS, deployments, kubectl, objects, rendered};
use crate::oc::oc;
use crate::support::not_run_here;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const VERSION: &str = env!("CARGO_PKG_VERSION");
const BINARY: &str = env!("CARGO_BIN_EXE_preflight-gate");
/// The name the base gives the image (deploy/base/kustomization.yaml,
/// `images:`), which only the tests' own overlays deploy.
pub const IMAGE_NAME: &str = "ghcr.io/preflight-gate/preflight-gate";
/// The newest glibc UBI 9 has.
const UBI9_GLIBC: (u32, u32) = (2, 34);

fn read(relative: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(relative))
        .unwrap_or_else(|e| panic!("cannot read {relative}: {e}"))
}

fn is_digest(text: &str) -> bool {
    text.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The images a rendering deploys: its Deployment's, or on a hub those of
/// the Deployment it carries to the managed clusters.
fn images(objects: &[Value]) -> Vec<String> {
    deployments(objects)
        .into_iter()
        .flat_map(|d| {
            d["spec"]["template"]["spec"]["containers"]
                .as_array()
                .unwrap()
        })
        .map(|c| c["image"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn one_version_is_stamped_into_the_binary_the_image_and_the_manifests() {
    // The binary.
    let out = Command::new(BINARY).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("preflight-gate {VERSION}\n")
    );
    // The image's labels.
    let containerfile = read("Containerfile");
    assert!(
        containerfile
            .lines()
            .any(|l| l == format!("ARG VERSION={VERSION}")),
        "Containerfile: ARG VERSION={VERSION}"
    );
    for label in [
        "version=\"${VERSION}\"",
        "org.opencontainers.image.version=\"${VERSION}\"",
    ] {
        assert!(
            containerfile.contains(label),
            "Containerfile: LABEL {label}"
        );
    }
    // The manifests: every object carries the version; the image is never
    // a tag: the overlays an administrator installs deploy the image they
    // set (deploy/rendered/ stands in with a test image, by digest).
    for overlay in OVERLAYS {
        let objects = rendered(overlay);
        for o in &objects {
            assert_eq!(
                o["metadata"]["labels"]["app.kubernetes.io/version"], VERSION,
                "{overlay}: {} {} has no version label",
                o["kind"], o["metadata"]["name"]
            );
        }
        // dev runs no Deployment; node deploys the image the test node
        // built and imported, under a local name.
        if !matches!(overlay, "dev" | "node") {
            assert_eq!(images(&objects), [crate::deploy::TEST_IMAGE]);
        }
    }
    // The changelog has the version.
    assert!(
        read("CHANGELOG.md").contains(&format!("\n## [{VERSION}]")),
        "CHANGELOG.md has no section for {VERSION}"
    );
}

#[test]
fn the_licence_is_the_apache_licence_cargo_toml_names() {
    let licence = read("LICENSE");
    assert!(
        licence.contains("Apache License\n                           Version 2.0, January 2004")
    );
    assert!(licence.contains("END OF TERMS AND CONDITIONS"));
    assert!(read("Cargo.toml").contains("\nlicense = \"Apache-2.0\"\n"));
}

/// The Containerfile's ARG defaults, and each stage's base with them
/// substituted.
fn containerfile_bases() -> (BTreeMap<String, String>, Vec<String>) {
    let text = read("Containerfile");
    let mut args = BTreeMap::new();
    let mut bases = Vec::new();
    for line in text.lines() {
        if let Some(arg) = line.strip_prefix("ARG ")
            && let Some((name, value)) = arg.split_once('=')
        {
            args.insert(name.to_owned(), value.to_owned());
        }
        if let Some(from) = line.strip_prefix("FROM ") {
            let image = from.split_whitespace().next().unwrap();
            let image = match image.strip_prefix("${").and_then(|i| i.strip_suffix('}')) {
                Some(arg) => args
                    .get(arg)
                    .unwrap_or_else(|| panic!("FROM ${{{arg}}} has no ARG default"))
                    .clone(),
                None => image.to_owned(),
            };
            bases.push(image);
        }
    }
    (args, bases)
}

#[test]
fn the_containerfile_builds_on_ubi_with_bases_pinned_by_digest() {
    let (_, bases) = containerfile_bases();
    // The builder, UBI for the runtime's files, and the image from scratch.
    assert_eq!(bases.len(), 3, "{bases:?}");
    assert_eq!(bases[2], "scratch", "{bases:?}");
    let bases = &bases[..2];
    let changelog = read("CHANGELOG.md");
    for base in bases {
        let (_, digest) = base
            .split_once('@')
            .unwrap_or_else(|| panic!("{base} is not pinned by digest"));
        assert!(is_digest(digest), "{base}");
        assert!(
            changelog.contains(base.as_str()),
            "CHANGELOG.md does not say where {base} comes from"
        );
    }
    let runtime = bases.last().unwrap();
    assert!(
        runtime.starts_with("registry.access.redhat.com/ubi9/ubi-minimal:")
            || runtime.starts_with("registry.access.redhat.com/ubi9/ubi-micro:"),
        "the runtime base is UBI 9 minimal or micro: {runtime}"
    );
    // What the Deployment and deploy/image/build rely on stays as it was.
    let text = read("Containerfile");
    for line in [
        "USER 65532:65532",
        "EXPOSE 8443 9090",
        "ENTRYPOINT [\"/usr/local/bin/preflight-gate\"]",
        "CMD [\"serve\"]",
        "COPY LICENSE /rootfs/licenses/LICENSE",
        "COPY --from=runtime /rootfs/ /",
    ] {
        assert!(text.lines().any(|l| l == line), "Containerfile: {line}");
    }
    // LICENSE is in the build context.
    let ignored = read(".containerignore");
    assert!(!ignored.lines().any(|l| l.trim() == "LICENSE"));
}

#[test]
fn the_binary_asks_for_no_glibc_newer_than_ubi_9s() {
    let out = Command::new("objdump")
        .args(["-T", BINARY])
        .output()
        .unwrap_or_else(|e| panic!("cannot run objdump ({e}): install binutils (tests/run does)"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let versions: Vec<(u32, u32)> = text
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter_map(|w| w.strip_prefix("GLIBC_"))
        .filter_map(|v| {
            let mut parts = v.split('.');
            Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
        })
        .collect();
    assert!(!versions.is_empty(), "no versioned glibc symbol: {text}");
    let newest = versions.iter().max().unwrap();
    assert!(
        *newest <= UBI9_GLIBC,
        "the binary needs GLIBC_{}.{}, UBI 9 has {}.{}",
        newest.0,
        newest.1,
        UBI9_GLIBC.0,
        UBI9_GLIBC.1
    );
}

/// The first fenced block of `lang` after `marker` in `text`.
fn block_after<'a>(text: &'a str, marker: &str, lang: &str) -> &'a str {
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} in the guide"));
    let fence = format!("```{lang}\n");
    let start = at + text[at..].find(&fence).expect("a fenced block") + fence.len();
    let end = start + text[start..].find("\n```").unwrap();
    &text[start..=end]
}

/// Renders `kustomization` (text) as `my-cluster/` beside a checkout named
/// `preflight-gate/`, with `command` run in their parent, as the guide says.
fn render_as_guided(kustomization: &str, command: &[&str]) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(ROOT, dir.path().join("preflight-gate")).unwrap();
    std::fs::create_dir(dir.path().join("my-cluster")).unwrap();
    std::fs::write(
        dir.path().join("my-cluster/kustomization.yaml"),
        kustomization,
    )
    .unwrap();
    let (tool, args) = match (command[0], oc()) {
        ("oc", Some(oc)) => (oc.to_path_buf(), &command[1..]),
        ("oc", None) => {
            eprintln!(
                "the real oc (../shared/tools/oc) is absent: rendering with kubectl, \
                 whose kustomize oc embeds too"
            );
            (PathBuf::from(kubectl()), &command[1..])
        }
        _ => (PathBuf::from(kubectl()), &command[1..]),
    };
    let out = Command::new(&tool)
        .args(args)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} {args:?}: {}",
        tool.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    objects(&String::from_utf8(out.stdout).unwrap())
}

/// The image the overlay of `kustomization` (text) sets: the data.image
/// its patch gives the ConfigMap preflight-gate-image.
fn image_set_by(kustomization: &Value) -> String {
    let patches = kustomization["patches"].as_array().expect("patches");
    let set: Vec<String> = patches
        .iter()
        .filter_map(|p| p["patch"].as_str())
        .filter_map(|p| serde_saphyr::from_str::<Value>(p).ok())
        .filter(|p| p["kind"] == "ConfigMap" && p["metadata"]["name"] == "preflight-gate-image")
        .map(|p| p["data"]["image"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(set.len(), 1, "one patch sets the image: {kustomization}");
    set[0].clone()
}

/// On Kubernetes 1.28 and 1.29 (OpenShift 4.15, 4.16) the checks'
/// namespace's admission policy is not served: the guide's patches,
/// added to its overlay, leave out the policy and its binding and nothing
/// else.
#[test]
fn the_guides_patch_for_clusters_without_admission_policies_drops_the_policy_alone() {
    let guide = read("docs/install.md");
    let mut overlay: Value =
        serde_saphyr::from_str(block_after(&guide, "<!-- image-override", "yaml")).unwrap();
    let patches: Value =
        serde_saphyr::from_str(block_after(&guide, "<!-- no-admission-policy", "yaml")).unwrap();
    let whole = render_as_guided(
        &serde_saphyr::to_string(&overlay).unwrap(),
        &["oc", "kustomize", "my-cluster"],
    );
    overlay["patches"]
        .as_array_mut()
        .unwrap()
        .extend(patches["patches"].as_array().unwrap().iter().cloned());
    let without = render_as_guided(
        &serde_saphyr::to_string(&overlay).unwrap(),
        &["oc", "kustomize", "my-cluster"],
    );
    let dropped: Vec<&Value> = whole.iter().filter(|o| !without.contains(o)).collect();
    let kinds: Vec<&str> = dropped
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding"
        ],
        "{dropped:?}"
    );
    assert_eq!(without.len() + 2, whole.len());
}

#[test]
fn the_guides_image_override_deploys_the_image_it_sets() {
    let guide = read("docs/install.md");
    let snippet = block_after(&guide, "<!-- image-override", "yaml");
    let overlay: Value = serde_saphyr::from_str(snippet).unwrap();
    let resource = overlay["resources"][0].as_str().unwrap();
    assert_eq!(resource, "../preflight-gate/deploy/overlays/openshift");
    // The override sets the image by digest.
    let wanted = image_set_by(&overlay);
    let (_, digest) = wanted.split_once('@').expect("the image by digest");
    assert!(is_digest(digest), "{wanted}");
    // The command the guide gives to look before applying.
    let commands = block_after(
        &guide[guide.find("<!-- image-override").unwrap()..],
        "```yaml",
        "sh",
    );
    let render = commands
        .lines()
        .find(|l| l.contains("kustomize my-cluster"))
        .expect("the guide shows how to render the overlay");
    let render: Vec<&str> = render
        .split('|')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(render, ["oc", "kustomize", "my-cluster"]);

    // Over each overlay an administrator installs (dev and node, the
    // tests' own, set their image themselves).
    for name in IMAGE_REQUIRED {
        let text = snippet.replace("overlays/openshift", &format!("overlays/{name}"));
        let objects = render_as_guided(&text, &render);
        assert_eq!(images(&objects), std::slice::from_ref(&wanted), "{name}");
        // The ConfigMap that carries the choice is never rendered.
        assert!(
            !objects.iter().any(
                |o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "preflight-gate-image"
            ),
            "{name}"
        );
    }
    // The override the guide used to give, kustomize's `images:` alone,
    // sets nothing: rendering fails, and says what to set.
    let stale = format!(
        "resources:\n  - ../preflight-gate/deploy/overlays/openshift\nimages:\n  - name: {IMAGE_NAME}\n    newName: registry.internal/platform/preflight-gate\n    digest: {digest}\n"
    );
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(ROOT, dir.path().join("preflight-gate")).unwrap();
    std::fs::create_dir(dir.path().join("my-cluster")).unwrap();
    std::fs::write(dir.path().join("my-cluster/kustomization.yaml"), stale).unwrap();
    let out = Command::new(kubectl())
        .args(["kustomize", "my-cluster"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success(), "images: alone rendered");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("SET_data.image_OF_ConfigMap_preflight-gate-image"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The hub's overlay of the guide ("A fleet, from an Open Cluster
/// Management hub") carries the image it sets, inside its
/// ManifestWorkReplicaSet, and nothing of the gate runs on the hub.
#[test]
fn the_guides_fleet_overlay_carries_the_image_it_sets() {
    let guide = read("docs/install.md");
    let snippet = block_after(&guide, "<!-- fleet-image", "yaml");
    let overlay: Value = serde_saphyr::from_str(snippet).unwrap();
    assert_eq!(
        overlay["resources"][0],
        "../preflight-gate/deploy/overlays/fleet"
    );
    let wanted = image_set_by(&overlay);
    let objects = render_as_guided(snippet, &["oc", "kustomize", "my-cluster"]);
    assert_eq!(images(&objects), [wanted]);
    assert!(
        !objects.iter().any(|o| o["kind"] == "Deployment"),
        "a Deployment on the hub"
    );
}

/// The overlay with the image pinned, as deploy/release/cut renders it.
fn pinned(overlay: &str, image: &str) -> Vec<Value> {
    let (repository, digest) = image.split_once('@').unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(ROOT, dir.path().join("checkout")).unwrap();
    std::fs::create_dir(dir.path().join("layer")).unwrap();
    std::fs::write(
        dir.path().join("layer/kustomization.yaml"),
        format!(
            "resources:\n  - ../checkout/deploy/overlays/{overlay}\npatches:\n  - patch: |-\n      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: preflight-gate-image\n        namespace: preflight-gate\n      data:\n        image: {repository}@{digest}\n"
        ),
    )
    .unwrap();
    let out = Command::new(kubectl())
        .arg("kustomize")
        .arg(dir.path().join("layer"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    objects(&String::from_utf8(out.stdout).unwrap())
}

/// The files of a release's manifests directory that are there, by name:
/// `IMAGE` and every `*.yaml`.
fn release_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n == "IMAGE" || n.ends_with(".yaml"))
        .collect();
    names.sort();
    names
}

/// A release's manifests directory (`dir`, named `shown`; what
/// `deploy/release/cut --manifests-dir` writes) holds `IMAGE`,
/// pinned by digest, and each overlay of this tree with exactly that image.
fn assert_current_release(dir: &Path, shown: &str) {
    assert_eq!(
        release_files(dir),
        [
            "IMAGE",
            "fleet-member.yaml",
            "fleet.yaml",
            "hypershift.yaml",
            "kubernetes.yaml",
            "openshift.yaml"
        ],
        "{shown}: not a whole release"
    );
    let image = std::fs::read_to_string(dir.join("IMAGE")).unwrap();
    let image = image.trim();
    let (_, digest) = image.split_once('@').expect("IMAGE is pinned by digest");
    assert!(is_digest(digest), "{shown}/IMAGE: {image}");
    for overlay in IMAGE_REQUIRED {
        let released =
            objects(&std::fs::read_to_string(dir.join(format!("{overlay}.yaml"))).unwrap());
        assert_eq!(images(&released), [image.to_owned()], "{shown}: {overlay}");
        assert!(
            released == pinned(overlay, image),
            "{shown}/{overlay}.yaml is not deploy/overlays/{overlay} with {image}: cut the release again"
        );
    }
}

/// deploy/release/ holds either no release, as before the first one
/// (deploy/release/README.md), or a whole release that is current: the
/// overlays of this tree with the released image pinned. The check of a
/// whole release runs in every tree all the same, on the release
/// `the_release_script_cuts_a_release` cuts with `--manifests-dir`.
#[test]
fn deploy_release_holds_no_release_or_a_current_one() {
    let dir = Path::new(ROOT).join("deploy/release");
    if release_files(&dir).is_empty() {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "deploy/release/ holds no release yet: its manifests are checked once a release \
             commit writes them (deploy/release/cut --manifests-dir deploy/release)"
        );
        return;
    }
    assert_current_release(&dir, "deploy/release");
}

/// A digest for the release script when no image is built here: the
/// sha256 of the words below, so that it is no image's.
fn stand_in_digest() -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg("printf 'no image was built for this test' | sha256sum")
        .output()
        .unwrap();
    format!("sha256:{}", &String::from_utf8_lossy(&out.stdout)[..64])
}

fn cut(args: &[&str], kubectl: Option<&str>) -> std::process::Output {
    let mut command = Command::new(format!("{ROOT}/deploy/release/cut"));
    command.args(args);
    if let Some(kubectl) = kubectl {
        command.env("KUBECTL", kubectl);
    }
    command.output().unwrap()
}

#[test]
fn the_release_script_cuts_a_release() {
    let out_dir = tempfile::tempdir().unwrap();
    let out_path = out_dir.path().to_str().unwrap();
    let repository = "registry.internal/platform/preflight-gate";
    let manifests_dir = out_dir.path().join("release");
    let manifests_path = manifests_dir.to_str().unwrap();
    let mut args = vec![
        "--repository",
        repository,
        "--out",
        out_path,
        "--manifests-dir",
        manifests_path,
        "--binary",
        BINARY,
    ];
    let builder = Path::new(ROOT).join("deploy/image/build");
    let stand_in = stand_in_digest();
    let built_here = builder.is_file();
    if !built_here {
        not_run_here(
            "the_release_script_cuts_a_release, its image step",
            &format!(
                "deploy/image/build is not in this tree, so no image is built; \
                 the rest of the release is cut with --digest {stand_in}"
            ),
        );
        args.extend(["--digest", &stand_in]);
    }
    let out = cut(&args, Some(kubectl()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "deploy/release/cut failed:\n{stderr}");
    // --binary is the image's binary too: nothing is built.
    assert!(
        !stderr.contains("building the binary") && !stderr.contains("building the release binary"),
        "cut built a binary although --binary named one:\n{stderr}"
    );
    let image = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let (named, digest) = image.split_once('@').unwrap();
    assert_eq!(named, repository);
    assert!(is_digest(digest), "{image}");
    if !built_here {
        assert_eq!(digest, stand_in);
    }
    let path = |name: &str| out_dir.path().join(name);
    assert_eq!(
        std::fs::read_to_string(path("IMAGE")).unwrap().trim(),
        image
    );

    // The image: an OCI archive whose index names the digest printed.
    if built_here {
        let archive = path(&format!("preflight-gate-{VERSION}.oci.tar"));
        let index = Command::new("tar")
            .arg("-xOf")
            .arg(&archive)
            .arg("index.json")
            .output()
            .unwrap();
        assert!(
            index.status.success(),
            "{} has no index.json",
            archive.display()
        );
        let index: Value = serde_json::from_slice(&index.stdout).unwrap();
        assert!(
            index["manifests"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["digest"] == digest),
            "{index}"
        );
        // The image's own SBOM (syft's, over its Debian packages and
        // crates) is beside it, and in the checksums.
        let image_sbom: Value = serde_json::from_slice(
            &std::fs::read(path(&format!("preflight-gate-{VERSION}.oci.cdx.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(image_sbom["bomFormat"], "CycloneDX");
        assert!(
            image_sbom["components"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["name"] == "libc6"),
            "the image's SBOM names no libc6"
        );
        assert!(
            std::fs::read_to_string(path("SHA256SUMS"))
                .unwrap()
                .contains(&format!("preflight-gate-{VERSION}.oci.cdx.json")),
            "the image's SBOM is not in SHA256SUMS"
        );
    }

    // The CLI tarball: the binary, which runs and says its version, and the
    // licence.
    let tarball = std::fs::read_dir(out_dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-linux.tar.gz"))
        .expect("a CLI tarball");
    let listing = Command::new("tar")
        .arg("-tzf")
        .arg(&tarball)
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    // The SBOM: CycloneDX, naming the binary's crate and what it is built
    // from, as Cargo.lock pins it.
    let sbom: Value = serde_json::from_slice(
        &std::fs::read(path(&format!("preflight-gate-{VERSION}.cdx.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(sbom["bomFormat"], "CycloneDX");
    assert_eq!(sbom["metadata"]["component"]["name"], "preflight-gate");
    assert_eq!(sbom["metadata"]["component"]["version"], VERSION);
    let lock = std::fs::read_to_string(format!("{ROOT}/Cargo.lock")).unwrap();
    for name in ["kube", "rustls", "axum", "tokio"] {
        let component = sbom["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not in the SBOM"));
        let pinned = format!(
            "name = \"{name}\"\nversion = \"{}\"",
            component["version"].as_str().unwrap()
        );
        assert!(
            lock.contains(&pinned),
            "{name} {} is not Cargo.lock's",
            component["version"]
        );
    }
    for file in [
        "preflight-gate",
        "LICENSE",
        "README.md",
        "CHANGELOG.md",
        "sbom.cdx.json",
        "docs/runbooks/PreflightGateDown.md",
    ] {
        assert!(
            listing
                .lines()
                .any(|l| l == format!("preflight-gate-{VERSION}/{file}")),
            "{file} not in the tarball:\n{listing}"
        );
    }
    let unpacked = tempfile::tempdir().unwrap();
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(unpacked.path())
        .status()
        .unwrap();
    assert!(status.success());
    let version = Command::new(
        unpacked
            .path()
            .join(format!("preflight-gate-{VERSION}/preflight-gate")),
    )
    .arg("--version")
    .output()
    .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        format!("preflight-gate {VERSION}\n")
    );

    // The manifests: each overlay as checked in, with the image pinned.
    for overlay in IMAGE_REQUIRED {
        let text = std::fs::read_to_string(path(&format!("manifests/{overlay}.yaml"))).unwrap();
        let released = objects(&text);
        assert_eq!(images(&released), std::slice::from_ref(&image), "{overlay}");
        let mut expected = rendered(overlay);
        for o in &mut expected {
            // A hub's Deployment is in its ManifestWorkReplicaSet.
            let mut deployments: Vec<&mut Value> = if o["kind"] == "ManifestWorkReplicaSet" {
                o["spec"]["manifestWorkTemplate"]["workload"]["manifests"]
                    .as_array_mut()
                    .unwrap()
                    .iter_mut()
                    .collect()
            } else {
                vec![o]
            };
            deployments.retain(|d| d["kind"] == "Deployment");
            for d in deployments {
                d["spec"]["template"]["spec"]["containers"][0]["image"] = image.clone().into();
            }
        }
        assert!(released == expected, "{overlay}: differs beyond the image");
    }
    // --manifests-dir: what a release commit writes into deploy/release/,
    // as deploy_release_holds_no_release_or_a_current_one checks it there.
    assert_current_release(&manifests_dir, "--manifests-dir");
    assert_eq!(
        std::fs::read_to_string(manifests_dir.join("IMAGE"))
            .unwrap()
            .trim(),
        image
    );

    // The checksums hold.
    let check = Command::new("sha256sum")
        .args(["--check", "--quiet", "SHA256SUMS"])
        .current_dir(out_dir.path())
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let sums = std::fs::read_to_string(path("SHA256SUMS")).unwrap();
    assert!(sums.contains("manifests/openshift.yaml"), "{sums}");
}

#[test]
fn the_release_script_refuses_bad_input_clearly() {
    for (args, says) in [
        (
            &["--digest", "sha256:nothex"][..],
            "is not sha256:<64 hex digits>",
        ),
        (
            &["--repository", "Registry/UPPER:tag"],
            "is not an image repository",
        ),
        (&["--frobnicate"], "unknown argument: --frobnicate"),
        (&["--out"], "--out needs a value"),
    ] {
        let out = cut(args, None);
        assert!(!out.status.success(), "{args:?} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
