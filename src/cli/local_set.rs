//! A replica set of child `hdl serve` processes on this machine, described by a
//! cluster file: what `hdl cluster up` and `hdl bench failover` run.
//!
//! Every node is this very binary (`std::env::current_exe()`) run as `hdl serve`,
//! with its stderr appended to `<data_dir>/node-<id>.log`; it is ready once it prints
//! its `listening` line. The set is formed through the library's [`AdminClient`]
//! (init on the first node, then each other node added as a learner and made a
//! voter) only where that has not happened yet, so a restart reuses the set.
//! Children are only ever signalled by the pids this module started, always reaped,
//! and killed when dropped (`kill_on_drop`) should the launcher fail half way.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::net::SocketAddr;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use hdl::cluster_file::{ClusterFile, NodePlan};
use hdl::placement::{ClusterAdmin, FIRST_SET_GROUP};
use hdl::replication::admin::MemberStatus;
use hdl::replication::network::read_or_create_secret_file;
use hdl::replication::{AdminClient, Node, NodeId};
use rustix::process::{Pid, Signal, kill_process};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::{Instant, timeout};

use super::admin_arg::Bootstrap;

/// How long a node may take to print its `listening` line.
const STARTUP: Duration = Duration::from_secs(30);
/// How long an admin call may take, a joining node catching up included.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(120);

/// One node of the set and its process, if running.
#[derive(Debug)]
pub struct LocalNode {
    /// Where it keeps its data and listens.
    pub plan: NodePlan,
    child: Option<Child>,
}

impl LocalNode {
    /// Its process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }
}

/// A running local replica set.
#[derive(Debug)]
pub struct LocalSet {
    file: ClusterFile,
    /// The nodes, in the cluster file's order.
    pub nodes: Vec<LocalNode>,
    /// Membership and status calls, with the set's secret.
    pub admin: ClusterAdmin,
}

impl LocalSet {
    /// Creates the data directory and the secret if needed and starts every node;
    /// prints `node <id> listening handle=… http=… peer=…` for each.
    pub async fn launch(file: ClusterFile) -> anyhow::Result<LocalSet> {
        std::fs::create_dir_all(&file.data_dir)
            .with_context(|| format!("cannot create {}", file.data_dir.display()))?;
        let secret = read_or_create_secret_file(&file.secret_path())?;
        let nodes = file.plan()?.into_iter();
        let nodes = nodes.map(|plan| LocalNode { plan, child: None });
        let mut set = LocalSet {
            nodes: nodes.collect(),
            admin: ClusterAdmin::new(AdminClient::new(secret, ADMIN_TIMEOUT)),
            file,
        };
        for index in 0..set.nodes.len() {
            set.start(index).await?;
        }
        Ok(set)
    }

    /// Starts node `index` (again) and waits for its `listening` line.
    pub async fn start(&mut self, index: usize) -> anyhow::Result<()> {
        let args = self.serve_args(&self.nodes[index].plan);
        let plan = &self.nodes[index].plan;
        let log_path = self.file.data_dir.join(format!("node-{}.log", plan.id));
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .with_context(|| format!("cannot open {}", log_path.display()))?;
        let mut child = Command::new(std::env::current_exe().context("cannot find hdl")?)
            .arg("serve")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("cannot start hdl serve")?;
        let stdout = child.stdout.take().context("no stdout pipe")?;
        let mut lines = BufReader::new(stdout).lines();
        let announced = timeout(STARTUP, lines.next_line()).await;
        let Ok(Ok(Some(line))) = announced else {
            let status = stop(&mut child, Duration::ZERO).await;
            bail!(
                "node {} did not start ({status:?}); see {}",
                plan.id,
                log_path.display()
            );
        };
        // Keep reading so the node never blocks on a full pipe; ends at its exit.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let addresses = line.strip_prefix("listening ").unwrap_or(&line);
        println!("node {} listening {addresses}", plan.id);
        self.nodes[index].child = Some(child);
        Ok(())
    }

