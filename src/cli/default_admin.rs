//! The administrator made for a new data directory when `hdl cluster up` or a lone
//! `hdl serve` is given none (no `--admin-key`, no `--admin-secret-file`), so that a
//! quick start needs no `hdl keygen` first.
//!
//! Its key is an RSA key written as `hdl keygen` writes it (PEM, mode 0600) to
//! `<data_dir>/admin.pem`, the data directory made private (0700) first; it
//! administers `0.NA/<prefix>` for each `--prefix`, `0.NA/ADMIN` when none is given.
//! A data directory that is new (absent or empty) gets the key; one that holds it
//! already (a restart) keeps and uses it, so nothing new is made; one that holds data
//! but no key (formed with an administrator given, or by an earlier release) gets
//! none: an administrator nobody asked for would be a way in nobody watches.

use std::path::{Path, PathBuf};

use crate::auth::SigningKey;
use crate::names::prefix_handle;
use crate::node::data_dir;
use crate::service::bootstrap::KEY_VALUE_INDEX;
use anyhow::Context;

use super::admin_arg::read_key;
use super::keygen::write_new_key;

/// The key file of the made administrator, in the data directory.
pub const KEY_FILE: &str = "admin.pem";
/// The prefix the made administrator administers when no `--prefix` is given.
pub const DEFAULT_PREFIX: &str = "ADMIN";
/// What starts each line of [`print_options`].
pub const OPTIONS_LINE: &str = "administrator: ";

/// The key of the administrator of `dir`: read from `<dir>/admin.pem`, or made there
/// when `dir` is new (the directory prepared as a node's, shared or not as
/// `allow_shared` says); `None` when `dir` holds data but no key.
pub fn load_or_make(
    dir: &Path,
    allow_shared: bool,
) -> anyhow::Result<Option<(PathBuf, SigningKey)>> {
    let key_file = dir.join(KEY_FILE);
    if key_file.exists() {
        return Ok(Some((key_file.clone(), read_key(&key_file)?)));
    }
    if !is_new(dir)? {
        return Ok(None);
    }
    data_dir::prepare(dir, allow_shared)?;
    let key = write_new_key(&key_file)?;
    Ok(Some((key_file, key)))
}

/// Whether `dir` is absent or empty.
fn is_new(dir: &Path) -> anyhow::Result<bool> {
    data_dir::is_new(dir).with_context(|| format!("cannot read {}", dir.display()))
}

/// Prints, for each of `prefixes`, the options a client command (`hdl create`, …)
/// authenticates as the administrator holding `key_file` with:
/// `administrator: --auth 300:0.NA/<prefix> --key <key_file>` (the path quoted for a
/// shell where it needs to be).
pub fn print_options(key_file: &Path, prefixes: &[String]) -> anyhow::Result<()> {
    let path = key_file.to_string_lossy();
    let path = shlex::try_quote(&path).context("the key file's path holds a NUL")?;
    for prefix in prefixes {
        let handle = prefix_handle(prefix).with_context(|| format!("prefix {prefix}"))?;
        println!("{OPTIONS_LINE}--auth {KEY_VALUE_INDEX}:{handle} --key {path}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_directory_gets_a_private_key_which_a_restart_keeps() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("data");
        let (file, made) = load_or_make(&dir, false).unwrap().unwrap();
        assert_eq!(file, dir.join(KEY_FILE));
        assert_eq!((mode(&dir), mode(&file)), (0o700, 0o600));
        let (_, kept) = load_or_make(&dir, false).unwrap().unwrap();
        assert_eq!(kept.public_key().encode(), made.public_key().encode());
    }

    #[test]
    fn a_directory_holding_data_but_no_key_gets_none() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cluster.secret"), "x").unwrap();
        assert!(load_or_make(dir.path(), false).unwrap().is_none());
        assert!(!dir.path().join(KEY_FILE).exists());
    }

    #[test]
    fn a_shared_new_directory_is_refused_before_a_key_is_written() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let refused = load_or_make(dir.path(), false).unwrap_err();
        assert!(refused.to_string().contains("chmod 700"), "{refused}");
        assert!(!dir.path().join(KEY_FILE).exists());
    }
}
