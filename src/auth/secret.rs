//! HS_SECKEY answers, in every form J9 clients send and J9 servers check (digest
//! §6.6, §8.4, §8.5; J9 `SecretKeyAuthenticationInfo.authenticate`, `Util.doMac`).
//!
//! Owns [`SecretAnswer`], [`SecretKey`] (the "hashed secret" rule of §6.6),
//! [`answer_secret`] (the client side) and [`verify_secret`]. Depends on
//! [`super::challenge`] and the RustCrypto hash, HMAC and PBKDF2 crates.
//!
//! Invariants: PBKDF2 parameters from the network are bounded before any work
//! ([`MAX_PBKDF2_ITERATIONS`], [`PBKDF2_KEY_BITS`], [`MAX_SALT_LEN`]); MACs are
//! compared in constant time.

use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256};

use crate::codec::ProtocolVersion;
use crate::values::{Reader, Writer};

use super::challenge::ChallengeBody;
use super::error::AuthError;

/// The most PBKDF2 iterations a server computes for one answer (J9 clients use
/// 10 000).
pub const MAX_PBKDF2_ITERATIONS: u32 = 100_000;
/// The derived-key lengths accepted, in bits (J9 clients use 160).
pub const PBKDF2_KEY_BITS: std::ops::RangeInclusive<u32> = 64..=512;
/// The longest salt accepted (J9 clients use 16 octets).
pub const MAX_SALT_LEN: usize = 256;
/// What J9 clients use, and so do we: salt octets, iterations, derived-key bits.
const CLIENT_SALT_LEN: usize = 16;
const CLIENT_ITERATIONS: u32 = 10_000;
/// The fewest PBKDF2 iterations a [`SecretForms::Strong`] server accepts: what J9
/// clients send from protocol 2.7 on.
pub const MIN_STRONG_ITERATIONS: u32 = CLIENT_ITERATIONS;
const CLIENT_KEY_BITS: u32 = 160;

const V2_1: ProtocolVersion = ProtocolVersion::new(2, 1);

/// The 1-octet codes of §8.5.
const CODE_MD5_OLD: u8 = 0x00;
const CODE_MD5: u8 = 0x01;
const CODE_SHA1: u8 = 0x02;
const CODE_SHA256: u8 = 0x03;
const CODE_HMAC_SHA1: u8 = 0x12;
const CODE_HMAC_SHA256: u8 = 0x13;
const CODE_PBKDF2_HMAC_SHA1: u8 = 0x22;

/// Which forms of secret-key answer a server checks. Every form but PBKDF2 costs one
/// hash to test a guess, so an answer seen on the wire (or a caller-chosen nonce of
/// OC 201) lets the secret be guessed at hash speed; PBKDF2 of
/// [`MIN_STRONG_ITERATIONS`] makes each guess ten thousand times dearer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecretForms {
    /// Only PBKDF2-HMAC-SHA1 of at least [`MIN_STRONG_ITERATIONS`] (J9 clients from 2.7).
    #[default]
    Strong,
    /// Every form of §8.5, for clients older than protocol 2.7.
    Legacy,
}

impl SecretForms {
    /// Fails with [`AuthError::WeakAnswer`] unless `answer` (secret-key answer octets
    /// of `version`'s formats) is of a form this server checks; a malformed answer is
    /// refused as such.
    pub fn admit(self, answer: &[u8], version: ProtocolVersion) -> Result<(), AuthError> {
        let decoded = SecretAnswer::decode(answer, version)?;
        match (self, &decoded) {
            (SecretForms::Legacy, _) => Ok(()),
            (SecretForms::Strong, SecretAnswer::Pbkdf2 { iterations, .. })
                if *iterations >= MIN_STRONG_ITERATIONS =>
            {
                Ok(())
            }
            (SecretForms::Strong, weak) => Err(AuthError::WeakAnswer { form: weak.name() }),
        }
    }
}

/// A decoded secret-key answer. `m` below is `nonce ‖ digest` (§8.2), `s` the secret.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SecretAnswer {
    /// Before 2.1: `MD5(s ‖ m ‖ s)`, 16 octets without a code.
    OldMd5(Vec<u8>),
    /// Code 0 or 1: `MD5(s ‖ m ‖ s)`.
    Md5(Vec<u8>),
    /// Code 2, what 2.1–2.6 clients send: `SHA1(s ‖ m ‖ s)`.
    Sha1(Vec<u8>),
    /// Code 3: `SHA256(s ‖ m ‖ s)`.
    Sha256(Vec<u8>),
    /// Code 0x12: `HMAC-SHA1(s, m)`.
    HmacSha1(Vec<u8>),
    /// Code 0x13: `HMAC-SHA256(s, m)`.
    HmacSha256(Vec<u8>),
    /// Code 0x22, what clients from 2.7 send:
    /// `Bytes salt ‖ u32 iterations ‖ u32 keyLengthBits ‖ Bytes mac` with
    /// `mac = HMAC-SHA1(PBKDF2-HMAC-SHA1(s, salt, iterations, keyLengthBits), m)`.
    Pbkdf2 {
        /// The salt.
        salt: Vec<u8>,
        /// PBKDF2 iterations.
        iterations: u32,
        /// Derived-key length in bits.
        key_bits: u32,
        /// The HMAC-SHA1.
        mac: Vec<u8>,
    },
}

