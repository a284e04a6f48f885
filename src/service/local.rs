//! This node's [`Handler`]: the [`Service`] over its own store and replica set.
//!
//! Reads come from the local store (what this member has applied) and only for the
//! slots it answers for: a handle of any other slot is [`Error::NotHere`], never "not
//! found"; writes go through the replica set. The records that authorise a request
//! come from wherever they live (module `records`). Listing reads run on the blocking
//! pool, so a long listing never holds up an async worker; they list only the slots
//! the store answers for. Key checks run on the [`Verifier`]. A write that would make
//! its handle larger than the configured bound is refused before it is proposed
//! ([`Refusal::TooLarge`], checked against this member's store; the store itself
//! refuses, as the write lands, any handle larger than one answer holds).

use std::sync::Arc;

use async_trait::async_trait;

use crate::auth::{Challenge, ChallengeAnswer, Identity, server_key_exchange};
use crate::clock::unix_now;
use crate::codec::{KeyExchange, MAX_VALUE_LIST_LEN, ProtocolVersion, VerifyRequest};
use crate::config::SiteConfig;
use crate::names::Handle;
use crate::replication::{Group, GroupError, HandleCommand, HandleResult, HandleSet, RequestId};
use crate::resolver::Resolver;
use crate::storage::{ReadSnapshot, Slice, Store};
use crate::values::{HandleValue, SearchQuery, SiteInfo, ValueSelection};

use super::records::{RecordSource, RoutedSlot, held_here, held_here_in};
use super::verifier::Verifier;
use super::{
    Applied, AuthPolicy, Caller, ClientRequest, Error, Found, Freshness, HandleRecord, Handler,
    KeyAgreement, Missing, NamespaceCache, Operation, PrefixRecord, PrivateRead, Refusal,
    SearchPosition, Status, Unserved, authorise, mint, operation, private_read_of, public_only,
    site,
};

/// How many times a write is authorised when the records it was authorised on keep
/// changing before it applies; past that the caller is told to try again (busy).
pub const AUTHORISATION_ATTEMPTS: u32 = 3;

/// The handle operations of one node, shared by every connection.
#[derive(Debug, Clone)]
pub struct Service {
    pub(super) store: Arc<Store>,
    pub(super) replica: Group<HandleSet>,
    pub(super) policy: Arc<AuthPolicy>,
    site: Arc<SiteConfig>,
    pub(super) resolver: Option<Arc<Resolver>>,
    pub(super) verifier: Verifier,
    pub(super) records: Option<Arc<dyn RecordSource>>,
    member_keys: Arc<site::MemberKeys>,
    /// The most octets a handle's values may take after a write.
    pub(super) max_handle_octets: usize,
    /// What a missing handle under a prefix not served here is answered.
    pub(super) unserved: Unserved,
    /// The HS_NAMESPACE values parsed for derivations, shared by every clone.
    pub(super) namespaces: Arc<NamespaceCache>,
}

impl Service {
    /// A service reading `store`, which `replica` keeps up to date and writes through,
    /// allowing administration as `policy` says and describing its replica set in
    /// HS_SITE as `site` says.
    pub fn new(
        store: Arc<Store>,
        replica: Group<HandleSet>,
        policy: AuthPolicy,
        site: SiteConfig,
    ) -> Self {
        Service {
            store,
            replica,
            policy: Arc::new(policy),
            site: Arc::new(site),
            resolver: None,
            verifier: Verifier::new(),
            records: None,
            member_keys: Arc::default(),
            max_handle_octets: MAX_VALUE_LIST_LEN,
            unserved: Unserved::NotFound,
            namespaces: Arc::default(),
        }
    }

    /// This service, answering a missing handle under a prefix it does not serve as
    /// `unserved` says (module `referral`).
    pub fn with_unserved(self, unserved: Unserved) -> Self {
        Service { unserved, ..self }
    }

    /// This service, refusing writes that would make a handle's values take more than
    /// `octets` (RFC 3652 value list encoding; the default and the most is
    /// [`MAX_VALUE_LIST_LEN`]).
    pub fn with_max_handle_octets(self, octets: usize) -> Self {
        Service {
            max_handle_octets: octets.min(MAX_VALUE_LIST_LEN),
            ..self
        }
    }

