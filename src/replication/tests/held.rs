//! Applies held together (module `held`): a member commits the entries other members
//! proposed together, within a bounded wait, and its own at once with all before them.

use std::time::{Duration, Instant};

use super::*;
use crate::replication::held::{AT_MOST, WAIT};

/// The longest a held apply is given to reach the store (far beyond `WAIT`).
const PATIENCE: Duration = Duration::from_secs(5);

/// A state machine applying for member 2, beside `command_entry`'s leader, member 1.
fn member_two() -> (TempDir, Arc<Store>, StateMachine) {
    let (dir, store, _log, sm) = open_temp();
    (dir, store, sm.applying_for(2))
}

/// Command entry `index` proposed by member 2 in term 2.
fn own_entry(index: u64, command: Command) -> Entry<HandleSet> {
    Entry {
        log_id: log_id(2, 2, index),
        ..command_entry(index, command)
    }
}

/// Waits, within `PATIENCE`, until `store` holds `handle`; whether it did.
async fn reaches_the_store(store: &Store, handle: &str) -> bool {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        if url_of(store, handle).is_some() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    false
}

#[tokio::test]
async fn another_members_entry_is_held_then_committed_within_the_wait() {
    let (_dir, store, mut sm) = member_two();
    let started = Instant::now();
    let responses = sm
        .apply([command_entry(1, create("10.1/a", "u"))])
        .await
        .unwrap();
    let seen_at_once = url_of(&store, "10.1/a").is_some();
    assert_eq!(responses, vec![vec![Ok(Applied::Created)]]);
    assert_eq!(sm.applied_state().await.unwrap().0, Some(log_id(1, 1, 1)));
    if started.elapsed() < WAIT {
        assert!(!seen_at_once, "an entry another member proposed is held");
    }
    assert!(reaches_the_store(&store, "10.1/a").await);
}

#[tokio::test]
async fn an_own_entry_commits_every_entry_held_before_it_at_once() {
    let (_dir, store, mut sm) = member_two();
    sm.apply([command_entry(1, create("10.1/a", "u"))])
        .await
        .unwrap();
    sm.apply([own_entry(2, create("10.1/b", "u"))])
        .await
        .unwrap();
    assert!(url_of(&store, "10.1/a").is_some());
    assert!(url_of(&store, "10.1/b").is_some());
}

#[tokio::test]
async fn a_full_transaction_commits_at_once() {
    let (_dir, store, mut sm) = member_two();
    let count = AT_MOST as u64;
    let entries = (1..=count).map(|i| command_entry(i, create(&format!("10.1/{i}"), "u")));
    sm.apply(entries).await.unwrap();
    assert!(url_of(&store, &format!("10.1/{count}")).is_some());
}

#[tokio::test]
async fn a_member_without_a_name_commits_every_apply_at_once() {
    let (_dir, store, _log, mut sm) = open_temp();
    sm.apply([command_entry(1, create("10.1/a", "u"))])
        .await
        .unwrap();
    assert!(url_of(&store, "10.1/a").is_some());
}

#[tokio::test]
async fn what_is_held_when_the_state_machine_goes_is_applied_again_from_the_log() {
    let (dir, store, mut sm) = member_two();
    let started = Instant::now();
    sm.apply([command_entry(1, create("10.1/a", "u"))])
        .await
        .unwrap();
    drop(sm);
    let reopened = StateMachine::open(Arc::clone(&store), dir.path()).unwrap();
    let mut reopened = reopened.applying_for(2);
    let applied = reopened.applied_state().await.unwrap().0;
    if started.elapsed() < WAIT {
        assert_eq!(applied, None, "the held apply was never committed");
    }
    if applied.is_none() {
        reopened
            .apply([command_entry(1, create("10.1/a", "u"))])
            .await
            .unwrap();
    }
    reopened
        .apply([own_entry(2, create("10.1/b", "u"))])
        .await
        .unwrap();
    assert!(url_of(&store, "10.1/a").is_some());
    assert_eq!(
        reopened.applied_state().await.unwrap().0,
        Some(log_id(2, 2, 2))
    );
}

#[tokio::test]
async fn a_fresh_read_and_a_snapshot_see_every_apply_held() {
    let (_dir, store, mut sm) = member_two();
    sm.apply([command_entry(1, create("10.1/a", "u"))])
        .await
        .unwrap();
    sm.held_commits().commit_now().await.unwrap();
    assert!(url_of(&store, "10.1/a").is_some());
    sm.apply([command_entry(2, create("10.1/b", "u"))])
        .await
        .unwrap();
    let snapshot = sm
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    assert_eq!(snapshot.meta.last_log_id, Some(log_id(1, 1, 2)));
    assert!(url_of(&store, "10.1/b").is_some());
}
