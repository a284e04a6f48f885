//! The storage seams against openraft's own contract (`Suite`), and the behaviour hdl
//! relies on: applied commands reach the store, refusals are results, the log and vote
//! survive a reopen, snapshots carry the whole store.

use std::sync::Arc;

use openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::testing::{StoreBuilder, Suite, log_id};
use openraft::{EntryPayload, Membership, RaftLogReader, RaftSnapshotBuilder, Vote};
use tempfile::TempDir;

use super::types::{Entry, RaftStorageError};

type Command = HandleCommand;
type TypeConfig = GroupConfig<HandleSet>;
type LogStore = super::LogStore<HandleSet>;
type StateMachine = super::StateMachine<HandleSet>;
use super::*;
use crate::names::Handle;
use crate::storage::{Applied, ExistingHandle, ImageRecord, Refusal, Slot, SlotState, Store};
use crate::values::{HandleValue, ValueSelection};

mod crash;
mod held;

struct TempStores;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, TempDir> for TempStores {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachine), RaftStorageError> {
        let (dir, _store, log, sm) = open_temp();
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    Suite::test_all(TempStores).unwrap();
}

fn open_temp() -> (TempDir, Arc<Store>, LogStore, StateMachine) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("handles.redb")).unwrap());
    let log = LogStore::open(dir.path()).unwrap();
    let sm = StateMachine::open(Arc::clone(&store), dir.path()).unwrap();
    (dir, store, log, sm)
}

/// `snapshot` (a view of a store, as this member's snapshots are) as a member
/// receives it: its data written into a file, as the sender streams it into chunks.
fn received(snapshot: types::Snapshot<HandleSet>) -> types::Snapshot<HandleSet> {
    use std::io::{Seek, SeekFrom};
    let snapshot_data::SnapshotData::Store(image) = *snapshot.snapshot else {
        panic!("a member's own snapshot is a view of its store");
    };
    let mut file = image.write_to(tempfile::tempfile().unwrap()).unwrap();
    file.seek(SeekFrom::Start(0)).unwrap();
    types::Snapshot {
        meta: snapshot.meta,
        snapshot: Box::new(snapshot_data::SnapshotData::Received(
            tokio::fs::File::from_std(file),
        )),
    }
}

fn command_entry(index: u64, command: Command) -> Entry<HandleSet> {
    Entry {
        log_id: log_id(1, 1, index),
        payload: EntryPayload::Normal(Proposal(
            vec![Request {
                id: RequestId(index),
                command,
            }]
            .into(),
        )),
    }
}

/// Makes the one request of command entry `entry` request `id`.
fn set_request_id(entry: &mut Entry<HandleSet>, id: u64) {
    if let EntryPayload::Normal(Proposal(requests)) = &mut entry.payload {
        let mut changed = requests.to_vec();
        changed[0].id = RequestId(id);
        *requests = changed.into();
    }
}

fn create(text: &str, url: &str) -> Command {
    Command::Create {
        handle: Handle::parse(text).unwrap(),
        values: vec![HandleValue::new(1, "URL", url)],
        existing: ExistingHandle::Refuse,
    }
}

fn url_of(store: &Store, text: &str) -> Option<Vec<u8>> {
    let read = store.read().unwrap();
    let record = read.get(&Handle::parse(text).unwrap(), &ValueSelection::all());
    record.unwrap().map(|record| record.values[0].data.clone())
}

#[tokio::test]
async fn applied_commands_reach_the_store() {
    let (_dir, store, _log, mut sm) = open_temp();
    let responses = sm
        .apply([
            command_entry(1, create("10.1/a", "https://a.example/")),
            command_entry(2, create("10.1/b", "https://b.example/")),
        ])
        .await
        .unwrap();
    assert_eq!(responses, vec![vec![Ok(Applied::Created)]; 2]);
    assert_eq!(url_of(&store, "10.1/A").unwrap(), b"https://a.example/");
    assert_eq!(url_of(&store, "10.1/b").unwrap(), b"https://b.example/");
    assert_eq!(sm.applied_state().await.unwrap().0, Some(log_id(1, 1, 2)));
}

