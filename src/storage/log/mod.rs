//! The replicated log on disk: opaque entries by `u64` index, and the few opaque
//! records beside them (the vote, the committed and the last purged log positions).
//!
//! The log is a directory of its own (`raft-log/`), apart from the handle store, and
//! not a database: an append is the only write a replica makes for every entry, so it
//! is one `pwrite` at the end of the current segment file and one `fdatasync`, where
//! a redb transaction wrote its B-tree pages, the table tree and the header (eight
//! writes a lone entry). Records are checksummed; what a crash cuts short at the end
//! of the last segment is dropped when the log opens (it was never acknowledged),
//! and damage anywhere else refuses the open. The codec is module `record`, the files
//! module `segment`; a log an earlier release kept in redb is converted on open
//! (module `earlier`).
//!
//! Every change is a record appended, durable when the call returns: entries (many
//! share one fsync), the vote, a purge, a truncation; entries may also be written now
//! and synced later ([`EntryLog::append_unsynced`], [`EntryLog::sync`]). The committed position has no
//! write of its own: it rides along with an append (losing the newest one in a crash
//! only means entries are applied again from the log). Reads find an entry's octets
//! through an index kept in memory (its segment, offset and length: about 40 octets
//! an entry, for the entries not yet purged) and read them with `pread`, beside the
//! appends.
//!
//! Segments: once the current one holds [`SEGMENT_OCTETS`], the next write starts a new
//! one, which begins with the vote, committed and purged positions as they are, so
//! that a segment whose entries are all purged can be removed whole without losing
//! them. Only a purge removes segments.

mod earlier;
mod record;
mod segment;

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::ops::{Bound, RangeBounds};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

pub use self::earlier::EARLIER_LOG_FILE;
use self::record::Record;
use self::segment::Scanned;
use super::error::StorageError;

/// One log entry as stored: its index and its opaque bytes.
pub type LogRecord = (u64, Vec<u8>);

/// The directory, inside a group's data directory, that holds its log.
pub const LOG_DIR: &str = "raft-log";

/// The layout of the log's segments ([`record`]), checked on every open. Versions 1
/// and 2 were a redb file (`raft-log.redb`); version 2's entries are the same octets.
pub const LOG_FORMAT_VERSION: u64 = 3;

/// Octets after which the log starts a new segment.
pub const SEGMENT_OCTETS: u64 = 16 << 20;

/// The replicated log of one node, in a directory of segment files.
pub struct EntryLog {
    dir: PathBuf,
    /// Octets after which a new segment starts ([`SEGMENT_OCTETS`]).
    segment_octets: u64,
    /// Where the next record goes; held for the whole of a write, so writes are one
    /// at a time and in order.
    writer: Mutex<Writer>,
    /// What the log holds and where; held briefly, by reads and after writes.
    index: Mutex<LogIndex>,
}

impl std::fmt::Debug for EntryLog {
    /// The directory alone: the index lists every entry.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EntryLog")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// The segment being appended to.
#[derive(Debug)]
struct Writer {
    seq: u64,
    file: Arc<File>,
    len: u64,
}

/// Where an entry's octets are.
#[derive(Debug, Clone, Copy)]
struct Location {
    seq: u64,
    offset: u64,
    len: u32,
}

/// A segment as the index knows it.
#[derive(Debug)]
struct SegmentFile {
    file: Arc<File>,
    /// The highest entry index ever written to it.
    highest: Option<u64>,
}

/// What the log holds: every entry's location by index, the segments, and the latest
/// of each position record.
#[derive(Debug, Default)]
struct LogIndex {
    locations: BTreeMap<u64, Location>,
    segments: BTreeMap<u64, SegmentFile>,
    vote: Option<Vec<u8>>,
    committed: Option<Vec<u8>>,
    purged: Option<(u64, Vec<u8>)>,
}

impl EntryLog {
    /// Opens the log of the group whose data directory is `data_dir` (in
    /// [`LOG_DIR`]), creating it when there is none, converting the one an earlier
    /// release kept there; drops a record cut short by a crash at its end. Blocks on
    /// the disk.
    pub fn open_in(data_dir: &Path) -> Result<EntryLog, StorageError> {
        earlier::upgrade(data_dir)?;
        EntryLog::open(&data_dir.join(LOG_DIR))
    }

