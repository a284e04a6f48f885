//! Membership changes made at once, through different members: each is applied by the
//! primary to its own current membership, so none undoes another and no member is
//! dropped.

use std::collections::BTreeSet;
use std::process::Output;
use std::thread;

use serde_json::Value;

use super::Set;

/// Runs every one of `changes` at the same time; each must succeed.
fn at_once(changes: Vec<Box<dyn FnOnce() -> Output + Send + '_>>) {
    let outputs: Vec<Output> = thread::scope(|scope| {
        let running: Vec<_> = changes.into_iter().map(|c| scope.spawn(c)).collect();
        running
            .into_iter()
            .map(|change| change.join().expect("a change"))
            .collect()
    });
    for output in outputs {
        assert!(
            output.status.success(),
            "a membership change made at once with others: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The ids of the members and of the voters in a status.
fn ids(status: &Value) -> (BTreeSet<u64>, BTreeSet<u64>) {
    let members = status["members"].as_array().cloned().unwrap_or_default();
    let all = members.iter().filter_map(|m| m["id"].as_u64()).collect();
    let voters = members.iter().filter(|m| m["voter"] == true);
    (all, voters.filter_map(|m| m["id"].as_u64()).collect())
}

#[test]
fn membership_changes_made_at_once_drop_no_member() {
    let mut set = Set::form(2);
    for id in 3..=6 {
        let member = set.spawn(id, "127.0.0.1:0", "127.0.0.1:0");
        set.members.push(member);
    }
    // Three new voters at once, through the primary and through a secondary.
    let set_ref = &set;
    at_once(vec![
        Box::new(move || set_ref.add_voter(0, &set_ref.members[2])),
        Box::new(move || set_ref.add_voter(1, &set_ref.members[3])),
        Box::new(move || set_ref.add_voter(1, &set_ref.members[4])),
    ]);
    let five: BTreeSet<u64> = (1..=5).collect();
    let status = set.await_status(0, "five voters", |s| ids(s) == (five.clone(), five.clone()));
    assert!(
        status["members"]
            .as_array()
            .is_some_and(|m| m.iter().all(|m| m["lag"] == 0)),
        "{status}"
    );

    // One removed while another is added.
    let first = set.peer(0);
    at_once(vec![
        Box::new(|| set.try_cli(&["remove", "--peer", &first, "--id", "4"])),
        Box::new(|| set.add_voter(1, &set.members[5])),
    ]);
    let after: BTreeSet<u64> = [1, 2, 3, 5, 6].into();
    set.await_status(0, "node 4 out, node 6 a voter", |s| {
        ids(s) == (after.clone(), after.clone())
    });
}
