use std::fs;

use redb::Database;

use super::earlier::EARLIER_LOG_FILE;
use super::*;
use crate::storage::tables::{FORMAT_VERSION_KEY, META};

fn open(dir: &tempfile::TempDir) -> EntryLog {
    EntryLog::open_in(dir.path()).unwrap()
}

fn indexes(records: &[LogRecord]) -> Vec<u64> {
    records.iter().map(|(index, _)| *index).collect()
}

fn segments(dir: &tempfile::TempDir) -> Vec<u64> {
    segment::list(&dir.path().join(LOG_DIR)).unwrap()
}

fn last_segment(dir: &tempfile::TempDir) -> PathBuf {
    segment::path(&dir.path().join(LOG_DIR), *segments(dir).last().unwrap())
}

#[test]
fn appends_read_back_in_order_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(&dir);
    log.append(
        (1..=5_u64).map(|i| (i, vec![u8::try_from(i).unwrap(); 3])),
        None,
    )
    .unwrap();
    log.append([(6_u64, b"six".as_slice())], None).unwrap();
    log.save_vote(b"vote").unwrap();
    drop(log);

    let log = open(&dir);
    assert_eq!(indexes(&log.read_range(2..5).unwrap()), vec![2, 3, 4]);
    assert_eq!(log.read_range(3..=3).unwrap(), vec![(3, vec![3; 3])]);
    assert_eq!(log.last().unwrap(), Some((6, b"six".to_vec())));
    assert_eq!(log.vote().unwrap(), Some(b"vote".to_vec()));
}

#[test]
fn a_read_within_octets_stops_before_the_entry_that_overflows_but_reads_one() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(&dir);
    log.append((1..=5_u64).map(|i| (i, vec![0_u8; 10])), None)
        .unwrap();
    assert_eq!(indexes(&log.read_range_within(.., 25).unwrap()), vec![1, 2]);
    assert_eq!(
        indexes(&log.read_range_within(2.., 30).unwrap()),
        vec![2, 3, 4]
    );
    assert_eq!(indexes(&log.read_range_within(4.., 3).unwrap()), vec![4]);
    assert!(log.read_range_within(6.., 3).unwrap().is_empty());
    let (start, end) = (4, 2);
    assert!(log.read_range(start..end).unwrap().is_empty());
    assert!(log.read_range(3..3).unwrap().is_empty());
    assert!(log.read_range(u64::MAX..).unwrap().is_empty());
}

#[test]
fn truncate_and_purge_remove_exactly_their_side_also_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(&dir);
    log.append((0..10_u64).map(|i| (i, [u8::try_from(i).unwrap()])), None)
        .unwrap();
    log.truncate_from(7).unwrap();
    log.purge_upto(2, b"purged at 2").unwrap();
    assert_eq!(indexes(&log.read_range(..).unwrap()), vec![3, 4, 5, 6]);
    drop(log);

    let log = open(&dir);
    assert_eq!(indexes(&log.read_range(..).unwrap()), vec![3, 4, 5, 6]);
    assert_eq!(log.last().unwrap(), Some((6, vec![6])));
    assert_eq!(log.last_purged().unwrap(), Some(b"purged at 2".to_vec()));
    log.purge_upto(20, b"purged at 20").unwrap();
    assert_eq!(log.last().unwrap(), None);
    log.append([(21_u64, b"21".as_slice())], None).unwrap();
    drop(log);
    assert_eq!(open(&dir).last().unwrap(), Some((21, b"21".to_vec())));
}

#[test]
fn an_entry_at_a_held_index_replaces_it_and_all_after() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(&dir);
    log.append((1..=5_u64).map(|i| (i, *b"old")), None).unwrap();
    log.append([(3_u64, *b"new")], None).unwrap();
    assert_eq!(
        log.read_range(..).unwrap(),
        vec![
            (1, b"old".to_vec()),
            (2, b"old".to_vec()),
            (3, b"new".to_vec())
        ]
    );
    drop(log);
    assert_eq!(indexes(&open(&dir).read_range(..).unwrap()), vec![1, 2, 3]);
}

#[test]
fn committed_is_kept_with_the_append_that_carries_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(&dir);
    assert_eq!(log.committed().unwrap(), None);
    log.append([(1_u64, b"one".as_slice())], Some(b"c1"))
        .unwrap();
    log.append([(2_u64, b"two".as_slice())], None).unwrap();
    drop(log);
    assert_eq!(open(&dir).committed().unwrap(), Some(b"c1".to_vec()));
}

#[test]
fn what_a_crash_cut_short_at_the_end_is_dropped_and_appends_go_on_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(&dir);
    log.append((1..=3_u64).map(|i| (i, [7_u8; 100])), None)
        .unwrap();
    drop(log);
    let path = last_segment(&dir);
    let whole = fs::metadata(&path).unwrap().len();
    // The third entry's record loses its last 30 octets.
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(whole - 30)
        .unwrap();

    let log = open(&dir);
    assert_eq!(indexes(&log.read_range(..).unwrap()), vec![1, 2]);
    log.append([(3_u64, *b"again")], None).unwrap();
    drop(log);
    let log = open(&dir);
    assert_eq!(log.last().unwrap(), Some((3, b"again".to_vec())));
}

#[test]
fn damage_before_the_end_of_the_last_segment_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = EntryLog::open_with_segments_of(&dir.path().join(LOG_DIR), 200).unwrap();
    log.append((1..=3_u64).map(|i| (i, [7_u8; 100])), None)
        .unwrap();
    log.append([(4_u64, [8_u8; 100])], None).unwrap();
    drop(log);
    assert_eq!(segments(&dir).len(), 2);
    let first = segment::path(&dir.path().join(LOG_DIR), segments(&dir)[0]);
    let mut octets = fs::read(&first).unwrap();
    let middle = octets.len() / 2;
    octets[middle] ^= 1;
    fs::write(&first, octets).unwrap();
    assert!(matches!(
        EntryLog::open_in(dir.path()),
        Err(StorageError::LogDamaged { .. })
    ));
}

