//! This node's [`Handler`]: the [`Service`] over its own store and replica set.
//!
//! Reads come from the local store (what this member has applied); writes go through
//! the replica set. Listing reads run on the blocking pool, so a long listing never
//! holds up an async worker; key checks run on the [`Verifier`].

use std::sync::Arc;

use async_trait::async_trait;

use crate::auth::{Challenge, ChallengeAnswer, Identity, server_key_exchange};
use crate::clock::unix_now;
use crate::codec::{KeyExchange, ProtocolVersion, VerifyRequest};
use crate::config::SiteConfig;
use crate::names::Handle;
use crate::replication::{Group, HandleSet};
use crate::resolver::Resolver;
use crate::storage::Store;
use crate::values::{HandleValue, SiteInfo, ValueSelection};

use super::verifier::Verifier;
use super::{
    Applied, AuthPolicy, Caller, Error, Freshness, HandleRecord, Handler, KeyAgreement, Operation,
    PrefixRecord, PrivateRead, Status, authorise, operation, private_read_of, public_only, site,
};

/// The handle operations of one node, shared by every connection.
#[derive(Debug, Clone)]
pub struct Service {
    pub(super) store: Arc<Store>,
    replica: Group<HandleSet>,
    policy: Arc<AuthPolicy>,
    site: Arc<SiteConfig>,
    pub(super) resolver: Option<Arc<Resolver>>,
    pub(super) verifier: Verifier,
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

    /// Carries out `operation` with no permission check: only for the server's own
    /// set-up (the bootstrap administrator), never for a request.
    /// Returns once it is committed by a quorum and applied by the primary.
    pub async fn write(&self, operation: Operation) -> Result<Applied, Error> {
        let command = operation::log_command(operation.prepare(unix_now())?);
        Ok(self.replica.client_write(command).await??)
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
        if freshness == Freshness::Authoritative {
            self.replica.ensure_fresh_read().await?;
        }
        let record = self
            .store
            .read()?
            .get(handle, selection)?
            .ok_or(Error::HandleNotFound)?;
        public_only(record)
    }

    async fn private_read(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
    ) -> Result<PrivateRead, Error> {
        let record = self.store.read()?.get(handle, selection)?;
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
        let read = self.store.read()?;
        authorise::reading(&self.policy, &read, caller, handle)?;
        let record = read.get(handle, selection)?.ok_or(Error::HandleNotFound)?;
        if record.values.is_empty() {
            return Err(Error::ValuesNotFound);
        }
        Ok(record)
    }

    /// Permissions are checked against this member's store before the write is
    /// proposed (as J9 checks, then writes); a member that lags its primary checks
    /// against what it has applied.
    async fn administer(&self, caller: &Caller, operation: Operation) -> Result<Applied, Error> {
        authorise::operation(&self.policy, &self.store.read()?, caller, &operation)?;
        self.write(operation).await
    }

    async fn mint(
        &self,
        caller: &Caller,
        base: &str,
        values: Vec<HandleValue>,
    ) -> Result<(Handle, Applied), Error> {
        self.mint_under(caller, base, values).await
    }

    async fn count_handles(&self, caller: &Caller, prefix: &str) -> Result<u64, Error> {
        let read = self.store.read()?;
        authorise::listing(&self.policy, &read, caller, prefix)?;
        let record = read.prefix(prefix)?;
        Ok(record.map_or(0, |record| record.handle_count))
    }

    async fn list_handles(
        &self,
        caller: &Caller,
        prefix: &str,
        after: Option<&Handle>,
        limit: usize,
    ) -> Result<Vec<String>, Error> {
        let (store, policy) = (Arc::clone(&self.store), Arc::clone(&self.policy));
        let (caller, prefix, after) = (caller.clone(), prefix.to_owned(), after.cloned());
        let listing = tokio::task::spawn_blocking(move || {
            let read = store.read()?;
            authorise::listing(&policy, &read, &caller, &prefix)?;
            Ok(read.list_handles(&prefix, after.as_ref(), limit)?)
        });
        listing.await.map_err(|_panicked| Error::Busy)?
    }

    async fn list_prefixes(&self, caller: &Caller) -> Result<Vec<PrefixRecord>, Error> {
        let read = self.store.read()?;
        authorise::server_admin(&self.policy, &read, caller)?;
        Ok(read.list_prefixes()?)
    }

    async fn site_info(&self) -> SiteInfo {
        let (members, primary) = self.replica.members();
        site::describe(&self.site, &members, primary)
    }

    fn status(&self) -> Status {
        Status::from(self.replica.status())
    }

    async fn verify_answer(
        &self,
        challenge: &Challenge,
        answer: &ChallengeAnswer,
    ) -> Result<Identity, Error> {
        self.identity_of_answer(challenge, answer).await
    }

    async fn verify_secret(&self, identity: &Identity, secret: &[u8]) -> Result<Identity, Error> {
        self.identity_of_secret(identity, secret)
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
