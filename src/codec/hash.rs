//! Choosing the server of a site for a handle (digest §7, §13.7; RFC 3651 §3.2.2).
//!
//! Owns [`handle_hash`] and [`server_index`]: J9's
//! `SiteInfo.getHandleHash/determineServerNum`. Pure; depends on MD5 and the
//! [`HashOption`] of [`crate::values`] (the HS_SITE octet).
//!
//! The part of the handle named by the site's HashOption is upper-cased (ASCII `a–z`
//! only), hashed with MD5, and the last four digest octets, read as a big-endian
//! signed integer, give `abs(h) mod servers` — an index into the HS_SITE server list
//! in encoded order. J9 throws for `h = i32::MIN` (whose absolute value overflows);
//! here it is 2³¹, a documented divergence with probability 2⁻³².

use md5::{Digest, Md5};

use crate::values::HashOption;

fn hashed_part(handle: &[u8], option: HashOption) -> &[u8] {
    let slash = handle.iter().position(|&b| b == b'/');
    match (option, slash) {
        (HashOption::ByPrefix, Some(at)) => &handle[..at],
        (HashOption::ByPrefix, None) => b"0.NA",
        (HashOption::BySuffix, Some(at)) => &handle[at + 1..],
        (HashOption::BySuffix, None) | (HashOption::ByHandle, _) => handle,
    }
}

/// J9's handle hash: `abs` of the last four MD5 octets of the upper-cased part.
pub fn handle_hash(handle: &[u8], option: HashOption) -> u32 {
    let mut md5 = Md5::new();
    let mut upper = [0u8; 64];
    // Upper-cased a block at a time on the stack: a hash makes no allocation.
    for chunk in hashed_part(handle, option).chunks(upper.len()) {
        let upper = &mut upper[..chunk.len()];
        upper.copy_from_slice(chunk);
        upper.make_ascii_uppercase();
        md5.update(&*upper);
    }
    let digest = md5.finalize();
    let mut last = [0u8; 4];
    last.copy_from_slice(&digest[12..16]);
    i32::from_be_bytes(last).unsigned_abs()
}

/// The index, into a site's server list, of the server responsible for `handle`
/// (the handle as sent in the request). A site without servers yields 0.
pub fn server_index(handle: &[u8], option: HashOption, server_count: usize) -> usize {
    handle_hash(handle, option) as usize % server_count.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Digest §7: handle, by handle (2), by prefix (0), by suffix (1), by-handle mod 4.
    const VECTORS: [(&str, u32, u32, u32, usize); 4] = [
        ("0.NA/10", 324_503_958, 36_223_079, 781_981_664, 2),
        ("10.1000/1", 1_515_935_840, 2_091_615_925, 1_869_972_635, 0),
        ("0.NA/20.1000", 1_794_965_820, 36_223_079, 1_205_827_564, 0),
        ("10.1000/ABC", 205_920_229, 2_091_615_925, 891_676_978, 1),
    ];

    #[test]
    fn hashes_match_digest_vectors() {
        for (handle, whole, prefix, suffix, mod4) in VECTORS {
            let h = handle.as_bytes();
            assert_eq!(handle_hash(h, HashOption::ByHandle), whole, "{handle}");
            assert_eq!(handle_hash(h, HashOption::ByPrefix), prefix, "{handle}");
            assert_eq!(handle_hash(h, HashOption::BySuffix), suffix, "{handle}");
            assert_eq!(server_index(h, HashOption::ByHandle, 4), mod4, "{handle}");
        }
    }

    #[test]
    fn only_ascii_letters_are_upper_cased() {
        let by = HashOption::ByHandle;
        assert_eq!(
            handle_hash(b"10.1000/abc", by),
            handle_hash(b"10.1000/ABC", by)
        );
        let lower = "10.1000/é".as_bytes();
        assert_ne!(
            handle_hash(lower, by),
            handle_hash("10.1000/É".as_bytes(), by)
        );
    }

    #[test]
    fn a_handle_longer_than_a_block_hashes_whole() {
        let lower = format!("10.1000/{}", "abcdefghij".repeat(20));
        let digest = Md5::digest(lower.to_ascii_uppercase().as_bytes());
        let last = <[u8; 4]>::try_from(&digest[12..16]).unwrap();
        let whole = i32::from_be_bytes(last).unsigned_abs();
        assert_eq!(handle_hash(lower.as_bytes(), HashOption::ByHandle), whole);
    }

    #[test]
    fn slashless_handles_hash_as_zero_na_prefix() {
        let prefix = HashOption::ByPrefix;
        assert_eq!(handle_hash(b"10", prefix), handle_hash(b"0.NA/10", prefix));
        let suffix = HashOption::BySuffix;
        assert_eq!(
            handle_hash(b"10", suffix),
            handle_hash(b"10", HashOption::ByHandle)
        );
    }

    #[test]
    fn index_stays_in_range() {
        assert_eq!(server_index(b"10.1000/1", HashOption::ByHandle, 1), 0);
        assert_eq!(server_index(b"10.1000/1", HashOption::ByHandle, 0), 0);
        assert!(server_index(b"0.NA/10", HashOption::BySuffix, 3) < 3);
    }
}
