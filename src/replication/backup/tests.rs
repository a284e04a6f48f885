use std::io::Cursor;

use openraft::CommittedLeaderId;

use super::*;
use crate::replication::snapshot::SnapshotWriter;
use crate::replication::types::SnapshotMeta;
use crate::storage::Slot;

fn log_id(index: u64) -> Option<LogId> {
    Some(LogId::new(CommittedLeaderId::new(2, 1), index))
}

/// Snapshot data of `records` covering the log to `index`.
fn snapshot_data(index: u64, records: &[ImageRecord]) -> Vec<u8> {
    let meta = SnapshotMeta {
        last_log_id: log_id(index),
        ..SnapshotMeta::default()
    };
    let mut writer = SnapshotWriter::new(Vec::new(), &meta).unwrap();
    for record in records {
        writer.record(record).unwrap();
    }
    writer.finish().unwrap()
}

fn handle(key: &str) -> ImageRecord {
    ImageRecord::Handle(key.into(), format!("record of {key}").into_bytes())
}

/// The sections of the test backup: set 1 and set 2, each with its records.
fn sections() -> Vec<(SetId, u64, Vec<ImageRecord>)> {
    vec![
        (
            SetId(1),
            7,
            vec![
                ImageRecord::SlotCount(4),
                ImageRecord::SlotState(Slot(0), crate::storage::SlotState::Owned),
                handle("10.1/A"),
                handle("10.1/B"),
                ImageRecord::Prefix("10.1".into(), b"prefix".to_vec()),
            ],
        ),
        (SetId(2), 3, vec![handle("10.1/C")]),
    ]
}

/// A backup of [`sections`], the ring of four slots shared by sets 1 and 2, written
/// in chunks of `chunk` octets.
fn backup(chunk: usize) -> (BackupHeader, Vec<u8>) {
    let bodies: Vec<(SetId, u64, Vec<u8>)> = sections()
        .into_iter()
        .map(|(set, index, records)| (set, index, snapshot_data(index, &records)))
        .collect();
    let header = BackupHeader {
        created_micros: 1_767_225_600_000_000,
        epoch: 12,
        owners: vec![SetId(1), SetId(1), SetId(2), SetId(2)],
        sections: bodies
            .iter()
            .map(|(set, index, body)| SectionHead {
                set: *set,
                member: u64::from(set.0) * 10,
                applied: log_id(*index),
                length: body.len() as u64,
            })
            .collect(),
    };
    let mut writer = BackupWriter::new(Vec::new(), &header).unwrap();
    for (_, _, body) in &bodies {
        for piece in body.chunks(chunk) {
            writer.section_bytes(piece).unwrap();
        }
    }
    (header, writer.finish().unwrap())
}

fn records_of(data: &[u8]) -> Result<(BackupHeader, Vec<(SetId, ImageRecord)>), BackupError> {
    let mut records = Vec::new();
    let header = read_records(&mut Cursor::new(data), |set, record| {
        records.push((set, record));
        Ok::<(), BackupError>(())
    })?;
    Ok((header, records))
}

#[test]
fn a_backup_reads_back_its_header_and_every_record_in_order() {
    for chunk in [1, 7, 1 << 20] {
        let (header, data) = backup(chunk);
        assert_eq!(&data[..8], b"HDL-BACK");
        let (read, records) = records_of(&data).unwrap();
        assert_eq!(read, header);
        let expected: Vec<(SetId, ImageRecord)> = sections()
            .into_iter()
            .flat_map(|(set, _, records)| records.into_iter().map(move |r| (set, r)))
            .collect();
        assert_eq!(records, expected);
        let summary = verify(&mut Cursor::new(&data)).unwrap();
        assert_eq!(summary.header, header);
        assert_eq!(summary.handles, [2, 1]);
    }
}

#[test]
fn every_truncation_is_refused() {
    let (_, data) = backup(1 << 20);
    for cut in 0..data.len() {
        let error = verify(&mut Cursor::new(&data[..cut])).unwrap_err();
        assert!(
            matches!(
                error,
                BackupError::HeaderTruncated | BackupError::Truncated { .. }
            ),
            "cut at {cut}: {error}"
        );
    }
    let mut longer = data.clone();
    longer.push(0);
    assert!(matches!(
        verify(&mut Cursor::new(&longer)),
        Err(BackupError::TrailingBytes { count: 1 })
    ));
}

