//! Every table, key encoding and on-disk record layout of the handle store.
//!
//! Keeping them in one file (as redb itself does) makes the on-disk format readable in
//! one place. Integers on disk have fixed widths; no platform-sized integer is stored.
//!
//! Format version 1 (a data directory written by an earlier release is kept in
//! `tests/fixtures/earlier-releases/`, and the integration test `upgrades` opens it):
//! - `meta`: `&str → u64`; key `format_version` holds [`FORMAT_VERSION`].
//! - `handles`: folded handle (ASCII upper-cased, UTF-8) → handle record:
//!   `u8 record layout (1) ‖ Str display spelling ‖ List<HandleValue>` where the value
//!   list is the RFC 3652 encoding (digest §5), a published format readable for decades.
//! - `prefixes`: folded naming authority → prefix record:
//!   `u8 record layout (1) ‖ Str display spelling ‖ u64 handle count ‖ u8 homed (0/1)`.
//!
//! - `sm_meta`: `&str → bytes`; key `applied` holds the replication layer's applied
//!   state (last applied log position and membership), opaque to the store. It is
//!   written in the same transaction as the handle writes it accounts for.
//! - `recent_requests`: `u64` client request id → `u64 log index (big-endian) ‖ result
//!   bytes`, the result of each request applied within the last stretch of the log,
//!   opaque to the store (see [`super::WriteBatch::recall_result`]).
//! - `recent_by_entry`: `(u64 log index, u64 request id)` → `()`, the same requests in
//!   the order they were applied, so the oldest are forgotten first; one log entry
//!   applies many requests (group commit), and each is listed. Replaced without a
//!   format change the `recent_by_index` table (`u64` log index → `u64` request id) of
//!   earlier releases, which kept one request per index, so the other requests of an
//!   entry stayed in `recent_requests` for ever: a file with `recent_by_index` gets
//!   `recent_by_entry` built on open from `recent_requests` (each value starts with
//!   its log index), leaked rows included, which the next forget then removes, and
//!   the old table deleted, in one transaction.
//!
//! - `documents`: `&str` name → bytes, opaque to the store: a small replicated state
//!   kept whole under one name (the cluster map of the metadata group, whose store holds
//!   no handles). Added without a format change: a file without it gets it on open.
//!
//! - `slot_states`: `u32` slot → `u8` state (1 owned, 2 exporting, 3 frozen, 4
//!   importing): the slots of the cluster's ring this store's replica set holds, once
//!   the store is sliced; `meta` key `slot_count` then holds the ring's slot count. A
//!   store that was never sliced (a lone node, or a set from before the ring) holds
//!   every handle. Added without a format change: a file without them gets them on open.
//!
//! - `slot_journal`: `(u32 slot, u64 sequence)` → folded handle key: the handles changed
//!   in a slot being exported, in order (see [`super::WriteBatch::journal_change`]).
//! - `slot_index`: `(u32 slot, folded handle key)` → `()`: every handle of a sliced
//!   store under its slot (empty in a store that was never sliced). Added without a
//!   format change: a sliced file without it gets it built on open.
//!
//! - `value_index`: `(folded value type, first 1024 octets of the data, folded handle
//!   key)` → `()`: every value of an indexed type (see [`super::IndexedTypes`]), for
//!   reverse lookup. `indexed_types`: folded value type → `()`, the types the index was
//!   built for. Added without a format change: a file without them, or whose types
//!   differ from the configuration, gets the index built on open.
//!
//! A folded handle key sorts the handles of one prefix together: they all start with
//! `PREFIX/`, so listing a prefix is one range scan.
//!
//! The replicated log is not here: it is a directory of segment files of its own
//! ([`super::EntryLog`]).

use redb::TableDefinition;

use crate::values::{
    DecodeError, HandleValue, Reader, Writer, decode_value_list, encode_value_list,
};

/// Results of recently applied client requests, by request id.
pub const RECENT_REQUESTS: TableDefinition<u64, &[u8]> = TableDefinition::new("recent_requests");

/// Recently applied client requests, by (log index that applied them, request id).
pub const RECENT_BY_ENTRY: TableDefinition<(u64, u64), ()> =
    TableDefinition::new("recent_by_entry");

/// What earlier releases kept instead of [`RECENT_BY_ENTRY`] (log index → request id,
/// one request per index); replaced on open (see the module docs).
pub const RECENT_BY_INDEX_BEFORE_ENTRIES: TableDefinition<u64, u64> =
    TableDefinition::new("recent_by_index");

/// The version of the layout described above, checked on every open.
pub const FORMAT_VERSION: u64 = 1;

/// Key of the format version in [`META`].
pub const FORMAT_VERSION_KEY: &str = "format_version";

/// Store-wide metadata.
pub const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// Handle records by folded handle.
pub const HANDLES: TableDefinition<&str, &[u8]> = TableDefinition::new("handles");

/// Prefix records by folded naming authority.
pub const PREFIXES: TableDefinition<&str, &[u8]> = TableDefinition::new("prefixes");

/// The state of every slot this store holds, by slot (see the module docs).
pub const SLOT_STATES: TableDefinition<u32, u8> = TableDefinition::new("slot_states");
/// The journal of exporting slots (see the module docs).
pub const SLOT_JOURNAL: TableDefinition<(u32, u64), &str> = TableDefinition::new("slot_journal");
/// Every handle of a sliced store by slot (see the module docs).
pub const SLOT_INDEX: TableDefinition<(u32, &str), ()> = TableDefinition::new("slot_index");
/// A key of [`VALUE_INDEX`]: folded type, data head, folded handle key.
pub type ValueIndexKey<'a> = (&'a str, &'a [u8], &'a str);
/// Handles by the values of indexed types they hold (see the module docs).
pub const VALUE_INDEX: TableDefinition<ValueIndexKey<'static>, ()> =
    TableDefinition::new("value_index");
