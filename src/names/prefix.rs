//! Prefix handles (RFC 3651 §3.1, digest §9): the naming authority `P` is described by
//! the handle `0.NA/P` (its HS_SITE, HS_SERV and HS_ADMIN values). The one place that
//! builds `0.NA/<prefix>` and reads the prefix back out of one.

use super::error::NameError;
use super::handle::Handle;

/// The naming authority under which every prefix handle lives.
pub const PREFIX_AUTHORITY: &str = "0.NA";

/// The prefix handle `0.NA/<prefix>` of the naming authority `prefix`.
pub fn prefix_handle(prefix: &str) -> Result<Handle, NameError> {
    Handle::parse(&format!("{PREFIX_AUTHORITY}/{prefix}"))
}

/// The naming authority a prefix handle written as `text` names (`0.NA/10.1000` →
/// `10.1000`; `0.NA` matched ASCII case-insensitively), or `None` when `text` is not
/// written as a prefix handle.
pub fn named_prefix(text: &str) -> Option<&str> {
    let (authority, prefix) = text.split_once('/')?;
    authority
        .eq_ignore_ascii_case(PREFIX_AUTHORITY)
        .then_some(prefix)
}

impl Handle {
    /// Whether this is a prefix handle, `0.NA/<prefix>`.
    pub fn is_prefix_handle(&self) -> bool {
        self.prefix_key() == PREFIX_AUTHORITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_handles_are_built_and_read_back() {
        let handle = prefix_handle("10.1000").unwrap();
        assert_eq!(handle.as_str(), "0.NA/10.1000");
        assert!(handle.is_prefix_handle());
        assert_eq!(named_prefix(handle.as_str()), Some("10.1000"));
        assert_eq!(named_prefix("0.na/日本"), Some("日本"));
        assert_eq!(named_prefix("0.NAX/1"), None);
        assert_eq!(named_prefix("10.1000"), None);
        assert!(!Handle::parse("10.1000/x").unwrap().is_prefix_handle());
        assert_eq!(prefix_handle(""), Err(NameError::EmptyLocalName));
    }
}
