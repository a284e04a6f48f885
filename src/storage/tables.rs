//! Every table, key encoding and on-disk record layout of the handle store.
//!
//! Keeping them in one file (as redb itself does) makes the on-disk format readable in
//! one place. Integers on disk have fixed widths; no platform-sized integer is stored.
//!
//! Format version 3 (a data directory written by an earlier release is kept in
//! `tests/fixtures/earlier-releases/`, and the integration test `upgrades` opens it).
//! Every key below that is text (a folded handle, a naming authority, a value type, a
//! name) is stored as its UTF-8 octets in a `&[u8]` key, and a key read back is checked
//! to be UTF-8 once (a key that is not is a corrupt record). What format 3 changed from
//! format 2 is only that: format 2 keyed the same octets as `&str`, which redb compares
//! by checking both sides are UTF-8 at every comparison of a B-tree descent (about a
//! tenth of a resolution's instructions, a sixth of an insert's); `&[u8]` keys compare
//! octet by octet, and UTF-8's octet order is its code point order, so every table
//! sorts as before. redb records each table's key and value types and refuses a table
//! opened as another, so a store of format 1 or 2 is rebuilt on open (`super::compact`)
//! with its tables retyped ([`text_keyed`] holds their earlier definitions).
//! - `meta`: `&str → u64` (in every format version); key `format_version` holds
//!   [`FORMAT_VERSION`].
//! - `handles`: folded handle (ASCII upper-cased, UTF-8) → handle record, in one of two
//!   layouts, where the value list is the RFC 3652 encoding (digest §5), a published
//!   format readable for decades:
//!   - layout 2, the spelling as the key's case: `u8 record layout (2) ‖ case mask ‖
//!     List<HandleValue>`, the mask one bit an octet of the key (`⌈len/8⌉` octets,
//!     octet `i / 8`, bit `i % 8` from the least significant), set where the spelling
//!     has the ASCII lower-case letter of the key's octet. Written whenever the
//!     spelling folds to the key, which is always so for a handle written through
//!     the store;
//!   - layout 1, spelled: `u8 record layout (1) ‖ Str display spelling ‖
//!     List<HandleValue>`. The only layout of format version 1, and the one records
//!     leave the store in (snapshot images, backups, slot moves: [`HandleRecord::spelled`]),
//!     so that members of either version read each other's; an imported record is
//!     stored in layout 2 ([`HandleRecord::cased`]).
//!
//!   A store of format version 1 is upgraded on open by the same rebuild as one of
//!   format 2 (see `super::compact`): every record in layout 2, in a new file swapped
//!   in by rename.
//! - `prefixes`: folded naming authority → prefix record:
//!   `u8 record layout (1) ‖ Str display spelling ‖ u64 handle count ‖ u8 homed (0/1)`.
//!
//! - `sm_meta`: name → bytes; key `applied` holds the replication layer's applied
//!   state (last applied log position and membership), opaque to the store. It is
//!   written in the same transaction as the handle writes it accounts for.
//! - `recent_results`: `(u64 log index, u64 client request id)` → result bytes, the
//!   result of each request applied within the last stretch of the log, opaque to the
//!   store (see [`super::WriteBatch::recall_result`]), in the order they were applied:
//!   one log entry applies many requests (group commit), and forgetting the oldest is
//!   one range at the table's start. Request ids are digests, so a table keyed by
//!   them took each insert in a leaf of its own, a page copied, checksummed and
//!   written for every write applied, more the larger the table; keyed by log index,
//!   a batch's results fill one leaf after another. Which index holds a request is
//!   kept in memory (module `recent`), read from this table on open. Replaced
//!   without a format change the `recent_requests` (request id → `u64 log index
//!   (big-endian) ‖ result`) and `recent_by_entry` (`(log index, request id)` → `()`)
//!   tables of earlier releases, and the `recent_by_index` table (`u64` log index →
//!   `u64` request id) of releases before them: a file with `recent_requests` gets
//!   its rows moved into `recent_results` on open, and the old tables deleted, in
//!   one transaction.
//!
//! - `documents`: name → bytes, opaque to the store: a small replicated state
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

