//! The peer network over loopback TCP: authentication refuses strangers and impostors,
//! a real three-node openraft cluster replicates a write through it, and two groups of
//! different machines share each node's peer port and links.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::RPCError;
use openraft::network::{RPCOption, RaftNetwork};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, VoteRequest};
use openraft::{Config, Raft, Vote};
use tempfile::TempDir;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::frame::{self, HEADER_LEN, MAX_FRAME_LEN, MAX_HANDSHAKE_FRAME_LEN};
use super::message;
use super::stream::PeerStream;
use super::*;
use crate::names::Handle;
use crate::replication::contact::LeaderContact;
use crate::replication::proposer::Proposer;
use crate::replication::{
    GroupConfig, GroupId, HandleCommand, HandleSet, LogStore, Node, NodeId, Proposal, Request,
    RequestId, SetId, StateMachine,
};
use crate::storage::{Applied, ExistingHandle, Store};
use crate::values::{HandleValue, ValueSelection};

type TypeConfig = GroupConfig<HandleSet>;

/// The handle set's group.
const SET: GroupId = GroupId::Set(SetId(1));

const WAIT: Duration = Duration::from_secs(10);

fn secret() -> ClusterSecret {
    ClusterSecret::new(b"a shared cluster secret, 32 byte").unwrap()
}

fn wrong_secret() -> ClusterSecret {
    ClusterSecret::new(b"not the cluster secret, 32 bytes").unwrap()
}

/// One node: its Raft, store, peer address, data directory and server shutdown.
struct TestNode {
    raft: Raft<TypeConfig>,
    store: Arc<Store>,
    node: Node,
    _dir: TempDir,
    _stop: oneshot::Sender<()>,
}

fn raft_config() -> Arc<Config> {
    let config = Config {
        heartbeat_interval: 50,
        election_timeout_min: 300,
        election_timeout_max: 600,
        // Purge the log as soon as a snapshot covers it, so a new member needs the snapshot.
        max_in_snapshot_log_to_keep: 0,
        ..Config::default()
    };
    Arc::new(config.validate().unwrap())
}

/// A node's peer port, serving `registry` until the returned sender is dropped.
async fn serve_peers(
    secret: ClusterSecret,
    registry: Arc<Registry>,
) -> (SocketAddr, oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let peer = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async move {
        let _ = stopped.await;
    };
    let dispatch: Arc<dyn Dispatch> = registry;
    tokio::spawn(serve(
        listener,
        secret,
        dispatch,
        PeerLimits::default(),
        shutdown,
    ));
    (peer, stop)
}

async fn start_node(id: NodeId, secret: ClusterSecret) -> TestNode {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("handles.redb")).unwrap());
    let sm = StateMachine::<HandleSet>::open(Arc::clone(&store), dir.path()).unwrap();
    let log = LogStore::<HandleSet>::open_beside(dir.path(), &sm, id).unwrap();
    let log_reader = log.clone();
    let held = sm.held_commits();
    let network = GroupNetwork::new(Links::new(id, secret.clone()), SET, log.sync());
    let raft = Raft::new(id, raft_config(), network, log, sm)
        .await
        .unwrap();
    let registry = Arc::new(Registry::default());
    let (peer, stop) = serve_peers(secret, Arc::clone(&registry)).await;
    let node = Node {
        handle: peer,
        peer,
        http: None,
    };
    registry.add_group(
        SET,
        Arc::new(GroupEndpoint::new(
            raft.clone(),
            Proposer::start(raft.clone()),
            Arc::new(LeaderContact::new(Duration::from_millis(600))),
            log_reader,
            held,
            node.clone(),
        )),
    );
    TestNode {
        raft,
        store,
        node,
        _dir: dir,
        _stop: stop,
    }
}

/// The handle set's network of a node `id` with `secret`.
fn set_network(id: NodeId, secret: ClusterSecret) -> GroupNetwork<HandleSet> {
    GroupNetwork::new(Links::new(id, secret), SET, Arc::default())
}

fn vote_request(term: u64) -> VoteRequest<NodeId> {
    VoteRequest::new(Vote::new(term, 9), None)
}

fn vote_term(raft: &Raft<TypeConfig>) -> u64 {
    raft.metrics().borrow().vote.leader_id().term
}

