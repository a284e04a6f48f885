//! Session keys and session MACs (digest §2.5, §3.8, §8.6), as a pure core for the
//! server and the client.
//!
//! Owns the key exchange of an OC_SESSION_SETUP ([`server_key_exchange`] on the
//! server, [`ClientKeyExchange`] on the client), the [`SessionKey`], and the `HS_MAC`
//! credential of session messages ([`session_credential`], [`verify_session_mac`]).
//! Depends on [`crate::codec`] (bodies, envelope, credential), [`crate::values`]
//! (HS_PUBKEY encodings) and the RustCrypto crates. No sockets, no clock; randomness
//! from the operating system.
//!
//! Wire and crypto facts, read in the J9 client sources (`HandleResolver.
//! setupSessionWithServer`, `GenericProvider.getKeyFromDH/generateSecretKey`,
//! `Util.encrypt/getBytesFromPublicKey`, `AbstractMessage.signMessage/verifyMessage`):
//! - Mode 1 (CIPHER_CLIENT): the answer's data is the RSA PKCS#1 v1.5 encryption, to
//!   the client's HS_PUBKEY, of `u32 cipher ‖ key` (≥ 2.2).
//! - Mode 4 (DH, J9's default; J9 clients make a 1024-bit group): the answer's data is
//!   `u32 cipher ‖ DH_PUB_KEY(y, p, g)` in the client's group (≥ 2.4). For AES (3) the
//!   key is the shared secret as Java's `KeyAgreement.generateSecret` gives it (padded
//!   to the length of `p`), leading zero octets skipped while more than 32 octets are
//!   left, then its first 32 octets.
//! - The session MAC (≥ 2.7): `HMAC-SHA256(key, Major ‖ Minor ‖ [SuggMajor ‖
//!   SuggMinor if ≥ 2.8] ‖ SessionId ‖ RequestId ‖ Counter ‖ header ‖ body)`, type
//!   `HS_MAC`, algorithm `HMAC-SHA256`, the counter in the signer-index field. The whole
//!   session key (32 octets here) is the HMAC key.
//! - Unverified: the 2.5/2.6 MAC layouts (refused here, we only MAC ≥ 2.7); that a J9
//!   client accepts 32-octet AES session keys in mode 1 (its own server sends the
//!   output of Java's AES `KeyGenerator`, 16 or 32 octets depending on the JDK); the
//!   J9 server's counter rule (we require strictly increasing counters).
//!
//! Invariants: every size from the network is bounded before arithmetic (RSA keys by
//! [`super::keys`], a DH prime to [`MIN_DH_BITS`]`..=`[`MAX_DH_BITS`]); degenerate DH
//! public values (≤ 1, ≥ p − 1) are refused; MACs are compared in constant time.

use std::sync::Arc;

use hmac::{Hmac, Mac};
use rsa::{BigUint, Pkcs1v15Encrypt};
use sha2::Sha256;
use thiserror::Error;

use super::keys::{KeyError, SigningKey, VerifyingKey};
use crate::codec::{Credential, Envelope, KeyExchange, ProtocolVersion, SessionSetupAnswer};
use crate::values::{DecodeError, PublicKey, Reader, Writer};

/// The cipher code J9 gives AES (`HdlSecurityProvider.ENCRYPT_ALG_AES`).
pub const CIPHER_AES: u32 = 3;
/// Octets of a session key.
pub const SESSION_KEY_LEN: usize = 32;
/// The smallest DH prime accepted, in bits (J9 clients use 1024).
pub const MIN_DH_BITS: usize = 1024;
/// The largest DH prime accepted, in bits.
pub const MAX_DH_BITS: usize = 8192;
/// Bits of a DH private exponent we choose.
const DH_EXPONENT_BITS: usize = 256;
/// The first version whose MAC covers the envelope fields.
const V2_7: ProtocolVersion = ProtocolVersion::new(2, 7);
/// The first version whose MAC covers the suggested version.
const V2_8: ProtocolVersion = ProtocolVersion::new(2, 8);
/// The credential type of a session MAC.
pub const MAC_TYPE: &[u8] = b"HS_MAC";
/// The MAC algorithm name from 2.7 on.
const MAC_ALGORITHM: &[u8] = b"HMAC-SHA256";

