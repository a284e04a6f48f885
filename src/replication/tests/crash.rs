//! What a crash at the worst moments of a snapshot install leaves on disk: openraft
//! purges the log as soon as it has queued the install, so the log store must hold the
//! purge until the install is durable; and a snapshot file an earlier release kept
//! ahead of the store (a crash during its install) is installed on open, then removed.

use std::time::Duration;

use openraft::LogState;

use super::*;
use crate::replication::snapshot_data::SnapshotData;
use crate::replication::types::{LogId, Snapshot};

/// How long a purge that must wait is given to (wrongly) finish.
const HELD: Duration = Duration::from_millis(300);
/// How long a purge that may go on is given to finish.
const RELEASED: Duration = Duration::from_secs(10);

/// A leader's state machine that applied `count` creates, and a snapshot of it, as
/// received.
async fn leader_snapshot(count: u64) -> (TempDir, Arc<Store>, Snapshot<HandleSet>) {
    let (dir, store, _log, mut leader) = open_temp();
    let entries = (1..=count).map(|i| command_entry(i, create(&format!("10.1/{i}"), "u")));
    leader.apply(entries).await.unwrap();
    let snapshot = leader
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    (dir, store, received(snapshot))
}

/// The file of a received snapshot's data.
async fn file_of(data: Box<SnapshotData>) -> std::fs::File {
    let SnapshotData::Received(file) = *data else {
        panic!("a received snapshot is a file");
    };
    file.into_std().await
}

/// A follower's log and state machine side by side, as a group opens them, that
/// holds entries 1 to 4 and applied 1 to 3.
async fn follower_behind() -> (TempDir, Arc<Store>, LogStore, StateMachine) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("handles.redb")).unwrap());
    let mut sm = StateMachine::open(Arc::clone(&store), dir.path()).unwrap();
    let mut log = LogStore::open_beside(dir.path(), &sm, 1).unwrap();
    let entries: Vec<Entry<HandleSet>> = (1..=4)
        .map(|i| command_entry(i, create(&format!("10.1/old-{i}"), "u")))
        .collect();
    log.blocking_append(entries.clone()).await.unwrap();
    sm.apply(entries[..3].to_vec()).await.unwrap();
    (dir, store, log, sm)
}

/// The last purged and last applied log ids on disk in `dir`, read after everything
/// that had them open is gone, as a restarted node reads them.
async fn on_disk(dir: &TempDir) -> (Option<LogId>, Option<LogId>) {
    let store = Arc::new(reopened(&dir.path().join("handles.redb")).await);
    let mut sm = StateMachine::open(store, dir.path()).unwrap();
    let mut log = LogStore::open(dir.path()).unwrap();
    let LogState {
        last_purged_log_id, ..
    } = log.get_log_state().await.unwrap();
    (last_purged_log_id, sm.applied_state().await.unwrap().0)
}

/// The store at `path` opened again once its state machine is dropped: the periodic
/// sync of the applied state may still hold it for the length of one sync.
async fn reopened(path: &std::path::Path) -> Store {
    for _ in 0..200 {
        match Store::open(path) {
            Err(crate::storage::StorageError::Backend(redb::Error::DatabaseAlreadyOpen)) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            opened => return opened.unwrap(),
        }
    }
    panic!(
        "{} is still open 2 s after its state machine was dropped",
        path.display()
    );
}

