//! Reading the leaf certificate of a PEM chain, for the certificate checks.

use jiff::Timestamp;
use x509_parser::pem::Pem;
use x509_parser::public_key::PublicKey;

/// What the certificate checks read from a certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Leaf {
    pub subject: String,
    pub not_after: Timestamp,
    /// The RSA modulus size, for an RSA key.
    pub rsa_bits: Option<usize>,
    /// The signature algorithm, by name when known.
    pub signature: String,
    pub sha1: bool,
}

/// SHA-1 signature algorithms: RSA (and its obsolete OID), ECDSA, DSA.
const SHA1_SIGNATURES: &[(&str, &str)] = &[
    ("1.2.840.113549.1.1.5", "sha1WithRSAEncryption"),
    ("1.3.14.3.2.29", "sha1WithRSAEncryption"),
    ("1.2.840.10045.4.1", "ecdsa-with-SHA1"),
    ("1.2.840.10040.4.3", "dsa-with-sha1"),
];

/// Parses the first certificate of a PEM chain.
pub fn leaf(pem: &str) -> Result<Leaf, String> {
    let pem = Pem::iter_from_buffer(pem.as_bytes())
        .next()
        .ok_or("no PEM certificate")?
        .map_err(|e| format!("not PEM: {e}"))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| format!("not an X.509 certificate: {e}"))?;
    let not_after = Timestamp::from_second(cert.validity().not_after.timestamp())
        .map_err(|e| format!("expiry out of range: {e}"))?;
    let rsa_bits = match cert.public_key().parsed() {
        Ok(PublicKey::RSA(rsa)) => Some(rsa.key_size()),
        _ => None,
    };
    let oid = cert.signature_algorithm.algorithm.to_id_string();
    let sha1 = SHA1_SIGNATURES.iter().find(|(id, _)| *id == oid);
    Ok(Leaf {
        subject: cert.subject().to_string(),
        not_after,
        rsa_bits,
        signature: sha1.map_or(oid.clone(), |(_, name)| (*name).to_owned()),
        sha1: sha1.is_some(),
    })
}
