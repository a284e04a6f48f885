//! What the log's segment files hold, in octets: a head, then records. Sans-IO: octets
//! in, records out, and records in, octets out; the files are module `segment`'s.
//!
//! A segment begins with [`MAGIC`] and the log format version (u64, little-endian).
//! Each record is its body's length (u32 LE), the CRC-32 of the body (u32 LE), then the
//! body: a kind octet and the kind's fields (integers little-endian):
//! - 1, an entry: its index (u64), then its bytes;
//! - 2, the vote: its bytes;
//! - 3, the committed position: its bytes;
//! - 4, a purge: the last purged index (u64), then the position's bytes;
//! - 5, a truncation: the first index removed (u64); every entry from it on is gone.
//!
//! A record is whole or it is not there: a crash during an append leaves a short or
//! mismatching record at the end of the last segment, which [`decode`] reports as
//! [`Decoded::Damaged`].

/// The first octets of every segment file.
pub const MAGIC: [u8; 8] = *b"hdl-log\n";

/// Octets of a segment's head: [`MAGIC`] and the format version.
pub const HEAD_LEN: usize = MAGIC.len() + 8;

/// Octets before a record's body: its length and its CRC.
pub const RECORD_HEAD_LEN: usize = 8;

/// Where an entry's bytes start in its record: after the record's head, the kind
/// octet and the index.
pub const ENTRY_BYTES_AT: usize = RECORD_HEAD_LEN + 1 + 8;

/// The largest body a record may have. An entry larger than this cannot be stored;
/// a length above it in a file is damage.
pub const MAX_BODY: usize = 1 << 30;

const ENTRY: u8 = 1;
const VOTE: u8 = 2;
const COMMITTED: u8 = 3;
const PURGED: u8 = 4;
const TRUNCATED: u8 = 5;

/// One record of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    /// A log entry: its index and its opaque bytes.
    Entry {
        /// The entry's log index.
        index: u64,
        /// The entry as the replication layer encoded it.
        bytes: &'a [u8],
    },
    /// The vote, replacing any before it.
    Vote(&'a [u8]),
    /// The committed position, replacing any before it.
    Committed(&'a [u8]),
    /// Every entry up to `index` is gone; `bytes` describe that position.
    Purged {
        /// The last index purged.
        index: u64,
        /// The caller's description of the position.
        bytes: &'a [u8],
    },
    /// Every entry from `index` on is gone.
    Truncated {
        /// The first index removed.
        index: u64,
    },
}

/// What [`decode`] found at the start of its input.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A whole record, and the octets it took.
    Record(Record<'a>, usize),
    /// The input is empty: the segment ends here.
    End,
    /// The record's head says its body is longer than the input holds: read more (a
    /// reader holding less than the whole file), or the record was cut short.
    Short {
        /// Octets the whole record takes.
        needed: usize,
    },
    /// Not a record: a cut or damaged one.
    Damaged(&'static str),
}

/// The head of a segment of format `version`.
pub fn segment_head(version: u64) -> [u8; HEAD_LEN] {
    let mut head = [0; HEAD_LEN];
    head[..MAGIC.len()].copy_from_slice(&MAGIC);
    head[MAGIC.len()..].copy_from_slice(&version.to_le_bytes());
    head
}

/// The format version a segment's head records; `None` when it is not a segment head.
pub fn head_version(head: &[u8]) -> Option<u64> {
    let (magic, version) = head.get(..HEAD_LEN)?.split_at(MAGIC.len());
    (magic == MAGIC).then(|| u64_at(version))
}

impl Record<'_> {
    /// Octets the record's body takes.
    fn body_len(&self) -> usize {
        1 + match self {
            Record::Entry { bytes, .. } | Record::Purged { bytes, .. } => 8 + bytes.len(),
            Record::Vote(bytes) | Record::Committed(bytes) => bytes.len(),
            Record::Truncated { .. } => 8,
        }
    }

    /// Octets the whole record takes in a file.
    pub fn encoded_len(&self) -> usize {
        RECORD_HEAD_LEN + self.body_len()
    }

    /// Appends the record to `out`; `None` (nothing appended) when its body is larger
    /// than [`MAX_BODY`].
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Option<()> {
        let body_len = self.body_len();
        if body_len > MAX_BODY {
            return None;
        }
        let start = out.len();
        out.extend_from_slice(&u32::try_from(body_len).ok()?.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        let body = out.len();
        match *self {
            Record::Entry { index, bytes } => put(out, ENTRY, Some(index), bytes),
            Record::Vote(bytes) => put(out, VOTE, None, bytes),
            Record::Committed(bytes) => put(out, COMMITTED, None, bytes),
            Record::Purged { index, bytes } => put(out, PURGED, Some(index), bytes),
            Record::Truncated { index } => put(out, TRUNCATED, Some(index), &[]),
        }
        let crc = crc32fast::hash(&out[body..]);
        out[start + 4..body].copy_from_slice(&crc.to_le_bytes());
        Some(())
    }
}

fn put(out: &mut Vec<u8>, kind: u8, index: Option<u64>, bytes: &[u8]) {
    out.push(kind);
    if let Some(index) = index {
        out.extend_from_slice(&index.to_le_bytes());
    }
    out.extend_from_slice(bytes);
}

/// The record at the start of `input`.
pub fn decode(input: &[u8]) -> Decoded<'_> {
    if input.is_empty() {
        return Decoded::End;
    }
    let Some(head) = input.get(..RECORD_HEAD_LEN) else {
        return Decoded::Short {
            needed: RECORD_HEAD_LEN,
        };
    };
    let body_len = u32_at(&head[..4]) as usize;
    if body_len == 0 || body_len > MAX_BODY {
        return Decoded::Damaged("impossible record length");
    }
    let needed = RECORD_HEAD_LEN + body_len;
    let Some(body) = input.get(RECORD_HEAD_LEN..needed) else {
        return Decoded::Short { needed };
    };
    if crc32fast::hash(body) != u32_at(&head[4..]) {
        return Decoded::Damaged("record checksum mismatch");
    }
    match decode_body(body) {
        Some(record) => Decoded::Record(record, needed),
        None => Decoded::Damaged("unknown record kind or short fields"),
    }
}

fn decode_body(body: &[u8]) -> Option<Record<'_>> {
    let (&kind, fields) = body.split_first()?;
    let indexed = || fields.get(..8).map(|index| (u64_at(index), &fields[8..]));
    Some(match kind {
        ENTRY => {
            let (index, bytes) = indexed()?;
            Record::Entry { index, bytes }
        }
        VOTE => Record::Vote(fields),
        COMMITTED => Record::Committed(fields),
        PURGED => {
            let (index, bytes) = indexed()?;
            Record::Purged { index, bytes }
        }
        TRUNCATED if fields.len() == 8 => Record::Truncated {
            index: u64_at(fields),
        },
        _ => return None,
    })
}

