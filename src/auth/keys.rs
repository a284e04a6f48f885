//! Keys for public-key authentication: RSA private keys in PEM, their HS_PUBKEY data,
//! and verifying keys decoded from HS_PUBKEY data (digest §6.5, §8.3).
//!
//! Owns [`SigningKey`] (an RSA private key, read from or written to PEM, generated
//! for `hdl keygen`), [`VerifyingKey`] (RSA or DSA, decoded from
//! [`PublicKey`]) and [`SignatureHash`] (the hash named in a public-key answer).
//! Depends on [`crate::values`] and the RustCrypto `rsa`, `dsa`, `sha1`, `sha2` crates.
//!
//! Invariants: every key held here has a modulus (RSA) or prime `p` (DSA) of
//! [`MIN_KEY_BITS`]`..=`[`MAX_KEY_BITS`] bits, so verification cost is bounded;
//! malformed keys and signatures are errors or a failed verification, never a panic.

use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::{DecodePrivateKey, EncodePrivateKey, LineEnding};
use rsa::traits::PublicKeyParts;
use rsa::{BigUint, Pkcs1v15Sign, RsaPrivateKey, RsaPublicKey};
use sha1::Sha1;
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::values::{DecodeError, PublicKey};

/// The smallest RSA modulus or DSA prime accepted, in bits (old J9 DSA keys are 1024).
pub const MIN_KEY_BITS: usize = 1024;
/// The largest RSA modulus or DSA prime accepted, in bits.
pub const MAX_KEY_BITS: usize = 8192;
/// The size of keys made by [`SigningKey::generate`] (J9's default since 9.0.1).
pub const GENERATED_KEY_BITS: usize = 2048;
/// The largest DSA subprime `q` accepted, in bits (FIPS 186 uses 160, 224 or 256).
const MAX_DSA_Q_BITS: usize = 512;

/// Why a key could not be read, decoded, made or written.
#[derive(Debug, Error)]
pub enum KeyError {
    /// The text is neither a PKCS#8 nor a PKCS#1 RSA private key in PEM (encrypted
    /// PKCS#8 is not supported).
    #[error("not an unencrypted PKCS#8 or PKCS#1 RSA private key in PEM")]
    UnreadablePem,
    /// The key's modulus (or DSA prime) is outside the accepted sizes.
    #[error("{bits}-bit key is outside {MIN_KEY_BITS}..={MAX_KEY_BITS} bits")]
    KeySize {
        /// The size found.
        bits: usize,
    },
    /// HS_PUBKEY data of a type we cannot verify with (e.g. `DH_PUB_KEY`).
    #[error("cannot verify signatures with a {key_type} key")]
    UnsupportedKeyType {
        /// The key type string of the data.
        key_type: String,
    },
    /// The key's numbers do not make a valid key (e.g. an even RSA exponent).
    #[error("the {key_type} key is mathematically invalid")]
    InvalidKey {
        /// `RSA_PUB_KEY`, `DSA_PUB_KEY` or `RSA private key`.
        key_type: &'static str,
    },
    /// The HS_PUBKEY data did not decode.
    #[error("HS_PUBKEY data: {0}")]
    Decode(#[from] DecodeError),
    /// Key generation failed.
    #[error("RSA key generation failed: {0}")]
    Generate(#[source] rsa::Error),
    /// The key could not be written as PEM.
    #[error("cannot write the key as PEM: {0}")]
    WritePem(#[source] rsa::pkcs8::Error),
}

/// The hash named in a public-key answer (digest §8.3, §8.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SignatureHash {
    /// `SHA-256` (alternates `SHA256`, code 3): what J9 signs with from protocol 2.7.
    Sha256,
    /// `SHA1` (alternates `SHA-1`, code 2): what J9 signs with before 2.7 (and with DSA
    /// keys below 2.11).
    Sha1,
}

impl SignatureHash {
    /// The name J9 writes.
    pub fn name(self) -> &'static str {
        match self {
            SignatureHash::Sha256 => "SHA-256",
            SignatureHash::Sha1 => "SHA1",
        }
    }

    /// The hash for a name or 1-octet code as J9 accepts them (`Util.getSigIdFromHashAlgId`);
    /// `None` for anything else, MD5 included: no J9 client signs with it (§8.3), and
    /// we refuse it rather than accept a broken hash.
    pub fn from_name(name: &[u8]) -> Option<Self> {
        match name {
            b"SHA-256" | b"SHA256" | [3] => Some(SignatureHash::Sha256),
            b"SHA1" | b"SHA-1" | [2] => Some(SignatureHash::Sha1),
            _ => None,
        }
    }

    fn digest(self, message: &[u8]) -> Vec<u8> {
        match self {
            SignatureHash::Sha256 => Sha256::digest(message).to_vec(),
            SignatureHash::Sha1 => Sha1::digest(message).to_vec(),
        }
    }

    fn pkcs1v15(self) -> Pkcs1v15Sign {
        match self {
            SignatureHash::Sha256 => Pkcs1v15Sign::new::<Sha256>(),
            SignatureHash::Sha1 => Pkcs1v15Sign::new::<Sha1>(),
        }
    }
}

/// An RSA private key: signs challenge answers (PKCS#1 v1.5, as Java's
/// `SHA256withRSA`).
#[derive(Clone)]
pub struct SigningKey(RsaPrivateKey);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey({} bits)", self.0.n().bits())
    }
}

