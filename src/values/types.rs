//! The registry of known value types: their names, what their data must look like,
//! and which of them are administrative (DESIGN §2, digest §6).
//!
//! Type names are matched ASCII-case-insensitively, as J9 does, and exactly: a subtype
//! such as `URL.alt` or a disabled value such as `#URL` is not a known type and its
//! data is accepted as opaque bytes. Only the names listed in [`KnownType`] carry
//! rules, so a value that some other software stored under a subtype is never refused.
//! (`HS_SITE.6`, `HS_SITE.PREFIX` and `HS_SERV.PREFIX` are registered names of their
//! own.)
//!
//! Permission rules: HS_ADMIN and HS_SECKEY are administrative and default to
//! [`Permissions::ADMIN_ONLY`]; an HS_SECKEY value is never publicly readable, and a
//! request to make it so is refused ([`InvalidValue::PublicSecretKey`]) rather than
//! silently corrected, so the administrator learns the value was not stored as asked.

use std::fmt;

use thiserror::Error;

use super::known::{AdminRecord, HandleTarget, PublicKey, SiteInfo, ValueList};
use super::namespace::{Namespace, NamespaceError};
use super::value::{HandleValue, Permissions};
use super::wire::DecodeError;

/// The longest type name accepted, in octets.
pub const MAX_TYPE_NAME_LEN: usize = 1024;

/// A value type with a registered name and rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KnownType {
    /// `URL`: a URL, as text its owner wrote (not necessarily absolute).
    Url,
    /// `EMAIL`: an e-mail address.
    Email,
    /// `DESC`: free text.
    Desc,
    /// `HS_ADMIN`: an [`AdminRecord`].
    HsAdmin,
    /// `HS_SITE`: a [`SiteInfo`].
    HsSite,
    /// `HS_SITE.6`: a [`SiteInfo`] reachable over IPv6.
    HsSite6,
    /// `HS_SITE.PREFIX`: a [`SiteInfo`] serving derived prefixes.
    HsSitePrefix,
    /// `HS_NA_DELEGATE`: the RFC 3651 name of `HS_SITE.PREFIX`.
    HsNaDelegate,
    /// `HS_SERV`: a [`HandleTarget`] naming the service handle.
    HsServ,
    /// `HS_SERV.PREFIX`: a [`HandleTarget`] naming the service of derived prefixes.
    HsServPrefix,
    /// `HS_VLIST`: a [`ValueList`] (an admin group).
    HsVlist,
    /// `HS_PUBKEY`: a [`PublicKey`].
    HsPubkey,
    /// `HS_SECKEY`: a shared secret, opaque octets (usually, not necessarily, text).
    HsSeckey,
    /// `HS_ALIAS`: a [`HandleTarget`] this handle is an alias of.
    HsAlias,
    /// `HS_NAMESPACE`: XML text that parses as a namespace
    /// ([`Namespace::parse`]: its templates' rules well formed, within bounds).
    HsNamespace,
    /// `HS_CERT`: a JWS compact serialization (text).
    HsCert,
    /// `HS_SIGNATURE`: a JWS compact serialization (text).
    HsSignature,
    /// `10320/loc`: XML text listing locations.
    Loc10320,
}

impl KnownType {
    /// Every known type.
    pub const ALL: [KnownType; 18] = [
        KnownType::Url,
        KnownType::Email,
        KnownType::Desc,
        KnownType::HsAdmin,
        KnownType::HsSite,
        KnownType::HsSite6,
        KnownType::HsSitePrefix,
        KnownType::HsNaDelegate,
        KnownType::HsServ,
        KnownType::HsServPrefix,
        KnownType::HsVlist,
        KnownType::HsPubkey,
        KnownType::HsSeckey,
        KnownType::HsAlias,
        KnownType::HsNamespace,
        KnownType::HsCert,
        KnownType::HsSignature,
        KnownType::Loc10320,
    ];