impl SecretAnswer {
    /// Decodes an answer to a challenge of `version` (§8.4: before 2.1 the whole
    /// answer is an MD5; from 2.1 a code octet says the form, whatever the version,
    /// as J9 verifiers accept). Unknown codes and out-of-bounds PBKDF2 parameters
    /// are refused.
    pub fn decode(answer: &[u8], version: ProtocolVersion) -> Result<Self, AuthError> {
        if version < V2_1 {
            return Ok(SecretAnswer::OldMd5(answer.to_vec()));
        }
        let mut r = Reader::new(answer);
        let code = r.u8("secret-key answer code")?;
        let rest = || r.clone().take_rest().to_vec();
        let decoded = match code {
            CODE_MD5_OLD | CODE_MD5 => SecretAnswer::Md5(rest()),
            CODE_SHA1 => SecretAnswer::Sha1(rest()),
            CODE_SHA256 => SecretAnswer::Sha256(rest()),
            CODE_HMAC_SHA1 => SecretAnswer::HmacSha1(rest()),
            CODE_HMAC_SHA256 => SecretAnswer::HmacSha256(rest()),
            CODE_PBKDF2_HMAC_SHA1 => decode_pbkdf2(&mut r)?,
            other => {
                return Err(AuthError::UnsupportedAlgorithm {
                    algorithm: vec![other],
                });
            }
        };
        Ok(decoded)
    }

    /// The answer octets (the code octet included, except for [`SecretAnswer::OldMd5`]).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        let (code, mac) = match self {
            SecretAnswer::OldMd5(mac) => return mac.clone(),
            SecretAnswer::Md5(mac) => (CODE_MD5, mac),
            SecretAnswer::Sha1(mac) => (CODE_SHA1, mac),
            SecretAnswer::Sha256(mac) => (CODE_SHA256, mac),
            SecretAnswer::HmacSha1(mac) => (CODE_HMAC_SHA1, mac),
            SecretAnswer::HmacSha256(mac) => (CODE_HMAC_SHA256, mac),
            SecretAnswer::Pbkdf2 {
                salt,
                iterations,
                key_bits,
                mac,
            } => {
                w.u8(CODE_PBKDF2_HMAC_SHA1);
                w.bytes(salt);
                w.u32(*iterations);
                w.u32(*key_bits);
                w.bytes(mac);
                return w.into_bytes();
            }
        };
        w.u8(code);
        w.raw(mac);
        w.into_bytes()
    }

    /// The MAC this form of answer should carry for `secret` and `message`
    /// (`nonce ‖ digest`), with this answer's own PBKDF2 parameters.
    fn expected(&self, secret: &[u8], message: &[u8]) -> Vec<u8> {
        let sandwich = |mut h: Box<dyn sha2::digest::DynDigest>| {
            h.update(secret);
            h.update(message);
            h.update(secret);
            h.finalize().to_vec()
        };
        match self {
            SecretAnswer::OldMd5(_) | SecretAnswer::Md5(_) => sandwich(Box::new(Md5::new())),
            SecretAnswer::Sha1(_) => sandwich(Box::new(Sha1::new())),
            SecretAnswer::Sha256(_) => sandwich(Box::new(Sha256::new())),
            SecretAnswer::HmacSha1(_) => hmac::<Hmac<Sha1>>(secret, message),
            SecretAnswer::HmacSha256(_) => hmac::<Hmac<Sha256>>(secret, message),
            SecretAnswer::Pbkdf2 {
                salt,
                iterations,
                key_bits,
                ..
            } => hmac::<Hmac<Sha1>>(&pbkdf2_key(secret, salt, *iterations, *key_bits), message),
        }
    }

    /// The form's name, for messages.
    fn name(&self) -> &'static str {
        match self {
            SecretAnswer::OldMd5(_) | SecretAnswer::Md5(_) => "MD5",
            SecretAnswer::Sha1(_) => "SHA-1",
            SecretAnswer::Sha256(_) => "SHA-256",
            SecretAnswer::HmacSha1(_) => "HMAC-SHA1",
            SecretAnswer::HmacSha256(_) => "HMAC-SHA256",
            SecretAnswer::Pbkdf2 { .. } => "PBKDF2-HMAC-SHA1 of too few iterations",
        }
    }

    fn mac(&self) -> &[u8] {
        match self {
            SecretAnswer::OldMd5(mac)
            | SecretAnswer::Md5(mac)
            | SecretAnswer::Sha1(mac)
            | SecretAnswer::Sha256(mac)
            | SecretAnswer::HmacSha1(mac)
            | SecretAnswer::HmacSha256(mac)
            | SecretAnswer::Pbkdf2 { mac, .. } => mac,
        }
    }
}

