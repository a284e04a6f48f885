//! What `hdl export`, `hdl import` and `hdl bench import` share: the peer port of the
//! cluster's members (with the cluster secret), an administrator's session at each
//! member asked, and which replica set holds which handle.
//!
//! A session is opened by answering a node's challenge with the administrator's key
//! (`--auth … --key|--secret-file`, as the other client commands take), once per
//! member; the cluster map read through `--peer` says which set owns each handle's
//! slot, and each set is asked at its primary (found once, through its members'
//! status), so a batch is not forwarded on. A node that answers "not here" (a slot
//! moved) makes the caller read the map again ([`BulkLink::refresh`]).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::client::Credentials;
use crate::names::Handle;
use crate::node::bulk::{BulkAnswer, BulkCall, SessionRequest, SessionToken};
use crate::node::calls::NodeCall;
use crate::replication::network::read_secret_file;
use crate::replication::{AdminClient, GroupId, SetId, slot_of};
use crate::service::{SESSION_VERSION, session_challenge_body};
use anyhow::{Context, bail};
use clap::Args;

use super::admin_arg::AuthArgs;
use super::cluster_calls::{ask, cluster_map, set_info, unexpected};

/// How long one call may take: a batch of many handles committed by a quorum.
const CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// Where the cluster is and who the administrator is.
#[derive(Debug, Args)]
pub struct BulkArgs {
    /// Peer address of a member of the cluster (any set): the cluster map is read
    /// there. Default: the first node of `hdl cluster up`.
    #[arg(long, default_value = "127.0.0.1:2651")]
    peer: SocketAddr,
    /// The cluster secret file the members share. Default: `hdl cluster up`'s.
    #[arg(
        long,
        value_name = "FILE",
        default_value = "hdl-cluster/cluster.secret"
    )]
    cluster_secret_file: PathBuf,
    /// The administrator (`--auth INDEX:HANDLE` with `--key` or `--secret-file`).
    #[command(flatten)]
    auth: AuthArgs,
}

/// Which set owns which slot, and where each set is asked.
#[derive(Debug, Default)]
struct Routes {
    /// The set owning each slot; empty while the cluster has no ring (then every
    /// handle is the set of `--peer`'s node).
    owners: Vec<SetId>,
    /// Where each set is asked: its primary first, then its other members.
    members: BTreeMap<SetId, Vec<SocketAddr>>,
}

/// A link to a cluster's members for bulk calls, as one administrator.
#[derive(Debug)]
pub struct BulkLink {
    client: AdminClient,
    credentials: Credentials,
    peer: SocketAddr,
    routes: Mutex<Routes>,
    sessions: Mutex<HashMap<SocketAddr, SessionToken>>,
}

impl BulkLink {
    /// A link as `args` say, with the cluster's routes read.
    pub async fn connect(args: &BulkArgs) -> anyhow::Result<BulkLink> {
        let secret = read_secret_file(&args.cluster_secret_file)?;
        let Some(credentials) = args.auth.credentials()? else {
            bail!("an administrator is needed: --auth INDEX:HANDLE with --key or --secret-file");
        };
        BulkLink::with(
            AdminClient::new(secret, CALL_TIMEOUT),
            credentials,
            args.peer,
        )
        .await
    }

    /// A link through `client` to the cluster of the member at `peer`, as the
    /// administrator of `credentials`.
    pub async fn with(
        client: AdminClient,
        credentials: Credentials,
        peer: SocketAddr,
    ) -> anyhow::Result<BulkLink> {
        let link = BulkLink {
            client,
            credentials,
            peer,
            routes: Mutex::default(),
            sessions: Mutex::default(),
        };
        link.refresh().await?;
        Ok(link)
    }

