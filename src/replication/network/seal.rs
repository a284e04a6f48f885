//! Authenticated frames: the peer wire once the handshake is over.
//!
//! Sans-IO: this module derives the session keys, seals frames into bytes and opens
//! them from bytes; it never touches a socket or the clock.
//!
//! One frame:
//!
//! ```text
//! offset   bytes  field
//! 0        4      body length n, u32 big-endian, at most MAX_FRAME_LEN
//! 4        1      kind: 0 call, 1 answer, 2 ping, 3 pong
//! 5        8      call id, u64 big-endian (an answer carries its call's; 0 in pings and pongs)
//! 13       n      body, opaque to the link
//! 13 + n   16     tag
//! ```
//!
//! `tag = HMAC-SHA256(key, seq ‖ header ‖ body)`, cut to its first 16 bytes, where
//! `header` is the 13 bytes above and `seq` is the frame's number in its direction of
//! its connection (u64 big-endian, from 0, never sent). Each direction has its own key:
//!
//! ```text
//! PRK = HKDF-Extract(salt = server nonce ‖ client nonce, IKM = cluster secret)
//! key = HKDF-Expand(PRK, info = "hdl peer link v1" ‖ direction ‖ client node id (u64 BE), 32)
//! direction = "client to server" | "server to client"
//! ```
//!
//! So a frame opens only on the connection, in the direction and at the position it
//! was sealed for: a flipped bit, a replayed, dropped or reordered frame, a frame
//! reflected back to its sender and one relayed from another connection all fail the
//! tag. The tag is checked in constant time before any field but the length (which
//! only bounds the read) is used.
//!
//! Why 16 bytes of tag: HMAC-SHA256 cut to 128 bits is the standard truncation
//! (RFC 4868, NIST SP 800-107), and a forger gets one guess per connection (a wrong
//! tag drops it, and a new connection needs the secret), so 2^-128 per try is ample;
//! the 16 bytes saved per frame are a tenth of a small forwarded write.

use std::fmt;

use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::frame::{FrameError, MAX_FRAME_LEN};
use crate::replication::NodeId;

type HmacSha256 = Hmac<Sha256>;

/// Bytes of a sealed frame's header: length, kind and call id.
pub const SEALED_HEADER_LEN: usize = 13;

/// Bytes of a sealed frame's tag.
pub const TAG_LEN: usize = 16;

/// Bytes of each handshake nonce the keys are derived from.
pub const NONCE_LEN: usize = 32;

/// The HKDF info prefix; a new wire format gets a new label.
const LABEL: &[u8] = b"hdl peer link v1";

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A request, client to server.
    Call,
    /// The answer to the call with the same id, server to client.
    Answer,
    /// "Are you there?", client to server, answered by a pong at once.
    Ping,
    /// The answer to a ping.
    Pong,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Kind::Call => 0,
            Kind::Answer => 1,
            Kind::Ping => 2,
            Kind::Pong => 3,
        }
    }

    fn from_byte(byte: u8) -> Result<Kind, FrameError> {
        match byte {
            0 => Ok(Kind::Call),
            1 => Ok(Kind::Answer),
            2 => Ok(Kind::Ping),
            3 => Ok(Kind::Pong),
            kind => Err(FrameError::UnknownKind { kind }),
        }
    }
}

/// An opened frame.
#[derive(Debug, PartialEq, Eq)]
pub struct Frame {
    /// What it is.
    pub kind: Kind,
    /// The call it belongs to.
    pub call: u64,
    /// Its body.
    pub body: Vec<u8>,
}

/// Which end of the connection the keys are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The end that connected and sent the hello.
    Client,
    /// The end that accepted and sent the challenge.
    Server,
}

/// The keys of one end of one connection: one to seal what it sends, one to open
/// what it receives.
#[derive(Debug, Clone)]
pub struct SessionKeys {
    /// Seals this end's frames.
    pub sealer: Sealer,
    /// Opens the other end's frames.
    pub opener: Opener,
}