#[tokio::test]
async fn a_refused_command_is_a_result_and_changes_nothing() {
    let (dir, store, _log, mut sm) = open_temp();
    sm.apply([command_entry(1, create("10.1/a", "https://first.example/"))])
        .await
        .unwrap();
    let delete_missing = Command::Delete {
        handle: Handle::parse("10.1/missing").unwrap(),
    };
    let responses = sm
        .apply([
            command_entry(2, create("10.1/a", "https://second.example/")),
            command_entry(3, delete_missing),
        ])
        .await
        .unwrap();
    assert_eq!(
        responses,
        vec![
            vec![Err(Refusal::HandleExists)],
            vec![Err(Refusal::HandleNotFound)],
        ]
    );
    assert_eq!(url_of(&store, "10.1/a").unwrap(), b"https://first.example/");
    let listed = store
        .read()
        .unwrap()
        .list_handles("10.1", None, 10)
        .unwrap();
    assert_eq!(listed, vec!["10.1/a".to_owned()]);

    // The refusals were applied: the marker moved past them, and it survives a reopen.
    let mut reopened = StateMachine::open(store, dir.path()).unwrap();
    assert_eq!(
        reopened.applied_state().await.unwrap().0,
        Some(log_id(1, 1, 3))
    );
}

#[tokio::test]
async fn a_write_whose_authorisation_read_a_changed_record_is_refused() {
    let (_dir, store, _log, mut sm) = open_temp();
    let handle = Handle::parse("10.1/a").unwrap();
    let admin = |who: &str| HandleValue::new(100, "HS_ADMIN", who);
    let with_admin = vec![HandleValue::new(1, "URL", "https://a.example/"), admin("A")];
    let put = |values: Vec<HandleValue>| Command::Create {
        handle: handle.clone(),
        values,
        existing: ExistingHandle::Overwrite,
    };
    sm.apply([command_entry(1, put(with_admin.clone()))])
        .await
        .unwrap();
    // Authorised while A administers the handle…
    let basis = vec![guard::Basis::of(
        handle.clone(),
        Some(&with_admin),
        vec![crate::values::ValueIndex(1)],
    )];
    let modify = |url: &str| Command::ModifyValues {
        handle: handle.clone(),
        values: vec![HandleValue::new(1, "URL", url)],
    };
    let guarded = |url: &str| Command::Guarded {
        basis: basis.clone(),
        command: Box::new(modify(url)),
    };
    // …then, before the write applies, A is replaced as administrator.
    let replaced = vec![HandleValue::new(1, "URL", "https://a.example/"), admin("B")];
    let responses = sm
        .apply([
            command_entry(2, put(replaced)),
            command_entry(3, guarded("https://stale.example/")),
        ])
        .await
        .unwrap();
    assert_eq!(responses[1], vec![Err(Refusal::AuthorityChanged)]);
    assert_eq!(url_of(&store, "10.1/a").unwrap(), b"https://a.example/");

    // Once the basis holds again, the same write applies.
    let responses = sm
        .apply([
            command_entry(4, put(with_admin)),
            command_entry(5, guarded("https://fresh.example/")),
        ])
        .await
        .unwrap();
    assert_eq!(responses[1], vec![Ok(Applied::Done)]);
    assert_eq!(url_of(&store, "10.1/a").unwrap(), b"https://fresh.example/");
}