/// RFC 7919 `ffdhe2048` prime (generator 2): the group our client offers.
const FFDHE2048_P: &str = "FFFFFFFFFFFFFFFFADF85458A2BB4A9AAFDC5620273D3CF1D8B9C583CE2D3695A9E13641146433FBCC939DCE249B3EF97D2FE363630C75D8F681B202AEC4617AD3DF1ED5D5FD65612433F51F5F066ED0856365553DED1AF3B557135E7F57C935984F0C70E0E68B77E2A689DAF3EFE8721DF158A136ADE73530ACCA4F483A797ABC0AB182B324FB61D108A94BB2C8E3FBB96ADAB760D7F4681D4F42A3DE394DF4AE56EDE76372BB190B07A7C8EE0A6D709E02FCE1CDF7E2ECC03404CD28342F619172FE9CE98583FF8E4F1232EEF28183C3FE3B1B4C6FAD733BB5FCBC2EC22005C58EF1837D1683B2C6F34A26C1B2EFFA886B423861285C97FFFFFFFFFFFFFFFF";

/// Why a session key could not be agreed or a session message not verified.
#[derive(Debug, Error)]
pub enum SessionError {
    /// The key exchange mode is not offered by this server.
    #[error(
        "key exchange mode {mode} is not supported (use 1, client RSA key, or 4, Diffie-Hellman)"
    )]
    UnsupportedMode {
        /// The mode asked for.
        mode: u16,
    },
    /// The exchange key is not of the kind the mode needs.
    #[error("the exchange key is not {expected}")]
    WrongKeyType {
        /// `RSA_PUB_KEY` or `DH_PUB_KEY`.
        expected: &'static str,
    },
    /// The exchange key did not decode or is not a valid key.
    #[error("exchange key: {0}")]
    Key(#[from] KeyError),
    /// A DH parameter is out of bounds or degenerate.
    #[error("Diffie-Hellman {field} is out of bounds or degenerate")]
    DhParameter {
        /// `p`, `g` or `y`.
        field: &'static str,
    },
    /// The cipher code of an answer is not AES.
    #[error("session cipher {code} is not supported (AES is 3)")]
    UnsupportedCipher {
        /// The code sent.
        code: u32,
    },
    /// The answer's data is malformed.
    #[error("malformed session key data: {0}")]
    Decode(#[from] DecodeError),
    /// The answer's mode is not the one asked for.
    #[error("the server answered key exchange mode {found}, not {asked}")]
    ModeMismatch {
        /// The mode asked for.
        asked: u16,
        /// The mode answered.
        found: u16,
    },
    /// RSA encryption of the session key failed.
    #[error("cannot encrypt the session key")]
    Encrypt,
    /// The operating system's randomness failed.
    #[error("no randomness for a session key: {0}")]
    Random(getrandom::Error),
    /// A session message carries no credential.
    #[error("a session message must carry an HS_MAC credential")]
    MissingMac,
    /// The credential is not an HMAC-SHA256 `HS_MAC`, or the version is before 2.7.
    #[error("the session credential is not HS_MAC/HMAC-SHA256 in protocol 2.7 or later")]
    UnsupportedMac,
    /// The MAC does not verify with the session key.
    #[error("the session MAC does not verify")]
    MacMismatch,
}

/// A symmetric session key. Its octets never appear in `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionKey(Vec<u8>);

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SessionKey({} octets)", self.0.len())
    }
}

impl SessionKey {
    /// A fresh random key.
    pub fn generate() -> Result<Self, SessionError> {
        random_octets(SESSION_KEY_LEN).map(SessionKey)
    }

    /// The key's octets, for the session cipher.
    pub(crate) fn octets(&self) -> &[u8] {
        &self.0
    }