/// The handshake's nonces and the client's id: what makes a connection's keys its own.
#[derive(Debug, Clone, Copy)]
pub struct Handshake<'a> {
    /// The nonce of the server's challenge.
    pub server_nonce: &'a [u8; NONCE_LEN],
    /// The nonce of the client's hello.
    pub client_nonce: &'a [u8; NONCE_LEN],
    /// The node id the client gave in its hello.
    pub client: NodeId,
}

impl SessionKeys {
    /// The keys of `side` for the connection of `handshake`, from the cluster secret.
    pub fn derive(secret: &[u8], handshake: &Handshake<'_>, side: Side) -> SessionKeys {
        let mut salt = [0; 2 * NONCE_LEN];
        salt[..NONCE_LEN].copy_from_slice(handshake.server_nonce);
        salt[NONCE_LEN..].copy_from_slice(handshake.client_nonce);
        let hkdf = Hkdf::<Sha256>::new(Some(&salt), secret);
        let client = handshake.client.to_be_bytes();
        let key = |direction: &[u8]| {
            let mut okm = [0; 32];
            hkdf.expand_multi_info(&[LABEL, direction, &client], &mut okm)
                .expect("32 bytes is a valid HKDF-SHA256 output length");
            HmacSha256::new_from_slice(&okm).expect("HMAC takes a key of any length")
        };
        let to_server = key(b"client to server");
        let to_client = key(b"server to client");
        let (send, receive) = match side {
            Side::Client => (to_server, to_client),
            Side::Server => (to_client, to_server),
        };
        SessionKeys {
            sealer: Sealer { key: send, seq: 0 },
            opener: Opener {
                key: receive,
                seq: 0,
            },
        }
    }
}

/// Seals the frames of one direction, numbering them. Its `Debug` form shows the
/// number, never the key.
#[derive(Clone)]
pub struct Sealer {
    key: HmacSha256,
    seq: u64,
}

impl fmt::Debug for Sealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sealer")
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

impl Sealer {
    /// Appends `body` as the next frame to `out` (header, body and tag), refused if the
    /// body passes [`MAX_FRAME_LEN`] or the direction has used up its numbers.
    pub fn seal(
        &mut self,
        kind: Kind,
        call: u64,
        body: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), FrameError> {
        let len = checked_len(body.len())?;
        let seq = self.seq;
        self.seq = seq.checked_add(1).ok_or(FrameError::SequenceExhausted)?;
        let mut header = [0; SEALED_HEADER_LEN];
        header[..4].copy_from_slice(&len.to_be_bytes());
        header[4] = kind.byte();
        header[5..].copy_from_slice(&call.to_be_bytes());
        let tag = tag(&self.key, seq, &header, body);
        out.reserve(SEALED_HEADER_LEN + body.len() + TAG_LEN);
        out.extend_from_slice(&header);
        out.extend_from_slice(body);
        out.extend_from_slice(&tag[..TAG_LEN]);
        Ok(())
    }
}

/// Opens the frames of one direction, in order. Its `Debug` form shows the number,
/// never the key.
#[derive(Clone)]
pub struct Opener {
    key: HmacSha256,
    seq: u64,
}

/// How many bytes follow `header` (body and tag), refused if the body would pass
/// [`MAX_FRAME_LEN`]. Nothing else in the header is looked at before the tag is checked.
pub fn rest_len(header: &[u8; SEALED_HEADER_LEN]) -> Result<usize, FrameError> {
    let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
    match usize::try_from(len) {
        Ok(len) if len <= MAX_FRAME_LEN => Ok(len + TAG_LEN),
        _ => Err(FrameError::TooLarge {
            len: u64::from(len),
            max: MAX_FRAME_LEN,
        }),
    }
}

impl fmt::Debug for Opener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Opener")
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