    /// This service, putting the server keys `keys` holds in its HS_SITE.
    pub fn with_member_keys(self, keys: Arc<site::MemberKeys>) -> Self {
        Service {
            member_keys: keys,
            ..self
        }
    }

    /// This service, reading the records its store does not answer for (a prefix
    /// handle, a group or a key handle in another replica set's slot) from `source`.
    pub fn with_records(self, source: Arc<dyn RecordSource>) -> Self {
        Service {
            records: Some(source),
            ..self
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

    /// Refuses `operation` when it would make its handle's values take more than the
    /// bound, as this member's store holds the handle now.
    fn check_size(&self, operation: &Operation) -> Result<(), Error> {
        let current = match operation {
            Operation::AddValues { handle, .. } | Operation::ModifyValues { handle, .. } => {
                let record = self.store.read()?.get(handle, &ValueSelection::all())?;
                record.map(|record| record.values)
            }
            _ => None,
        };
        match operation.size_after(current.as_deref()) {
            Some(octets) if octets > self.max_handle_octets => {
                Err(Error::Refused(Refusal::TooLarge {
                    octets: octets as u64,
                    limit: self.max_handle_octets as u64,
                }))
            }
            _ => Ok(()),
        }
    }

    /// Permissions are checked before the write is proposed (as J9 checks, then
    /// writes), against this member's store for the target (a member that lags its
    /// primary checks against what it has applied) and the owners of the other
    /// records; the write carries what the check read of this set's records, and the
    /// set applies it only if they still read so (module [`crate::replication::guard`]).
    /// If they changed in between, the check runs again on fresh state, up to
    /// [`AUTHORISATION_ATTEMPTS`] times. A refusal the check decided on this member's
    /// store (not found, not permitted, too large, not here) is decided again once the
    /// store has caught up with the primary, so a member that lags never refuses what
    /// the set already acknowledged. A target whose slot this store does not answer
    /// for is [`Error::NotHere`]. Under request `id` (see
    /// [`Handler::administer_request`]) a result the set remembers for it is the answer,
    /// the write not carried out again.
    async fn administer_as(
        &self,
        caller: &Caller,
        operation: Operation,
        id: Option<RequestId>,
    ) -> Result<Applied, Error> {
        let mut fresh = false;
        let mut attempts = 0;
        loop {
            if let Some(answered) = self.remembered(id)? {
                return Ok(answered?);
            }
            let command = match self.authorised_command(caller, &operation).await {
                Ok(command) => command,
                Err(refused) if !fresh && decided_on_this_store(&refused) => {
                    self.replica.ensure_fresh_read().await?;
                    fresh = true;
                    continue;
                }
                Err(error) => return Err(error),
            };
            attempts += 1;
            let outcome = match id {
                Some(id) => self.replica.client_write_as(id, command).await?,
                None => self.replica.client_write(command).await?,
            };
            match outcome {
                Err(Refusal::AuthorityChanged) if attempts < AUTHORISATION_ATTEMPTS => {
                    self.replica.ensure_fresh_read().await?;
                    fresh = true;
                }
                outcome => return Ok(outcome?),
            }
        }
    }

    /// The result this member's store remembers for request `id`, if any.
    fn remembered(&self, id: Option<RequestId>) -> Result<Option<HandleResult>, Error> {
        let Some(id) = id else {
            return Ok(None);
        };
        let recalled = crate::replication::recall::<HandleSet>(&*self.store.read()?, id);
        Ok(recalled.map_err(GroupError::Storage)?)
    }

    /// `operation` checked against this member's store (held here, within the size
    /// bound, permitted to `caller`) and made into the log command that carries what
    /// the check read.
    async fn authorised_command(
        &self,
        caller: &Caller,
        operation: &Operation,
    ) -> Result<HandleCommand, Error> {
        if let Some(handle) = operation.handle() {
            held_here(&*self.store.read()?, handle)?;
        }
        self.check_size(operation)?;
        let target = operation.routing_handle()?;
        let records = self
            .authorised(|records| authorise::operation(&self.policy, records, caller, operation))
            .await?;
        let basis = records.basis(&*self.store.read()?, &target, &operation.touched_indexes())?;
        let prepared = operation.clone().prepare(unix_now())?;
        Ok(operation::guarded_command(prepared, basis))
    }

    /// Carries out `operation` with no permission check: only for the server's own
    /// set-up (the bootstrap administrator), never for a request.
    /// Returns once it is committed by a quorum and applied by the primary.
    pub async fn write(&self, operation: Operation) -> Result<Applied, Error> {
        let command = operation::log_command(operation.prepare(unix_now())?);
        Ok(self.replica.client_write(command).await??)
    }
}

impl Service {
    /// [`Handler::resolve`] of a handle whose slot a router found (`routed`).
    pub async fn resolve_routed(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        freshness: Freshness,
        routed: Option<RoutedSlot>,
    ) -> Result<HandleRecord, Error> {
        if freshness == Freshness::Authoritative {
            self.replica.ensure_fresh_read().await?;
        }
        self.read_resolved(handle, selection, routed)
    }

    /// The public values of `handle` as this member's store holds them now (see
    /// [`Service::resolve_routed`]).
    pub fn read_resolved(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        routed: Option<RoutedSlot>,
    ) -> Result<HandleRecord, Error> {
        let read = self.store.read()?;
        held_here_in(&read, handle, routed)?;
        let record = read.get(handle, selection)?.ok_or(Error::HandleNotFound)?;
        public_only(record)
    }
}

#[async_trait]
impl Handler for Service {
    async fn resolve(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        freshness: Freshness,
    ) -> Result<HandleRecord, Error> {
        self.resolve_routed(handle, selection, freshness, None)
            .await
    }

    /// A read of this member's store, unless it must first catch up (AT).
    fn resolve_at_once(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        freshness: Freshness,
    ) -> Option<Result<HandleRecord, Error>> {
        (freshness == Freshness::Local).then(|| self.read_resolved(handle, selection, None))
    }

    async fn missing(&self, handle: &Handle, selection: &ValueSelection) -> Result<Missing, Error> {
        Service::missing(self, handle, selection).await
    }

    async fn private_read(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
    ) -> Result<PrivateRead, Error> {
        let read = self.store.read()?;
        held_here(&read, handle)?;
        let record = read.get(handle, selection)?;
        private_read_of(record.as_ref())
    }

    async fn resolve_all(
        &self,
        caller: &Caller,
        handle: &Handle,
        selection: &ValueSelection,
        freshness: Freshness,
    ) -> Result<HandleRecord, Error> {
        if freshness == Freshness::Authoritative {
            self.replica.ensure_fresh_read().await?;
        }
        held_here(&*self.store.read()?, handle)?;
        self.authorised(|records| authorise::reading(&self.policy, records, caller, handle))
            .await?;
        let read = self.store.read()?;
        held_here(&read, handle)?;
        let record = read.get(handle, selection)?.ok_or(Error::HandleNotFound)?;
        if record.values.is_empty() {
            return Err(Error::ValuesNotFound);
        }
        Ok(record)
    }

    /// See [`Service::administer_as`].
    async fn administer(&self, caller: &Caller, operation: Operation) -> Result<Applied, Error> {
        self.administer_as(caller, operation, None).await
    }

    /// As [`Handler::administer`], proposed under a request id derived from the
    /// caller, the client's name for the request and the operation
    /// ([`Operation::request_id`]); a result the set remembers for it is the answer.
    async fn administer_request(
        &self,
        caller: &Caller,
        operation: Operation,
        request: ClientRequest,
    ) -> Result<Applied, Error> {
        let id = operation.request_id(caller, request);
        self.administer_as(caller, operation, Some(id)).await
    }

    async fn mint(
        &self,
        caller: &Caller,
        base: &str,
        values: Vec<HandleValue>,
    ) -> Result<(Handle, Applied), Error> {
        mint::mint_with(self, caller, base, values).await
    }

    async fn count_handles(&self, caller: &Caller, prefix: &str) -> Result<u64, Error> {
        self.authorised(|records| authorise::listing(&self.policy, records, caller, prefix))
            .await?;
        let record = self.store.read()?.prefix(prefix)?;
        Ok(record.map_or(0, |record| record.handle_count))
    }

    async fn list_handles(
        &self,
        caller: &Caller,
        prefix: &str,
        after: Option<&Handle>,
        limit: usize,
    ) -> Result<Vec<String>, Error> {
        self.authorised(|records| authorise::listing(&self.policy, records, caller, prefix))
            .await?;
        let store = Arc::clone(&self.store);
        let (prefix, after) = (prefix.to_owned(), after.cloned());
        let listing = tokio::task::spawn_blocking(move || {
            list_answered(&*store.read()?, &prefix, after, limit)
        });
        listing.await.map_err(|_panicked| Error::Busy)?
    }

    /// Reverse lookup in this store (module `search`).
    async fn search_handles(
        &self,
        caller: &Caller,
        query: &SearchQuery,
        after: Option<&SearchPosition>,
        limit: usize,
    ) -> Result<Vec<Found>, Error> {
        self.search(caller, query, after, limit).await
    }

    async fn list_prefixes(&self, caller: &Caller) -> Result<Vec<PrefixRecord>, Error> {
        self.authorised(|records| authorise::server_admin(&self.policy, records, caller))
            .await?;
        Ok(self.store.read()?.list_prefixes()?)
    }

    async fn site_info(&self) -> SiteInfo {
        let (members, primary) = self.replica.members();
        site::describe(&self.site, &members, primary, &self.member_keys.snapshot())
    }

    fn status(&self) -> Status {
        Status::of(self.replica.status(), self.replica.snapshots_installed())
    }

    async fn verify_answer(
        &self,
        challenge: &Challenge,
        answer: &ChallengeAnswer,
    ) -> Result<Identity, Error> {
        self.identity_of_answer(challenge, answer).await
    }

    async fn verify_secret(&self, identity: &Identity, secret: &[u8]) -> Result<Identity, Error> {
        self.identity_of_secret(identity, secret).await
    }

    async fn verify_for_other_server(
        &self,
        request: &VerifyRequest,
        version: ProtocolVersion,
    ) -> Result<bool, Error> {
        self.verify_answer_held_here(request, version).await
    }

    async fn key_exchange(&self, exchange: KeyExchange) -> Result<KeyAgreement, Error> {
        self.verifier
            .run(move || server_key_exchange(&exchange))
            .await
    }
}

/// Up to `limit` handles under `prefix` after `after` in folded-key order, of the
/// slots the store answers for: a sliced store skips the handles of slots it only
/// imports (their owner lists them).
fn list_answered(
    read: &ReadSnapshot,
    prefix: &str,
    mut after: Option<Handle>,
    limit: usize,
) -> Result<Vec<String>, Error> {
    if read.slice()? == Slice::Whole {
        return Ok(read.list_handles(prefix, after.as_ref(), limit)?);
    }
    let mut handles = Vec::new();
    loop {
        let page = read.list_handles(prefix, after.as_ref(), limit)?;
        let full = page.len() == limit;
        for display in page {
            let handle = Handle::parse(&display).map_err(Error::InvalidHandle)?;
            if held_here(read, &handle).is_ok() && handles.len() < limit {
                handles.push(display);
            }
            after = Some(handle);
        }
        if !full || handles.len() >= limit {
            return Ok(handles);
        }
    }
}

/// Whether `error`, a refusal of a write before it is proposed, was decided on what
/// this member's store holds now, and so may be wrong on a member that lags its
/// primary: a handle or value not found, a permission not granted (yet, or still),
/// a size past the bound, a slot not (yet) answered here.
fn decided_on_this_store(error: &Error) -> bool {
    matches!(
        error,
        Error::HandleNotFound
            | Error::ValuesNotFound
            | Error::NotPermitted(_)
            | Error::NotHere(_)
            | Error::Refused(Refusal::TooLarge { .. })
    )
}
