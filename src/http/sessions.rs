//! The sessions of the HTTP API (`/api/sessions`, `HANDLE-NET-REFERENCE.md` §1.2): a
//! session id, the nonce a client answers next, and the identity once it has.
//!
//! Owns [`SessionTable`], [`SessionId`], [`SessionView`] and [`SessionRefusal`]. Pure
//! apart from `getrandom`: no sockets, and time is passed in. The bounded, expiring
//! table is the one both edges share ([`crate::auth::session_table`]). The HTTP edge
//! holds the table behind a mutex and does no slow work (signature checks) while
//! holding it.
//!
//! Invariants: the table never holds more than its capacity (when full, expired
//! sessions are purged, then the oldest unauthenticated one is dropped, so anonymous
//! challenges cannot crowd out authenticated clients; only a table full of
//! authenticated sessions refuses); a session is gone once its lifetime from opening
//! has passed; each nonce is handed out for one answer only ([`SessionTable::take_nonce`]
//! replaces it before the answer is checked, so a replay finds another nonce).

use std::net::IpAddr;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::auth::Identity;
use crate::auth::session_table::{self, SessionEntry, TableRefusal};

/// Octets of a session nonce (as J9's challenges).
const NONCE_LEN: usize = 16;
/// Random octets of a session id (written as hex).
const ID_LEN: usize = 16;

/// Why a session could not be opened or found.
#[derive(Debug, Error)]
pub enum SessionRefusal {
    /// Every slot holds a live authenticated session.
    #[error("{capacity} sessions are already open")]
    Full {
        /// The table's capacity.
        capacity: usize,
    },
    /// No such session: never opened, deleted, or expired.
    #[error("unknown or expired session")]
    Unknown,
    /// The operating system's randomness failed.
    #[error("no randomness for a session: {0}")]
    Random(getrandom::Error),
}

/// A session id: 32 lower-case hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionId(pub String);

/// What a client may learn about its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionView {
    /// Its id.
    pub id: SessionId,
    /// The nonce to answer next.
    pub nonce: Vec<u8>,
    /// Who authenticated it, if anyone has.
    pub identity: Option<Identity>,
}

#[derive(Debug)]
struct Session {
    nonce: Vec<u8>,
    identity: Option<Identity>,
}

impl SessionEntry for Session {
    fn authenticated(&self) -> bool {
        self.identity.is_some()
    }
}

impl From<TableRefusal> for SessionRefusal {
    fn from(refusal: TableRefusal) -> Self {
        match refusal {
            TableRefusal::Unknown | TableRefusal::Expired => SessionRefusal::Unknown,
            TableRefusal::Full { capacity } => SessionRefusal::Full { capacity },
        }
    }
}

/// The open sessions of one node.
#[derive(Debug)]
pub struct SessionTable {
    sessions: session_table::SessionTable<SessionId, Session>,
}

impl SessionTable {
    /// A table of at most `capacity` sessions, each living `lifetime` from its opening.
    pub fn new(capacity: usize, lifetime: Duration) -> Self {
        SessionTable {
            sessions: session_table::SessionTable::new(capacity, lifetime),
        }
    }

    /// How many sessions are held (expired ones included until purged).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Opens an unauthenticated session for `source` at `now`.
    pub fn open(&mut self, source: IpAddr, now: Instant) -> Result<SessionView, SessionRefusal> {
        let id = SessionId(hex(&random(ID_LEN)?));
        let session = Session {
            nonce: random(NONCE_LEN)?,
            identity: None,
        };
        let view = view(&id, &session);
        self.sessions.open(id, session, source, None, now)?;
        Ok(view)
    }

    /// The session `id`, if it is open and has not expired at `now`.
    pub fn view(&mut self, id: &SessionId, now: Instant) -> Result<SessionView, SessionRefusal> {
        let session = self.live(id, now)?;
        Ok(view(id, session))
    }

    /// The nonce of session `id`, which an answer is about to be checked against; the
    /// session gets a fresh one at once, so the nonce serves this answer only.
    pub fn take_nonce(&mut self, id: &SessionId, now: Instant) -> Result<Vec<u8>, SessionRefusal> {
        let fresh = random(NONCE_LEN)?;
        let session = self.live(id, now)?;
        Ok(std::mem::replace(&mut session.nonce, fresh))
    }

