//! The seam between the protocol edges and whatever answers them: [`Handler`].
//!
//! Both edges (the Handle protocol in `server`, HTTP in `http`) hold an
//! `Arc<dyn Handler>` and nothing else of the node: everything they answer comes from
//! here, and they never name the concrete [`Service`](super::Service). This node's
//! service implements it today; a router forwarding to the owner of a handle's slot
//! and a caching resolver implement it next. An in-memory handler stands in for the
//! node in the edges' unit tests.
//!
//! The trait is object-safe (`async_trait` boxes each call's future: one allocation
//! per call, no more). Implementations must be cheap to share across tasks.

use std::fmt::Debug;

use async_trait::async_trait;

use crate::auth::{Challenge, ChallengeAnswer, Identity, SessionError, SessionKey};
use crate::codec::{KeyExchange, ProtocolVersion, VerifyRequest};
use crate::names::Handle;
use crate::values::{HandleValue, SearchQuery, SiteInfo, ValueSelection};

use super::{
    Applied, Caller, ClientRequest, Error, Found, Freshness, HandleRecord, Missing, Operation,
    PrefixRecord, PrivateRead, SearchPosition, Status,
};

/// The outcome of a session setup's key exchange: the session key and the data of
/// the setup's answer, or why the client's part was refused.
pub type KeyAgreement = Result<(SessionKey, Vec<u8>), SessionError>;

/// Everything the protocol edges need from a node.
#[async_trait]
pub trait Handler: Send + Sync + Debug {
    /// Anonymous resolution: the selected values that are publicly readable and not
    /// administrative, in stored order. A handle that exists but has no such value is
    /// [`Error::ValuesNotFound`].
    async fn resolve(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        freshness: Freshness,
    ) -> Result<HandleRecord, Error>;

    /// [`Handler::resolve`] when it is answered without waiting (a read of this
    /// node's own store); `None` when it must be awaited. Most resolutions are,
    /// and so cost no boxed future.
    fn resolve_at_once(
        &self,
        _handle: &Handle,
        _selection: &ValueSelection,
        _freshness: Freshness,
    ) -> Option<Result<HandleRecord, Error>> {
        None
    }

    /// What answers a resolution of `handle` that found no such handle, in this order
    /// (`HANDLE-NET-REFERENCE.md` §1.9, digest §3.9, §9): the values of `selection`
    /// its prefix's HS_NAMESPACE template derives, else a referral to where it lives,
    /// [`Missing::NotHomed`] when its prefix is not served here, or
    /// [`Missing::NotFound`]. One call, so that the records both questions rest on
    /// (the prefix handle `0.NA/<prefix>`, or a missing prefix handle's ancestors)
    /// are read once, from wherever they live. A handler that asks other services,
    /// which derive and refer for themselves, answers not found.
    async fn missing(&self, handle: &Handle, selection: &ValueSelection) -> Result<Missing, Error>;

    /// What an anonymous resolution asking for more than public values (the Handle
    /// protocol's PO flag clear) needs first (digest §3.2, J9 `checkReadAccess`):
    /// nothing when every selected value is public (or the handle is missing, which
    /// the resolution itself reports), an administrator otherwise, and
    /// [`Error::Unreadable`] when a selected value lacks admin read as well.
    async fn private_read(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
    ) -> Result<PrivateRead, Error>;

    /// Resolution by an administrator allowed READ_VALUE on the handle: every selected
    /// value, administrative and non-public ones included, in stored order (an empty
    /// selection result is [`Error::ValuesNotFound`]).
    async fn resolve_all(
        &self,
        caller: &Caller,
        handle: &Handle,
        selection: &ValueSelection,
        freshness: Freshness,
    ) -> Result<HandleRecord, Error>;

    /// Validates, timestamps and authorises `operation` for `caller`, then carries it
    /// out; returns once it is durable (for a replica set: committed by a quorum and
    /// applied).
    async fn administer(&self, caller: &Caller, operation: Operation) -> Result<Applied, Error>;

    /// [`Handler::administer`] for a write the client named `request` and may send
    /// again, to this node or another, when it got no answer or a busy one: the same
    /// caller sending the same operation under the same name is answered with the
    /// first result, the write carried out once (while the replica set remembers the
    /// result: its last 50,000 log entries).
    async fn administer_request(
        &self,
        caller: &Caller,
        operation: Operation,
        request: ClientRequest,
    ) -> Result<Applied, Error>;

    /// Creates `base` followed by a random UUID (`P/<uuid>` for a bare prefix `P`,
    /// `P/start<uuid>` for `P/start`) with `values`, as `caller`; the handle created.
    async fn mint(
        &self,
        caller: &Caller,
        base: &str,
        values: Vec<HandleValue>,
    ) -> Result<(Handle, Applied), Error>;

    /// How many handles the naming authority `prefix` holds (0 when it is unknown),
    /// for an administrator allowed LIST_HANDLES on it.
    async fn count_handles(&self, caller: &Caller, prefix: &str) -> Result<u64, Error>;

    /// Up to `limit` handles under `prefix` in folded-key order, after `after` when
    /// paging, for an administrator allowed LIST_HANDLES on it.
    async fn list_handles(
        &self,
        caller: &Caller,
        prefix: &str,
        after: Option<&Handle>,
        limit: usize,
    ) -> Result<Vec<String>, Error>;

    /// Reverse lookup: up to `limit` handles holding values that match `query`, after
    /// `after` when paging, in the order of the value index (matched value, then
    /// handle), each with its position (for the next page's `after`). Needs
    /// LIST_HANDLES on the prefix searched; a search of every prefix finds only the
    /// handles under prefixes the caller may list; a value that is not public matches
    /// only for a caller allowed READ_VALUE on its handle. A query naming no indexed
    /// type is [`Error::NotIndexed`].
    async fn search_handles(
        &self,
        caller: &Caller,
        query: &SearchQuery,
        after: Option<&SearchPosition>,
        limit: usize,
    ) -> Result<Vec<Found>, Error>;

    /// Every naming authority known here (with handles, or homed here), for a
    /// server administrator.
    async fn list_prefixes(&self, caller: &Caller) -> Result<Vec<PrefixRecord>, Error>;

    /// The HS_SITE this node describes its service with (get-site-info).
    async fn site_info(&self) -> SiteInfo;

    /// This node's view of itself and its replica set, for `/status` and `/metrics`.
    fn status(&self) -> Status;

    /// The identity that answered `challenge` with `answer`, if the answer verifies
    /// against a key of the key handle (held here or at its own service).
    async fn verify_answer(
        &self,
        challenge: &Challenge,
        answer: &ChallengeAnswer,
    ) -> Result<Identity, Error>;

    /// The identity whose HS_SECKEY (at its index, or any index when it is 0) equals
    /// `secret`: HTTP Basic authentication.
    async fn verify_secret(&self, identity: &Identity, secret: &[u8]) -> Result<Identity, Error>;

    /// Whether `request` (an OC 201 from another server, in a message of `version`)
    /// holds a right answer for the HS_SECKEY it names here.
    async fn verify_for_other_server(
        &self,
        request: &VerifyRequest,
        version: ProtocolVersion,
    ) -> Result<bool, Error>;

    /// The server's side of a session setup's key exchange, run where key checks run
    /// (off the async workers, bounded: [`Error::Busy`] when no core frees up in
    /// time).
    async fn key_exchange(&self, exchange: KeyExchange) -> Result<KeyAgreement, Error>;
}
