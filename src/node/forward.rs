//! Forwarded handle calls over the peer link: the node's side of the routing layer's
//! [`Peers`] seam.
//!
//! Owns [`PeerLink`], which sends a [`ForwardCall`] to another node as a node call
//! ([`NodeCall::Forward`], postcard, authenticated by the cluster secret) and returns
//! its [`ForwardAnswer`]. The receiving node answers it with its own service
//! ([`crate::routing::answer_forwarded`], in [`super::calls::NodeEndpoint`]).

use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;

use crate::replication::AdminClient;
use crate::replication::network::ClusterSecret;
use crate::routing::{ForwardAnswer, ForwardCall, ForwardError, Peers};

use super::calls::{NodeAnswer, NodeCall, call_node};

/// How long a forwarded call waits for its answer: a write waits for its commit.
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends forwarded calls to the other nodes of the cluster.
#[derive(Debug, Clone)]
pub struct PeerLink {
    client: AdminClient,
}

impl PeerLink {
    /// A link proving `secret` to the nodes it calls.
    pub fn new(secret: ClusterSecret) -> PeerLink {
        PeerLink {
            client: AdminClient::new(secret, FORWARD_TIMEOUT),
        }
    }
}

#[async_trait]
impl Peers for PeerLink {
    async fn forward(
        &self,
        peer: SocketAddr,
        call: ForwardCall,
    ) -> Result<ForwardAnswer, ForwardError> {
        let answer = call_node(&self.client, peer, &NodeCall::Forward(call))
            .await
            .map_err(|error| ForwardError::Unreachable {
                peer,
                source: Box::new(error),
            })?;
        match answer {
            NodeAnswer::Forwarded(answer) => Ok(answer),
            NodeAnswer::Failed(reason) => Err(ForwardError::NotAnswered { peer, reason }),
            _ => Err(ForwardError::NotAnswered {
                peer,
                reason: "an answer to another call".to_owned(),
            }),
        }
    }
}
