//! The backup file: each replica set's snapshot data, taken by one of its members
//! from one read snapshot of its store, under a header saying what the sections are,
//! and a checksum over everything.
//!
//! Layout (integers big-endian):
//! `magic "HDL-BACK" ‖ u16 format (1) ‖ u32 length ‖ postcard BackupHeader ‖ section* ‖
//! SHA-256 (32 octets)`. Each section is one set's snapshot data, format 4 of
//! the snapshot module (`snapshot.rs`) exactly as its member wrote it (the same writer as the
//! snapshots a set sends its members), as many octets as the header says, in the
//! header's order. The checksum covers every octet before it.
//!
//! Reading ([`verify`], [`read_records`]) refuses, naming the problem, a file that is
//! not a backup, of another format, shorter or longer than its header says (checked
//! before any section is read, so a truncated file is refused whatever the cut), whose
//! header does not hold together (no section, a set twice, a ring slot whose owner has
//! no section), whose sections are not snapshot data of exactly their length and log
//! position, or whose checksum does not match. Memory stays bounded by one record
//! (and the header, at most [`MAX_HEADER`] octets), whatever the file's size.
//!
//! Pure format: knows nothing of nodes, the cluster map's type or files by name.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::error::Error;
use super::snapshot::{SNAPSHOT_FORMAT, read_head};
use super::types::{LogId, NodeId, SetId, from_bytes, to_bytes};
use crate::storage::ImageRecord;

/// What every backup file begins with.
pub const MAGIC: [u8; 8] = *b"HDL-BACK";

/// The layout this build writes and reads.
pub const BACKUP_FORMAT: u16 = 1;

/// The longest header a backup may have: a ring of 65,536 slots' owners fits many
/// times over.
pub const MAX_HEADER: u32 = 4 << 20;

/// Octets of the SHA-256 checksum that ends the file.
const CHECKSUM_LEN: usize = 32;

/// Octets before the header: magic, format, header length.
const PREAMBLE_LEN: usize = 8 + 2 + 4;

/// What a backup holds, before its sections.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupHeader {
    /// When the backup was taken, in microseconds since the Unix epoch.
    pub created_micros: u64,
    /// The cluster map's epoch every section was taken at (0 for a map that recorded
    /// nothing).
    pub epoch: u64,
    /// The owner of each slot of the ring at that epoch, slot `i` at index `i`; empty
    /// when the cluster had no ring (then there is one section, holding every handle).
    pub owners: Vec<SetId>,
    /// The sections, in file order.
    pub sections: Vec<SectionHead>,
}

/// One replica set's section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SectionHead {
    /// The set.
    pub set: SetId,
    /// The member whose store it was taken from.
    pub member: NodeId,
    /// The last log position that store had applied (its snapshot meta says the same).
    pub applied: Option<LogId>,
    /// Octets of snapshot data.
    pub length: u64,
}

