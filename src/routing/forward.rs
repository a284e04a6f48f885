//! Getting a call to the replica set that owns a handle's slot: [`Forwarder`].
//!
//! Owns the route of one call: read the map (as this node has applied it), find the
//! slot's owner, carry the call out with the local service when this node's set owns
//! it, else send it to the owner's members in turn (starting with the member of this
//! node's rank) until one answers; a [`Error::NotHere`] answer re-reads the map and
//! routes again with a doubling backoff, for at most [`REROUTE_PATIENCE`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::metrics::{ForwardKind, Metrics};
use crate::names::Handle;
use crate::placement::{ClusterMap, MapGroup};
use crate::replication::{NodeId, SetId, slot_of};
use crate::service::{Error, RecordSource, Refusal, RoutedSlot, Service};
use crate::storage::Slot;
use crate::values::HandleValue;

use super::wire::{Answer, ForwardCall, run_local};
use super::{LocalSet, Peers};

/// How long a call keeps being routed again while the nodes it reaches say its slot is
/// not theirs (a slot changing hands, a map a little behind); then it is
/// [`Error::Unavailable`].
pub const REROUTE_PATIENCE: Duration = Duration::from_secs(2);

/// The first wait before routing again; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(10);

/// The longest wait between two routes of one call.
const MAX_BACKOFF: Duration = Duration::from_millis(200);

/// Sends calls to the replica set owning a slot, over [`Peers`].
#[derive(Debug, Clone)]
pub struct Forwarder {
    map: MapGroup,
    peers: Arc<dyn Peers>,
    me: NodeId,
    metrics: Arc<Metrics>,
}

impl Forwarder {
    /// A forwarder for node `me`, routing by `map`, sending over `peers` and counting
    /// every call it sends in `metrics`.
    pub fn new(map: MapGroup, peers: Arc<dyn Peers>, me: NodeId, metrics: Arc<Metrics>) -> Self {
        Forwarder {
            map,
            peers,
            me,
            metrics,
        }
    }

    /// The cluster map as this node has applied it.
    pub(super) fn map(&self) -> Result<Arc<ClusterMap>, Error> {
        Ok(self.map.map()?)
    }

    /// This node's rank in its set (its position among the members by node id), 0
    /// when the map does not record it.
    pub(super) fn rank(&self, map: &ClusterMap) -> usize {
        map.sets
            .values()
            .find_map(|set| set.members.keys().position(|id| *id == self.me))
            .unwrap_or(0)
    }

    /// Carries `call` out where `handle` lives: with the service of `local` (this
    /// node's set, if it has one and it owns the slot, or there is no ring yet) or at
    /// the owner set, routing again on [`Error::NotHere`] (see the module docs).
    pub(super) async fn route(
        &self,
        handle: &Handle,
        call: ForwardCall,
        local: Option<&watch::Receiver<Option<LocalSet>>>,
    ) -> Result<Answer, Error> {
        let deadline = Instant::now() + REROUTE_PATIENCE;
        let mut backoff = FIRST_BACKOFF;
        loop {
            let map = self.map()?;
            let outcome = match self.place(&map, handle, local)? {
                Place::Local { service, routed } => {
                    // The call's own handle is the one routed unless it is a prefix's write.
                    let routed = routed.filter(|_| call.handle() == Some(handle));
                    run_local(&service, &call, routed).await
                }
                Place::Remote { slot, owner } => self.send(&map, slot, owner, call.clone()).await,
            };
            let slot = match outcome {
                Err(Error::NotHere(slot) | Error::Refused(Refusal::NotHere(slot))) => slot,
                other => return other,
            };
            if Instant::now() + backoff > deadline {
                return Err(Error::Unavailable(slot));
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Where a call about `handle` goes by `map`: this node's own set (with the slot
    /// found, when there is a ring) when it owns the slot, or there is no ring yet;
    /// else the owner set.
    pub(super) fn place(
        &self,
        map: &ClusterMap,
        handle: &Handle,
        local: Option<&watch::Receiver<Option<LocalSet>>>,
    ) -> Result<Place, Error> {
        let local_set = local.and_then(|local| local.borrow().clone());
        let slot_count = map.slot_count();
        if slot_count == 0 {
            let set = local_set.ok_or(Error::NoSet)?;
            return Ok(Place::Local {
                service: set.service,
                routed: None,
            });
        }
        let slot = slot_of(handle.key(), slot_count);
        let owner = map.owner(slot);
        Ok(match local_set {
            Some(set) if Some(set.id) == owner => Place::Local {
                service: set.service,
                routed: Some(RoutedSlot { slot_count, slot }),
            },
            _ => Place::Remote { slot, owner },
        })
    }

    /// Sends `call` to a member of `owner` (the set owning `slot` in `map`): the member
    /// of this node's rank first, then the others in turn, until one answers;
    /// [`Error::Unavailable`] when none does.
    pub(super) async fn send(
        &self,
        map: &ClusterMap,
        slot: Slot,
        owner: Option<SetId>,
        call: ForwardCall,
    ) -> Result<Answer, Error> {
        let members: Vec<SocketAddr> = owner
            .and_then(|owner| map.sets.get(&owner))
            .map(|set| set.members.values().map(|m| m.node.peer).collect())
            .unwrap_or_default();
        let kind = match call {
            ForwardCall::Administer { .. } => ForwardKind::Write,
            _ => ForwardKind::Read,
        };
        let first = self.rank(map) % members.len().max(1);
        for peer in members.iter().cycle().skip(first).take(members.len()) {
            self.metrics.forwarded(kind);
            match self.peers.forward(*peer, call.clone()).await {
                Ok(answer) => return answer.map_err(Error::from),
                Err(error) => tracing::debug!(%error, %slot, "forwarding to another member"),
            }
        }
        Err(Error::Unavailable(slot))
    }
}

/// Where one call goes ([`Forwarder::place`]).
pub(super) enum Place {
    /// This node's own set answers it, with its service.
    Local {
        /// The set's service.
        service: Service,
        /// The handle's slot, when the map has a ring.
        routed: Option<RoutedSlot>,
    },
    /// Another set (or none known) owns the handle's slot.
    Remote {
        /// The handle's slot.
        slot: Slot,
        /// The set owning it, if the map names one.
        owner: Option<SetId>,
    },
}

/// Reads the records this node's store does not answer for from the set owning them.
#[async_trait]
impl RecordSource for Forwarder {
    async fn values(&self, handle: &Handle) -> Result<Option<Vec<HandleValue>>, Error> {
        let call = ForwardCall::Values {
            handle: handle.clone(),
        };
        match self.route(handle, call, None).await? {
            Answer::Values(values) => Ok(values),
            other => Err(unexpected(&other)),
        }
    }
}

/// A forwarded call answered with an answer to another kind of call.
pub(super) fn unexpected(answer: &Answer) -> Error {
    Error::Remote {
        code: crate::codec::ResponseCode::Error,
        message: format!("a forwarded call was answered with {}", answer.kind()),
    }
}
