//! [`HandleRef`]: a handle as a user or a document cites it, bare or as a URI, turned
//! into the UTF-8 [`Handle`] the Handle System stores.
//!
//! Steps, in order: bound the input ([`MAX_REFERENCE_LEN`]); recognise the form by
//! its scheme; drop `#fragment` (URI forms) and `?query` (`hdl://` and proxy forms);
//! take the server (`hdl://`) or proxy authority off; split the modifier off the raw
//! octets; percent-decode the rest (URI forms only); convert it from the modifier's
//! charset to UTF-8 (or check it is UTF-8); validate it as a [`Handle`].

use std::borrow::Cow;
use std::fmt;

use super::charset::{self, Modifier};
use super::error::NameError;
use super::handle::{Handle, MAX_HANDLE_LEN};
use super::server::ServerAddress;

/// The longest reference accepted, in octets, before anything is decoded: room for a
/// [`MAX_HANDLE_LEN`] handle fully percent-encoded in a two-octet charset, plus scheme,
/// server, modifier, query and fragment. Longer input is refused before any work.
pub const MAX_REFERENCE_LEN: usize = 8 * MAX_HANDLE_LEN;

/// How a reference was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReferenceForm {
    /// `HandleRef` with no scheme, taken literally.
    Bare,
    /// `hdl:<HandleRef>`.
    HdlUri,
    /// `hdl://<server>[:port]/<HandleRef>[?query][#fragment]`.
    HdlServerUri,
    /// `info:hdl/<HandleRef>`.
    InfoUri,
    /// `urn:hdl:<HandleRef>`.
    UrnUri,
    /// `http(s)://<proxy>[:port]/<HandleRef>[?query][#fragment]`.
    ProxyUrl,
}

impl ReferenceForm {
    /// A short stable name: `bare`, `hdl`, `hdl-server`, `info`, `urn` or `proxy`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ReferenceForm::Bare => "bare",
            ReferenceForm::HdlUri => "hdl",
            ReferenceForm::HdlServerUri => "hdl-server",
            ReferenceForm::InfoUri => "info",
            ReferenceForm::UrnUri => "urn",
            ReferenceForm::ProxyUrl => "proxy",
        }
    }

    /// Whether `%XX` escapes are decoded and `#fragment` dropped.
    fn is_uri(self) -> bool {
        self != ReferenceForm::Bare
    }

    /// Whether an authority follows the scheme and `?query` is dropped.
    fn has_authority(self) -> bool {
        matches!(self, ReferenceForm::HdlServerUri | ReferenceForm::ProxyUrl)
    }
}

impl fmt::Display for ReferenceForm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Scheme prefixes, matched ASCII case-insensitively, longest-first where one is a
/// prefix of another.
const SCHEMES: &[(&[u8], ReferenceForm)] = &[
    (b"hdl://", ReferenceForm::HdlServerUri),
    (b"hdl:", ReferenceForm::HdlUri),
    (b"info:hdl/", ReferenceForm::InfoUri),
    (b"urn:hdl:", ReferenceForm::UrnUri),
    (b"http://", ReferenceForm::ProxyUrl),
    (b"https://", ReferenceForm::ProxyUrl),
];

/// A parsed handle reference: the handle it names and what came with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandleRef {
    /// The handle, in UTF-8.
    pub handle: Handle,
    /// The server an `hdl://server[:port]/` URI asks; `None` in every other form (a
    /// proxy URL's host is validated but is not a handle server).
    pub server: Option<ServerAddress>,
    /// The charset a modifier named, as encoding_rs names it (`ISO-2022-JP`,
    /// `ISO-8859-7`; the `iso-8859-1` label gives `windows-1252`, as in WHATWG).
    pub encoding: Option<String>,
    /// The value type a `type=<digits>` modifier asked for.
    pub type_id: Option<u32>,
    /// How the reference was written.
    pub form: ReferenceForm,
}

/// A slice of the input and where it starts in it, for error offsets.
#[derive(Clone, Copy)]
struct Span<'a> {
    octets: &'a [u8],
    offset: usize,
}

impl<'a> Span<'a> {
    /// The octets from `at` on.
    fn from(self, at: usize) -> Span<'a> {
        Span {
            octets: self.octets.get(at..).unwrap_or_default(),
            offset: self.offset + at,
        }
    }

    /// The octets before the first `delimiter`.
    fn cut_at(self, delimiter: u8) -> Span<'a> {
        let end = self.octets.iter().position(|&b| b == delimiter);
        Span {
            octets: &self.octets[..end.unwrap_or(self.octets.len())],
            offset: self.offset,
        }
    }
}

