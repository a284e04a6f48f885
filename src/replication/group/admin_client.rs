//! The `hdl cluster` side of the admin calls: asks one node about one of its groups,
//! and follows the leader's address when the node is not the leader.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;

use super::error::GroupError;
use crate::replication::admin::{AdminAnswer, AdminRequest, MemberStatus};
use crate::replication::network::{self, ClusterSecret, ForwardError, Links};
use crate::replication::{GroupId, NodeId};

/// The node id the admin client gives in the peer handshake; it is never a member.
const ADMIN_CLIENT_ID: NodeId = 0;

/// How long a call keeps trying while the group elects a leader: the leader it was
/// sent to is gone, or nobody knows a leader yet. An election takes a few election
/// timeouts (`[cluster] election_timeout_max_ms`, 250 ms by default).
const ELECTION_PATIENCE: Duration = Duration::from_secs(10);

/// How long to wait before asking again during an election.
const RETRY_STEP: Duration = Duration::from_millis(100);

/// Sends admin calls to the nodes of a cluster, authenticated with its secret.
#[derive(Debug, Clone)]
pub struct AdminClient {
    links: Links,
    timeout: Duration,
}

impl AdminClient {
    /// A client with `secret` that waits at most `timeout` for each answer.
    pub fn new(secret: ClusterSecret, timeout: Duration) -> AdminClient {
        AdminClient {
            links: Links::new(ADMIN_CLIENT_ID, secret),
            timeout,
        }
    }

    /// Sends `request` to `group` on the node whose peer address is `peer`; when it
    /// answers that it is not the leader, asks the leader it names instead. While the
    /// group is electing (no leader known, the named leader unreachable, no quorum),
    /// asks `peer` again, for at most ten seconds (an election takes a few election timeouts).
    pub async fn call(
        &self,
        peer: SocketAddr,
        group: GroupId,
        request: &AdminRequest,
    ) -> Result<AdminAnswer, GroupError> {
        let deadline = Instant::now() + ELECTION_PATIENCE;
        let mut at = peer;
        loop {
            let answer = network::admin_call(&self.links, at, group, request, self.timeout).await;
            let electing = match answer {
                Ok(Ok(answer)) => return Ok(answer),
                // Two nodes naming each other (a stale view) end at the deadline.
                Ok(Err(ForwardError::NotLeader {
                    leader_node: Some(leader),
                    ..
                })) if leader.peer != at && Instant::now() < deadline => {
                    at = leader.peer;
                    continue;
                }
                Ok(Err(
                    error @ (ForwardError::NotLeader { .. } | ForwardError::QuorumNotEnough(_)),
                )) => GroupError::Refused(error),
                Ok(Err(ForwardError::Fatal(fatal))) => return Err(GroupError::Stopped(fatal)),
                Ok(Err(error)) => return Err(GroupError::Refused(error)),
                // The node named as leader is gone: the group is electing.
                Err(error) if at != peer => GroupError::Peer(error),
                Err(error) => return Err(GroupError::Peer(error)),
            };
            if Instant::now() >= deadline {
                return Err(electing);
            }
            tokio::time::sleep(RETRY_STEP).await;
            at = peer;
        }
    }

    /// What the node at `peer` says about itself and its member of `group`.
    pub async fn status(
        &self,
        peer: SocketAddr,
        group: GroupId,
    ) -> Result<MemberStatus, GroupError> {
        match self.call(peer, group, &AdminRequest::Status).await? {
            AdminAnswer::Status(status) => Ok(*status),
            AdminAnswer::Done => Err(GroupError::UnexpectedAnswer("Done")),
        }
    }

    /// Sends the node at `peer` a node call (its body as the node layer encodes it)
    /// and returns the answer's body.
    pub async fn node_call(&self, peer: SocketAddr, body: &[u8]) -> Result<Vec<u8>, GroupError> {
        Ok(network::node_call(&self.links, peer, body, self.timeout).await?)
    }
}
