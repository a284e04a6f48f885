//! Snapshot data, written and read as a stream of records, and the snapshot file an
//! earlier release kept.
//!
//! Snapshot data, as sent to followers, is format 4:
//! `u8 format (4) ‖ u32 length ‖ postcard SnapshotMeta ‖ record* ‖ u32 0`, where each
//! record is `u32 length (big-endian, like the meta's) ‖ postcard ImageRecord`
//! ([`crate::storage::ImageRecord`], in image order) of at most [`MAX_RECORD`] bytes,
//! and the zero length ends the data (a truncated file is refused; so are bytes after
//! the end). The meta comes first so that a snapshot's meta is read without reading
//! the image. A snapshot is written record by record from one read transaction and
//! installed record by record into one write transaction, so memory stays bounded by
//! one record (and redb's write cache), however large the store.
//!
//! Older formats are still read, whole, into memory (they were written whole):
//! `u8 format ‖ postcard SnapshotMeta ‖ postcard image`, where the image is format 3
//! `(handles, prefixes, recent, documents, slot count, slot states)`, format 2
//! `(handles, prefixes, recent)` and format 1 `(handles, prefixes)`.
//!
//! A node keeps no snapshot file now: its current snapshot is a view of its store
//! ([`super::snapshot_data`]). Earlier releases kept one in the group's directory
//! ([`SNAPSHOT_FILE`], replaced through a temporary file by rename); a node upgraded
//! from one reads it once, at open, and removes it ([`open_kept`], [`remove_kept`]).

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::Error;
use super::types::{SnapshotMeta, from_bytes, to_bytes};
use crate::storage::{ImageRecord, RecentResult, Slot, SlotState};

/// The file, inside a group's directory, where an earlier release kept its current
/// snapshot.
pub const SNAPSHOT_FILE: &str = "snapshot.bin";

/// The temporary file an earlier release wrote a new current snapshot to before
/// renaming it to [`SNAPSHOT_FILE`].
const KEPT_TEMPORARY: &str = "snapshot.tmp";

/// The longest record (or meta) snapshot data may hold: far above any handle record.
pub const MAX_RECORD: u32 = 64 << 20;

/// The format written now: streamed, record by record.
pub(super) const SNAPSHOT_FORMAT: u8 = 4;

/// The format whose image was one postcard value with documents and slot states.
const SNAPSHOT_FORMAT_WHOLE: u8 = 3;

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

/// The image of format 3.
type ImageWhole = (
    Records,
    Records,
    Vec<RecentResult>,
    Records,
    Option<u32>,
    Vec<(Slot, SlotState)>,
);

/// Writes snapshot data record by record.
pub(super) struct SnapshotWriter<W: Write> {
    out: W,
}

impl<W: Write> SnapshotWriter<W> {
    /// Starts the data of the snapshot `meta` on `out`.
    pub(super) fn new(mut out: W, meta: &SnapshotMeta) -> Result<Self, Error> {
        out.write_all(&[SNAPSHOT_FORMAT])
            .map_err(Error::SnapshotData)?;
        let mut writer = SnapshotWriter { out };
        writer.frame(&to_bytes(meta, "snapshot meta")?)?;
        Ok(writer)
    }

    /// Appends one record.
    pub(super) fn record(&mut self, record: &ImageRecord) -> Result<(), Error> {
        self.frame(&to_bytes(record, "snapshot record")?)
    }

    fn frame(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let length = u32::try_from(bytes.len())
            .ok()
            .filter(|&length| length <= MAX_RECORD)
            .ok_or(Error::SnapshotRecordTooLong { length: u32::MAX })?;
        self.out
            .write_all(&length.to_be_bytes())
            .and_then(|()| self.out.write_all(bytes))
            .map_err(Error::SnapshotData)
    }

