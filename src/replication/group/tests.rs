//! Two groups of different machines in each of three nodes, sharing every node's peer
//! port and links: both replicate, and both elect a new leader when the node leading
//! them goes away; a member cut off alone never raises the term over them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::net::TcpListener;

use super::*;
use crate::names::Handle;
use crate::replication::admin::{AdminAnswer, AdminRequest};
use crate::replication::network::{ClusterSecret, Dispatch, PeerLimits, TakeOverRefused, serve};
use crate::replication::{HandleCommand, HandleSet, SetId};
use crate::storage::{Applied, ExistingHandle, OpenBatch, StorageError};
use crate::values::HandleValue;

const WAIT: Duration = Duration::from_secs(10);
const SET: GroupId = GroupId::Set(SetId(1));
const COUNTER: GroupId = GroupId::Map;

/// A small machine of its own: a total kept as one document.
#[derive(Debug)]
enum Counter {}

impl Machine for Counter {
    type Command = u64;
    type Output = u64;

    const NAME: &'static str = "a counter";

    fn apply(batch: &mut OpenBatch<'_>, add: &u64) -> Result<u64, StorageError> {
        let batch = batch.batch();
        let total = batch
            .document("total")?
            .and_then(|bytes| bytes.try_into().ok())
            .map_or(0, u64::from_be_bytes)
            + add;
        batch.put_document("total", &total.to_be_bytes())?;
        Ok(total)
    }
}

fn secret() -> ClusterSecret {
    ClusterSecret::new(b"a shared cluster secret, 32 byte").unwrap()
}

/// One node in both groups, with its peer port; dropping `stop` stops the port.
struct TestNode {
    id: NodeId,
    set: Group<HandleSet>,
    counter: Group<Counter>,
    /// The counter group's store, read as the node's own reads would.
    counter_store: Arc<Store>,
    me: Node,
    stop: Option<oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

async fn start_node(id: NodeId) -> TestNode {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let peer = listener.local_addr().unwrap();
    let me = Node {
        handle: peer,
        peer,
        http: None,
    };
    let registry = Arc::new(Registry::default());
    let dispatch: Arc<dyn Dispatch> = registry.clone();
    let (stop, stopped) = oneshot::channel::<()>();
    let stopped = async move {
        let _ = stopped.await;
    };
    tokio::spawn(serve(
        listener,
        secret(),
        dispatch,
        PeerLimits::default(),
        stopped,
    ));
    let host = GroupHost {
        me: me.clone(),
        links: Links::new(id, secret()),
        registry,
        commits: None,
    };
    let settings = GroupSettings {
        id,
        bootstrap: Bootstrap::Wait,
        heartbeat_ms: 50,
        election_min_ms: 300,
        election_max_ms: 600,
        snapshot_every: 5000,
        keep: Keep::default(),
        caches: CacheSizes::default(),
    };
    let open = |name: &str| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(&path).unwrap();
        let store = Arc::new(Store::open(&path.join("store.redb")).unwrap());
        (store, path)
    };
    let (set_store, set_dir) = open("set");
    let (counter_store, counter_dir) = open("counter");
    let set = Group::start(&settings, SET, set_store, &set_dir, host.clone())
        .await
        .unwrap();
    let counter = Group::start(
        &settings,
        COUNTER,
        Arc::clone(&counter_store),
        &counter_dir,
        host,
    )
    .await
    .unwrap();
    TestNode {
        id,
        set,
        counter,
        counter_store,
        me,
        stop: Some(stop),
        _dir: dir,
    }
}

/// Forms both groups of the three nodes through node 1's peer port, as `hdl cluster`
/// does: init, add learners, make each a voter.
async fn form(nodes: &[TestNode]) {
    let admin = AdminClient::new(secret(), WAIT);
    let first = nodes[0].me.peer;
    for group in [SET, COUNTER] {
        admin.call(first, group, &AdminRequest::Init).await.unwrap();
        for node in &nodes[1..] {
            let request = AdminRequest::AddLearner {
                id: node.id,
                node: node.me.clone(),
            };
            admin.call(first, group, &request).await.unwrap();
        }
        for node in &nodes[1..] {
            let request = AdminRequest::AddVoter { id: node.id };
            let answer = admin.call(first, group, &request).await.unwrap();
            assert!(matches!(answer, AdminAnswer::Done));
        }
    }
}

