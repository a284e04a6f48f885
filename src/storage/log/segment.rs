//! The log's segment files in its directory: their names, making a new one durably,
//! and reading one back record by record. Knows files and octets; what the records
//! mean is the log's (module `log`).
//!
//! A segment is `<sequence number, 20 digits>.log`. A new one is written whole as
//! `<name>.tmp`, synced, renamed into place and the directory synced, so a segment
//! either exists with its head or not at all; a `.tmp` left by a crash is removed at
//! the next open.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::record::{self, Decoded, HEAD_LEN, Record};
use crate::storage::sync_dir;

/// Octets read from a segment at a time when scanning it.
const SCAN_CHUNK: usize = 1 << 20;

const SUFFIX: &str = ".log";
const TEMPORARY: &str = ".tmp";

/// The file name of segment `seq`.
pub fn name(seq: u64) -> String {
    format!("{seq:020}{SUFFIX}")
}

/// The sequence numbers of the segments in `dir`, in order; removes the temporary
/// files a crash left. Other files are left alone.
pub fn list(dir: &Path) -> io::Result<Vec<u64>> {
    let mut found = Vec::new();
    for item in fs::read_dir(dir)? {
        let item = item?;
        let file_name = item.file_name();
        let Some(file_name) = file_name.to_str() else {
            continue;
        };
        if file_name.ends_with(TEMPORARY) {
            fs::remove_file(item.path())?;
        } else if let Some(seq) = parse_name(file_name) {
            found.push(seq);
        }
    }
    found.sort_unstable();
    Ok(found)
}

fn parse_name(file_name: &str) -> Option<u64> {
    let digits = file_name.strip_suffix(SUFFIX)?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Writes segment `seq` of format `version` in `dir` holding `records` (encoded)
/// after its head, durably, and opens it for reading and appending; returns the file
/// and its length.
pub fn create(dir: &Path, seq: u64, version: u64, records: &[u8]) -> io::Result<(File, u64)> {
    let path = dir.join(name(seq));
    let temporary = dir.join(format!("{}{TEMPORARY}", name(seq)));
    {
        let file = File::create(&temporary)?;
        file.write_all_at(&record::segment_head(version), 0)?;
        file.write_all_at(records, HEAD_LEN as u64)?;
        file.sync_all()?;
    }
    fs::rename(&temporary, &path)?;
    sync_dir(dir)?;
    let file = open(&path)?;
    let len = file.metadata()?.len();
    Ok((file, len))
}

/// Opens the segment at `path` for reading and appending.
pub fn open(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

/// The path of segment `seq` in `dir`.
pub fn path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(name(seq))
}

/// What reading a segment found.
#[derive(Debug, PartialEq, Eq)]
pub enum Scanned {
    /// Every octet is part of a whole record; the segment is this long.
    Whole(u64),
    /// The records end at `valid` octets; what follows is cut short or damaged.
    DamagedAt {
        /// Octets of whole records, head included.
        valid: u64,
        /// What is wrong with the octets after them.
        reason: &'static str,
    },
    /// The file does not begin with a segment head.
    NotASegment,
}

/// Reads segment `file`, calling `each` with every whole record and the offset in the
/// file where it starts, in order; stops at the first octet that is not part of a
/// whole record. Returns the format version in the head and what it found.
pub fn scan(
    file: &File,
    mut each: impl FnMut(Record<'_>, u64),
) -> io::Result<(Option<u64>, Scanned)> {
    let mut head = [0; HEAD_LEN];
    if read_up_to(file, &mut head, 0)? < HEAD_LEN {
        return Ok((None, Scanned::NotASegment));
    }
    let Some(version) = record::head_version(&head) else {
        return Ok((None, Scanned::NotASegment));
    };
    let mut buffer = Vec::new();
    // File offset of buffer[0], and of the next record within buffer.
    let (mut start, mut at) = (HEAD_LEN as u64, 0_usize);
    loop {
        let needed = match record::decode(&buffer[at..]) {
            Decoded::Record(record, len) => {
                each(record, start + at as u64);
                at += len;
                continue;
            }
            Decoded::Damaged(reason) => {
                let valid = start + at as u64;
                return Ok((Some(version), Scanned::DamagedAt { valid, reason }));
            }
            Decoded::End => record::RECORD_HEAD_LEN,
            Decoded::Short { needed } => needed,
        };
        buffer.drain(..at);
        start += at as u64;
        at = 0;
        let have = buffer.len();
        let want = needed.max(SCAN_CHUNK);
        buffer.resize(have + want, 0);
        let read = read_up_to(file, &mut buffer[have..], start + have as u64)?;
        buffer.truncate(have + read);
        if read == 0 {
            let scanned = if have == 0 {
                Scanned::Whole(start)
            } else {
                Scanned::DamagedAt {
                    valid: start,
                    reason: "record cut short",
                }
            };
            return Ok((Some(version), scanned));
        }
    }
}

/// Reads into `buffer` from `offset` until it is full or the file ends; the octets read.
fn read_up_to(file: &File, buffer: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut read = 0;
    while read < buffer.len() {
        match file.read_at(&mut buffer[read..], offset + read as u64) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(list: &[Record<'_>]) -> Vec<u8> {
        let mut out = Vec::new();
        for record in list {
            record.encode_into(&mut out).unwrap();
        }
        out
    }

    fn scan_all(file: &File) -> (Vec<(u64, u64)>, Scanned) {
        let mut seen = Vec::new();
        let (_, scanned) = scan(file, |record, offset| {
            if let Record::Entry { index, .. } = record {
                seen.push((index, offset));
            }
        })
        .unwrap();
        (seen, scanned)
    }

    #[test]
    fn a_created_segment_scans_back_and_a_cut_tail_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let big = vec![7_u8; SCAN_CHUNK + 10];
        let octets = records(&[
            Record::Vote(b"v"),
            Record::Entry {
                index: 1,
                bytes: &big,
            },
            Record::Entry {
                index: 2,
                bytes: b"two",
            },
        ]);
        let (file, len) = create(dir.path(), 3, 9, &octets).unwrap();
        assert_eq!(len, (HEAD_LEN + octets.len()) as u64);
        assert_eq!(list(dir.path()).unwrap(), vec![3]);
        let (seen, scanned) = scan_all(&file);
        assert_eq!(seen.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(scanned, Scanned::Whole(len));

        file.set_len(len - 1).unwrap();
        let (seen, scanned) = scan_all(&file);
        assert_eq!(seen.len(), 1);
        assert_eq!(
            scanned,
            Scanned::DamagedAt {
                valid: seen[0].1 + (record::ENTRY_BYTES_AT + big.len()) as u64,
                reason: "record cut short"
            }
        );
    }

    #[test]
    fn leftover_temporary_files_are_removed_and_strangers_kept() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(format!("{}{TEMPORARY}", name(5))), b"x").unwrap();
        fs::write(dir.path().join("notes.txt"), b"x").unwrap();
        create(dir.path(), 4, 1, &[]).unwrap();
        assert_eq!(list(dir.path()).unwrap(), vec![4]);
        assert!(dir.path().join("notes.txt").exists());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn a_file_without_a_head_is_not_a_segment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name(1));
        fs::write(&path, b"redb").unwrap();
        assert_eq!(scan_all(&open(&path).unwrap()).1, Scanned::NotASegment);
    }
}