#[tokio::test]
async fn a_purge_past_the_applied_state_waits_for_the_install_whatever_the_crash() {
    let (_leader_dir, _leader_store, snapshot) = leader_snapshot(10).await;
    let upto = snapshot.meta.last_log_id.unwrap();

    // openraft has queued the install and purges up to the snapshot at once; the
    // node is killed before the install: the purge must not have happened.
    let (dir, store, mut log, sm) = follower_behind().await;
    let purged = tokio::time::timeout(HELD, log.purge(upto)).await;
    assert!(purged.is_err(), "the purge went ahead of the install");
    drop((log, sm, store));
    let (last_purged, last_applied) = on_disk(&dir).await;
    assert!(
        last_purged <= last_applied,
        "purged {last_purged:?} past applied {last_applied:?}"
    );
    assert_eq!(last_applied, Some(log_id(1, 1, 3)));

    // The same, run to its end: the purge goes on once the install is durable.
    let (dir, store, mut log, mut sm) = follower_behind().await;
    let purge = tokio::spawn(async move { tokio::time::timeout(RELEASED, log.purge(upto)).await });
    sm.install_snapshot(&snapshot.meta, snapshot.snapshot)
        .await
        .unwrap();
    purge.await.unwrap().expect("the purge ended").unwrap();
    drop((sm, store));
    assert_eq!(on_disk(&dir).await, (Some(upto), Some(upto)));
}

#[tokio::test]
async fn a_purge_fails_when_the_state_machine_stops_before_applying() {
    let (dir, store, mut log, sm) = follower_behind().await;
    let purge =
        tokio::spawn(
            async move { tokio::time::timeout(RELEASED, log.purge(log_id(1, 1, 9))).await },
        );
    drop((sm, store));
    assert!(purge.await.unwrap().expect("the purge ended").is_err());
    let (last_purged, _) = on_disk(&dir).await;
    assert_eq!(last_purged, None);
}

#[tokio::test]
async fn a_snapshot_file_an_earlier_release_kept_is_installed_when_ahead_then_removed() {
    let (_leader_dir, leader_store, snapshot) = leader_snapshot(10).await;
    let (dir, store, log, sm) = follower_behind().await;
    drop((log, sm));
    // A crash during an install by an earlier release, after the snapshot became its
    // kept file and before the store committed it; and the temporary file of a
    // replacement cut short.
    let kept = dir.path().join(SNAPSHOT_FILE);
    let temporary = dir.path().join("snapshot.tmp");
    let mut data = file_of(snapshot.snapshot).await;
    std::io::copy(&mut data, &mut std::fs::File::create(&kept).unwrap()).unwrap();
    std::fs::write(&temporary, b"half").unwrap();

    let mut sm = StateMachine::open(Arc::clone(&store), dir.path()).unwrap();
    assert_eq!(
        sm.applied_state().await.unwrap().0,
        snapshot.meta.last_log_id
    );
    assert_eq!(
        store.read().unwrap().image(),
        leader_store.read().unwrap().image()
    );
    assert!(!kept.exists() && !temporary.exists(), "the files are gone");
    let current = sm.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(current.meta.last_log_id, snapshot.meta.last_log_id);
    drop(sm);

    // A kept file behind the store is removed and changes nothing.
    let image = store.read().unwrap().image();
    let (_, _, older) = leader_snapshot(2).await;
    let mut data = file_of(older.snapshot).await;
    std::io::copy(&mut data, &mut std::fs::File::create(&kept).unwrap()).unwrap();
    let mut sm = StateMachine::open(Arc::clone(&store), dir.path()).unwrap();
    assert_eq!(
        sm.applied_state().await.unwrap().0,
        snapshot.meta.last_log_id
    );
    assert_eq!(store.read().unwrap().image(), image);
    assert!(!kept.exists());
}

#[tokio::test]
async fn applies_reach_the_disk_without_an_install_and_a_purge_behind_them_goes_on() {
    let (dir, store, mut log, sm) = follower_behind().await;
    let durable = sm.durable().upgrade().unwrap().watch();
    tokio::time::timeout(RELEASED, log.purge(log_id(1, 1, 3)))
        .await
        .expect("the purge ended")
        .unwrap();
    assert_eq!(*durable.borrow(), Some(log_id(1, 1, 3)));
    drop((log, sm, store));
    assert_eq!(
        on_disk(&dir).await,
        (Some(log_id(1, 1, 3)), Some(log_id(1, 1, 3)))
    );
}
