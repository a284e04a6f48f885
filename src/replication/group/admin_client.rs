//! The `hdl cluster` side of the admin calls: asks one node about one of its groups,
//! and follows the leader's address when the node is not the leader.

use std::net::SocketAddr;
use std::time::Duration;

use super::error::GroupError;
use crate::replication::admin::{AdminAnswer, AdminRequest, MemberStatus};
use crate::replication::network::{self, ClusterSecret, ForwardError, Links};
use crate::replication::{GroupId, NodeId};

/// The node id the admin client gives in the peer handshake; it is never a member.
const ADMIN_CLIENT_ID: NodeId = 0;

/// How many times a call follows a "not the leader" answer to the named leader.
const MAX_REDIRECTS: usize = 3;

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
    /// answers that it is not the leader, asks the leader it names instead.
    pub async fn call(
        &self,
        peer: SocketAddr,
        group: GroupId,
        request: &AdminRequest,
    ) -> Result<AdminAnswer, GroupError> {
        let mut at = peer;
        let mut redirects = 0;
        loop {
            let answer =
                network::admin_call(&self.links, at, group, request, self.timeout).await?;
            match answer {
                Ok(answer) => return Ok(answer),
                Err(ForwardError::NotLeader {
                    leader_node: Some(leader),
                    ..
                }) if leader.peer != at && redirects < MAX_REDIRECTS => {
                    redirects += 1;
                    at = leader.peer;
                }
                Err(ForwardError::Fatal(fatal)) => return Err(GroupError::Stopped(fatal)),
                Err(error) => return Err(GroupError::Refused(error)),
            }
        }
    }

    /// What the node at `peer` says about itself and its member of `group`.
    pub async fn status(&self, peer: SocketAddr, group: GroupId) -> Result<MemberStatus, GroupError> {
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
