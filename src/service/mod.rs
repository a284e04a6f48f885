//! Transport-agnostic handle operations: resolution and administration.
//!
//! Owns the rules every edge (the Handle protocol, HTTP) shares: which values an
//! anonymous resolution may see, value validation, server-assigned timestamps, and who
//! may administer (an authenticated administrator whom the target handle, its prefix
//! handle or the server configuration allows the exact change, module `authorise`). Writes go through the replica set ([`Replica::client_write`]: the
//! primary proposes them, any other member forwards them); reads come from the local
//! store, which holds what this member has applied, after a
//! [`Replica::ensure_fresh_read`] when the caller asks for an authoritative answer.
//! Depends on [`crate::names`], [`crate::values`], [`crate::auth`],
//! [`crate::storage`] and [`crate::replication`], and on [`crate::resolver`] to check
//! keys held by other services; knows nothing of sockets, wire formats or response
//! codes (each edge maps [`Error`] to its own codes in one function).

mod authorise;
pub mod bootstrap;
mod error;
mod keys;
mod mint;
mod verifier;

use std::net::IpAddr;
use std::sync::Arc;

pub use authorise::AuthPolicy;
pub use error::Error;

use crate::auth::Identity;
use crate::clock::unix_now;
use crate::names::Handle;
use crate::replication::admin::{Member, MemberStatus};
use crate::replication::{NodeId, Replica};
use crate::resolver::Resolver;
use crate::storage::{Applied, Command, HandleRecord, PrefixRecord, Store};
use crate::values::{HandleValue, Permissions, ValueSelection};
use verifier::Verifier;

/// Who sent a request, as far as the service can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// Nobody has proved who they are.
    Anonymous {
        /// The peer address of the connection or datagram.
        address: IpAddr,
    },
    /// An administrator who answered a challenge (or authenticated over HTTP).
    Administrator {
        /// Who they proved to be.
        identity: Identity,
    },
}

impl Caller {
    /// An anonymous caller at `address`.
    pub fn anonymous(address: IpAddr) -> Caller {
        Caller::Anonymous { address }
    }
}

/// How current a read must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// What this member has applied; it may lag the primary by a moment.
    Local,
    /// Every write acknowledged before the read (the Handle protocol's AT flag).
    Authoritative,
}

/// What an anonymous resolution of more than public values needs first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrivateRead {
    /// Nothing: every selected value is public.
    Public,
    /// An authenticated administrator allowed READ_VALUE.
    Administrator,
}

/// The handle operations of one node, shared by every connection.
#[derive(Debug, Clone)]
pub struct Service {
    store: Arc<Store>,
    replica: Replica,
    policy: Arc<AuthPolicy>,
    resolver: Option<Arc<Resolver>>,
    verifier: Verifier,
}

impl Service {
    /// A service reading `store`, which `replica` keeps up to date and writes through,
    /// allowing administration as `policy` says.
    pub fn new(store: Arc<Store>, replica: Replica, policy: AuthPolicy) -> Self {
        Service {
            store,
            replica,
            policy: Arc::new(policy),
            resolver: None,
            verifier: Verifier::new(),
        }
    }

    /// This service, asking the services that `resolver` finds for the keys of
    /// administrators whose identity handles it does not hold.
    pub fn with_resolver(self, resolver: Resolver) -> Self {
        Service {
            resolver: Some(Arc::new(resolver)),
            ..self
        }
    }

    /// Anonymous resolution: the selected values that are publicly readable and not
    /// administrative, in stored order. A handle that exists but has no such value is
    /// [`Error::ValuesNotFound`].
    pub async fn resolve(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        freshness: Freshness,
    ) -> Result<HandleRecord, Error> {
        if freshness == Freshness::Authoritative {
            self.replica.ensure_fresh_read().await?;
        }
        let mut record = self
            .store
            .read()?
            .get(handle, selection)?
            .ok_or(Error::HandleNotFound)?;
        record.values.retain(HandleValue::is_public);
        if record.values.is_empty() {
            return Err(Error::ValuesNotFound);
        }
        Ok(record)
    }