    /// Opens the log in directory `dir`, creating it when it does not exist.
    fn open(dir: &Path) -> Result<EntryLog, StorageError> {
        EntryLog::open_with_segments_of(dir, SEGMENT_OCTETS)
    }

    /// [`EntryLog::open`], starting a new segment after `segment_octets`.
    fn open_with_segments_of(dir: &Path, segment_octets: u64) -> Result<EntryLog, StorageError> {
        fs::create_dir_all(dir).map_err(StorageError::file(dir))?;
        let mut index = LogIndex::default();
        let seqs = segment::list(dir).map_err(StorageError::file(dir))?;
        let mut writer = None;
        for &seq in &seqs {
            let path = segment::path(dir, seq);
            let file = Arc::new(segment::open(&path).map_err(StorageError::file(&path))?);
            let last = Some(&seq) == seqs.last();
            let len = replay(&mut index, seq, &file, &path, last)?;
            index.add_segment(seq, Arc::clone(&file));
            index.note_highest(seq);
            writer = Some(Writer { seq, file, len });
        }
        let writer = match writer {
            Some(writer) => writer,
            None => {
                let (file, len) = segment::create(dir, 1, LOG_FORMAT_VERSION, &[])
                    .map_err(StorageError::file(dir))?;
                let file = Arc::new(file);
                index.add_segment(1, Arc::clone(&file));
                Writer { seq: 1, file, len }
            }
        };
        Ok(EntryLog {
            dir: dir.to_owned(),
            segment_octets,
            writer: Mutex::new(writer),
            index: Mutex::new(index),
        })
    }

    /// Writes `entries` (index, bytes), in index order, and returns once they are
    /// durable: many entries share one fsync. An entry at an index the log holds
    /// replaces it and every entry after it (a follower's log giving way to its
    /// leader's). `committed`, when given, is recorded as the committed position with
    /// them.
    pub fn append<B: AsRef<[u8]>>(
        &self,
        entries: impl IntoIterator<Item = (u64, B)>,
        committed: Option<&[u8]>,
    ) -> Result<(), StorageError> {
        self.append_then(entries, committed, Sync::Now)
    }

    /// Writes `entries` as [`EntryLog::append`] does, and returns before they are
    /// durable: [`EntryLog::sync`] makes them so. Reads see them at once.
    pub fn append_unsynced<B: AsRef<[u8]>>(
        &self,
        entries: impl IntoIterator<Item = (u64, B)>,
        committed: Option<&[u8]>,
    ) -> Result<(), StorageError> {
        self.append_then(entries, committed, Sync::Later)
    }

    /// Makes everything written so far durable.
    pub fn sync(&self) -> Result<(), StorageError> {
        let writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        writer
            .file
            .sync_data()
            .map_err(StorageError::file(&segment::path(&self.dir, writer.seq)))
    }

    fn append_then<B: AsRef<[u8]>>(
        &self,
        entries: impl IntoIterator<Item = (u64, B)>,
        committed: Option<&[u8]>,
        sync: Sync,
    ) -> Result<(), StorageError> {
        let mut writer = self.writer()?;
        let mut octets = Vec::new();
        if let Some(committed) = committed {
            encode(&mut octets, Record::Committed(committed), 0)?;
        }
        let mut placed = Vec::new();
        for (index, bytes) in entries {
            let bytes = bytes.as_ref();
            let start = writer.len + octets.len() as u64;
            encode(&mut octets, Record::Entry { index, bytes }, index)?;
            placed.push((index, entry_location(writer.seq, start, bytes.len())));
        }
        if octets.is_empty() {
            return Ok(());
        }
        self.write(&mut writer, &octets, sync)?;
        let mut log = self.lock_index();
        for (index, location) in placed {
            log.put(index, location);
        }
        log.note_highest(writer.seq);
        if let Some(committed) = committed {
            log.committed = Some(committed.to_vec());
        }
        Ok(())
    }

    /// The entries whose indexes fall in `range`, in index order.
    pub fn read_range(&self, range: impl RangeBounds<u64>) -> Result<Vec<LogRecord>, StorageError> {
        self.read_range_within(range, usize::MAX)
    }

