//! Transport-agnostic handle operations: resolution and administration.
//!
//! Owns the seam the protocol edges speak to ([`Handler`]) and this node's
//! implementation of it ([`Service`]), what a client may ask ([`Operation`], the one
//! conversion to a log command in module `operation`), the rules every edge shares
//! (which values an anonymous resolution may see, value validation, server-assigned
//! timestamps, who may administer: an authenticated administrator whom the target
//! handle, its prefix handle or the server configuration allows the exact change,
//! module `authorise`), bulk import and export of whole handles (module `bulk`),
//! reverse lookup through the store's value index (module `search`), what answers a
//! handle that does not exist (module `missing`, and [`resolve_or_refer`], the
//! resolution every edge runs): the values its prefix's HS_NAMESPACE template derives
//! (module `template`, parsed namespaces kept in module `namespaces`) or the referral
//! to where it lives (module `referral`), the HS_SITE a node describes itself with ([`site`]: its set,
//! or one site per rank over the ring of slots), and the one table from [`Error`] to
//! RFC 3652 response codes ([`Error::response_code`]).
//!
//! Once the ring spreads handles over several replica sets, the service answers only
//! for the slots its store answers reads of: any other handle is [`Error::NotHere`]
//! (never "not found"), for the router above to take elsewhere. The records that
//! authorise a request or check a key (prefix handles, HS_VLIST groups, key handles)
//! are read from the set owning them through a [`RecordSource`] (module `records`).
//!
//! Writes go through the replica set ([`Group::client_write`](crate::replication::Group::client_write):
//! the primary proposes them, any other member forwards them); reads come from the
//! local store, which holds what this member has applied, after a
//! [`Group::ensure_fresh_read`](crate::replication::Group::ensure_fresh_read) when the
//! caller asks for an authoritative answer. Depends on [`crate::clock`],
//! [`crate::names`], [`crate::values`], [`crate::codec`], [`crate::auth`],
//! [`crate::config`], [`crate::storage`] and [`crate::replication`], and on
//! [`crate::resolver`] to check keys held by other services; knows nothing of
//! sockets. The edges reach the layers below only through what this module
//! re-exports ([`Applied`], [`HandleRecord`], [`PrefixRecord`], [`ExistingHandle`],
//! [`ExistingValue`], [`Role`], [`Found`], [`SearchPosition`]).
//!
//! A request the service declines for a reason of the request's own (a handle that
//! exists, a missing permission) is a refusal; the word is [`Refusal`] across the
//! crate, and each edge has its own `Refusal` carrying the response code it answers.

mod authorise;
pub mod bootstrap;
mod bulk;
mod codes;
mod error;
mod handler;
mod keys;
mod local;
#[cfg(test)]
pub mod memory;
mod mint;
mod missing;
mod namespaces;
mod operation;
mod records;
mod referral;
mod search;
pub mod site;
mod status;
mod template;
mod verifier;

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

pub use authorise::AuthPolicy;
pub use bulk::{
    ExportCursor, ExportError, ExportPage, ImportBatch, ImportProblem, ImportReport,
    SESSION_VERSION, Timestamps, session_challenge, session_challenge_body,
};
pub use codes::authentication_code;
pub use error::Error;
pub use handler::{Handler, KeyAgreement};
pub use local::Service;
pub use mint::mint_with;
pub use missing::{
    Answered, Missing, Resolution, resolve_or_derive, resolve_or_refer, resolve_or_refer_noting,
};
pub use namespaces::{MAX_CACHED_NAMESPACE_OCTETS, MAX_CACHED_NAMESPACES, NamespaceCache};
pub use operation::{ExistingHandle, ExistingValue, Operation};
pub use records::{MAX_FETCHED, RecordSource, RoutedSlot, held_here};
pub use referral::{MAX_PREFIX_ANCESTORS, Referral, Unserved};
pub use status::{Role, Status, StatusMember};
pub use template::{MAX_CITED_TEMPLATES, Resolved, TemplateOrigin};
pub use verifier::{forgive_key_checks, measure_key_checks};

pub use crate::storage::{
    Applied, Found, HandleRecord, ImportTally, PrefixRecord, Refusal, SearchPosition,
};

use crate::auth::Identity;
use crate::values::{HandleValue, Permissions};

/// The name a client gave one write (the Handle protocol's RequestId), which it keeps
/// when it sends the write again after no answer or a busy one: see
/// [`Handler::administer_request`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRequest(pub u32);

/// Who sent a request, as far as the service can tell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

    /// Whether nobody has proved who they are.
    pub fn is_anonymous(&self) -> bool {
        matches!(self, Caller::Anonymous { .. })
    }
}

/// How current a read must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Freshness {
    /// What this member has applied; it may lag the primary by a moment.
    Local,
    /// Every write acknowledged before the read (the Handle protocol's AT flag).
    Authoritative,
}

/// What an anonymous resolution of more than public values needs first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PrivateRead {
    /// Nothing: every selected value is public.
    Public,
    /// An authenticated administrator allowed READ_VALUE.
    Administrator,
}

/// `record` with only its public, non-administrative values, in stored order; none
/// left is [`Error::ValuesNotFound`]. What every handler answers an anonymous
/// resolution with.
fn public_only(mut record: HandleRecord) -> Result<HandleRecord, Error> {
    record.values.retain(HandleValue::is_public);
    if record.values.is_empty() {
        return Err(Error::ValuesNotFound);
    }
    Ok(record)
}

/// What reading the selected values of `record` (`None`: no such handle) needs from
/// an anonymous caller: see [`Handler::private_read`].
fn private_read_of(record: Option<&HandleRecord>) -> Result<PrivateRead, Error> {
    let Some(record) = record else {
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

#[cfg(test)]
mod tests;
