//! The cluster secret on disk: a file of hex digits (32 random bytes, 64 digits, as
//! hdl creates it), readable by its owner only.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::auth::{ClusterSecret, SecretError};

/// Random bytes in a secret file hdl creates.
const CREATED_LEN: usize = 32;

/// Why a secret file cannot be used.
#[derive(Debug, Error)]
pub enum SecretFileError {
    /// Reading or creating the file failed.
    #[error("cluster secret file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the file system said.
        source: io::Error,
    },
    /// The file holds something else than an even number of hex digits.
    #[error("cluster secret file {path} does not hold hex digits")]
    NotHex {
        /// The file.
        path: PathBuf,
    },
    /// The operating system gave no randomness for a new secret.
    #[error("no randomness for a new cluster secret: {0}")]
    Random(getrandom::Error),
    /// The secret in the file is not usable.
    #[error("cluster secret file {path}: {source}")]
    Secret {
        /// The file.
        path: PathBuf,
        /// What is wrong with the secret.
        source: SecretError,
    },
}

/// The secret in the file at `path`.
pub fn read_secret_file(path: &Path) -> Result<ClusterSecret, SecretFileError> {
    let io_error = |source| SecretFileError::Io {
        path: path.to_owned(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(io_error)?;
    let bytes = from_hex(text.trim()).ok_or_else(|| SecretFileError::NotHex {
        path: path.to_owned(),
    })?;
    ClusterSecret::new(&bytes).map_err(|source| SecretFileError::Secret {
        path: path.to_owned(),
        source,
    })
}

/// The secret in the file at `path`, first creating the file with 32 random bytes
/// (mode 0600) if there is none.
pub fn read_or_create_secret_file(path: &Path) -> Result<ClusterSecret, SecretFileError> {
    let mut bytes = [0_u8; CREATED_LEN];
    getrandom::fill(&mut bytes).map_err(SecretFileError::Random)?;
    let created = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path);
    match created {
        Ok(mut file) => {
            let text = format!("{}\n", to_hex(&bytes));
            file.write_all(text.as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(|source| SecretFileError::Io {
                    path: path.to_owned(),
                    source,
                })?;
        }
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
        Err(source) => {
            return Err(SecretFileError::Io {
                path: path.to_owned(),
                source,
            });
        }
    }
    read_secret_file(path)
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| {
            let pair = text.get(at..at + 2)?;
            u8::from_str_radix(pair, 16).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_created_secret_is_private_and_read_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.secret");
        read_or_create_secret_file(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.trim().len(), 2 * CREATED_LEN);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        read_or_create_secret_file(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "kept as is");
    }

    #[test]
    fn a_file_that_is_not_hex_or_too_short_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        std::fs::write(&path, "zz\n").unwrap();
        assert!(matches!(
            read_secret_file(&path),
            Err(SecretFileError::NotHex { .. })
        ));
        std::fs::write(&path, "00ff\n").unwrap();
        assert!(matches!(
            read_secret_file(&path),
            Err(SecretFileError::Secret { .. })
        ));
        assert_eq!(from_hex("00fF10"), Some(vec![0, 255, 16]));
    }
}
