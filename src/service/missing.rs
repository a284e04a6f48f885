//! What answers a resolution of a handle that does not exist, and the one resolution
//! every edge runs.
//!
//! Owns [`Missing`] (a template-derived answer, a referral, "not served here" or "not
//! found"), [`Service::missing`], which decides it, and [`resolve_or_refer`] /
//! [`resolve_or_derive`], the resolutions of the Handle protocol and of HTTP
//! ([`resolve_or_refer_noting`] also says whether the answer was read from this node's
//! own store at once, [`Answered`]).
//!
//! For a missing handle `P/name` the prefix handle `0.NA/P` is read once (from this
//! member's store, or from the replica set owning it) and both questions are asked of
//! those values, in this order: its public HS_NAMESPACE template derives the handle
//! (module `template`; a malformed one is an error); else its service values refer the
//! client elsewhere (module `referral`), or say the prefix is not served here, or "not
//! found" is the answer. A missing prefix handle `0.NA/P` is never derived: its nearest
//! ancestor prefix handle's delegation values may refer it (read once each, nearest
//! first). Handles under `0` or a `0.` naming authority are neither derived nor
//! referred.

use crate::names::{Handle, prefix_handle};
use crate::values::ValueSelection;

use super::{Caller, Error, Freshness, Handler, Referral, Resolved, Service};

/// What answers a resolution of a handle that does not exist.
#[derive(Debug, Clone)]
pub enum Missing {
    /// Its prefix's template derives these values.
    Derived(Resolved),
    /// It lives at another service: RC 302 or 303 (digest §3.9).
    Referred(Referral),
    /// Its prefix is not served here and no service of it is known: RC 301.
    NotHomed {
        /// The prefix, as written.
        prefix: String,
    },
    /// "Not found" is the answer.
    NotFound,
}

/// A resolution's answer: values (stored or derived), or where to ask instead.
#[derive(Debug, Clone)]
pub enum Resolution {
    /// The values.
    Values(Resolved),
    /// The handle is not here; the referral says where it lives.
    Referred(Referral),
}

/// How a resolution was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    /// With a record read from this node's own store at once
    /// ([`Handler::resolve_at_once`]): it changes only with a commit of that store.
    FromStore,
    /// Any other way: forwarded, derived, referred, refused, or awaited.
    Otherwise,
}

/// Resolves `handle` at `handler`: its public values, or with `reader` every value
/// that administrator may read ([`Handler::resolve_all`]); a handle that does not
/// exist is answered as [`Handler::missing`] says ([`Error::NotHomed`] when its
/// prefix is not served here, else [`Error::HandleNotFound`] when nothing answers it).
pub async fn resolve_or_refer(
    handler: &dyn Handler,
    reader: Option<&Caller>,
    handle: &Handle,
    selection: &ValueSelection,
    freshness: Freshness,
) -> Result<Resolution, Error> {
    resolve_or_refer_noting(handler, reader, handle, selection, freshness)
        .await
        .0
}

/// [`resolve_or_refer`], and how it was answered: an edge keeping answers keeps only
/// those [`Answered::FromStore`].
pub async fn resolve_or_refer_noting(
    handler: &dyn Handler,
    reader: Option<&Caller>,
    handle: &Handle,
    selection: &ValueSelection,
    freshness: Freshness,
) -> (Result<Resolution, Error>, Answered) {
    let (found, answered) = match reader {
        None => match handler.resolve_at_once(handle, selection, freshness) {
            Some(found) => (found, Answered::FromStore),
            None => (
                handler.resolve(handle, selection, freshness).await,
                Answered::Otherwise,
            ),
        },
        Some(caller) => {
            let resolved = handler.resolve_all(caller, handle, selection, freshness);
            (resolved.await, Answered::Otherwise)
        }
    };
    let record = match found {
        Ok(record) => record,
        Err(Error::HandleNotFound) => {
            let missing = match handler.missing(handle, selection).await {
                Ok(Missing::Derived(resolved)) => Ok(Resolution::Values(resolved)),
                Ok(Missing::Referred(referral)) => Ok(Resolution::Referred(referral)),
                Ok(Missing::NotHomed { prefix }) => Err(Error::NotHomed { prefix }),
                Ok(Missing::NotFound) => Err(Error::HandleNotFound),
                Err(error) => Err(error),
            };
            return (missing, Answered::Otherwise);
        }
        Err(error) => return (Err(error), Answered::Otherwise),
    };
    let resolved = Resolved {
        record,
        template: None,
    };
    (Ok(Resolution::Values(resolved)), answered)
}

/// [`resolve_or_refer`] for an edge that has no referral to answer with (HTTP): a
/// handle that lives elsewhere, or under a prefix not served here, is
/// [`Error::HandleNotFound`]; a template still derives a missing one.
pub async fn resolve_or_derive(
    handler: &dyn Handler,
    reader: Option<&Caller>,
    handle: &Handle,
    selection: &ValueSelection,
    freshness: Freshness,
) -> Result<Resolved, Error> {
    match resolve_or_refer(handler, reader, handle, selection, freshness).await {
        Ok(Resolution::Values(resolved)) => Ok(resolved),
        Ok(Resolution::Referred(_)) | Err(Error::NotHomed { .. }) => Err(Error::HandleNotFound),
        Err(error) => Err(error),
    }
}

impl Service {
    /// What answers a resolution of `handle`, which this service does not hold (see
    /// the module docs).
    pub(super) async fn missing(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
    ) -> Result<Missing, Error> {
        if handle.is_prefix_handle() {
            let referral = self.prefix_referral(handle.local_name()).await?;
            return Ok(referral.map_or(Missing::NotFound, Missing::Referred));
        }
        let prefix = handle.prefix();
        if prefix == "0" || prefix.starts_with("0.") {
            return Ok(Missing::NotFound);
        }
        let Ok(prefix_handle) = prefix_handle(prefix) else {
            return Ok(Missing::NotFound);
        };
        let prefix_values = self.values_of(&prefix_handle).await?;
        let derived = self.derive(handle, selection, &prefix_handle, prefix_values.as_deref());
        if let Some(resolved) = derived.await? {
            return Ok(Missing::Derived(resolved));
        }
        self.referral(handle, prefix_handle, prefix_values)
    }
}
