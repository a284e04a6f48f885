//! Bulk import and export of whole handles, for administrators (`hdl import`,
//! `hdl export`).
//!
//! Owns [`ImportBatch`], [`ImportReport`], [`ExportCursor`] and the service's side of
//! both. An import batch is checked here (each value validated, each handle within
//! the size bound) and authorised as a create is (module `authorise`): `ADD_HANDLE`
//! (`ADD_DERIVED_PREFIX` for `0.NA/a.b`) on each prefix handle, once per prefix a
//! batch touches, and, when the batch replaces existing handles, `DELETE_HANDLE` on
//! each one that exists; a handle the caller may not write is refused alone. What is
//! left goes into the log as one command ([`HandleCommand::PutHandles`]), guarded by
//! what the permission checks read, so many handles cost one proposal, one append and
//! one store transaction; the state machine decides each handle on the state it lands
//! on: created, unchanged (it holds these very values), replaced (asked for), or left
//! differing. The store is read before the proposal only to find the handles a
//! replacing batch would replace: a first import reads nothing twice.
//!
//! An export reads one snapshot of the store from its start to its end, page by page
//! ([`ExportCursor`]), after a fresh read: every write acknowledged before it began
//! is in it, none after. The caller needs `LIST_HANDLES` on every prefix exported and
//! `READ_VALUE` on every handle holding a value that is not public; the first one
//! refused ends the export ([`ExportError::Handle`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use std::time::Instant;

use crate::auth::permissions::prefix_admin_handle;
use crate::auth::{AuthError, Challenge, ChallengeBody, ChallengeId, Operation as Act};
use crate::clock::unix_now;
use crate::codec::{ProtocolVersion, RequestDigest};
use crate::names::{Handle, fold_key};
use crate::replication::HandleCommand;
use crate::replication::guard::Basis;
use crate::storage::{
    Applied, HandlePut, HandleRecord, ImportTally, PutMode, ReadSnapshot, Sameness, check_indexes,
};
use crate::values::{HandleValue, ValueSelection, value_list_len};

use super::records::held_here;
use super::{Caller, Error, ExistingHandle, Operation, Refusal, Service, authorise};

/// The protocol version in whose answer formats a bulk session's challenge is
/// answered.
pub const SESSION_VERSION: ProtocolVersion = ProtocolVersion::MAX_SUPPORTED;

/// What a bulk session's challenge stands for: its request digest is of these octets.
const SESSION_REQUEST: &[u8] = b"hdl bulk session 1";

/// A fresh challenge opening a bulk session (node module `bulk`).
pub fn session_challenge(id: ChallengeId, now: Instant) -> Result<Challenge, AuthError> {
    let digest = RequestDigest::for_version(SESSION_VERSION, SESSION_REQUEST);
    Challenge::new(id, digest, SESSION_VERSION, now)
}

/// What a client signs to answer a bulk session's challenge of nonce `nonce`.
pub fn session_challenge_body(nonce: Vec<u8>) -> ChallengeBody {
    ChallengeBody {
        request_digest: RequestDigest::for_version(SESSION_VERSION, SESSION_REQUEST),
        nonce,
    }
}

/// How the values of an import batch are dated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Timestamps {
    /// As given (an export read back): identical values have identical timestamps.
    Kept,
    /// By this server's clock, as every other write is (a GenericBatch file carries no
    /// dates): a handle whose values differ from these in their timestamps alone is
    /// unchanged.
    Stamped,
}

/// Whole handles to import, in the order of their file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportBatch {
    /// Each handle and its values, in stored order.
    pub handles: Vec<(Handle, Vec<HandleValue>)>,
    /// Whether a handle that exists with other values is replaced.
    pub existing: ExistingHandle,
    /// How the values are dated.
    pub timestamps: Timestamps,
}

/// Why a handle of a batch was not written as asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ImportProblem {
    /// It exists with other values, left as they are (no overwrite was asked for).
    Differs,
    /// It was refused: its values are invalid or too large, or the caller may not
    /// write it.
    Refused(String),
}