/// Results of recently applied client requests, by (log index that applied them,
/// request id).
pub const RECENT_RESULTS: TableDefinition<(u64, u64), &[u8]> =
    TableDefinition::new("recent_results");

/// What earlier releases kept instead of [`RECENT_RESULTS`]: results by request id
/// (moved into it on open, see the module docs).
pub const RECENT_REQUESTS_BEFORE_RESULTS: TableDefinition<u64, &[u8]> =
    TableDefinition::new("recent_requests");

/// What earlier releases listed their remembered requests in, by (log index, request
/// id); deleted on open.
pub const RECENT_BY_ENTRY_BEFORE_RESULTS: TableDefinition<(u64, u64), ()> =
    TableDefinition::new("recent_by_entry");

/// What releases before those kept instead of `recent_by_entry` (log index → request
/// id, one request per index); deleted on open.
pub const RECENT_BY_INDEX_BEFORE_ENTRIES: TableDefinition<u64, u64> =
    TableDefinition::new("recent_by_index");

/// The version of the layout described above, checked on every open.
pub const FORMAT_VERSION: u64 = 3;

/// The format version whose keys are `&str` ([`text_keyed`]), upgraded on open.
pub const FORMAT_VERSION_TEXT_KEYS: u64 = 2;

/// The format version upgraded on open whose keys are `&str` and whose handle records
/// are in layout 1 only.
pub const FORMAT_VERSION_SPELLED: u64 = 1;

/// Key of the format version in [`META`].
pub const FORMAT_VERSION_KEY: &str = "format_version";

/// Store-wide metadata. Keyed by `&str` in every format version, so that the version
/// is read the same way whatever wrote the file.
pub const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// Handle records by folded handle.
pub const HANDLES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("handles");

/// Prefix records by folded naming authority.
pub const PREFIXES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("prefixes");

/// The state of every slot this store holds, by slot (see the module docs).
pub const SLOT_STATES: TableDefinition<u32, u8> = TableDefinition::new("slot_states");
/// The journal of exporting slots (see the module docs).
pub const SLOT_JOURNAL: TableDefinition<(u32, u64), &[u8]> = TableDefinition::new("slot_journal");
/// Every handle of a sliced store by slot (see the module docs).
pub const SLOT_INDEX: TableDefinition<(u32, &[u8]), ()> = TableDefinition::new("slot_index");
/// A key of [`VALUE_INDEX`]: folded type, data head, folded handle key.
pub type ValueIndexKey<'a> = (&'a [u8], &'a [u8], &'a [u8]);
/// Handles by the values of indexed types they hold (see the module docs).
pub const VALUE_INDEX: TableDefinition<ValueIndexKey<'static>, ()> =
    TableDefinition::new("value_index");
/// The folded value types [`VALUE_INDEX`] holds.
pub const INDEXED_TYPES: TableDefinition<&[u8], ()> = TableDefinition::new("indexed_types");
/// Key in [`META`] of the ring's slot count, once the store is sliced.
pub const SLOT_COUNT_KEY: &str = "slot_count";
/// Named documents: small replicated states kept whole (see the module docs).
pub const DOCUMENTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("documents");
/// Replication metadata kept beside the handles (see [`APPLIED_STATE_KEY`]).
pub const SM_META: TableDefinition<&[u8], &[u8]> = TableDefinition::new("sm_meta");

/// Key in [`SM_META`] of the applied state.
pub const APPLIED_STATE_KEY: &[u8] = b"applied";

/// The tables format versions 1 and 2 keyed by `&str` (every other table, [`META`]
/// included, is the same in format 3): read only by the rebuild that upgrades such a
/// store (`super::compact`), and by tests that write one.
pub mod text_keyed {
    use redb::TableDefinition;