    fn serve_args(&self, plan: &NodePlan) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "--data-dir".into(),
            plan.data_dir.clone().into(),
            "--listen".into(),
            plan.handle.to_string().into(),
            "--peer".into(),
            plan.peer.to_string().into(),
            "--http".into(),
            plan.http.to_string().into(),
            "--node-id".into(),
            plan.id.to_string().into(),
            "--secret-file".into(),
            self.file.secret_path().into(),
            "--no-bootstrap".into(),
        ];
        if let Some(config) = &self.file.node_config {
            args.extend(["--config".into(), config.clone().into()]);
        }
        args
    }

    /// Forms the set where it is not formed yet: init on the first node if it
    /// belongs to no set, then every other node that is not a voter joins as one, and
    /// the bootstrap administrator's prefix handles are created if they do not exist.
    /// Returns the primary's id once there is one.
    pub async fn form(&self, bootstrap: Option<&Bootstrap>) -> anyhow::Result<NodeId> {
        let first = self.nodes[0].plan.peer;
        if self.admin.init(first).await? {
            println!("node {} formed a new replica set", self.nodes[0].plan.id);
        }
        for node in &self.nodes[1..] {
            let members = self.set_status(first).await?.members;
            let voter = members.iter().any(|m| m.id == node.plan.id && m.voter);
            self.admin
                .join(first, node.plan.id, &self.member(node), true)
                .await
                .with_context(|| format!("cannot add node {}", node.plan.id))?;
            if !voter {
                println!("node {} joined as a secondary", node.plan.id);
            }
        }
        if let Some(bootstrap) = bootstrap {
            super::cluster::create_admin(self.admin.client(), first, bootstrap).await?;
        }
        let primary = self.primary_id().await?;
        self.await_caught_up(primary).await?;
        Ok(primary)
    }

    /// Waits (bounded) until every running node has applied what the primary had
    /// logged, so that a set reported ready answers alike on every member (the
    /// bootstrap administrator included).
    async fn await_caught_up(&self, primary: NodeId) -> anyhow::Result<()> {
        let index = self.index_of(primary)?;
        let target = self.set_status(self.nodes[index].plan.peer).await?.last_log;
        let deadline = Instant::now() + STARTUP;
        for peer in self.running_peers() {
            loop {
                let applied = self.set_status(peer).await.ok().and_then(|s| s.applied);
                if applied >= target {
                    break;
                }
                if Instant::now() >= deadline {
                    bail!("the node at {peer} did not catch up within {STARTUP:?}");
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Ok(())
    }

    /// What the node at `peer` says about itself and its replica set.
    pub async fn set_status(&self, peer: SocketAddr) -> anyhow::Result<MemberStatus> {
        Ok(self.admin.status(peer, FIRST_SET_GROUP).await?)
    }

    fn member(&self, node: &LocalNode) -> Node {
        Node {
            handle: node.plan.handle,
            peer: node.plan.peer,
            http: Some(node.plan.http),
        }
    }

    /// The id of the primary, asked of the running nodes in turn (bounded wait).
    pub async fn primary_id(&self) -> anyhow::Result<NodeId> {
        let deadline = Instant::now() + STARTUP;
        while Instant::now() < deadline {
            for peer in self.running_peers() {
                if let Ok(Some(leader)) = self.set_status(peer).await.map(|s| s.leader) {
                    return Ok(leader);
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("no primary within {STARTUP:?}")
    }

    fn running_peers(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        let running = self.nodes.iter().filter(|n| n.child.is_some());
        running.map(|n| n.plan.peer)
    }

    /// The index of the node with id `id`.
    pub fn index_of(&self, id: NodeId) -> anyhow::Result<usize> {
        let index = self.nodes.iter().position(|n| n.plan.id == id);
        index.with_context(|| format!("node {id} is not in the cluster file"))
    }

    /// SIGKILLs node `index` and reaps it.
    pub async fn kill(&mut self, index: usize) -> anyhow::Result<()> {
        let mut child = self.nodes[index].child.take().context("not running")?;
        child.kill().await.context("cannot kill a node")
    }

    /// Stops every node: SIGTERM, then SIGKILL for those still running after
    /// `grace`; reaps each and prints how it ended.
    pub async fn stop_all(&mut self, grace: Duration) {
        for node in &self.nodes {
            if let Some(pid) = node
                .pid()
                .and_then(|pid| Pid::from_raw(pid.try_into().ok()?))
            {
                // Already gone is fine: it is reaped below either way.
                let _ = kill_process(pid, Signal::TERM);
            }
        }
        let deadline = Instant::now() + grace;
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let left = deadline.saturating_duration_since(Instant::now());
                let ended = stop(&mut child, left).await;
                println!("node {} stopped: {}", node.plan.id, describe(ended));
            }
        }
    }
}

/// Waits up to `grace` for `child` to exit, then SIGKILLs it; reaps it either way.
async fn stop(child: &mut Child, grace: Duration) -> std::io::Result<ExitStatus> {
    if let Ok(status) = timeout(grace, child.wait()).await {
        return status;
    }
    child.start_kill()?;
    child.wait().await
}

fn describe(ended: std::io::Result<ExitStatus>) -> String {
    match ended {
        Ok(status) => status.to_string(),
        Err(error) => format!("cannot reap: {error}"),
    }
}