/// Why a backup cannot be read or written.
#[derive(Debug, Error)]
pub enum BackupError {
    /// Reading the file failed.
    #[error("cannot read the backup: {0}")]
    Read(io::Error),
    /// Writing the file failed.
    #[error("cannot write the backup: {0}")]
    Write(io::Error),
    /// The file does not begin as a backup does.
    #[error("not an hdl backup (it does not begin with \"HDL-BACK\")")]
    NotABackup,
    /// A backup of a layout this build does not read.
    #[error("backup format {found} is not supported (this hdl reads format {expected})")]
    Format {
        /// The format found.
        found: u16,
        /// The format this build reads and writes.
        expected: u16,
    },
    /// The file ends within its preamble or header.
    #[error("the backup is truncated: it ends within its header")]
    HeaderTruncated,
    /// The header claims more octets than a header may have.
    #[error("the backup's header claims {length} octets, more than {MAX_HEADER}")]
    HeaderTooLong {
        /// The length it claims.
        length: u32,
    },
    /// The header is not a header.
    #[error("the backup's header is unreadable: {0}")]
    Header(Box<Error>),
    /// The header names no section.
    #[error("the backup's header names no replica set")]
    NoSection,
    /// The header names a set twice.
    #[error("the backup's header names replica set {set} twice")]
    SectionTwice {
        /// The set.
        set: u32,
    },
    /// A set owns slots of the ring but has no section.
    #[error("replica set {set} owns slots of the backup's ring but has no section")]
    NoSectionForOwner {
        /// The set.
        set: u32,
    },
    /// A ring whose slot count is not a power of two.
    #[error("the backup's ring has {count} slots, not a power of two")]
    SlotCount {
        /// How many slots.
        count: usize,
    },
    /// Several sections without a ring to say which handle belongs to which.
    #[error("the backup holds {count} replica sets but no ring saying which owns what")]
    SectionsWithoutRing {
        /// How many sections.
        count: usize,
    },
    /// The file is shorter than its header says.
    #[error("the backup is truncated: {length} octets, where its header makes it {expected}")]
    Truncated {
        /// Its length.
        length: u64,
        /// The length its header gives.
        expected: u64,
    },
    /// The file is longer than its header says.
    #[error("the backup has {count} octets after its checksum")]
    TrailingBytes {
        /// How many.
        count: u64,
    },
    /// A section is not snapshot data of its length.
    #[error("the section of replica set {set} is damaged: {problem}")]
    Section {
        /// The set.
        set: u32,
        /// What the snapshot reader found.
        problem: Box<Error>,
    },
    /// A section's snapshot data covers another log position than its header says.
    #[error(
        "the section of replica set {set} covers the log to {found:?}, its header says {declared:?}"
    )]
    SectionPosition {
        /// The set.
        set: u32,
        /// What the section's meta says.
        found: Option<LogId>,
        /// What the header says.
        declared: Option<LogId>,
    },
    /// The checksum does not match what precedes it.
    #[error(
        "the backup's checksum does not match its contents: it was damaged after it was written"
    )]
    Checksum,
    /// More section octets were written than the header declares.
    #[error("more section data than the backup's header declares")]
    Overrun,
    /// A section was left short when the backup was finished.
    #[error("the section of replica set {set} is {missing} octets short")]
    Short {
        /// The set.
        set: u32,
        /// How many octets it lacks.
        missing: u64,
    },
}

/// What a whole backup holds, as [`verify`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupSummary {
    /// Its header.
    pub header: BackupHeader,
    /// The handle records of each section, in header order (those of slots another
    /// set owns included).
    pub handles: Vec<u64>,
}

/// Writes a backup: its header at once, then its sections' octets in order, then the
/// checksum.
pub struct BackupWriter<W: Write> {
    out: W,
    digest: Sha256,
    /// The sections not complete yet, the current one first, with the octets each
    /// still lacks.
    left: VecDeque<(SetId, u64)>,
}

impl<W: Write> BackupWriter<W> {
    /// Starts a backup described by `header` on `out`.
    pub fn new(out: W, header: &BackupHeader) -> Result<BackupWriter<W>, BackupError> {
        check_header(header)?;
        let bytes = to_bytes(header, "backup header").map_err(header_error)?;
        let length = u32::try_from(bytes.len())
            .ok()
            .filter(|length| *length <= MAX_HEADER)
            .ok_or(BackupError::HeaderTooLong { length: u32::MAX })?;
        let left = header.sections.iter().map(|s| (s.set, s.length)).collect();
        let mut writer = BackupWriter {
            out,
            digest: Sha256::new(),
            left,
        };
        writer.put(&MAGIC)?;
        writer.put(&BACKUP_FORMAT.to_be_bytes())?;
        writer.put(&length.to_be_bytes())?;
        writer.put(&bytes)?;
        Ok(writer)
    }

    /// Appends `bytes` to the current section (the first one not complete); they may
    /// not run past its end.
    pub fn section_bytes(&mut self, bytes: &[u8]) -> Result<(), BackupError> {
        while self.left.front().is_some_and(|(_, left)| *left == 0) {
            self.left.pop_front();
        }
        let length = bytes.len() as u64;
        match self.left.front_mut() {
            Some((_, left)) if length <= *left => *left -= length,
            _ if bytes.is_empty() => return Ok(()),
            _ => return Err(BackupError::Overrun),
        }
        self.put(bytes)
    }

