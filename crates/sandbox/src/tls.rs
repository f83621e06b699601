//! TLS material for sandbox servers: a self-signed CA and a server certificate it signed.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// PEM files of a self-signed CA and a server certificate it signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The directory holding all of them.
    pub dir: PathBuf,
    /// The CA certificate, for clients that verify the server.
    pub ca_cert: PathBuf,
    /// Server certificate for `localhost` and `127.0.0.1`.
    pub server_cert: PathBuf,
    /// The server certificate's private key (PKCS#8).
    pub server_key: PathBuf,
}

/// Self-signed CA + server cert for "localhost"/127.0.0.1, PEM files written into `dir`
/// (created if missing): `ca.pem`, `server-cert.pem`, `server-key.pem`.
pub fn generate_tls(dir: &Path) -> Result<TlsFiles> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose,
    };

    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;

    let ca_key = KeyPair::generate().context("generating the CA key")?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Sluice sandbox CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).context("signing the CA")?;

    let server_key = KeyPair::generate().context("generating the server key")?;
    // Both names, because clients verify whichever one they were given to connect to.
    let mut params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_cert = params
        .signed_by(&server_key, &ca_cert, &ca_key)
        .context("signing the server certificate")?;

    let files = TlsFiles {
        dir: dir.to_path_buf(),
        ca_cert: dir.join("ca.pem"),
        server_cert: dir.join("server-cert.pem"),
        server_key: dir.join("server-key.pem"),
    };
    write_file(&files.ca_cert, ca_cert.pem().as_bytes())?;
    write_file(&files.server_cert, server_cert.pem().as_bytes())?;
    write_file(&files.server_key, server_key.serialize_pem().as_bytes())?;
    Ok(files)
}

pub(crate) fn write_file(path: &Path, contents: &[u8]) -> Result<()> {
    fs::write(path, contents).with_context(|| format!("writing {}", path.display()))
}