    /// The registered name, as J9 writes it.
    pub const fn name(self) -> &'static str {
        match self {
            KnownType::Url => "URL",
            KnownType::Email => "EMAIL",
            KnownType::Desc => "DESC",
            KnownType::HsAdmin => "HS_ADMIN",
            KnownType::HsSite => "HS_SITE",
            KnownType::HsSite6 => "HS_SITE.6",
            KnownType::HsSitePrefix => "HS_SITE.PREFIX",
            KnownType::HsNaDelegate => "HS_NA_DELEGATE",
            KnownType::HsServ => "HS_SERV",
            KnownType::HsServPrefix => "HS_SERV.PREFIX",
            KnownType::HsVlist => "HS_VLIST",
            KnownType::HsPubkey => "HS_PUBKEY",
            KnownType::HsSeckey => "HS_SECKEY",
            KnownType::HsAlias => "HS_ALIAS",
            KnownType::HsNamespace => "HS_NAMESPACE",
            KnownType::HsCert => "HS_CERT",
            KnownType::HsSignature => "HS_SIGNATURE",
            KnownType::Loc10320 => "10320/loc",
        }
    }

    /// The known type named `name`, compared ASCII-case-insensitively and exactly
    /// (no subtype matching; see the module documentation).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|known| known.name().eq_ignore_ascii_case(name))
    }

    /// Checks `data` against this type's rules.
    pub fn validate(self, data: &[u8]) -> Result<(), InvalidValue> {
        let undecodable = |source| InvalidValue::Undecodable {
            value_type: self,
            source,
        };
        match self {
            KnownType::Email => validate_email(data),
            // A URL holds whatever its owner wrote (`www.example.org` too), as in the
            // reference server; the proxy decides what it can redirect to.
            // Refused when written rather than found out by clients at resolution.
            KnownType::HsNamespace => {
                text(self, data)?;
                Namespace::parse(data)
                    .map(drop)
                    .map_err(InvalidValue::Namespace)
            }
            KnownType::Url
            | KnownType::Desc
            | KnownType::HsCert
            | KnownType::HsSignature
            | KnownType::Loc10320 => text(self, data).map(drop),
            KnownType::HsAdmin => AdminRecord::decode(data).map(drop).map_err(undecodable),
            KnownType::HsSite
            | KnownType::HsSite6
            | KnownType::HsSitePrefix
            | KnownType::HsNaDelegate => SiteInfo::decode(data).map(drop).map_err(undecodable),
            KnownType::HsServ | KnownType::HsServPrefix | KnownType::HsAlias => {
                HandleTarget::decode(data).map(drop).map_err(undecodable)
            }
            KnownType::HsVlist => ValueList::decode(data).map(drop).map_err(undecodable),
            KnownType::HsPubkey => PublicKey::decode(data).map(drop).map_err(undecodable),
            KnownType::HsSeckey => Ok(()),
        }
    }
}

impl fmt::Display for KnownType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a value may not be stored.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InvalidValue {
    /// The type name is the empty string.
    #[error("the value type name is empty")]
    EmptyTypeName,
    /// The type name is longer than [`MAX_TYPE_NAME_LEN`].
    #[error("the value type name is {len} octets long, more than {MAX_TYPE_NAME_LEN}")]
    TypeNameTooLong {
        /// Its length in octets.
        len: usize,
    },
    /// A text type's data is not UTF-8.
    #[error("{value_type} data is not UTF-8 text")]
    NotText {
        /// The type.
        value_type: KnownType,
    },
    /// EMAIL data is not a plausible address.
    #[error("EMAIL data is not an address: {reason}")]
    NotEmailAddress {
        /// The rule it breaks.
        reason: &'static str,
    },
    /// A structured type's data does not decode.
    #[error("{value_type} data does not decode: {source}")]
    Undecodable {
        /// The type.
        value_type: KnownType,
        /// Why decoding failed.
        source: DecodeError,
    },
    /// HS_NAMESPACE data is not a namespace a template could be read from.
    #[error("HS_NAMESPACE data is not a valid namespace: {0}")]
    Namespace(NamespaceError),
    /// An HS_SECKEY value was given public read permission.
    #[error("HS_SECKEY values can never be publicly readable")]
    PublicSecretKey,
}

/// Checks a value's type name and, for known types, its data; data of other types
/// is accepted as opaque octets.
pub fn validate(value_type: &str, data: &[u8]) -> Result<(), InvalidValue> {
    match value_type.len() {
        0 => return Err(InvalidValue::EmptyTypeName),
        len if len > MAX_TYPE_NAME_LEN => return Err(InvalidValue::TypeNameTooLong { len }),
        _ => {}
    }
    KnownType::from_name(value_type).map_or(Ok(()), |known| known.validate(data))
}

/// Checks the permission rules: an HS_SECKEY value may not be publicly readable.
pub fn check_permissions(value_type: &str, permissions: Permissions) -> Result<(), InvalidValue> {
    if is_secret_key(value_type) && permissions.contains(Permissions::PUBLIC_READ) {
        return Err(InvalidValue::PublicSecretKey);
    }
    Ok(())
}