/// What importing a batch did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportReport {
    /// Every handle of the batch, counted once by what became of it.
    pub tally: ImportTally,
    /// The handles not written as asked: their position in the batch and why.
    pub problems: Vec<(u32, ImportProblem)>,
}

impl ImportReport {
    fn refuse(&mut self, position: u32, reason: String) {
        self.tally.refused += 1;
        self.problems
            .push((position, ImportProblem::Refused(reason)));
    }
}

/// What one batch proposes, and what was decided without proposing.
#[derive(Default)]
struct ImportPlan {
    puts: Vec<HandlePut>,
    basis: Vec<Basis>,
}

impl ImportPlan {
    /// Adds what a permission check read, each record once.
    fn add_basis(&mut self, basis: Vec<Basis>) {
        for read in basis {
            if !self
                .basis
                .iter()
                .any(|b| b.handle.key() == read.handle.key())
            {
                self.basis.push(read);
            }
        }
    }
}

impl ImportBatch {
    /// When an existing handle's values are the same as this batch's.
    pub fn sameness(&self) -> Sameness {
        match self.timestamps {
            Timestamps::Kept => Sameness::Exact,
            Timestamps::Stamped => Sameness::TimestampsAside,
        }
    }
}

impl Service {
    /// Imports `batch` as `caller` (see the module docs): one proposal, whose tally
    /// counts what became of every handle. A handle of a slot this set does not take
    /// writes for makes the whole batch [`Error::NotHere`], and records its permission
    /// checks read that changed before it applied make it
    /// [`Refusal::AuthorityChanged`]: nothing is written, and the caller sends it again
    /// (where it belongs). Which handles differ the tally does not say:
    /// [`Service::differing`] does.
    pub async fn import(&self, caller: &Caller, batch: ImportBatch) -> Result<ImportReport, Error> {
        if caller.is_anonymous() {
            return Err(Error::AuthenticationNeeded);
        }
        let sameness = batch.sameness();
        let mut report = ImportReport::default();
        let puts = self.checked_puts(batch.handles, batch.timestamps, &mut report);
        self.replica.ensure_fresh_read().await?;
        let plan = self
            .plan_import(caller, puts, batch.existing, &mut report)
            .await?;
        if plan.puts.is_empty() {
            return Ok(report);
        }
        let command = HandleCommand::Guarded {
            basis: plan.basis,
            command: Box::new(HandleCommand::PutHandles {
                puts: plan.puts,
                sameness,
            }),
        };
        match self.replica.client_write(command).await? {
            Ok(Applied::Imported(tally)) => {
                report.tally.add(tally);
                Ok(report)
            }
            Ok(_) => Err(Error::Refused(Refusal::NoValues)),
            Err(refusal) => Err(refusal.into()),
        }
    }

    /// The positions in `batch` of the handles this member's store holds with other
    /// values than the batch's.
    pub fn differing(&self, batch: &ImportBatch) -> Result<Vec<u32>, Error> {
        let read = self.store.read()?;
        let sameness = batch.sameness();
        let mut positions = Vec::new();
        for (position, (handle, values)) in (0u32..).zip(&batch.handles) {
            let stored = read.get(handle, &ValueSelection::all())?;
            if stored.is_some_and(|record| !sameness.same(&record.values, values)) {
                positions.push(position);
            }
        }
        Ok(positions)
    }

    /// The handles of a batch that pass their own checks (dated by this server's
    /// clock when asked), each to be created for now, with its position; the others
    /// refused in `report`.
    fn checked_puts(
        &self,
        handles: Vec<(Handle, Vec<HandleValue>)>,
        timestamps: Timestamps,
        report: &mut ImportReport,
    ) -> Vec<(u32, HandlePut)> {
        let now = unix_now();
        let mut puts = Vec::with_capacity(handles.len());
        for (position, (handle, mut values)) in (0u32..).zip(handles) {
            if timestamps == Timestamps::Stamped {
                values.iter_mut().for_each(|value| value.timestamp = now);
            }
            match self.check_values(&values) {
                Ok(()) => puts.push((
                    position,
                    HandlePut {
                        handle,
                        values,
                        mode: PutMode::CreateOnly,
                    },
                )),
                Err(error) => report.refuse(position, error.to_string()),
            }
        }
        puts
    }