#[test]
fn full_segments_roll_over_keep_the_positions_and_go_once_purged() {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = dir.path().join(LOG_DIR);
    let log = EntryLog::open_with_segments_of(&log_dir, 1000).unwrap();
    log.save_vote(b"v1").unwrap();
    log.append([(1_u64, [0_u8; 10])], Some(b"c1")).unwrap();
    for i in 2..=40_u64 {
        log.append([(i, [u8::try_from(i).unwrap(); 100])], None)
            .unwrap();
    }
    let before = segments(&dir);
    assert!(before.len() >= 4, "{before:?}");
    log.purge_upto(30, b"p30").unwrap();
    let after = segments(&dir);
    assert!(after.len() < before.len(), "{after:?}");
    assert_eq!(after.last(), before.last());
    assert_eq!(
        indexes(&log.read_range(..).unwrap()),
        (31..=40).collect::<Vec<_>>()
    );
    drop(log);

    let log = EntryLog::open_with_segments_of(&log_dir, 1000).unwrap();
    assert_eq!(
        indexes(&log.read_range(..).unwrap()),
        (31..=40).collect::<Vec<_>>()
    );
    assert_eq!(log.read_range(35..=35).unwrap(), vec![(35, vec![35; 100])]);
    assert_eq!(log.vote().unwrap(), Some(b"v1".to_vec()));
    assert_eq!(log.committed().unwrap(), Some(b"c1".to_vec()));
    assert_eq!(log.last_purged().unwrap(), Some(b"p30".to_vec()));
}

#[test]
fn a_segment_of_another_format_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(&dir));
    let path = last_segment(&dir);
    let mut octets = fs::read(&path).unwrap();
    octets[record::MAGIC.len()..record::HEAD_LEN].copy_from_slice(&99_u64.to_le_bytes());
    fs::write(&path, octets).unwrap();
    assert!(matches!(
        EntryLog::open_in(dir.path()),
        Err(StorageError::FormatVersion { found: 99, .. })
    ));
}

/// Writes a log as releases before segments kept it: a redb file of format 2.
fn write_earlier_log(path: &Path, entries: std::ops::RangeInclusive<u64>) {
    let db = Database::create(path).unwrap();
    let txn = db.begin_write().unwrap();
    txn.open_table(META)
        .unwrap()
        .insert(FORMAT_VERSION_KEY, 2)
        .unwrap();
    {
        let mut log = txn.open_table(earlier::RAFT_LOG).unwrap();
        for index in entries {
            log.insert(index, index.to_le_bytes().as_slice()).unwrap();
        }
        let mut meta = txn.open_table(earlier::RAFT_META).unwrap();
        meta.insert("vote", b"vote".as_slice()).unwrap();
        meta.insert("committed", b"committed".as_slice()).unwrap();
        meta.insert("last_purged", b"purged".as_slice()).unwrap();
    }
    txn.commit().unwrap();
}

#[test]
fn an_earlier_redb_log_is_converted_once_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    write_earlier_log(&dir.path().join(EARLIER_LOG_FILE), 11..=20);
    // A conversion a crash interrupted is started over.
    fs::create_dir(dir.path().join("raft-log.upgrading")).unwrap();
    fs::write(dir.path().join("raft-log.upgrading/stray"), b"x").unwrap();

    let log = open(&dir);
    assert!(!dir.path().join(EARLIER_LOG_FILE).exists());
    assert!(!dir.path().join("raft-log.upgrading").exists());
    let read = log.read_range(..).unwrap();
    assert_eq!(indexes(&read), (11..=20).collect::<Vec<_>>());
    assert_eq!(read[0].1, 11_u64.to_le_bytes());
    assert_eq!(log.vote().unwrap(), Some(b"vote".to_vec()));
    assert_eq!(log.committed().unwrap(), Some(b"committed".to_vec()));
    assert_eq!(log.last_purged().unwrap(), Some(b"purged".to_vec()));
    log.append([(21_u64, *b"new")], None).unwrap();
    drop(log);
    assert_eq!(open(&dir).last().unwrap(), Some((21, b"new".to_vec())));
}

#[test]
fn an_earlier_log_beside_a_converted_one_is_the_leftover_of_a_finished_conversion() {
    let dir = tempfile::tempdir().unwrap();
    open(&dir).append([(1_u64, *b"kept")], None).unwrap();
    write_earlier_log(&dir.path().join(EARLIER_LOG_FILE), 1..=5);
    let log = open(&dir);
    assert!(!dir.path().join(EARLIER_LOG_FILE).exists());
    assert_eq!(log.read_range(..).unwrap(), vec![(1, b"kept".to_vec())]);
}

#[test]
fn an_earlier_log_of_an_older_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(EARLIER_LOG_FILE);
    write_earlier_log(&path, 1..=1);
    let db = Database::open(&path).unwrap();
    let txn = db.begin_write().unwrap();
    txn.open_table(META)
        .unwrap()
        .insert(FORMAT_VERSION_KEY, 1)
        .unwrap();
    txn.commit().unwrap();
    drop(db);
    assert!(matches!(
        EntryLog::open_in(dir.path()),
        Err(StorageError::FormatVersion { found: 1, .. })
    ));
    assert!(
        path.exists(),
        "the earlier log is kept when it cannot be read"
    );
}
