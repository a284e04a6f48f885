//! `hdl cluster rebalance` and `hdl cluster remove-set`: moving slots between replica
//! sets online, and following the moves until they end.
//!
//! The moves themselves are planned and carried out in the cluster (the metadata
//! group's leader runs them); this module asks for them with node calls and shows
//! their progress from the cluster map: a bar on a terminal, a line every few seconds
//! otherwise.

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use hdl::node::calls::{NodeAnswer, NodeCall, call_node};
use hdl::placement::ClusterMap;
use hdl::replication::admin::AdminRequest;
use hdl::replication::network::read_secret_file;
use hdl::replication::{AdminClient, GroupId, SetId};

/// How long one node call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// How often the map is read while moves run.
const POLL: Duration = Duration::from_millis(500);

/// How often a progress line is printed when the output is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(5);

/// How long the moves may make no progress at all before the command gives up
/// waiting (the cluster keeps trying).
const STALL_LIMIT: Duration = Duration::from_secs(180);

/// Where to send the calls.
#[derive(Debug, Args)]
pub struct ReshardTarget {
    /// Peer address of any node of the cluster.
    #[arg(long)]
    peer: SocketAddr,
    /// The cluster secret file.
    #[arg(long)]
    secret_file: PathBuf,
}

/// Arguments of `hdl cluster rebalance`.
#[derive(Debug, Args)]
pub struct RebalanceArgs {
    #[command(flatten)]
    target: ReshardTarget,
    /// Wait until every move has ended, showing progress.
    #[arg(long)]
    wait: bool,
}

/// Arguments of `hdl cluster remove-set`.
#[derive(Debug, Args)]
pub struct RemoveSetArgs {
    #[command(flatten)]
    target: ReshardTarget,
    /// The replica set to empty and take out.
    #[arg(long)]
    id: u32,
}

fn client(target: &ReshardTarget) -> anyhow::Result<AdminClient> {
    let secret = read_secret_file(&target.secret_file)?;
    Ok(AdminClient::new(secret, CALL_TIMEOUT))
}

/// Plans the moves that balance the ring and, with `--wait`, follows them to the end.
pub async fn rebalance(args: &RebalanceArgs) -> anyhow::Result<()> {
    let client = client(&args.target)?;
    let planned = plan(&client, args.target.peer, Vec::new()).await?;
    println!("planned {planned} slot moves");
    if args.wait {
        follow_moves(&client, args.target.peer).await?;
    }
    Ok(())
}

/// Moves every slot of a set to the others, waits, then takes the set out of the map
/// and its members out of the metadata group.
pub async fn remove_set(args: &RemoveSetArgs) -> anyhow::Result<()> {
    let client = client(&args.target)?;
    let peer = args.target.peer;
    let set = SetId(args.id);
    let map = cluster_map(&client, peer).await?;
    let record = map
        .sets
        .get(&set)
        .with_context(|| format!("the cluster has no replica set {}", set.0))?
        .clone();
    anyhow::ensure!(
        map.sets.len() > 1,
        "replica set {} is the cluster's only set",
        set.0
    );
    let planned = plan(&client, peer, vec![set]).await?;
    println!("planned {planned} slot moves out of replica set {}", set.0);
    follow_moves(&client, peer).await?;
    match call_node(&client, peer, &NodeCall::RemoveSet { set }).await? {
        NodeAnswer::MapChanged { epoch } => {
            println!("replica set {} left the cluster map (epoch {epoch})", set.0);
        }
        NodeAnswer::Failed(reason) => {
            anyhow::bail!("cannot remove replica set {}: {reason}", set.0)
        }
        _ => anyhow::bail!("the node answered another call"),
    }
    for id in record.members.keys() {
        let remove = AdminRequest::Remove { id: *id };
        client
            .call(peer, GroupId::Map, &remove)
            .await
            .with_context(|| format!("cannot take node {id} out of the metadata group"))?;
    }
    println!(
        "the nodes of replica set {} hold no handles any more and may be stopped",
        set.0
    );
    Ok(())
}

async fn plan(
    client: &AdminClient,
    peer: SocketAddr,
    leaving: Vec<SetId>,
) -> anyhow::Result<usize> {
    match call_node(client, peer, &NodeCall::Rebalance { leaving }).await? {
        NodeAnswer::Planned { moves } => Ok(moves),
        NodeAnswer::Failed(reason) => anyhow::bail!("cannot plan the slot moves: {reason}"),
        _ => anyhow::bail!("the node answered another call"),
    }
}

