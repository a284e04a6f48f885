//! What an authorisation decision read, so that the state machine can check, when it
//! applies the write, that the write lands on the same state.
//!
//! The service checks permissions before it proposes a write, against the records as
//! it reads them; the write is applied later, on whatever state the log has reached by
//! then (a member that lags its primary checks against an older state; a concurrent
//! write can remove the caller's HS_ADMIN in between). So a write carries a [`Basis`]
//! for each record of its own store the decision read: the handle, the value indexes
//! the write touches in it, and a digest of [`authority_octets`] — whether the record
//! exists, its HS_ADMIN and HS_VLIST values (who may act, and the groups they belong
//! to), and its values at those indexes (whether a change is of an admin value). The
//! machine recomputes each digest on the state the write lands on and refuses the write
//! ([`crate::storage::Refusal::AuthorityChanged`]) when one differs; the service then
//! checks again on fresh state. Deterministic: the digest depends on the store alone.
//!
//! Records the decision read from another replica set cannot be checked here (their
//! state is not in this log); they are checked when the write is proposed, as the
//! reference server checks everything.
//!
//! Pure: owns [`Basis`] and [`authority_digest`]; depends on the values module only.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::names::Handle;
use crate::values::{HandleValue, KnownType, ValueIndex, Writer};

/// One record an authorisation decision read, and what it read of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Basis {
    /// The record's handle.
    pub handle: Handle,
    /// The value indexes of it the write touches (empty for records it only reads).
    pub indexes: Vec<ValueIndex>,
    /// [`authority_digest`] of the record as the decision read it.
    pub digest: [u8; 32],
}

impl Basis {
    /// The basis of a decision that read `values` of `handle` (`None`: it did not
    /// exist) for a write touching `indexes` of it.
    pub fn of(handle: Handle, values: Option<&[HandleValue]>, indexes: Vec<ValueIndex>) -> Basis {
        let digest = authority_digest(values, &indexes);
        Basis {
            handle,
            indexes,
            digest,
        }
    }

    /// Whether `values` (the record now) still read as the decision read it.
    pub fn holds_for(&self, values: Option<&[HandleValue]>) -> bool {
        authority_digest(values, &self.indexes) == self.digest
    }
}

/// SHA-256 of [`authority_octets`].
pub fn authority_digest(values: Option<&[HandleValue]>, indexes: &[ValueIndex]) -> [u8; 32] {
    Sha256::digest(authority_octets(values, indexes)).into()
}

/// What an authorisation decision depends on in a record: `0` if it does not exist;
/// else `1` followed by the RFC 3652 encoding of its HS_ADMIN and HS_VLIST values and
/// of its values at `indexes`, in the record's order.
fn authority_octets(values: Option<&[HandleValue]>, indexes: &[ValueIndex]) -> Vec<u8> {
    let mut w = Writer::new();
    let Some(values) = values else {
        w.u8(0);
        return w.into_bytes();
    };
    w.u8(1);
    let decides = |value: &&HandleValue| {
        matches!(
            value.known_type(),
            Some(KnownType::HsAdmin | KnownType::HsVlist)
        ) || indexes.contains(&value.index)
    };
    for value in values.iter().filter(decides) {
        value.encode(&mut w);
    }
    w.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An HS_ADMIN value; its data need not decode for the digest.
    fn admin(index: u32, admin: &str) -> HandleValue {
        HandleValue::new(index, "HS_ADMIN", admin)
    }

    #[test]
    fn a_basis_breaks_on_authority_and_touched_values_only() {
        let handle = Handle::parse("10.1/x").unwrap();
        let url = HandleValue::new(1, "URL", "https://a.example/");
        let desc = HandleValue::new(2, "DESC", "text");
        let before = vec![url.clone(), desc.clone(), admin(100, "0.NA/10.1")];
        let basis = Basis::of(handle, Some(&before), vec![ValueIndex(1)]);
        assert!(basis.holds_for(Some(&before)));

        let other_desc = vec![
            url.clone(),
            HandleValue::new(2, "DESC", "changed"),
            admin(100, "0.NA/10.1"),
        ];
        assert!(basis.holds_for(Some(&other_desc)), "index 2 is not read");
        let other_admin = vec![url.clone(), desc.clone(), admin(100, "0.NA/10.2")];
        assert!(!basis.holds_for(Some(&other_admin)));
        let touched = vec![HandleValue::new(1, "HS_ADMIN", vec![]), desc.clone()];
        assert!(!basis.holds_for(Some(&touched)));
        assert!(!basis.holds_for(None));
        let absent = Basis::of(Handle::parse("10.1/y").unwrap(), None, Vec::new());
        assert!(absent.holds_for(None));
        assert!(!absent.holds_for(Some(&[])), "created in between");
    }
}