/// The permissions a new value of this type gets when the request names none, as
/// the reference server gives them: [`Permissions::ADMIN_ONLY`] for HS_SECKEY,
/// [`Permissions::DEFAULT`] (public read included, HS_ADMIN too)
/// otherwise.
pub fn default_permissions(value_type: &str) -> Permissions {
    if is_secret_key(value_type) {
        Permissions::ADMIN_ONLY
    } else {
        Permissions::DEFAULT
    }
}

fn is_secret_key(value_type: &str) -> bool {
    KnownType::from_name(value_type) == Some(KnownType::HsSeckey)
}

fn text(value_type: KnownType, data: &[u8]) -> Result<&str, InvalidValue> {
    std::str::from_utf8(data).map_err(|_| InvalidValue::NotText { value_type })
}

fn validate_email(data: &[u8]) -> Result<(), InvalidValue> {
    let address = text(KnownType::Email, data)?;
    let reason = if address.chars().any(|c| c.is_whitespace() || c.is_control()) {
        "contains whitespace or control characters"
    } else {
        match address.split_once('@') {
            None => "has no '@'",
            Some((_, domain)) if domain.contains('@') => "has more than one '@'",
            Some(("", _)) => "has an empty local part",
            Some((_, "")) => "has an empty domain",
            Some(_) => return Ok(()),
        }
    };
    Err(InvalidValue::NotEmailAddress { reason })
}

impl HandleValue {
    /// The registered type of this value, if it has one.
    pub fn known_type(&self) -> Option<KnownType> {
        KnownType::from_name(&self.value_type)
    }

    /// Checks the type name, the data ([`validate`]) and the permission rules
    /// ([`check_permissions`]).
    pub fn validate(&self) -> Result<(), InvalidValue> {
        validate(&self.value_type, &self.data)?;
        check_permissions(&self.value_type, self.permissions)
    }