#[tokio::test]
async fn log_entries_and_vote_survive_a_reopen() {
    let (dir, _store, mut log, _sm) = open_temp();
    let entries: Vec<Entry<HandleSet>> = (1..=3)
        .map(|i| command_entry(i, create(&format!("10.1/{i}"), "https://x.example/")))
        .collect();
    log.blocking_append(entries.clone()).await.unwrap();
    log.save_vote(&Vote::new(7, 2)).await.unwrap();
    log.save_committed(Some(log_id(1, 1, 2))).await.unwrap();
    log.purge(log_id(1, 1, 1)).await.unwrap();
    drop(log);

    let mut log = LogStore::open(dir.path()).unwrap();
    assert_eq!(log.read_vote().await.unwrap(), Some(Vote::new(7, 2)));
    assert_eq!(
        log.try_get_log_entries(0..).await.unwrap(),
        entries[1..].to_vec()
    );
    let state = log.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, Some(log_id(1, 1, 1)));
    assert_eq!(state.last_log_id, Some(log_id(1, 1, 3)));
}

#[tokio::test]
async fn the_committed_position_is_written_with_the_next_append() {
    let (dir, _store, mut log, _sm) = open_temp();
    let entries: Vec<Entry<HandleSet>> = (1..=2)
        .map(|i| command_entry(i, create(&format!("10.1/{i}"), "https://x.example/")))
        .collect();
    log.blocking_append(entries[..1].to_vec()).await.unwrap();
    log.save_committed(Some(log_id(1, 1, 1))).await.unwrap();
    assert_eq!(log.read_committed().await.unwrap(), Some(log_id(1, 1, 1)));
    log.blocking_append(entries[1..].to_vec()).await.unwrap();
    drop(log);

    let mut log = LogStore::open(dir.path()).unwrap();
    assert_eq!(log.read_committed().await.unwrap(), Some(log_id(1, 1, 1)));
}

#[tokio::test]
async fn reads_kept_in_memory_agree_with_the_file_after_truncation_and_purge() {
    let (dir, _store, mut log, _sm) = open_temp();
    let entry = |i: u64, url: &str| command_entry(i, create(&format!("10.1/{i}"), url));
    let first: Vec<Entry<HandleSet>> = (1..=6).map(|i| entry(i, "https://a.example/")).collect();
    log.blocking_append(first).await.unwrap();
    log.truncate(log_id(1, 1, 5)).await.unwrap();
    log.purge(log_id(1, 1, 2)).await.unwrap();
    let again = vec![
        entry(5, "https://b.example/"),
        entry(6, "https://b.example/"),
    ];
    log.blocking_append(again.clone()).await.unwrap();
    let ranges = [3..7, 3..5, 4..6, 6..7, 0..9];
    let mut remembered = Vec::new();
    for range in ranges.clone() {
        remembered.push(log.try_get_log_entries(range).await.unwrap());
    }
    drop(log);

    let mut file = LogStore::open(dir.path()).unwrap();
    for (range, remembered) in ranges.into_iter().zip(remembered) {
        let read = file.try_get_log_entries(range.clone()).await.unwrap();
        assert_eq!(remembered, read, "entries {range:?}");
    }
    let expected = [
        vec![
            entry(3, "https://a.example/"),
            entry(4, "https://a.example/"),
        ],
        again,
    ];
    assert_eq!(
        file.try_get_log_entries(0..).await.unwrap(),
        expected.concat()
    );
}

#[tokio::test]
async fn a_request_proposed_twice_is_applied_once_and_answers_alike() {
    let (_dir, store, _log, mut sm) = open_temp();
    let first = command_entry(1, create("10.1/once", "https://first.example/"));
    let mut again = command_entry(3, create("10.1/once", "https://again.example/"));
    set_request_id(&mut again, 1);
    let other = command_entry(2, create("10.1/once", "https://other.example/"));
    let responses = sm.apply([first, other, again]).await.unwrap();
    let refused = vec![Err(Refusal::HandleExists)];
    let created = vec![Ok(Applied::Created)];
    assert_eq!(responses, vec![created.clone(), refused, created]);
    assert_eq!(
        url_of(&store, "10.1/once").unwrap(),
        b"https://first.example/"
    );
}

