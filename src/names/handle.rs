//! [`Handle`]: a validated UTF-8 handle, its spelling as written and its folded key.
//!
//! Invariants of every `Handle`: at most [`MAX_HANDLE_LEN`] octets; a non-empty
//! naming authority of non-empty `.`-separated segments before the first `/`; a
//! non-empty local name after it; `key` is [`fold_key`] of the text, so it has the same
//! length and its first `/` is at the same offset.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::error::NameError;

/// The longest handle accepted, in octets of UTF-8, naming authority, `/` and local
/// name together.
pub const MAX_HANDLE_LEN: usize = 2048;

/// A handle: `naming-authority "/" local-name`, in UTF-8.
///
/// Two handles are equal, hash and sort alike when their [`key`](Handle::key)s are
/// equal: ASCII letters are case-insensitive, every other character is compared octet
/// for octet. `Display` shows the spelling as first written.
#[derive(Clone, Debug)]
pub struct Handle {
    text: String,
    key: String,
    slash: usize,
}

/// Folds `text` to a lookup key: ASCII `a`–`z` become `A`–`Z`; every other octet,
/// non-ASCII letters included (`ü`, `日`), is kept as it is.
pub fn fold_key(text: &str) -> String {
    text.to_ascii_uppercase()
}

impl Handle {
    /// Validates `text` as a handle, taken literally: `%`, `@`, `#` and `?` are
    /// ordinary characters here (references and URIs are [`HandleRef`]'s business).
    ///
    /// [`HandleRef`]: super::HandleRef
    pub fn parse(text: &str) -> Result<Handle, NameError> {
        if text.len() > MAX_HANDLE_LEN {
            return Err(NameError::TooLong { len: text.len() });
        }
        let Some((prefix, local)) = text.split_once('/') else {
            return Err(if text.is_empty() {
                NameError::Empty
            } else {
                NameError::NoSlash
            });
        };
        if prefix.is_empty() {
            return Err(NameError::EmptyPrefix);
        }
        if local.is_empty() {
            return Err(NameError::EmptyLocalName);
        }
        if let Some(index) = prefix.split('.').position(str::is_empty) {
            return Err(NameError::EmptySegment { index });
        }
        Ok(Handle {
            text: text.to_owned(),
            key: fold_key(text),
            slash: prefix.len(),
        })
    }

    /// Validates octets that must already be UTF-8; anything else is
    /// [`NameError::Encoding`].
    pub fn from_utf8(bytes: &[u8]) -> Result<Handle, NameError> {
        if bytes.len() > MAX_HANDLE_LEN {
            return Err(NameError::TooLong { len: bytes.len() });
        }
        match std::str::from_utf8(bytes) {
            Ok(text) => Handle::parse(text),
            Err(e) => Err(NameError::Encoding {
                offset: e.valid_up_to(),
            }),
        }
    }

    /// The handle as first written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The naming authority as written, without the `/`.
    pub fn prefix(&self) -> &str {
        &self.text[..self.slash]
    }

    /// The local name as written: everything after the first `/`.
    pub fn local_name(&self) -> &str {
        &self.text[self.slash + 1..]
    }

    /// The folded lookup key of the whole handle (see [`fold_key`]).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The folded naming authority: the key up to its first `/`.
    pub fn prefix_key(&self) -> &str {
        &self.key[..self.slash]
    }

    /// The naming authority's segments as written: `10.1000` gives `10`, `1000`.
    /// Fold them with [`fold_key`], or split [`prefix_key`](Handle::prefix_key), to
    /// compare.
    pub fn prefix_segments(&self) -> impl Iterator<Item = &str> {
        self.prefix().split('.')
    }
}

impl PartialEq for Handle {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for Handle {}

impl Hash for Handle {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key.hash(state);
    }
}

impl PartialOrd for Handle {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Handle {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key.cmp(&other.key)
    }
}

impl fmt::Display for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Handle {
    type Err = NameError;

    fn from_str(text: &str) -> Result<Handle, NameError> {
        Handle::parse(text)
    }
}

/// Serialized as the spelling as written, so the key is rebuilt on the way in.
impl Serialize for Handle {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

/// Deserialized from a string through [`Handle::parse`], so no invalid handle gets in.
impl<'de> Deserialize<'de> for Handle {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Handle, D::Error> {
        let text = String::deserialize(deserializer)?;
        Handle::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DESIGN §1 examples and the split rule: (input, prefix, local name).
    const VALID: &[(&str, &str, &str)] = &[
        ("cnri.dlib/july95-arms", "cnri.dlib", "july95-arms"),
        ("10.1000/1", "10.1000", "1"),
        (
            "10.1002/0002-8231(199601)47:1<1:SPOTEO>2.3.TX;2-K",
            "10.1002",
            "0002-8231(199601)47:1<1:SPOTEO>2.3.TX;2-K",
        ),
        (
            "any-printable-characters/a-zA-Z0-9!@#$%^&*()_\"<>,.?/~|\\",
            "any-printable-characters",
            "a-zA-Z0-9!@#$%^&*()_\"<>,.?/~|\\",
        ),
        ("cnri.test/日本", "cnri.test", "日本"),
        (
            "handles-in-germany/Universität-Karlsruhe",
            "handles-in-germany",
            "Universität-Karlsruhe",
        ),
        ("a/b/c", "a", "b/c"),
        ("user@host.example/x", "user@host.example", "x"),
        (
            "handle-with-hex-encoding/handle%25abc",
            "handle-with-hex-encoding",
            "handle%25abc",
        ),
        ("0.NA/10.1000", "0.NA", "10.1000"),
    ];

