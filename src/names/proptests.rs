//! Property tests across the names layer: round trips of arbitrary valid handles, no
//! panics on arbitrary input, and the shape of the case fold.

use percent_encoding::{NON_ALPHANUMERIC, percent_encode};
use proptest::prelude::*;

use super::*;

/// Arbitrary valid handles as (segments, local name): any Unicode but `.` and `/` in
/// segments, anything at all (newlines, `/`, `%`, `@`) in the local name.
fn handle_parts() -> impl Strategy<Value = (Vec<String>, String)> {
    (prop::collection::vec("[^./]{1,12}", 1..5), "(?s).{1,40}")
}

/// Input that reaches past scheme detection: a scheme or none, then arbitrary octets.
fn reference_octets() -> impl Strategy<Value = Vec<u8>> {
    let scheme = prop::sample::select(vec![
        "",
        "hdl:",
        "hdl://",
        "hdl://[::1]:2641/",
        "info:hdl/",
        "urn:hdl:",
        "https://h/",
        "jis@",
        "iso-8859-7type=2@",
        "type=1@",
    ]);
    (scheme, prop::collection::vec(any::<u8>(), 0..64))
        .prop_map(|(scheme, tail)| [scheme.as_bytes(), &tail].concat())
}

proptest! {
    #[test]
    fn valid_handles_round_trip((segments, local) in handle_parts()) {
        let prefix = segments.join(".");
        let text = format!("{prefix}/{local}");
        let h = Handle::parse(&text).unwrap();
        prop_assert_eq!(h.to_string(), text.as_str());
        prop_assert_eq!(h.prefix(), prefix.as_str());
        prop_assert_eq!(h.local_name(), local.as_str());
        prop_assert!(h.prefix_segments().eq(segments.iter().map(String::as_str)));
        let again: Handle = h.to_string().parse().unwrap();
        prop_assert_eq!(again.key(), h.key());
        prop_assert_eq!(again.as_str(), h.as_str());
        prop_assert_eq!(&again, &h);
        let folded = Handle::parse(&fold_key(&text)).unwrap();
        prop_assert_eq!(folded.key(), h.key());
    }

    #[test]
    fn fully_escaped_hdl_uris_give_back_the_handle((segments, local) in handle_parts()) {
        let text = format!("{}/{local}", segments.join("."));
        let uri = format!("hdl:{}", percent_encode(text.as_bytes(), NON_ALPHANUMERIC));
        let r = HandleRef::parse(uri.as_bytes()).unwrap();
        prop_assert_eq!(r.handle.as_str(), text.as_str());
        prop_assert_eq!(r.encoding, None);
    }

    #[test]
    fn handle_parse_never_panics(text in "(?s).{0,80}") {
        if let Ok(h) = Handle::parse(&text) {
            prop_assert_eq!(h.as_str(), text.as_str());
        }
    }

    #[test]
    fn reference_parse_never_panics(input in prop::collection::vec(any::<u8>(), 0..96)) {
        let _ = HandleRef::parse(&input);
    }

    #[test]
    fn reference_parse_never_panics_past_the_scheme(input in reference_octets()) {
        if let Ok(r) = HandleRef::parse(&input) {
            prop_assert!(r.handle.as_str().len() <= MAX_HANDLE_LEN);
        }
    }

    #[test]
    fn folding_is_idempotent_and_touches_only_ascii_letters(text in "(?s).{0,60}") {
        let folded = fold_key(&text);
        prop_assert_eq!(fold_key(&folded), folded.clone());
        prop_assert_eq!(folded.len(), text.len());
        for (before, after) in text.chars().zip(folded.chars()) {
            if before.is_ascii_lowercase() {
                prop_assert_eq!(after, before.to_ascii_uppercase());
            } else {
                prop_assert_eq!(after, before);
            }
        }
    }
}