#[tokio::test]
async fn an_entry_of_several_requests_answers_each_in_order() {
    let (_dir, store, _log, mut sm) = open_temp();
    let request = |id: u64, command: Command| Request {
        id: RequestId(id),
        command,
    };
    let delete = Command::Delete {
        handle: Handle::parse("10.1/one").unwrap(),
    };
    let entry = Entry {
        log_id: log_id(1, 1, 1),
        payload: EntryPayload::Normal(Proposal(
            vec![
                request(10, create("10.1/one", "https://one.example/")),
                request(11, create("10.1/one", "https://two.example/")),
                request(12, create("10.1/two", "https://two.example/")),
                // The first request again, within the same entry: answered alike.
                request(10, create("10.1/one", "https://three.example/")),
                request(13, delete),
            ]
            .into(),
        )),
    };
    let responses = sm.apply([entry]).await.unwrap();
    assert_eq!(
        responses,
        vec![vec![
            Ok(Applied::Created),
            Err(Refusal::HandleExists),
            Ok(Applied::Created),
            Ok(Applied::Created),
            Ok(Applied::Done),
        ]]
    );
    assert!(url_of(&store, "10.1/one").is_none());
    assert_eq!(url_of(&store, "10.1/two").unwrap(), b"https://two.example/");
    assert_eq!(sm.applied_state().await.unwrap().0, Some(log_id(1, 1, 1)));
}

#[tokio::test]
async fn a_request_refused_for_a_changed_basis_is_carried_out_when_proposed_again() {
    let (_dir, store, _log, mut sm) = open_temp();
    let handle = Handle::parse("10.1/again").unwrap();
    let values = vec![HandleValue::new(1, "URL", "https://old.example/")];
    let stale = vec![guard::Basis::of(handle.clone(), None, Vec::new())];
    let fresh = vec![guard::Basis::of(handle.clone(), Some(&values), Vec::new())];
    let modify = |basis: Vec<guard::Basis>| Command::Guarded {
        basis,
        command: Box::new(Command::ModifyValues {
            handle: handle.clone(),
            values: vec![HandleValue::new(1, "URL", "https://new.example/")],
        }),
    };
    let mut refused = command_entry(2, modify(stale));
    let mut again = command_entry(3, modify(fresh));
    let mut once_more = command_entry(4, create("10.1/other", "u"));
    for entry in [&mut refused, &mut again, &mut once_more] {
        set_request_id(entry, 77);
    }
    let responses = sm
        .apply([
            command_entry(1, create("10.1/again", "https://old.example/")),
            refused,
            again,
            once_more,
        ])
        .await
        .unwrap();
    assert_eq!(
        responses[1..],
        [
            vec![Err(Refusal::AuthorityChanged)],
            vec![Ok(Applied::Done)],
            vec![Ok(Applied::Done)],
        ]
    );
    assert_eq!(
        url_of(&store, "10.1/again").unwrap(),
        b"https://new.example/"
    );
    assert!(url_of(&store, "10.1/other").is_none());
    let read = store.read().unwrap();
    assert_eq!(
        recall::<HandleSet>(&read, RequestId(77)).unwrap(),
        Some(Ok(Applied::Done))
    );
    assert_eq!(recall::<HandleSet>(&read, RequestId(78)).unwrap(), None);
}

#[tokio::test]
async fn results_are_forgotten_after_the_window() {
    let (_dir, store, _log, mut sm) = open_temp();
    sm.apply([command_entry(1, create("10.1/w", "u"))])
        .await
        .unwrap();
    let delete = Command::Delete {
        handle: Handle::parse("10.1/w").unwrap(),
    };
    sm.apply([command_entry(2, delete)]).await.unwrap();
    let mut late = command_entry(2 + RECENT_WINDOW, create("10.1/w", "v"));
    set_request_id(&mut late, 1);
    let responses = sm.apply([late]).await.unwrap();
    assert_eq!(responses, vec![vec![Ok(Applied::Created)]]);
    assert_eq!(url_of(&store, "10.1/w").unwrap(), b"v");
}

