//! Protocol versions and the choice of the version to answer in (digest §1.2, §12).
//!
//! Owns [`ProtocolVersion`] and [`answer_version`]. Pure: no I/O, no clock.
//!
//! A J9 client encodes its request in the version its server's HS_SITE advertises and
//! *suggests* (envelope octets 2–3) the highest version it can read; the server answers
//! in the lower of that and its own highest version. We implement 2.1 to 2.11.

/// A Handle protocol version, `major.minor` (ordered by major, then minor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProtocolVersion {
    /// The major version (2 for every version this crate speaks).
    pub major: u8,
    /// The minor version.
    pub minor: u8,
}

impl ProtocolVersion {
    /// The oldest version whose rules this codec implements (RFC 3652: request digests
    /// with a hash-code octet).
    pub const MIN_SUPPORTED: ProtocolVersion = ProtocolVersion::new(2, 1);
    /// The newest version whose rules this codec implements (J9 9.x).
    pub const MAX_SUPPORTED: ProtocolVersion = ProtocolVersion::new(2, 11);
    /// Since 2.5: CNRI's response-code numbering (303 = prefix referral, 7 = backup).
    pub const V2_5: ProtocolVersion = ProtocolVersion::new(2, 5);
    /// Since 2.7: SHA-256 request digests.
    pub const V2_7: ProtocolVersion = ProtocolVersion::new(2, 7);

    /// The version `major.minor`.
    pub const fn new(major: u8, minor: u8) -> Self {
        ProtocolVersion { major, minor }
    }
}

impl std::fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The version to answer a request in, given the request envelope's own `version`, its
/// `suggested` version (as sent; a suggested major of 0 means the peer predates
/// suggestion and reads only `version`) and our highest supported version `max`.
///
/// As in J9: the lower of what the client can read and `max`. Two deliberate choices:
/// a client below [`ProtocolVersion::MIN_SUPPORTED`] is answered in that minimum (we do
/// not write the 2.0 formats), and major version 5 — which very old CNRI clients sent
/// by mistake for 2.0 — counts as such an old client.
pub fn answer_version(
    version: ProtocolVersion,
    suggested: ProtocolVersion,
    max: ProtocolVersion,
) -> ProtocolVersion {
    let readable = if suggested.major == 0 {
        version
    } else {
        suggested
    };
    if readable.major == 5 {
        return ProtocolVersion::MIN_SUPPORTED;
    }
    readable.min(max).max(ProtocolVersion::MIN_SUPPORTED)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: ProtocolVersion = ProtocolVersion::MAX_SUPPORTED;

    fn v(major: u8, minor: u8) -> ProtocolVersion {
        ProtocolVersion::new(major, minor)
    }

    #[test]
    fn v9_client_suggesting_2_11_is_answered_in_2_11() {
        // Digest §11.1/§11.3: sent as 2.10, suggesting 2.11 → answered in 2.11.
        assert_eq!(answer_version(v(2, 10), v(2, 11), MAX), v(2, 11));
    }

    #[test]
    fn newer_client_is_answered_in_our_max() {
        assert_eq!(answer_version(v(2, 11), v(2, 14), MAX), v(2, 11));
        assert_eq!(answer_version(v(2, 11), v(3, 0), MAX), v(2, 11));
        assert_eq!(answer_version(v(2, 10), v(2, 11), v(2, 10)), v(2, 10));
    }

    #[test]
    fn older_client_is_answered_in_its_suggested_version() {
        assert_eq!(answer_version(v(2, 3), v(2, 6), MAX), v(2, 6));
    }

    #[test]
    fn missing_suggestion_falls_back_to_the_envelope_version() {
        assert_eq!(answer_version(v(2, 4), v(0, 0), MAX), v(2, 4));
        assert_eq!(answer_version(v(2, 4), v(0, 9), MAX), v(2, 4));
    }

    #[test]
    fn ancient_clients_get_our_minimum() {
        assert_eq!(answer_version(v(2, 0), v(0, 0), MAX), v(2, 1));
        assert_eq!(answer_version(v(5, 0), v(0, 0), MAX), v(2, 1));
        assert_eq!(answer_version(v(1, 9), v(1, 9), MAX), v(2, 1));
    }

    #[test]
    fn versions_order_by_major_then_minor() {
        assert!(v(2, 10) > v(2, 9));
        assert!(v(3, 0) > v(2, 11));
        assert_eq!(v(2, 11).to_string(), "2.11");
    }
}