/// Nodes 1 to 3, started and formed into both groups.
async fn formed_nodes() -> Vec<TestNode> {
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(start_node(id).await);
    }
    form(&nodes).await;
    nodes
}

fn create(name: &str) -> HandleCommand {
    HandleCommand::Create {
        handle: Handle::parse(name).unwrap(),
        values: vec![HandleValue::new(1, "URL", "https://example.org/")],
        existing: ExistingHandle::Refuse,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_groups_share_the_peer_port_and_both_elect_after_their_leader_goes() {
    let mut nodes = formed_nodes().await;
    // Writes through a follower are forwarded to each group's leader.
    let follower = &nodes[2];
    assert_eq!(
        follower
            .set
            .client_write(create("10.1/before"))
            .await
            .unwrap(),
        Ok(Applied::Created)
    );
    assert_eq!(follower.counter.client_write(5).await.unwrap(), 5);

    // The set's leader goes away, peer port and all: node 1, which formed both groups
    // and so most often leads both, unless an election under load moved a leadership.
    let leader = nodes[0].set.members().1.expect("the set has a leader");
    let gone_at = nodes.iter().position(|node| node.id == leader).unwrap();
    let mut gone = nodes.remove(gone_at);
    drop(gone.stop.take());
    gone.set.shutdown().await.unwrap();
    gone.counter.shutdown().await.unwrap();

    // Both groups elect among the survivors and take writes again.
    for node in &nodes {
        assert_eq!(
            node.set
                .client_write(create(&format!("10.1/after-{}", node.id)))
                .await
                .unwrap(),
            Ok(Applied::Created)
        );
    }
    assert_eq!(nodes[0].counter.client_write(2).await.unwrap(), 7);
    assert_eq!(nodes[1].counter.client_write(3).await.unwrap(), 10);
    for node in &nodes {
        let (_, set_leader) = node.set.members();
        let (_, counter_leader) = node.counter.members();
        assert!(set_leader.is_some_and(|id| id != leader), "{set_leader:?}");
        assert!(
            counter_leader.is_some_and(|id| id != leader),
            "{counter_leader:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_cut_off_from_the_leader_never_raises_the_term_while_a_quorum_hears_it() {
    let mut nodes = formed_nodes().await;
    let leader = nodes[0].set.members().1.expect("the set has a leader");
    let term = nodes[0].set.status().term;

    // Nothing reaches the cut-off member any more; it can still ask the others.
    let cut = nodes.iter_mut().find(|node| node.id != leader).unwrap();
    drop(cut.stop.take());
    // Its lease (600 ms) runs out many times over, and so does the fallback's four.
    tokio::time::sleep(Duration::from_secs(4)).await;

    for node in &nodes {
        let status = node.set.status();
        assert_eq!(status.term, term, "node {} changed the term", node.id);
    }
    let leading = nodes.iter().find(|node| node.id == leader).unwrap();
    assert_eq!(leading.set.members().1, Some(leader));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_made_at_once_share_entries_and_each_gets_its_own_output() {
    const WRITES: u64 = 300;
    let nodes = formed_nodes().await;
    let before = nodes[0].counter.status().last_log;

    // Half through the leader, half forwarded by a follower, all at once.
    let (_, leader) = nodes[0].counter.members();
    let leader = nodes.iter().find(|node| Some(node.id) == leader).unwrap();
    let follower = nodes.iter().find(|node| node.id != leader.id).unwrap();
    let mut writes = tokio::task::JoinSet::new();
    for n in 0..WRITES {
        let group = if n % 2 == 0 {
            &leader.counter
        } else {
            &follower.counter
        };
        let group = group.clone();
        writes.spawn(async move { group.client_write(1).await });
    }
    let mut totals = Vec::new();
    while let Some(written) = writes.join_next().await {
        totals.push(written.unwrap().unwrap());
    }

    // Each write saw the total just after its own addition: every output is its own.
    totals.sort_unstable();
    assert_eq!(totals, (1..=WRITES).collect::<Vec<_>>());
    let after = leader.counter.status().last_log;
    let entries = after.unwrap_or(0) - before.unwrap_or(0);
    assert!(
        entries < WRITES / 4,
        "{WRITES} writes took {entries} entries"
    );
}

/// The counter's total in `store`, as a read there sees it now.
fn total_in(store: &Store) -> Option<u64> {
    let document = store.read().unwrap().document("total").unwrap()?;
    Some(u64::from_be_bytes(document.try_into().unwrap()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_that_says_it_applied_a_write_lets_its_reads_see_it() {
    let nodes = formed_nodes().await;
    let (_, leader) = nodes[0].counter.members();
    let leader = nodes.iter().find(|node| Some(node.id) == leader).unwrap();
    let follower = nodes.iter().find(|node| node.id != leader.id).unwrap();
    let admin = AdminClient::new(secret(), WAIT);
    for _ in 0..20 {
        let total = leader.counter.client_write(1).await.unwrap();
        let written = leader.counter.status().last_log;
        // Asked until it says it applied the write, as `hdl cluster up` asks before it
        // says ready; the follower holds such an apply uncommitted for a while.
        let deadline = std::time::Instant::now() + WAIT;
        while admin
            .status(follower.me.peer, COUNTER)
            .await
            .unwrap()
            .applied
            < written
        {
            assert!(std::time::Instant::now() < deadline, "never applied");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(total_in(&follower.counter_store), Some(total));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_hands_off_to_a_caught_up_voter_under_writes_and_loses_none() {
    const WRITERS: u64 = 8;
    let nodes = formed_nodes().await;
    let (_, leader) = nodes[0].counter.members();
    let leader = nodes.iter().find(|node| Some(node.id) == leader).unwrap();
    let term = leader.counter.status().term;
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = tokio::task::JoinSet::new();
    for n in 0..WRITERS {
        // Through every node, the leader included: its own writes queue while held.
        let group = nodes[usize::try_from(n).unwrap() % nodes.len()]
            .counter
            .clone();
        let stop = Arc::clone(&stop);
        writers.spawn(async move {
            let mut written = 0u64;
            while !stop.load(Ordering::Relaxed) && written < 10_000 {
                group.client_write(1).await.unwrap();
                written += 1;
            }
            written
        });
    }
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Not the leader: nothing to hand over.
    let follower = nodes.iter().find(|node| node.id != leader.id).unwrap();
    assert_eq!(
        follower.counter.hand_off(WAIT).await.unwrap(),
        HandOff::NotLeader
    );
    let HandOff::HandedTo(successor) = leader.counter.hand_off(WAIT).await.unwrap() else {
        panic!("the leader had nothing to hand over")
    };
    assert_ne!(successor, leader.id);
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    let mut written = 0;
    while let Some(count) = writers.join_next().await {
        written += count.unwrap();
    }

    // One election, the one asked for; every acknowledged write counted once.
    for node in &nodes {
        let status = node.counter.status();
        assert_eq!(status.leader, Some(successor), "node {}", node.id);
        assert_eq!(status.term, term + 1, "node {}", node.id);
    }
    let total = nodes[0].counter.client_write(0).await.unwrap();
    assert_eq!(total, written);
    // The set's leadership stayed where it was.
    assert!(nodes.iter().all(|node| node.set.members().1.is_some()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_the_leader_a_member_follows_may_ask_it_to_take_over() {
    let nodes = formed_nodes().await;
    let (_, leader) = nodes[0].set.members();
    let leader = leader.unwrap();
    let follower = nodes.iter().find(|node| node.id != leader).unwrap();
    let other = nodes
        .iter()
        .find(|node| node.id != leader && node.id != follower.id)
        .unwrap();
    let term = follower.set.status().term;
    // Another follower asks, as if it led: refused, and nobody stands.
    let network =
        GroupNetwork::<HandleSet>::new(Links::new(other.id, secret()), SET, Arc::default());
    let asked = network
        .connection(follower.id, &follower.me)
        .take_over(None, WAIT)
        .await
        .unwrap();
    assert_eq!(
        asked,
        Err(TakeOverRefused::NotMyLeader {
            asker: other.id,
            leader: Some(leader)
        })
    );
    // The leader asks with a log id past the follower's: refused too.
    let network = GroupNetwork::<HandleSet>::new(Links::new(leader, secret()), SET, Arc::default());
    let ahead = openraft::LogId::new(openraft::CommittedLeaderId::new(term + 5, leader), 1 << 40);
    let asked = network
        .connection(follower.id, &follower.me)
        .take_over(Some(ahead), WAIT)
        .await
        .unwrap();
    assert!(
        matches!(asked, Err(TakeOverRefused::Behind { .. })),
        "{asked:?}"
    );
    assert_eq!(follower.set.status().term, term);
    assert_eq!(follower.set.members().1, Some(leader));
}

/// A machine whose disk is full: applying any command fails as redb fails then.
#[derive(Debug)]
enum FullDisk {}

impl Machine for FullDisk {
    type Command = u64;
    type Output = u64;

    const NAME: &'static str = "a machine on a full disk";

    fn apply(_batch: &mut OpenBatch<'_>, _command: &u64) -> Result<u64, StorageError> {
        let full = std::io::Error::from_raw_os_error(28);
        Err(StorageError::Backend(redb::Error::Io(full)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_only_voter_has_nobody_to_hand_off_to_though_a_learner_follows() {
    let nodes = [start_node(1).await, start_node(2).await];
    let admin = AdminClient::new(secret(), WAIT);
    let first = nodes[0].me.peer;
    admin
        .call(first, COUNTER, &AdminRequest::Init)
        .await
        .unwrap();
    let learner = AdminRequest::AddLearner {
        id: 2,
        node: nodes[1].me.clone(),
    };
    admin.call(first, COUNTER, &learner).await.unwrap();
    assert_eq!(nodes[0].counter.client_write(1).await.unwrap(), 1);
    assert_eq!(
        nodes[0].counter.hand_off(WAIT).await.unwrap(),
        HandOff::NoOtherVoter
    );
    assert_eq!(
        nodes[1].counter.hand_off(WAIT).await.unwrap(),
        HandOff::NotLeader
    );
    assert_eq!(nodes[0].counter.client_write(1).await.unwrap(), 2);
}

#[tokio::test]
async fn a_group_whose_storage_fails_says_it_failed_and_one_shut_down_does_not() {
    const HELD: Duration = Duration::from_millis(300);
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("store.redb")).unwrap());
    let host = test_host("127.0.0.1:1".parse().unwrap()).await;
    let settings = alone_settings();
    let group = Group::<FullDisk>::start(&settings, COUNTER, store, dir.path(), host)
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(HELD, group.failed()).await.is_err(),
        "a running group did not fail"
    );
    let writer = group.clone();
    let _write = tokio::spawn(async move { writer.client_write(1).await });
    let failed = tokio::time::timeout(WAIT, group.failed()).await.unwrap();
    let said = failed.to_string();
    assert!(said.contains("No space left on device"), "{said}");

    let (_dir, shut_down) = {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(&dir.path().join("store.redb")).unwrap());
        let host = test_host("127.0.0.1:1".parse().unwrap()).await;
        let group = Group::<Counter>::start(&settings, COUNTER, store, dir.path(), host)
            .await
            .unwrap();
        (dir, group)
    };
    shut_down.shutdown().await.unwrap();
    assert!(
        tokio::time::timeout(HELD, shut_down.failed())
            .await
            .is_err()
    );
}
