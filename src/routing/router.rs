//! The node's [`Handler`]: [`Router`] sends each call where its handle lives.
//!
//! A call about one handle goes where the handle's slot is owned ([`Forwarder::route`]);
//! a prefix operation where the prefix handle `0.NA/<prefix>` is; a mint picks its new
//! handle first and routes the create. Listing, counting, searching and the list of
//! prefixes ask every set (module `merge`). HS_SITE, status and key checks are this node's own:
//! its service reads the key handles from their owners through the [`Forwarder`] it
//! was given as its record source.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::watch;

use crate::auth::{Challenge, ChallengeAnswer, Identity};
use crate::codec::{KeyExchange, ProtocolVersion, VerifyRequest};
use crate::config::SiteConfig;
use crate::names::Handle;
use crate::service::site::{MemberKeys, describe_ring};
use crate::service::{
    Applied, Caller, ClientRequest, Error, Found, Freshness, HandleRecord, Handler, KeyAgreement,
    Missing, Operation, PrefixRecord, PrivateRead, Refusal, SearchPosition, Service, Status,
    mint_with,
};
use crate::values::{HandleValue, SearchQuery, SiteInfo, ValueSelection};

use super::LocalSet;
use super::forward::{Forwarder, Place, unexpected};
use super::wire::{Answer, ForwardCall};

/// Routes each handle call to the replica set owning the handle's slot.
#[derive(Debug, Clone)]
pub struct Router {
    pub(super) forwarder: Forwarder,
    pub(super) local: watch::Receiver<Option<LocalSet>>,
    site: Arc<SiteConfig>,
    member_keys: Arc<MemberKeys>,
}

impl Router {
    /// A router sending calls with `forwarder`, answering those of its own set with
    /// the service `local` holds (none until the node belongs to a set), and
    /// describing the service in HS_SITE as `site` says.
    pub fn new(
        forwarder: Forwarder,
        local: watch::Receiver<Option<LocalSet>>,
        site: SiteConfig,
    ) -> Router {
        Router {
            forwarder,
            local,
            site: Arc::new(site),
            member_keys: Arc::default(),
        }
    }

    /// This router, putting the server keys `keys` holds in the HS_SITE of a ring.
    pub fn with_member_keys(self, keys: Arc<MemberKeys>) -> Router {
        Router {
            member_keys: keys,
            ..self
        }
    }

    /// This node's own service, if it belongs to a set.
    pub(super) fn local_service(&self) -> Result<Service, Error> {
        let local = self.local.borrow();
        local
            .as_ref()
            .map(|set| set.service.clone())
            .ok_or(Error::NoSet)
    }

    async fn route(&self, handle: &Handle, call: ForwardCall) -> Result<Answer, Error> {
        self.forwarder.route(handle, call, Some(&self.local)).await
    }

    async fn record(&self, handle: &Handle, call: ForwardCall) -> Result<HandleRecord, Error> {
        match self.route(handle, call).await? {
            Answer::Record(record) => Ok(record),
            other => Err(unexpected(&other)),
        }
    }

    /// Sends a write to the owner of the target's slot (homing or unhoming a prefix to
    /// the owner of its prefix handle's), with the client's name for it if it gave one.
    async fn administer_named(
        &self,
        caller: &Caller,
        operation: Operation,
        request: Option<ClientRequest>,
    ) -> Result<Applied, Error> {
        let handle = operation.routing_handle()?;
        let call = ForwardCall::Administer {
            caller: caller.clone(),
            operation,
            request,
        };
        match self.route(&handle, call).await? {
            Answer::Applied(applied) => Ok(applied),
            other => Err(unexpected(&other)),
        }
    }
}

#[async_trait]
impl Handler for Router {
    async fn resolve(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        freshness: Freshness,
    ) -> Result<HandleRecord, Error> {
        let call = ForwardCall::Resolve {
            handle: handle.clone(),
            selection: selection.clone(),
            freshness,
        };
        self.record(handle, call).await
    }

    /// A resolution of a handle in this node's own slots, unless it must wait (AT);
    /// any other, or a slot that turns out not to be here, is routed as any call.
    fn resolve_at_once(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        freshness: Freshness,
    ) -> Option<Result<HandleRecord, Error>> {
        if freshness != Freshness::Local {
            return None;
        }
        let map = self.forwarder.map().ok()?;
        let Ok(Place::Local { service, routed }) =
            self.forwarder.place(&map, handle, Some(&self.local))
        else {
            return None;
        };
        match service.read_resolved(handle, selection, routed) {
            Err(Error::NotHere(_) | Error::Refused(Refusal::NotHere(_))) => None,
            answered => Some(answered),
        }
    }