#[tokio::test]
async fn a_wrong_secret_is_refused_and_no_rpc_is_served() {
    let node = start_node(1, secret()).await;
    let option = RPCOption::new(WAIT);

    let stranger = set_network(9, wrong_secret());
    let refused = stranger
        .connection(1, &node.node)
        .vote(vote_request(5), option.clone())
        .await;
    assert!(
        matches!(refused, Err(RPCError::Unreachable(_))),
        "{refused:?}"
    );

    // A raw client that sends a bad proof and a Vote right behind it: the server
    // closes the connection without reading the Vote.
    let mut raw = PeerStream::new(
        tokio::net::TcpStream::connect(node.node.peer)
            .await
            .unwrap(),
    )
    .unwrap();
    let _challenge: [u8; 32] = raw.expect(MAX_HANDSHAKE_FRAME_LEN).await.unwrap();
    raw.send(&(9_u64, [0_u8; 32], [0_u8; 32]), MAX_HANDSHAKE_FRAME_LEN)
        .await
        .unwrap();
    let call = GroupCall::<HandleSet>::Vote(vote_request(6));
    let request = message::encode(&Destination::Group(SET), &call).unwrap();
    raw.send(&request, MAX_FRAME_LEN).await.unwrap();
    let answer: Result<Option<Vec<u8>>, _> = raw.recv(MAX_FRAME_LEN).await;
    assert!(
        matches!(answer, Ok(None) | Err(PeerError::Io(_))),
        "{answer:?}"
    );
    assert_eq!(vote_term(&node.raft), 0, "a refused peer changed the vote");

    // The same Vote from a peer with the secret is served.
    let member = set_network(9, secret());
    let served = member
        .connection(1, &node.node)
        .vote(vote_request(5), option)
        .await;
    assert!(served.unwrap().vote_granted);
    assert_eq!(vote_term(&node.raft), 5);
}

#[tokio::test]
async fn a_client_sends_nothing_to_a_server_without_the_secret() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let peer: SocketAddr = listener.local_addr().unwrap();
    let impostor = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut stream = PeerStream::new(stream).unwrap();
        stream
            .send(&[7_u8; 32], MAX_HANDSHAKE_FRAME_LEN)
            .await
            .unwrap();
        let _hello: (u64, [u8; 32], [u8; 32]) =
            stream.expect(MAX_HANDSHAKE_FRAME_LEN).await.unwrap();
        stream
            .send(&[0_u8; 32], MAX_HANDSHAKE_FRAME_LEN)
            .await
            .unwrap();
        stream.recv::<Vec<u8>>(MAX_FRAME_LEN).await
    });
    let node = Node {
        handle: peer,
        peer,
        http: None,
    };
    let network = set_network(1, secret());
    let refused = network
        .connection(2, &node)
        .vote(vote_request(5), RPCOption::new(WAIT))
        .await;
    assert!(
        matches!(refused, Err(RPCError::Unreachable(_))),
        "{refused:?}"
    );
    let received = tokio::time::timeout(WAIT, impostor).await.unwrap().unwrap();
    assert!(
        matches!(received, Ok(None)),
        "the impostor got {received:?}"
    );
}

#[test]
fn a_short_secret_is_refused() {
    assert!(matches!(
        ClusterSecret::new(b"short"),
        Err(SecretError::TooShort { len: 5 })
    ));
}

#[test]
fn peer_messages_round_trip_in_frames() {
    let call = GroupCall::<HandleSet>::Vote(vote_request(3));
    let request = message::encode(&Destination::Group(SET), &call).unwrap();
    let bytes = frame::encode(&request, MAX_FRAME_LEN).unwrap();
    let body: Vec<u8> = frame::decode(&bytes[HEADER_LEN..]).unwrap();
    let (destination, rest) = message::split_head::<Destination>(&body).unwrap();
    assert_eq!(destination, Destination::Group(SET));
    let back: GroupCall<HandleSet> = frame::decode(rest).unwrap();
    assert!(matches!(back, GroupCall::Vote(vote) if vote == vote_request(3)));
    let not_leader = GroupAnswer::<HandleSet>::Forward(Err(ForwardError::NotLeader {
        leader_id: Some(2),
        leader_node: Some(Node::default()),
    }));
    let bytes = frame::encode(&not_leader, MAX_FRAME_LEN).unwrap();
    let back: GroupAnswer<HandleSet> = frame::decode(&bytes[HEADER_LEN..]).unwrap();
    assert!(matches!(
        back,
        GroupAnswer::Forward(Err(ForwardError::NotLeader {
            leader_id: Some(2),
            ..
        }))
    ));
}

