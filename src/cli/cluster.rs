//! `hdl cluster`: forms and inspects a cluster's replica sets over the peer protocol,
//! authenticated with the cluster secret; `hdl cluster up` (in `cluster_up`) runs a
//! local cluster and `hdl cluster restart` restarts one, `status` and `site-values` are in `cluster_status`, the node calls
//! the subcommands share in `cluster_calls`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::config::{DEFAULT_SLOT_COUNT, check_slot_count};
use crate::placement::{ClusterAdmin, FIRST_SET, FIRST_SET_GROUP, Via, Vote};
use crate::replication::network::read_secret_file;
use crate::replication::{AdminClient, Node, NodeId};
use anyhow::Context;
use clap::{Args, Subcommand};

use super::admin_arg::BootstrapArgs;
use super::cluster_calls::{create_admin, join_set, make_ring};

/// How long a membership change may take, a new member catching up included.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(120);

/// Arguments of `hdl cluster`.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    command: ClusterCommand,
}

/// Where to send a call and with which secret.
#[derive(Debug, Args)]
pub(super) struct Target {
    /// Peer address of a member (calls that need the primary follow it from there).
    #[arg(long)]
    pub peer: SocketAddr,
    /// The cluster secret file shared by the members.
    #[arg(long)]
    pub secret_file: PathBuf,
}

#[derive(Debug, Subcommand)]
enum ClusterCommand {
    /// Start every node of a cluster file as a child `hdl serve`, form its sets where
    /// new, make the ring, and run until SIGINT or SIGTERM, then stop the nodes.
    Up(super::cluster_up::UpArgs),
    /// Restart every node of a running `hdl cluster up` one at a time, the primaries
    /// last (each hands its primary to a caught-up member as it stops), waiting until
    /// each has caught up again; the launcher does it and prints each step here.
    Restart(super::cluster_up::RestartArgs),
    /// Form a new cluster of the node at --peer alone (replica set 1 and the metadata
    /// group; it must belong to no set yet), make the ring of --slot-count slots, and
    /// with --admin-key or --admin-secret-file create the bootstrap administrator of
    /// each --prefix.
    Init {
        #[command(flatten)]
        target: Target,
        /// Slots of the ring: a power of two from 1 to 16384.
        #[arg(long, default_value_t = DEFAULT_SLOT_COUNT)]
        slot_count: u32,
        #[command(flatten)]
        admin: BootstrapArgs,
    },
    /// Add a node to replica set 1 as a learner, wait until it has caught up, and
    /// with --voter make it a secondary (a voter); a node of another set is refused.
    AddSecondary {
        #[command(flatten)]
        target: Target,
        /// The new member's node id.
        #[arg(long)]
        id: NodeId,
        /// The new member's peer address.
        #[arg(long)]
        node_peer: SocketAddr,
        /// The new member's Handle protocol address.
        #[arg(long)]
        node_handle: SocketAddr,
        /// Make it a voter once it has caught up.
        #[arg(long)]
        voter: bool,
    },
    /// Remove a member from the set.
    Remove {
        #[command(flatten)]
        target: Target,
        /// The member's node id.
        #[arg(long)]
        id: NodeId,
    },
    /// Plan the slot moves that balance the ring over every replica set (each owns
    /// S/N ± 1 slots); with --wait, follow them to the end.
    Rebalance(super::reshard::RebalanceArgs),
    /// Form a new replica set of running `hdl serve --no-bootstrap` nodes and move
    /// slots to it online until every set owns S/N ± 1, showing progress.
    AddSet(super::reshard::AddSetArgs),
    /// Move every slot of a replica set to the others, then take the set out.
    RemoveSet(super::reshard::RemoveSetArgs),
    /// List the ring (epoch, slot count, moves in progress) and every replica set: its
    /// slots, its handles and every member's id, role, pid, addresses, applied log
    /// index and lag.
    Status {
        #[command(flatten)]
        target: Target,
        /// Print one JSON object instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Print the HS_SITE of each member rank (one JSON object a line), the values to
    /// publish at `0.NA/<prefix>`.
    SiteValues {
        #[command(flatten)]
        target: Target,
        /// A node configuration whose [site] gives the description (else defaults).
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

/// Runs one `hdl cluster` subcommand.
pub fn run(args: &ClusterArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(command(&args.command))
}

pub(super) fn admin(target: &Target, timeout: Duration) -> anyhow::Result<ClusterAdmin> {
    let secret = read_secret_file(&target.secret_file)?;
    Ok(ClusterAdmin::new(AdminClient::new(secret, timeout)))
}

async fn command(command: &ClusterCommand) -> anyhow::Result<()> {
    match command {
        ClusterCommand::Init {
            target,
            slot_count,
            admin: args,
        } => {
            let bootstrap = args.bootstrap()?;
            let slot_count = check_slot_count(*slot_count)?;
            let admin = admin(target, CHANGE_TIMEOUT)?;
            let peer = target.peer;
            join_set(admin.client(), peer, FIRST_SET).await?;
            anyhow::ensure!(
                admin.init(peer).await?,
                "the node at {peer} belongs to a replica set already"
            );
            let id = admin.await_leader(peer, FIRST_SET_GROUP).await?;
            println!("initialised a replica set; node {id} is its primary");
            let made = make_ring(admin.client(), peer, slot_count, &[FIRST_SET]).await?;
            println!("made a ring of {made} slots");
            if let Some(bootstrap) = bootstrap {
                create_admin(admin.client(), peer, &bootstrap).await?;
            }
        }
        ClusterCommand::AddSecondary {
            target,
            id,
            node_peer,
            node_handle,
            voter,
        } => add_secondary(target, *id, *node_peer, *node_handle, *voter).await?,
        ClusterCommand::Remove { target, id } => {
            let admin = admin(target, CHANGE_TIMEOUT)?;
            admin.remove(target.peer, *id).await?;
            println!("removed node {id}");
        }
        ClusterCommand::Status { target, json } => {
            super::cluster_status::status(target, *json).await?;
        }
        ClusterCommand::SiteValues { target, config } => {
            super::cluster_status::site_values(target, config.as_deref()).await?;
        }
        ClusterCommand::Up(args) => super::cluster_up::up(args).await?,
        ClusterCommand::Restart(args) => super::cluster_up::restart(args).await?,
        ClusterCommand::Rebalance(args) => super::reshard::rebalance(args).await?,
        ClusterCommand::AddSet(args) => super::reshard::add_set(args).await?,
        ClusterCommand::RemoveSet(args) => super::reshard::remove_set(args).await?,
    }
    Ok(())
}

async fn add_secondary(
    target: &Target,
    id: NodeId,
    peer: SocketAddr,
    handle: SocketAddr,
    voter: bool,
) -> anyhow::Result<()> {
    let admin = admin(target, CHANGE_TIMEOUT)?;
    let node = Node {
        handle,
        peer,
        http: None,
    };
    join_set(admin.client(), peer, FIRST_SET).await?;
    let via = Via {
        set: target.peer,
        map: target.peer,
    };
    let vote = if voter { Vote::Voter } else { Vote::Learner };
    admin
        .join(FIRST_SET, via, id, &node, vote)
        .await
        .with_context(|| format!("cannot add node {id}"))?;
    println!("node {id} joined as a learner and caught up");
    if voter {
        println!("node {id} is a secondary");
    }
    Ok(())
}