    /// Ends the data; the writer under it.
    pub(super) fn finish(mut self) -> Result<W, Error> {
        self.out
            .write_all(&0u32.to_be_bytes())
            .and_then(|()| self.out.flush())
            .map_err(Error::SnapshotData)?;
        Ok(self.out)
    }
}

/// Snapshot data being read: its meta, then its records.
pub(super) enum SnapshotReader<R: Read> {
    /// Format 4: records are read one at a time.
    Streamed(R),
    /// An older format, read whole: its records, last first.
    Whole(Vec<ImageRecord>),
}

/// Reads the format and meta at the head of snapshot data.
pub(super) fn read_head<R: Read>(mut input: R) -> Result<(SnapshotMeta, SnapshotReader<R>), Error> {
    let mut format = [0u8];
    read_exact(&mut input, &mut format)?;
    match format[0] {
        SNAPSHOT_FORMAT => {
            let bytes = read_frame(&mut input)?.ok_or(Error::SnapshotTruncated)?;
            let meta = from_bytes(&bytes, "snapshot meta")?;
            Ok((meta, SnapshotReader::Streamed(input)))
        }
        format @ (SNAPSHOT_FORMAT_WITHOUT_RECENT
        | SNAPSHOT_FORMAT_WITHOUT_DOCUMENTS
        | SNAPSHOT_FORMAT_WHOLE) => {
            let mut data = Vec::new();
            input.read_to_end(&mut data).map_err(Error::SnapshotData)?;
            let (meta, mut records) = decode_old(format, &data)?;
            records.reverse();
            Ok((meta, SnapshotReader::Whole(records)))
        }
        found => Err(Error::SnapshotFormat {
            found,
            expected: SNAPSHOT_FORMAT,
        }),
    }
}

impl<R: Read> SnapshotReader<R> {
    /// The next record, or `None` after the last.
    pub(super) fn next_record(&mut self) -> Result<Option<ImageRecord>, Error> {
        match self {
            SnapshotReader::Whole(records) => Ok(records.pop()),
            SnapshotReader::Streamed(input) => match read_frame(input)? {
                Some(bytes) => from_bytes(&bytes, "snapshot record").map(Some),
                None => {
                    let mut rest = [0u8];
                    match input.read(&mut rest).map_err(Error::SnapshotData)? {
                        0 => Ok(None),
                        _ => Err(Error::TrailingBytes {
                            what: "snapshot data",
                            count: 1,
                        }),
                    }
                }
            },
        }
    }
}

fn read_exact(input: &mut impl Read, buf: &mut [u8]) -> Result<(), Error> {
    input.read_exact(buf).map_err(|error| match error.kind() {
        io::ErrorKind::UnexpectedEof => Error::SnapshotTruncated,
        _ => Error::SnapshotData(error),
    })
}

/// One length-prefixed frame; `None` for the zero length that ends the data.
fn read_frame(input: &mut impl Read) -> Result<Option<Vec<u8>>, Error> {
    let mut length = [0u8; 4];
    read_exact(input, &mut length)?;
    let length = u32::from_be_bytes(length);
    if length == 0 {
        return Ok(None);
    }
    if length > MAX_RECORD {
        return Err(Error::SnapshotRecordTooLong { length });
    }
    // Read through `take`: memory follows the bytes really there, not the claim.
    let mut bytes = Vec::new();
    input
        .take(u64::from(length))
        .read_to_end(&mut bytes)
        .map_err(Error::SnapshotData)?;
    if bytes.len() != length as usize {
        return Err(Error::SnapshotTruncated);
    }
    Ok(Some(bytes))
}