/// The cluster map as the node at `peer` has applied it.
pub async fn cluster_map(client: &AdminClient, peer: SocketAddr) -> anyhow::Result<ClusterMap> {
    match call_node(client, peer, &NodeCall::ClusterMap).await? {
        NodeAnswer::ClusterMap(map) => Ok(map),
        NodeAnswer::Failed(reason) => anyhow::bail!("cannot read the cluster map: {reason}"),
        _ => anyhow::bail!("the node answered another call"),
    }
}

/// Where the moves stand, against where they stood when the command began.
struct Progress {
    started: Instant,
    base: (u64, u64, u64),
    total: u64,
}

impl Progress {
    fn new(map: &ClusterMap) -> Progress {
        let moved = map.moved;
        Progress {
            started: Instant::now(),
            base: (moved.slots, moved.handles, moved.bytes),
            total: u64::try_from(map.migrations.len()).unwrap_or(u64::MAX),
        }
    }

    /// (slots done, handles moved, bytes moved) since the start, moves under way
    /// counted for what they copied so far.
    fn done(&self, map: &ClusterMap) -> (u64, u64, u64) {
        let moving_handles: u64 = map.migrations.values().map(|m| m.handles).sum();
        let moving_bytes: u64 = map.migrations.values().map(|m| m.bytes).sum();
        let moved = map.moved;
        (
            moved.slots.saturating_sub(self.base.0),
            (moved.handles + moving_handles).saturating_sub(self.base.1),
            (moved.bytes + moving_bytes).saturating_sub(self.base.2),
        )
    }

    fn line(&self, map: &ClusterMap) -> String {
        let (slots, handles, bytes) = self.done(map);
        let total = self
            .total
            .max(slots + u64::try_from(map.migrations.len()).unwrap_or(0));
        let seconds = self.started.elapsed().as_secs_f64().max(0.001);
        let megabytes = bytes as f64 / 1e6;
        format!(
            "slots {slots}/{total}, {handles} handles, {megabytes:.1} MB moved, {:.0} handles/s, {:.2} MB/s, longest write pause {} ms",
            handles as f64 / seconds,
            megabytes / seconds,
            map.moved.longest_pause_micros / 1000,
        )
    }

    fn bar(&self, map: &ClusterMap) -> String {
        const WIDTH: u64 = 30;
        let (slots, _, _) = self.done(map);
        let total = self.total.max(1);
        let filled = usize::try_from((slots * WIDTH / total).min(WIDTH)).unwrap_or(0);
        let empty = usize::try_from(WIDTH).unwrap_or(0) - filled;
        format!(
            "[{}{}] {}",
            "#".repeat(filled),
            " ".repeat(empty),
            self.line(map)
        )
    }
}

/// Shows the moves' progress until none is left; gives up waiting (not the moves)
/// after [`STALL_LIMIT`] without progress.
pub async fn follow_moves(client: &AdminClient, peer: SocketAddr) -> anyhow::Result<()> {
    let mut map = cluster_map(client, peer).await?;
    let progress = Progress::new(&map);
    let terminal = std::io::stderr().is_terminal();
    let (mut last_change, mut last_line) = (Instant::now(), Instant::now());
    let mut seen = progress.done(&map);
    while !map.migrations.is_empty() {
        if terminal {
            eprint!("\r{}", progress.bar(&map));
            let _ = std::io::stderr().flush();
        } else if last_line.elapsed() >= LINE_EVERY {
            eprintln!("{}", progress.line(&map));
            last_line = Instant::now();
        }
        tokio::time::sleep(POLL).await;
        map = cluster_map(client, peer).await?;
        let now = progress.done(&map);
        if now != seen {
            (seen, last_change) = (now, Instant::now());
        }
        if last_change.elapsed() > STALL_LIMIT {
            let stuck: Vec<String> = map
                .migrations
                .iter()
                .take(5)
                .map(|(slot, m)| {
                    format!(
                        "slot {} from set {} to set {} at {:?}",
                        slot.0, m.from.0, m.to.0, m.step
                    )
                })
                .collect();
            anyhow::bail!(
                "no move progressed for {} s ({}); the cluster keeps trying — see `hdl cluster status`",
                STALL_LIMIT.as_secs(),
                stuck.join(", ")
            );
        }
    }
    if terminal {
        eprintln!("\r{}", progress.bar(&map));
    }
    println!("{}", progress.line(&map));
    Ok(())
}