fn u32_at(octets: &[u8]) -> u32 {
    let mut word = [0; 4];
    word.copy_from_slice(&octets[..4]);
    u32::from_le_bytes(word)
}

fn u64_at(octets: &[u8]) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&octets[..8]);
    u64::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(records: &[Record<'_>]) -> Vec<u8> {
        let mut out = Vec::new();
        for record in records {
            record.encode_into(&mut out).unwrap();
        }
        out
    }

    const SAMPLES: [Record<'static>; 6] = [
        Record::Entry {
            index: 7,
            bytes: b"seven",
        },
        Record::Entry {
            index: 8,
            bytes: b"",
        },
        Record::Vote(b"vote"),
        Record::Committed(b""),
        Record::Purged {
            index: u64::MAX,
            bytes: b"p",
        },
        Record::Truncated { index: 3 },
    ];

    #[test]
    fn every_kind_decodes_to_what_was_encoded() {
        let octets = encoded(&SAMPLES);
        let mut rest = octets.as_slice();
        for expected in SAMPLES {
            let Decoded::Record(record, len) = decode(rest) else {
                panic!("{expected:?} did not decode");
            };
            assert_eq!(record, expected);
            assert_eq!(len, expected.encoded_len());
            rest = &rest[len..];
        }
        assert_eq!(decode(rest), Decoded::End);
    }

    #[test]
    fn a_cut_record_is_short_at_every_length_and_a_flipped_octet_is_damage() {
        let octets = encoded(&SAMPLES[..1]);
        for cut in 1..octets.len() {
            assert!(
                matches!(decode(&octets[..cut]), Decoded::Short { needed } if needed > cut),
                "cut at {cut}"
            );
        }
        for flipped in 0..octets.len() {
            let mut damaged = octets.clone();
            damaged[flipped] ^= 0x40;
            assert!(
                !matches!(decode(&damaged), Decoded::Record(..)),
                "octet {flipped} flipped still decodes"
            );
        }
    }

    #[test]
    fn zeroes_are_damage_not_records() {
        assert!(matches!(decode(&[0; 64]), Decoded::Damaged(_)));
    }

    #[test]
    fn a_segment_head_names_its_version() {
        assert_eq!(head_version(&segment_head(3)), Some(3));
        assert_eq!(head_version(b"hdl-log\nxx"), None);
        assert_eq!(head_version(&[0; HEAD_LEN]), None);
    }
}
