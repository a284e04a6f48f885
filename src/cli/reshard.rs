//! `hdl cluster rebalance` and `hdl cluster remove-set`: moving slots between replica
//! sets online, and following the moves until they end.
//!
//! The moves themselves are planned and carried out in the cluster (the metadata
//! group's leader runs them); this module asks for them with node calls and shows
//! their progress from the cluster map: a bar on a terminal, a line every few seconds
//! otherwise.

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::node::calls::{NodeAnswer, NodeCall};
use crate::placement::ClusterMap;
use crate::replication::admin::AdminRequest;
use crate::replication::network::read_secret_file;
use crate::replication::{AdminClient, GroupId, Node, NodeId, SetId};
use anyhow::Context;
use clap::Args;

use super::cluster::Target;
use super::cluster_calls::{ask, cluster_map, form_set, unexpected};

/// How long forming a set may take, its members catching up included.
const FORM_TIMEOUT: Duration = Duration::from_secs(120);

/// How long one node call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// How often the map is read while moves run.
const POLL: Duration = Duration::from_millis(500);

/// How often a progress line is printed when the output is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(5);

/// How long the moves may make no progress at all before the command gives up
/// waiting (the cluster keeps trying).
const STALL_LIMIT: Duration = Duration::from_secs(180);

/// Arguments of `hdl cluster rebalance`.
#[derive(Debug, Args)]
pub struct RebalanceArgs {
    #[command(flatten)]
    target: Target,
    /// Wait until every move has ended, showing progress.
    #[arg(long)]
    wait: bool,
}

/// Arguments of `hdl cluster add-set`.
#[derive(Debug, Args)]
pub struct AddSetArgs {
    #[command(flatten)]
    target: Target,
    /// A member of the new set, `ID:HANDLE_ADDR:PEER_ADDR[:HTTP_ADDR]`: an
    /// `hdl serve --no-bootstrap` already running; the first forms the set. Repeat
    /// for each member (three make a set that survives the loss of one).
    #[arg(long = "node", required = true, value_parser = parse_node)]
    nodes: Vec<(NodeId, Node)>,
    /// Only form the set; move no slots to it (`hdl cluster rebalance` does later).
    #[arg(long)]
    no_rebalance: bool,
}

/// `ID:HANDLE_ADDR:PEER_ADDR[:HTTP_ADDR]`, IPv4 or bracketed IPv6 addresses.
fn parse_node(text: &str) -> Result<(NodeId, Node), String> {
    let (id, rest) = text
        .split_once(':')
        .ok_or("expected ID:HANDLE_ADDR:PEER_ADDR[:HTTP_ADDR]")?;
    let id: NodeId = id
        .parse()
        .map_err(|_| format!("node id {id:?} is not a number"))?;
    let mut addresses = Vec::new();
    let mut rest = rest;
    while !rest.is_empty() {
        // An address is HOST:PORT; HOST may be a bracketed IPv6 address.
        let host_end = if rest.starts_with('[') {
            rest.find("]:").map(|at| at + 1)
        } else {
            rest.find(':')
        }
        .ok_or_else(|| format!("{rest:?} is not HOST:PORT"))?;
        let port_end = rest[host_end + 1..]
            .find(':')
            .map_or(rest.len(), |at| host_end + 1 + at);
        let address: SocketAddr = rest[..port_end]
            .parse()
            .map_err(|_| format!("{:?} is not an address", &rest[..port_end]))?;
        addresses.push(address);
        rest = rest.get(port_end + 1..).unwrap_or("");
    }
    match addresses[..] {
        [handle, peer] => Ok((
            id,
            Node {
                handle,
                peer,
                http: None,
            },
        )),
        [handle, peer, http] => Ok((
            id,
            Node {
                handle,
                peer,
                http: Some(http),
            },
        )),
        _ => Err("expected ID:HANDLE_ADDR:PEER_ADDR[:HTTP_ADDR]".into()),
    }
}

