//! Which values of a handle a resolution asks for (digest §3.2).
//!
//! Owns [`ValueSelection`]: the index list and type list of a resolution request and
//! the rule that picks values with them. Pure.

use super::value::{HandleValue, ValueIndex};

/// The index and type filters of a resolution request.
///
/// Both empty selects every value. Otherwise a value is selected when its index is
/// listed **or** its type matches a listed type (the union, as the reference server
/// does). Types match ASCII-case-insensitively; a listed type ending in `.` (`URL.`)
/// also matches every subtype (`URL`, `URL.alt`); one without matches only exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ValueSelection {
    /// Indexes asked for.
    pub indexes: Vec<ValueIndex>,
    /// Types asked for.
    pub types: Vec<String>,
}

impl ValueSelection {
    /// Selects every value.
    pub fn all() -> Self {
        ValueSelection::default()
    }

    /// Whether this selection asks for every value.
    pub fn is_all(&self) -> bool {
        self.indexes.is_empty() && self.types.is_empty()
    }

    /// Whether `value` is selected.
    pub fn matches(&self, value: &HandleValue) -> bool {
        self.is_all()
            || self.indexes.contains(&value.index)
            || self
                .types
                .iter()
                .any(|wanted| type_matches(wanted, &value.value_type))
    }
}

/// Whether a requested type matches a value's type (see [`ValueSelection`]).
pub fn type_matches(wanted: &str, value_type: &str) -> bool {
    match wanted.strip_suffix('.') {
        Some(parent) => {
            value_type.eq_ignore_ascii_case(parent)
                || (value_type.len() > wanted.len()
                    && value_type.is_char_boundary(wanted.len())
                    && value_type[..wanted.len()].eq_ignore_ascii_case(wanted))
        }
        None => value_type.eq_ignore_ascii_case(wanted),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(index: u32, value_type: &str) -> HandleValue {
        HandleValue::new(index, value_type, Vec::new())
    }

    #[test]
    fn empty_selection_takes_everything() {
        assert!(ValueSelection::all().matches(&value(1, "URL")));
    }

    #[test]
    fn indexes_and_types_are_a_union() {
        let selection = ValueSelection {
            indexes: vec![ValueIndex(2)],
            types: vec!["email".into()],
        };
        assert!(selection.matches(&value(2, "URL")));
        assert!(selection.matches(&value(3, "EMAIL")));
        assert!(!selection.matches(&value(4, "URL")));
    }

    #[test]
    fn trailing_dot_matches_subtypes_only_when_asked() {
        assert!(type_matches("URL.", "URL"));
        assert!(type_matches("url.", "URL.alt"));
        assert!(!type_matches("URL.", "URLX"));
        assert!(!type_matches("URL", "URL.alt"));
        assert!(type_matches("url", "URL"));
        assert!(!type_matches("日.", "日本"));
    }
}
