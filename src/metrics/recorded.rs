//! The request counter and latency histogram of each (protocol, operation, code) a
//! node has answered, found again by a probe of a small fixed table instead of a
//! look-up of the label set in the families (a lock and a SipHash of the labels,
//! twice a request).
//!
//! Entries are made once, from the families (so they share their counts), and
//! never removed: the operations are static names and the codes a short list, so
//! the table's slots are enough for every label set a node meets; one that finds
//! no slot is reported as not held, and recorded through the families instead.
//! Owns the table only; knows nothing of what the labels mean.

use std::sync::OnceLock;

use prometheus_client::metrics::counter::Counter;

use super::Protocol;
use super::latency::Latency;

/// Slots of the table (a power of two).
const SLOTS: usize = 64;

/// Slots probed for one label set before it is reported as not held.
const PROBES: usize = 8;

/// The counts of one label set.
#[derive(Debug)]
pub(super) struct Recorded {
    protocol: Protocol,
    op: &'static str,
    code: u32,
    /// The request counter of (protocol, op, code).
    pub(super) requests: Counter,
    /// The latency histogram of (protocol, op).
    pub(super) latency: Latency,
}

impl Recorded {
    fn is_of(&self, protocol: Protocol, op: &'static str, code: u32) -> bool {
        self.protocol == protocol
            && self.code == code
            && (std::ptr::eq(self.op, op) || self.op == op)
    }
}

/// The table of label sets recorded so far.
#[derive(Debug)]
pub(super) struct RecordedTable {
    slots: [OnceLock<Recorded>; SLOTS],
}

impl Default for RecordedTable {
    fn default() -> Self {
        RecordedTable {
            slots: std::array::from_fn(|_| OnceLock::new()),
        }
    }
}

impl RecordedTable {
    /// The counts of (`protocol`, `op`, `code`), made with `counts` the first time
    /// this label set is met; `None` when every slot it may take holds another.
    pub(super) fn get_or_make(
        &self,
        protocol: Protocol,
        op: &'static str,
        code: u32,
        counts: impl Fn() -> (Counter, Latency),
    ) -> Option<&Recorded> {
        let start = first_slot(protocol, op, code);
        (0..PROBES).find_map(|probe| {
            let slot = &self.slots[(start + probe) % SLOTS];
            let recorded = slot.get_or_init(|| {
                let (requests, latency) = counts();
                Recorded {
                    protocol,
                    op,
                    code,
                    requests,
                    latency,
                }
            });
            recorded.is_of(protocol, op, code).then_some(recorded)
        })
    }
}

/// Where the probe for a label set starts: a multiplicative hash of the operation
/// name's address (a static name is one address), the code and the protocol.
fn first_slot(protocol: Protocol, op: &'static str, code: u32) -> usize {
    let key = (op.as_ptr() as u64) ^ (u64::from(code) << 32) ^ protocol.slot() as u64;
    let hashed = key.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // The top octet: the best mixed bits of a multiplicative hash.
    usize::from(hashed.to_be_bytes()[0]) % SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh() -> (Counter, Latency) {
        (Counter::default(), Latency::default())
    }

    #[test]
    fn a_label_set_is_made_once_and_found_again() {
        let table = RecordedTable::default();
        let first = table
            .get_or_make(Protocol::Handle, "resolution", 1, fresh)
            .expect("held");
        first.requests.inc();
        let again = table
            .get_or_make(Protocol::Handle, "resolution", 1, || {
                panic!("made a second time")
            })
            .expect("held");
        assert_eq!(again.requests.get(), 1);
        let other = table
            .get_or_make(Protocol::Http, "resolution", 1, fresh)
            .expect("held");
        assert_eq!(other.requests.get(), 0);
    }

    #[test]
    fn a_full_table_reports_label_sets_it_cannot_hold() {
        let table = RecordedTable::default();
        let held = (0..1_000u32)
            .filter(|&code| {
                table
                    .get_or_make(Protocol::Handle, "resolution", code, fresh)
                    .is_some()
            })
            .count();
        assert!(held <= SLOTS, "{held}");
        assert!(held >= SLOTS / 2, "{held}");
    }
}
