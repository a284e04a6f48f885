//! Mutual authentication of a peer connection with the cluster secret.
//!
//! The server speaks first with a random nonce. The client answers with
//! `HMAC-SHA256(secret, server nonce ‖ client node id)`, its node id and a nonce of its
//! own; the server checks the MAC in constant time and closes the connection on a
//! mismatch, before reading anything else. The server then proves itself with
//! `HMAC-SHA256(secret, client nonce ‖ server nonce)`, which the client checks before it
//! sends anything else. The two MAC inputs differ in length (40 and 64 bytes), so one
//! side's answer can never be replayed as the other's.
//!
//! The handshake is the only thing either side reads from a peer that has not proven
//! the secret, in plain frames of at most [`MAX_HANDSHAKE_FRAME_LEN`] bytes. Its
//! outcome is the connection's [`SessionKeys`], derived with HKDF from the secret, both
//! nonces and the client's id (see [`super::seal`]): every frame after the handshake,
//! both ways, is sealed with them and numbered, and a frame that does not open (altered,
//! replayed, reordered, or relayed from another connection) drops the connection. So a
//! man in the middle who cannot learn the secret can only relay a connection whole or
//! cut it, never speak in it.

use std::fmt;
use std::sync::Arc;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use thiserror::Error;

use super::frame::MAX_HANDSHAKE_FRAME_LEN;
use super::seal::{Handshake, NONCE_LEN, SessionKeys, Side};
use super::stream::{PeerError, PeerStream};
use crate::replication::NodeId;

type HmacSha256 = Hmac<Sha256>;

/// Bytes of a nonce and of a MAC.
const LEN: usize = NONCE_LEN;

/// The fewest bytes a cluster secret may have.
pub const MIN_SECRET_LEN: usize = 16;

/// Why a cluster secret cannot be used.
#[derive(Debug, Error)]
pub enum SecretError {
    /// The secret is too short to resist guessing.
    #[error("the cluster secret has {len} bytes; it needs at least {MIN_SECRET_LEN}")]
    TooShort {
        /// Its length.
        len: usize,
    },
}

/// The secret every node of a cluster shares; it authenticates peer connections.
///
/// Use 32 random bytes. It is kept as a keyed HMAC for the handshake and as bytes for
/// the key derivation of each connection; its `Debug` form never shows it.
#[derive(Clone)]
pub struct ClusterSecret {
    mac: HmacSha256,
    bytes: Arc<[u8]>,
}

impl ClusterSecret {
    /// The secret made of `bytes`, refused if shorter than [`MIN_SECRET_LEN`].
    pub fn new(bytes: &[u8]) -> Result<ClusterSecret, SecretError> {
        let too_short = SecretError::TooShort { len: bytes.len() };
        if bytes.len() < MIN_SECRET_LEN {
            return Err(too_short);
        }
        let mac = HmacSha256::new_from_slice(bytes).map_err(|_| too_short)?;
        Ok(ClusterSecret {
            mac,
            bytes: Arc::from(bytes),
        })
    }

    fn mac(&self, parts: &[&[u8]]) -> HmacSha256 {
        let mut mac = self.mac.clone();
        for part in parts {
            mac.update(part);
        }
        mac
    }
}

impl fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

/// The server's opening: a fresh nonce.
#[derive(Debug, Serialize, Deserialize)]
struct Challenge {
    nonce: [u8; LEN],
}

/// The client's answer: who it is, its proof, and a nonce for the server to answer.
#[derive(Debug, Serialize, Deserialize)]
struct Hello {
    node_id: NodeId,
    mac: [u8; LEN],
    nonce: [u8; LEN],
}

/// The server's proof.
#[derive(Debug, Serialize, Deserialize)]
struct Proof {
    mac: [u8; LEN],
}

fn nonce() -> Result<[u8; LEN], PeerError> {
    let mut nonce = [0; LEN];
    getrandom::fill(&mut nonce).map_err(PeerError::Random)?;
    Ok(nonce)
}

fn client_mac(secret: &ClusterSecret, server_nonce: &[u8; LEN], node_id: NodeId) -> HmacSha256 {
    secret.mac(&[server_nonce, &node_id.to_be_bytes()])
}

fn server_mac(
    secret: &ClusterSecret,
    client_nonce: &[u8; LEN],
    server_nonce: &[u8; LEN],
) -> HmacSha256 {
    secret.mac(&[client_nonce, server_nonce])
}

/// Checks `mac` against `expected` in constant time.
fn check(expected: HmacSha256, mac: &[u8; LEN]) -> Result<(), PeerError> {
    expected
        .verify_slice(mac)
        .map_err(|_| PeerError::Unauthenticated)
}

/// The server side: challenges the client and answers its challenge; the client's id
/// and the connection's keys.
pub(super) async fn accept(
    stream: &mut PeerStream,
    secret: &ClusterSecret,
) -> Result<(NodeId, SessionKeys), PeerError> {
    let server_nonce = nonce()?;
    let challenge = Challenge {
        nonce: server_nonce,
    };
    stream.send(&challenge, MAX_HANDSHAKE_FRAME_LEN).await?;
    let hello: Hello = stream.expect(MAX_HANDSHAKE_FRAME_LEN).await?;
    check(client_mac(secret, &server_nonce, hello.node_id), &hello.mac)?;
    let mac = server_mac(secret, &hello.nonce, &server_nonce);
    let proof = Proof {
        mac: mac.finalize().into_bytes().into(),
    };
    stream.send(&proof, MAX_HANDSHAKE_FRAME_LEN).await?;
    let handshake = Handshake {
        server_nonce: &server_nonce,
        client_nonce: &hello.nonce,
        client: hello.node_id,
    };
    let keys = SessionKeys::derive(&secret.bytes, &handshake, Side::Server);
    Ok((hello.node_id, keys))
}

/// The client side: answers the server's challenge as `node_id` and checks its proof;
/// the connection's keys.
pub(super) async fn connect(
    stream: &mut PeerStream,
    secret: &ClusterSecret,
    node_id: NodeId,
) -> Result<SessionKeys, PeerError> {
    let challenge: Challenge = stream.expect(MAX_HANDSHAKE_FRAME_LEN).await?;
    let client_nonce = nonce()?;
    let mac = client_mac(secret, &challenge.nonce, node_id);
    let hello = Hello {
        node_id,
        mac: mac.finalize().into_bytes().into(),
        nonce: client_nonce,
    };
    stream.send(&hello, MAX_HANDSHAKE_FRAME_LEN).await?;
    let proof: Proof = stream.expect(MAX_HANDSHAKE_FRAME_LEN).await?;
    check(
        server_mac(secret, &client_nonce, &challenge.nonce),
        &proof.mac,
    )?;
    let handshake = Handshake {
        server_nonce: &challenge.nonce,
        client_nonce: &client_nonce,
        client: node_id,
    };
    Ok(SessionKeys::derive(&secret.bytes, &handshake, Side::Client))
}
