//! Development certificates: a throw-away CA and a leaf certificate for some host names, made with
//! rcgen so nobody has to fight openssl (seed 002 spends half its length on that).
//!
//! Used by `sluice cert` (written to files) and by listeners with `tls = "self-signed"` (kept in
//! memory). The CA is separate from the leaf so a user can trust the CA once in a browser or curl.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// Host names a development certificate covers when none are given.
pub const DEFAULT_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// A development CA and a leaf certificate signed by it, PEM-encoded.
pub struct DevCertificate {
    pub ca_cert_pem: String,
    pub leaf_cert_pem: String,
    pub leaf_key_pem: String,
    /// The leaf certificate followed by the CA, as a server sends it.
    pub chain_pem: String,
}

/// Make a CA and a leaf certificate for `hosts` (DNS names or IP addresses).
pub fn generate(hosts: &[String]) -> Result<DevCertificate, rcgen::Error> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "sluice development CA");
    ca_params
        .distinguished_name
        .push(DnType::OrganizationName, "sluice");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    set_validity(&mut ca_params, 3650);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

    let mut leaf_params = CertificateParams::new(hosts.to_vec())?;
    let common_name = hosts.first().map_or("localhost", String::as_str);
    leaf_params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    leaf_params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    // Browsers reject leaf certificates valid for more than ~13 months.
    set_validity(&mut leaf_params, 397);
    let leaf_key = KeyPair::generate()?;
    let leaf = leaf_params.signed_by(&leaf_key, &ca)?;

    let ca_cert_pem = ca.pem();
    let leaf_cert_pem = leaf.pem();
    Ok(DevCertificate {
        chain_pem: format!("{leaf_cert_pem}{ca_cert_pem}"),
        ca_cert_pem,
        leaf_cert_pem,
        leaf_key_pem: leaf_key.serialize_pem(),
    })
}

fn set_validity(params: &mut CertificateParams, days: u64) {
    let now = std::time::SystemTime::now();
    // A day of slack for clocks that are slightly behind.
    let yesterday = now - Duration::from_secs(86_400);
    params.not_before = yesterday.into();
    params.not_after = (now + Duration::from_secs(days * 86_400)).into();
}

/// Files written by [`write_files`].
pub struct WrittenFiles {
    pub ca_cert: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Write `ca.pem`, `cert.pem` (leaf + CA chain) and `key.pem` into `dir` (created if missing).
/// The key file is readable by its owner only.
pub fn write_files(cert: &DevCertificate, dir: &Path) -> std::io::Result<WrittenFiles> {
    std::fs::create_dir_all(dir)?;
    let files = WrittenFiles {
        ca_cert: dir.join("ca.pem"),
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
    };
    std::fs::write(&files.ca_cert, &cert.ca_cert_pem)?;
    std::fs::write(&files.cert, &cert.chain_pem)?;
    write_private(&files.key, cert.leaf_key_pem.as_bytes())?;
    Ok(files)
}

fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(contents)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn leaf_is_signed_for_names_and_ips() {
        let cert = generate(&["localhost".into(), "127.0.0.1".into()]).unwrap();
        assert!(cert.chain_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_eq!(cert.chain_pem.matches("BEGIN CERTIFICATE").count(), 2);
        assert!(cert.leaf_key_pem.contains("PRIVATE KEY"));
    }

    #[test]
    fn files_are_written_with_a_private_key() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let cert = generate(&["localhost".into()]).unwrap();
        let files = write_files(&cert, &dir.path().join("certs")).unwrap();
        let mode = std::fs::metadata(&files.key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(
            std::fs::read_to_string(&files.ca_cert)
                .unwrap()
                .contains("CERTIFICATE")
        );
    }
}