    /// A key of these octets (tests with known answers).
    #[cfg(test)]
    pub(crate) fn from_octets(octets: Vec<u8>) -> Self {
        SessionKey(octets)
    }
}

fn random_octets(len: usize) -> Result<Vec<u8>, SessionError> {
    let mut octets = vec![0; len];
    getrandom::fill(&mut octets).map_err(SessionError::Random)?;
    Ok(octets)
}

/// The server's side of a setup: the session key and the data of the answer, for
/// the setup's `exchange`. Modes 0, 2 and 3 are [`SessionError::UnsupportedMode`]
/// (this server has no key pair; mode 3 would need a resolution of another handle).
pub fn server_key_exchange(exchange: &KeyExchange) -> Result<(SessionKey, Vec<u8>), SessionError> {
    match exchange {
        KeyExchange::CipherClient { public_key } => encrypt_to_client(public_key),
        KeyExchange::DiffieHellman { public_key } => server_dh(public_key),
        other => Err(SessionError::UnsupportedMode { mode: other.mode() }),
    }
}

fn encrypt_to_client(public_key: &[u8]) -> Result<(SessionKey, Vec<u8>), SessionError> {
    let VerifyingKey::Rsa(rsa) = VerifyingKey::from_hs_pubkey(public_key)? else {
        return Err(SessionError::WrongKeyType {
            expected: PublicKey::RSA_KEY_TYPE,
        });
    };
    let key = SessionKey::generate()?;
    let mut plain = Writer::new();
    plain.u32(CIPHER_AES);
    plain.raw(&key.0);
    let mut rng = rsa::rand_core::OsRng;
    let data = rsa
        .encrypt(&mut rng, Pkcs1v15Encrypt, &plain.into_bytes())
        .map_err(|_| SessionError::Encrypt)?;
    Ok((key, data))
}

/// A Diffie-Hellman group and public value, checked.
struct DhPublic {
    p: BigUint,
    g: BigUint,
    y: BigUint,
}

impl DhPublic {
    fn decode(bytes: &[u8]) -> Result<Self, SessionError> {
        let PublicKey::Dh { y, p, g } = PublicKey::decode(bytes).map_err(KeyError::Decode)? else {
            return Err(SessionError::WrongKeyType {
                expected: PublicKey::DH_KEY_TYPE,
            });
        };
        let p = BigUint::from_bytes_be(&p);
        if !(MIN_DH_BITS..=MAX_DH_BITS).contains(&p.bits())
            || (&p % BigUint::from(2u8)) == BigUint::from(0u8)
        {
            return Err(SessionError::DhParameter { field: "p" });
        }
        let (g, y) = (BigUint::from_bytes_be(&g), BigUint::from_bytes_be(&y));
        check_dh_value(&g, &p, "g")?;
        check_dh_value(&y, &p, "y")?;
        Ok(DhPublic { p, g, y })
    }

    fn encode(&self) -> Vec<u8> {
        PublicKey::Dh {
            y: self.y.to_bytes_be(),
            p: self.p.to_bytes_be(),
            g: self.g.to_bytes_be(),
        }
        .encode()
    }
}

/// Refuses 0, 1, p − 1 and anything larger.
fn check_dh_value(value: &BigUint, p: &BigUint, field: &'static str) -> Result<(), SessionError> {
    let one = BigUint::from(1u8);
    if *value <= one || *value >= p - &one {
        return Err(SessionError::DhParameter { field });
    }
    Ok(())
}

/// A fresh private exponent.
fn dh_exponent() -> Result<BigUint, SessionError> {
    let mut octets = random_octets(DH_EXPONENT_BITS / 8)?;
    if let Some(first) = octets.first_mut() {
        *first |= 0x80;
    }
    Ok(BigUint::from_bytes_be(&octets))
}

