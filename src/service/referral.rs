//! What a server answers instead of "not found" when asked about a handle that is not
//! its to answer (digest §3.9, §9): the Global Handle Registry role.
//!
//! Owns [`Referral`], [`Service::referral`] and the referral of a missing prefix
//! handle; module `missing` reads the records they look at, once, and asks a template
//! first. A handle missing here (and not derived) is looked at by its prefix `P`:
//! - Under a prefix this store knows (it holds handles under it, or `P` is homed here),
//!   or under a `0.` naming authority other than `0.NA`: not found is the answer.
//! - A prefix handle `0.NA/P` missing here: when the nearest ancestor prefix handle held
//!   here (`0.NA/10` for `0.NA/10.5555`, RFC 3651 derived prefixes) delegates its
//!   derived prefixes (public HS_SITE.PREFIX, HS_SERV.PREFIX or HS_NA_DELEGATE values),
//!   a prefix referral (RC 303) carrying them; else not found.
//! - Any other handle: when this service holds `0.NA/P` with public HS_SITE, HS_SITE.6
//!   or HS_SERV values (it is the GHR of `P`), a service referral (RC 302) naming
//!   `0.NA/P` with those values; when it holds `0.NA/P` without them, not found (the
//!   prefix is administered here); else, on a service set to [`Unserved::Refuse`]
//!   (`[resolver] refuse_unserved`, by default on a service that knows a GHR),
//!   [`Missing::NotHomed`] (RC 301, J9's "That prefix doesn't live here"), and "not
//!   found" on one at [`Unserved::NotFound`] (a service with no GHR is the whole
//!   namespace and answers every prefix, as hdl always has).
//!
//! Reads prefix handles through the records of module `records` (from the replica set
//! owning them); the "knows the prefix" test is this member's store, as the key checks'
//! is. Knows nothing of the wire: the edge encodes the referral.

use crate::names::{Handle, PREFIX_AUTHORITY, prefix_handle};
use crate::values::{HandleValue, KnownType, Permissions};

use super::{Error, Missing, Service};

/// How many ancestor prefix handles a derived prefix handle's referral looks at.
pub const MAX_PREFIX_ANCESTORS: usize = 16;

/// What a service answers for a missing handle under a prefix it does not serve and
/// knows no service of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Unserved {
    /// RC_HANDLE_NOT_FOUND (100): a service on its own, answering every prefix.
    #[default]
    NotFound,
    /// RC_SERVER_NOT_RESP (301): a service among others under a GHR, which serves
    /// only the prefixes it homes or holds handles of.
    Refuse,
}

/// Where a client should ask instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Referral {
    /// RC_SERVICE_REFERRAL (302): the prefix handle `handle` held here names the
    /// service of the handle asked about with `values` (HS_SITE, HS_SITE.6, HS_SERV).
    Service {
        /// The prefix handle `0.NA/<prefix>`.
        handle: Handle,
        /// Its public service values.
        values: Vec<HandleValue>,
    },
    /// RC_PREFIX_REFERRAL (303): the prefix handle asked about lives at the service
    /// that `values` (an ancestor's HS_SITE.PREFIX, HS_SERV.PREFIX, HS_NA_DELEGATE)
    /// describe; the client sends the same request there.
    Prefix {
        /// The ancestor's public delegation values.
        values: Vec<HandleValue>,
    },
}

impl Service {
    /// What answers a resolution of `handle` (not a prefix handle, not under a `0.`
    /// authority), which this service does not hold and no template derives, given
    /// the values of its prefix handle `prefix_handle` (`None`: it does not exist).
    pub(super) fn referral(
        &self,
        handle: &Handle,
        prefix_handle: Handle,
        prefix_values: Option<Vec<HandleValue>>,
    ) -> Result<Missing, Error> {
        if self.knows_prefix(handle.prefix_key())? {
            return Ok(Missing::NotFound);
        }
        match prefix_values {
            None if self.unserved == Unserved::Refuse => Ok(Missing::NotHomed {
                prefix: handle.prefix().to_owned(),
            }),
            None => Ok(Missing::NotFound),
            Some(values) => {
                let values = public_of(values, &SERVICE_TYPES);
                if values.is_empty() {
                    return Ok(Missing::NotFound);
                }
                Ok(Missing::Referred(Referral::Service {
                    handle: prefix_handle,
                    values,
                }))
            }
        }
    }