fn create(text: &str, url: &str) -> Request<HandleCommand> {
    Request {
        id: RequestId(1),
        command: HandleCommand::Create {
            handle: Handle::parse(text).unwrap(),
            values: vec![HandleValue::new(1, "URL", url)],
            existing: ExistingHandle::Refuse,
        },
    }
}

fn url_of(store: &Store, text: &str) -> Option<Vec<u8>> {
    let read = store.read().unwrap();
    let record = read.get(&Handle::parse(text).unwrap(), &ValueSelection::all());
    record.unwrap().map(|record| record.values[0].data.clone())
}

async fn start_cluster() -> (Vec<TestNode>, NodeId) {
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(start_node(id, secret()).await);
    }
    let members = (1..=3).zip(nodes.iter().map(|node| node.node.clone()));
    nodes[0]
        .raft
        .initialize(members.collect::<std::collections::BTreeMap<_, _>>())
        .await
        .unwrap();
    let metrics = nodes[0]
        .raft
        .wait(Some(WAIT))
        .metrics(|m| m.current_leader.is_some(), "a leader is elected")
        .await
        .unwrap();
    let leader = metrics.current_leader.unwrap();
    (nodes, leader)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_three_node_cluster_replicates_a_write_over_tcp() {
    let (nodes, leader) = start_cluster().await;
    let leader_raft = &nodes[usize::try_from(leader - 1).unwrap()].raft;
    let written = leader_raft
        .client_write(Proposal(
            vec![create("10.1/net", "https://net.example/")].into(),
        ))
        .await
        .unwrap();
    assert_eq!(written.data, vec![Ok(Applied::Created)]);
    let index = Some(written.log_id.index);
    for node in &nodes {
        node.raft
            .wait(Some(WAIT))
            .applied_index_at_least(index, "write applied")
            .await
            .unwrap();
        assert_eq!(
            url_of(&node.store, "10.1/net").unwrap(),
            b"https://net.example/"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_forwarded_write_is_proposed_by_the_leader_and_refused_by_a_follower() {
    let (nodes, leader) = start_cluster().await;
    let network = set_network(9, secret());
    let leader_node = &nodes[usize::try_from(leader - 1).unwrap()];
    let follower = nodes
        .iter()
        .find(|node| node.node != leader_node.node)
        .unwrap();
    // A follower may learn of the leader a heartbeat later than the leader itself.
    follower
        .raft
        .wait(Some(WAIT))
        .current_leader(leader, "follower knows the leader")
        .await
        .unwrap();

    let to_follower = network.connection(0, &follower.node);
    let refused = to_follower
        .forward(create("10.1/fwd", "https://fwd.example/"), WAIT)
        .await
        .unwrap();
    assert!(
        matches!(refused, Err(ForwardError::NotLeader { leader_id: Some(id), .. }) if id == leader),
        "{refused:?}"
    );

    let to_leader = network.connection(leader, &leader_node.node);
    let applied = to_leader
        .forward(create("10.1/fwd", "https://fwd.example/"), WAIT)
        .await
        .unwrap();
    assert_eq!(applied.unwrap(), Ok(Applied::Created));
    assert_eq!(
        url_of(&leader_node.store, "10.1/fwd").unwrap(),
        b"https://fwd.example/"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_learner_behind_a_purged_log_catches_up_from_a_snapshot_over_tcp() {
    let (nodes, leader) = start_cluster().await;
    let leader_raft = &nodes[usize::try_from(leader - 1).unwrap()].raft;
    let written = leader_raft
        .client_write(Proposal(
            vec![create("10.1/snap", "https://snap.example/")].into(),
        ))
        .await
        .unwrap();
    let index = written.log_id.index;
    leader_raft.trigger().snapshot().await.unwrap();
    leader_raft
        .wait(Some(WAIT))
        .metrics(
            |m| m.purged.is_some_and(|purged| purged.index >= index),
            "log purged up to the write",
        )
        .await
        .unwrap();

    let learner = start_node(4, secret()).await;
    leader_raft
        .add_learner(4, learner.node.clone(), true)
        .await
        .unwrap();
    learner
        .raft
        .wait(Some(WAIT))
        .applied_index_at_least(Some(index), "learner caught up")
        .await
        .unwrap();
    assert!(learner.raft.metrics().borrow().snapshot.is_some());
    assert_eq!(
        url_of(&learner.store, "10.1/snap").unwrap(),
        b"https://snap.example/"
    );
}

/// Octets of a call a [`SlowMember`] takes a millisecond for.
const OCTETS_A_MS: usize = 4 << 10;

/// The time a call to a [`SlowMember`] is allowed: four times openraft's 50 ms, with
/// the member four times slower, so that the leader's own work on a call (which
/// takes longer in an unoptimised build) stays small beside it.
const ALLOWED: Duration = Duration::from_millis(200);

/// A member that takes a millisecond for every [`OCTETS_A_MS`] of an AppendEntries
/// before it answers success: a call of a whole MiB takes 256 ms, longer than the
/// [`ALLOWED`] 200 ms.
struct SlowMember;

impl Endpoint for SlowMember {
    fn answer<'a>(&'a self, _from: NodeId, body: &'a [u8]) -> EndpointAnswer<'a> {
        Box::pin(async move {
            let pause = u64::try_from(body.len() / OCTETS_A_MS).unwrap();
            tokio::time::sleep(Duration::from_millis(pause)).await;
            let answer: GroupAnswer<HandleSet> =
                GroupAnswer::AppendEntries(Ok(AppendEntriesResponse::Success));
            postcard::to_stdvec(&answer).map_err(|error| error.to_string())
        })
    }

    fn admin<'a>(&'a self, _body: &'a [u8]) -> EndpointAnswer<'a> {
        Box::pin(async { Err("not a member's admin port".to_owned()) })
    }
}

/// `count` entries after `prev`, each a create of about 8 KiB.
fn entries_after(prev: u64, count: u64) -> Vec<openraft::Entry<TypeConfig>> {
    (prev + 1..=prev + count)
        .map(|index| openraft::Entry {
            log_id: openraft::testing::log_id(1, 1, index),
            payload: openraft::EntryPayload::Normal(Proposal(Arc::from([Request {
                id: RequestId(index),
                command: HandleCommand::Create {
                    handle: Handle::parse(&format!("10.1/{index}")).unwrap(),
                    values: vec![HandleValue::new(1, "URL", "u".repeat(8 << 10))],
                    existing: ExistingHandle::Refuse,
                },
            }]))),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_too_slow_for_a_mib_in_the_time_allowed_gets_the_log_in_parts_that_fit() {
    const ENTRIES: u64 = 384;
    const AT_ONCE: u64 = 128;
    let registry = Arc::new(Registry::default());
    registry.add_group(SET, Arc::new(SlowMember));
    let (peer, _stop) = serve_peers(secret(), registry).await;
    let member = Node {
        handle: peer,
        peer,
        http: None,
    };
    let network = GroupNetwork::<HandleSet>::new(
        Links::new(1, secret()),
        SET,
        Arc::new(crate::replication::log_sync::LogSync::default()),
    );
    let mut connection = network.connection(2, &member);

    // As openraft's replication does: up to AT_ONCE entries (a MiB) after the last
    // one the member holds, the call dropped after the time allowed.
    let mut matched = 0;
    let mut calls = 0;
    while matched < ENTRIES && calls < 100 {
        calls += 1;
        let rpc: AppendEntriesRequest<TypeConfig> = AppendEntriesRequest {
            vote: Vote::new_committed(1, 1),
            prev_log_id: (matched > 0).then(|| openraft::testing::log_id(1, 1, matched)),
            leader_commit: None,
            entries: entries_after(matched, AT_ONCE.min(ENTRIES - matched)),
        };
        let sent = rpc.entries.last().unwrap().log_id.index;
        let call = connection.append_entries(rpc, RPCOption::new(ALLOWED));
        match tokio::time::timeout(ALLOWED, call).await {
            Ok(Ok(AppendEntriesResponse::Success)) => matched = sent,
            Ok(Ok(AppendEntriesResponse::PartialSuccess(Some(last)))) => {
                assert!(last.index > matched && last.index < sent, "{last}");
                matched = last.index;
            }
            Ok(Ok(other)) => panic!("{other:?}"),
            Ok(Err(_)) | Err(_) => {}
        }
    }
    assert_eq!(matched, ENTRIES, "after {calls} calls");
    // Two calls too slow (a MiB, then half a MiB), then a quarter of a MiB or less
    // each time: 3 MiB in about 14 calls.
    assert!(calls <= 30, "{calls} calls");
}
