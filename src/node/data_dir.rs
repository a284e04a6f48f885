//! The node's data directory: made private (0700) when the node creates it, and
//! refused when other users may read it, since its store holds every HS_SECKEY and
//! its key files the node's private keys. Owns nothing inside the directory.

use std::fs::DirBuilder;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why the data directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    /// It could not be created or examined.
    #[error("cannot create data directory {path}: {source}")]
    Create {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Users other than its owner may enter it.
    #[error(
        "data directory {path} is open to other users (mode {mode:04o}) and holds secret keys; \
         run `chmod 700 {path}`, or set `allow_shared_data_dir = true` to start anyway"
    )]
    Shared {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
}

/// Creates `path` (and missing parents) readable by its owner only; an existing
/// directory that group or others may read or enter is refused unless
/// `allow_shared` is set.
pub fn prepare(path: &Path, allow_shared: bool) -> Result<(), DataDirError> {
    let create_error = |source| DataDirError::Create {
        path: path.to_owned(),
        source,
    };
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(create_error)?;
    let mode = std::fs::metadata(path)
        .map_err(create_error)?
        .permissions()
        .mode()
        & 0o7777;
    if mode & 0o077 != 0 && !allow_shared {
        return Err(DataDirError::Shared {
            path: path.to_owned(),
            mode,
        });
    }
    Ok(())
}

/// Whether `dir` is absent or empty: a new data directory.
pub fn is_new(dir: &Path) -> std::io::Result<bool> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => Ok(entries.next().is_none()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_directory_is_private_and_a_shared_one_refused() {
        let parent = tempfile::tempdir().unwrap();
        let fresh = parent.path().join("a/b");
        prepare(&fresh, false).unwrap();
        let mode = std::fs::metadata(&fresh).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);

        let shared = parent.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
        let refused = prepare(&shared, false).unwrap_err();
        assert!(refused.to_string().contains("chmod 700"), "{refused}");
        prepare(&shared, true).unwrap();
    }
}