    /// The first entries whose indexes fall in `range`, in index order, as many as fit
    /// in `octets` of entry bytes; the first is read whatever its size, so a range that
    /// holds entries never reads as empty.
    pub fn read_range_within(
        &self,
        range: impl RangeBounds<u64>,
        octets: usize,
    ) -> Result<Vec<LogRecord>, StorageError> {
        let wanted = self.lock_index().locate(range, octets)?;
        wanted
            .into_iter()
            .map(|(index, location, file)| Ok((index, self.read_at(&file, location)?)))
            .collect()
    }

    /// The entry with the highest index, if the log holds any.
    pub fn last(&self) -> Result<Option<LogRecord>, StorageError> {
        let last = self.lock_index().locate_last()?;
        last.map(|(index, location, file)| Ok((index, self.read_at(&file, location)?)))
            .transpose()
    }

    /// Deletes every entry from `index` on, durably.
    pub fn truncate_from(&self, index: u64) -> Result<(), StorageError> {
        let _held = self.write_record(Record::Truncated { index }, index)?;
        self.lock_index().truncate(index);
        Ok(())
    }

    /// Deletes every entry up to and including `index` and records `last_purged` (the
    /// caller's description of that position) with it, durably; removes the segments
    /// that hold nothing else.
    pub fn purge_upto(&self, index: u64, last_purged: &[u8]) -> Result<(), StorageError> {
        let record = Record::Purged {
            index,
            bytes: last_purged,
        };
        let writer = self.write_record(record, index)?;
        let removable = {
            let mut log = self.lock_index();
            log.purge(index, last_purged);
            log.take_purged_segments(writer.seq)
        };
        for seq in removable {
            let path = segment::path(&self.dir, seq);
            fs::remove_file(&path).map_err(StorageError::file(&path))?;
        }
        Ok(())
    }

    /// What the last [`EntryLog::purge_upto`] recorded.
    pub fn last_purged(&self) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self
            .lock_index()
            .purged
            .as_ref()
            .map(|(_, bytes)| bytes.clone()))
    }

    /// Records the vote; it is durable when this returns.
    pub fn save_vote(&self, vote: &[u8]) -> Result<(), StorageError> {
        let _held = self.write_record(Record::Vote(vote), 0)?;
        self.lock_index().vote = Some(vote.to_vec());
        Ok(())
    }

    /// The last vote saved.
    pub fn vote(&self) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self.lock_index().vote.clone())
    }

    /// The last committed position saved.
    pub fn committed(&self) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self.lock_index().committed.clone())
    }

    fn lock_index(&self) -> MutexGuard<'_, LogIndex> {
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The writer, in a segment with room: a full one is followed by a new segment
    /// that begins with the positions recorded so far.
    fn writer(&self) -> Result<MutexGuard<'_, Writer>, StorageError> {
        let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        if writer.len >= self.segment_octets {
            self.start_segment(&mut writer)?;
        }
        Ok(writer)
    }

    fn start_segment(&self, writer: &mut Writer) -> Result<(), StorageError> {
        // Octets a failed write may have left after the last record would read as
        // damage once this is no longer the last segment.
        // Synced too, so that a sync of the next segment covers every write before it.
        let full = segment::path(&self.dir, writer.seq);
        writer
            .file
            .set_len(writer.len)
            .and_then(|()| writer.file.sync_data())
            .map_err(StorageError::file(&full))?;
        let seq = writer.seq + 1;
        let positions = self.lock_index().positions()?;
        let (file, len) = segment::create(&self.dir, seq, LOG_FORMAT_VERSION, &positions)
            .map_err(StorageError::file(&self.dir))?;
        let file = Arc::new(file);
        self.lock_index().add_segment(seq, Arc::clone(&file));
        *writer = Writer { seq, file, len };
        Ok(())
    }

    /// Appends `record` alone (about entry `index`, for an error) durably; the writer,
    /// still held: the caller updates the index before any other write may begin.
    fn write_record(
        &self,
        record: Record<'_>,
        index: u64,
    ) -> Result<MutexGuard<'_, Writer>, StorageError> {
        let mut writer = self.writer()?;
        let mut octets = Vec::new();
        encode(&mut octets, record, index)?;
        self.write(&mut writer, &octets, Sync::Now)?;
        Ok(writer)
    }

    /// Appends `octets` to the writer's segment and, with [`Sync::Now`], makes them
    /// (and everything before them) durable. On failure
    /// the segment is cut back to where it was, so that the next write starts at a
    /// record boundary.
    fn write(&self, writer: &mut Writer, octets: &[u8], sync: Sync) -> Result<(), StorageError> {
        let written = writer
            .file
            .write_all_at(octets, writer.len)
            .and_then(|()| match sync {
                Sync::Now => writer.file.sync_data(),
                Sync::Later => Ok(()),
            });
        if let Err(error) = written {
            // Best effort: a failed cut leaves octets the next write overwrites, or
            // that the next open finds damaged at the end of the last segment.
            let _ = writer.file.set_len(writer.len);
            return Err(StorageError::file(&segment::path(&self.dir, writer.seq))(
                error,
            ));
        }
        writer.len += octets.len() as u64;
        Ok(())
    }

    fn read_at(&self, file: &File, location: Location) -> Result<Vec<u8>, StorageError> {
        let mut bytes = vec![0; location.len as usize];
        file.read_exact_at(&mut bytes, location.offset)
            .map_err(StorageError::file(&segment::path(&self.dir, location.seq)))?;
        Ok(bytes)
    }
}