impl SigningKey {
    /// Reads an unencrypted RSA private key in PEM, PKCS#8 (`BEGIN PRIVATE KEY`) or
    /// PKCS#1 (`BEGIN RSA PRIVATE KEY`).
    pub fn from_pem(pem: &str) -> Result<Self, KeyError> {
        let key = RsaPrivateKey::from_pkcs8_pem(pem)
            .or_else(|_| RsaPrivateKey::from_pkcs1_pem(pem))
            .map_err(|_| KeyError::UnreadablePem)?;
        check_bits(key.n().bits())?;
        key.validate().map_err(|_| KeyError::InvalidKey {
            key_type: "RSA private key",
        })?;
        Ok(SigningKey(key))
    }

    /// A fresh [`GENERATED_KEY_BITS`]-bit key from the operating system's randomness.
    pub fn generate() -> Result<Self, KeyError> {
        let mut rng = rsa::rand_core::OsRng;
        RsaPrivateKey::new(&mut rng, GENERATED_KEY_BITS)
            .map(SigningKey)
            .map_err(KeyError::Generate)
    }

    /// The key as PKCS#8 PEM with LF line endings (the text is secret).
    pub fn to_pem(&self) -> Result<String, KeyError> {
        let pem = self
            .0
            .to_pkcs8_pem(LineEnding::LF)
            .map_err(KeyError::WritePem)?;
        Ok(pem.as_str().to_owned())
    }

    /// The public half as HS_PUBKEY data (J9 layout, see [`PublicKey::encode`]).
    pub fn public_key(&self) -> PublicKey {
        PublicKey::Rsa {
            exponent: self.0.e().to_bytes_be(),
            modulus: self.0.n().to_bytes_be(),
        }
    }

    /// Decrypts a PKCS#1 v1.5 ciphertext made with the public half (a session key,
    /// digest §3.8 mode 1).
    pub fn decrypt(&self, ciphertext: &[u8]) -> Result<Vec<u8>, KeyError> {
        self.0
            .decrypt(rsa::Pkcs1v15Encrypt, ciphertext)
            .map_err(|_| KeyError::InvalidKey {
                key_type: "RSA ciphertext",
            })
    }

    /// The PKCS#1 v1.5 signature of `message` with `hash`.
    pub fn sign(&self, hash: SignatureHash, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        self.0
            .sign(hash.pkcs1v15(), &hash.digest(message))
            .map_err(|_| KeyError::InvalidKey {
                key_type: "RSA private key",
            })
    }
}

