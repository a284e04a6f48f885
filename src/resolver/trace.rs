//! The steps of a global resolution, for `hdl resolve --trace` (as the reference
//! `hdl-trace` prints them). Owns [`Step`] and [`TraceSink`]; pure (depends on
//! [`crate::codec`] for the referral a step reports).

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::codec::{Referral, ResponseCode};

/// Receives each step of a resolution as it happens.
pub type TraceSink = Arc<dyn Fn(&Step) + Send + Sync>;

/// One step of a global resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A request for `handle` goes to `servers`, in that order.
    Asking {
        /// The handle asked for.
        handle: String,
        /// The servers, in the order asked.
        servers: Vec<SocketAddr>,
    },
    /// The service of `prefix` was known from the cache.
    Cached {
        /// The prefix.
        prefix: String,
        /// How many sites it has.
        sites: usize,
    },
    /// The sites of `prefix`'s service were learnt, and kept for `ttl`.
    Sites {
        /// The prefix.
        prefix: String,
        /// How many sites.
        sites: usize,
        /// How long they are cached.
        ttl: Duration,
    },
    /// An HS_SERV (or HS_SERV.PREFIX) value named a service handle, asked next.
    ServiceHandle {
        /// The service handle.
        handle: String,
    },
    /// The server answered with a referral.
    Referred {
        /// The referral's response code (302 or 303).
        code: u32,
        /// The handle it names (empty in a prefix referral).
        to: String,
        /// How many values it carried.
        values: usize,
    },
    /// An HS_ALIAS was followed.
    Alias {
        /// The alias.
        from: String,
        /// Its target.
        to: String,
    },
    /// The handle was resolved.
    Resolved {
        /// The handle.
        handle: String,
        /// How many values came back.
        values: usize,
    },
}

impl Step {
    /// The step of a referral answered with `code`.
    pub fn referred(code: ResponseCode, referral: &Referral) -> Step {
        Step::Referred {
            code: code.to_u32(),
            to: String::from_utf8_lossy(&referral.handle).into_owned(),
            values: referral.values.as_ref().map_or(0, Vec::len),
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Asking { handle, servers } => {
                let servers: Vec<String> = servers.iter().map(ToString::to_string).collect();
                write!(f, "asking {} for {handle}", servers.join(", "))
            }
            Step::Cached { prefix, sites } => {
                write!(f, "service of {prefix}: {sites} site(s) from the cache")
            }
            Step::Sites { prefix, sites, ttl } => write!(
                f,
                "service of {prefix}: {sites} site(s), cached for {} s",
                ttl.as_secs()
            ),
            Step::ServiceHandle { handle } => write!(f, "following service handle {handle}"),
            Step::Referred { code, to, values } => {
                write!(f, "referral {code} to {to:?} with {values} value(s)")
            }
            Step::Alias { from, to } => write!(f, "{from} is an alias of {to}"),
            Step::Resolved { handle, values } => write!(f, "resolved {handle}: {values} value(s)"),
        }
    }
}
