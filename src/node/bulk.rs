//! Bulk import and export over the peer port, the node's side: what `hdl import` and
//! `hdl export` ask of a member of each replica set.
//!
//! Owns [`BulkCall`], [`SessionRequest`], [`BulkAnswer`] (carried in [`super::calls::NodeCall::Bulk`] and
//! [`super::calls::NodeAnswer::Bulk`]), [`SessionToken`] and [`BulkDesk`], which keeps
//! the sessions and the exports under way.
//!
//! Why the peer port: an export reads one snapshot of a set's store, non-public values
//! included, across many pages, and an import puts thousands of handles into one log
//! entry; neither fits a Handle protocol or HTTP request. The peer port carries large
//! frames (64 MiB), each authenticated, and is reachable only with the cluster secret.
//! On top of it the caller proves an administrator's identity as over the Handle
//! protocol: it asks for a challenge ([`BulkCall::Challenge`]), answers it with the
//! administrator's key, and the node checks the answer with its service
//! ([`crate::service::Handler::verify_answer`]); the session it opens names that
//! administrator, and every import and export in it is authorised for them (module
//! `service::bulk`).
//!
//! Bounds: at most [`CHALLENGES`] challenges wait (each for [`CHALLENGE_LIFETIME`]), at
//! most [`SESSIONS`] sessions are kept (the least recently used goes first; one unused
//! for [`IDLE`] is forgotten), at most [`CURSORS`] exports are under way (each holds a
//! read snapshot of the store; one left for [`IDLE`] is dropped, the oldest goes when
//! a new one needs room).

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::auth::{ChallengeAnswer, ChallengeId};
use crate::replication::SetId;
use crate::routing::LocalSet;
use crate::service::{
    Caller, Error, ExportCursor, ExportError, ExportPage, Handler, ImportBatch, ImportReport,
    Operation, Refusal, session_challenge,
};

/// Challenges waiting for their answer.
pub const CHALLENGES: usize = 64;
/// How long a challenge waits for its answer.
pub const CHALLENGE_LIFETIME: Duration = Duration::from_secs(20);
/// Sessions kept at once.
pub const SESSIONS: usize = 64;
/// Exports under way at once.
pub const CURSORS: usize = 16;
/// How long an unused session or export is kept.
pub const IDLE: Duration = Duration::from_secs(300);
/// The most handles an export page holds.
pub const MAX_PAGE: u32 = 10_000;

/// Names an open session: 32 random octets the node chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SessionToken(pub [u8; 32]);

/// What `hdl import` and `hdl export` ask of a node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum BulkCall {
    /// A challenge to open a session with.
    Challenge,
    /// Open a session as the administrator whose answer this is.
    Authenticate {
        /// The challenge answered.
        challenge: u32,
        /// The answer (an OC_CHALLENGE_RESPONSE body).
        answer: Vec<u8>,
    },
    /// A request in an open session.
    InSession {
        /// The session.
        session: SessionToken,
        /// What it asks.
        request: SessionRequest,
    },
}

/// What a session may ask.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum SessionRequest {
    /// Import a batch into `set` (a member of another set answers
    /// [`BulkAnswer::NotHere`]).
    Import {
        /// The set the caller means.
        set: SetId,
        /// The handles.
        batch: ImportBatch,
    },
    /// Carry out administrative operations in `set`, in order (a GenericBatch file's
    /// ADD, MODIFY, REMOVE and DELETE blocks).
    Administer {
        /// The set the caller means.
        set: SetId,
        /// The operations.
        operations: Vec<Operation>,
    },
    /// Start exporting `set`'s handles under `prefix` (all of them when `None`).
    OpenExport {
        /// The set the caller means.
        set: SetId,
        /// The prefix.
        prefix: Option<String>,
    },
    /// The positions in `batch` of the handles `set` holds with other values (after an
    /// import whose tally counted some differing).
    Differing {
        /// The set the caller means.
        set: SetId,
        /// The handles.
        batch: ImportBatch,
    },
    /// The next page of an export this session opened.
    ExportPage {
        /// The export.
        cursor: u64,
        /// The most handles wanted (at most [`MAX_PAGE`]).
        limit: u32,
    },
}

/// The answer to a [`BulkCall`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum BulkAnswer {
    /// A challenge: its id and nonce.
    Challenge {
        /// Its id.
        id: u32,
        /// The nonce to answer.
        nonce: Vec<u8>,
    },
    /// The session opened.
    Session(SessionToken),
    /// What the import did.
    Imported(ImportReport),
    /// The positions of the handles that differ.
    Differing(Vec<u32>),
    /// Each operation's outcome, in order: done, or why not.
    Administered(Vec<Result<(), String>>),
    /// The export started.
    ExportOpened {
        /// Names it in later calls.
        cursor: u64,
    },
    /// A page of an export.
    Page(ExportPage),
    /// The node does not answer for (some of) the handles: it belongs to another set,
    /// or a slot changed hands. The caller reads the cluster map again.
    NotHere(String),
    /// The permissions the batch was checked against changed before it applied:
    /// nothing was written; the caller sends it again.
    Again(String),
    /// The call was refused or failed.
    Refused(String),
}