    /// Marks session `id` authenticated as `identity` (replacing any earlier one).
    pub fn authenticate(
        &mut self,
        id: &SessionId,
        identity: Identity,
        now: Instant,
    ) -> Result<SessionView, SessionRefusal> {
        let session = self.live(id, now)?;
        session.identity = Some(identity);
        Ok(view(id, session))
    }

    /// Closes session `id`; whether it was open.
    pub fn close(&mut self, id: &SessionId, now: Instant) -> bool {
        self.sessions.close(id, now)
    }

    /// The session, dropping it if it has expired.
    fn live(&mut self, id: &SessionId, now: Instant) -> Result<&mut Session, SessionRefusal> {
        Ok(self.sessions.get_mut(id, now)?)
    }
}

fn view(id: &SessionId, session: &Session) -> SessionView {
    SessionView {
        id: id.clone(),
        nonce: session.nonce.clone(),
        identity: session.identity.clone(),
    }
}

fn random(len: usize) -> Result<Vec<u8>, SessionRefusal> {
    let mut octets = vec![0; len];
    getrandom::fill(&mut octets).map_err(SessionRefusal::Random)?;
    Ok(octets)
}

fn hex(octets: &[u8]) -> String {
    octets.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    const LIFETIME: Duration = Duration::from_secs(60);

    fn admin() -> Identity {
        Identity {
            handle: "0.NA/ADMIN".into(),
            index: 300,
        }
    }

    #[test]
    fn a_session_lives_until_its_lifetime_or_deletion() {
        let mut table = SessionTable::new(10, LIFETIME);
        let start = Instant::now();
        let opened = table.open(HERE, start).unwrap();
        assert_eq!(opened.id.0.len(), 2 * ID_LEN);
        assert_eq!(opened.identity, None);
        let later = start + LIFETIME - Duration::from_secs(1);
        assert_eq!(table.view(&opened.id, later).unwrap(), opened);
        assert!(matches!(
            table.view(&opened.id, start + LIFETIME),
            Err(SessionRefusal::Unknown)
        ));
        assert_eq!(table.len(), 0, "an expired session is dropped");
        let other = table.open(HERE, start).unwrap();
        assert!(table.close(&other.id, start));
        assert!(!table.close(&other.id, start));
        assert!(matches!(
            table.view(&other.id, start),
            Err(SessionRefusal::Unknown)
        ));
    }

    #[test]
    fn each_nonce_is_handed_out_for_one_answer() {
        let mut table = SessionTable::new(10, LIFETIME);
        let now = Instant::now();
        let opened = table.open(HERE, now).unwrap();
        let first = table.take_nonce(&opened.id, now).unwrap();
        assert_eq!(first, opened.nonce);
        let second = table.take_nonce(&opened.id, now).unwrap();
        assert_ne!(second, first, "a replay must meet another nonce");
        let authenticated = table.authenticate(&opened.id, admin(), now).unwrap();
        assert_eq!(authenticated.identity, Some(admin()));
        assert_ne!(authenticated.nonce, second);
    }

    #[test]
    fn a_full_table_drops_unauthenticated_sessions_before_refusing() {
        let mut table = SessionTable::new(2, LIFETIME);
        let start = Instant::now();
        let a = table.open(HERE, start).unwrap();
        let b = table.open(HERE, start + Duration::from_secs(1)).unwrap();
        let c = table.open(HERE, start + Duration::from_secs(2)).unwrap();
        assert!(table.view(&a.id, start).is_err(), "the oldest pending goes");
        assert_eq!(table.len(), 2);
        table.authenticate(&b.id, admin(), start).unwrap();
        table.authenticate(&c.id, admin(), start).unwrap();
        assert!(matches!(
            table.open(HERE, start + Duration::from_secs(3)),
            Err(SessionRefusal::Full { capacity: 2 })
        ));
        table
            .open(HERE, start + LIFETIME + Duration::from_secs(2))
            .unwrap();
        assert_eq!(table.len(), 1, "expired sessions were purged");
    }
}