/// The AES session key from a DH shared secret, as J9 derives it (module doc).
fn key_from_secret(secret: &BigUint, p: &BigUint) -> SessionKey {
    let raw = secret.to_bytes_be();
    let width = p.bits().div_ceil(8);
    let mut padded = vec![0; width.saturating_sub(raw.len())];
    padded.extend_from_slice(&raw);
    let skip = padded
        .iter()
        .take(padded.len().saturating_sub(SESSION_KEY_LEN))
        .take_while(|&&octet| octet == 0)
        .count();
    SessionKey(
        padded
            .into_iter()
            .skip(skip)
            .take(SESSION_KEY_LEN)
            .collect(),
    )
}

fn server_dh(public_key: &[u8]) -> Result<(SessionKey, Vec<u8>), SessionError> {
    let client = DhPublic::decode(public_key)?;
    let x = dh_exponent()?;
    let ours = DhPublic {
        y: client.g.modpow(&x, &client.p),
        p: client.p.clone(),
        g: client.g.clone(),
    };
    let key = key_from_secret(&client.y.modpow(&x, &client.p), &client.p);
    let mut data = Writer::new();
    data.u32(CIPHER_AES);
    data.raw(&ours.encode());
    Ok((key, data.into_bytes()))
}

/// The client's side of a setup: what it offers and how it reads the answer.
#[derive(Debug, Clone)]
pub enum ClientKeyExchange {
    /// Mode 1: the server encrypts the key to this RSA key.
    CipherClient(Arc<SigningKey>),
    /// Mode 4: Diffie-Hellman in `ffdhe2048`.
    DiffieHellman {
        /// Our private exponent.
        x: BigUint,
        /// The group prime.
        p: BigUint,
        /// The generator.
        g: BigUint,
    },
}

impl ClientKeyExchange {
    /// A fresh Diffie-Hellman offer in the RFC 7919 `ffdhe2048` group.
    pub fn diffie_hellman() -> Result<Self, SessionError> {
        let p = BigUint::parse_bytes(FFDHE2048_P.as_bytes(), 16)
            .ok_or(SessionError::DhParameter { field: "p" })?;
        Ok(ClientKeyExchange::DiffieHellman {
            x: dh_exponent()?,
            p,
            g: BigUint::from(2u8),
        })
    }

    /// The `exchange` field of the setup request.
    pub fn offer(&self) -> KeyExchange {
        match self {
            ClientKeyExchange::CipherClient(key) => KeyExchange::CipherClient {
                public_key: key.public_key().encode(),
            },
            ClientKeyExchange::DiffieHellman { x, p, g } => KeyExchange::DiffieHellman {
                public_key: DhPublic {
                    y: g.modpow(x, p),
                    p: p.clone(),
                    g: g.clone(),
                }
                .encode(),
            },
        }
    }

    /// The session key from the server's answer.
    pub fn finish(&self, answer: &SessionSetupAnswer) -> Result<SessionKey, SessionError> {
        let asked = self.offer_mode();
        if answer.mode != asked {
            return Err(SessionError::ModeMismatch {
                asked,
                found: answer.mode,
            });
        }
        match self {
            ClientKeyExchange::CipherClient(key) => {
                let plain = key.decrypt(&answer.data)?;
                let mut r = Reader::new(&plain);
                let cipher = r.u32("session cipher")?;
                check_cipher(cipher)?;
                Ok(SessionKey(r.take_rest().to_vec()))
            }
            ClientKeyExchange::DiffieHellman { x, p, .. } => {
                let mut r = Reader::new(&answer.data);
                check_cipher(r.u32("session cipher")?)?;
                let server = DhPublic::decode(r.take_rest())?;
                if server.p != *p {
                    return Err(SessionError::DhParameter { field: "p" });
                }
                Ok(key_from_secret(&server.y.modpow(x, p), p))
            }
        }
    }

    fn offer_mode(&self) -> u16 {
        match self {
            ClientKeyExchange::CipherClient(_) => 1,
            ClientKeyExchange::DiffieHellman { .. } => 4,
        }
    }
}

fn check_cipher(code: u32) -> Result<(), SessionError> {
    if code == CIPHER_AES {
        Ok(())
    } else {
        Err(SessionError::UnsupportedCipher { code })
    }
}

