//! TCP framing (digest §1.4; RFC 3652 §2.3.2).
//!
//! Owns [`Frame`] and [`next_frame`]. Pure: it looks at buffered octets and never
//! reads a socket. On TCP (and in HTTP bodies) a message is its envelope followed by
//! exactly MessageLength octets; continuous responses (CN) are several such units
//! back to back.

use super::envelope::{ENVELOPE_LEN, Envelope};
use super::message::MAX_MESSAGE_LEN;

/// What the start of a receive buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    /// Not a whole message yet: at least `needed` more octets must arrive.
    Incomplete {
        /// The octets still missing (for the envelope, or for the whole frame).
        needed: usize,
    },
    /// The first `len` octets are one message (envelope included), ready for
    /// [`super::Message::decode`].
    Ready {
        /// Octets of the frame.
        len: usize,
    },
    /// The envelope announces more than [`MAX_MESSAGE_LEN`] octets: answer with a
    /// protocol error and close the connection rather than buffer it.
    TooLarge {
        /// The envelope, for the reply's RequestId.
        envelope: Envelope,
    },
}

/// Finds the first frame in `buf`.
pub fn next_frame(buf: &[u8]) -> Frame {
    let Ok(envelope) = Envelope::peek(buf) else {
        return Frame::Incomplete {
            needed: ENVELOPE_LEN - buf.len(),
        };
    };
    let message_len = envelope.message_length as usize;
    if message_len > MAX_MESSAGE_LEN {
        return Frame::TooLarge { envelope };
    }
    let len = ENVELOPE_LEN + message_len;
    if buf.len() < len {
        Frame::Incomplete {
            needed: len - buf.len(),
        }
    } else {
        Frame::Ready { len }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::testing::hex;

    /// Digest §11.1: a 67-octet request.
    const REQUEST: &str = "020a020b 00000000 01020304 00000000 0000002f 00000001 00000000
        19000000 000f 00 00 5f5e1000 00000013 00000007 302e4e412f3130 00000000 00000000
        00000000";

    #[test]
    fn frames_grow_from_envelope_to_message() {
        let bytes = hex(REQUEST);
        assert_eq!(next_frame(&[]), Frame::Incomplete { needed: 20 });
        assert_eq!(next_frame(&bytes[..5]), Frame::Incomplete { needed: 15 });
        assert_eq!(next_frame(&bytes[..20]), Frame::Incomplete { needed: 47 });
        assert_eq!(next_frame(&bytes[..66]), Frame::Incomplete { needed: 1 });
        assert_eq!(next_frame(&bytes), Frame::Ready { len: 67 });
    }

    #[test]
    fn back_to_back_messages_are_framed_one_at_a_time() {
        let mut stream = hex(REQUEST);
        stream.extend(hex(REQUEST));
        assert_eq!(next_frame(&stream), Frame::Ready { len: 67 });
        assert_eq!(next_frame(&stream[67..]), Frame::Ready { len: 67 });
    }

    #[test]
    fn oversized_message_is_refused_from_its_envelope() {
        let bytes = hex("020a020b 00000000 01020304 00000000 7fffffff");
        let Frame::TooLarge { envelope } = next_frame(&bytes) else {
            panic!("not refused");
        };
        assert_eq!(envelope.request_id, 0x0102_0304);
        let limit = hex("020a020b 00000000 01020304 00000000 00040000");
        let needed = MAX_MESSAGE_LEN;
        assert_eq!(next_frame(&limit), Frame::Incomplete { needed });
    }
}
