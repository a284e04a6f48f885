//! The wall clock, read in one place: seconds since the Unix epoch as the Handle
//! protocol writes them (a `u32`).
//!
//! A leaf: depends on nothing in the crate. Pure layers never read the clock (time is
//! passed in); the edges, the service and the clients call [`unix_now`], replication
//! names its snapshots with [`unix_micros`].

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch, as the wire's `u32` (0 before 1970, saturating
/// after 2106).
pub fn unix_now() -> u32 {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    u32::try_from(seconds).unwrap_or(u32::MAX)
}

/// Microseconds since the Unix epoch (0 before 1970): to tell apart things made in the
/// same second, never for what goes on the wire.
pub fn unix_micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_micros())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_after_this_code_was_written() {
        // 2026-01-01T00:00:00Z.
        assert!(unix_now() > 1_767_225_600);
        assert!(unix_micros() > 1_767_225_600_000_000);
    }
}