    /// Ends the backup with its checksum; the writer under it, flushed. Every section
    /// must be complete.
    pub fn finish(mut self) -> Result<W, BackupError> {
        if let Some((set, missing)) = self.left.iter().find(|(_, left)| *left > 0) {
            return Err(BackupError::Short {
                set: set.0,
                missing: *missing,
            });
        }
        let checksum = self.digest.finalize();
        self.out
            .write_all(&checksum)
            .and_then(|()| self.out.flush())
            .map_err(BackupError::Write)?;
        Ok(self.out)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), BackupError> {
        self.digest.update(bytes);
        self.out.write_all(bytes).map_err(BackupError::Write)
    }
}

/// Checks the whole backup `input` (length, header, every section's records, the
/// checksum); what it holds.
pub fn verify<R: Read + Seek>(input: &mut R) -> Result<BackupSummary, BackupError> {
    let mut handles: BTreeMap<SetId, u64> = BTreeMap::new();
    let header = read_records(input, |set, record| {
        if matches!(record, ImageRecord::Handle(..)) {
            *handles.entry(set).or_default() += 1;
        }
        Ok::<(), BackupError>(())
    })?;
    let handles = header
        .sections
        .iter()
        .map(|head| handles.get(&head.set).copied().unwrap_or(0))
        .collect();
    Ok(BackupSummary { header, handles })
}

/// Reads the backup `input` from its start, handing each record of each section to
/// `sink` with its set, in file order; its header once the checksum has matched. Every
/// check of [`verify`] is made, the checksum last: a caller that must write nothing
/// from a damaged file verifies first.
pub fn read_records<R, E>(
    input: &mut R,
    mut sink: impl FnMut(SetId, ImageRecord) -> Result<(), E>,
) -> Result<BackupHeader, E>
where
    R: Read + Seek,
    E: From<BackupError>,
{
    let length = input.seek(SeekFrom::End(0)).map_err(BackupError::Read)?;
    input.seek(SeekFrom::Start(0)).map_err(BackupError::Read)?;
    let mut hashing = Hashing {
        inner: BufReader::with_capacity(1 << 16, input),
        digest: Sha256::new(),
    };
    let (header, header_length) = read_header(&mut hashing)?;
    check_length(&header, header_length, length)?;
    for head in &header.sections {
        read_section(&mut hashing, head, &mut sink)?;
    }
    let digest = hashing.digest.finalize();
    let mut checksum = [0u8; CHECKSUM_LEN];
    let read = hashing.inner.read_exact(&mut checksum);
    if read.is_err() || digest[..] != checksum {
        return Err(BackupError::Checksum.into());
    }
    let mut rest = Vec::new();
    let count = (&mut hashing.inner)
        .take(1 << 20)
        .read_to_end(&mut rest)
        .map_err(BackupError::Read)?;
    if count > 0 {
        return Err(BackupError::TrailingBytes {
            count: count as u64,
        }
        .into());
    }
    Ok(header)
}

/// A reader that hashes what it reads.
struct Hashing<R> {
    inner: R,
    digest: Sha256,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let count = self.inner.read(buf)?;
        self.digest.update(&buf[..count]);
        Ok(count)
    }
}

/// The header, and how many octets the file holds up to its end.
fn read_header(input: &mut impl Read) -> Result<(BackupHeader, u64), BackupError> {
    let mut preamble = [0u8; PREAMBLE_LEN];
    read_exact(input, &mut preamble[..MAGIC.len()])?;
    if preamble[..MAGIC.len()] != MAGIC {
        return Err(BackupError::NotABackup);
    }
    read_exact(input, &mut preamble[MAGIC.len()..])?;
    let format = u16::from_be_bytes([preamble[8], preamble[9]]);
    if format != BACKUP_FORMAT {
        return Err(BackupError::Format {
            found: format,
            expected: BACKUP_FORMAT,
        });
    }
    let length = u32::from_be_bytes([preamble[10], preamble[11], preamble[12], preamble[13]]);
    if length > MAX_HEADER {
        return Err(BackupError::HeaderTooLong { length });
    }
    let mut bytes = vec![0u8; length as usize];
    read_exact(input, &mut bytes)?;
    let header: BackupHeader = from_bytes(&bytes, "backup header").map_err(header_error)?;
    check_header(&header)?;
    Ok((header, PREAMBLE_LEN as u64 + u64::from(length)))
}

