//! `hdl cluster`: forms and inspects a replica set over the peer protocol,
//! authenticated with the cluster secret; `hdl cluster up` (in `cluster_up`) runs a
//! local one.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use hdl::node::calls::{NodeAnswer, NodeCall, call_node};
use hdl::placement::{ClusterAdmin, ClusterMap, FIRST_SET_GROUP};
use hdl::replication::admin::{Member, MemberStatus};
use hdl::replication::network::read_secret_file;
use hdl::replication::{AdminClient, GroupId, Node, NodeId};
use serde_json::{Value, json};

use super::admin_arg::{Bootstrap, BootstrapArgs};

/// How long a membership change may take, a new member catching up included.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(120);

/// How long one member has to answer a status call.
const STATUS_TIMEOUT: Duration = Duration::from_secs(5);

/// Arguments of `hdl cluster`.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    command: ClusterCommand,
}

/// Where to send a call and with which secret.
#[derive(Debug, Args)]
struct Target {
    /// Peer address of a member (calls that need the primary follow it from there).
    #[arg(long)]
    peer: SocketAddr,
    /// The cluster secret file shared by the members.
    #[arg(long)]
    secret_file: PathBuf,
}

#[derive(Debug, Subcommand)]
enum ClusterCommand {
    /// Start every node of a cluster file as a child `hdl serve`, form the set if it
    /// is new, and run until SIGINT or SIGTERM, then stop the nodes.
    Up(super::cluster_up::UpArgs),
    /// Form a new replica set of the node at --peer alone (its log must be empty),
    /// and with --admin-key or --admin-secret-file create the bootstrap administrator
    /// of each --prefix.
    Init {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        admin: BootstrapArgs,
    },
    /// Add a node as a learner, wait until it has caught up, and with --voter make it
    /// a secondary (a voter).
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
    /// List every member: id, role, pid, addresses, applied log index and lag.
    Status {
        #[command(flatten)]
        target: Target,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// Runs one `hdl cluster` subcommand.
pub fn run(args: &ClusterArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(command(&args.command))
}

/// Has the node at `peer` create the bootstrap administrator's prefix handles that do
/// not exist yet, through its service's one write path.
pub(super) async fn create_admin(
    client: &AdminClient,
    peer: SocketAddr,
    bootstrap: &Bootstrap,
) -> anyhow::Result<()> {
    let call = NodeCall::Bootstrap {
        admin: bootstrap.admin.clone(),
        prefixes: bootstrap.prefixes.clone(),
    };
    match call_node(client, peer, &call).await? {
        NodeAnswer::Bootstrapped { created } => {
            for handle in created {
                println!("created {handle} for the bootstrap administrator");
            }
            Ok(())
        }
        NodeAnswer::Failed(reason) => {
            anyhow::bail!("cannot create the bootstrap administrator: {reason}")
        }
        _ => anyhow::bail!("the node answered another call"),
    }
}

fn admin(target: &Target, timeout: Duration) -> anyhow::Result<ClusterAdmin> {
    let secret = read_secret_file(&target.secret_file)?;
    Ok(ClusterAdmin::new(AdminClient::new(secret, timeout)))
}

async fn command(command: &ClusterCommand) -> anyhow::Result<()> {
    match command {
        ClusterCommand::Init {
            target,
            admin: args,
        } => {
            let bootstrap = args.bootstrap()?;
            let admin = admin(target, CHANGE_TIMEOUT)?;
            anyhow::ensure!(
                admin.init(target.peer).await?,
                "the node at {} belongs to a replica set already",
                target.peer
            );
            let id = admin.await_leader(target.peer, FIRST_SET_GROUP).await?;
            println!("initialised a replica set; node {id} is its primary");
            if let Some(bootstrap) = bootstrap {
                create_admin(admin.client(), target.peer, &bootstrap).await?;
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
        ClusterCommand::Status { target, json } => status(target, *json).await?,
        ClusterCommand::Up(args) => super::cluster_up::up(args).await?,
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
    admin
        .join(target.peer, id, &node, voter)
        .await
        .with_context(|| format!("cannot add node {id}"))?;
    println!("node {id} joined as a learner and caught up");
    if voter {
        println!("node {id} is a secondary");
    }
    Ok(())
}

/// Asks the node at `--peer` for the membership, then every member for its own status.
async fn status(target: &Target, as_json: bool) -> anyhow::Result<()> {
    let admin = admin(target, STATUS_TIMEOUT)?;
    let asked = admin.status(target.peer, FIRST_SET_GROUP).await?;
    let mut answers = Vec::new();
    for member in &asked.members {
        let status = admin.status(member.node.peer, FIRST_SET_GROUP).await.ok();
        answers.push((member, status));
    }
    let leader_last_log = answers
        .iter()
        .filter_map(|(_, status)| status.as_ref())
        .find(|status| Some(status.id) == status.leader)
        .and_then(|leader| leader.last_log);
    let rows: Vec<Value> = answers
        .iter()
        .map(|(member, status)| row(member, status.as_ref(), leader_last_log))
        .collect();
    if as_json {
        let map = cluster_map(admin.client(), target.peer).await?;
        let sets: Vec<Value> = map
            .sets
            .iter()
            .map(|(id, set)| json!({"id": id.0, "members": set.members.keys().collect::<Vec<_>>()}))
            .collect();
        let report = json!({
            "leader": asked.leader,
            "members": rows,
            "epoch": map.epoch,
            "map": { "sets": sets },
            "metadata": metadata(&admin, &asked.members).await,
        });
        println!("{report}");
    } else {
        print_table(&rows);
    }
    Ok(())
}

/// The cluster map as the node at `peer` has applied it.
async fn cluster_map(client: &AdminClient, peer: SocketAddr) -> anyhow::Result<ClusterMap> {
    match call_node(client, peer, &NodeCall::ClusterMap).await? {
        NodeAnswer::ClusterMap(map) => Ok(map),
        NodeAnswer::Failed(reason) => anyhow::bail!("cannot read the cluster map: {reason}"),
        _ => anyhow::bail!("the node answered another call"),
    }
}

/// The metadata group as each of `members` sees it: its role there and its leader.
async fn metadata(admin: &ClusterAdmin, members: &[Member]) -> Value {
    let mut rows = Vec::new();
    for member in members {
        let status = admin.status(member.node.peer, GroupId::Map).await.ok();
        rows.push(json!({
            "id": member.id,
            "role": status.as_ref().map_or("unreachable", |s| s.role.name()),
            "leader": status.as_ref().and_then(|s| s.leader),
            "applied": status.as_ref().and_then(|s| s.applied),
        }));
    }
    Value::Array(rows)
}

fn row(member: &Member, status: Option<&MemberStatus>, leader_last_log: Option<u64>) -> Value {
    let applied = status.and_then(|s| s.applied);
    let lag = leader_last_log.map(|last| last.saturating_sub(applied.unwrap_or(0)));
    json!({
        "id": member.id,
        "role": status.map_or("unreachable", |s| s.role.name()),
        "voter": member.voter,
        "pid": status.map(|s| s.pid),
        "handle": member.node.handle.to_string(),
        "peer": member.node.peer.to_string(),
        "applied": applied,
        "lag": lag,
    })
}

fn print_table(rows: &[Value]) {
    println!(
        "{:>4}  {:<11}  {:>8}  {:<21}  {:<21}  {:>8}  {:>6}",
        "id", "role", "pid", "handle", "peer", "applied", "lag"
    );
    for row in rows {
        let text = |key: &str| match &row[key] {
            Value::Null => "-".to_owned(),
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        println!(
            "{:>4}  {:<11}  {:>8}  {:<21}  {:<21}  {:>8}  {:>6}",
            text("id"),
            text("role"),
            text("pid"),
            text("handle"),
            text("peer"),
            text("applied"),
            text("lag")
        );
    }
}