    /// Reads the cluster map again, and finds each set's primary.
    pub async fn refresh(&self) -> anyhow::Result<()> {
        let map = cluster_map(&self.client, self.peer).await?;
        let mut routes = Routes {
            owners: map.slots.clone(),
            members: BTreeMap::new(),
        };
        if map.slots.is_empty() {
            let info = set_info(&self.client, self.peer).await?;
            let set = info
                .set
                .context("the node at --peer belongs to no replica set yet")?;
            routes.members.insert(set, vec![self.peer]);
        }
        for (set, record) in &map.sets {
            let mut members: Vec<_> = record.members.iter().collect();
            let first = members
                .first()
                .map_or(self.peer, |(_, member)| member.node.peer);
            if let Ok(status) = self.client.status(first, GroupId::Set(*set)).await {
                members.sort_by_key(|(id, _)| Some(**id) != status.leader);
            }
            let peers = members.into_iter().map(|(_, member)| member.node.peer);
            routes.members.insert(*set, peers.collect());
        }
        *self.routes.lock().unwrap_or_else(PoisonError::into_inner) = routes;
        Ok(())
    }

    /// Every replica set of the cluster.
    pub fn sets(&self) -> Vec<SetId> {
        let routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        routes.members.keys().copied().collect()
    }

    /// The set that owns `handle`.
    pub fn set_of(&self, handle: &Handle) -> anyhow::Result<SetId> {
        let routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        if routes.owners.is_empty() {
            return routes
                .members
                .keys()
                .next()
                .copied()
                .context("no replica set");
        }
        let count = u32::try_from(routes.owners.len()).context("slot count")?;
        let slot = slot_of(handle.key(), count);
        let owner = usize::try_from(slot.0)
            .ok()
            .and_then(|at| routes.owners.get(at));
        owner
            .copied()
            .with_context(|| format!("{handle}: no set owns its slot"))
    }

    /// Where `set` is asked.
    fn member(&self, set: SetId) -> anyhow::Result<SocketAddr> {
        let routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        let members = routes.members.get(&set);
        let first = members.and_then(|members| members.first()).copied();
        first.with_context(|| format!("replica set {} has no members", set.0))
    }

    /// Sends `request` to `set`'s member in the session there (opened on first use,
    /// and again if the member forgot it); the answer, and the request back.
    pub async fn call(
        &self,
        set: SetId,
        request: SessionRequest,
    ) -> anyhow::Result<(BulkAnswer, SessionRequest)> {
        let peer = self.member(set)?;
        let mut renew = false;
        let mut request = request;
        loop {
            let session = self.session(peer, renew).await?;
            let call = NodeCall::Bulk(BulkCall::InSession { session, request });
            let answer = self.node(peer, &call).await?;
            let NodeCall::Bulk(BulkCall::InSession { request: back, .. }) = call else {
                bail!("the call changed in flight");
            };
            match answer {
                BulkAnswer::Refused(reason) if !renew && reason.starts_with("no such session") => {
                    renew = true;
                    request = back;
                }
                answer => return Ok((answer, back)),
            }
        }
    }

    async fn node(&self, peer: SocketAddr, call: &NodeCall) -> anyhow::Result<BulkAnswer> {
        match ask(&self.client, peer, call).await? {
            crate::node::calls::NodeAnswer::Bulk(answer) => Ok(answer),
            other => Err(unexpected(peer, &other)),
        }
    }

    /// The session at `peer`, opened now if there is none or `renew` says so.
    async fn session(&self, peer: SocketAddr, renew: bool) -> anyhow::Result<SessionToken> {
        let known = {
            let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
            sessions.get(&peer).copied()
        };
        if let (Some(session), false) = (known, renew) {
            return Ok(session);
        }
        let (id, nonce) = match self
            .node(peer, &NodeCall::Bulk(BulkCall::Challenge))
            .await?
        {
            BulkAnswer::Challenge { id, nonce } => (id, nonce),
            other => bail!("the node at {peer} answered {other:?} to a challenge request"),
        };
        let body = session_challenge_body(nonce);
        let answer = self
            .credentials
            .answer_body(&body, SESSION_VERSION)
            .context("cannot answer the challenge with the administrator's key")?;
        let call = NodeCall::Bulk(BulkCall::Authenticate {
            challenge: id,
            answer: answer.encode(),
        });
        let session = match self.node(peer, &call).await? {
            BulkAnswer::Session(session) => session,
            BulkAnswer::Refused(reason) => bail!("the node at {peer}: {reason}"),
            other => bail!("the node at {peer} answered {other:?} to an authentication"),
        };
        let mut known = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        known.insert(peer, session);
        Ok(session)
    }
}
