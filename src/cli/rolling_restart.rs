//! A rolling restart of a [`LocalSet`]: every node in turn is stopped as a planned
//! stop (SIGTERM: it hands the primary of what it leads to another member and
//! drains), started again on its data with the same arguments, and waited for until
//! it has caught up, before the next. Nodes that lead no group go first, leaders
//! last, so that leadership moves as few times as it can (once per group, by
//! hand-off). What `hdl cluster restart` asks of a running `hdl cluster up`, and
//! what `hdl bench restart` measures.
//!
//! Each step is bounded: a node has [`GRACE`] to stop before it is SIGKILLed, and the
//! start and the catching up are bounded by [`LocalSet`]'s own waits.

use std::collections::BTreeSet;

use crate::placement::FIRST_SET_GROUP;
use crate::replication::{GroupId, NodeId};
use tokio::time::Instant;

use super::cluster_up::GRACE;
use super::local_set::LocalSet;

/// Restarts every node of `set`, one at a time, leaders last; says what it does, a
/// line a step, through `say`.
pub async fn rolling_restart(
    set: &mut LocalSet,
    say: &mut impl FnMut(String),
) -> anyhow::Result<()> {
    let order = restart_order(set).await?;
    let began = Instant::now();
    for index in &order {
        restart_one(set, *index, say).await?;
    }
    let primary = set.primary_id().await?;
    say(format!(
        "restarted {} nodes in {} ms; node {primary} is the primary of {FIRST_SET_GROUP}",
        order.len(),
        began.elapsed().as_millis()
    ));
    Ok(())
}

/// The indexes of the nodes, those that lead no group first, then the leaders, each
/// in the cluster file's order.
async fn restart_order(set: &LocalSet) -> anyhow::Result<Vec<usize>> {
    let leaders = leaders(set).await?;
    let mut order: Vec<usize> = (0..set.nodes.len()).collect();
    order.sort_by_key(|index| leaders.contains(&set.nodes[*index].plan.id));
    Ok(order)
}

/// The nodes that lead a replica set or the metadata group.
async fn leaders(set: &LocalSet) -> anyhow::Result<BTreeSet<NodeId>> {
    let mut leaders = BTreeSet::from([set.leader_of(GroupId::Map).await?]);
    for (id, _) in set.sets() {
        leaders.insert(set.leader_of(GroupId::Set(id)).await?);
    }
    Ok(leaders)
}

/// Stops node `index` (SIGTERM), starts it again and waits until its set and the
/// metadata group have caught up on it.
async fn restart_one(
    set: &mut LocalSet,
    index: usize,
    say: &mut impl FnMut(String),
) -> anyhow::Result<()> {
    let (id, set_id) = (set.nodes[index].plan.id, set.nodes[index].plan.set);
    let group = GroupId::Set(crate::replication::SetId(set_id));
    let role = if set.leader_of(group).await? == id {
        "primary"
    } else {
        "secondary"
    };
    say(format!("node {id} ({role} of {group}): stopping"));
    let began = Instant::now();
    let ended = set.terminate(index, GRACE).await?;
    say(format!(
        "node {id} stopped in {} ms ({ended})",
        millis(began)
    ));
    let began = Instant::now();
    set.start(index).await?;
    let members: Vec<usize> = set
        .sets()
        .into_iter()
        .find(|(set, _)| set.0 == set_id)
        .map(|(_, indexes)| indexes)
        .unwrap_or_default();
    set.await_caught_up(group, &members).await?;
    let everyone: Vec<usize> = (0..set.nodes.len()).collect();
    set.await_caught_up(GroupId::Map, &everyone).await?;
    say(format!(
        "node {id} started and caught up in {} ms",
        millis(began)
    ));
    Ok(())
}

fn millis(since: Instant) -> u128 {
    since.elapsed().as_millis()
}
