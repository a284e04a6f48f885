//! Data that names another handle: HS_ALIAS, HS_SERV and HS_SERV.PREFIX (digest §6.3).
//!
//! Layout: the handle's UTF-8 octets, with no length prefix (the value's `Data`
//! length bounds it). The handle must contain the `/` that separates prefix and
//! suffix; beyond that it is not parsed here, so this layer needs nothing from
//! `crate::names`.

use crate::values::wire::DecodeError;

/// A handle held as the data of an HS_ALIAS, HS_SERV or HS_SERV.PREFIX value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HandleTarget(String);

impl HandleTarget {
    /// The target, if `handle` contains a `/`.
    pub fn new(handle: impl Into<String>) -> Result<Self, DecodeError> {
        let handle = handle.into();
        if handle.contains('/') {
            Ok(HandleTarget(handle))
        } else {
            Err(DecodeError::Malformed {
                field: "target handle",
                reason: "no '/' between prefix and suffix",
            })
        }
    }

    /// Decodes the data of a value that names a handle.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let text = std::str::from_utf8(bytes).map_err(|_| DecodeError::InvalidUtf8 {
            field: "target handle",
            offset: 0,
        })?;
        HandleTarget::new(text)
    }

    /// The value data: the handle's UTF-8 octets.
    pub fn encode(&self) -> Vec<u8> {
        self.0.as_bytes().to_vec()
    }

    /// The handle, as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::*;

    #[test]
    fn root_serv_value_round_trips() {
        // Digest §6.3: root `0.NA/0.NA` holds HS_SERV values such as `0.GHR/10`.
        let bytes = hex("302e4748522f3130");
        let target = HandleTarget::decode(&bytes).unwrap();
        assert_eq!(target.as_str(), "0.GHR/10");
        assert_eq!(target.encode(), bytes);
    }

    #[test]
    fn text_without_slash_is_refused() {
        assert!(matches!(
            HandleTarget::decode(b"10.1000"),
            Err(DecodeError::Malformed { .. })
        ));
    }

    #[test]
    fn invalid_utf8_is_refused() {
        assert!(matches!(
            HandleTarget::decode(&[b'1', b'/', 0xff]),
            Err(DecodeError::InvalidUtf8 { .. })
        ));
    }
}
