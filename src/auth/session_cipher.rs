//! Encrypting and decrypting the payload of a session message (envelope flag EC,
//! digest §3.8), as J9 does from protocol 2.4 on.
//!
//! Owns [`seal`] and [`open`]. Pure: no sockets, no session table; randomness (the
//! IV) from the operating system. The codec decides which octets are the payload
//! (everything after the envelope: header, body and credential) and the server which
//! messages are sealed.
//!
//! Wire facts, read in the J9 sources (`SessionInfo.encryptBuffer/decryptBuffer`,
//! `GenericProvider.getCipher/getIvSize`, `HdlTcpRequestHandler.handleResponse`):
//! - The session cipher is AES (code 3, the only one our key exchange agrees), in CBC
//!   mode with PKCS#5 padding, keyed by the first 16 octets of the session key
//!   (AES-128; J9 truncates longer keys).
//! - The sealed payload is `IV(16) ‖ ciphertext`; the envelope's MessageLength is the
//!   sealed length. The credential (a session MAC or a signature) is computed over the
//!   plain message first, then the whole payload is sealed.
//! - Before 2.4 J9 used ECB without an IV; such sessions are refused here.
//!
//! Invariants: a sealed payload shorter than an IV and one block, or not a whole
//! number of blocks, or with bad padding is refused with [`CipherError`], never a panic.

use aes::Aes128;
use cbc::cipher::block_padding::Pkcs7;
use cbc::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use thiserror::Error;

use super::session::SessionKey;

/// Octets of the AES IV (and block) that start a sealed payload.
pub const IV_LEN: usize = 16;

/// Octets of the session key that key AES-128.
const AES_KEY_LEN: usize = 16;

type Encryptor = cbc::Encryptor<Aes128>;
type Decryptor = cbc::Decryptor<Aes128>;

/// Why a payload could not be sealed or opened.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum CipherError {
    /// The session key is shorter than an AES-128 key.
    #[error("the session key has {0} octets; AES-128 needs 16")]
    ShortKey(usize),
    /// The sealed payload is too short or not a whole number of AES blocks.
    #[error("an encrypted payload of {0} octets is not an IV and whole AES blocks")]
    Length(usize),
    /// The padding is wrong: another key, or a changed ciphertext.
    #[error("the encrypted payload does not decrypt with the session key")]
    Padding,
    /// The operating system's randomness failed.
    #[error("no randomness for an IV")]
    Random,
}

/// `plain` sealed with `key`: a fresh random IV, then the AES-128-CBC ciphertext.
pub fn seal(key: &SessionKey, plain: &[u8]) -> Result<Vec<u8>, CipherError> {
    let mut iv = [0u8; IV_LEN];
    getrandom::fill(&mut iv).map_err(|_| CipherError::Random)?;
    seal_with_iv(key, &iv, plain)
}

fn seal_with_iv(key: &SessionKey, iv: &[u8; IV_LEN], plain: &[u8]) -> Result<Vec<u8>, CipherError> {
    let encryptor = Encryptor::new(aes_key(key)?.into(), iv.into());
    let ciphertext = encryptor.encrypt_padded_vec_mut::<Pkcs7>(plain);
    let mut sealed = Vec::with_capacity(IV_LEN + ciphertext.len());
    sealed.extend_from_slice(iv);
    sealed.extend_from_slice(&ciphertext);
    Ok(sealed)
}

/// The plain payload of `sealed` (`IV ‖ ciphertext`), opened with `key`.
pub fn open(key: &SessionKey, sealed: &[u8]) -> Result<Vec<u8>, CipherError> {
    let (iv, ciphertext) = sealed
        .split_first_chunk::<IV_LEN>()
        .ok_or(CipherError::Length(sealed.len()))?;
    if ciphertext.is_empty() || ciphertext.len() % IV_LEN != 0 {
        return Err(CipherError::Length(sealed.len()));
    }
    let decryptor = Decryptor::new(aes_key(key)?.into(), iv.into());
    decryptor
        .decrypt_padded_vec_mut::<Pkcs7>(ciphertext)
        .map_err(|_| CipherError::Padding)
}