/// Forms a new replica set of the given nodes, records it in the cluster map, and
/// unless told not to, moves slots to it until the ring is balanced.
pub async fn add_set(args: &AddSetArgs) -> anyhow::Result<()> {
    let admin = super::cluster::admin(&args.target, FORM_TIMEOUT)?;
    let peer = args.target.peer;
    let map = cluster_map(admin.client(), peer).await?;
    anyhow::ensure!(
        map.slot_count() > 0,
        "the cluster has no ring yet: form its first set (hdl cluster init or up) first"
    );
    // A removed set's id is never used again.
    let used = map.sets.keys().chain(&map.removed).map(|set| set.0);
    let set = SetId(used.max().unwrap_or(0) + 1);
    form_set(&admin, set, peer, &args.nodes).await?;
    await_recorded(admin.client(), peer, set).await?;
    println!(
        "formed replica set {} of nodes {:?}",
        set.0,
        args.nodes.iter().map(|(id, _)| *id).collect::<Vec<_>>()
    );
    if args.no_rebalance {
        return Ok(());
    }
    let client = client(&args.target)?;
    let (planned, epoch) = plan(&client, peer, Vec::new()).await?;
    println!("planned {planned} slot moves");
    follow_moves(&client, peer, epoch).await
}

/// Waits (bounded) until the map at `peer` records `set`.
async fn await_recorded(client: &AdminClient, peer: SocketAddr, set: SetId) -> anyhow::Result<()> {
    let deadline = Instant::now() + FORM_TIMEOUT;
    while !cluster_map(client, peer).await?.sets.contains_key(&set) {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the cluster map did not record replica set {} within {} s",
            set.0,
            FORM_TIMEOUT.as_secs()
        );
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}

/// Arguments of `hdl cluster remove-set`.
#[derive(Debug, Args)]
pub struct RemoveSetArgs {
    #[command(flatten)]
    target: Target,
    /// The replica set to empty and take out.
    #[arg(long)]
    id: u32,
}

fn client(target: &Target) -> anyhow::Result<AdminClient> {
    let secret = read_secret_file(&target.secret_file)?;
    Ok(AdminClient::new(secret, CALL_TIMEOUT))
}

/// Plans the moves that balance the ring and, with `--wait`, follows them to the end.
pub async fn rebalance(args: &RebalanceArgs) -> anyhow::Result<()> {
    let client = client(&args.target)?;
    let (planned, epoch) = plan(&client, args.target.peer, Vec::new()).await?;
    println!("planned {planned} slot moves");
    if args.wait {
        follow_moves(&client, args.target.peer, epoch).await?;
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
    let (planned, epoch) = plan(&client, peer, vec![set]).await?;
    println!("planned {planned} slot moves out of replica set {}", set.0);
    follow_moves(&client, peer, epoch).await?;
    let answer = ask(&client, peer, &NodeCall::RemoveSet { set })
        .await
        .with_context(|| format!("cannot remove replica set {}", set.0))?;
    let NodeAnswer::MapChanged { epoch } = answer else {
        return Err(unexpected(peer, &answer));
    };
    println!("replica set {} left the cluster map (epoch {epoch})", set.0);
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

/// Has the cluster plan the moves that balance the ring without `leaving`: how many
/// it planned, and the map's epoch with the plan in it.
async fn plan(
    client: &AdminClient,
    peer: SocketAddr,
    leaving: Vec<SetId>,
) -> anyhow::Result<(usize, u64)> {
    let answer = ask(client, peer, &NodeCall::Rebalance { leaving })
        .await
        .context("cannot plan the slot moves")?;
    match answer {
        NodeAnswer::Planned { moves, epoch } => Ok((moves, epoch)),
        other => Err(unexpected(peer, &other)),
    }
}

/// The map at `peer` once it has applied `epoch` (bounded by [`FORM_TIMEOUT`]).
async fn await_epoch(
    client: &AdminClient,
    peer: SocketAddr,
    epoch: u64,
) -> anyhow::Result<ClusterMap> {
    let deadline = Instant::now() + FORM_TIMEOUT;
    loop {
        let map = cluster_map(client, peer).await?;
        if map.epoch >= epoch {
            return Ok(map);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the node at {peer} did not apply the cluster map's epoch {epoch} within {} s (it has {})",
            FORM_TIMEOUT.as_secs(),
            map.epoch
        );
        tokio::time::sleep(POLL).await;
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
/// after [`STALL_LIMIT`] without progress. `planned` is the map's epoch with the
/// plan in it: the member at `peer` may trail the metadata group's leader, and a map
/// older than the plan has no moves because it has not seen them yet.
pub async fn follow_moves(
    client: &AdminClient,
    peer: SocketAddr,
    planned: u64,
) -> anyhow::Result<()> {
    let mut map = await_epoch(client, peer, planned).await?;
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
