//! `preflight-gate certs`: a development CA and a serving certificate, for a
//! local control plane or a first run. Production uses service-ca or
//! cert-manager.

use std::path::{Path, PathBuf};

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};

/// File names under the output directory, as a Kubernetes TLS Secret names them.
pub const CA_CERT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
pub const TLS_CERT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";

#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    #[error("cannot generate certificates: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What was written.
#[derive(Debug)]
pub struct Written {
    pub dir: PathBuf,
    pub ca_pem: String,
}

impl Written {
    /// The CA, base64-encoded, for a webhook configuration's `caBundle`.
    pub fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }
}

/// Writes a new CA and a serving certificate for `names` (DNS names or IP
/// addresses; `localhost`, `127.0.0.1` and `::1` are always included).
pub fn generate(out: &Path, names: &[String]) -> Result<Written, CertsError> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca_params.distinguished_name = name("preflight-gate development CA");
    ca_params.not_after = rcgen::date_time_ymd(2036, 1, 1);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

    let mut sans: Vec<String> = names.to_vec();
    for default in ["localhost", "127.0.0.1", "::1"] {
        if !sans.iter().any(|n| n == default) {
            sans.push(default.to_owned());
        }
    }
    let mut params = CertificateParams::new(sans)?;
    params.distinguished_name = name(names.first().map_or("localhost", String::as_str));
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let now = std::time::SystemTime::now();
    params.not_before = (now - std::time::Duration::from_secs(3600)).into();
    params.not_after = (now + std::time::Duration::from_secs(365 * 86400)).into();
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &ca)?;

    std::fs::create_dir_all(out).map_err(|source| CertsError::Write {
        path: out.to_owned(),
        source,
    })?;
    let ca_pem = ca.pem();
    write(&out.join(CA_CERT), &ca_pem, false)?;
    write(&out.join(CA_KEY), &ca.key().serialize_pem(), true)?;
    write(
        &out.join(TLS_CERT),
        &format!("{}{}", cert.pem(), ca_pem),
        false,
    )?;
    write(&out.join(TLS_KEY), &key.serialize_pem(), true)?;
    Ok(Written {
        dir: out.to_owned(),
        ca_pem,
    })
}

fn name(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn
}

fn write(path: &Path, contents: &str, secret: bool) -> Result<(), CertsError> {
    let err = |source| CertsError::Write {
        path: path.to_owned(),
        source,
    };
    // A fresh temporary file beside the target, created 0600 under a random
    // name (a key is never readable by others, not even for a moment, and
    // no one can plant the name beforehand), then renamed over the target:
    // a reader never sees half a file, and a symlink at the target is
    // replaced, not followed.
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let mut tmp = tempfile::NamedTempFile::new_in(dir.unwrap_or(Path::new("."))).map_err(err)?;
    tmp.write_all(contents.as_bytes()).map_err(err)?;
    if !secret {
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .map_err(err)?;
    }
    tmp.persist(path).map(drop).map_err(|e| err(e.error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_chain_that_verifies_for_its_names() {
        let dir = tempfile::tempdir().unwrap();
        let written = generate(dir.path(), &["gate.preflight-gate.svc".into()]).unwrap();
        for f in [CA_CERT, CA_KEY, TLS_CERT, TLS_KEY] {
            assert!(dir.path().join(f).exists(), "{f}");
        }
        let pem = std::fs::read(dir.path().join(TLS_CERT)).unwrap();
        let (_, leaf) = x509_parser::pem::parse_x509_pem(&pem).unwrap();
        let leaf = leaf.parse_x509().unwrap();
        let sans = leaf.subject_alternative_name().unwrap().unwrap();
        let text = format!("{:?}", sans.value.general_names);
        assert!(text.contains("gate.preflight-gate.svc"), "{text}");
        assert!(text.contains("localhost"), "{text}");
        let bundle = base64::engine::general_purpose::STANDARD
            .decode(written.ca_bundle())
            .unwrap();
        assert!(
            String::from_utf8(bundle)
                .unwrap()
                .starts_with("-----BEGIN CERTIFICATE-----")
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(TLS_KEY))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let mode = std::fs::metadata(dir.path().join(TLS_CERT))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
    }

    #[test]
    fn a_symlink_in_place_of_a_key_is_replaced_not_followed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, "not a key").unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.path().join(TLS_KEY)).unwrap();
        generate(dir.path(), &[]).unwrap();
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "not a key");
        let key = dir.path().join(TLS_KEY);
        assert!(!std::fs::symlink_metadata(&key).unwrap().is_symlink());
        assert_eq!(
            std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // Nothing left behind but the four files and the decoy.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 5);
    }
}
