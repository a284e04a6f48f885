//! Reading paths and query strings: percent-decoding to octets, `+` kept as a plus
//! (as the reference proxy's `decodeURLIgnorePlus`), repeatable parameters, and
//! booleans that mean true when given without a value.

use thiserror::Error;

use crate::values::{ValueIndex, ValueSelection};

/// Why a path or query could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QueryError {
    /// A `%` not followed by two hex digits.
    #[error("malformed percent-escape in the {0}")]
    BadEscape(&'static str),
    /// Decoded octets that are not UTF-8 where text is needed.
    #[error("the {0} is not valid UTF-8 once percent-decoded (encoding error)")]
    NotUtf8(&'static str),
    /// A parameter value that does not fit the parameter.
    #[error("parameter {name}={value:?}: expected {expected}")]
    BadParameter {
        /// The parameter.
        name: &'static str,
        /// What was given.
        value: String,
        /// What it must be.
        expected: &'static str,
    },
}

/// The parameters of a query string, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    pairs: Vec<(String, String)>,
    raw: Option<String>,
}

impl Query {
    /// Parses `name=value&…`; a part without `=` has an empty value.
    pub fn parse(raw: Option<&str>) -> Result<Query, QueryError> {
        let Some(raw) = raw else {
            return Ok(Query::default());
        };
        let text = |part: &str| {
            String::from_utf8(decode(part, "query")?).map_err(|_| QueryError::NotUtf8("query"))
        };
        let pairs = raw
            .split('&')
            .filter(|part| !part.is_empty())
            .map(|part| {
                let (name, value) = part.split_once('=').unwrap_or((part, ""));
                Ok((text(name)?, text(value)?))
            })
            .collect::<Result<_, QueryError>>()?;
        Ok(Query {
            pairs,
            raw: Some(raw.to_owned()),
        })
    }

    /// The query string as it came, still encoded.
    pub fn raw(&self) -> Option<&str> {
        self.raw.as_deref()
    }

    /// Every parameter, as `(name, value)`, in order.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
    }

    /// Every value of `name`, in order.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.pairs
            .iter()
            .filter(move |(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The first value of `name`.
    pub fn first(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// A boolean parameter: absent is `default`; present without a value, `true` or
    /// `1` is true; `false` or `0` is false.
    pub fn flag(&self, name: &'static str, default: bool) -> Result<bool, QueryError> {
        match self.first(name) {
            None => Ok(default),
            Some("" | "true" | "1") => Ok(true),
            Some("false" | "0") => Ok(false),
            Some(other) => Err(bad(name, other, "true or false")),
        }
    }

    /// A non-negative integer parameter.
    pub fn number(&self, name: &'static str, default: u64) -> Result<u64, QueryError> {
        match self.first(name) {
            None => Ok(default),
            Some(text) => text
                .parse()
                .map_err(|_| bad(name, text, "a non-negative integer")),
        }
    }

    /// The `index=` values as indexes (`various` is left to the caller).
    pub fn indexes(&self) -> Result<Vec<ValueIndex>, QueryError> {
        self.all("index")
            .filter(|text| *text != "various")
            .map(|text| {
                text.parse()
                    .map(ValueIndex)
                    .map_err(|_| bad("index", text, "a value index (0 to 4294967295)"))
            })
            .collect()
    }

    /// The values a request's `index=` and `type=` parameters select.
    pub fn selection(&self) -> Result<ValueSelection, QueryError> {
        Ok(ValueSelection {
            indexes: self.indexes()?,
            types: self.all("type").map(str::to_owned).collect(),
        })
    }
}

fn bad(name: &'static str, value: &str, expected: &'static str) -> QueryError {
    QueryError::BadParameter {
        name,
        value: value.to_owned(),
        expected,
    }
}

/// Percent-decodes `text` to octets; every other octet, `+` included, stands for
/// itself. `what` names the part for the error.
pub fn decode(text: &str, what: &'static str) -> Result<Vec<u8>, QueryError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while let Some(&octet) = bytes.get(at) {
        if octet == b'%' {
            let high = bytes.get(at + 1).and_then(|c| hex_value(*c));
            let low = bytes.get(at + 2).and_then(|c| hex_value(*c));
            let (Some(high), Some(low)) = (high, low) else {
                return Err(QueryError::BadEscape(what));
            };
            out.push(high << 4 | low);
            at += 3;
        } else {
            out.push(octet);
            at += 1;
        }
    }
    Ok(out)
}

fn hex_value(digit: u8) -> Option<u8> {
    char::from(digit)
        .to_digit(16)
        .and_then(|value| u8::try_from(value).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_repeat_decode_and_keep_plus() {
        let query = Query::parse(Some("type=URL&index=2&type=EMAIL&x=a+b%2Fc&noredirect")).unwrap();
        assert_eq!(query.all("type").collect::<Vec<_>>(), ["URL", "EMAIL"]);
        assert_eq!(query.first("x"), Some("a+b/c"));
        assert!(query.flag("noredirect", false).unwrap());
        assert!(!query.flag("pretty", false).unwrap());
        assert_eq!(query.indexes().unwrap(), vec![ValueIndex(2)]);
        assert!(Query::parse(Some("index=x")).unwrap().indexes().is_err());
        assert!(Query::parse(Some("a=%zz")).is_err());
        assert!(Query::parse(Some("a=%ff")).is_err());
        assert!(
            Query::parse(Some("p=maybe"))
                .unwrap()
                .flag("p", true)
                .is_err()
        );
    }

    #[test]
    fn paths_decode_to_octets() {
        assert_eq!(
            decode("a%2Fb+%E6%97%A5", "path").unwrap(),
            "a/b+日".as_bytes()
        );
        assert_eq!(decode("%ff", "path").unwrap(), vec![0xff]);
        assert_eq!(decode("50%", "path"), Err(QueryError::BadEscape("path")));
        assert_eq!(decode("%4", "path"), Err(QueryError::BadEscape("path")));
    }
}
