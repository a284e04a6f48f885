//! The Handle protocol sessions a node holds (digest §3.8, §8.6).
//!
//! Owns [`SessionTable`], [`Admitted`] and [`SessionRefusal`]. Pure bookkeeping: the
//! clock is passed in, keys and MACs come from [`crate::auth::session`], and the
//! bounded, expiring table is the one both edges share
//! ([`crate::auth::session_table`]). Knows nothing of sockets or of what a request
//! asks for.
//!
//! Invariants: the table never holds more than its capacity (a full table first drops
//! expired sessions, then the oldest session nobody authenticated in, and refuses a
//! new one only when every session is authenticated); a session lives no longer than
//! the configured lifetime nor than its client asked; an expired session is refused
//! and dropped; a session message is admitted only with a valid `HS_MAC` and a
//! counter never admitted before in that session, and a refused message changes
//! nothing.
//!
//! Counters: a client with several requests in flight (on several connections) may
//! have them arrive out of order, so, as IPsec does against replays (RFC 4303
//! §3.4.3), a session remembers its highest counter and which of the
//! [`REPLAY_WINDOW`] counters below it were seen: a counter above the highest, or
//! within the window and unseen, is admitted once; anything older is refused.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::auth::challenge::MAX_COUNTED_ID;
use crate::auth::session_table::{self, SessionEntry, TableRefusal};
use crate::auth::{Identity, SessionError, SessionKey, verify_session_mac};
use crate::codec::{Credential, Envelope};

/// How many random ids are tried before a setup is refused (a nearly full id space).
const ID_ATTEMPTS: usize = 16;
/// Session ids are drawn at random above the ids challenges count up to (so a
/// challenge inside a session can carry the session's id) and below 2³¹: J9 reads the
/// id as a Java `int` and takes a session id that is not positive for none.
const SESSION_IDS: std::ops::RangeInclusive<u32> = MAX_COUNTED_ID + 1..=0x7FFF_FFFF;

/// How many counters below the highest admitted one may still arrive late.
pub const REPLAY_WINDOW: u32 = 128;

/// Why a session message or setup was refused.
#[derive(Debug, Error)]
pub enum SessionRefusal {
    /// No session has this id (never opened, terminated or dropped).
    #[error("no session {id}; open a new one")]
    Unknown {
        /// The envelope SessionId.
        id: u32,
    },
    /// The session outlived its lifetime (it is dropped now).
    #[error("session {id} has expired; open a new one")]
    Expired {
        /// The envelope SessionId.
        id: u32,
    },
    /// The table is full of live, authenticated sessions.
    #[error("{capacity} sessions are open; try again later")]
    Full {
        /// The table's capacity.
        capacity: usize,
    },
    /// The message's MAC is missing, of another kind or wrong.
    #[error("session message refused: {0}")]
    Mac(SessionError),
    /// The message's counter was admitted before, or is too far below the highest
    /// one admitted to tell: a replay.
    #[error(
        "session counter {counter} was seen before or is older than the {REPLAY_WINDOW} \
         below {last}: replayed"
    )]
    Replay {
        /// The counter sent.
        counter: u32,
        /// The highest counter admitted so far.
        last: u32,
    },
}

/// A session message that passed its checks.
#[derive(Debug, Clone)]
pub struct Admitted {
    /// Who the session was authenticated as; `None` for an anonymous session.
    pub identity: Option<Identity>,
    /// The key, to MAC the response with.
    pub key: SessionKey,
    /// The message's session counter.
    pub counter: u32,
}

#[derive(Debug)]
struct Session {
    key: SessionKey,
    identity: Option<Identity>,
    counters: SeenCounters,
}

impl SessionEntry for Session {
    fn authenticated(&self) -> bool {
        self.identity.is_some()
    }
}

impl SessionRefusal {
    /// The refusal of a table look-up of session `id`.
    fn of_table(refusal: TableRefusal, id: u32) -> Self {
        match refusal {
            TableRefusal::Unknown => SessionRefusal::Unknown { id },
            TableRefusal::Expired => SessionRefusal::Expired { id },
            TableRefusal::Full { capacity } => SessionRefusal::Full { capacity },
        }
    }
}

