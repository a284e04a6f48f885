//! What a reverse lookup asks for: handles by the values they hold.
//!
//! Owns [`SearchQuery`], [`SearchTerm`] and [`ValuePattern`], and the rule that matches
//! them against values. A query is one or more `TYPE=PATTERN` pairs, as the EUDAT
//! reverse-lookup service takes them: a value matches a term when its type is the
//! term's (ASCII case-insensitively, as resolution compares types; no subtypes) and
//! its data matches every pattern the query gave for that type, so `URL=a*&URL=*b`
//! wants one URL value starting with `a` and ending with `b`; a handle matches the
//! query when it has a matching value for every type named. A pattern matches the
//! data's octets exactly and case-sensitively (the EUDAT service compares values as
//! they are stored), `*` standing for any run of octets, empty included, anywhere in
//! the pattern; there is no escape for a literal `*`.
//!
//! Everything a client can grow is bounded: at most [`MAX_PATTERNS`] patterns, each
//! of at most [`MAX_PATTERN_OCTETS`] octets. Pure.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::types::MAX_TYPE_NAME_LEN;
use super::value::HandleValue;

/// The most `TYPE=PATTERN` pairs one query may hold.
pub const MAX_PATTERNS: usize = 16;

/// The most octets one pattern may hold.
pub const MAX_PATTERN_OCTETS: usize = 4096;

/// The wildcard of a pattern.
const WILDCARD: u8 = b'*';

/// Why a query cannot be searched.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SearchError {
    /// No `TYPE=PATTERN` pair was given.
    #[error("a search needs at least one TYPE=PATTERN, e.g. URL=https://example.org/*")]
    NoTerms,
    /// More pairs than [`MAX_PATTERNS`].
    #[error("a search takes at most {MAX_PATTERNS} TYPE=PATTERN pairs; {0} were given")]
    TooManyPatterns(usize),
    /// A type name that is empty or longer than a type name may be.
    #[error("{0:?} is not a value type name (1 to 1024 octets)")]
    BadType(String),
    /// A pattern longer than [`MAX_PATTERN_OCTETS`].
    #[error("the pattern for {value_type} is {len} octets long; at most {MAX_PATTERN_OCTETS}")]
    PatternTooLong {
        /// The type it was given for.
        value_type: String,
        /// Its length.
        len: usize,
    },
}

/// A value pattern: literal octets, `*` for any run of octets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValuePattern(String);

impl ValuePattern {
    /// The pattern `text` (any text is a pattern; [`SearchQuery::new`] bounds it).
    pub fn new(text: &str) -> ValuePattern {
        ValuePattern(text.to_owned())
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The literal octets before the first `*` (all of them when there is none): every
    /// matching datum starts with them.
    pub fn head(&self) -> &[u8] {
        let bytes = self.0.as_bytes();
        let end = bytes
            .iter()
            .position(|&b| b == WILDCARD)
            .unwrap_or(bytes.len());
        &bytes[..end]
    }

    /// Whether the pattern has no `*`: only the datum equal to it matches.
    pub fn is_exact(&self) -> bool {
        !self.0.as_bytes().contains(&WILDCARD)
    }

    /// Whether `data` matches the pattern.
    pub fn matches(&self, data: &[u8]) -> bool {
        let mut pieces = self.0.as_bytes().split(|&b| b == WILDCARD);
        let first = pieces.next().unwrap_or_default();
        let rest: Vec<&[u8]> = pieces.collect();
        let Some((last, middle)) = rest.split_last() else {
            return data == first;
        };
        let Some(mut left) = data.strip_prefix(first) else {
            return false;
        };
        for piece in middle {
            match find(left, piece) {
                Some(at) => left = &left[at + piece.len()..],
                None => return false,
            }
        }
        left.ends_with(last)
    }
}

/// Where `needle` first occurs in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// The patterns a query gives for one value type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchTerm {
    /// The type, as first written.
    pub value_type: String,
    /// Every pattern given for it: one value must match them all.
    pub patterns: Vec<ValuePattern>,
}

impl SearchTerm {
    /// Whether `value` is of the term's type and its data matches every pattern.
    pub fn matches(&self, value: &HandleValue) -> bool {
        value.value_type.eq_ignore_ascii_case(&self.value_type)
            && self.patterns.iter().all(|p| p.matches(&value.data))
    }
}

/// A reverse lookup: handles (under `prefix` when given) holding, for every term, a
/// value that matches it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchQuery {
    /// The naming authority searched; every one when `None`.
    pub prefix: Option<String>,
    /// One term per type named, in the order first named.
    pub terms: Vec<SearchTerm>,
}