fn read_exact(input: &mut impl Read, buf: &mut [u8]) -> Result<(), BackupError> {
    input.read_exact(buf).map_err(|error| match error.kind() {
        io::ErrorKind::UnexpectedEof => BackupError::HeaderTruncated,
        _ => BackupError::Read(error),
    })
}

fn header_error(error: Error) -> BackupError {
    BackupError::Header(Box::new(error))
}

/// Whether `header` holds together: sections, each set once, a ring whose every
/// owner has a section, one section without a ring.
fn check_header(header: &BackupHeader) -> Result<(), BackupError> {
    if header.sections.is_empty() {
        return Err(BackupError::NoSection);
    }
    let mut sets = BTreeSet::new();
    for head in &header.sections {
        if !sets.insert(head.set) {
            return Err(BackupError::SectionTwice { set: head.set.0 });
        }
    }
    let count = header.owners.len();
    if count == 0 {
        return match header.sections.len() {
            1 => Ok(()),
            count => Err(BackupError::SectionsWithoutRing { count }),
        };
    }
    if !count.is_power_of_two() {
        return Err(BackupError::SlotCount { count });
    }
    match header.owners.iter().find(|owner| !sets.contains(owner)) {
        Some(owner) => Err(BackupError::NoSectionForOwner { set: owner.0 }),
        None => Ok(()),
    }
}

/// Checks that the file's `length` is what the header says: the header, every
/// section, the checksum.
fn check_length(header: &BackupHeader, header_end: u64, length: u64) -> Result<(), BackupError> {
    let expected = header
        .sections
        .iter()
        .try_fold(header_end + CHECKSUM_LEN as u64, |total, head| {
            total.checked_add(head.length)
        })
        .unwrap_or(u64::MAX);
    match length.cmp(&expected) {
        std::cmp::Ordering::Less => Err(BackupError::Truncated { length, expected }),
        std::cmp::Ordering::Greater => Err(BackupError::TrailingBytes {
            count: length - expected,
        }),
        std::cmp::Ordering::Equal => Ok(()),
    }
}

/// Reads the section `head` (snapshot data of exactly its length) and hands its
/// records to `sink`.
fn read_section<R: Read, E: From<BackupError>>(
    input: &mut R,
    head: &SectionHead,
    sink: &mut impl FnMut(SetId, ImageRecord) -> Result<(), E>,
) -> Result<(), E> {
    let set = head.set.0;
    let damaged = |problem| BackupError::Section {
        set,
        problem: Box::new(problem),
    };
    let mut body = BufReader::with_capacity(1 << 16, input.take(head.length));
    // Only the streamed format: older ones are read whole into memory.
    let mut format = [0u8];
    body.read_exact(&mut format)
        .map_err(|_| damaged(Error::SnapshotTruncated))?;
    if format[0] != SNAPSHOT_FORMAT {
        return Err(damaged(Error::SnapshotFormat {
            found: format[0],
            expected: SNAPSHOT_FORMAT,
        })
        .into());
    }
    let (meta, mut records) = read_head((&format[..]).chain(body)).map_err(damaged)?;
    if meta.last_log_id != head.applied {
        return Err(BackupError::SectionPosition {
            set,
            found: meta.last_log_id,
            declared: head.applied,
        }
        .into());
    }
    // The reader refuses bytes after the data's end marker: the section is consumed.
    while let Some(record) = records.next_record().map_err(damaged)? {
        sink(head.set, record)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