    /// Whether this member's store holds handles under `prefix` (folded) or homes it.
    pub(super) fn knows_prefix(&self, prefix: &str) -> Result<bool, Error> {
        Ok(self.store.read()?.prefix(prefix)?.is_some())
    }

    /// The referral for the missing prefix handle `0.NA/<prefix>`: the delegation
    /// values of the nearest ancestor prefix handle held here, if it has any.
    pub(super) async fn prefix_referral(&self, prefix: &str) -> Result<Option<Referral>, Error> {
        for ancestor in ancestors(prefix).take(MAX_PREFIX_ANCESTORS) {
            let Ok(handle) = prefix_handle(ancestor) else {
                return Ok(None);
            };
            if let Some(values) = self.values_of(&handle).await? {
                let values = public_of(values, &DELEGATION_TYPES);
                return Ok((!values.is_empty()).then_some(Referral::Prefix { values }));
            }
        }
        Ok(None)
    }
}

/// The types naming a prefix's service.
const SERVICE_TYPES: [KnownType; 3] = [KnownType::HsSite, KnownType::HsSite6, KnownType::HsServ];

/// The types naming the service of a prefix's derived prefixes.
const DELEGATION_TYPES: [KnownType; 3] = [
    KnownType::HsSitePrefix,
    KnownType::HsServPrefix,
    KnownType::HsNaDelegate,
];

/// The publicly readable values of `values` of one of `types`.
fn public_of(values: Vec<HandleValue>, types: &[KnownType]) -> Vec<HandleValue> {
    values
        .into_iter()
        .filter(|value| value.permissions.contains(Permissions::PUBLIC_READ))
        .filter(|value| value.known_type().is_some_and(|t| types.contains(&t)))
        .collect()
}

/// The prefixes `prefix` is derived from, nearest first: `10.5555.1` gives `10.5555`,
/// `10`. The GHR's own `0.NA` is never one.
fn ancestors(prefix: &str) -> impl Iterator<Item = &str> {
    std::iter::successors(parent(prefix), |p| parent(p))
        .take_while(|p| !p.eq_ignore_ascii_case(PREFIX_AUTHORITY))
}

/// `prefix` without its last `.segment`, if it has one.
fn parent(prefix: &str) -> Option<&str> {
    prefix
        .rsplit_once('.')
        .map(|(parent, _)| parent)
        .filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_prefixes_have_their_ancestors_nearest_first() {
        assert_eq!(
            ancestors("10.5555.1").collect::<Vec<_>>(),
            ["10.5555", "10"]
        );
        assert_eq!(ancestors("10").count(), 0);
        assert_eq!(ancestors(".x").count(), 0);
        assert_eq!(ancestors("0.NA.x").count(), 0);
    }

    #[test]
    fn only_public_values_of_the_asked_types_are_referred() {
        let hidden = HandleValue {
            permissions: Permissions::ADMIN_ONLY,
            ..HandleValue::new(3, "HS_SITE", vec![1])
        };
        let values = vec![
            HandleValue::new(1, "HS_SITE", vec![1]),
            HandleValue::new(2, "HS_SITE.PREFIX", vec![2]),
            hidden,
            HandleValue::new(4, "HS_SERV", "0.NA/x"),
            HandleValue::new(5, "HS_ADMIN", vec![0]),
        ];
        let service: Vec<u32> = public_of(values.clone(), &SERVICE_TYPES)
            .iter()
            .map(|v| v.index.0)
            .collect();
        assert_eq!(service, [1, 4]);
        let delegation: Vec<u32> = public_of(values, &DELEGATION_TYPES)
            .iter()
            .map(|v| v.index.0)
            .collect();
        assert_eq!(delegation, [2]);
    }
}