fn decode_pbkdf2(r: &mut Reader<'_>) -> Result<SecretAnswer, AuthError> {
    let salt = r.bytes("PBKDF2 salt")?.to_vec();
    let iterations = r.u32("PBKDF2 iterations")?;
    let key_bits = r.u32("PBKDF2 key length")?;
    let mac = r.bytes("PBKDF2 mac")?.to_vec();
    r.finish("PBKDF2 answer")?;
    let bad = |field, value: u64| Err(AuthError::AnswerParameter { field, value });
    if salt.len() > MAX_SALT_LEN {
        return bad("PBKDF2 salt length", salt.len() as u64);
    }
    if !(1..=MAX_PBKDF2_ITERATIONS).contains(&iterations) {
        return bad("PBKDF2 iterations", u64::from(iterations));
    }
    if !PBKDF2_KEY_BITS.contains(&key_bits) || key_bits % 8 != 0 {
        return bad("PBKDF2 key length", u64::from(key_bits));
    }
    Ok(SecretAnswer::Pbkdf2 {
        salt,
        iterations,
        key_bits,
        mac,
    })
}

/// The HMAC of `message` under `key`. HMAC takes keys of any length, so the key
/// error cannot happen; were it to, the empty MAC would fail closed.
fn hmac<M: Mac + KeyInit>(key: &[u8], message: &[u8]) -> Vec<u8> {
    <M as KeyInit>::new_from_slice(key)
        .map(|mut mac| {
            mac.update(message);
            mac.finalize().into_bytes().to_vec()
        })
        .unwrap_or_default()
}

/// PBKDF2-HMAC-SHA1 as J9 computes it: each secret octet widened to a Java `char`
/// (Latin-1), which the JDK's `PBKDF2WithHmacSHA1` encodes as UTF-8. For ASCII
/// secrets this is the secret itself.
fn pbkdf2_key(secret: &[u8], salt: &[u8], iterations: u32, key_bits: u32) -> Vec<u8> {
    let password: String = secret.iter().map(|&b| char::from(b)).collect();
    let mut key = vec![0; (key_bits / 8) as usize];
    pbkdf2::pbkdf2_hmac::<Sha1>(password.as_bytes(), salt, iterations, &mut key);
    key
}

/// An HS_SECKEY secret: the octets both sides MAC with.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretKey(pub Vec<u8>);

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

impl SecretKey {
    /// The secret for a password stored with the admin tool's "hash" option (§6.6,
    /// J9 `Encoder.encodeSecretKey`): the lower-case hex of SHA-1(password). That
    /// text is both the HS_SECKEY data and the key the client MACs with.
    pub fn hashed(password: &[u8]) -> Self {
        let hex: String = Sha1::digest(password)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        SecretKey(hex.into_bytes())
    }
}

/// The client side: the answer J9 sends for `challenge` received with answer formats
/// of `version` (§8.4): MD5 before 2.1, SHA-1 to 2.6, PBKDF2-HMAC-SHA1 with a fresh
/// 16-octet salt, 10 000 iterations and 160 bits from 2.7.
pub fn answer_secret(
    challenge: &ChallengeBody,
    version: ProtocolVersion,
    secret: &SecretKey,
) -> Result<Vec<u8>, AuthError> {
    let template = if version < V2_1 {
        SecretAnswer::OldMd5(Vec::new())
    } else if version < ProtocolVersion::V2_7 {
        SecretAnswer::Sha1(Vec::new())
    } else {
        let mut salt = vec![0; CLIENT_SALT_LEN];
        getrandom::fill(&mut salt).map_err(AuthError::Random)?;
        SecretAnswer::Pbkdf2 {
            salt,
            iterations: CLIENT_ITERATIONS,
            key_bits: CLIENT_KEY_BITS,
            mac: Vec::new(),
        }
    };
    Ok(with_mac(template, &secret.0, &challenge.signed_bytes()).encode())
}

/// `answer` with its MAC computed for `secret` and `message`.
fn with_mac(mut answer: SecretAnswer, secret: &[u8], message: &[u8]) -> SecretAnswer {
    let expected = answer.expected(secret, message);
    match &mut answer {
        SecretAnswer::OldMd5(mac)
        | SecretAnswer::Md5(mac)
        | SecretAnswer::Sha1(mac)
        | SecretAnswer::Sha256(mac)
        | SecretAnswer::HmacSha1(mac)
        | SecretAnswer::HmacSha256(mac)
        | SecretAnswer::Pbkdf2 { mac, .. } => *mac = expected,
    }
    answer
}

/// Whether `answer` is a MAC of `challenge` (whose answer formats are those of
/// `version`) under `secret`, the data of an HS_SECKEY value of `handle`.
pub fn verify_secret(
    challenge: &ChallengeBody,
    version: ProtocolVersion,
    answer: &[u8],
    secret: &[u8],
    handle: &str,
) -> Result<(), AuthError> {
    let answer = SecretAnswer::decode(answer, version)?;
    let expected = answer.expected(secret, &challenge.signed_bytes());
    if constant_time_eq(&expected, answer.mac()) {
        Ok(())
    } else {
        Err(AuthError::Mismatch {
            handle: handle.to_owned(),
        })
    }
}

/// Equality that takes the same time wherever the first difference is.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
#[path = "secret_tests.rs"]
mod tests;