/// A public key that checks answer signatures.
#[derive(Debug, Clone)]
pub enum VerifyingKey {
    /// RSA, PKCS#1 v1.5 signatures.
    Rsa(RsaPublicKey),
    /// DSA, DER `SEQUENCE { r, s }` signatures as Java writes them.
    Dsa(dsa::VerifyingKey),
}

impl VerifyingKey {
    /// Decodes HS_PUBKEY data and checks the key's size and numbers.
    pub fn from_hs_pubkey(data: &[u8]) -> Result<Self, KeyError> {
        Self::from_public_key(&PublicKey::decode(data)?)
    }

    /// The verifying key for a decoded HS_PUBKEY; DH and unknown types are
    /// [`KeyError::UnsupportedKeyType`].
    pub fn from_public_key(key: &PublicKey) -> Result<Self, KeyError> {
        match key {
            PublicKey::Rsa { exponent, modulus } => {
                let n = BigUint::from_bytes_be(modulus);
                check_bits(n.bits())?;
                RsaPublicKey::new_with_max_size(n, BigUint::from_bytes_be(exponent), MAX_KEY_BITS)
                    .map(VerifyingKey::Rsa)
                    .map_err(|_| KeyError::InvalidKey {
                        key_type: PublicKey::RSA_KEY_TYPE,
                    })
            }
            PublicKey::Dsa { q, p, g, y } => dsa_key(q, p, g, y).map(VerifyingKey::Dsa),
            other => Err(KeyError::UnsupportedKeyType {
                key_type: other.key_type().to_owned(),
            }),
        }
    }

    /// Whether `signature` is a valid signature of `message` under `hash`. Any
    /// malformed signature is simply invalid.
    pub fn verify(&self, hash: SignatureHash, message: &[u8], signature: &[u8]) -> bool {
        let hashed = hash.digest(message);
        match self {
            VerifyingKey::Rsa(key) => key.verify(hash.pkcs1v15(), &hashed, signature).is_ok(),
            VerifyingKey::Dsa(key) => {
                use dsa::signature::hazmat::PrehashVerifier;
                dsa::Signature::try_from(signature)
                    .is_ok_and(|sig| key.verify_prehash(&hashed, &sig).is_ok())
            }
        }
    }
}

fn dsa_key(q: &[u8], p: &[u8], g: &[u8], y: &[u8]) -> Result<dsa::VerifyingKey, KeyError> {
    let invalid = || KeyError::InvalidKey {
        key_type: PublicKey::DSA_KEY_TYPE,
    };
    let p = BigUint::from_bytes_be(p);
    let q = BigUint::from_bytes_be(q);
    check_bits(p.bits())?;
    if q.bits() > MAX_DSA_Q_BITS {
        return Err(invalid());
    }
    let components =
        dsa::Components::from_components(p, q, BigUint::from_bytes_be(g)).map_err(|_| invalid())?;
    dsa::VerifyingKey::from_components(components, BigUint::from_bytes_be(y)).map_err(|_| invalid())
}