#[test]
fn every_flipped_bit_is_refused() {
    let (_, data) = backup(1 << 20);
    for at in 0..data.len() {
        for bit in [0x01, 0x80] {
            let mut damaged = data.clone();
            damaged[at] ^= bit;
            assert!(
                verify(&mut Cursor::new(&damaged)).is_err(),
                "bit {bit:#x} of octet {at} flipped"
            );
        }
    }
    // A change inside a record's octets leaves the structure whole: the checksum
    // is what refuses it.
    let at = data.windows(6).position(|w| w == b"10.1/B").unwrap();
    let mut damaged = data.clone();
    damaged[at + 5] = b'X';
    assert!(matches!(
        verify(&mut Cursor::new(&damaged)),
        Err(BackupError::Checksum)
    ));
}

#[test]
fn what_is_not_a_backup_or_of_another_format_says_so() {
    let (_, data) = backup(1 << 20);
    let mut other = data.clone();
    other[0] = b'X';
    let error = verify(&mut Cursor::new(&other)).unwrap_err();
    assert!(error.to_string().contains("not an hdl backup"), "{error}");
    let mut format = data.clone();
    format[9] = 9;
    let error = verify(&mut Cursor::new(&format)).unwrap_err();
    assert!(
        matches!(error, BackupError::Format { found: 9, .. }),
        "{error}"
    );
    assert!(matches!(
        verify(&mut Cursor::new(b"")),
        Err(BackupError::HeaderTruncated)
    ));
}

#[test]
fn a_header_that_does_not_hold_together_is_never_written() {
    let (header, _) = backup(1 << 20);
    let mut unowned = header.clone();
    unowned.owners[0] = SetId(3);
    let mut twice = header.clone();
    twice.sections[1].set = SetId(1);
    let mut odd = header.clone();
    odd.owners.pop();
    let mut ringless = header.clone();
    ringless.owners.clear();
    let mut empty = header.clone();
    empty.sections.clear();
    empty.owners.clear();
    for (bad, expected) in [
        (unowned, "replica set 3 owns slots"),
        (twice, "replica set 1 twice"),
        (odd, "3 slots"),
        (ringless, "no ring"),
        (empty, "no replica set"),
    ] {
        let error = BackupWriter::new(Vec::new(), &bad).err().unwrap();
        assert!(error.to_string().contains(expected), "{error}");
    }
}

/// The octets of each section of `data`, the backup `header` describes.
fn bodies(header: &BackupHeader, data: &[u8]) -> Vec<Vec<u8>> {
    let lengths: Vec<usize> = header
        .sections
        .iter()
        .map(|section| usize::try_from(section.length).unwrap())
        .collect();
    let end = data.len() - 32;
    let mut at = end - lengths.iter().sum::<usize>();
    lengths
        .iter()
        .map(|length| {
            at += length;
            data[at - length..at].to_vec()
        })
        .collect()
}

/// A backup of `header` whose sections are `bodies`.
fn rewrite(header: &BackupHeader, bodies: &[Vec<u8>]) -> Vec<u8> {
    let mut writer = BackupWriter::new(Vec::new(), header).unwrap();
    for body in bodies {
        writer.section_bytes(body).unwrap();
    }
    writer.finish().unwrap()
}

#[test]
fn the_writer_refuses_sections_longer_or_shorter_than_declared() {
    let (header, data) = backup(1 << 20);
    let bodies = bodies(&header, &data);
    assert_eq!(rewrite(&header, &bodies), data);

    let mut writer = BackupWriter::new(Vec::new(), &header).unwrap();
    let mut longer = bodies[0].clone();
    longer.push(0);
    writer.section_bytes(&longer).unwrap_err();
    let mut writer = BackupWriter::new(Vec::new(), &header).unwrap();
    writer.section_bytes(&bodies[0]).unwrap();
    writer
        .section_bytes(&bodies[1][..bodies[1].len() - 1])
        .unwrap();
    let error = writer.finish().err().unwrap();
    assert!(
        matches!(error, BackupError::Short { set: 2, missing: 1 }),
        "{error}"
    );
}

#[test]
fn a_section_of_another_log_position_or_snapshot_format_is_refused() {
    let (mut header, data) = backup(1 << 20);
    let mut bodies = bodies(&header, &data);
    header.sections[1].applied = log_id(4);
    let error = verify(&mut Cursor::new(rewrite(&header, &bodies))).unwrap_err();
    assert!(
        matches!(error, BackupError::SectionPosition { set: 2, .. }),
        "{error}"
    );
    header.sections[1].applied = log_id(3);
    bodies[0][0] = 3;
    let error = verify(&mut Cursor::new(rewrite(&header, &bodies))).unwrap_err();
    assert!(error.to_string().contains("snapshot format 3"), "{error}");
}
