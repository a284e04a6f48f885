//! What `hdl cluster` asks of nodes as a whole (node calls over the peer port), and the
//! steps built from them that `init`, `add-secondary`, `up` and `add-set` share:
//! joining nodes to a replica set, forming a set, making the ring, creating the
//! bootstrap administrator at the set that owns each prefix handle.

use std::net::SocketAddr;
use std::time::Duration;

use crate::names::prefix_handle;
use crate::node::calls::{NodeAnswer, NodeCall, SetInfo, call_node};
use crate::placement::{ClusterAdmin, ClusterMap};
use crate::replication::{AdminClient, Node, NodeId, SetId, slot_of};
use anyhow::{Context, bail};
use tokio::time::Instant;

use super::admin_arg::Bootstrap;

/// How long the cluster map may take to record a newly formed set.
const RECORDED: Duration = Duration::from_secs(30);

/// Sends `call` to the node at `peer`; a [`NodeAnswer::Failed`] is an error.
pub(super) async fn ask(
    client: &AdminClient,
    peer: SocketAddr,
    call: &NodeCall,
) -> anyhow::Result<NodeAnswer> {
    let answer = call_node(client, peer, call)
        .await
        .with_context(|| format!("no answer from the node at {peer}"))?;
    match answer {
        NodeAnswer::Failed(reason) => bail!("the node at {peer}: {reason}"),
        answer => Ok(answer),
    }
}

pub(super) fn unexpected(peer: SocketAddr, answer: &NodeAnswer) -> anyhow::Error {
    anyhow::anyhow!("the node at {peer} answered another call: {answer:?}")
}

/// The cluster map as the node at `peer` has applied it.
pub async fn cluster_map(client: &AdminClient, peer: SocketAddr) -> anyhow::Result<ClusterMap> {
    match ask(client, peer, &NodeCall::ClusterMap).await? {
        NodeAnswer::ClusterMap(map) => Ok(map),
        other => Err(unexpected(peer, &other)),
    }
}

/// The server key (HS_PUBKEY data) of the node at `peer`.
pub async fn server_key(client: &AdminClient, peer: SocketAddr) -> anyhow::Result<Vec<u8>> {
    match ask(client, peer, &NodeCall::ServerKey).await? {
        NodeAnswer::ServerKey(key) => Ok(key),
        other => Err(unexpected(peer, &other)),
    }
}

/// The replica set of the node at `peer` and what its store holds.
pub async fn set_info(client: &AdminClient, peer: SocketAddr) -> anyhow::Result<SetInfo> {
    match ask(client, peer, &NodeCall::SetInfo).await? {
        NodeAnswer::SetInfo(info) => Ok(info),
        other => Err(unexpected(peer, &other)),
    }
}

/// Has the node at `peer` join replica set `set` (start its group); refused, naming
/// the set, for a node of another set.
pub async fn join_set(client: &AdminClient, peer: SocketAddr, set: SetId) -> anyhow::Result<()> {
    let call = NodeCall::JoinSet { set };
    let answer = ask(client, peer, &call).await.with_context(|| {
        format!(
            "cannot make the node at {peer} a member of replica set {}",
            set.0
        )
    })?;
    match answer {
        NodeAnswer::Joined { .. } => Ok(()),
        other => Err(unexpected(peer, &other)),
    }
}

/// Forms replica set `set` of `nodes` (the first forms it, the others join it as
/// voters; members of a set other than the first are learners of the metadata group,
/// reached at `map`), each only where not done yet. Whether the set was formed now.
pub async fn form_set(
    admin: &ClusterAdmin,
    set: SetId,
    map: SocketAddr,
    nodes: &[(NodeId, Node)],
) -> anyhow::Result<bool> {
    for (_, node) in nodes {
        join_set(admin.client(), node.peer, set).await?;
    }
    let formed = admin.form_set(set, map, nodes).await;
    formed.with_context(|| format!("cannot form replica set {}", set.0))
}

/// Waits (bounded) until the cluster map at `peer` records every one of `sets`, then
/// has that node make the ring of `slot_count` slots over them if the cluster has
/// none; the ring's slot count (that of the ring made before, if one was).
pub async fn make_ring(
    client: &AdminClient,
    peer: SocketAddr,
    slot_count: u32,
    sets: &[SetId],
) -> anyhow::Result<u32> {
    let deadline = Instant::now() + RECORDED;
    loop {
        let map = cluster_map(client, peer).await?;
        if sets.iter().all(|set| map.sets.contains_key(set)) {
            break;
        }
        if Instant::now() >= deadline {
            bail!("the cluster map did not record sets {sets:?} within {RECORDED:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    match ask(client, peer, &NodeCall::MakeRing { slot_count }).await? {
        NodeAnswer::Ring {
            slot_count: made, ..
        } => {
            if made != slot_count {
                println!(
                    "the cluster has a ring of {made} slots already; slot_count {slot_count} is not used"
                );
            }
            Ok(made)
        }
        other => Err(unexpected(peer, &other)),
    }
}

/// Creates the bootstrap administrator's prefix handles that do not exist yet, each
/// through a member of the set that owns its slot in the map at `peer` (through
/// `peer` itself before the ring is made).
pub async fn create_admin(
    client: &AdminClient,
    peer: SocketAddr,
    bootstrap: &Bootstrap,
) -> anyhow::Result<()> {
    let map = cluster_map(client, peer).await?;
    for prefix in &bootstrap.prefixes {
        let handle = prefix_handle(prefix).with_context(|| format!("prefix {prefix}"))?;
        let owner = map
            .owner(slot_of(handle.key(), map.slot_count()))
            .and_then(|set| map.sets.get(&set))
            .and_then(|set| set.members.values().next());
        let at = owner.map_or(peer, |member| member.node.peer);
        let call = NodeCall::Bootstrap {
            admin: bootstrap.admin.clone(),
            prefixes: vec![prefix.clone()],
        };
        let answer = ask(client, at, &call)
            .await
            .context("cannot create the bootstrap administrator")?;
        let NodeAnswer::Bootstrapped { created } = answer else {
            return Err(unexpected(at, &answer));
        };
        for handle in created {
            println!("created {handle} for the bootstrap administrator");
        }
    }
    Ok(())
}