fn check_bits(bits: usize) -> Result<(), KeyError> {
    if (MIN_KEY_BITS..=MAX_KEY_BITS).contains(&bits) {
        Ok(())
    } else {
        Err(KeyError::KeySize { bits })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::OnceLock;

    use super::*;

    /// One key for every test of the module tree: the fixed test key of
    /// `tests/fixtures/admin.pem` (generation is slow in debug builds).
    pub(crate) fn test_key() -> &'static SigningKey {
        static KEY: OnceLock<SigningKey> = OnceLock::new();
        KEY.get_or_init(|| {
            SigningKey::from_pem(include_str!("../../tests/fixtures/admin.pem")).expect("test key")
        })
    }

    /// Another key (1024 bits, the smallest accepted), for answers that must fail.
    pub(crate) fn stranger_key() -> &'static SigningKey {
        static KEY: OnceLock<SigningKey> = OnceLock::new();
        KEY.get_or_init(|| {
            let key = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, MIN_KEY_BITS);
            SigningKey(key.expect("key generation"))
        })
    }

    #[test]
    fn generated_key_round_trips_through_pkcs8_pem() {
        let pem = test_key().to_pem().unwrap();
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        let back = SigningKey::from_pem(&pem).unwrap();
        assert_eq!(back.public_key(), test_key().public_key());
    }

    #[test]
    fn pkcs1_pem_is_read() {
        use rsa::pkcs1::EncodeRsaPrivateKey;
        let pem = test_key().0.to_pkcs1_pem(LineEnding::LF).unwrap();
        assert!(pem.starts_with("-----BEGIN RSA PRIVATE KEY-----"));
        let back = SigningKey::from_pem(&pem).unwrap();
        assert_eq!(back.public_key(), test_key().public_key());
    }

    #[test]
    fn hs_pubkey_has_the_j9_layout_and_verifies() {
        let data = test_key().public_key().encode();
        // Str "RSA_PUB_KEY", reserved 0, e = 65537, n with J9's leading zero, 4 zeros.
        assert_eq!(
            &data[..24],
            b"\0\0\0\x0bRSA_PUB_KEY\0\0\0\0\0\x03\x01\0\x01"
        );
        assert_eq!(&data[24..29], &[0, 0, 1, 1, 0], "257-octet modulus");
        assert_eq!(data.len(), 24 + 4 + 257 + 4);
        assert!(data.ends_with(&[0; 4]));
        let key = VerifyingKey::from_hs_pubkey(&data).unwrap();
        let signature = test_key().sign(SignatureHash::Sha256, b"hello").unwrap();
        assert!(key.verify(SignatureHash::Sha256, b"hello", &signature));
        assert!(!key.verify(SignatureHash::Sha256, b"hellO", &signature));
        assert!(!key.verify(SignatureHash::Sha1, b"hello", &signature));
        assert!(!key.verify(SignatureHash::Sha256, b"hello", &signature[1..]));
    }

    #[test]
    fn garbage_pem_is_refused() {
        for pem in [
            "",
            "hello",
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        ] {
            assert!(matches!(
                SigningKey::from_pem(pem),
                Err(KeyError::UnreadablePem)
            ));
        }
    }

    #[test]
    fn key_sizes_are_bounded() {
        let small = PublicKey::Rsa {
            exponent: vec![1, 0, 1],
            modulus: vec![0xc5; 64],
        };
        assert!(matches!(
            VerifyingKey::from_public_key(&small),
            Err(KeyError::KeySize { bits: 512 })
        ));
        let huge = PublicKey::Rsa {
            exponent: vec![1, 0, 1],
            modulus: vec![0xc5; 1025],
        };
        assert!(matches!(
            VerifyingKey::from_public_key(&huge),
            Err(KeyError::KeySize { bits: 8200 })
        ));
    }

    #[test]
    fn invalid_and_unsupported_keys_are_refused() {
        let even_exponent = PublicKey::Rsa {
            exponent: vec![0xff; 8],
            modulus: vec![0xc5; 128],
        };
        assert!(matches!(
            VerifyingKey::from_public_key(&even_exponent),
            Err(KeyError::InvalidKey { .. })
        ));
        let dh = PublicKey::Dh {
            y: vec![5],
            p: vec![7],
            g: vec![2],
        };
        assert!(matches!(
            VerifyingKey::from_public_key(&dh),
            Err(KeyError::UnsupportedKeyType { key_type }) if key_type == "DH_PUB_KEY"
        ));
        let bogus_dsa = PublicKey::Dsa {
            q: vec![0x7f; 20],
            p: vec![0xc5; 128],
            g: vec![2],
            y: vec![3],
        };
        assert!(matches!(
            VerifyingKey::from_public_key(&bogus_dsa),
            Err(KeyError::InvalidKey { .. })
        ));
        assert!(matches!(
            VerifyingKey::from_hs_pubkey(b"\0\0"),
            Err(KeyError::Decode(_))
        ));
    }

    /// RFC 6979 §A.2.1: the 1024-bit DSA key and its signatures of "sample".
    fn rfc6979_dsa_key() -> PublicKey {
        use crate::values::known::hex;
        PublicKey::Dsa {
            p: hex(
                "86F5CA03DCFEB225063FF830A0C769B9DD9D6153AD91D7CE27F787C43278B447
                E6533B86B18BED6E8A48B784A14C252C5BE0DBF60B86D6385BD2F12FB763ED88
                73ABFD3F5BA2E0A8C0A59082EAC056935E529DAF7C610467899C77ADEDFC846C
                881870B7B19B2B58F9BE0521A17002E3BDD6B86685EE90B3D9A1B02B782B1779",
            ),
            q: hex("996F967F6C8E388D9E28D01E205FBA957A5698B1"),
            g: hex(
                "07B0F92546150B62514BB771E2A0C0CE387F03BDA6C56B505209FF25FD3C133D
                89BBCD97E904E09114D9A7DEFDEADFC9078EA544D2E401AEECC40BB9FBBF78FD
                87995A10A1C27CB7789B594BA7EFB5C4326A9FE59A070E136DB77175464ADCA4
                17BE5DCE2F40D10A46A3A3943F26AB7FD9C0398FF8C76EE0A56826A8A88F1DBD",
            ),
            y: hex(
                "5DF5E01DED31D0297E274E1691C192FE5868FEF9E19A84776454B100CF16F653
                92195A38B90523E2542EE61871C0440CB87C322FC4B4D2EC5E1E7EC766E1BE8D
                4CE935437DC11C3C8FD426338933EBFE739CB3465F4D3668C5E473508253B1E6
                82F65CBDC4FAE93C2EA212390E54905A86E2223170B44EAA7DA5DD9FFCFB7F3B",
            ),
        }
    }

    /// DER `SEQUENCE { INTEGER r, INTEGER s }` of two positive values of at most
    /// 20 octets, as Java writes DSA signatures (a `00` before a set top bit).
    fn der(r: &str, s: &str) -> Vec<u8> {
        let integer = |hex: &str| {
            let mut value = crate::values::known::hex(hex);
            if value[0] >= 0x80 {
                value.insert(0, 0);
            }
            [vec![0x02, u8::try_from(value.len()).unwrap()], value].concat()
        };
        let body = [integer(r), integer(s)].concat();
        [vec![0x30, u8::try_from(body.len()).unwrap()], body].concat()
    }

    #[test]
    fn dsa_signatures_verify_against_rfc6979_vectors() {
        let key = VerifyingKey::from_hs_pubkey(&rfc6979_dsa_key().encode()).unwrap();
        let sha1 = der(
            "2E1A0C2562B2912CAAF89186FB0F42001585DA55",
            "29EFB6B0AFF2D7A68EB70CA313022253B9A88DF5",
        );
        let sha256 = der(
            "81F2F5850BE5BC123C43F71A3033E9384611C545",
            "4CDD914B65EB6C66A8AAAD27299BEE6B035F5E89",
        );
        assert!(key.verify(SignatureHash::Sha1, b"sample", &sha1));
        assert!(key.verify(SignatureHash::Sha256, b"sample", &sha256));
        assert!(!key.verify(SignatureHash::Sha1, b"sample", &sha256));
        assert!(!key.verify(SignatureHash::Sha1, b"samplE", &sha1));
        assert!(!key.verify(SignatureHash::Sha1, b"sample", &sha1[1..]));
    }

    #[test]
    fn hash_names_follow_j9() {
        for (name, hash) in [
            (&b"SHA-256"[..], SignatureHash::Sha256),
            (b"SHA256", SignatureHash::Sha256),
            (&[3], SignatureHash::Sha256),
            (b"SHA1", SignatureHash::Sha1),
            (b"SHA-1", SignatureHash::Sha1),
            (&[2], SignatureHash::Sha1),
        ] {
            assert_eq!(SignatureHash::from_name(name), Some(hash));
        }
        assert_eq!(SignatureHash::from_name(b"MD5"), None);
        assert_eq!(SignatureHash::from_name(&[1]), None);
        assert_eq!(SignatureHash::Sha1.name(), "SHA1");
    }
}