/// Whether a write waits for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sync {
    /// The write returns once durable.
    Now,
    /// The caller syncs later ([`EntryLog::sync`]).
    Later,
}

/// Appends `record` to `octets`, refusing an entry too large for a record.
fn encode(octets: &mut Vec<u8>, record: Record<'_>, index: u64) -> Result<(), StorageError> {
    let octets_needed = record.encoded_len();
    record
        .encode_into(octets)
        .ok_or(StorageError::LogEntryTooLarge {
            index,
            octets: octets_needed,
        })
}

/// Where the bytes of an entry whose record starts at `start` of segment `seq` are.
fn entry_location(seq: u64, start: u64, len: usize) -> Location {
    Location {
        seq,
        offset: start + record::ENTRY_BYTES_AT as u64,
        // `encode` refused entries above MAX_BODY, which fits a u32.
        len: u32::try_from(len).unwrap_or(u32::MAX),
    }
}

/// Reads segment `seq` (`file`, at `path`) into `index`; returns its length. A
/// damaged end of the `last` segment is cut off (a crash during an append); damage
/// elsewhere is an error.
fn replay(
    index: &mut LogIndex,
    seq: u64,
    file: &File,
    path: &Path,
    last: bool,
) -> Result<u64, StorageError> {
    let (version, scanned) = segment::scan(file, |record, start| index.replay(seq, record, start))
        .map_err(StorageError::file(path))?;
    match (version, scanned) {
        (Some(found), _) if found != LOG_FORMAT_VERSION => Err(StorageError::FormatVersion {
            found,
            expected: LOG_FORMAT_VERSION,
        }),
        (_, Scanned::Whole(len)) => Ok(len),
        (_, Scanned::DamagedAt { valid, reason }) if last => {
            tracing::warn!(path = %path.display(), valid, reason, "dropping the end of the log a crash cut short");
            file.set_len(valid)
                .and_then(|()| file.sync_all())
                .map_err(StorageError::file(path))?;
            Ok(valid)
        }
        (_, Scanned::DamagedAt { valid, reason }) => Err(StorageError::LogDamaged {
            path: path.to_owned(),
            offset: valid,
            reason,
        }),
        (_, Scanned::NotASegment) => Err(StorageError::LogDamaged {
            path: path.to_owned(),
            offset: 0,
            reason: "not a log segment",
        }),
    }
}

impl LogIndex {
    /// Takes in one record read back from segment `seq`, starting at `start`.
    fn replay(&mut self, seq: u64, record: Record<'_>, start: u64) {
        match record {
            Record::Entry { index, bytes } => {
                self.put(index, entry_location(seq, start, bytes.len()));
            }
            Record::Vote(bytes) => self.vote = Some(bytes.to_vec()),
            Record::Committed(bytes) => self.committed = Some(bytes.to_vec()),
            Record::Purged { index, bytes } => self.purge(index, bytes),
            Record::Truncated { index } => self.truncate(index),
        }
    }

    fn add_segment(&mut self, seq: u64, file: Arc<File>) {
        let highest = None;
        self.segments.insert(seq, SegmentFile { file, highest });
    }