    /// Whether anonymous resolution may return this value: its permission bits
    /// decide, as in the reference server — an HS_ADMIN with public read is public —
    /// but an HS_SECKEY never is, whatever bits it carries (DESIGN §2).
    pub fn is_public(&self) -> bool {
        self.permissions.contains(Permissions::PUBLIC_READ) && !is_secret_key(&self.value_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::known::hex;

    #[test]
    fn names_round_trip_and_ignore_ascii_case() {
        for known in KnownType::ALL {
            assert_eq!(KnownType::from_name(known.name()), Some(known));
            let lower = known.name().to_ascii_lowercase();
            assert_eq!(KnownType::from_name(&lower), Some(known));
        }
        assert_eq!(KnownType::from_name("10320/LOC"), Some(KnownType::Loc10320));
    }

    #[test]
    fn subtypes_and_disabled_values_are_not_known() {
        for name in ["URL.alt", "#URL", "URL ", "HS_SITE.7", "hs_admin2"] {
            assert_eq!(KnownType::from_name(name), None, "{name}");
            assert_eq!(validate(name, &[0xff]), Ok(()), "{name}");
        }
    }

    #[test]
    fn a_url_holds_whatever_text_its_owner_wrote() {
        assert_eq!(validate("URL", b"https://www.doi.org/"), Ok(()));
        assert_eq!(validate("url", b"urn:isbn:0451450523"), Ok(()));
        // As pyhandle's and b2handle's test suites write them.
        for written in [&b"www.url.foo"[..], b"/relative/path", b""] {
            assert_eq!(validate("URL", written), Ok(()), "{written:?}");
        }
        assert_eq!(
            validate("URL", &[0xff]),
            Err(InvalidValue::NotText {
                value_type: KnownType::Url
            })
        );
    }

    #[test]
    fn email_must_be_plausible() {
        assert_eq!(validate("EMAIL", b"admin@example.org"), Ok(()));
        assert_eq!(validate("EMAIL", "ü@bücher.de".as_bytes()), Ok(()));
        for bad in [
            "",
            "nobody",
            "@example.org",
            "a@",
            "a@b@c",
            "a b@c",
            "a@b\n",
        ] {
            assert!(
                matches!(
                    validate("EMAIL", bad.as_bytes()),
                    Err(InvalidValue::NotEmailAddress { .. })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn text_types_must_be_utf8_and_seckey_is_opaque() {
        assert_eq!(validate("DESC", "Beschreibung".as_bytes()), Ok(()));
        assert_eq!(
            validate("HS_NAMESPACE", &[0xc3]),
            Err(InvalidValue::NotText {
                value_type: KnownType::HsNamespace
            })
        );
        assert_eq!(validate("HS_SECKEY", &[0xff, 0x00]), Ok(()));
    }

    #[test]
    fn namespaces_must_parse_and_the_fault_is_named() {
        let good = r#"<namespace><contact>ops@e.org</contact>
            <template delimiter="@"><value type="URL" data="https://e.org/${extension}"/></template>
            </namespace>"#;
        assert_eq!(validate("HS_NAMESPACE", good.as_bytes()), Ok(()));
        assert_eq!(validate("hs_namespace", b"<namespace/>"), Ok(()));
        for (bad, fault) in [
            ("", "not well-formed XML"),
            ("<namespace><template>", "not well-formed XML"),
            (
                r#"<namespace><template delimiter="@"><vlaue type="URL"/></template></namespace>"#,
                "unknown template element <vlaue>",
            ),
            (
                r#"<template><if test="matches" expression="("><value type="A" data="b"/></if></template>"#,
                "expression",
            ),
        ] {
            let refused = validate("HS_NAMESPACE", bad.as_bytes()).expect_err(bad);
            assert!(matches!(refused, InvalidValue::Namespace(_)), "{bad}");
            let message = refused.to_string();
            assert!(
                message.starts_with("HS_NAMESPACE data is not a valid namespace: ")
                    && message.contains(fault),
                "{bad}: {message}"
            );
        }
        // A value under another type (a cited template's, say) is not parsed here.
        assert_eq!(validate("DESC", b"<template><vlaue/></template>"), Ok(()));
    }

    #[test]
    fn structured_types_must_decode() {
        let admin = hex("0fff 0000000c 302e4e412f31302e31303030 000000c8");
        assert_eq!(validate("HS_ADMIN", &admin), Ok(()));
        assert!(matches!(
            validate("HS_ADMIN", &admin[..10]),
            Err(InvalidValue::Undecodable {
                value_type: KnownType::HsAdmin,
                source: DecodeError::Truncated { .. }
            })
        ));
        assert_eq!(validate("HS_VLIST", &hex("00000000")), Ok(()));
        assert!(validate("HS_SITE", b"").is_err());
        assert!(validate("HS_PUBKEY", b"").is_err());
        assert_eq!(validate("HS_ALIAS", b"10.1000/1"), Ok(()));
        assert!(validate("HS_SERV", b"10.1000").is_err());
    }

    #[test]
    fn type_names_are_bounded() {
        assert_eq!(validate("", b""), Err(InvalidValue::EmptyTypeName));
        let long = "X".repeat(MAX_TYPE_NAME_LEN + 1);
        assert_eq!(
            validate(&long, b""),
            Err(InvalidValue::TypeNameTooLong {
                len: MAX_TYPE_NAME_LEN + 1
            })
        );
        assert_eq!(validate(&long[1..], b""), Ok(()));
    }

    #[test]
    fn only_secret_keys_default_to_admin_only() {
        assert_eq!(default_permissions("hs_seckey"), Permissions::ADMIN_ONLY);
        for name in ["HS_ADMIN", "URL", "HS_VLIST", "HS_PUBKEY", "HS_SITE"] {
            assert_eq!(default_permissions(name), Permissions::DEFAULT);
        }
    }

    #[test]
    fn secret_keys_are_never_public() {
        let mut seckey = HandleValue::new(300, "HS_SECKEY", "secret");
        assert_eq!(seckey.validate(), Err(InvalidValue::PublicSecretKey));
        assert!(!seckey.is_public());
        seckey.permissions = default_permissions("HS_SECKEY");
        assert_eq!(seckey.validate(), Ok(()));
        assert!(!seckey.is_public());
    }

    #[test]
    fn public_read_and_type_decide_visibility() {
        let mut url = HandleValue::new(1, "URL", "https://example.org/");
        assert!(url.is_public());
        assert_eq!(url.known_type(), Some(KnownType::Url));
        url.permissions = Permissions::ADMIN_ONLY;
        assert!(!url.is_public());
        let admin = HandleValue {
            permissions: Permissions::DEFAULT,
            ..HandleValue::new(100, "HS_ADMIN", Vec::new())
        };
        assert!(
            admin.is_public(),
            "the bits decide, as in the reference server"
        );
        let private_admin = HandleValue {
            permissions: Permissions::ADMIN_ONLY,
            ..admin
        };
        assert!(!private_admin.is_public());
        let public_seckey = HandleValue {
            permissions: Permissions::DEFAULT,
            ..HandleValue::new(300, "HS_SECKEY", "secret")
        };
        assert!(!public_seckey.is_public(), "never, whatever its bits");
    }
}
