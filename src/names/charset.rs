//! The `<modifier> "@"` at the front of a handle reference, and the conversion of the
//! octets after it from the charset it names to UTF-8.
//!
//! A modifier is `[encoding] ["type=" 1*DIGIT]`. It is looked for only in the raw
//! octets before the first `@`, and only when those octets are printable ASCII with no
//! `/` (so the `@` precedes the first `/`) and no `%` (so a `%40` in a URI is always
//! data). Charset labels are the WHATWG labels encoding_rs knows, plus `jis` for
//! ISO-2022-JP, compared ASCII case-insensitively; `type=` too.

use std::borrow::Cow;

use encoding_rs::{Encoding, ISO_2022_JP, REPLACEMENT};

use super::error::NameError;

/// What a modifier said. Both parts are optional; an empty modifier is no modifier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Modifier {
    /// The charset the octets after the `@` are in; `None` means UTF-8.
    pub(super) encoding: Option<&'static Encoding>,
    /// The value type asked for by `type=<digits>`.
    pub(super) type_id: Option<u32>,
}

/// Splits a modifier off the front of a reference's octets and returns it with the
/// octets after its `@`. Without a modifier, returns the default and all of `octets`:
/// the `@`, if any, is then an ordinary character of the handle.
pub(super) fn split_modifier(octets: &[u8]) -> Result<(Modifier, &[u8]), NameError> {
    let none = (Modifier::default(), octets);
    let Some(at) = octets.iter().position(|&b| b == b'@') else {
        return Ok(none);
    };
    let candidate = &octets[..at];
    let plausible = |b: &u8| b.is_ascii_graphic() && *b != b'/' && *b != b'%';
    if candidate.is_empty() || !candidate.iter().all(plausible) {
        return Ok(none);
    }
    let Ok(text) = std::str::from_utf8(candidate) else {
        return Ok(none);
    };
    Ok(match parse_modifier(text)? {
        Some(modifier) => (modifier, &octets[at + 1..]),
        None => none,
    })
}

/// Reads a non-empty printable-ASCII candidate as a modifier; `None` if it is neither
/// a charset label nor ends in `type=<digits>`.
fn parse_modifier(text: &str) -> Result<Option<Modifier>, NameError> {
    let (label, type_id) = match split_type(text) {
        Some((label, digits)) => (label, Some(parse_type(digits)?)),
        None => (text, None),
    };
    if label.is_empty() {
        return Ok(Some(Modifier {
            encoding: None,
            type_id,
        }));
    }
    match lookup(label) {
        Some(encoding) if encoding == REPLACEMENT => Err(NameError::UnsupportedEncoding {
            label: label.to_owned(),
        }),
        Some(encoding) => Ok(Some(Modifier {
            encoding: Some(encoding),
            type_id,
        })),
        None if type_id.is_some() => Err(NameError::UnknownEncoding {
            label: label.to_owned(),
        }),
        None => Ok(None),
    }
}

/// Splits `<label>type=<digits>` into the label (maybe empty) and the digits.
fn split_type(text: &str) -> Option<(&str, &str)> {
    const TYPE: &str = "type=";
    let at = text.to_ascii_lowercase().rfind(TYPE)?;
    let digits = &text[at + TYPE.len()..];
    let all_digits = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    all_digits.then(|| (&text[..at], digits))
}

/// Parses the all-digit number of a `type=` modifier.
fn parse_type(digits: &str) -> Result<u32, NameError> {
    digits.parse().map_err(|_| NameError::BadType {
        digits: digits.to_owned(),
    })
}

/// The encoding a charset label names: encoding_rs's WHATWG labels, plus `jis`.
fn lookup(label: &str) -> Option<&'static Encoding> {
    if label.eq_ignore_ascii_case("jis") {
        Some(ISO_2022_JP)
    } else {
        Encoding::for_label(label.as_bytes())
    }
}

