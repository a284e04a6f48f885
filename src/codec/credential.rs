//! The message credential after the body (digest §2.5, §11.8; RFC 3652 §2.2.4).
//!
//! Owns [`Credential`]: the fields of a signature or MAC section, decoded but not
//! verified (verification belongs to the authentication layer). Pure; depends only on
//! [`crate::values::wire`].
//!
//! Layout, inside `CredentialLength u32` octets: `Version u8 ‖ Reserved u8 ‖ Options
//! u16 ‖ Signer handle Bytes ‖ Signer index u32 ‖ Type Bytes ‖ SignedInfo length u32 ‖
//! (DigestAlgorithm Bytes ‖ Signature Bytes)`. Decoding is strict (every octet of the
//! section accounted for), so [`Credential::encode`] gives back the received octets
//! exactly and no second raw copy is kept.

use crate::values::wire::{DecodeError, Reader, Writer, wire_len};

/// A decoded, unverified credential section.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Credential {
    /// Format version (J9: 0).
    pub version: u8,
    /// Reserved octet (J9: 0), kept as sent.
    pub reserved: u8,
    /// Options (J9: 0).
    pub options: u16,
    /// The signer's handle (J9: empty).
    pub signer_handle: Vec<u8>,
    /// The signer's index; J9 reuses it as the session counter.
    pub signer_index: u32,
    /// `HS_SIGNED` (public-key signature) or `HS_MAC` (session MAC), as octets.
    pub credential_type: Vec<u8>,
    /// `SHA-256`, `SHA1`, `HMAC-SHA256`, … or a 1-octet code, as sent.
    pub digest_algorithm: Vec<u8>,
    /// The raw signature or MAC.
    pub signature: Vec<u8>,
}

impl Credential {
    /// Octets after the `CredentialLength` field.
    fn section_len(&self) -> usize {
        4 + 4
            + self.signer_handle.len()
            + 4
            + 4
            + self.credential_type.len()
            + 4
            + self.signed_info_len()
    }

    fn signed_info_len(&self) -> usize {
        4 + self.digest_algorithm.len() + 4 + self.signature.len()
    }

    /// Appends `CredentialLength` and the section.
    pub fn encode(&self, w: &mut Writer) {
        w.u32(wire_len(self.section_len()));
        w.u8(self.version);
        w.u8(self.reserved);
        w.u16(self.options);
        w.bytes(&self.signer_handle);
        w.u32(self.signer_index);
        w.bytes(&self.credential_type);
        w.u32(wire_len(self.signed_info_len()));
        w.bytes(&self.digest_algorithm);
        w.bytes(&self.signature);
    }

    /// Reads `CredentialLength` and, when it is not 0, the section it bounds.
    pub fn decode(r: &mut Reader<'_>) -> Result<Option<Self>, DecodeError> {
        let section = r.bytes("credential")?;
        if section.is_empty() {
            return Ok(None);
        }
        let mut r = Reader::new(section);
        let version = r.u8("credential version")?;
        let reserved = r.u8("credential reserved")?;
        let options = r.u16("credential options")?;
        let signer_handle = r.bytes("signer handle")?.to_vec();
        let signer_index = r.u32("signer index")?;
        let credential_type = r.bytes("credential type")?.to_vec();
        let mut signed = Reader::new(r.bytes("signed info")?);
        r.finish("credential")?;
        let digest_algorithm = signed.bytes("digest algorithm")?.to_vec();
        let signature = signed.bytes("signature")?.to_vec();
        signed.finish("signed info")?;
        Ok(Some(Credential {
            version,
            reserved,
            options,
            signer_handle,
            signer_index,
            credential_type,
            digest_algorithm,
            signature,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::testing::hex;

    /// Digest §11.8, with a 4-octet stand-in for the 128-octet RSA signature.
    const SIGNED_HEX: &str = "00000030 00 00 0000 00000000 00000000
        00000009 48535f5349474e4544 00000013 00000007 5348412d323536 00000004 deadbeef";

    fn signed() -> Credential {
        Credential {
            version: 0,
            reserved: 0,
            options: 0,
            signer_handle: vec![],
            signer_index: 0,
            credential_type: b"HS_SIGNED".to_vec(),
            digest_algorithm: b"SHA-256".to_vec(),
            signature: hex("deadbeef"),
        }
    }

    #[test]
    fn signed_credential_matches_digest_layout() {
        let mut w = Writer::new();
        signed().encode(&mut w);
        assert_eq!(w.into_bytes(), hex(SIGNED_HEX));
        let bytes = hex(SIGNED_HEX);
        let mut r = Reader::new(&bytes);
        assert_eq!(Credential::decode(&mut r).unwrap(), Some(signed()));
        r.finish("credential").unwrap();
    }

    #[test]
    fn zero_length_is_no_credential() {
        assert_eq!(Credential::decode(&mut Reader::new(&[0; 4])).unwrap(), None);
    }

    #[test]
    fn octets_after_the_signed_info_are_refused() {
        let mut bytes = hex(SIGNED_HEX);
        bytes[3] += 1;
        bytes.push(0);
        let err = Credential::decode(&mut Reader::new(&bytes)).unwrap_err();
        assert_eq!(
            err,
            DecodeError::TrailingBytes {
                what: "credential",
                count: 1
            }
        );
    }

    #[test]
    fn signed_info_length_must_match_its_fields() {
        let mut bytes = hex(SIGNED_HEX);
        bytes[32] += 1; // SignedInfo length 0x13 → 0x14, one octet too long
        bytes[3] += 1;
        bytes.push(0);
        let err = Credential::decode(&mut Reader::new(&bytes)).unwrap_err();
        assert_eq!(
            err,
            DecodeError::TrailingBytes {
                what: "signed info",
                count: 1
            }
        );
    }
}
