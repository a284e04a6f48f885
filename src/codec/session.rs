//! Session bodies: OC_SESSION_SETUP (400) request and response, OC_SESSION_EXCHANGEKEY
//! (402) request (digest §3.8; RFC 3652 layout unverified, J9 layout confirmed in
//! J9 `Encoder.encodeSessionSetupRequest/decodeSessionSetupRequest/
//! encodeSessionSetupResponse/decodeSetupSessionResponse`).
//!
//! Owns [`SessionSetup`], [`KeyExchange`] and [`SessionSetupAnswer`]. Pure; depends
//! only on [`crate::values::wire`]. OC_SESSION_TERMINATE (401) has J9's generic body
//! (a handle, `/`), typed in [`super::Request`].
//!
//! J9 quirk: the encoder counts the 2-octet KeyExchangeMode as 4 octets in
//! BodyLength, so every setup request and response J9 writes ends in 2 zero octets.
//! We write them too, and accept a body with or without them (J9's decoder ignores
//! what is left); any other trailing octet is an error.

use crate::values::wire::{DecodeError, Reader, Writer};

/// The key exchange a setup asks for, with its key material.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KeyExchange {
    /// 0: no key (J9 refuses to encode it; kept for decoding).
    None,
    /// 1: the server encrypts a fresh session key to this HS_PUBKEY-encoded RSA key.
    CipherClient {
        /// The client's RSA public key, HS_PUBKEY encoding.
        public_key: Vec<u8>,
    },
    /// 2: the server sends its public key; the client sends the session key (OC 402).
    CipherServer,
    /// 3: the session key is encrypted to the HS_PUBKEY at this handle and index.
    CipherHandle {
        /// The handle holding the key.
        handle: Vec<u8>,
        /// Its index.
        index: u32,
    },
    /// 4: Diffie-Hellman; J9's default client mode.
    DiffieHellman {
        /// The client's `DH_PUB_KEY` (y, p, g), HS_PUBKEY encoding.
        public_key: Vec<u8>,
    },
}

impl KeyExchange {
    /// The KeyExchangeMode on the wire.
    pub fn mode(&self) -> u16 {
        match self {
            KeyExchange::None => 0,
            KeyExchange::CipherClient { .. } => 1,
            KeyExchange::CipherServer => 2,
            KeyExchange::CipherHandle { .. } => 3,
            KeyExchange::DiffieHellman { .. } => 4,
        }
    }
}

/// The body of an OC_SESSION_SETUP request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionSetup {
    /// Seconds the client wants the session to live (J9 default 86 400).
    pub timeout: u32,
    /// Who the session is for; empty for an anonymous session.
    pub identity_handle: Vec<u8>,
    /// The index of the identity (J9: `-1`, 0xFFFFFFFF, when anonymous).
    pub identity_index: u32,
    /// How the session key is agreed.
    pub exchange: KeyExchange,
}

/// The J9 trailing octets (see the module documentation).
const J9_PADDING: [u8; 2] = [0, 0];

impl SessionSetup {
    /// Appends the body, J9's 2 trailing zero octets included.
    pub fn encode(&self, w: &mut Writer) {
        w.u16(self.exchange.mode());
        w.u32(self.timeout);
        w.bytes(&self.identity_handle);
        w.u32(self.identity_index);
        match &self.exchange {
            KeyExchange::CipherClient { public_key }
            | KeyExchange::DiffieHellman { public_key } => {
                w.bytes(public_key);
            }
            KeyExchange::CipherHandle { handle, index } => {
                w.bytes(handle);
                w.u32(*index);
            }
            KeyExchange::None | KeyExchange::CipherServer => {}
        }
        w.raw(&J9_PADDING);
    }

    /// Reads a body from a reader bounded to it, J9's padding optional.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mode = r.u16("key exchange mode")?;
        let timeout = r.u32("session timeout")?;
        let identity_handle = r.bytes("identity handle")?.to_vec();
        let identity_index = r.u32("identity index")?;
        let exchange = match mode {
            0 => KeyExchange::None,
            1 => KeyExchange::CipherClient {
                public_key: r.bytes("exchange key")?.to_vec(),
            },
            2 => KeyExchange::CipherServer,
            3 => KeyExchange::CipherHandle {
                handle: r.bytes("exchange key handle")?.to_vec(),
                index: r.u32("exchange key index")?,
            },
            4 => KeyExchange::DiffieHellman {
                public_key: r.bytes("exchange key")?.to_vec(),
            },
            other => {
                return Err(DecodeError::InvalidField {
                    field: "key exchange mode",
                    value: u64::from(other),
                });
            }
        };
        skip_padding(r)?;
        Ok(SessionSetup {
            timeout,
            identity_handle,
            identity_index,
            exchange,
        })
    }
}

