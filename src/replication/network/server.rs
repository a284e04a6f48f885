//! The answering side: a node's [`Registry`] of the groups it belongs to (and of its
//! node calls), which reads each request's [`Destination`] and hands the body to the
//! group's Raft, or to the node.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, PoisonError, RwLock};

use openraft::raft::AppendEntriesResponse;
use openraft::{Raft, ServerState};

use super::listener::{Dispatch, DispatchFuture};
use super::message::{
    self, Destination, ForwardError, GroupAnswer, GroupCall, Reply, TakeOverRefused, fatal,
};
use crate::replication::admin::{self, AdminRequest};
use crate::replication::contact::{LeaderContact, Standing};
use crate::replication::held::HeldCommits;
use crate::replication::machine::Machine;
use crate::replication::proposer::Proposer;
use crate::replication::types::LogId;
use crate::replication::{GroupConfig, GroupId, LogStore, Node, NodeId};

/// The answer body (after [`Reply::Answered`]) an endpoint gives, or why the request
/// could not be read.
pub type EndpointAnswer<'a> = Pin<Box<dyn Future<Output = Result<Vec<u8>, String>> + Send + 'a>>;

/// Something that answers the bodies of requests sent to it: a group, or the node.
pub trait Endpoint: Send + Sync + 'static {
    /// The answer to request `body` from peer `from`.
    fn answer<'a>(&'a self, from: NodeId, body: &'a [u8]) -> EndpointAnswer<'a>;

    /// The answer to the admin request `body` (a group's member answers these; other
    /// endpoints refuse them).
    fn admin<'a>(&'a self, body: &'a [u8]) -> EndpointAnswer<'a>;
}

/// Everything a node answers on its peer port: its groups, by id, and its node calls.
/// Groups are added as they start and removed as they stop.
#[derive(Default)]
pub struct Registry {
    groups: RwLock<HashMap<GroupId, Arc<dyn Endpoint>>>,
    node: RwLock<Option<Arc<dyn Endpoint>>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let groups = self.groups.read().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Registry")
            .field("groups", &groups.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// Answers calls to `group` with `endpoint` from now on.
    pub fn add_group(&self, group: GroupId, endpoint: Arc<dyn Endpoint>) {
        let mut groups = self.groups.write().unwrap_or_else(PoisonError::into_inner);
        groups.insert(group, endpoint);
    }

    /// Stops answering calls to `group`.
    pub fn remove_group(&self, group: GroupId) {
        let mut groups = self.groups.write().unwrap_or_else(PoisonError::into_inner);
        groups.remove(&group);
    }

    /// Answers node calls with `endpoint` from now on.
    pub fn set_node(&self, endpoint: Arc<dyn Endpoint>) {
        *self.node.write().unwrap_or_else(PoisonError::into_inner) = Some(endpoint);
    }

    fn endpoint(&self, destination: Destination) -> Option<Arc<dyn Endpoint>> {
        match destination {
            Destination::Group(group) | Destination::Admin(group) => {
                let groups = self.groups.read().unwrap_or_else(PoisonError::into_inner);
                groups.get(&group).cloned()
            }
            Destination::Node => self
                .node
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        }
    }

    async fn answer(&self, from: NodeId, request: Vec<u8>) -> Vec<u8> {
        let (destination, body) = match message::split_head::<Destination>(&request) {
            Ok(split) => split,
            Err(error) => return reply(&Reply::Malformed(error.to_string()), &[]),
        };
        let Some(endpoint) = self.endpoint(destination) else {
            let group = match destination {
                Destination::Group(group) | Destination::Admin(group) => Some(group),
                Destination::Node => None,
            };
            return reply(&Reply::NoSuchGroup(group), &[]);
        };
        let answered = match destination {
            Destination::Admin(_) => endpoint.admin(body).await,
            Destination::Group(_) | Destination::Node => endpoint.answer(from, body).await,
        };
        match answered {
            Ok(answer) => reply(&Reply::Answered, &answer),
            Err(reason) => reply(&Reply::Malformed(reason), &[]),
        }
    }
}

/// `head` followed by `body`.
fn reply(head: &Reply, body: &[u8]) -> Vec<u8> {
    // A `Reply` always encodes: its only payloads are strings and ids.
    let mut bytes = postcard::to_stdvec(head).unwrap_or_default();
    bytes.extend_from_slice(body);
    bytes
}

impl Dispatch for Registry {
    fn dispatch(&self, from: NodeId, request: Vec<u8>) -> DispatchFuture<'_> {
        Box::pin(self.answer(from, request))
    }
}

/// One group of this node as its peers reach it: its Raft, the proposer of its
/// writes, when it last heard a leader, the commits of its held applies, and this
/// node's addresses.
pub struct GroupEndpoint<M: Machine> {
    raft: Raft<GroupConfig<M>>,
    proposer: Proposer<M>,
    contact: Arc<LeaderContact>,
    log: LogStore<M>,
    held: HeldCommits,
    me: Node,
}

