//! The HTTPS server configuration: a configured PEM certificate and key, or a
//! self-signed development certificate generated once into `<data_dir>/tls/`.
//!
//! rustls with the ring provider; HTTP/1.1 only, as on the plain port.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum_server::tls_rustls::RustlsConfig;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::HttpError;
use crate::config::HttpConfig;

/// Names the self-signed certificate is valid for.
const SELF_SIGNED_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The HTTPS configuration `config` asks for, or `None` when HTTPS is off.
pub fn server_config(
    config: &HttpConfig,
    data_dir: &Path,
) -> Result<Option<RustlsConfig>, HttpError> {
    let (cert, key) = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => (cert.clone(), key.clone()),
        (Some(_), None) | (None, Some(_)) => {
            return Err(HttpError::Tls("tls_cert and tls_key go together".into()));
        }
        (None, None) if config.self_signed => self_signed(data_dir)?,
        (None, None) => return Ok(None),
    };
    let certs = CertificateDer::pem_file_iter(&cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|error| tls_error(&cert, &error))?;
    let key_der = PrivateKeyDer::from_pem_file(&key).map_err(|error| tls_error(&key, &error))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut server = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| HttpError::Tls(error.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|error| HttpError::Tls(format!("{}: {error}", cert.display())))?;
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Some(RustlsConfig::from_config(Arc::new(server))))
}

/// The paths of the development certificate, generating it when it is missing.
fn self_signed(data_dir: &Path) -> Result<(PathBuf, PathBuf), HttpError> {
    let dir = data_dir.join("tls");
    let cert = dir.join("self-signed-cert.pem");
    let key = dir.join("self-signed-key.pem");
    if cert.exists() && key.exists() {
        return Ok((cert, key));
    }
    let names = SELF_SIGNED_NAMES.map(str::to_owned).to_vec();
    let generated = rcgen::generate_simple_self_signed(names)
        .map_err(|error| HttpError::Tls(format!("cannot generate a certificate: {error}")))?;
    std::fs::create_dir_all(&dir).map_err(|error| tls_error(&dir, &error))?;
    write_private(&key, &generated.signing_key.serialize_pem())?;
    std::fs::write(&cert, generated.cert.pem()).map_err(|error| tls_error(&cert, &error))?;
    Ok((cert, key))
}

/// Writes a key readable by its owner only.
fn write_private(path: &Path, text: &str) -> Result<(), HttpError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|error| tls_error(path, &error))?;
    file.write_all(text.as_bytes())
        .map_err(|error| tls_error(path, &error))
}

fn tls_error(path: &Path, error: &dyn std::fmt::Display) -> HttpError {
    HttpError::Tls(format!("{}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_certificate_is_made_once_and_loads() {
        let dir = tempfile::tempdir().unwrap();
        let config = HttpConfig {
            self_signed: true,
            ..HttpConfig::default()
        };
        assert!(server_config(&config, dir.path()).unwrap().is_some());
        let cert = dir.path().join("tls/self-signed-cert.pem");
        let first = std::fs::read(&cert).unwrap();
        assert!(server_config(&config, dir.path()).unwrap().is_some());
        assert_eq!(std::fs::read(&cert).unwrap(), first);
        assert!(
            server_config(&HttpConfig::default(), dir.path())
                .unwrap()
                .is_none()
        );
        let half = HttpConfig {
            tls_cert: Some(cert),
            ..HttpConfig::default()
        };
        assert!(server_config(&half, dir.path()).is_err());
    }
}