/// A session: who opened it, and when it was last used.
#[derive(Debug)]
struct Session {
    caller: Caller,
    used: Instant,
}

/// An export under way.
#[derive(Debug)]
struct Export {
    session: SessionToken,
    cursor: ExportCursor,
    used: Instant,
}

/// The sessions and exports of a node's bulk calls.
#[derive(Debug, Default)]
pub struct BulkDesk {
    challenges: Mutex<VecDeque<(crate::auth::Challenge, Instant)>>,
    sessions: Mutex<HashMap<SessionToken, Session>>,
    exports: Mutex<HashMap<u64, Export>>,
}

/// `mutex`, locked; a poisoned one is used as it is (what it guards stays whole).
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `N` random octets from the OS.
pub(super) fn random<const N: usize>() -> Result<[u8; N], String> {
    let mut octets = [0; N];
    getrandom::fill(&mut octets).map_err(|error| format!("no randomness: {error}"))?;
    Ok(octets)
}

impl BulkDesk {
    /// Answers `call` with the node's set `local` (`None`: it belongs to none yet).
    pub async fn answer(&self, local: Option<LocalSet>, call: BulkCall) -> BulkAnswer {
        let outcome = match call {
            BulkCall::Challenge => self.challenge(),
            BulkCall::Authenticate { challenge, answer } => {
                self.authenticate(local, challenge, &answer).await
            }
            BulkCall::InSession { session, request } => match self.caller(session) {
                Ok(caller) => self.serve(local, session, &caller, request).await,
                Err(refused) => Ok(refused),
            },
        };
        outcome.unwrap_or_else(BulkAnswer::Refused)
    }

    /// Answers `request` of `session`, opened by `caller`.
    async fn serve(
        &self,
        local: Option<LocalSet>,
        session: SessionToken,
        caller: &Caller,
        request: SessionRequest,
    ) -> Result<BulkAnswer, String> {
        let Some(local) = local else {
            return Ok(BulkAnswer::NotHere(NO_SET.to_owned()));
        };
        let set = match &request {
            SessionRequest::Import { set, .. }
            | SessionRequest::Differing { set, .. }
            | SessionRequest::Administer { set, .. }
            | SessionRequest::OpenExport { set, .. } => Some(*set),
            SessionRequest::ExportPage { .. } => None,
        };
        if let Some(set) = set.filter(|set| *set != local.id) {
            return Ok(BulkAnswer::NotHere(format!(
                "this node is a member of replica set {}, not {}",
                local.id.0, set.0
            )));
        }
        match request {
            SessionRequest::Import { batch, .. } => match local.service.import(caller, batch).await
            {
                Ok(report) => Ok(BulkAnswer::Imported(report)),
                Err(error) => Ok(refusal(error)),
            },
            SessionRequest::Differing { batch, .. } => match local.service.differing(&batch) {
                Ok(positions) => Ok(BulkAnswer::Differing(positions)),
                Err(error) => Ok(refusal(error)),
            },
            SessionRequest::Administer { operations, .. } => {
                Ok(administer(&local, caller, operations).await)
            }
            SessionRequest::OpenExport { prefix, .. } => {
                self.open_export(&local, session, caller, prefix).await
            }
            SessionRequest::ExportPage { cursor, limit } => {
                self.page(&local, session, caller, cursor, limit).await
            }
        }
    }

    fn challenge(&self) -> Result<BulkAnswer, String> {
        let id = u32::from_be_bytes(random()?);
        let now = Instant::now();
        let challenge = session_challenge(ChallengeId(id), now).map_err(|e| e.to_string())?;
        let nonce = challenge.body.nonce.clone();
        let mut challenges = lock(&self.challenges);
        challenges.retain(|(_, issued)| now.duration_since(*issued) < CHALLENGE_LIFETIME);
        if challenges.len() >= CHALLENGES {
            challenges.pop_front();
        }
        challenges.push_back((challenge, now));
        Ok(BulkAnswer::Challenge { id, nonce })
    }