/// Reads snapshot data of formats 1 to 3 (after the format byte).
fn decode_old(format: u8, data: &[u8]) -> Result<(SnapshotMeta, Vec<ImageRecord>), Error> {
    let (meta, rest): (SnapshotMeta, _) =
        postcard::take_from_bytes(data).map_err(|source| Error::Decode {
            what: "snapshot meta",
            source,
        })?;
    let (handles, prefixes, recent, documents, slot_count, slot_states) = match format {
        SNAPSHOT_FORMAT_WITHOUT_RECENT => {
            let (handles, prefixes): ImageWithoutRecent = from_bytes(rest, "snapshot image")?;
            (handles, prefixes, Vec::new(), Vec::new(), None, Vec::new())
        }
        SNAPSHOT_FORMAT_WITHOUT_DOCUMENTS => {
            let (handles, prefixes, recent): ImageWithoutDocuments =
                from_bytes(rest, "snapshot image")?;
            (handles, prefixes, recent, Vec::new(), None, Vec::new())
        }
        _ => from_bytes::<ImageWhole>(rest, "snapshot image")?,
    };
    let records = slot_count
        .map(ImageRecord::SlotCount)
        .into_iter()
        .chain(
            slot_states
                .into_iter()
                .map(|(s, st)| ImageRecord::SlotState(s, st)),
        )
        .chain(handles.into_iter().map(|(k, b)| ImageRecord::Handle(k, b)))
        .chain(prefixes.into_iter().map(|(k, b)| ImageRecord::Prefix(k, b)))
        .chain(
            documents
                .into_iter()
                .map(|(k, b)| ImageRecord::Document(k, b)),
        )
        .chain(recent.into_iter().map(ImageRecord::Recent))
        .collect();
    Ok((meta, records))
}

/// A new, empty file in `dir` for snapshot data that is not a snapshot yet (being
/// received or backed up): it has no name, so nothing is left of it after a
/// crash, and its space is freed once the last handle to it is closed.
pub(super) fn scratch_file(dir: &Path) -> Result<File, Error> {
    // Two made in the same microsecond (a backup beside a receive) differ by the count.
    static MADE: AtomicU64 = AtomicU64::new(0);
    let made = MADE.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!(
        "snapshot.{}.{made}.scratch",
        crate::clock::unix_micros()
    ));
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .and_then(|file| fs::remove_file(&path).map(|()| file))
        .map_err(|source| Error::SnapshotFile { path, source })
}

/// The snapshot kept by a node of an earlier release in `data_dir`, if there is one:
/// its meta and its data, open at its start.
pub(super) fn open_kept(data_dir: &Path) -> Result<Option<(SnapshotMeta, File)>, Error> {
    let path = data_dir.join(SNAPSHOT_FILE);
    let file_error = |source| Error::SnapshotFile {
        path: path.clone(),
        source,
    };
    let mut data = match File::open(&path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(file_error(source)),
    };
    let (meta, _) = read_head(BufReader::new(&mut data))?;
    data.seek(SeekFrom::Start(0)).map_err(file_error)?;
    Ok(Some((meta, data)))
}