    /// What an anonymous resolution asking for more than public values (the Handle
    /// protocol's PO flag clear) needs first (digest §3.2, J9 `checkReadAccess`):
    /// nothing when every selected value is public (or the handle is missing, which
    /// the resolution itself reports), an administrator otherwise, and
    /// [`Error::Unreadable`] when a selected value lacks admin read as well.
    pub fn private_read(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
    ) -> Result<PrivateRead, Error> {
        let Some(record) = self.store.read()?.get(handle, selection)? else {
            return Ok(PrivateRead::Public);
        };
        let mut private = record
            .values
            .iter()
            .filter(|value| !value.is_public())
            .peekable();
        if private.peek().is_none() {
            return Ok(PrivateRead::Public);
        }
        if private.any(|value| !value.permissions.contains(Permissions::ADMIN_READ)) {
            return Err(Error::Unreadable);
        }
        Ok(PrivateRead::Administrator)
    }

    /// Resolution by an administrator allowed READ_VALUE on the handle: every selected
    /// value, administrative and non-public ones included, in stored order (an empty
    /// selection result is [`Error::ValuesNotFound`]).
    pub async fn resolve_all(
        &self,
        caller: &Caller,
        handle: &Handle,
        selection: &ValueSelection,
        freshness: Freshness,
    ) -> Result<HandleRecord, Error> {
        if freshness == Freshness::Authoritative {
            self.replica.ensure_fresh_read().await?;
        }
        let read = self.store.read()?;
        authorise::reading(&self.policy, &read, caller, handle)?;
        let record = read.get(handle, selection)?.ok_or(Error::HandleNotFound)?;
        if record.values.is_empty() {
            return Err(Error::ValuesNotFound);
        }
        Ok(record)
    }

    /// How many handles the naming authority `prefix` holds (0 when it is unknown),
    /// for an administrator allowed LIST_HANDLES on it.
    pub fn count_handles(&self, caller: &Caller, prefix: &str) -> Result<u64, Error> {
        let read = self.store.read()?;
        authorise::listing(&self.policy, &read, caller, prefix)?;
        let record = read.prefix(prefix)?;
        Ok(record.map_or(0, |record| record.handle_count))
    }

    /// Every naming authority the store knows (with handles, or homed here), for a
    /// server administrator.
    pub fn list_prefixes(&self, caller: &Caller) -> Result<Vec<PrefixRecord>, Error> {
        let read = self.store.read()?;
        authorise::server_admin(&self.policy, &read, caller)?;
        Ok(read.list_prefixes()?)
    }

    /// Up to `limit` handles under `prefix`, after `after` when paging.
    pub fn list_handles(
        &self,
        caller: &Caller,
        prefix: &str,
        after: Option<&Handle>,
        limit: usize,
    ) -> Result<Vec<String>, Error> {
        let read = self.store.read()?;
        authorise::listing(&self.policy, &read, caller, prefix)?;
        Ok(read.list_handles(prefix, after, limit)?)
    }

    /// Validates and timestamps an administrative `command` for `caller`, then has the
    /// primary apply it; returns once it is committed by a quorum and applied there.
    ///
    /// Permissions are checked against this member's store before the write is
    /// proposed (as J9 checks, then writes); a member that lags its primary checks
    /// against what it has applied.
    pub async fn administer(&self, caller: &Caller, command: Command) -> Result<Applied, Error> {
        authorise::command(&self.policy, &self.store.read()?, caller, &command)?;
        self.write(command).await
    }

    /// Writes `command` with no permission check: only for the server's own set-up
    /// (the bootstrap administrator), never for a request.
    pub async fn write(&self, command: Command) -> Result<Applied, Error> {
        let command = prepare(command, unix_now())?;
        Ok(self.replica.client_write(command).await??)
    }

    /// This node's view of itself and its replica set (role, applied index, members).
    pub fn replica_status(&self) -> MemberStatus {
        self.replica.status()
    }

    /// The members of this node's replica set, by id, and its primary if known.
    pub fn replica_set(&self) -> (Vec<Member>, Option<NodeId>) {
        self.replica.members()
    }
}

/// Checks every value the command writes and stamps it with `now`, as the reference
/// server does: the server's clock, not the client's, dates a change.
fn prepare(mut command: Command, now: u32) -> Result<Command, Error> {
    let values = match &mut command {
        Command::Create { values, .. }
        | Command::AddValues { values, .. }
        | Command::ModifyValues { values, .. } => values,
        _ => return Ok(command),
    };
    for value in values.iter_mut() {
        value.validate().map_err(|reason| Error::InvalidValue {
            index: value.index,
            reason,
        })?;
        value.timestamp = now;
    }
    Ok(command)
}

#[cfg(test)]
mod tests;