    #[test]
    fn design_examples_parse_and_split_at_first_slash() {
        for &(text, prefix, local) in VALID {
            let h = Handle::parse(text).unwrap();
            assert_eq!(h.as_str(), text);
            assert_eq!(h.to_string(), text);
            assert_eq!(h.prefix(), prefix, "{text}");
            assert_eq!(h.local_name(), local, "{text}");
            assert_eq!(h.key(), fold_key(text));
            assert_eq!(h.prefix_key(), fold_key(prefix));
            assert_eq!(text.parse::<Handle>().unwrap(), h);
        }
    }

    #[test]
    fn invalid_handles_are_refused_with_the_problem_named() {
        let cases: &[(&str, NameError)] = &[
            ("", NameError::Empty),
            ("cnri.dlib", NameError::NoSlash),
            ("/july95-arms", NameError::EmptyPrefix),
            ("/", NameError::EmptyPrefix),
            ("cnri.dlib/", NameError::EmptyLocalName),
            ("a..b/x", NameError::EmptySegment { index: 1 }),
            (".a/x", NameError::EmptySegment { index: 0 }),
            ("a./x", NameError::EmptySegment { index: 1 }),
            ("./x", NameError::EmptySegment { index: 0 }),
        ];
        for (text, expected) in cases {
            assert_eq!(Handle::parse(text).unwrap_err(), *expected, "{text:?}");
        }
        assert_eq!(NameError::EmptyPrefix.to_string(), "empty naming authority");
        assert_eq!(NameError::EmptyLocalName.to_string(), "empty local name");
    }

    #[test]
    fn ascii_letters_fold_and_nothing_else_does() {
        let upper = Handle::parse("CNRI.DLIB/JULY95-ARMS").unwrap();
        let lower = Handle::parse("cnri.dlib/july95-arms").unwrap();
        assert_eq!(upper, lower);
        assert_eq!(lower.key(), "CNRI.DLIB/JULY95-ARMS");
        assert_eq!(lower.prefix_key(), "CNRI.DLIB");
        assert_eq!(lower.to_string(), "cnri.dlib/july95-arms");
        let de = Handle::parse("handles-in-germany/Universität-Karlsruhe").unwrap();
        assert_eq!(de.key(), "HANDLES-IN-GERMANY/UNIVERSITäT-KARLSRUHE");
        assert_ne!(
            de,
            Handle::parse("handles-in-germany/UNIVERSITÄT-KARLSRUHE").unwrap()
        );
        assert_eq!(
            Handle::parse("cnri.test/日本").unwrap().key(),
            "CNRI.TEST/日本"
        );
    }

    #[test]
    fn equal_handles_hash_and_sort_by_key() {
        use std::collections::{BTreeSet, HashSet};
        let names = ["10.1000/abc", "10.1000/ABC", "10.1000/Abd"];
        let handles: Vec<Handle> = names.iter().map(|n| Handle::parse(n).unwrap()).collect();
        assert_eq!(handles.iter().collect::<HashSet<_>>().len(), 2);
        let sorted: Vec<&str> = handles
            .iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(Handle::key)
            .collect();
        assert_eq!(sorted, ["10.1000/ABC", "10.1000/ABD"]);
    }

    #[test]
    fn prefix_segments_are_split_on_dots() {
        let h = Handle::parse("10.1000/1").unwrap();
        assert_eq!(h.prefix_segments().collect::<Vec<_>>(), ["10", "1000"]);
        let h = Handle::parse("Cnri.Test/日本").unwrap();
        assert_eq!(h.prefix_segments().collect::<Vec<_>>(), ["Cnri", "Test"]);
    }

    #[test]
    fn length_limit_counts_utf8_octets() {
        let at_limit = format!("a/{}", "b".repeat(MAX_HANDLE_LEN - 2));
        assert!(Handle::parse(&at_limit).is_ok());
        let over = format!("a/{}", "b".repeat(MAX_HANDLE_LEN - 1));
        assert_eq!(over.len(), 2049);
        let err = Handle::parse(&over).unwrap_err();
        assert_eq!(err, NameError::TooLong { len: 2049 });
        assert_eq!(err.to_string(), "handle is 2049 bytes; the limit is 2048");
        // 683 three-octet characters: 2049 octets, though only 685 characters.
        let wide = format!("a/{}", "日".repeat(683));
        assert!(matches!(
            Handle::parse(&wide),
            Err(NameError::TooLong { len: 2051 })
        ));
        assert!(matches!(
            Handle::from_utf8(over.as_bytes()),
            Err(NameError::TooLong { len: 2049 })
        ));
    }

    #[test]
    fn from_utf8_refuses_other_encodings() {
        assert_eq!(
            Handle::from_utf8("cnri.test/日本".as_bytes())
                .unwrap()
                .as_str(),
            "cnri.test/日本"
        );
        let err = Handle::from_utf8(b"test/\xE1\xE2").unwrap_err();
        assert_eq!(err, NameError::Encoding { offset: 5 });
        assert!(err.to_string().starts_with("encoding error"));
    }

    #[test]
    fn serde_uses_the_written_spelling_and_validates() {
        let h = Handle::parse("Cnri.Test/日本").unwrap();
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(json, "\"Cnri.Test/日本\"");
        let back: Handle = serde_json::from_str(&json).unwrap();
        assert_eq!(back.as_str(), h.as_str());
        assert!(serde_json::from_str::<Handle>("\"no-slash\"").is_err());
    }
}
