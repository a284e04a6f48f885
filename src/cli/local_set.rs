//! The replica sets of child `hdl serve` processes on this machine that a cluster
//! file describes: what `hdl cluster up` and `hdl bench failover` run.
//!
//! Every node is this very binary (`std::env::current_exe()`) run as `hdl serve
//! --no-bootstrap --exit-with-parent <launcher pid>`, with its stderr appended to
//! `<data_dir>/node-<id>.log`; it is ready once it prints its `listening` line. The
//! kernel SIGKILLs a node when the launcher dies, by SIGKILL too (`PR_SET_PDEATHSIG`,
//! which a node asks for itself and which refuses a launcher gone before it asked):
//! no orphan holds the set's ports. The signal follows the launcher's *thread* that
//! started the node, so nodes are started only from the runtime's own threads (the
//! main thread in `block_on`, or a worker), which live as long as the launcher; never
//! from `spawn_blocking`, whose idle threads end. Each set is formed through the library's
//! [`AdminClient`] (its nodes told to join it, init on its first node, then each other
//! node added as a learner and made a voter; set 1 first, since its members are the
//! metadata group's voters) only where that has not happened yet, so a restart reuses
//! the sets; then the ring is made over every set at once, if the cluster has none.
//! Children are only ever signalled by the pids this module started, always reaped,
//! and killed when dropped (`kill_on_drop`) should the launcher fail half way.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::net::SocketAddr;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use crate::cluster_file::{ClusterFile, NodePlan};
use crate::placement::{ClusterAdmin, FIRST_SET_GROUP};
use crate::replication::admin::MemberStatus;
use crate::replication::network::read_or_create_secret_file;
use crate::replication::{AdminClient, GroupId, Node, NodeId, SetId};
use anyhow::{Context, bail};
use rustix::process::{Pid, Signal, kill_process};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::{Instant, timeout};

use super::admin_arg::Bootstrap;
use super::cluster_calls::{create_admin, form_set, make_ring, set_info};

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