/// The folded value types [`VALUE_INDEX`] holds.
pub const INDEXED_TYPES: TableDefinition<&str, ()> = TableDefinition::new("indexed_types");
/// Key in [`META`] of the ring's slot count, once the store is sliced.
pub const SLOT_COUNT_KEY: &str = "slot_count";
/// Named documents: small replicated states kept whole (see the module docs).
pub const DOCUMENTS: TableDefinition<&str, &[u8]> = TableDefinition::new("documents");
/// Replication metadata kept beside the handles (see [`APPLIED_STATE_KEY`]).
pub const SM_META: TableDefinition<&str, &[u8]> = TableDefinition::new("sm_meta");

/// Key in [`SM_META`] of the applied state.
pub const APPLIED_STATE_KEY: &str = "applied";

const RECORD_LAYOUT: u8 = 1;

/// The range of folded handle keys under the folded prefix `prefix_key`: from
/// `PREFIX/` up to (not including) `PREFIX0`, `0` being the octet after `/`.
pub fn prefix_range(prefix_key: &str) -> (String, String) {
    (format!("{prefix_key}/"), format!("{prefix_key}0"))
}

/// A handle as stored: its display spelling and its values in stored order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HandleRecord {
    /// The handle as first written.
    pub display: String,
    /// The values, in the order they are stored.
    pub values: Vec<HandleValue>,
}

impl HandleRecord {
    /// The on-disk bytes of this record.
    pub fn encode(&self) -> Vec<u8> {
        Self::encode_parts(&self.display, &self.values)
    }

    /// The on-disk bytes of the record of `values` displayed as `display`.
    pub fn encode_parts(display: &str, values: &[HandleValue]) -> Vec<u8> {
        let len = 1 + 4 + display.len() + 4;
        let len = len + values.iter().map(HandleValue::encoded_len).sum::<usize>();
        let mut w = Writer::with_capacity(len);
        w.u8(RECORD_LAYOUT);
        w.str(display);
        encode_value_list(values, &mut w);
        w.into_bytes()
    }

    /// Reads a record written by [`HandleRecord::encode`].
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        check_layout(&mut r, "handle record layout")?;
        let display = r.str("display spelling")?.to_owned();
        let values = decode_value_list(&mut r)?;
        r.finish("handle record")?;
        Ok(HandleRecord { display, values })
    }
}

/// A naming authority known to the store.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PrefixRecord {
    /// The prefix as first written.
    pub display: String,
    /// How many handles the store holds under it.
    pub handle_count: u64,
    /// Whether this server was told it serves the prefix (OC_HOME_NA).
    pub homed: bool,
}

impl PrefixRecord {
    /// The on-disk bytes of this record.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(1 + 4 + self.display.len() + 8 + 1);
        w.u8(RECORD_LAYOUT);
        w.str(&self.display);
        w.u64(self.handle_count);
        w.u8(u8::from(self.homed));
        w.into_bytes()
    }

    /// Reads a record written by [`PrefixRecord::encode`].
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        check_layout(&mut r, "prefix record layout")?;
        let display = r.str("prefix spelling")?.to_owned();
        let handle_count = r.u64("handle count")?;
        let homed = match r.u8("homed flag")? {
            0 => false,
            1 => true,
            other => {
                return Err(DecodeError::InvalidField {
                    field: "homed flag",
                    value: u64::from(other),
                });
            }
        };
        r.finish("prefix record")?;
        Ok(PrefixRecord {
            display,
            handle_count,
            homed,
        })
    }

    /// Whether the record says nothing worth keeping.
    pub fn is_empty(&self) -> bool {
        self.handle_count == 0 && !self.homed
    }
}

fn check_layout(r: &mut Reader<'_>, field: &'static str) -> Result<(), DecodeError> {
    match r.u8(field)? {
        RECORD_LAYOUT => Ok(()),
        other => Err(DecodeError::InvalidField {
            field,
            value: u64::from(other),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_record_round_trips() {
        let record = HandleRecord {
            display: "cnri.test/日本".into(),
            values: vec![HandleValue::new(1, "URL", "https://example.org/")],
        };
        assert_eq!(HandleRecord::decode(&record.encode()).unwrap(), record);
    }

    #[test]
    fn prefix_record_round_trips() {
        let record = PrefixRecord {
            display: "Cnri.Test".into(),
            handle_count: 3,
            homed: true,
        };
        assert_eq!(PrefixRecord::decode(&record.encode()).unwrap(), record);
    }

    #[test]
    fn unknown_record_layout_is_refused() {
        let mut bytes = PrefixRecord {
            display: "x".into(),
            handle_count: 0,
            homed: false,
        }
        .encode();
        bytes[0] = 9;
        assert!(PrefixRecord::decode(&bytes).is_err());
    }

    #[test]
    fn prefix_range_covers_exactly_the_prefix() {
        let (start, end) = prefix_range("10.1000");
        for inside in ["10.1000/", "10.1000/1", "10.1000/ZZZ/9", "10.1000/日本"] {
            assert!(
                start.as_str() <= inside && inside < end.as_str(),
                "{inside}"
            );
        }
        for outside in ["10.10000/1", "10.1000", "10.100/1", "10.1000.1/x"] {
            assert!(
                !(start.as_str() <= outside && outside < end.as_str()),
                "{outside}"
            );
        }
    }
}