    /// [`super::HANDLES`].
    pub const HANDLES: TableDefinition<&str, &[u8]> = TableDefinition::new("handles");
    /// [`super::PREFIXES`].
    pub const PREFIXES: TableDefinition<&str, &[u8]> = TableDefinition::new("prefixes");
    /// [`super::SLOT_JOURNAL`].
    pub const SLOT_JOURNAL: TableDefinition<(u32, u64), &str> =
        TableDefinition::new("slot_journal");
    /// [`super::SLOT_INDEX`].
    pub const SLOT_INDEX: TableDefinition<(u32, &str), ()> = TableDefinition::new("slot_index");
    /// [`super::VALUE_INDEX`].
    pub const VALUE_INDEX: TableDefinition<(&str, &[u8], &str), ()> =
        TableDefinition::new("value_index");
    /// [`super::INDEXED_TYPES`].
    pub const INDEXED_TYPES: TableDefinition<&str, ()> = TableDefinition::new("indexed_types");
    /// [`super::DOCUMENTS`].
    pub const DOCUMENTS: TableDefinition<&str, &[u8]> = TableDefinition::new("documents");
    /// [`super::SM_META`].
    pub const SM_META: TableDefinition<&str, &[u8]> = TableDefinition::new("sm_meta");
}

const RECORD_LAYOUT: u8 = 1;

/// The layout of a handle record whose spelling is the key's case (see the module docs).
const CASED_LAYOUT: u8 = 2;

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
    /// The stored bytes of the record of `values` displayed as `display` under the
    /// folded key `key`: layout 2 when `display` folds to `key`, else layout 1.
    pub fn encode_parts(key: &str, display: &str, values: &[HandleValue]) -> Vec<u8> {
        let Some(mask) = case_mask(key, display) else {
            return Self::spelled_parts(display, values);
        };
        let len = 1 + mask.len() + 4;
        let len = len + values.iter().map(HandleValue::encoded_len).sum::<usize>();
        let mut w = Writer::with_capacity(len);
        w.u8(CASED_LAYOUT);
        w.raw(&mask);
        encode_value_list(values, &mut w);
        w.into_bytes()
    }

    /// The bytes of the record of `values` displayed as `display` in layout 1.
    pub fn spelled_parts(display: &str, values: &[HandleValue]) -> Vec<u8> {
        let len = 1 + 4 + display.len() + 4;
        let len = len + values.iter().map(HandleValue::encoded_len).sum::<usize>();
        let mut w = Writer::with_capacity(len);
        w.u8(RECORD_LAYOUT);
        w.str(display);
        encode_value_list(values, &mut w);
        w.into_bytes()
    }

    /// Reads the record stored under the folded key `key`, in either layout.
    pub fn decode(key: &str, bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let display = read_spelling(key, &mut r)?;
        let values = decode_value_list(&mut r)?;
        r.finish("handle record")?;
        Ok(HandleRecord { display, values })
    }

    /// The record stored under `key` as `bytes`, in layout 1 (as records leave the
    /// store), its values copied as they are.
    pub fn spelled(key: &str, bytes: &[u8]) -> Result<Vec<u8>, DecodeError> {
        let mut r = Reader::new(bytes);
        let display = read_spelling(key, &mut r)?;
        let values = r.take_rest();
        let mut w = Writer::with_capacity(1 + 4 + display.len() + values.len());
        w.u8(RECORD_LAYOUT);
        w.str(&display);
        w.raw(values);
        Ok(w.into_bytes())
    }

    /// The record `bytes` under `key`, in either layout, as it is stored: layout 2
    /// when its spelling folds to `key`; its values copied as they are.
    pub fn cased(key: &str, bytes: &[u8]) -> Result<Vec<u8>, DecodeError> {
        let mut r = Reader::new(bytes);
        let display = read_spelling(key, &mut r)?;
        let values = r.take_rest();
        let Some(mask) = case_mask(key, &display) else {
            return Ok(bytes.to_vec());
        };
        let mut w = Writer::with_capacity(1 + mask.len() + values.len());
        w.u8(CASED_LAYOUT);
        w.raw(&mask);
        w.raw(values);
        Ok(w.into_bytes())
    }
}