impl<M: Machine> GroupEndpoint<M> {
    /// The endpoint answering with `raft`, the Raft of the node whose addresses are
    /// `me`; forwarded writes go to `proposer`, with the node's own; a leader's calls
    /// are stamped on `contact`; a canvass reads how far `log` reaches; a status
    /// commits what `held` holds first.
    pub fn new(
        raft: Raft<GroupConfig<M>>,
        proposer: Proposer<M>,
        contact: Arc<LeaderContact>,
        log: LogStore<M>,
        held: HeldCommits,
        me: Node,
    ) -> GroupEndpoint<M> {
        GroupEndpoint {
            raft,
            proposer,
            contact,
            log,
            held,
            me,
        }
    }

    async fn carry_out(&self, from: NodeId, call: GroupCall<M>) -> GroupAnswer<M> {
        let raft = &self.raft;
        match call {
            GroupCall::AppendEntries(rpc) => {
                let answer = raft.append_entries(rpc).await;
                if let Ok(response) = &answer
                    && !matches!(response, AppendEntriesResponse::HigherVote(_))
                {
                    self.contact.heard();
                }
                GroupAnswer::AppendEntries(answer.map_err(fatal))
            }
            GroupCall::Vote(rpc) => {
                let answer = raft.vote(rpc).await;
                if answer.as_ref().is_ok_and(|response| response.vote_granted) {
                    self.contact.heard();
                }
                GroupAnswer::Vote(answer.map_err(fatal))
            }
            GroupCall::InstallSnapshot(rpc) => {
                let sender = rpc.vote;
                let answer = raft.install_snapshot(rpc).await;
                // A chunk is answered with the receiver's vote: the sender's, unless
                // the sender is a deposed leader.
                if answer
                    .as_ref()
                    .is_ok_and(|response| response.vote == sender)
                {
                    self.contact.heard();
                }
                GroupAnswer::InstallSnapshot(answer)
            }
            GroupCall::Canvass => GroupAnswer::Canvass(self.standing().await),
            GroupCall::TakeOver { last_log } => {
                GroupAnswer::TakeOver(self.take_over(from, last_log).await)
            }
            GroupCall::Forward(request) => {
                GroupAnswer::Forward(self.proposer.propose(request).await)
            }
            GroupCall::ReadIndex => GroupAnswer::ReadIndex(
                raft.get_read_log_id()
                    .await
                    .map(|(read, _applied)| read.map(|log_id| log_id.index))
                    .map_err(ForwardError::from),
            ),
        }
    }

    /// Stands for election at once, as the leader `from` asks before it stops: only
    /// when `from` is the leader this member follows and its log reaches the leader's
    /// `last_log`. The stopping leader grants its vote (it waits first until its
    /// own lease, which nothing renews after its election, has run out), which with
    /// this member's own is a quorum of three: neither the pre-vote canvass nor the
    /// other members' leases are waited for.
    async fn take_over(&self, from: NodeId, leaders: Option<LogId>) -> Result<(), TakeOverRefused> {
        let leader = self.raft.metrics().borrow().current_leader;
        if leader != Some(from) {
            return Err(TakeOverRefused::NotMyLeader {
                asker: from,
                leader,
            });
        }
        let unable = |error: &dyn std::fmt::Display| TakeOverRefused::Unable(error.to_string());
        let mine = self.log.last_log_id().await.map_err(|e| unable(&e))?;
        if mine < leaders {
            return Err(TakeOverRefused::Behind { mine, leaders });
        }
        self.raft.trigger().elect().await.map_err(|e| unable(&e))
    }

    /// Whether this node hears a leader (or is one), and its last log id.
    async fn standing(&self) -> Standing {
        let leading = self.raft.metrics().borrow().state == ServerState::Leader;
        // An unreadable log reaches nowhere: the asker is then the better candidate.
        let last_log = self.log.last_log_id().await.ok().flatten();
        Standing {
            hears_leader: leading || self.contact.hears_leader(),
            last_log,
        }
    }
}

impl<M: Machine> Endpoint for GroupEndpoint<M> {
    fn answer<'a>(&'a self, from: NodeId, body: &'a [u8]) -> EndpointAnswer<'a> {
        Box::pin(async move {
            let call: GroupCall<M> = decode(body)?;
            let answer = self.carry_out(from, call).await;
            postcard::to_stdvec(&answer).map_err(|error| error.to_string())
        })
    }

    fn admin<'a>(&'a self, body: &'a [u8]) -> EndpointAnswer<'a> {
        Box::pin(async move {
            let request: AdminRequest = decode(body)?;
            let answer = admin::carry_out(&self.raft, &self.held, &self.me, request).await;
            postcard::to_stdvec(&answer).map_err(|error| error.to_string())
        })
    }
}

/// Exactly one value of `T` in `body`.
fn decode<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    super::frame::decode(body).map_err(|error| error.to_string())
}