impl HandleRef {
    /// Parses a reference in any of the forms of [`ReferenceForm`]. See the
    /// [module documentation](super) for the rules.
    pub fn parse(input: &[u8]) -> Result<HandleRef, NameError> {
        if input.len() > MAX_REFERENCE_LEN {
            return Err(NameError::ReferenceTooLong { len: input.len() });
        }
        let (form, scheme_len) = detect_form(input);
        let mut body = Span {
            octets: input,
            offset: 0,
        }
        .from(scheme_len);
        if form.is_uri() {
            body = body.cut_at(b'#');
        }
        let mut server = None;
        if form.has_authority() {
            let (address, path) = split_authority(body.cut_at(b'?'))?;
            server = (form == ReferenceForm::HdlServerUri).then_some(address);
            body = path;
        }
        let (modifier, rest) = charset::split_modifier(body.octets)?;
        let rest = body.from(body.octets.len() - rest.len());
        let handle = to_handle(modifier, rest, form)?;
        Ok(HandleRef {
            handle,
            server,
            encoding: modifier.encoding.map(|e| e.name().to_owned()),
            type_id: modifier.type_id,
            form,
        })
    }
}

/// The form `input` is written in, and the length of its scheme.
fn detect_form(input: &[u8]) -> (ReferenceForm, usize) {
    SCHEMES
        .iter()
        .find(|(scheme, _)| {
            input
                .get(..scheme.len())
                .is_some_and(|start| start.eq_ignore_ascii_case(scheme))
        })
        .map_or((ReferenceForm::Bare, 0), |&(scheme, form)| {
            (form, scheme.len())
        })
}

/// Splits `authority "/" path` into the parsed authority and the path. With no `/`
/// the path is empty.
fn split_authority(body: Span<'_>) -> Result<(ServerAddress, Span<'_>), NameError> {
    let slash = body.octets.iter().position(|&b| b == b'/');
    let authority_len = slash.unwrap_or(body.octets.len());
    let address = ServerAddress::parse(&body.octets[..authority_len])?;
    Ok((address, body.from(authority_len + 1)))
}

/// Percent-decodes (URI forms) and converts the octets after the modifier.
fn to_handle(modifier: Modifier, rest: Span<'_>, form: ReferenceForm) -> Result<Handle, NameError> {
    let octets = if form.is_uri() {
        Cow::Owned(percent_decode(rest)?)
    } else {
        Cow::Borrowed(rest.octets)
    };
    match modifier.encoding {
        None => Handle::from_utf8(&octets),
        Some(encoding) => Handle::parse(&charset::decode(encoding, &octets)?),
    }
}