/// Which octets of `display` are the ASCII lower-case letters of `key`'s (see the
/// module docs); `None` when `display` does not fold to `key`.
fn case_mask(key: &str, display: &str) -> Option<Vec<u8>> {
    let (key, display) = (key.as_bytes(), display.as_bytes());
    if key.len() != display.len() {
        return None;
    }
    let mut mask = vec![0u8; key.len().div_ceil(8)];
    for (i, (&k, &d)) in key.iter().zip(display).enumerate() {
        if d.is_ascii_lowercase() && d.to_ascii_uppercase() == k {
            mask[i / 8] |= 1 << (i % 8);
        } else if d != k {
            return None;
        }
    }
    Some(mask)
}

/// Reads a handle record's layout and spelling, leaving `r` at its value list.
fn read_spelling(key: &str, r: &mut Reader<'_>) -> Result<String, DecodeError> {
    match r.u8("handle record layout")? {
        RECORD_LAYOUT => Ok(r.str("display spelling")?.to_owned()),
        CASED_LAYOUT => {
            let mask = r.take(key.len().div_ceil(8), "case mask")?;
            cased_spelling(key, mask)
        }
        other => Err(DecodeError::InvalidField {
            field: "handle record layout",
            value: u64::from(other),
        }),
    }
}

/// The spelling of `key` with the case `mask` gives it.
fn cased_spelling(key: &str, mask: &[u8]) -> Result<String, DecodeError> {
    let mut display = key.as_bytes().to_vec();
    for (i, octet) in display.iter_mut().enumerate() {
        if mask[i / 8] & (1 << (i % 8)) == 0 {
            continue;
        }
        if !octet.is_ascii_uppercase() {
            return Err(DecodeError::InvalidField {
                field: "case mask",
                value: i as u64,
            });
        }
        *octet = octet.to_ascii_lowercase();
    }
    // Only ASCII letters changed, so the key's UTF-8 stays valid.
    String::from_utf8(display).map_err(|_| DecodeError::InvalidField {
        field: "case mask",
        value: 0,
    })
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

    fn record(display: &str) -> HandleRecord {
        HandleRecord {
            display: display.into(),
            values: vec![HandleValue::new(1, "URL", "https://example.org/")],
        }
    }

    fn stored(key: &str, record: &HandleRecord) -> Vec<u8> {
        HandleRecord::encode_parts(key, &record.display, &record.values)
    }

    #[test]
    fn handle_record_round_trips_in_the_key_s_case() {
        let record = record("cnri.test/Ab-日本-xYz");
        let key = "CNRI.TEST/AB-日本-XYZ";
        let bytes = stored(key, &record);
        assert_eq!(bytes[0], CASED_LAYOUT);
        let spelled = HandleRecord::spelled_parts(&record.display, &record.values);
        assert_eq!(bytes.len() + record.display.len() + 4, spelled.len() + 3);
        assert_eq!(HandleRecord::decode(key, &bytes).unwrap(), record);
    }

    #[test]
    fn a_spelling_that_does_not_fold_to_the_key_is_spelled_out() {
        let record = record("cnri.test/b");
        let bytes = stored("CNRI.TEST/A", &record);
        assert_eq!(bytes[0], RECORD_LAYOUT);
        assert_eq!(HandleRecord::decode("CNRI.TEST/A", &bytes).unwrap(), record);
    }

    #[test]
    fn records_convert_between_layouts_without_change() {
        let record = record("Cnri.Test/x");
        let key = "CNRI.TEST/X";
        let cased = stored(key, &record);
        let spelled = HandleRecord::spelled(key, &cased).unwrap();
        assert_eq!(
            spelled,
            HandleRecord::spelled_parts(&record.display, &record.values)
        );
        assert_eq!(HandleRecord::cased(key, &spelled).unwrap(), cased);
        assert_eq!(HandleRecord::cased(key, &cased).unwrap(), cased);
        assert_eq!(HandleRecord::spelled(key, &spelled).unwrap(), spelled);
    }

    #[test]
    fn a_case_mask_that_lowers_no_letter_is_refused() {
        let mut bytes = stored("A/1", &record("A/1"));
        bytes[1] = 0b100;
        assert!(HandleRecord::decode("A/1", &bytes).is_err());
        assert!(HandleRecord::decode("A/1/LONGER-THAN-EIGHT", &bytes[..1]).is_err());
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