#[tokio::test]
async fn a_snapshot_installs_the_same_store_elsewhere() {
    let (_leader_dir, leader_store, _log, mut leader) = open_temp();
    let membership = Entry {
        log_id: log_id(1, 1, 1),
        payload: EntryPayload::Membership(Membership::new(vec![[1, 2, 3].into()], None)),
    };
    let mut entries = vec![membership];
    entries.extend((2..=40).map(|i| command_entry(i, create(&format!("10.{}/{i}", i % 3), "u"))));
    entries.push(command_entry(
        41,
        Command::HomePrefix {
            prefix: "10.9".into(),
        },
    ));
    leader.apply(entries).await.unwrap();
    let built = leader
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();

    let (follower_dir, follower_store, _log, mut follower) = open_temp();
    follower
        .apply([command_entry(1, create("10.1/stale", "gone"))])
        .await
        .unwrap();
    let current = received(leader.get_current_snapshot().await.unwrap().unwrap());
    follower
        .install_snapshot(&current.meta, current.snapshot)
        .await
        .unwrap();

    let leader_image = leader_store.read().unwrap().image();
    assert_eq!(follower_store.read().unwrap().image(), leader_image);
    let count = |kind: fn(&ImageRecord) -> bool| leader_image.iter().filter(|r| kind(r)).count();
    assert_eq!(count(|r| matches!(r, ImageRecord::Prefix(..))), 4);
    assert_eq!(
        count(|r| matches!(r, ImageRecord::Recent(..))),
        40,
        "remembered results travel too"
    );
    assert_eq!(
        follower.applied_state().await.unwrap(),
        leader.applied_state().await.unwrap()
    );

    // The installed snapshot is the follower's current one, after a restart too, and
    // no member keeps a file of it.
    drop(follower);
    let mut follower = StateMachine::open(follower_store, follower_dir.path()).unwrap();
    let kept = follower.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(kept.meta.last_log_id, built.meta.last_log_id);
    assert_eq!(kept.meta.last_membership, built.meta.last_membership);
    let files = |dir: &std::path::Path| -> Vec<String> {
        let names = std::fs::read_dir(dir).unwrap();
        let mut names: Vec<String> = names
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let stores = ["handles.redb", crate::storage::log::LOG_DIR];
    assert_eq!(files(follower_dir.path()), stores);
    assert_eq!(files(_leader_dir.path()), stores);
    assert_eq!(
        follower.applied_state().await.unwrap().0,
        Some(log_id(1, 1, 41))
    );
}

/// A state machine that applied one create, and a snapshot it built, as received.
async fn one_handle_snapshot() -> (TempDir, StateMachine, types::Snapshot<HandleSet>) {
    let (dir, _store, _log, mut leader) = open_temp();
    leader
        .apply([command_entry(1, create("10.1/a", "u"))])
        .await
        .unwrap();
    let built = leader
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    (dir, leader, received(built))
}

#[tokio::test]
async fn a_snapshot_sent_as_another_is_refused_and_changes_nothing() {
    let (_dir, _leader, built) = one_handle_snapshot().await;

    let (_dir, follower_store, _log, mut follower) = open_temp();
    let mut meta = built.meta.clone();
    meta.last_log_id = Some(log_id(9, 9, 9));
    assert!(
        follower
            .install_snapshot(&meta, built.snapshot)
            .await
            .is_err()
    );
    assert!(follower_store.read().unwrap().image().is_empty());
    assert_eq!(follower.applied_state().await.unwrap().0, None);
    assert!(follower.get_current_snapshot().await.unwrap().is_none());
}

#[tokio::test]
async fn a_stopped_state_machine_gives_up_its_snapshot_installs() {
    let (_dir, _leader, built) = one_handle_snapshot().await;

    let (_dir, follower_store, _log, mut follower) = open_temp();
    follower
        .apply([command_entry(1, create("10.1/kept", "k"))])
        .await
        .unwrap();
    let before = follower_store.read().unwrap().image();
    follower.stopping().stop();
    assert!(
        follower
            .install_snapshot(&built.meta, built.snapshot)
            .await
            .is_err()
    );
    assert_eq!(follower_store.read().unwrap().image(), before);
    assert_eq!(
        follower.applied_state().await.unwrap().0,
        Some(log_id(1, 1, 1))
    );
}

/// A large sliced store (20,000 handles, its slot index, a journal) streamed from a
/// view into snapshot data and installed elsewhere, through openraft's seams, is the same store.
#[tokio::test]
async fn a_large_sliced_store_streams_through_a_snapshot() {
    const HANDLES: u32 = 20_000;
    const SLOTS: u32 = 16;
    let (_leader_dir, leader_store, _log, mut leader) = open_temp();
    let mut batch = leader_store.write().unwrap();
    for n in 0..HANDLES {
        let handle = Handle::parse(&format!("10.{}/h{n}", n % 7)).unwrap();
        let values = vec![HandleValue::new(1, "URL", format!("https://x/{n}"))];
        batch
            .create(&handle, values, ExistingHandle::Refuse)
            .unwrap();
    }
    batch
        .make_slice(SLOTS, &(0..SLOTS).map(Slot).collect::<Vec<_>>())
        .unwrap();
    batch
        .set_slot_state(Slot(3), Some(SlotState::Exporting))
        .unwrap();
    for key in ["10.1/H1", "10.2/H2"] {
        batch.journal_change(Slot(3), key).unwrap();
    }
    batch.commit().unwrap();
    let built = received(
        leader
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .unwrap(),
    );

    let (_dir, follower_store, _log, mut follower) = open_temp();
    follower
        .apply([command_entry(1, create("10.1/stale", "gone"))])
        .await
        .unwrap();
    follower
        .install_snapshot(&built.meta, built.snapshot)
        .await
        .unwrap();

    let image = leader_store.read().unwrap().image();
    let handles = image
        .iter()
        .filter(|r| matches!(r, ImageRecord::Handle(..)));
    assert_eq!(handles.count(), HANDLES as usize);
    let read = follower_store.read().unwrap();
    assert_eq!(read.image(), image);
    let leader_read = leader_store.read().unwrap();
    let mut paged = 0;
    for slot in (0..SLOTS).map(Slot) {
        let page = read.slot_page(slot, None, HANDLES as usize).unwrap();
        assert_eq!(
            page,
            leader_read.slot_page(slot, None, HANDLES as usize).unwrap()
        );
        paged += page.len();
    }
    assert_eq!(paged, HANDLES as usize, "the index came with the snapshot");
    assert_eq!(read.journal_page(Slot(3), None, 10).unwrap().len(), 2);
    assert_eq!(
        read.slot_state(Slot(3)).unwrap(),
        Some(SlotState::Exporting)
    );
}

/// A snapshot is the store as of its view, with the meta of that view, however many
/// entries are applied before it is sent.
#[tokio::test]
async fn a_snapshot_is_the_store_as_its_view_saw_it_while_applies_go_on() {
    let (_dir, leader_store, _log, mut leader) = open_temp();
    leader
        .apply((1..=5).map(|i| command_entry(i, create(&format!("10.1/{i}"), "u"))))
        .await
        .unwrap();
    let image = leader_store.read().unwrap().image();
    let current = leader.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(current.meta.last_log_id, Some(log_id(1, 1, 5)));
    leader
        .apply((6..=9).map(|i| command_entry(i, create(&format!("10.1/{i}"), "u"))))
        .await
        .unwrap();

    let (_dir, follower_store, _log, mut follower) = open_temp();
    let current = received(current);
    follower
        .install_snapshot(&current.meta, current.snapshot)
        .await
        .unwrap();
    assert_eq!(follower_store.read().unwrap().image(), image);
    assert_eq!(
        follower.applied_state().await.unwrap().0,
        Some(log_id(1, 1, 5))
    );
    assert_ne!(leader_store.read().unwrap().image(), image);
}