    /// Places entry `index`, replacing it and every entry after it.
    fn put(&mut self, index: u64, location: Location) {
        self.truncate(index);
        self.locations.insert(index, location);
    }

    fn truncate(&mut self, index: u64) {
        self.locations.split_off(&index);
    }

    fn purge(&mut self, index: u64, bytes: &[u8]) {
        self.locations = match index.checked_add(1) {
            Some(kept) => self.locations.split_off(&kept),
            None => BTreeMap::new(),
        };
        self.purged = Some((index, bytes.to_vec()));
    }

    /// Records that segment `seq` holds the entries placed in it so far.
    fn note_highest(&mut self, seq: u64) {
        let highest = self
            .locations
            .iter()
            .rev()
            .find(|(_, location)| location.seq == seq)
            .map(|(&index, _)| index);
        if let (Some(segment), Some(highest)) = (self.segments.get_mut(&seq), highest) {
            segment.highest = segment.highest.max(Some(highest));
        }
    }

    /// Forgets, and returns, the segments before `current` whose entries are all
    /// purged.
    fn take_purged_segments(&mut self, current: u64) -> Vec<u64> {
        let Some((purged, _)) = self.purged else {
            return Vec::new();
        };
        let removable: Vec<u64> = self
            .segments
            .range(..current)
            .filter(|(_, segment)| segment.highest.is_none_or(|highest| highest <= purged))
            .map(|(&seq, _)| seq)
            .collect();
        for seq in &removable {
            self.segments.remove(seq);
        }
        removable
    }

    /// The records a new segment begins with: the positions as they are.
    fn positions(&self) -> Result<Vec<u8>, StorageError> {
        let mut octets = Vec::new();
        if let Some(vote) = &self.vote {
            encode(&mut octets, Record::Vote(vote), 0)?;
        }
        if let Some(committed) = &self.committed {
            encode(&mut octets, Record::Committed(committed), 0)?;
        }
        if let Some((index, bytes)) = &self.purged {
            let record = Record::Purged {
                index: *index,
                bytes,
            };
            encode(&mut octets, record, *index)?;
        }
        Ok(octets)
    }

    /// The entries of `range` to read, with their segment files: as many as fit in
    /// `octets`, and at least one when the range holds any.
    fn locate(
        &self,
        range: impl RangeBounds<u64>,
        octets: usize,
    ) -> Result<Vec<Located>, StorageError> {
        let bounds = (range.start_bound().cloned(), range.end_bound().cloned());
        let mut found = Vec::new();
        if is_empty_range(bounds) {
            return Ok(found);
        }
        let mut total = 0_usize;
        for (&index, &location) in self.locations.range(bounds) {
            total = total.saturating_add(location.len as usize);
            if total > octets && !found.is_empty() {
                break;
            }
            found.push(self.located(index, location)?);
        }
        Ok(found)
    }

    /// The last entry to read, with its segment file.
    fn locate_last(&self) -> Result<Option<Located>, StorageError> {
        self.locations
            .last_key_value()
            .map(|(&index, &location)| self.located(index, location))
            .transpose()
    }

    /// Entry `index`, at `location`, with its segment file.
    fn located(&self, index: u64, location: Location) -> Result<Located, StorageError> {
        let segment = self
            .segments
            .get(&location.seq)
            .ok_or(StorageError::LogMissingEntry { index })?;
        Ok((index, location, Arc::clone(&segment.file)))
    }
}

/// Whether `bounds` hold no index, as [`BTreeMap::range`] panics on a start past the
/// end.
fn is_empty_range(bounds: (Bound<u64>, Bound<u64>)) -> bool {
    let start = match bounds.0 {
        Bound::Included(start) => Some(start),
        Bound::Excluded(start) => start.checked_add(1),
        Bound::Unbounded => Some(0),
    };
    let end = match bounds.1 {
        Bound::Included(last) => last.checked_add(1),
        Bound::Excluded(end) => Some(end),
        Bound::Unbounded => None,
    };
    match (start, end) {
        (None, _) => true,
        (Some(start), Some(end)) => start >= end,
        (Some(_), None) => false,
    }
}

/// An entry to read: its index, where it is, and its segment's file.
type Located = (u64, Location, Arc<File>);

#[cfg(test)]
mod tests;
