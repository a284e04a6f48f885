//! HS_PUBKEY data, also the server keys inside HS_SITE (digest §6.5).
//!
//! Layout: `KeyType Str ‖ Reserved u16 (0)` then, by key type,
//! DSA `q ‖ p ‖ g ‖ y`, RSA `e ‖ n` (exponent first), DH `y ‖ p ‖ g`, each a `Bytes`
//! holding a Java `BigInteger.toByteArray()`.
//!
//! J9 quirk: an RSA key is followed by four zero octets (a size miscalculation in
//! `Util.getBytesFromPublicKey`); we emit them and accept their absence. Any other
//! trailing octet is an error, and so is a non-zero reserved field.
//!
//! Integers are held as unsigned big-endian magnitudes without leading zero octets:
//! decoding strips them, encoding adds one `0x00` when the top bit is set (and writes
//! zero as a single `0x00`), as `BigInteger.toByteArray()` does for non-negative
//! numbers.

use crate::values::wire::{DecodeError, Reader, Writer, wire_len};

/// A public key as stored in HS_PUBKEY data.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PublicKey {
    /// `RSA_PUB_KEY`.
    Rsa {
        /// The public exponent `e`.
        exponent: Vec<u8>,
        /// The modulus `n`.
        modulus: Vec<u8>,
    },
    /// `DSA_PUB_KEY`.
    Dsa {
        /// The subprime `q`.
        q: Vec<u8>,
        /// The prime `p`.
        p: Vec<u8>,
        /// The generator `g`.
        g: Vec<u8>,
        /// The public value `y`.
        y: Vec<u8>,
    },
    /// `DH_PUB_KEY`.
    Dh {
        /// The public value `y`.
        y: Vec<u8>,
        /// The prime `p`.
        p: Vec<u8>,
        /// The generator `g`.
        g: Vec<u8>,
    },
    /// Any other key type, kept as the octets after the key type (reserved field
    /// included). `key_type` is never one of the three above when decoded.
    Other {
        /// The key type string.
        key_type: String,
        /// Everything after the key type.
        bytes: Vec<u8>,
    },
}

impl PublicKey {
    /// The key type string of RSA keys.
    pub const RSA_KEY_TYPE: &'static str = "RSA_PUB_KEY";
    /// The key type string of DSA keys.
    pub const DSA_KEY_TYPE: &'static str = "DSA_PUB_KEY";
    /// The key type string of Diffie-Hellman keys.
    pub const DH_KEY_TYPE: &'static str = "DH_PUB_KEY";

    /// The key type string written on the wire.
    pub fn key_type(&self) -> &str {
        match self {
            PublicKey::Rsa { .. } => Self::RSA_KEY_TYPE,
            PublicKey::Dsa { .. } => Self::DSA_KEY_TYPE,
            PublicKey::Dh { .. } => Self::DH_KEY_TYPE,
            PublicKey::Other { key_type, .. } => key_type,
        }
    }

    /// Decodes HS_PUBKEY data.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let key_type = r.str("public key type")?;
        let known = [Self::RSA_KEY_TYPE, Self::DSA_KEY_TYPE, Self::DH_KEY_TYPE];
        if !known.contains(&key_type) {
            return Ok(PublicKey::Other {
                key_type: key_type.to_owned(),
                bytes: r.take_rest().to_vec(),
            });
        }
        let reserved = r.u16("public key reserved field")?;
        if reserved != 0 {
            return Err(DecodeError::InvalidField {
                field: "public key reserved field",
                value: u64::from(reserved),
            });
        }
        let key = match key_type {
            Self::RSA_KEY_TYPE => decode_rsa(&mut r)?,
            Self::DSA_KEY_TYPE => PublicKey::Dsa {
                q: integer(&mut r, "DSA q")?,
                p: integer(&mut r, "DSA p")?,
                g: integer(&mut r, "DSA g")?,
                y: integer(&mut r, "DSA y")?,
            },
            _ => PublicKey::Dh {
                y: integer(&mut r, "DH y")?,
                p: integer(&mut r, "DH p")?,
                g: integer(&mut r, "DH g")?,
            },
        };
        r.finish("HS_PUBKEY data")?;
        Ok(key)
    }

    /// The HS_PUBKEY data, byte-identical to J9's (RSA padding included).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.str(self.key_type());
        let integers: &[&Vec<u8>] = match self {
            PublicKey::Other { bytes, .. } => {
                w.raw(bytes);
                return w.into_bytes();
            }
            PublicKey::Rsa { exponent, modulus } => &[exponent, modulus],
            PublicKey::Dsa { q, p, g, y } => &[q, p, g, y],
            PublicKey::Dh { y, p, g } => &[y, p, g],
        };
        w.u16(0);
        for value in integers {
            write_integer(value, &mut w);
        }
        if matches!(self, PublicKey::Rsa { .. }) {
            w.u32(0);
        }
        w.into_bytes()
    }
}