    async fn authenticate(
        &self,
        local: Option<LocalSet>,
        id: u32,
        answer: &[u8],
    ) -> Result<BulkAnswer, String> {
        let Some(local) = local else {
            return Ok(BulkAnswer::NotHere(NO_SET.to_owned()));
        };
        let challenge = {
            let mut challenges = lock(&self.challenges);
            let at = challenges
                .iter()
                .position(|(challenge, issued)| {
                    challenge.id.0 == id && issued.elapsed() < CHALLENGE_LIFETIME
                })
                .ok_or("no such challenge (answered already, or too late)")?;
            challenges.remove(at).map(|(challenge, _)| challenge)
        };
        let challenge = challenge.ok_or("no such challenge")?;
        let answer = ChallengeAnswer::decode(answer).map_err(|e| e.to_string())?;
        let identity = local
            .service
            .verify_answer(&challenge, &answer)
            .await
            .map_err(|error| format!("authentication failed: {error}"))?;
        let token = SessionToken(random()?);
        let mut sessions = lock(&self.sessions);
        sessions.retain(|_, session| session.used.elapsed() < IDLE);
        if sessions.len() >= SESSIONS {
            let oldest = sessions.iter().min_by_key(|(_, s)| s.used).map(|(t, _)| *t);
            if let Some(token) = oldest {
                sessions.remove(&token);
            }
        }
        let caller = Caller::Administrator { identity };
        let used = Instant::now();
        sessions.insert(token, Session { caller, used });
        Ok(BulkAnswer::Session(token))
    }

    /// Who opened `session`, which is now used again.
    fn caller(&self, session: SessionToken) -> Result<Caller, BulkAnswer> {
        let mut sessions = lock(&self.sessions);
        match sessions.get_mut(&session) {
            Some(open) if open.used.elapsed() < IDLE => {
                open.used = Instant::now();
                Ok(open.caller.clone())
            }
            _ => Err(BulkAnswer::Refused(
                "no such session (unused for too long, or the node restarted): authenticate again"
                    .to_owned(),
            )),
        }
    }

    async fn open_export(
        &self,
        local: &LocalSet,
        session: SessionToken,
        caller: &Caller,
        prefix: Option<String>,
    ) -> Result<BulkAnswer, String> {
        let cursor = match local.service.open_export(caller, prefix.as_deref()).await {
            Ok(cursor) => cursor,
            Err(error) => return Ok(export_refusal(error)),
        };
        let id = u64::from_be_bytes(random()?);
        let mut exports = lock(&self.exports);
        exports.retain(|_, export| export.used.elapsed() < IDLE);
        if exports.len() >= CURSORS {
            let oldest = exports
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(id, _)| *id);
            oldest.map(|id| exports.remove(&id));
        }
        let used = Instant::now();
        exports.insert(
            id,
            Export {
                session,
                cursor,
                used,
            },
        );
        Ok(BulkAnswer::ExportOpened { cursor: id })
    }

    async fn page(
        &self,
        local: &LocalSet,
        session: SessionToken,
        caller: &Caller,
        id: u64,
        limit: u32,
    ) -> Result<BulkAnswer, String> {
        let taken = lock(&self.exports).remove(&id);
        let mut export = match taken {
            Some(export) if export.session == session => export,
            _ => return Err("no such export (finished, or idle for too long)".to_owned()),
        };
        let limit = limit.clamp(1, MAX_PAGE) as usize;
        let page = local
            .service
            .export_page(caller, &mut export.cursor, limit)
            .await;
        match page {
            Ok(page) => {
                if !page.done {
                    export.used = Instant::now();
                    lock(&self.exports).insert(id, export);
                }
                Ok(BulkAnswer::Page(page))
            }
            Err(error) => Ok(export_refusal(error)),
        }
    }
}

/// What a node that belongs to no set answers.
const NO_SET: &str = "this node belongs to no replica set yet";

/// Carries out `operations` in order as `caller`; each one's outcome.
async fn administer(local: &LocalSet, caller: &Caller, operations: Vec<Operation>) -> BulkAnswer {
    let mut outcomes = Vec::with_capacity(operations.len());
    for operation in operations {
        let outcome = local.service.administer(caller, operation).await;
        outcomes.push(outcome.map(drop).map_err(|error| error.to_string()));
    }
    BulkAnswer::Administered(outcomes)
}

/// The answer to a service error: [`BulkAnswer::NotHere`] for a handle this set does
/// not answer for, else [`BulkAnswer::Refused`].
fn refusal(error: Error) -> BulkAnswer {
    match error {
        Error::NotHere(_) | Error::NoSet | Error::Refused(Refusal::NotHere(_)) => {
            BulkAnswer::NotHere(error.to_string())
        }
        Error::Refused(Refusal::AuthorityChanged) => BulkAnswer::Again(error.to_string()),
        other => BulkAnswer::Refused(other.to_string()),
    }
}

fn export_refusal(error: ExportError) -> BulkAnswer {
    match error {
        ExportError::Service(error) => refusal(error),
        handle @ ExportError::Handle { .. } => BulkAnswer::Refused(handle.to_string()),
    }
}