impl Opener {
    /// The frame of `header` and `rest` (its body then its tag, [`rest_len`] bytes),
    /// refused unless its tag is that of the next frame of this direction. `rest`
    /// becomes the body, without copying.
    pub fn open(
        &mut self,
        header: &[u8; SEALED_HEADER_LEN],
        mut rest: Vec<u8>,
    ) -> Result<Frame, FrameError> {
        let expected = rest_len(header)?;
        if rest.len() != expected {
            return Err(FrameError::Length {
                expected,
                got: rest.len(),
            });
        }
        let body_len = expected - TAG_LEN;
        let (body, received) = rest.split_at(body_len);
        let mut mac = self.key.clone();
        mac.update(&self.seq.to_be_bytes());
        mac.update(header);
        mac.update(body);
        mac.verify_truncated_left(received)
            .map_err(|_| FrameError::BadTag)?;
        self.seq = self
            .seq
            .checked_add(1)
            .ok_or(FrameError::SequenceExhausted)?;
        let kind = Kind::from_byte(header[4])?;
        let mut call = [0; 8];
        call.copy_from_slice(&header[5..]);
        rest.truncate(body_len);
        Ok(Frame {
            kind,
            call: u64::from_be_bytes(call),
            body: rest,
        })
    }
}

fn checked_len(len: usize) -> Result<u32, FrameError> {
    let too_large = || FrameError::TooLarge {
        len: u64::try_from(len).unwrap_or(u64::MAX),
        max: MAX_FRAME_LEN,
    };
    if len > MAX_FRAME_LEN {
        return Err(too_large());
    }
    u32::try_from(len).map_err(|_| too_large())
}