/// Decodes `%XX` escapes; any other octet, `+` included, stands for itself.
fn percent_decode(span: Span<'_>) -> Result<Vec<u8>, NameError> {
    let octets = span.octets;
    let mut out = Vec::with_capacity(octets.len());
    let mut i = 0;
    while let Some(&b) = octets.get(i) {
        if b == b'%' {
            let escaped = octets.get(i + 1..i + 3).and_then(hex_pair);
            out.push(escaped.ok_or(NameError::BadEscape {
                offset: span.offset + i,
            })?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    Ok(out)
}

/// The octet two hex digits spell.
fn hex_pair(pair: &[u8]) -> Option<u8> {
    let &[high, low] = pair else { return None };
    Some(hex_digit(high)? << 4 | hex_digit(low)?)
}

/// The value of one hex digit, either case.
fn hex_digit(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use encoding_rs::ISO_2022_JP;
    use percent_encoding::{NON_ALPHANUMERIC, percent_encode};

    fn parse(input: impl AsRef<[u8]>) -> HandleRef {
        let input = input.as_ref();
        HandleRef::parse(input)
            .unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(input)))
    }

    fn err(input: impl AsRef<[u8]>) -> NameError {
        HandleRef::parse(input.as_ref()).unwrap_err()
    }

    /// `日本` as ISO-2022-JP octets, escape sequences included.
    fn jis_nihon() -> Vec<u8> {
        let (bytes, _, unmappable) = ISO_2022_JP.encode("日本");
        assert!(!unmappable);
        bytes.into_owned()
    }

    #[test]
    fn bare_references_are_literal() {
        for text in [
            "cnri.dlib/july95-arms",
            "10.1002/0002-8231(199601)47:1<1:SPOTEO>2.3.TX;2-K",
            "any-printable-characters/a-zA-Z0-9!@#$%^&*()_\"<>,.?/~|\\",
            "cnri.test/日本",
            "handles-in-germany/Universität-Karlsruhe",
            "handle-with-hex-encoding/handle%25abc",
            "a/b+c#d?e",
        ] {
            let r = parse(text);
            assert_eq!(r.handle.as_str(), text);
            assert_eq!(
                (r.form, r.server, r.encoding, r.type_id),
                (ReferenceForm::Bare, None, None, None)
            );
        }
    }

    #[test]
    fn uri_forms_percent_decode() {
        let r = parse("hdl:handle-with-hex-encoding/handle%25abc");
        assert_eq!(r.handle.as_str(), "handle-with-hex-encoding/handle%abc");
        assert_eq!(r.form, ReferenceForm::HdlUri);
        assert_eq!(parse("hdl:a/b+c").handle.local_name(), "b+c");
        assert_eq!(
            parse("hdl:cnri.test/%E6%97%A5%E6%9C%AC").handle.as_str(),
            "cnri.test/日本"
        );
        assert_eq!(parse("hdl:a/%2f%2F").handle.local_name(), "//");
        assert_eq!(parse("hdl:a%2Eb%2Fc/d").handle.prefix(), "a.b");
    }

    #[test]
    fn bad_escapes_are_refused_with_their_offset() {
        assert_eq!(err("hdl:a/%zz"), NameError::BadEscape { offset: 6 });
        assert_eq!(err("hdl:a/b%4"), NameError::BadEscape { offset: 7 });
        assert_eq!(err("https://h/a/b%"), NameError::BadEscape { offset: 13 });
        assert_eq!(err("hdl:a/%zz").to_string(), "bad percent-escape at byte 6");
    }

    #[test]
    fn one_octet_sequence_two_charsets_two_handles() {
        let greek = parse("hdl:iso-8859-7@test/%E1%E2");
        let latin = parse("hdl:iso-8859-1@test/%E1%E2");
        assert_eq!(greek.handle.as_str(), "test/αβ");
        assert_eq!(latin.handle.as_str(), "test/áâ");
        assert_ne!(greek.handle, latin.handle);
        assert_eq!(greek.encoding.as_deref(), Some("ISO-8859-7"));
        assert_eq!(latin.encoding.as_deref(), Some("windows-1252"));
        // The same octets raw, in a bare reference.
        assert_eq!(
            parse(b"iso-8859-7@test/\xE1\xE2").handle.as_str(),
            "test/αβ"
        );
    }

    #[test]
    fn jis_references_convert_to_utf8() {
        let nihon = jis_nihon();
        let encoded = percent_encode(&nihon, NON_ALPHANUMERIC).to_string();
        let raw = |before: &str| [before.as_bytes(), &nihon].concat();
        for input in [
            raw("jis@cnri.test/"),
            raw("hdl:jis@cnri.test/"),
            raw("https://hdl.handle.net/jis@cnri.test/"),
            format!("hdl:jis@cnri.test/{encoded}").into_bytes(),
            format!("http://hdl.handle.net/JIS@cnri.test/{encoded}?noredirect").into_bytes(),
        ] {
            let r = parse(&input);
            assert_eq!(r.handle.as_str(), "cnri.test/日本");
            assert_eq!(r.encoding.as_deref(), Some("ISO-2022-JP"));
        }
        assert_eq!(
            parse(raw("https://hdl.handle.net/jis@cnri.test/")).form,
            ReferenceForm::ProxyUrl
        );
    }

    #[test]
    fn non_utf8_without_modifier_is_an_encoding_error() {
        for input in [
            &b"test/\xE1\xE2"[..],
            b"hdl:test/%E1%E2",
            b"hdl://h/test/\xE1",
        ] {
            let e = err(input);
            assert_eq!(e, NameError::Encoding { offset: 5 });
            assert!(e.to_string().starts_with("encoding error"), "{e}");
        }
        assert_eq!(
            err("hdl:shift_jis@a/%82"),
            NameError::Malformed {
                charset: "Shift_JIS"
            }
        );
    }

    #[test]
    fn hdl_server_uris_name_the_server() {
        let r = parse("hdl://127.0.0.1:2641/10.1000/1");
        assert_eq!(r.handle.as_str(), "10.1000/1");
        assert_eq!(r.form, ReferenceForm::HdlServerUri);
        let server = r.server.unwrap();
        assert_eq!(
            (server.host.as_str(), server.port),
            ("127.0.0.1", Some(2641))
        );
        let r = parse("HDL://[::1]:2641/x/y?query=1#frag");
        assert_eq!(r.handle.as_str(), "x/y");
        assert_eq!(r.server.unwrap().to_string(), "[::1]:2641");
        let r = parse("hdl://hs.example/a/%3Fq");
        assert_eq!(r.handle.local_name(), "?q");
        assert_eq!(r.server.unwrap().port, None);
        assert_eq!(err("hdl://hs.example"), NameError::Empty);
        assert!(matches!(err("hdl://h:0/a/b"), NameError::BadServer { .. }));
        assert!(matches!(err("hdl:///a/b"), NameError::BadServer { .. }));
    }

    #[test]
    fn info_urn_and_proxy_forms() {
        let cases = [
            ("info:hdl/1234/567", ReferenceForm::InfoUri, "1234/567"),
            ("INFO:HDL/1234/567", ReferenceForm::InfoUri, "1234/567"),
            ("urn:hdl:1234/567", ReferenceForm::UrnUri, "1234/567"),
            ("Urn:Hdl:1234/5%2567#x", ReferenceForm::UrnUri, "1234/5%67"),
            ("hdl:10.1000/a?b#c", ReferenceForm::HdlUri, "10.1000/a?b"),
            (
                "http://hdl.handle.net/cnri.dlib/july95-arms",
                ReferenceForm::ProxyUrl,
                "cnri.dlib/july95-arms",
            ),
            (
                "https://hdl.handle.net:443/10.1000/1?noredirect#x",
                ReferenceForm::ProxyUrl,
                "10.1000/1",
            ),
        ];
        for (input, form, handle) in cases {
            let r = parse(input);
            assert_eq!(
                (r.form, r.handle.as_str(), r.server),
                (form, handle, None),
                "{input}"
            );
        }
        assert!(matches!(
            err("http://bad host/a/b"),
            NameError::BadServer { .. }
        ));
    }

    #[test]
    fn type_modifiers() {
        let r = parse("hdl:type=3@10.1000/1");
        assert_eq!(
            (r.handle.as_str(), r.type_id, r.encoding),
            ("10.1000/1", Some(3), None)
        );
        let r = parse("hdl:iso-8859-1type=3@test/%E1%E2");
        assert_eq!(r.handle.as_str(), "test/áâ");
        assert_eq!(
            (r.type_id, r.encoding.as_deref()),
            (Some(3), Some("windows-1252"))
        );
        assert!(matches!(
            err("hdl:type=4294967296@a/b"),
            NameError::BadType { .. }
        ));
        assert!(matches!(
            err("footype=1@a/b"),
            NameError::UnknownEncoding { .. }
        ));
    }

    #[test]
    fn at_signs_that_are_not_modifiers_stay_in_the_handle() {
        assert_eq!(parse("user@example/x").handle.prefix(), "user@example");
        assert_eq!(parse("hdl:utf-8%40x/y").handle.prefix(), "utf-8@x");
        let r = parse("utf-8@x/y");
        assert_eq!(
            (r.handle.as_str(), r.encoding.as_deref()),
            ("x/y", Some("UTF-8"))
        );
    }

    #[test]
    fn lengths_are_bounded_before_and_after_decoding() {
        let long = format!("a/{}", "b".repeat(MAX_HANDLE_LEN - 1));
        assert_eq!(err(&long), NameError::TooLong { len: 2049 });
        let escaped = format!("hdl:a/{}", "%62".repeat(MAX_HANDLE_LEN - 1));
        assert_eq!(err(&escaped), NameError::TooLong { len: 2049 });
        let huge = vec![b'a'; MAX_REFERENCE_LEN + 1];
        assert_eq!(
            err(&huge),
            NameError::ReferenceTooLong {
                len: MAX_REFERENCE_LEN + 1
            }
        );
        assert_eq!(err(""), NameError::Empty);
    }

    #[test]
    fn forms_have_stable_names() {
        let names: Vec<&str> = [
            ReferenceForm::Bare,
            ReferenceForm::HdlUri,
            ReferenceForm::HdlServerUri,
            ReferenceForm::InfoUri,
            ReferenceForm::UrnUri,
            ReferenceForm::ProxyUrl,
        ]
        .iter()
        .map(ReferenceForm::as_str)
        .collect();
        assert_eq!(names, ["bare", "hdl", "hdl-server", "info", "urn", "proxy"]);
    }
}