/// The octets a ≥ 2.7 session MAC covers (module doc).
fn mac_input(
    envelope: &Envelope,
    counter: u32,
    header_and_body: &[u8],
) -> Result<Vec<u8>, SessionError> {
    if envelope.version < V2_7 {
        return Err(SessionError::UnsupportedMac);
    }
    let mut w = Writer::with_capacity(header_and_body.len() + 16);
    w.u8(envelope.version.major);
    w.u8(envelope.version.minor);
    if envelope.version >= V2_8 {
        let suggested = envelope.suggested_version();
        w.u8(suggested.major);
        w.u8(suggested.minor);
    }
    w.u32(envelope.session_id);
    w.u32(envelope.request_id);
    w.u32(counter);
    w.raw(header_and_body);
    Ok(w.into_bytes())
}

fn hmac(key: &SessionKey) -> Hmac<Sha256> {
    // HMAC takes keys of any length; the error arm cannot happen.
    Hmac::<Sha256>::new_from_slice(&key.0).unwrap_or_else(|_| unreachable!("HMAC key length"))
}

/// The `HS_MAC` credential of a session message with `envelope`, session `counter`
/// and `header_and_body` (as encoded, without the credential).
pub fn session_credential(
    key: &SessionKey,
    envelope: &Envelope,
    counter: u32,
    header_and_body: &[u8],
) -> Result<Credential, SessionError> {
    let mut mac = hmac(key);
    mac.update(&mac_input(envelope, counter, header_and_body)?);
    Ok(Credential {
        version: 0,
        reserved: 0,
        options: 0,
        signer_handle: vec![],
        signer_index: counter,
        credential_type: MAC_TYPE.to_vec(),
        digest_algorithm: MAC_ALGORITHM.to_vec(),
        signature: mac.finalize().into_bytes().to_vec(),
    })
}