/// The body of a successful OC_SESSION_SETUP response (after any request digest).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionSetupAnswer {
    /// The KeyExchangeMode of the request.
    pub mode: u16,
    /// Mode 1, 3: the encrypted `u32 cipher ‖ key`; mode 4: `u32 cipher ‖ DH_PUB_KEY`;
    /// mode 2: the server's public key.
    pub data: Vec<u8>,
}

impl SessionSetupAnswer {
    /// Appends the body, J9's 2 trailing zero octets included.
    pub fn encode(&self, w: &mut Writer) {
        w.u16(self.mode);
        w.bytes(&self.data);
        w.raw(&J9_PADDING);
    }

    /// Reads a body from a reader bounded to it, J9's padding optional.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mode = r.u16("key exchange mode")?;
        let data = r.bytes("session key data")?.to_vec();
        skip_padding(r)?;
        Ok(SessionSetupAnswer { mode, data })
    }
}

/// Consumes J9's 2 zero octets when exactly they are left.
fn skip_padding(r: &mut Reader<'_>) -> Result<(), DecodeError> {
    if r.remaining() == J9_PADDING.len() {
        let padding = r.take(J9_PADDING.len(), "J9 padding")?;
        if padding != J9_PADDING {
            return Err(DecodeError::InvalidField {
                field: "J9 padding",
                value: u64::from(u16::from_be_bytes([padding[0], padding[1]])),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::testing::hex;

    fn round_trip(setup: SessionSetup, body_hex: &str) {
        let mut w = Writer::new();
        setup.encode(&mut w);
        let bytes = w.into_bytes();
        assert_eq!(bytes, hex(body_hex));
        let mut r = Reader::new(&bytes);
        assert_eq!(SessionSetup::decode(&mut r).unwrap(), setup);
        r.finish("setup").unwrap();
        // Without J9's padding it decodes the same.
        let mut r = Reader::new(&bytes[..bytes.len() - 2]);
        assert_eq!(SessionSetup::decode(&mut r).unwrap(), setup);
    }

    #[test]
    fn dh_setup_has_the_j9_layout() {
        round_trip(
            SessionSetup {
                timeout: 86_400,
                identity_handle: b"0.NA/T".to_vec(),
                identity_index: 300,
                exchange: KeyExchange::DiffieHellman {
                    public_key: vec![0xab, 0xcd],
                },
            },
            "0004 00015180 00000006 302e4e412f54 0000012c 00000002 abcd 0000",
        );
    }

    #[test]
    fn anonymous_server_and_handle_modes_round_trip() {
        round_trip(
            SessionSetup {
                timeout: 60,
                identity_handle: vec![],
                identity_index: u32::MAX,
                exchange: KeyExchange::CipherServer,
            },
            "0002 0000003c 00000000 ffffffff 0000",
        );
        round_trip(
            SessionSetup {
                timeout: 60,
                identity_handle: vec![],
                identity_index: u32::MAX,
                exchange: KeyExchange::CipherHandle {
                    handle: b"0.NA/T".to_vec(),
                    index: 7,
                },
            },
            "0003 0000003c 00000000 ffffffff 00000006 302e4e412f54 00000007 0000",
        );
    }

    #[test]
    fn answer_round_trips_with_and_without_padding() {
        let answer = SessionSetupAnswer {
            mode: 4,
            data: vec![0, 0, 0, 3, 9],
        };
        let mut w = Writer::new();
        answer.encode(&mut w);
        let bytes = w.into_bytes();
        assert_eq!(bytes, hex("0004 00000005 0000000309 0000"));
        for len in [bytes.len(), bytes.len() - 2] {
            let mut r = Reader::new(&bytes[..len]);
            assert_eq!(SessionSetupAnswer::decode(&mut r).unwrap(), answer);
            r.finish("answer").unwrap();
        }
    }

    #[test]
    fn unknown_mode_and_dirty_padding_are_refused() {
        let bad_mode = hex("0009 0000003c 00000000 ffffffff");
        assert!(SessionSetup::decode(&mut Reader::new(&bad_mode)).is_err());
        let dirty = hex("0002 0000003c 00000000 ffffffff 0001");
        assert!(SessionSetup::decode(&mut Reader::new(&dirty)).is_err());
        let hostile = hex("0004 0000003c 00000000 ffffffff ffffffff");
        assert!(SessionSetup::decode(&mut Reader::new(&hostile)).is_err());
    }
}