    /// Whether `values` may be a handle's: valid, indexes positive and unique, within
    /// the size bound.
    fn check_values(&self, values: &[HandleValue]) -> Result<(), Error> {
        for value in values {
            value.validate().map_err(|reason| Error::InvalidValue {
                index: value.index,
                reason,
            })?;
        }
        check_indexes(values)?;
        let octets = value_list_len(values);
        if octets > self.max_handle_octets {
            return Err(Error::Refused(Refusal::TooLarge {
                octets: octets as u64,
                limit: self.max_handle_octets as u64,
            }));
        }
        Ok(())
    }

    /// Checks who may write each put: a create needs the prefix's permission (checked
    /// once per prefix), replacing a handle that exists (with `existing` Overwrite, the
    /// only case the store is read for) `DELETE_HANDLE` on it too. The puts allowed,
    /// with what their checks read; the others refused in `report`.
    async fn plan_import(
        &self,
        caller: &Caller,
        puts: Vec<(u32, HandlePut)>,
        existing: ExistingHandle,
        report: &mut ImportReport,
    ) -> Result<ImportPlan, Error> {
        let read = self.store.read()?;
        let mut plan = ImportPlan {
            puts: Vec::with_capacity(puts.len()),
            basis: Vec::new(),
        };
        // (prefix admin handle, act) → whether the caller may create under it.
        let mut creators: HashMap<(String, Act), Result<(), String>> = HashMap::new();
        for (position, mut put) in puts {
            if existing == ExistingHandle::Overwrite && read.contains(&put.handle)? {
                put.mode = PutMode::Replace;
            }
            let key = creator_key(&put.handle);
            let allowed = match (put.mode, creators.get(&key)) {
                (PutMode::Replace, _) => {
                    permission(self.replacing(caller, &read, &put.handle).await)?
                }
                (PutMode::CreateOnly, Some(decided)) => decided.clone().map(|()| Vec::new()),
                (PutMode::CreateOnly, None) => {
                    let decided = permission(self.creating(caller, &read, &put.handle).await)?;
                    creators.insert(key, decided.as_ref().map(|_| ()).map_err(String::clone));
                    decided
                }
            };
            match allowed {
                Ok(basis) => {
                    plan.add_basis(basis);
                    plan.puts.push(put);
                }
                Err(reason) => report.refuse(position, reason),
            }
        }
        Ok(plan)
    }

    /// Whether `caller` may create `handle` (the prefix's permission); what the check
    /// read, as the basis of the write.
    async fn creating(
        &self,
        caller: &Caller,
        read: &ReadSnapshot,
        handle: &Handle,
    ) -> Result<Vec<Basis>, Error> {
        let create = Operation::Create {
            handle: handle.clone(),
            values: Vec::new(),
            existing: ExistingHandle::Refuse,
        };
        let records = self
            .authorised(|records| authorise::operation(&self.policy, records, caller, &create))
            .await?;
        records.basis(read, handle, &[])
    }

    /// Whether `caller` may replace the existing `handle` (create over it: the
    /// prefix's permission and `DELETE_HANDLE` on it); what the check read.
    async fn replacing(
        &self,
        caller: &Caller,
        read: &ReadSnapshot,
        handle: &Handle,
    ) -> Result<Vec<Basis>, Error> {
        let create = Operation::Create {
            handle: handle.clone(),
            values: Vec::new(),
            existing: ExistingHandle::Overwrite,
        };
        let records = self
            .authorised(|records| authorise::operation(&self.policy, records, caller, &create))
            .await?;
        records.basis(read, handle, &[])
    }
}

/// A permission check's outcome: allowed (what it read), or refused (why); any
/// other failure is the batch's.
fn permission(outcome: Result<Vec<Basis>, Error>) -> Result<Result<Vec<Basis>, String>, Error> {
    match outcome {
        Ok(basis) => Ok(Ok(basis)),
        Err(refused @ Error::NotPermitted(_)) => Ok(Err(refused.to_string())),
        Err(error) => Err(error),
    }
}

