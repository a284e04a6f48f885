//! Shares of a room by source address: how many of the connections (TCP) or
//! requests in flight (UDP's costly ones) one address may hold, so that one address
//! filling the room cannot keep every other one out.
//!
//! Owns [`SourceShares`] and [`Share`]. A source is counted only while it holds a
//! share, so the table has no more entries than the shares taken. Knows nothing of
//! sockets or requests: an edge takes a share beside its room's permit.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// The shares each source address holds, at most `per_source` each.
#[derive(Debug)]
pub struct SourceShares {
    per_source: u32,
    held: Mutex<HashMap<IpAddr, u32>>,
}

/// One share of `source`, given back when dropped.
#[derive(Debug)]
pub struct Share {
    shares: Arc<SourceShares>,
    source: IpAddr,
}

impl SourceShares {
    /// Shares of at most `per_source` for each source address.
    pub fn new(per_source: u32) -> Arc<SourceShares> {
        Arc::new(SourceShares {
            per_source,
            held: Mutex::new(HashMap::new()),
        })
    }

    /// A share for `source`, or `None` when it holds `per_source` already.
    pub fn take(self: &Arc<Self>, source: IpAddr) -> Option<Share> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let count = held.get(&source).copied().unwrap_or(0);
        if count >= self.per_source {
            return None;
        }
        held.insert(source, count + 1);
        Some(Share {
            shares: Arc::clone(self),
            source,
        })
    }

    /// How many source addresses hold a share now.
    #[cfg(test)]
    fn sources(&self) -> usize {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self
            .shares
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = held.get_mut(&self.source) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&self.source);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn a_source_holds_at_most_its_share_and_another_is_not_held_back() {
        let shares = SourceShares::new(2);
        let first = shares.take(address(1)).expect("a first share");
        let _second = shares.take(address(1)).expect("a second share");
        assert!(shares.take(address(1)).is_none(), "a third share of two");
        assert!(shares.take(address(2)).is_some(), "another address");
        drop(first);
        assert!(shares.take(address(1)).is_some(), "a share given back");
    }

    #[test]
    fn a_source_holding_nothing_is_forgotten() {
        let shares = SourceShares::new(4);
        let taken: Vec<Share> = (1..=3).filter_map(|n| shares.take(address(n))).collect();
        assert_eq!(shares.sources(), 3);
        let refused = SourceShares::new(0);
        assert!(refused.take(address(9)).is_none());
        assert_eq!(refused.sources(), 0, "a refused source is not counted");
        drop(taken);
        assert_eq!(shares.sources(), 0);
    }
}