/// RSA: `e ‖ n`, then the four zero octets J9 writes, if present.
fn decode_rsa(r: &mut Reader<'_>) -> Result<PublicKey, DecodeError> {
    let exponent = integer(r, "RSA exponent")?;
    let modulus = integer(r, "RSA modulus")?;
    if r.remaining() == 4 {
        let padding = r.u32("RSA key padding")?;
        if padding != 0 {
            return Err(DecodeError::InvalidField {
                field: "RSA key padding",
                value: u64::from(padding),
            });
        }
    }
    Ok(PublicKey::Rsa { exponent, modulus })
}

/// Reads a `BigInteger.toByteArray()` as an unsigned magnitude.
fn integer(r: &mut Reader<'_>, field: &'static str) -> Result<Vec<u8>, DecodeError> {
    Ok(strip_leading_zeros(r.bytes(field)?).to_vec())
}

/// Writes an unsigned magnitude as `BigInteger.toByteArray()` would.
fn write_integer(magnitude: &[u8], w: &mut Writer) {
    let magnitude = strip_leading_zeros(magnitude);
    match magnitude.first() {
        Some(&top) if top < 0x80 => w.bytes(magnitude),
        _ => {
            w.u32(wire_len(magnitude.len() + 1));
            w.u8(0);
            w.raw(magnitude);
        }
    }
}

fn strip_leading_zeros(bytes: &[u8]) -> &[u8] {
    let first = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
    &bytes[first..]
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::*;

    /// RSA key e = 65537, n = 0xc5 0x01 (top bit set, so J9 writes a leading zero),
    /// followed by J9's four zero octets.
    const RSA_HEX: &str = "0000000b 5253415f5055425f4b4559 0000
        00000003 010001 00000003 00c501 00000000";

    fn rsa() -> PublicKey {
        PublicKey::Rsa {
            exponent: vec![1, 0, 1],
            modulus: vec![0xc5, 0x01],
        }
    }

    #[test]
    fn rsa_matches_j9_layout() {
        assert_eq!(rsa().encode(), hex(RSA_HEX));
        assert_eq!(PublicKey::decode(&hex(RSA_HEX)).unwrap(), rsa());
    }

    #[test]
    fn rsa_without_padding_is_accepted() {
        let bytes = hex(RSA_HEX);
        assert_eq!(PublicKey::decode(&bytes[..bytes.len() - 4]).unwrap(), rsa());
    }

    #[test]
    fn rsa_with_other_trailing_octets_is_refused() {
        let mut bytes = hex(RSA_HEX);
        bytes.push(0);
        assert!(PublicKey::decode(&bytes).is_err());
        let n = bytes.len();
        bytes.truncate(n - 1);
        bytes[n - 2] = 1;
        assert!(PublicKey::decode(&bytes).is_err());
    }

    #[test]
    fn dsa_header_matches_root_vector() {
        // Digest §11.3: the GHR server key starts `0000000b "DSA_PUB_KEY" 0000 00000015`.
        let key = PublicKey::Dsa {
            q: vec![0x7f; 21],
            p: vec![1],
            g: vec![0],
            y: vec![0x80],
        };
        let bytes = key.encode();
        assert_eq!(
            &bytes[..21],
            &hex("0000000b 4453415f5055425f4b4559 0000 00000015")[..]
        );
        assert_eq!(
            &bytes[bytes.len() - 16..],
            &hex("00000001 01 00000001 00 00000002 0080")[..]
        );
        let decoded = PublicKey::decode(&bytes).unwrap();
        let PublicKey::Dsa { g, .. } = &decoded else {
            panic!("not DSA: {decoded:?}");
        };
        assert!(g.is_empty(), "zero decodes to the empty magnitude");
        assert_eq!(decoded.encode(), bytes);
    }

    #[test]
    fn dh_round_trips_and_refuses_reserved_bits() {
        let key = PublicKey::Dh {
            y: vec![5],
            p: vec![0xff, 0xff],
            g: vec![2],
        };
        let mut bytes = key.encode();
        assert_eq!(PublicKey::decode(&bytes).unwrap(), key);
        bytes[15] = 1;
        assert!(matches!(
            PublicKey::decode(&bytes),
            Err(DecodeError::InvalidField { value: 1, .. })
        ));
    }

    #[test]
    fn other_key_types_are_kept_opaque() {
        let key = PublicKey::Other {
            key_type: "EC_PUB_KEY".into(),
            bytes: vec![0, 0, 9, 9],
        };
        assert_eq!(PublicKey::decode(&key.encode()).unwrap(), key);
    }
}
