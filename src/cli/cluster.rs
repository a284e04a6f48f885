//! `hdl cluster`: forms and inspects a replica set over the peer protocol,
//! authenticated with the cluster secret; `hdl cluster up` (in `cluster_up`) runs a
//! local one.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use hdl::names::prefix_handle;
use hdl::replication::admin::{AdminRequest, Member, MemberStatus, Role};
use hdl::replication::network::read_secret_file;
use hdl::replication::{AdminClient, Node, NodeId};
use hdl::storage::{Command, ExistingHandle, Refusal};
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

/// Creates the bootstrap administrator's prefix handles through the new set's log.
pub(super) async fn create_admin(
    client: &AdminClient,
    peer: SocketAddr,
    bootstrap: &Bootstrap,
) -> anyhow::Result<()> {
    let now = hdl::clock::unix_now();
    for prefix in &bootstrap.prefixes {
        let handle = prefix_handle(prefix).context("invalid --prefix")?;
        let mut values = bootstrap.admin.values(&handle);
        for value in &mut values {
            value.timestamp = now;
        }
        let command = Command::Create {
            handle: handle.clone(),
            values,
            existing: ExistingHandle::Refuse,
        };
        match client.write(peer, command).await? {
            Ok(_) => println!("created {handle} for the bootstrap administrator"),
            Err(Refusal::HandleExists) => println!("{handle} exists already; left as it is"),
            Err(refusal) => anyhow::bail!("cannot create {handle}: {refusal}"),
        }
    }
    Ok(())
}

fn client(target: &Target, timeout: Duration) -> anyhow::Result<AdminClient> {
    let secret = read_secret_file(&target.secret_file)?;
    Ok(AdminClient::new(secret, timeout))
}

async fn command(command: &ClusterCommand) -> anyhow::Result<()> {
    match command {
        ClusterCommand::Init { target, admin } => {
            let bootstrap = admin.bootstrap()?;
            let client = client(target, CHANGE_TIMEOUT)?;
            client.call(target.peer, &AdminRequest::Init).await?;
            let id = await_primary(&client, target.peer).await?;
            println!("initialised a replica set; node {id} is its primary");
            if let Some(bootstrap) = bootstrap {
                create_admin(&client, target.peer, &bootstrap).await?;
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
            let client = client(target, CHANGE_TIMEOUT)?;
            client
                .call(target.peer, &AdminRequest::Remove { id: *id })
                .await?;
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
    let client = client(target, CHANGE_TIMEOUT)?;
    let node = Node {
        handle,
        peer,
        http: None,
    };
    join(&client, target.peer, id, node, voter).await?;
    println!("node {id} joined as a learner and caught up");
    if voter {
        println!("node {id} is a secondary");
    }
    Ok(())
}

/// Adds `node` as a learner through the member at `via`, waits until it has caught
/// up, and with `voter` makes it a voter.
pub(super) async fn join(
    client: &AdminClient,
    via: SocketAddr,
    id: NodeId,
    node: Node,
    voter: bool,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        u32::try_from(id).is_ok_and(|id| id > 0),
        "node id {id} is out of range: it must be 1 to 4294967295"
    );
    client
        .call(via, &AdminRequest::AddLearner { id, node })
        .await
        .with_context(|| format!("cannot add node {id} as a learner"))?;
    if voter {
        let status = client.status(via).await?;
        let mut voters: BTreeSet<NodeId> = voter_ids(&status.members).collect();
        voters.insert(id);
        let request = AdminRequest::ChangeMembership { voters };
        client
            .call(via, &request)
            .await
            .with_context(|| format!("cannot make node {id} a voter"))?;
    }
    Ok(())
}

/// Waits (bounded) until the node at `peer` has elected itself primary; its id.
pub(super) async fn await_primary(
    client: &AdminClient,
    peer: SocketAddr,
) -> anyhow::Result<NodeId> {
    const POLLS: usize = 100;
    const STEP: Duration = Duration::from_millis(100);
    for _ in 0..POLLS {
        let status = client.status(peer).await?;
        if status.role == Role::Primary {
            return Ok(status.id);
        }
        tokio::time::sleep(STEP).await;
    }
    anyhow::bail!("the node at {peer} did not become primary")
}

fn voter_ids(members: &[Member]) -> impl Iterator<Item = NodeId> + '_ {
    members.iter().filter(|m| m.voter).map(|m| m.id)
}

/// Asks the node at `--peer` for the membership, then every member for its own status.
async fn status(target: &Target, as_json: bool) -> anyhow::Result<()> {
    let client = client(target, STATUS_TIMEOUT)?;
    let asked = client.status(target.peer).await?;
    let mut answers = Vec::new();
    for member in &asked.members {
        answers.push((member, client.status(member.node.peer).await.ok()));
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
        let report = json!({ "leader": asked.leader, "members": rows });
        println!("{report}");
    } else {
        print_table(&rows);
    }
    Ok(())
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