    /// This node's own service decides, reading the prefix handle (or a missing
    /// prefix handle's ancestors) once, and the base and cited handles of a
    /// template, from their owners.
    async fn missing(&self, handle: &Handle, selection: &ValueSelection) -> Result<Missing, Error> {
        self.local_service()?.missing(handle, selection).await
    }

    async fn private_read(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
    ) -> Result<PrivateRead, Error> {
        let call = ForwardCall::PrivateRead {
            handle: handle.clone(),
            selection: selection.clone(),
        };
        match self.route(handle, call).await? {
            Answer::PrivateRead(read) => Ok(read),
            other => Err(unexpected(&other)),
        }
    }

    async fn resolve_all(
        &self,
        caller: &Caller,
        handle: &Handle,
        selection: &ValueSelection,
        freshness: Freshness,
    ) -> Result<HandleRecord, Error> {
        let call = ForwardCall::ResolveAll {
            caller: caller.clone(),
            handle: handle.clone(),
            selection: selection.clone(),
            freshness,
        };
        self.record(handle, call).await
    }

    /// Goes to the owner of the target's slot; homing or unhoming a prefix to the
    /// owner of its prefix handle's.
    async fn administer(&self, caller: &Caller, operation: Operation) -> Result<Applied, Error> {
        self.administer_named(caller, operation, None).await
    }

    /// Goes where [`Handler::administer`] goes, with the client's name for it.
    async fn administer_request(
        &self,
        caller: &Caller,
        operation: Operation,
        request: ClientRequest,
    ) -> Result<Applied, Error> {
        self.administer_named(caller, operation, Some(request))
            .await
    }

    async fn mint(
        &self,
        caller: &Caller,
        base: &str,
        values: Vec<HandleValue>,
    ) -> Result<(Handle, Applied), Error> {
        mint_with(self, caller, base, values).await
    }

    async fn count_handles(&self, caller: &Caller, prefix: &str) -> Result<u64, Error> {
        self.count_everywhere(caller, prefix).await
    }

    async fn list_handles(
        &self,
        caller: &Caller,
        prefix: &str,
        after: Option<&Handle>,
        limit: usize,
    ) -> Result<Vec<String>, Error> {
        self.list_everywhere(caller, prefix, after, limit).await
    }

    async fn search_handles(
        &self,
        caller: &Caller,
        query: &SearchQuery,
        after: Option<&SearchPosition>,
        limit: usize,
    ) -> Result<Vec<Found>, Error> {
        self.search_everywhere(caller, query, after, limit).await
    }

    async fn list_prefixes(&self, caller: &Caller) -> Result<Vec<PrefixRecord>, Error> {
        self.prefixes_everywhere(caller).await
    }

    /// With one set (or no ring yet): this node's set as one site. With several: the
    /// site of this node's rank, one server entry per slot.
    async fn site_info(&self) -> SiteInfo {
        let map = self.forwarder.map().unwrap_or_default();
        let local = self.local_service();
        match local {
            Ok(service) if map.slot_count() == 0 || map.sets.len() <= 1 => {
                service.site_info().await
            }
            _ => {
                let keys = self.member_keys.snapshot();
                describe_ring(&self.site, &map, self.forwarder.rank(&map), &keys)
            }
        }
    }

    fn status(&self) -> Status {
        match self.local_service() {
            Ok(service) => service.status(),
            Err(_) => Status::unjoined(),
        }
    }

    async fn verify_answer(
        &self,
        challenge: &Challenge,
        answer: &ChallengeAnswer,
    ) -> Result<Identity, Error> {
        self.local_service()?.verify_answer(challenge, answer).await
    }

    async fn verify_secret(&self, identity: &Identity, secret: &[u8]) -> Result<Identity, Error> {
        self.local_service()?.verify_secret(identity, secret).await
    }

    async fn verify_for_other_server(
        &self,
        request: &VerifyRequest,
        version: ProtocolVersion,
    ) -> Result<bool, Error> {
        self.local_service()?
            .verify_for_other_server(request, version)
            .await
    }

    async fn key_exchange(&self, exchange: KeyExchange) -> Result<KeyAgreement, Error> {
        self.local_service()?.key_exchange(exchange).await
    }
}
