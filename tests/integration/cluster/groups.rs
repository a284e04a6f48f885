//! Every node is a member of two Raft groups over one peer port: its replica set
//! (handles) and the metadata group (the cluster map). Killing a member leaves both
//! electing and taking writes; a lone node makes a ring of its one set.

use serde_json::Value;

use super::{Set, create};
use hdl::codec::ResponseCode;

/// The node ids the cluster map records for replica set 1.
fn mapped_members(status: &Value) -> Vec<u64> {
    let sets = status["map"]["sets"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let first = sets.iter().find(|set| set["id"] == 1);
    let members = first.and_then(|set| set["members"].as_array().cloned());
    members
        .unwrap_or_default()
        .iter()
        .filter_map(Value::as_u64)
        .collect()
}

/// The metadata group's leader as every listed member sees it (`None` for a member
/// that knows none or did not answer).
fn metadata_leaders(status: &Value) -> Vec<Option<u64>> {
    let rows = status["metadata"].as_array().cloned().unwrap_or_default();
    rows.iter().map(|row| row["leader"].as_u64()).collect()
}

#[test]
fn both_groups_elect_and_keep_going_after_a_member_is_killed() {
    let mut set = Set::form(3);
    let formed = set.await_status(0, "both groups led and the map complete", |s| {
        let leaders = metadata_leaders(s);
        mapped_members(s) == [1, 2, 3]
            && leaders.len() == 3
            && leaders
                .iter()
                .all(|leader| leader.is_some() && *leader == leaders[0])
    });
    let epoch = formed["epoch"].as_u64().expect("an epoch");
    let map_leader = metadata_leaders(&formed)[0].expect("a metadata leader");
    let set_leader = formed["leader"].as_u64().expect("a primary");

    // Kill the metadata group's leader (by construction the set's primary too).
    let killed = set
        .members
        .iter()
        .position(|m| m.id == map_leader)
        .expect("the leader is a member");
    let killed_id = set.members[killed].id;
    set.members[killed].kill();
    let survivor = (killed + 1) % 3;

    // The replica set elects a new primary and takes writes through a survivor.
    set.await_status(survivor, "a new primary", |s| {
        s["leader"].as_u64().is_some_and(|id| id != killed_id)
    });
    assert_eq!(
        create(&set.members[survivor], "test/after-kill"),
        ResponseCode::Success
    );

    // A membership change of both groups, made through a survivor, goes through: each
    // group has a leader and a quorum.
    let peer = set.peer(survivor);
    set.cli(&["remove", "--peer", &peer, "--id", &killed_id.to_string()]);

    // The new primary recorded the set's new members in the cluster map: the
    // metadata group took a write after the kill, under a leader that is alive.
    let survivors: Vec<u64> = set
        .members
        .iter()
        .filter(|m| m.child.is_some())
        .map(|m| m.id)
        .collect();
    let after = set.await_status(survivor, "the map records the survivors", |s| {
        mapped_members(s) == survivors
            && metadata_leaders(s)
                .iter()
                .all(|leader| leader.is_some_and(|id| id != killed_id))
    });
    assert!(after["epoch"].as_u64().expect("an epoch") > epoch);
    assert_ne!(after["leader"].as_u64(), Some(killed_id));
    if set_leader == map_leader {
        assert_ne!(after["leader"].as_u64(), Some(set_leader));
    }
}

/// A lone `hdl serve` (it forms set 1 alone) makes a ring of one set: every slot is
/// its set's.
#[test]
fn a_lone_node_makes_a_ring_of_its_one_set() {
    use std::time::Instant;

    let dir = tempfile::tempdir().expect("temporary directory");
    let data = dir.path().join("data");
    let member = super::Member::start_lone(dir.path());
    let listening = member.listening;
    let deadline = Instant::now() + super::WAIT;
    loop {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_hdl"))
            .args(["cluster", "status", "--json", "--peer"])
            .arg(listening.peer.to_string())
            .arg("--secret-file")
            .arg(data.join("cluster.secret"))
            .output()
            .expect("run hdl cluster status");
        let status: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        let sets = status["sets"].as_array().cloned().unwrap_or_default();
        if status["slot_count"] == 256 && sets.len() == 1 && sets[0]["slots"] == 256 {
            assert_eq!(sets[0]["id"], 1);
            break;
        }
        assert!(Instant::now() < deadline, "no ring of one set: {status}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
