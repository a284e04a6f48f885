//! The book of peer connections that have not proven the cluster secret yet: what
//! bounds the hold a client without the secret can take on the peer port.
//!
//! Owns [`Strangers`]: at most `total` connections in the handshake at once, and at
//! most `per_source` of them from one source address. A newcomer is never turned away
//! for lack of room: one from a source at its share takes the place of that source's
//! own oldest stranger, and one arriving when the book is full takes the place of the
//! oldest stranger of the source holding the most. So a source can crowd out only
//! itself, and a member's connection (it authenticates in one round trip, then leaves
//! the book) gets in however many strangers other addresses hold open. Each entry
//! keeps a value, handed back when its place is taken: the listener keeps there what
//! closes the evicted connection.
//!
//! Pure: no sockets, no clock, no locks (the listener holds the book in one).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

/// A stranger's place in the book.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct StrangerId(u64);

/// Connections in the handshake, by source address, oldest first.
#[derive(Debug)]
pub(super) struct Strangers<T> {
    total: usize,
    per_source: usize,
    next: u64,
    len: usize,
    by_source: HashMap<IpAddr, VecDeque<(StrangerId, T)>>,
}

impl<T> Strangers<T> {
    /// A book of at most `total` strangers, `per_source` from one address (each at
    /// least one).
    pub(super) fn new(total: usize, per_source: usize) -> Strangers<T> {
        Strangers {
            total: total.max(1),
            per_source: per_source.max(1),
            next: 0,
            len: 0,
            by_source: HashMap::new(),
        }
    }

    /// Enters a stranger from `source`, keeping `value`; its place, and the value of
    /// the stranger whose place it took, if the book had no room.
    pub(super) fn enter(&mut self, source: IpAddr, value: T) -> (StrangerId, Option<T>) {
        let held = self.by_source.get(&source).map_or(0, VecDeque::len);
        let evicted = if held >= self.per_source {
            self.evict_oldest(source)
        } else if self.len >= self.total {
            self.busiest()
                .and_then(|busiest| self.evict_oldest(busiest))
        } else {
            None
        };
        let id = StrangerId(self.next);
        self.next += 1;
        self.by_source
            .entry(source)
            .or_default()
            .push_back((id, value));
        self.len += 1;
        (id, evicted)
    }

    /// Takes stranger `id` from `source` out of the book (it authenticated or its
    /// connection ended); its value, unless its place was taken before.
    pub(super) fn leave(&mut self, source: IpAddr, id: StrangerId) -> Option<T> {
        let held = self.by_source.get_mut(&source)?;
        let index = held.iter().position(|(entry, _)| *entry == id)?;
        let (_, value) = held.remove(index)?;
        if held.is_empty() {
            self.by_source.remove(&source);
        }
        self.len -= 1;
        Some(value)
    }

    /// How many strangers the book holds.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The source holding the most strangers (of two holding as many, the one whose
    /// oldest came first).
    fn busiest(&self) -> Option<IpAddr> {
        let oldest = |held: &VecDeque<(StrangerId, T)>| held.front().map(|(id, _)| *id);
        self.by_source
            .iter()
            .max_by(|(_, a), (_, b)| {
                a.len()
                    .cmp(&b.len())
                    .then_with(|| oldest(b).cmp(&oldest(a)))
            })
            .map(|(source, _)| *source)
    }

    fn evict_oldest(&mut self, source: IpAddr) -> Option<T> {
        let held = self.by_source.get_mut(&source)?;
        let (_, value) = held.pop_front()?;
        if held.is_empty() {
            self.by_source.remove(&source);
        }
        self.len -= 1;
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn a_source_at_its_share_loses_its_own_oldest_stranger() {
        let mut book = Strangers::new(64, 3);
        for n in 0..3 {
            assert_eq!(book.enter(source(1), n).1, None);
        }
        assert_eq!(book.enter(source(2), 100).1, None);
        assert_eq!(book.enter(source(1), 3).1, Some(0));
        assert_eq!(book.enter(source(1), 4).1, Some(1));
        assert_eq!(book.len(), 4, "three of source 1 and one of source 2");
    }

    #[test]
    fn a_full_book_takes_room_from_the_source_holding_the_most() {
        let mut book = Strangers::new(5, 3);
        let (first_of_two, _) = book.enter(source(2), 20);
        for n in 0..3 {
            book.enter(source(1), n);
        }
        book.enter(source(2), 21);
        // Full: a newcomer from a third address takes source 1's oldest.
        let (member, evicted) = book.enter(source(3), 30);
        assert_eq!(evicted, Some(0));
        // Sources 1 and 2 now hold two each: source 2's oldest came first.
        assert_eq!(book.enter(source(4), 40).1, Some(20));
        assert_eq!(book.leave(source(2), first_of_two), None, "already evicted");
        assert_eq!(book.leave(source(3), member), Some(30));
        assert_eq!(book.len(), 4);
    }

    #[test]
    fn a_stranger_that_leaves_frees_its_place() {
        let mut book = Strangers::new(2, 2);
        let (a, _) = book.enter(source(1), 'a');
        book.enter(source(1), 'b');
        assert_eq!(book.leave(source(1), a), Some('a'));
        assert_eq!(book.enter(source(1), 'c').1, None, "room again");
        assert_eq!(book.leave(source(9), a), None, "unknown source");
    }
}
