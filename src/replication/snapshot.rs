//! Snapshot data and the node's current snapshot file.
//!
//! Snapshot data, as sent to followers and as kept on disk, is
//! `u8 format (3) ‖ postcard SnapshotMeta ‖ postcard StoreImage`: the meta comes first so
//! that the current snapshot's meta can be read without decoding the image. Older
//! formats are still read: format 2, written before the image held documents and
//! slot states, as an image with none (a store never sliced), and format 1, written before it held the results of recent
//! requests, as an image with neither. The current
//! snapshot lives in one file of the data directory, replaced by write-to-temporary,
//! fsync and rename, so it survives a restart and is never seen half written.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::error::Error;
use super::types::{SnapshotMeta, from_bytes, to_bytes};
use crate::storage::{RecentResult, StoreImage};

/// The file, inside a node's data directory, that holds its current snapshot.
pub const SNAPSHOT_FILE: &str = "snapshot.bin";

const SNAPSHOT_FORMAT: u8 = 3;

/// The format whose image had handles, prefixes and recent results, but no documents.
const SNAPSHOT_FORMAT_WITHOUT_DOCUMENTS: u8 = 2;

/// The format whose image had only handles and prefixes.
const SNAPSHOT_FORMAT_WITHOUT_RECENT: u8 = 1;

/// Records as stored: (key, bytes).
type Records = Vec<(String, Vec<u8>)>;

/// The image of format 1: handles and prefixes.
type ImageWithoutRecent = (Records, Records);

/// The image of format 2: handles, prefixes and recent results.
type ImageWithoutDocuments = (Records, Records, Vec<RecentResult>);

/// The snapshot data for `meta` and `image`.
pub(super) fn encode(meta: &SnapshotMeta, image: &StoreImage) -> Result<Vec<u8>, Error> {
    let mut data = vec![SNAPSHOT_FORMAT];
    data.extend(to_bytes(meta, "snapshot meta")?);
    data.extend(to_bytes(image, "snapshot image")?);
    Ok(data)
}

/// The format, the meta at the head of snapshot `data`, and the bytes after it.
fn decode_meta(data: &[u8]) -> Result<(u8, SnapshotMeta, &[u8]), Error> {
    let (&format, rest) = data.split_first().ok_or(Error::SnapshotFormat {
        found: 0,
        expected: SNAPSHOT_FORMAT,
    })?;
    let known = [
        SNAPSHOT_FORMAT,
        SNAPSHOT_FORMAT_WITHOUT_DOCUMENTS,
        SNAPSHOT_FORMAT_WITHOUT_RECENT,
    ];
    if !known.contains(&format) {
        return Err(Error::SnapshotFormat {
            found: format,
            expected: SNAPSHOT_FORMAT,
        });
    }
    let (meta, rest) = postcard::take_from_bytes(rest).map_err(|source| Error::Decode {
        what: "snapshot meta",
        source,
    })?;
    Ok((format, meta, rest))
}

/// Reads snapshot `data` written by [`encode`] (or by a build that wrote an older
/// format).
pub(super) fn decode(data: &[u8]) -> Result<(SnapshotMeta, StoreImage), Error> {
    let (format, meta, rest) = decode_meta(data)?;
    let image = match format {
        SNAPSHOT_FORMAT_WITHOUT_RECENT => {
            let (handles, prefixes): ImageWithoutRecent = from_bytes(rest, "snapshot image")?;
            StoreImage {
                handles,
                prefixes,
                ..StoreImage::default()
            }
        }
        SNAPSHOT_FORMAT_WITHOUT_DOCUMENTS => {
            let (handles, prefixes, recent): ImageWithoutDocuments =
                from_bytes(rest, "snapshot image")?;
            StoreImage {
                handles,
                prefixes,
                recent,
                ..StoreImage::default()
            }
        }
        _ => from_bytes(rest, "snapshot image")?,
    };
    Ok((meta, image))
}

/// When a new snapshot replaces the current one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Replace {
    /// Always: an installed snapshot is the state machine's new state.
    Always,
    /// Unless the current one covers more of the log: a build may finish after a newer
    /// snapshot was installed.
    UnlessOlder,
}

