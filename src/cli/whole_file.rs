//! A file a command writes that appears whole or not at all (`hdl export --out`,
//! `hdl backup --out`): written beside, as `FILE.partial`, synced, and renamed into
//! place once complete; the partial file is removed when the command fails first.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// A file being written beside its final path.
#[derive(Debug)]
pub struct WholeFile {
    path: PathBuf,
    partial: PathBuf,
    kept: bool,
}

impl WholeFile {
    /// Starts writing `path` (as `path.partial`, readable and writable, created with
    /// permission bits `mode` less the umask); the file to write.
    pub fn create(path: &Path, mode: u32) -> anyhow::Result<(WholeFile, File)> {
        let mut partial = path.as_os_str().to_owned();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&partial)
            .with_context(|| format!("cannot write {}", partial.display()))?;
        let whole = WholeFile {
            path: path.to_owned(),
            partial,
            kept: false,
        };
        Ok((whole, file))
    }

    /// Syncs `file` (the one [`WholeFile::create`] returned, complete) and renames it
    /// to its final path, durably.
    pub fn keep(mut self, file: &File) -> anyhow::Result<()> {
        file.sync_all()
            .with_context(|| format!("cannot write {}", self.partial.display()))?;
        std::fs::rename(&self.partial, &self.path).with_context(|| {
            format!(
                "cannot rename {} to {}",
                self.partial.display(),
                self.path.display()
            )
        })?;
        self.kept = true;
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        File::open(dir)
            .and_then(|dir| dir.sync_all())
            .with_context(|| format!("cannot sync {}", dir.display()))
    }
}

impl Drop for WholeFile {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}