/// What decides whether a handle may be created: its prefix handle and the act.
fn creator_key(handle: &Handle) -> (String, Act) {
    let prefix = prefix_admin_handle(handle).map_or_else(|_| String::new(), |h| h.key().to_owned());
    (prefix, Act::create(handle))
}

/// Why an export stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The caller may not export this handle (or list its prefix).
    #[error("{handle}: {error}")]
    Handle {
        /// The handle.
        handle: String,
        /// Why.
        error: Error,
    },
    /// The export could not go on.
    #[error(transparent)]
    Service(#[from] Error),
}

/// An export under way: one snapshot of the store and how far it has been read.
#[derive(Debug)]
pub struct ExportCursor {
    read: Arc<ReadSnapshot>,
    prefix: Option<String>,
    after: Option<String>,
    /// The folded prefixes the caller was found allowed to list.
    listed: HashSet<String>,
}

/// One page of an export: whole handles in folded-key order, and whether it was the
/// last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportPage {
    /// Each handle's folded key and record.
    pub records: Vec<(String, HandleRecord)>,
    /// Whether nothing follows.
    pub done: bool,
}

impl Service {
    /// Starts an export of the handles under `prefix` (every handle when `None`) as
    /// `caller`, from a snapshot holding every write acknowledged before.
    pub async fn open_export(
        &self,
        caller: &Caller,
        prefix: Option<&str>,
    ) -> Result<ExportCursor, ExportError> {
        if caller.is_anonymous() {
            return Err(Error::AuthenticationNeeded.into());
        }
        self.replica
            .ensure_fresh_read()
            .await
            .map_err(Error::from)?;
        let mut cursor = ExportCursor {
            read: self.store.read().map_err(Error::from)?,
            prefix: prefix.map(str::to_owned),
            after: None,
            listed: HashSet::new(),
        };
        if let Some(prefix) = prefix {
            self.check_listing(caller, &mut cursor, prefix).await?;
        }
        Ok(cursor)
    }

    /// The next page of `cursor`, up to `limit` handles.
    pub async fn export_page(
        &self,
        caller: &Caller,
        cursor: &mut ExportCursor,
        limit: usize,
    ) -> Result<ExportPage, ExportError> {
        let (read, prefix, after) = (
            Arc::clone(&cursor.read),
            cursor.prefix.clone(),
            cursor.after.clone(),
        );
        let reading = tokio::task::spawn_blocking(move || {
            read.handle_records(prefix.as_deref(), after.as_deref(), limit)
        });
        let records = reading
            .await
            .map_err(|_panicked| Error::Busy)?
            .map_err(Error::from)?;
        let done = records.len() < limit;
        if let Some((key, _)) = records.last() {
            cursor.after = Some(key.clone());
        }
        let mut page = Vec::with_capacity(records.len());
        for (key, record) in records {
            let handle = Handle::parse(&record.display).map_err(Error::InvalidHandle)?;
            if held_here(&cursor.read, &handle).is_err() {
                // A slot moving in: its owner exports it.
                continue;
            }
            self.check_listing(caller, cursor, handle.prefix()).await?;
            if record.values.iter().any(|value| !value.is_public()) {
                self.authorised(|records| {
                    authorise::reading_values(&self.policy, records, caller, &record.values)
                })
                .await
                .map_err(|error| ExportError::Handle {
                    handle: record.display.clone(),
                    error,
                })?;
            }
            page.push((key, record));
        }
        Ok(ExportPage {
            records: page,
            done,
        })
    }

    /// Checks, once per prefix of `cursor`, that `caller` may list `prefix`.
    async fn check_listing(
        &self,
        caller: &Caller,
        cursor: &mut ExportCursor,
        prefix: &str,
    ) -> Result<(), ExportError> {
        let key = fold_key(prefix);
        if cursor.listed.contains(&key) {
            return Ok(());
        }
        self.authorised(|records| authorise::listing(&self.policy, records, caller, prefix))
            .await
            .map_err(|error| ExportError::Handle {
                handle: format!("prefix {prefix}"),
                error,
            })?;
        cursor.listed.insert(key);
        Ok(())
    }
}