impl SearchQuery {
    /// The query of the `(type, pattern)` pairs `pairs` under `prefix`: the patterns
    /// of one type (ASCII case-insensitively) gathered into one term.
    pub fn new<'a>(
        prefix: Option<&str>,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<SearchQuery, SearchError> {
        let mut terms: Vec<SearchTerm> = Vec::new();
        let mut count = 0;
        for (value_type, pattern) in pairs {
            count += 1;
            if value_type.is_empty() || value_type.len() > MAX_TYPE_NAME_LEN {
                return Err(SearchError::BadType(value_type.to_owned()));
            }
            if pattern.len() > MAX_PATTERN_OCTETS {
                return Err(SearchError::PatternTooLong {
                    value_type: value_type.to_owned(),
                    len: pattern.len(),
                });
            }
            let pattern = ValuePattern::new(pattern);
            match terms
                .iter_mut()
                .find(|term| term.value_type.eq_ignore_ascii_case(value_type))
            {
                Some(term) => term.patterns.push(pattern),
                None => terms.push(SearchTerm {
                    value_type: value_type.to_owned(),
                    patterns: vec![pattern],
                }),
            }
        }
        if count > MAX_PATTERNS {
            return Err(SearchError::TooManyPatterns(count));
        }
        if terms.is_empty() {
            return Err(SearchError::NoTerms);
        }
        Ok(SearchQuery {
            prefix: prefix.map(str::to_owned),
            terms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_exactly_or_around_their_wildcards() {
        let cases: &[(&str, &str, bool)] = &[
            ("https://a/", "https://a/", true),
            ("https://a/", "https://a/x", false),
            ("https://a/", "HTTPS://A/", false),
            ("https://a/*", "https://a/", true),
            ("https://a/*", "https://a/x/y", true),
            ("https://a/*", "https://b/", false),
            ("*.pdf", "https://a/x.pdf", true),
            ("*.pdf", "https://a/x.pdfs", false),
            ("*example*", "https://www.example.org/", true),
            ("*example*", "https://www.exampl.org/", false),
            ("a*b*c", "abc", true),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "acb", false),
            ("ab*ba", "aba", false),
            ("ab*ba", "abba", true),
            ("*", "", true),
            ("", "", true),
            ("", "x", false),
            ("**", "anything", true),
        ];
        for &(pattern, data, expected) in cases {
            let pattern = ValuePattern::new(pattern);
            assert_eq!(
                pattern.matches(data.as_bytes()),
                expected,
                "{pattern:?} {data}"
            );
        }
    }

    #[test]
    fn a_pattern_knows_its_literal_head() {
        assert_eq!(ValuePattern::new("https://a/*x*").head(), b"https://a/");
        assert_eq!(ValuePattern::new("*x").head(), b"");
        assert_eq!(ValuePattern::new("exact").head(), b"exact");
        assert!(ValuePattern::new("exact").is_exact());
        assert!(!ValuePattern::new("ex*").is_exact());
    }

    #[test]
    fn a_query_gathers_the_patterns_of_one_type_and_is_bounded() {
        let query = SearchQuery::new(
            Some("10.1"),
            [("URL", "a*"), ("EMAIL", "x@y"), ("url", "*b")],
        )
        .unwrap();
        assert_eq!(query.terms.len(), 2);
        assert_eq!(query.terms[0].patterns.len(), 2);
        let term = &query.terms[0];
        assert!(term.matches(&HandleValue::new(1, "Url", "a-to-b")));
        assert!(!term.matches(&HandleValue::new(1, "URL", "a-to-c")));
        assert!(!term.matches(&HandleValue::new(1, "URL.alt", "a-to-b")));

        assert_eq!(SearchQuery::new(None, []), Err(SearchError::NoTerms));
        let many = vec![("URL", "x"); MAX_PATTERNS + 1];
        assert_eq!(
            SearchQuery::new(None, many),
            Err(SearchError::TooManyPatterns(MAX_PATTERNS + 1))
        );
        let long = "x".repeat(MAX_PATTERN_OCTETS + 1);
        assert!(matches!(
            SearchQuery::new(None, [("URL", long.as_str())]),
            Err(SearchError::PatternTooLong { .. })
        ));
        assert!(matches!(
            SearchQuery::new(None, [("", "x")]),
            Err(SearchError::BadType(_))
        ));
    }
}