/// Checks the `HS_MAC` of a session message; its session counter when it verifies.
pub fn verify_session_mac(
    key: &SessionKey,
    envelope: &Envelope,
    credential: Option<&Credential>,
    header_and_body: &[u8],
) -> Result<u32, SessionError> {
    let credential = credential.ok_or(SessionError::MissingMac)?;
    let algorithm_ok = credential
        .digest_algorithm
        .eq_ignore_ascii_case(MAC_ALGORITHM);
    if credential.credential_type != MAC_TYPE || !algorithm_ok {
        return Err(SessionError::UnsupportedMac);
    }
    let counter = credential.signer_index;
    let mut mac = hmac(key);
    mac.update(&mac_input(envelope, counter, header_and_body)?);
    mac.verify_slice(&credential.signature)
        .map_err(|_| SessionError::MacMismatch)?;
    Ok(counter)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::keys::tests::test_key;
    use crate::codec::ProtocolVersion;

    fn agree(client: &ClientKeyExchange) -> (SessionKey, SessionKey) {
        let (server_key, data) = server_key_exchange(&client.offer()).unwrap();
        let answer = SessionSetupAnswer {
            mode: client.offer_mode(),
            data,
        };
        (server_key, client.finish(&answer).unwrap())
    }

    #[test]
    fn diffie_hellman_agrees_on_one_key() {
        let (server, client) = agree(&ClientKeyExchange::diffie_hellman().unwrap());
        assert_eq!(server, client);
        assert_eq!(server.0.len(), SESSION_KEY_LEN);
    }

    #[test]
    fn client_rsa_key_receives_the_session_key() {
        let client = ClientKeyExchange::CipherClient(Arc::new(test_key().clone()));
        let (server, client) = agree(&client);
        assert_eq!(server, client);
    }

    #[test]
    fn secret_derivation_skips_leading_zeros_as_java_pads() {
        let p = BigUint::from_bytes_be(&[0xff; 40]);
        let secret = BigUint::from_bytes_be(&[1; 36]);
        // padded to 40 octets: 4 zeros, then 36 ones; the zeros are skipped.
        assert_eq!(key_from_secret(&secret, &p).0, vec![1; 32]);
        let small = BigUint::from(5u8);
        let mut expected = vec![0; 31];
        expected.push(5);
        // only 8 of the 39 leading zeros may go: 32 octets must remain.
        assert_eq!(key_from_secret(&small, &p).0, expected);
    }

    fn dh_key(y: BigUint) -> Vec<u8> {
        let ClientKeyExchange::DiffieHellman { p, g, .. } =
            ClientKeyExchange::diffie_hellman().unwrap()
        else {
            unreachable!()
        };
        DhPublic { y, p, g }.encode()
    }

    #[test]
    fn degenerate_and_oversized_dh_values_are_refused() {
        let p = BigUint::parse_bytes(FFDHE2048_P.as_bytes(), 16).unwrap();
        for y in [
            BigUint::from(0u8),
            BigUint::from(1u8),
            &p - BigUint::from(1u8),
            p.clone(),
        ] {
            let exchange = KeyExchange::DiffieHellman {
                public_key: dh_key(y),
            };
            assert!(matches!(
                server_key_exchange(&exchange),
                Err(SessionError::DhParameter { field: "y" })
            ));
        }
        let huge = PublicKey::Dh {
            y: vec![2],
            p: vec![0xff; MAX_DH_BITS / 8 + 1],
            g: vec![2],
        };
        let exchange = KeyExchange::DiffieHellman {
            public_key: huge.encode(),
        };
        assert!(matches!(
            server_key_exchange(&exchange),
            Err(SessionError::DhParameter { field: "p" })
        ));
    }

    #[test]
    fn server_key_and_handle_modes_are_refused() {
        for exchange in [KeyExchange::CipherServer, KeyExchange::None] {
            assert!(matches!(
                server_key_exchange(&exchange),
                Err(SessionError::UnsupportedMode { .. })
            ));
        }
        let dh_as_rsa = KeyExchange::CipherClient {
            public_key: dh_key(BigUint::from(7u8)),
        };
        assert!(server_key_exchange(&dh_as_rsa).is_err());
    }

    #[test]
    fn macs_verify_and_bind_every_covered_field() {
        let key = SessionKey(vec![9; 32]);
        let envelope = Envelope {
            session_id: 77,
            ..Envelope::new(ProtocolVersion::MAX_SUPPORTED, 5)
        };
        let body = b"header and body";
        let credential = session_credential(&key, &envelope, 3, body).unwrap();
        assert_eq!(credential.signer_index, 3);
        assert_eq!(
            verify_session_mac(&key, &envelope, Some(&credential), body).unwrap(),
            3
        );
        let other_session = Envelope {
            session_id: 78,
            ..envelope
        };
        let mut later = credential.clone();
        later.signer_index = 4;
        let wrong_key = SessionKey(vec![8; 32]);
        for (key, envelope, credential, body) in [
            (&key, &other_session, &credential, &body[..]),
            (&key, &envelope, &later, &body[..]),
            (&key, &envelope, &credential, &b"header and bodY"[..]),
            (&wrong_key, &envelope, &credential, &body[..]),
        ] {
            assert!(matches!(
                verify_session_mac(key, envelope, Some(credential), body),
                Err(SessionError::MacMismatch)
            ));
        }
        assert!(matches!(
            verify_session_mac(&key, &envelope, None, body),
            Err(SessionError::MissingMac)
        ));
    }

    #[test]
    fn the_mac_input_follows_the_version() {
        let mut envelope = Envelope::new(ProtocolVersion::new(2, 7), 0x0102_0304);
        envelope.session_id = 0x0a0b_0c0d;
        let input = mac_input(&envelope, 6, b"HB").unwrap();
        assert_eq!(
            input,
            b"\x02\x07\x0a\x0b\x0c\x0d\x01\x02\x03\x04\0\0\0\x06HB"
        );
        envelope.version = ProtocolVersion::new(2, 10);
        let input = mac_input(&envelope, 6, b"HB").unwrap();
        assert_eq!(&input[..4], b"\x02\x0a\x02\x0b");
        envelope.version = ProtocolVersion::new(2, 6);
        assert!(mac_input(&envelope, 6, b"HB").is_err());
    }
}
