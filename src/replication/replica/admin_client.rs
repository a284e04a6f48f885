//! The `hdl cluster` side of the admin calls: asks one node, follows the leader's
//! address when the node is not the leader.

use std::net::SocketAddr;
use std::time::Duration;

use super::error::ReplicaError;
use crate::replication::admin::{AdminAnswer, AdminRequest, MemberStatus};
use crate::replication::network::{ClusterSecret, ForwardError, Network};
use crate::replication::{Node, NodeId, Request, RequestId, Response};
use crate::storage::{Command, CommandResult};

/// The node id the admin client gives in the peer handshake; it is never a member.
const ADMIN_CLIENT_ID: NodeId = 0;

/// How many times a call follows a "not the leader" answer to the named leader.
const MAX_REDIRECTS: usize = 3;

/// Sends admin calls to the nodes of a replica set, authenticated with its secret.
#[derive(Debug, Clone)]
pub struct AdminClient {
    network: Network,
    timeout: Duration,
}

impl AdminClient {
    /// A client with `secret` that waits at most `timeout` for each answer.
    pub fn new(secret: ClusterSecret, timeout: Duration) -> AdminClient {
        AdminClient {
            network: Network::new(ADMIN_CLIENT_ID, secret),
            timeout,
        }
    }

    /// Sends `request` to the node whose peer address is `peer`; when it answers that
    /// it is not the leader, asks the leader it names instead.
    pub async fn call(
        &self,
        peer: SocketAddr,
        request: &AdminRequest,
    ) -> Result<AdminAnswer, ReplicaError> {
        let mut at = peer;
        let mut redirects = 0;
        loop {
            let node = Node {
                peer: at,
                ..Node::default()
            };
            let mut connection = self.network.connection(ADMIN_CLIENT_ID, &node);
            match connection.admin(request.clone(), self.timeout).await? {
                Ok(answer) => return Ok(answer),
                Err(ForwardError::NotLeader {
                    leader_node: Some(leader),
                    ..
                }) if leader.peer != at && redirects < MAX_REDIRECTS => {
                    redirects += 1;
                    at = leader.peer;
                }
                Err(ForwardError::Fatal(fatal)) => return Err(ReplicaError::Stopped(fatal)),
                Err(error) => return Err(ReplicaError::Refused(error)),
            }
        }
    }

    /// Has the leader of the set of the node at `peer` propose `command` (the
    /// command goes into the log as given: no validation, no timestamps; for the
    /// set's own set-up, such as its bootstrap administrator).
    pub async fn write(
        &self,
        peer: SocketAddr,
        command: Command,
    ) -> Result<CommandResult, ReplicaError> {
        let mut at = peer;
        let request = Request {
            id: RequestId(rand::random()),
            command,
        };
        for _ in 0..=MAX_REDIRECTS {
            let node = Node {
                peer: at,
                ..Node::default()
            };
            let mut connection = self.network.connection(ADMIN_CLIENT_ID, &node);
            match connection.forward(request.clone(), self.timeout).await? {
                Ok(Response::Command(result)) => return Ok(result),
                Ok(Response::NoCommand) => return Err(ReplicaError::NoCommandResult),
                Err(ForwardError::NotLeader {
                    leader_node: Some(leader),
                    ..
                }) if leader.peer != at => at = leader.peer,
                Err(ForwardError::Fatal(fatal)) => return Err(ReplicaError::Stopped(fatal)),
                Err(error) => return Err(ReplicaError::Refused(error)),
            }
        }
        Err(ReplicaError::UnexpectedAnswer("too many leader redirects"))
    }

    /// What the node at `peer` says about itself and its set.
    pub async fn status(&self, peer: SocketAddr) -> Result<MemberStatus, ReplicaError> {
        match self.call(peer, &AdminRequest::Status).await? {
            AdminAnswer::Status(status) => Ok(*status),
            AdminAnswer::Done => Err(ReplicaError::UnexpectedAnswer("Done")),
        }
    }
}