/// The counters a session has admitted: the highest, and which of the
/// [`REPLAY_WINDOW`] below it (bit `n` of `below`: counter `highest - 1 - n`).
#[derive(Debug, Default)]
struct SeenCounters {
    highest: Option<u32>,
    below: u128,
}

impl SeenCounters {
    /// Whether `counter` may be admitted now.
    fn check(&self, counter: u32) -> Result<(), SessionRefusal> {
        let Some(highest) = self.highest else {
            return Ok(());
        };
        let replay = || SessionRefusal::Replay {
            counter,
            last: highest,
        };
        if counter > highest {
            return Ok(());
        }
        let behind = highest - counter;
        if behind == 0 || behind > REPLAY_WINDOW {
            return Err(replay());
        }
        if self.below & (1 << (behind - 1)) != 0 {
            return Err(replay());
        }
        Ok(())
    }

    /// Records `counter`, which [`SeenCounters::check`] allowed.
    fn record(&mut self, counter: u32) {
        match self.highest {
            Some(highest) if counter <= highest => {
                self.below |= 1 << (highest - counter - 1);
            }
            Some(highest) => {
                // The old highest becomes bit `ahead - 1`; shifted past the window,
                // a bit is forgotten.
                let ahead = counter - highest;
                let shifted = self.below.checked_shl(ahead).unwrap_or(0);
                let old_highest = 1u128.checked_shl(ahead - 1).unwrap_or(0);
                self.below = shifted | old_highest;
                self.highest = Some(counter);
            }
            None => self.highest = Some(counter),
        }
    }
}

/// The open sessions of a node.
#[derive(Debug)]
pub struct SessionTable {
    sessions: session_table::SessionTable<u32, Session>,
}

impl SessionTable {
    /// An empty table of at most `capacity` sessions living at most `lifetime`.
    pub fn new(capacity: usize, lifetime: Duration) -> Self {
        SessionTable {
            sessions: session_table::SessionTable::new(capacity, lifetime),
        }
    }

    /// Opens an anonymous session with `key` for `source`, living the shorter of the table's
    /// lifetime and `requested_secs` (0: the table's); its id is fresh and random. It
    /// belongs to nobody until [`SessionTable::authenticate`].
    pub fn open(
        &mut self,
        key: SessionKey,
        source: IpAddr,
        requested_secs: u32,
        now: Instant,
    ) -> Result<u32, SessionRefusal> {
        let id = self.free_id()?;
        let requested = (requested_secs != 0).then(|| Duration::from_secs(requested_secs.into()));
        let session = Session {
            key,
            identity: None,
            counters: SeenCounters::default(),
        };
        self.sessions
            .open(id, session, source, requested, now)
            .map_err(|refusal| SessionRefusal::of_table(refusal, id))?;
        Ok(id)
    }

    fn free_id(&self) -> Result<u32, SessionRefusal> {
        (0..ID_ATTEMPTS)
            .map(|_| rand::random_range(SESSION_IDS))
            .find(|id| !self.sessions.contains(id))
            .ok_or(SessionRefusal::Full {
                capacity: self.sessions.capacity(),
            })
    }

    /// Checks a message of session `envelope.session_id` whose header and body are
    /// `raw`: the session is live, the MAC verifies, the counter is new. Only then is
    /// the counter recorded.
    pub fn admit(
        &mut self,
        envelope: &Envelope,
        credential: Option<&Credential>,
        raw: &[u8],
        now: Instant,
    ) -> Result<Admitted, SessionRefusal> {
        let id = envelope.session_id;
        let session = self
            .sessions
            .get_mut(&id, now)
            .map_err(|refusal| SessionRefusal::of_table(refusal, id))?;
        let counter = verify_session_mac(&session.key, envelope, credential, raw)
            .map_err(SessionRefusal::Mac)?;
        session.counters.check(counter)?;
        session.counters.record(counter);
        Ok(Admitted {
            identity: session.identity.clone(),
            key: session.key.clone(),
            counter,
        })
    }