fn aes_key(key: &SessionKey) -> Result<&[u8; AES_KEY_LEN], CipherError> {
    let octets = key.octets();
    octets
        .first_chunk::<AES_KEY_LEN>()
        .ok_or(CipherError::ShortKey(octets.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session key whose first 16 octets are 0..15 (the rest is ignored by AES-128).
    fn counting_key() -> SessionKey {
        SessionKey::from_octets((0u8..32).collect())
    }

    const PLAIN: &[u8] = b"header, body and credential of a handle message";

    /// What Java's `Cipher.getInstance("AES/CBC/PKCS5Padding")` (the cipher J9's
    /// `GenericProvider` makes) gave for key 00..0f, IV 10..1f and [`PLAIN`].
    const JAVA_CIPHERTEXT: &str = "3ecd5af893ee115ab90d26d1af1122e9b2a41e0a912ad05ccd85c3a38d8f39ce264ccdc8158297b81025dbef5d3ef871";

    fn java_iv() -> [u8; IV_LEN] {
        let mut iv = [0; IV_LEN];
        for (octet, value) in iv.iter_mut().zip(0x10..) {
            *octet = value;
        }
        iv
    }

    fn hex(octets: &[u8]) -> String {
        octets.iter().map(|o| format!("{o:02x}")).collect()
    }

    #[test]
    fn seals_as_java_does() {
        let sealed = seal_with_iv(&counting_key(), &java_iv(), PLAIN).unwrap();
        assert_eq!(hex(&sealed[..IV_LEN]), hex(&java_iv()));
        assert_eq!(hex(&sealed[IV_LEN..]), JAVA_CIPHERTEXT);
    }

    #[test]
    fn opens_what_java_sealed() {
        let mut sealed = java_iv().to_vec();
        sealed.extend(
            (0..JAVA_CIPHERTEXT.len())
                .step_by(2)
                .map(|at| u8::from_str_radix(&JAVA_CIPHERTEXT[at..at + 2], 16).unwrap()),
        );
        assert_eq!(open(&counting_key(), &sealed).unwrap(), PLAIN);
    }

    #[test]
    fn a_round_trip_uses_a_fresh_iv() {
        let key = SessionKey::generate().unwrap();
        let first = seal(&key, PLAIN).unwrap();
        let second = seal(&key, PLAIN).unwrap();
        assert_ne!(first[..IV_LEN], second[..IV_LEN]);
        assert_eq!(open(&key, &first).unwrap(), PLAIN);
        assert_eq!(open(&key, b""), Err(CipherError::Length(0)));
        assert_eq!(open(&key, &seal(&key, b"").unwrap()).unwrap(), b"");
    }

    #[test]
    fn bad_lengths_keys_and_ciphertexts_are_refused() {
        let key = counting_key();
        let sealed = seal(&key, PLAIN).unwrap();
        assert_eq!(
            open(&key, &sealed[..IV_LEN]),
            Err(CipherError::Length(IV_LEN))
        );
        assert_eq!(
            open(&key, &sealed[..sealed.len() - 1]),
            Err(CipherError::Length(sealed.len() - 1))
        );
        let other = SessionKey::generate().unwrap();
        assert_ne!(open(&other, &sealed).ok().as_deref(), Some(PLAIN));
        let mut changed = sealed.clone();
        let last = changed.len() - 1;
        changed[last] ^= 1;
        assert_ne!(open(&key, &changed).ok().as_deref(), Some(PLAIN));
        let short = SessionKey::from_octets(vec![1; 8]);
        assert_eq!(seal(&short, PLAIN), Err(CipherError::ShortKey(8)));
        assert_eq!(open(&short, &sealed), Err(CipherError::ShortKey(8)));
    }
}