fn tag(key: &HmacSha256, seq: u64, header: &[u8; SEALED_HEADER_LEN], body: &[u8]) -> [u8; 32] {
    let mut mac = key.clone();
    mac.update(&seq.to_be_bytes());
    mac.update(header);
    mac.update(body);
    mac.finalize().into_bytes().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"a shared cluster secret, 32 byte";

    fn keys(server_nonce: u8, client_nonce: u8, client: NodeId) -> (SessionKeys, SessionKeys) {
        let handshake = Handshake {
            server_nonce: &[server_nonce; NONCE_LEN],
            client_nonce: &[client_nonce; NONCE_LEN],
            client,
        };
        (
            SessionKeys::derive(SECRET, &handshake, Side::Client),
            SessionKeys::derive(SECRET, &handshake, Side::Server),
        )
    }

    fn seal(sealer: &mut Sealer, kind: Kind, call: u64, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        sealer.seal(kind, call, body, &mut out).unwrap();
        out
    }

    fn open(opener: &mut Opener, bytes: &[u8]) -> Result<Frame, FrameError> {
        let header: [u8; SEALED_HEADER_LEN] = bytes[..SEALED_HEADER_LEN].try_into().unwrap();
        assert_eq!(rest_len(&header)?, bytes.len() - SEALED_HEADER_LEN);
        opener.open(&header, bytes[SEALED_HEADER_LEN..].to_vec())
    }

    #[test]
    fn frames_round_trip_both_ways_in_order() {
        let (mut client, mut server) = keys(1, 2, 7);
        for (call, body) in [(1_u64, &b"first"[..]), (2, b""), (3, &[0xff; 1000][..])] {
            let bytes = seal(&mut client.sealer, Kind::Call, call, body);
            assert_eq!(bytes.len(), SEALED_HEADER_LEN + body.len() + TAG_LEN);
            let frame = open(&mut server.opener, &bytes).unwrap();
            assert_eq!(
                frame,
                Frame {
                    kind: Kind::Call,
                    call,
                    body: body.to_vec()
                }
            );
            let answer = seal(&mut server.sealer, Kind::Answer, call, b"done");
            let frame = open(&mut client.opener, &answer).unwrap();
            assert_eq!(
                (frame.kind, frame.call, &frame.body[..]),
                (Kind::Answer, call, &b"done"[..])
            );
        }
        let ping = seal(&mut client.sealer, Kind::Ping, 0, b"");
        assert_eq!(open(&mut server.opener, &ping).unwrap().kind, Kind::Ping);
    }

    /// The wire format, pinned: an HKDF and HMAC computed outside this code (Python's
    /// `hmac` module) for nonces of 0x01 and 0x02 bytes and client id 7.
    #[test]
    fn the_first_call_frame_matches_a_vector() {
        let (mut client, _) = keys(1, 2, 7);
        let bytes = seal(&mut client.sealer, Kind::Call, 5, b"hi");
        assert_eq!(
            hex(&bytes),
            concat!(
                "00000002",
                "00",
                "0000000000000005",
                "6869",
                "568342828334d9428d298090a36ebbf1"
            )
        );
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|byte| format!("{byte:02x}")).collect()
    }

    #[test]
    fn a_flipped_bit_anywhere_is_refused() {
        let (mut client, server) = keys(1, 2, 7);
        let bytes = seal(&mut client.sealer, Kind::Call, 9, b"payload");
        for bit in 0..bytes.len() * 8 {
            let mut tampered = bytes.clone();
            tampered[bit / 8] ^= 1 << (bit % 8);
            let mut opener = server.opener.clone();
            let header: [u8; SEALED_HEADER_LEN] = tampered[..SEALED_HEADER_LEN].try_into().unwrap();
            // A flipped length bit changes how many bytes the reader would take; the
            // tag is refused either way.
            let refused = opener.open(&header, tampered[SEALED_HEADER_LEN..].to_vec());
            assert!(
                matches!(
                    refused,
                    Err(FrameError::BadTag
                        | FrameError::Length { .. }
                        | FrameError::TooLarge { .. })
                ),
                "bit {bit}: {refused:?}"
            );
        }
    }

    #[test]
    fn replayed_and_reordered_frames_are_refused() {
        let (mut client, server) = keys(1, 2, 7);
        let first = seal(&mut client.sealer, Kind::Call, 1, b"one");
        let second = seal(&mut client.sealer, Kind::Call, 2, b"two");

        let mut opener = server.opener.clone();
        open(&mut opener, &first).unwrap();
        assert!(matches!(open(&mut opener, &first), Err(FrameError::BadTag)));

        let mut opener = server.opener.clone();
        assert!(matches!(
            open(&mut opener, &second),
            Err(FrameError::BadTag)
        ));

        let mut opener = server.opener;
        open(&mut opener, &first).unwrap();
        open(&mut opener, &second).unwrap();
    }

    #[test]
    fn frames_of_another_connection_or_direction_are_refused() {
        let (mut client, mut server) = keys(1, 2, 7);
        let bytes = seal(&mut client.sealer, Kind::Call, 1, b"one");
        // Another connection: any other nonce or client id gives other keys.
        for (server_nonce, client_nonce, id) in [(3, 2, 7), (1, 3, 7), (1, 2, 8), (2, 1, 7)] {
            let (_, mut other) = keys(server_nonce, client_nonce, id);
            assert!(matches!(
                open(&mut other.opener, &bytes),
                Err(FrameError::BadTag)
            ));
        }
        // Reflected back to its sender.
        assert!(matches!(
            open(&mut client.opener, &bytes),
            Err(FrameError::BadTag)
        ));
        // Another cluster secret.
        let handshake = Handshake {
            server_nonce: &[1; NONCE_LEN],
            client_nonce: &[2; NONCE_LEN],
            client: 7,
        };
        let mut stranger = SessionKeys::derive(
            b"not the cluster secret, 32 bytes",
            &handshake,
            Side::Server,
        );
        assert!(matches!(
            open(&mut stranger.opener, &bytes),
            Err(FrameError::BadTag)
        ));
        open(&mut server.opener, &bytes).unwrap();
    }

    #[test]
    fn an_unknown_kind_is_refused_after_the_tag_is_checked() {
        let (client, mut server) = keys(1, 2, 7);
        // A frame no sealer writes: kind 9, with a valid tag.
        let mut header = [0; SEALED_HEADER_LEN];
        header[4] = 9;
        let tag = tag(&client.sealer.key, 0, &header, b"");
        let mut bytes = header.to_vec();
        bytes.extend_from_slice(&tag[..TAG_LEN]);
        assert!(matches!(
            open(&mut server.opener, &bytes),
            Err(FrameError::UnknownKind { kind: 9 })
        ));
        // With a bad tag, the tag is what is refused.
        let (_, mut server) = keys(1, 2, 7);
        *bytes.last_mut().unwrap() ^= 1;
        assert!(matches!(
            open(&mut server.opener, &bytes),
            Err(FrameError::BadTag)
        ));
    }

    #[test]
    fn oversize_bodies_are_refused_before_reading_or_sealing() {
        let mut header = [0; SEALED_HEADER_LEN];
        header[..4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(
            rest_len(&header),
            Err(FrameError::TooLarge { .. })
        ));
        let max = u32::try_from(MAX_FRAME_LEN).unwrap();
        header[..4].copy_from_slice(&max.to_be_bytes());
        assert_eq!(rest_len(&header).unwrap(), MAX_FRAME_LEN + TAG_LEN);
        header[..4].copy_from_slice(&(max + 1).to_be_bytes());
        assert!(rest_len(&header).is_err());

        let (mut client, _) = keys(1, 2, 7);
        let mut out = Vec::new();
        let body = vec![0; MAX_FRAME_LEN + 1];
        assert!(matches!(
            client.sealer.seal(Kind::Call, 1, &body, &mut out),
            Err(FrameError::TooLarge { .. })
        ));
        assert!(out.is_empty());
    }

    #[test]
    fn a_short_or_long_rest_is_refused() {
        let (mut client, server) = keys(1, 2, 7);
        let bytes = seal(&mut client.sealer, Kind::Call, 1, b"one");
        let header: [u8; SEALED_HEADER_LEN] = bytes[..SEALED_HEADER_LEN].try_into().unwrap();
        let mut opener = server.opener;
        let short = bytes[SEALED_HEADER_LEN..bytes.len() - 1].to_vec();
        assert!(matches!(
            opener.open(&header, short),
            Err(FrameError::Length { .. })
        ));
        let mut long = bytes[SEALED_HEADER_LEN..].to_vec();
        long.push(0);
        assert!(matches!(
            opener.open(&header, long),
            Err(FrameError::Length { .. })
        ));
    }

    fn kind() -> impl proptest::strategy::Strategy<Value = Kind> {
        proptest::sample::select(vec![Kind::Call, Kind::Answer, Kind::Ping, Kind::Pong])
    }

    proptest::proptest! {
        #[test]
        fn any_frames_round_trip_in_order(
            frames in proptest::collection::vec(
                (kind(), proptest::num::u64::ANY, proptest::collection::vec(proptest::num::u8::ANY, 0..300)),
                1..20,
            )
        ) {
            let (mut client, mut server) = keys(4, 5, 6);
            let mut stream = Vec::new();
            for (kind, call, body) in &frames {
                client.sealer.seal(*kind, *call, body, &mut stream).unwrap();
            }
            let mut rest = &stream[..];
            for (kind, call, body) in frames {
                let header: [u8; SEALED_HEADER_LEN] = rest[..SEALED_HEADER_LEN].try_into().unwrap();
                let len = rest_len(&header).unwrap();
                let end = SEALED_HEADER_LEN + len;
                let frame = server.opener.open(&header, rest[SEALED_HEADER_LEN..end].to_vec()).unwrap();
                proptest::prop_assert_eq!(frame, Frame { kind, call, body });
                rest = &rest[end..];
            }
            proptest::prop_assert!(rest.is_empty());
        }

        #[test]
        fn arbitrary_bytes_never_open(
            fields in proptest::array::uniform9(proptest::num::u8::ANY),
            rest in proptest::collection::vec(proptest::num::u8::ANY, TAG_LEN..300),
        ) {
            let (_, mut server) = keys(4, 5, 6);
            let mut header = [0; SEALED_HEADER_LEN];
            let body_len = u32::try_from(rest.len() - TAG_LEN).unwrap();
            header[..4].copy_from_slice(&body_len.to_be_bytes());
            header[4..].copy_from_slice(&fields);
            proptest::prop_assert!(matches!(
                server.opener.open(&header, rest),
                Err(FrameError::BadTag)
            ));
        }
    }
}