/// The current snapshot file; the lock orders replacements.
#[derive(Debug)]
pub(super) struct SnapshotFile {
    path: PathBuf,
    current: Mutex<Option<SnapshotMeta>>,
}

impl SnapshotFile {
    /// Opens the snapshot file in `data_dir`, reading the meta of the snapshot it holds.
    pub(super) fn open(data_dir: &Path) -> Result<SnapshotFile, Error> {
        let path = data_dir.join(SNAPSHOT_FILE);
        let current = match read(&path)? {
            Some(data) => Some(decode_meta(&data)?.1),
            None => None,
        };
        Ok(SnapshotFile {
            path,
            current: Mutex::new(current),
        })
    }

    /// The current snapshot's meta and data, if there is one.
    pub(super) fn load(&self) -> Result<Option<(SnapshotMeta, Vec<u8>)>, Error> {
        let _order = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(data) = read(&self.path)? else {
            return Ok(None);
        };
        let (_format, meta, _) = decode_meta(&data)?;
        Ok(Some((meta, data)))
    }

    /// Makes `data` (described by `meta`) the current snapshot, durably, as `rule` says.
    pub(super) fn save(
        &self,
        meta: &SnapshotMeta,
        data: &[u8],
        rule: Replace,
    ) -> Result<(), Error> {
        // The meta is written only after the file is in place, so a poisoned lock still
        // describes the file on disk.
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        let older = current
            .as_ref()
            .is_some_and(|current| current.last_log_id > meta.last_log_id);
        if rule == Replace::UnlessOlder && older {
            return Ok(());
        }
        self.replace(data).map_err(|source| Error::SnapshotFile {
            path: self.path.clone(),
            source,
        })?;
        *current = Some(meta.clone());
        Ok(())
    }

    fn replace(&self, data: &[u8]) -> io::Result<()> {
        let temporary = self.path.with_extension("tmp");
        let mut file = File::create(&temporary)?;
        file.write_all(data)?;
        file.sync_all()?;
        fs::rename(&temporary, &self.path)?;
        // The rename is durable once the directory is.
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        File::open(dir)?.sync_all()?;
        Ok(())
    }
}

fn read(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    match fs::read(path) {
        Ok(data) => Ok(Some(data)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::SnapshotFile {
            path: path.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_format_2_snapshot_reads_as_an_image_without_documents() {
        let meta = SnapshotMeta::default();
        let handles = vec![("10.1/A".to_owned(), b"record".to_vec())];
        let recent = vec![RecentResult {
            request: 7,
            index: 3,
            result: b"ok".to_vec(),
        }];
        let mut data = vec![SNAPSHOT_FORMAT_WITHOUT_DOCUMENTS];
        data.extend(to_bytes(&meta, "meta").unwrap());
        let image: ImageWithoutDocuments = (handles.clone(), Vec::new(), recent.clone());
        data.extend(to_bytes(&image, "image").unwrap());
        let (found, image) = decode(&data).unwrap();
        assert_eq!(found, meta);
        let expected = StoreImage {
            handles,
            recent,
            ..StoreImage::default()
        };
        assert_eq!(image, expected);
    }

    #[test]
    fn a_format_1_snapshot_reads_as_an_image_without_recent_results() {
        let meta = SnapshotMeta::default();
        let handles = vec![("10.1/A".to_owned(), b"record".to_vec())];
        let prefixes = vec![("10.1".to_owned(), b"prefix".to_vec())];
        let mut data = vec![SNAPSHOT_FORMAT_WITHOUT_RECENT];
        data.extend(to_bytes(&meta, "meta").unwrap());
        data.extend(to_bytes(&(handles.clone(), prefixes.clone()), "image").unwrap());

        let (found, image) = decode(&data).unwrap();
        assert_eq!(found, meta);
        let expected = StoreImage {
            handles,
            prefixes,
            ..StoreImage::default()
        };
        assert_eq!(image, expected);
        assert!(matches!(
            decode(&[9]),
            Err(Error::SnapshotFormat { found: 9, .. })
        ));
    }
}