/// Converts `octets` from `encoding` to UTF-8. Malformed input is an error, never
/// replaced with U+FFFD; a byte-order mark is not special.
pub(super) fn decode<'a>(
    encoding: &'static Encoding,
    octets: &'a [u8],
) -> Result<Cow<'a, str>, NameError> {
    encoding
        .decode_without_bom_handling_and_without_replacement(octets)
        .ok_or(NameError::Malformed {
            charset: encoding.name(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use encoding_rs::{GBK, ISO_8859_7, SHIFT_JIS, UTF_8, WINDOWS_1252};

    fn modifier(text: &str) -> Result<Option<Modifier>, NameError> {
        let input = format!("{text}@x/y");
        let (m, rest) = split_modifier(input.as_bytes())?;
        Ok((rest != input.as_bytes()).then_some(m))
    }

    fn charset(encoding: &'static Encoding) -> Option<Modifier> {
        Some(Modifier {
            encoding: Some(encoding),
            type_id: None,
        })
    }

    #[test]
    fn charset_labels_are_modifiers() {
        assert_eq!(modifier("jis"), Ok(charset(ISO_2022_JP)));
        assert_eq!(modifier("JIS"), Ok(charset(ISO_2022_JP)));
        assert_eq!(modifier("iso-2022-jp"), Ok(charset(ISO_2022_JP)));
        assert_eq!(modifier("ISO-8859-7"), Ok(charset(ISO_8859_7)));
        // WHATWG: the iso-8859-1 label means windows-1252.
        assert_eq!(modifier("iso-8859-1"), Ok(charset(WINDOWS_1252)));
        assert_eq!(modifier("shift_jis"), Ok(charset(SHIFT_JIS)));
        assert_eq!(modifier("gb2312"), Ok(charset(GBK)));
        assert_eq!(modifier("utf-8"), Ok(charset(UTF_8)));
    }

    #[test]
    fn type_modifiers_with_and_without_charset() {
        let typed = |encoding, type_id| Ok(Some(Modifier { encoding, type_id }));
        assert_eq!(modifier("type=3"), typed(None, Some(3)));
        assert_eq!(modifier("TYPE=0100"), typed(None, Some(100)));
        assert_eq!(
            modifier("iso-8859-1type=3"),
            typed(Some(WINDOWS_1252), Some(3))
        );
        assert_eq!(
            modifier("type=4294967296"),
            Err(NameError::BadType {
                digits: "4294967296".into()
            })
        );
        assert_eq!(
            modifier("kanjitype=3"),
            Err(NameError::UnknownEncoding {
                label: "kanji".into()
            })
        );
    }

    #[test]
    fn other_at_signs_are_ordinary_characters() {
        for text in [
            "cnri", "user", "type=", "type=x", "a/b", "%6Ais", "ji s", "utf-8 ",
        ] {
            assert_eq!(modifier(text), Ok(None), "{text:?}");
        }
        let (m, rest) = split_modifier(b"@x/y").unwrap();
        assert_eq!((m, rest), (Modifier::default(), &b"@x/y"[..]));
        let (m, rest) = split_modifier(b"x/y@jis").unwrap();
        assert_eq!((m, rest), (Modifier::default(), &b"x/y@jis"[..]));
    }

    #[test]
    fn replacement_labels_are_refused() {
        assert_eq!(
            modifier("iso-2022-kr"),
            Err(NameError::UnsupportedEncoding {
                label: "iso-2022-kr".into()
            })
        );
    }

    #[test]
    fn decoding_never_replaces() {
        assert_eq!(decode(ISO_8859_7, b"\xE1\xE2").unwrap(), "αβ");
        assert_eq!(
            decode(SHIFT_JIS, b"\x82"),
            Err(NameError::Malformed {
                charset: "Shift_JIS"
            })
        );
        assert!(decode(UTF_8, b"\xFF").is_err());
    }
}
