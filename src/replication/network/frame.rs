//! Plain peer frames: a `u32` big-endian length, then that many bytes of one postcard
//! value. The handshake travels in these; everything after it travels in the sealed
//! frames of [`super::seal`], which share this module's bounds and errors.
//!
//! Sans-IO: these functions take and return bytes and never touch a socket. The length
//! is checked against a bound before anything is allocated for the body, so a peer
//! that announces a huge frame costs nothing but the error.

use serde::Serialize;
use serde::de::DeserializeOwned;
use thiserror::Error;

/// Bytes of the length prefix.
pub const HEADER_LEN: usize = 4;

/// The largest body a peer frame may have once the peer is authenticated: room for a
/// snapshot chunk (openraft sends 3 MiB by default) and a large batch of log entries.
pub const MAX_FRAME_LEN: usize = 64 << 20;

/// The largest body of a handshake frame, read before the peer is authenticated.
pub const MAX_HANDSHAKE_FRAME_LEN: usize = 128;

/// Why bytes are not a valid frame, or a value cannot become one.
#[derive(Debug, Error)]
pub enum FrameError {
    /// The body is longer than the bound for this point of the conversation.
    #[error("frame of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// The body length, announced or encoded.
        len: u64,
        /// The bound.
        max: usize,
    },
    /// postcard could not encode the value.
    #[error("cannot encode frame: {0}")]
    Encode(postcard::Error),
    /// The body is not a postcard value of the expected type.
    #[error("frame body is not a valid message: {0}")]
    Decode(postcard::Error),
    /// The body has bytes after the value.
    #[error("{count} unexpected trailing bytes in frame")]
    TrailingBytes {
        /// How many bytes were left.
        count: usize,
    },
    /// A sealed frame's tag is not that of the next frame of its connection and
    /// direction: it was altered, replayed, reordered or sealed with other keys.
    #[error("frame failed authentication")]
    BadTag,
    /// An authenticated sealed frame has a kind this version does not know.
    #[error("unknown frame kind {kind}")]
    UnknownKind {
        /// The kind byte.
        kind: u8,
    },
    /// A direction of a connection has sealed or opened 2^64 - 1 frames.
    #[error("frame sequence numbers exhausted")]
    SequenceExhausted,
    /// The bytes given after a sealed frame's header are not as many as it announces.
    #[error("sealed frame announces {expected} bytes after its header, got {got}")]
    Length {
        /// Body and tag as announced.
        expected: usize,
        /// What was given.
        got: usize,
    },
}

/// `value` as one frame, header included, refused if its body passes `max` bytes.
pub fn encode<T: Serialize>(value: &T, max: usize) -> Result<Vec<u8>, FrameError> {
    let mut frame = postcard::to_extend(value, vec![0; HEADER_LEN]).map_err(FrameError::Encode)?;
    let body_len = frame.len() - HEADER_LEN;
    let too_large = || FrameError::TooLarge {
        len: u64::try_from(body_len).unwrap_or(u64::MAX),
        max,
    };
    if body_len > max {
        return Err(too_large());
    }
    let header = u32::try_from(body_len).map_err(|_| too_large())?;
    frame[..HEADER_LEN].copy_from_slice(&header.to_be_bytes());
    Ok(frame)
}

/// The body length a header announces, refused if it passes `max`.
pub fn body_len(header: [u8; HEADER_LEN], max: usize) -> Result<usize, FrameError> {
    let len = u32::from_be_bytes(header);
    match usize::try_from(len) {
        Ok(len) if len <= max => Ok(len),
        _ => Err(FrameError::TooLarge {
            len: u64::from(len),
            max,
        }),
    }
}

/// The value in a frame body; bytes after it are an error.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, FrameError> {
    let (value, rest) = postcard::take_from_bytes(body).map_err(FrameError::Decode)?;
    if rest.is_empty() {
        Ok(value)
    } else {
        Err(FrameError::TrailingBytes { count: rest.len() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_round_trips() {
        let value = (7_u64, "handle".to_owned(), vec![1_u8, 2, 3]);
        let frame = encode(&value, MAX_FRAME_LEN).unwrap();
        let header: [u8; HEADER_LEN] = frame[..HEADER_LEN].try_into().unwrap();
        let len = body_len(header, MAX_FRAME_LEN).unwrap();
        assert_eq!(len, frame.len() - HEADER_LEN);
        assert_eq!(header, u32::try_from(len).unwrap().to_be_bytes());
        let back: (u64, String, Vec<u8>) = decode(&frame[HEADER_LEN..]).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn an_oversize_header_is_refused_before_any_body_is_read() {
        let error = body_len(u32::MAX.to_be_bytes(), MAX_FRAME_LEN).unwrap_err();
        assert!(matches!(error, FrameError::TooLarge { len, .. } if len == u64::from(u32::MAX)));
        let just_over = u32::try_from(MAX_HANDSHAKE_FRAME_LEN + 1).unwrap();
        assert!(body_len(just_over.to_be_bytes(), MAX_HANDSHAKE_FRAME_LEN).is_err());
        assert_eq!(body_len(128_u32.to_be_bytes(), 128).unwrap(), 128);
    }

    #[test]
    fn an_oversize_value_is_not_encoded() {
        let error = encode(&vec![0_u8; 200], MAX_HANDSHAKE_FRAME_LEN).unwrap_err();
        assert!(matches!(
            error,
            FrameError::TooLarge {
                max: MAX_HANDSHAKE_FRAME_LEN,
                ..
            }
        ));
    }

    #[test]
    fn trailing_and_truncated_bodies_are_errors() {
        let frame = encode(&(1_u8, 2_u8), MAX_FRAME_LEN).unwrap();
        let one: Result<u8, _> = decode(&frame[HEADER_LEN..]);
        assert!(matches!(one, Err(FrameError::TrailingBytes { count: 1 })));
        let short: Result<(u8, u8, u8), _> = decode(&frame[HEADER_LEN..]);
        assert!(matches!(short, Err(FrameError::Decode(_))));
    }
}
