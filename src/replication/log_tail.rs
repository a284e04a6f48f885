//! The newest entries of a group's log, kept in memory beside the log file.
//!
//! openraft reads entries back from the log right after appending them: the leader's
//! replication streams read each new entry to send it to every follower, and every
//! member reads the committed entries to apply them. From the file, each read was a
//! trip through the blocking pool and a redb read transaction on the path of every
//! write. The [`LogTail`] holds the entries appended last, up to [`TAIL_OCTETS`] of their
//! encoding, and answers a read it covers whole; any other read goes to the file.
//!
//! Invariant: the tail is always the end of the log as some moment of it left it: a
//! contiguous run of entries ending with the log's last one. Appends extend it only
//! after they are durable; truncations and purges shrink it before they touch the
//! file, so a read never sees from the tail an entry the file no longer holds (it
//! falls through to the file and sees what the file holds). Touches no disk.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use super::machine::Machine;
use super::types::Entry;

/// The most octets (of encoded entries) a tail keeps: the entries of the last few
/// group commits under full load (one holds at most
/// [`super::proposer::MAX_OCTETS`] of requests).
pub const TAIL_OCTETS: usize = 4 << 20;

/// The newest entries of one log; see the module doc.
pub struct LogTail<M: Machine> {
    kept: Mutex<Kept<M>>,
}

struct Kept<M: Machine> {
    /// Entries in index order, each with its encoded length.
    entries: VecDeque<(Entry<M>, usize)>,
    octets: usize,
}

impl<M: Machine> Default for LogTail<M> {
    fn default() -> Self {
        LogTail {
            kept: Mutex::new(Kept {
                entries: VecDeque::new(),
                octets: 0,
            }),
        }
    }
}

impl<M: Machine> LogTail<M> {
    /// Records entries just made durable at the end of the log (with their encoded
    /// lengths), dropping the oldest beyond [`TAIL_OCTETS`]. Entries after a gap start
    /// the tail afresh; entries that overwrite some of it (openraft truncates first, so
    /// none should) empty it, as the log's end is then unknown here.
    pub fn appended(&self, appended: Vec<(Entry<M>, usize)>) {
        let mut kept = self.lock();
        let last = kept.entries.back().map(|(entry, _)| entry.log_id.index);
        let first = appended.first().map(|(entry, _)| entry.log_id.index);
        if let (Some(last), Some(first)) = (last, first)
            && first != last + 1
        {
            kept.entries.clear();
            kept.octets = 0;
            if first <= last {
                return;
            }
        }
        for (entry, octets) in appended {
            kept.octets += octets;
            kept.entries.push_back((entry, octets));
        }
        while kept.octets > TAIL_OCTETS {
            let Some((_, octets)) = kept.entries.pop_front() else {
                break;
            };
            kept.octets -= octets;
        }
    }

    /// Forgets every entry from index `from` on (before the file truncates them).
    pub fn truncating(&self, from: u64) {
        let mut kept = self.lock();
        while kept
            .entries
            .back()
            .is_some_and(|(entry, _)| entry.log_id.index >= from)
        {
            if let Some((_, octets)) = kept.entries.pop_back() {
                kept.octets -= octets;
            }
        }
    }

    /// Forgets every entry up to index `upto` (before the file purges them).
    pub fn purging(&self, upto: u64) {
        let mut kept = self.lock();
        while kept
            .entries
            .front()
            .is_some_and(|(entry, _)| entry.log_id.index <= upto)
        {
            if let Some((_, octets)) = kept.entries.pop_front() {
                kept.octets -= octets;
            }
        }
    }

    /// The entries from index `start` up to `end` (exclusive; `None`: to the end of the
    /// log), if the tail holds all of them; `None` when the file must be read.
    pub fn read(&self, start: u64, end: Option<u64>) -> Option<Vec<Entry<M>>> {
        let kept = self.lock();
        let first = kept.entries.front()?.0.log_id.index;
        let past_last = kept.entries.back()?.0.log_id.index + 1;
        let end = end.unwrap_or(past_last);
        if start < first || end > past_last {
            return None;
        }
        let skip = usize::try_from(start - first).ok()?;
        let take = usize::try_from(end.saturating_sub(start)).ok()?;
        Some(
            kept.entries
                .iter()
                .skip(skip)
                .take(take)
                .map(|(entry, _)| entry.clone())
                .collect(),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept<M>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use openraft::EntryPayload;
    use openraft::testing::log_id;

    use super::*;
    use crate::replication::handle_set::HandleSet;

    fn blank(index: u64) -> (Entry<HandleSet>, usize) {
        let entry = Entry {
            log_id: log_id(1, 1, index),
            payload: EntryPayload::Blank,
        };
        (entry, 1 << 20)
    }

    fn indexes(entries: Option<Vec<Entry<HandleSet>>>) -> Option<Vec<u64>> {
        entries.map(|entries| entries.iter().map(|entry| entry.log_id.index).collect())
    }

    #[test]
    fn answers_only_reads_it_covers_whole() {
        let tail = LogTail::<HandleSet>::default();
        assert_eq!(indexes(tail.read(0, None)), None);
        tail.appended((3..=5).map(blank).collect());
        assert_eq!(indexes(tail.read(3, None)), Some(vec![3, 4, 5]));
        assert_eq!(indexes(tail.read(4, Some(5))), Some(vec![4]));
        assert_eq!(
            indexes(tail.read(2, Some(5))),
            None,
            "starts before the tail"
        );
        assert_eq!(indexes(tail.read(4, Some(7))), None, "ends past the log");
    }

    #[test]
    fn keeps_the_newest_within_its_bound() {
        let tail = LogTail::<HandleSet>::default();
        for index in 1..=10 {
            tail.appended(vec![blank(index)]);
        }
        let kept = TAIL_OCTETS >> 20;
        let first = 10 - u64::try_from(kept).unwrap() + 1;
        assert_eq!(indexes(tail.read(first - 1, None)), None);
        assert_eq!(
            indexes(tail.read(first, None)).map(|got| got.len()),
            Some(kept)
        );
    }

    #[test]
    fn truncation_purge_gap_and_overwrite_keep_it_the_log_end() {
        let tail = LogTail::<HandleSet>::default();
        tail.appended((1..=4).map(blank).collect());
        tail.truncating(3);
        tail.purging(1);
        assert_eq!(indexes(tail.read(2, None)), Some(vec![2]));
        tail.appended(vec![blank(3)]);
        assert_eq!(indexes(tail.read(2, None)), Some(vec![2, 3]));
        tail.appended(vec![blank(9)]);
        assert_eq!(indexes(tail.read(9, None)), Some(vec![9]), "after a gap");
        assert_eq!(indexes(tail.read(3, None)), None);
        tail.appended(vec![blank(8)]);
        assert_eq!(indexes(tail.read(8, None)), None, "an overwrite empties it");
        tail.appended(vec![blank(9)]);
        assert_eq!(indexes(tail.read(9, None)), Some(vec![9]));
    }
}