    /// Makes live session `id` belong to `identity`, which answered a challenge sent in
    /// it. A session already belongs to whoever answered first: a later answer (from
    /// another identity, say) never takes it over. Whether it now belongs to `identity`.
    pub fn authenticate(&mut self, id: u32, identity: Identity, now: Instant) -> bool {
        let Ok(session) = self.sessions.get_mut(&id, now) else {
            return false;
        };
        let owner = session.identity.get_or_insert(identity.clone());
        *owner == identity
    }

    /// The key of live session `id` (to open or seal its messages).
    pub fn key(&mut self, id: u32, now: Instant) -> Result<SessionKey, SessionRefusal> {
        self.sessions
            .get_mut(&id, now)
            .map(|session| session.key.clone())
            .map_err(|refusal| SessionRefusal::of_table(refusal, id))
    }

    /// Ends session `id`.
    pub fn terminate(&mut self, id: u32, now: Instant) {
        self.sessions.close(&id, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    use crate::auth::session_credential;
    use crate::codec::ProtocolVersion;

    const RAW: &[u8] = b"header and body";

    fn key() -> SessionKey {
        SessionKey::generate().unwrap()
    }

    fn message(table_key: &SessionKey, id: u32, counter: u32) -> (Envelope, Credential) {
        let envelope = Envelope {
            session_id: id,
            ..Envelope::new(ProtocolVersion::MAX_SUPPORTED, 9)
        };
        let credential = session_credential(table_key, &envelope, counter, RAW).unwrap();
        (envelope, credential)
    }

    fn admin() -> Identity {
        Identity {
            handle: "0.NA/TEST".into(),
            index: 300,
        }
    }

    /// A session of `key` opened and authenticated as [`admin`].
    fn admin_session(
        table: &mut SessionTable,
        key: SessionKey,
        requested: u32,
        now: Instant,
    ) -> Result<u32, SessionRefusal> {
        let id = table.open(key, HERE, requested, now)?;
        assert!(table.authenticate(id, admin(), now));
        Ok(id)
    }

    #[test]
    fn sessions_belong_to_whoever_answered_first_and_ids_are_positive() {
        let now = Instant::now();
        let mut table = SessionTable::new(64, Duration::from_secs(60));
        for _ in 0..32 {
            let id = table.open(key(), HERE, 0, now).unwrap();
            assert!(SESSION_IDS.contains(&id), "{id:#x}");
            assert!(i32::try_from(id).is_ok_and(|id| id > 0));
        }
        let key = key();
        let id = table.open(key.clone(), HERE, 0, now).unwrap();
        let (envelope, first) = message(&key, id, 1);
        assert_eq!(
            table
                .admit(&envelope, Some(&first), RAW, now)
                .unwrap()
                .identity,
            None
        );
        assert!(table.authenticate(id, admin(), now));
        let other = Identity {
            handle: "0.NA/OTHER".into(),
            index: 300,
        };
        assert!(!table.authenticate(id, other, now), "no take-over");
        assert!(table.authenticate(id, admin(), now));
        let (envelope, second) = message(&key, id, 2);
        assert_eq!(
            table
                .admit(&envelope, Some(&second), RAW, now)
                .unwrap()
                .identity,
            Some(admin())
        );
        assert!(!table.authenticate(id ^ 1, admin(), now), "no such session");
    }

    #[test]
    fn counters_must_increase_and_refusals_change_nothing() {
        let now = Instant::now();
        let mut table = SessionTable::new(4, Duration::from_secs(60));
        let key = key();
        let id = admin_session(&mut table, key.clone(), 0, now).unwrap();
        let (envelope, first) = message(&key, id, 1);
        let admitted = table.admit(&envelope, Some(&first), RAW, now).unwrap();
        assert_eq!(admitted.identity, Some(admin()));
        let replay = table.admit(&envelope, Some(&first), RAW, now);
        assert!(matches!(
            replay,
            Err(SessionRefusal::Replay {
                counter: 1,
                last: 1
            })
        ));
        let (_, mut forged) = message(&key, id, 7);
        forged.signature[0] ^= 1;
        let refused = table.admit(&envelope, Some(&forged), RAW, now);
        assert!(matches!(refused, Err(SessionRefusal::Mac(_))));
        let missing = table.admit(&envelope, None, RAW, now);
        assert!(matches!(missing, Err(SessionRefusal::Mac(_))));
        // The forged counter 7 was not recorded: 2 is still new.
        let (_, second) = message(&key, id, 2);
        assert_eq!(
            table
                .admit(&envelope, Some(&second), RAW, now)
                .unwrap()
                .counter,
            2
        );
    }

    #[test]
    fn late_counters_within_the_window_are_admitted_once() {
        let mut seen = SeenCounters::default();
        let mut admit = |counter| seen.check(counter).map(|()| seen.record(counter));
        for counter in [5, 3, 4, 9, 1, 2, 6, 8, 7] {
            admit(counter).unwrap_or_else(|_| panic!("{counter} is new"));
        }
        for counter in 1..=9 {
            assert!(admit(counter).is_err(), "{counter} was seen");
        }
        admit(9 + REPLAY_WINDOW).unwrap();
        assert!(
            admit(9).is_err(),
            "9 is the last counter of the window, seen"
        );
        assert!(admit(8).is_err(), "8 fell out of the window");
        admit(10).unwrap();
        admit(9 + 2 * REPLAY_WINDOW + 5).unwrap();
        assert!(admit(11).is_err(), "too old to tell");
        admit(u32::MAX).unwrap();
        assert!(admit(u32::MAX).is_err());
    }

    #[test]
    fn sessions_expire_at_the_shorter_lifetime_and_are_dropped() {
        let now = Instant::now();
        let mut table = SessionTable::new(4, Duration::from_secs(60));
        let key = key();
        let id = table.open(key.clone(), HERE, 10, now).unwrap();
        let (envelope, credential) = message(&key, id, 1);
        let late = now + Duration::from_secs(10);
        let expired = table.admit(&envelope, Some(&credential), RAW, late);
        assert!(matches!(expired, Err(SessionRefusal::Expired { .. })));
        let gone = table.admit(&envelope, Some(&credential), RAW, now);
        assert!(matches!(gone, Err(SessionRefusal::Unknown { .. })));
        let long = table.open(key.clone(), HERE, u32::MAX, now).unwrap();
        let (envelope, credential) = message(&key, long, 1);
        let after_a_minute = now + Duration::from_secs(60);
        let expired = table.admit(&envelope, Some(&credential), RAW, after_a_minute);
        assert!(matches!(expired, Err(SessionRefusal::Expired { .. })));
    }

    #[test]
    fn a_full_table_drops_expired_sessions_then_refuses() {
        let now = Instant::now();
        let mut table = SessionTable::new(2, Duration::from_secs(60));
        admin_session(&mut table, key(), 1, now).unwrap();
        let kept = admin_session(&mut table, key(), 0, now).unwrap();
        let full = table.open(key(), HERE, 0, now);
        assert!(matches!(full, Err(SessionRefusal::Full { capacity: 2 })));
        let later = now + Duration::from_secs(2);
        admin_session(&mut table, key(), 0, later).unwrap();
        assert_eq!(table.sessions.len(), 2);
        table.terminate(kept, later);
        assert!(!table.sessions.contains(&kept));
    }

    #[test]
    fn a_full_table_makes_room_by_dropping_the_oldest_anonymous_session() {
        let now = Instant::now();
        let mut table = SessionTable::new(2, Duration::from_secs(60));
        let anonymous = table.open(key(), HERE, 0, now).unwrap();
        let admins = admin_session(&mut table, key(), 0, now).unwrap();
        let newer = admin_session(&mut table, key(), 0, now).unwrap();
        assert!(!table.sessions.contains(&anonymous));
        assert!(table.sessions.contains(&admins) && table.sessions.contains(&newer));
    }
}