/// How current a member's view is: its term, then whether it knows a leader in it.
fn currency(status: &MemberStatus) -> (u64, bool) {
    (status.term, status.leader.is_some())
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

    /// Launches the set of `file`, runs `work` on it, then stops every node (whatever
    /// `work` came to) and returns what `work` did.
    pub async fn run_with(
        file: ClusterFile,
        work: impl AsyncFnOnce(&mut LocalSet) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let mut set = LocalSet::launch(file).await?;
        let outcome = work(&mut set).await;
        set.stop_all(super::cluster_up::GRACE).await;
        outcome
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
        let mut command = Command::new(std::env::current_exe().context("cannot find hdl")?);
        super::allocator::set_for_node(&mut command);
        let mut child = command
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
            "--exit-with-parent".into(),
            std::process::id().to_string().into(),
        ];
        if let Some(config) = &self.file.node_config {
            args.extend(["--config".into(), config.clone().into()]);
        }
        args
    }

    /// Forms every set where it is not formed yet (set 1 first: its first node forms
    /// it with the metadata group; each other set's first node forms it and joins the
    /// metadata group as a learner; every other node joins its set as a voter), makes
    /// the ring over every set if the cluster has none and waits until every store is
    /// sliced to it, creates the bootstrap administrator's prefix handles that do not
    /// exist yet (each at the set that owns it), and waits until every member of every
    /// set caught up. Returns the id of set 1's primary.
    pub async fn form(&self, bootstrap: Option<&Bootstrap>) -> anyhow::Result<NodeId> {
        let map_peer = self.nodes[0].plan.peer;
        let sets = self.sets();
        for (set, indexes) in &sets {
            self.form_one(*set, map_peer, indexes).await?;
        }
        let ids: Vec<SetId> = sets.iter().map(|(set, _)| *set).collect();
        let slot_count =
            make_ring(self.admin.client(), map_peer, self.file.slot_count, &ids).await?;
        self.await_sliced(slot_count).await?;
        if let Some(bootstrap) = bootstrap {
            create_admin(self.admin.client(), map_peer, bootstrap).await?;
        }
        let primary = self.primary_id().await?;
        for (set, indexes) in &sets {
            self.await_caught_up(GroupId::Set(*set), indexes).await?;
        }
        Ok(primary)
    }

    /// The sets of the cluster file and the indexes of their nodes, set 1 first.
    pub fn sets(&self) -> Vec<(SetId, Vec<usize>)> {
        let mut sets: Vec<(SetId, Vec<usize>)> = Vec::new();
        for (index, node) in self.nodes.iter().enumerate() {
            let set = SetId(node.plan.set);
            match sets.iter_mut().find(|(id, _)| *id == set) {
                Some((_, indexes)) => indexes.push(index),
                None => sets.push((set, vec![index])),
            }
        }
        sets
    }

    /// Forms set `set` of the nodes at `indexes` where not formed yet; prints what
    /// changed.
    async fn form_one(
        &self,
        set: SetId,
        map_peer: SocketAddr,
        indexes: &[usize],
    ) -> anyhow::Result<()> {
        let first = &self.nodes[indexes[0]].plan;
        let group = GroupId::Set(set);
        let before = self.admin.status(first.peer, group).await;
        let voters: Vec<NodeId> = before
            .map(|status| {
                status
                    .members
                    .iter()
                    .filter(|m| m.voter)
                    .map(|m| m.id)
                    .collect()
            })
            .unwrap_or_default();
        let members: Vec<(NodeId, Node)> = indexes
            .iter()
            .map(|index| (self.nodes[*index].plan.id, self.member(&self.nodes[*index])))
            .collect();
        if form_set(&self.admin, set, map_peer, &members).await? {
            println!("node {} formed replica set {}", first.id, set.0);
        }
        for (id, _) in &members[1..] {
            if !voters.contains(id) {
                println!("node {id} joined replica set {} as a secondary", set.0);
            }
        }
        Ok(())
    }

    /// Waits (bounded) until every running node's store is sliced to the ring of
    /// `slot_count` slots.
    async fn await_sliced(&self, slot_count: u32) -> anyhow::Result<()> {
        let deadline = Instant::now() + STARTUP;
        for peer in self.running_peers() {
            loop {
                let sliced = set_info(self.admin.client(), peer)
                    .await
                    .ok()
                    .and_then(|info| info.sliced);
                if sliced == Some(slot_count) {
                    break;
                }
                if Instant::now() >= deadline {
                    bail!(
                        "the node at {peer} did not slice its store to the ring within {STARTUP:?}"
                    );
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Ok(())
    }

    /// Waits (bounded) until every running node of `group` (at `indexes`) has
    /// applied what the group's primary had logged, so that a cluster reported ready
    /// answers alike on every member (the bootstrap administrator included).
    pub async fn await_caught_up(&self, group: GroupId, indexes: &[usize]) -> anyhow::Result<()> {
        let peers: Vec<SocketAddr> = indexes
            .iter()
            .filter(|index| self.nodes[**index].child.is_some())
            .map(|index| self.nodes[*index].plan.peer)
            .collect();
        let deadline = Instant::now() + STARTUP;
        let target = loop {
            let mut leader = None;
            for peer in &peers {
                let status = self.admin.status(*peer, group).await;
                if let Some(status) = status.ok().filter(|s| s.leader == Some(s.id)) {
                    leader = Some(status.last_log);
                }
            }
            if let Some(last_log) = leader {
                break last_log;
            }
            if Instant::now() >= deadline {
                bail!("{group} has no primary within {STARTUP:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        for peer in peers {
            loop {
                let status = self.admin.status(peer, group).await;
                if status.ok().and_then(|s| s.applied) >= target {
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

    /// What the node at `peer` says about itself and replica set 1.
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

    /// The id of set 1's primary (bounded wait), as [`LocalSet::leader_of`].
    pub async fn primary_id(&self) -> anyhow::Result<NodeId> {
        self.leader_of(FIRST_SET_GROUP).await
    }

    /// The id of `group`'s primary (bounded wait): the leader named by the running
    /// node in the highest term. A restarted ex-primary may still call itself primary
    /// in its old term until it hears of the new one; the term tells who is current.
    pub async fn leader_of(&self, group: GroupId) -> anyhow::Result<NodeId> {
        let deadline = Instant::now() + STARTUP;
        while Instant::now() < deadline {
            let mut newest: Option<MemberStatus> = None;
            for peer in self.running_peers() {
                if let Ok(status) = self.admin.status(peer, group).await
                    && newest
                        .as_ref()
                        .is_none_or(|n| currency(&status) > currency(n))
                {
                    newest = Some(status);
                }
            }
            if let Some(leader) = newest.and_then(|status| status.leader) {
                return Ok(leader);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("{group} has no primary within {STARTUP:?}")
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

    /// SIGTERMs node `index` (a planned stop: it hands off what it leads and
    /// drains), SIGKILLs it if still running after `grace`, and reaps it.
    pub async fn terminate(&mut self, index: usize, grace: Duration) -> anyhow::Result<ExitStatus> {
        let mut child = self.nodes[index].child.take().context("not running")?;
        send_sigterm(&child);
        stop(&mut child, grace).await.context("cannot reap a node")
    }

    /// Stops every node: SIGTERM, then SIGKILL for those still running after
    /// `grace`; reaps each and prints how it ended.
    pub async fn stop_all(&mut self, grace: Duration) {
        for child in self.nodes.iter().filter_map(|node| node.child.as_ref()) {
            send_sigterm(child);
        }
        let deadline = Instant::now() + grace;
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let left = deadline.saturating_duration_since(Instant::now());
                let ended = stop(&mut child, left).await;
                let took = grace.saturating_sub(deadline.saturating_duration_since(Instant::now()));
                println!(
                    "node {} stopped {:.1} s after SIGTERM: {}",
                    node.plan.id,
                    took.as_secs_f64(),
                    describe(ended)
                );
            }
        }
    }
}

/// Sends SIGTERM to `child` while it runs; one gone already is fine, as the caller
/// reaps it either way.
fn send_sigterm(child: &Child) {
    if let Some(pid) = child
        .id()
        .and_then(|pid| Pid::from_raw(pid.try_into().ok()?))
    {
        let _ = kill_process(pid, Signal::TERM);
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