/// Removes, durably, the snapshot an earlier release kept in `data_dir` and the
/// temporary file it was replaced through (left by a crash during a replacement).
pub(super) fn remove_kept(data_dir: &Path) -> Result<(), Error> {
    let mut removed = false;
    for name in [SNAPSHOT_FILE, KEPT_TEMPORARY] {
        let path = data_dir.join(name);
        match fs::remove_file(&path) {
            Ok(()) => removed = true,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Err(Error::SnapshotFile { path, source }),
        }
    }
    if removed {
        File::open(data_dir)
            .and_then(|dir| dir.sync_all())
            .map_err(|source| Error::SnapshotFile {
                path: data_dir.to_owned(),
                source,
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(data: &[u8]) -> Result<(SnapshotMeta, Vec<ImageRecord>), Error> {
        let (meta, mut reader) = read_head(data)?;
        let mut records = Vec::new();
        while let Some(record) = reader.next_record()? {
            records.push(record);
        }
        Ok((meta, records))
    }

    #[test]
    fn format_4_round_trips_and_refuses_truncation_and_trailing_bytes() {
        let meta = SnapshotMeta::default();
        let written = vec![
            ImageRecord::SlotCount(8),
            ImageRecord::Handle("10.1/A".into(), b"record".to_vec()),
            ImageRecord::Journal(Slot(3), 0, "10.1/A".into()),
        ];
        let mut writer = SnapshotWriter::new(Vec::new(), &meta).unwrap();
        for record in &written {
            writer.record(record).unwrap();
        }
        let data = writer.finish().unwrap();
        assert_eq!(records(&data).unwrap(), (meta, written));
        for cut in [1, 5, data.len() - 1] {
            assert!(records(&data[..cut]).is_err(), "cut at {cut}");
        }
        let mut trailing = data.clone();
        trailing.push(0);
        assert!(records(&trailing).is_err());
        let mut huge = data[..1].to_vec();
        huge.extend(u32::MAX.to_be_bytes());
        assert!(matches!(
            records(&huge),
            Err(Error::SnapshotRecordTooLong { .. })
        ));
    }

    #[test]
    fn a_format_2_snapshot_reads_as_an_image_without_documents() {
        let meta = SnapshotMeta::default();
        let handles = vec![("10.1/A".to_owned(), b"record".to_vec())];
        let recent = RecentResult {
            request: 7,
            index: 3,
            result: b"ok".to_vec(),
        };
        let mut data = vec![SNAPSHOT_FORMAT_WITHOUT_DOCUMENTS];
        data.extend(to_bytes(&meta, "meta").unwrap());
        let image: ImageWithoutDocuments = (handles, Vec::new(), vec![recent.clone()]);
        data.extend(to_bytes(&image, "image").unwrap());
        let (found, image) = records(&data).unwrap();
        assert_eq!(found, meta);
        let expected = vec![
            ImageRecord::Handle("10.1/A".into(), b"record".to_vec()),
            ImageRecord::Recent(recent),
        ];
        assert_eq!(image, expected);
    }

    #[test]
    fn a_format_1_snapshot_reads_as_an_image_without_recent_results() {
        let meta = SnapshotMeta::default();
        let handles = vec![("10.1/A".to_owned(), b"record".to_vec())];
        let prefixes = vec![("10.1".to_owned(), b"prefix".to_vec())];
        let mut data = vec![SNAPSHOT_FORMAT_WITHOUT_RECENT];
        data.extend(to_bytes(&meta, "meta").unwrap());
        data.extend(to_bytes(&(handles, prefixes), "image").unwrap());

        let (found, image) = records(&data).unwrap();
        assert_eq!(found, meta);
        let expected = vec![
            ImageRecord::Handle("10.1/A".into(), b"record".to_vec()),
            ImageRecord::Prefix("10.1".into(), b"prefix".to_vec()),
        ];
        assert_eq!(image, expected);
        assert!(matches!(
            records(&[9]),
            Err(Error::SnapshotFormat { found: 9, .. })
        ));
    }

    #[test]
    fn a_format_3_snapshot_reads_with_its_slots() {
        let meta = SnapshotMeta::default();
        let image: ImageWhole = (
            vec![("10.1/A".to_owned(), b"r".to_vec())],
            Vec::new(),
            Vec::new(),
            vec![("map".to_owned(), b"m".to_vec())],
            Some(8),
            vec![(Slot(1), SlotState::Owned)],
        );
        let mut data = vec![SNAPSHOT_FORMAT_WHOLE];
        data.extend(to_bytes(&meta, "meta").unwrap());
        data.extend(to_bytes(&image, "image").unwrap());
        let (_, image) = records(&data).unwrap();
        assert_eq!(
            image,
            vec![
                ImageRecord::SlotCount(8),
                ImageRecord::SlotState(Slot(1), SlotState::Owned),
                ImageRecord::Handle("10.1/A".into(), b"r".to_vec()),
                ImageRecord::Document("map".into(), b"m".to_vec()),
            ]
        );
    }
}
