//! What one node asks another about a handle whose slot the other's replica set owns,
//! and the answer: [`ForwardCall`] and [`ForwardAnswer`] (serde; the node layer
//! carries them over the peer link as postcard), and [`answer_forwarded`], which
//! answers a call with the receiving node's own [`Service`].
//!
//! A forwarded call is answered by the local service only, never routed again: a slot
//! the receiving store does not answer for is [`Error::NotHere`], which the sending
//! router turns into a re-route. Errors travel as [`Failure`]: the kinds a router
//! tells apart (not found, values not found, NotHere, refusals, busy, unavailable,
//! authentication needed, unreadable) keep their kind; any other keeps its response
//! code and message ([`Error::Remote`]).

use serde::{Deserialize, Serialize};

use crate::codec::ResponseCode;
use crate::names::Handle;
use crate::service::{
    Applied, Caller, ClientRequest, Error, Found, Freshness, HandleRecord, Handler, Operation,
    PrefixRecord, PrivateRead, Refusal, RoutedSlot, SearchPosition, Service,
};
use crate::storage::Slot;
use crate::values::{HandleValue, SearchQuery, ValueSelection};

/// The most handles a forwarded listing or search returns: the largest page an edge
/// asks for.
pub const MAX_PAGE: u32 = 10_000;

/// One handle operation sent to a node of the replica set owning the handle's slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ForwardCall {
    /// [`Handler::resolve`].
    Resolve {
        /// The handle.
        handle: Handle,
        /// The values asked for.
        selection: ValueSelection,
        /// How current the answer must be.
        freshness: Freshness,
    },
    /// [`Handler::private_read`].
    PrivateRead {
        /// The handle.
        handle: Handle,
        /// The values asked for.
        selection: ValueSelection,
    },
    /// [`Handler::resolve_all`].
    ResolveAll {
        /// Who asks, as the forwarding node proved it.
        caller: Caller,
        /// The handle.
        handle: Handle,
        /// The values asked for.
        selection: ValueSelection,
        /// How current the answer must be.
        freshness: Freshness,
    },
    /// [`Handler::administer`], or [`Handler::administer_request`] when the client
    /// named the request.
    Administer {
        /// Who asks, as the forwarding node proved it.
        caller: Caller,
        /// The change.
        operation: Operation,
        /// The client's name for the request, if it gave one.
        request: Option<ClientRequest>,
    },
    /// [`Handler::count_handles`], for the receiving set's handles only.
    CountHandles {
        /// Who asks.
        caller: Caller,
        /// The naming authority.
        prefix: String,
    },
    /// [`Handler::list_handles`], for the receiving set's handles only.
    ListHandles {
        /// Who asks.
        caller: Caller,
        /// The naming authority.
        prefix: String,
        /// The last handle of the previous page.
        after: Option<Handle>,
        /// The most handles to return (at most [`MAX_PAGE`]).
        limit: u32,
    },
    /// [`Handler::list_prefixes`], for the receiving set's store only.
    ListPrefixes {
        /// Who asks.
        caller: Caller,
    },
    /// Every value of a handle, for an authorisation or key check at the sender
    /// ([`Service::values_held_here`]).
    Values {
        /// The handle.
        handle: Handle,
    },
    /// [`Handler::search_handles`], for the receiving set's handles only.
    SearchHandles {
        /// Who asks.
        caller: Caller,
        /// What is looked for.
        query: SearchQuery,
        /// The position of the last hit of the previous page.
        after: Option<SearchPosition>,
        /// The most handles to return (at most [`MAX_PAGE`]).
        limit: u32,
    },
}

impl ForwardCall {
    /// The handle whose slot decides where the call goes; `None` for calls every set
    /// answers for its own handles (listing, counting) or prefix operations.
    pub fn handle(&self) -> Option<&Handle> {
        match self {
            ForwardCall::Resolve { handle, .. }
            | ForwardCall::PrivateRead { handle, .. }
            | ForwardCall::ResolveAll { handle, .. }
            | ForwardCall::Values { handle } => Some(handle),
            ForwardCall::Administer { operation, .. } => operation.handle(),
            ForwardCall::CountHandles { .. }
            | ForwardCall::ListHandles { .. }
            | ForwardCall::ListPrefixes { .. }
            | ForwardCall::SearchHandles { .. } => None,
        }
    }
}

/// What a forwarded call succeeded with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Answer {
    /// A handle's record.
    Record(HandleRecord),
    /// What a private read needs.
    PrivateRead(PrivateRead),
    /// A change carried out.
    Applied(Applied),
    /// A count of handles.
    Count(u64),
    /// A page of handles in folded-key order.
    Handles(Vec<String>),
    /// Naming authorities.
    Prefixes(Vec<PrefixRecord>),
    /// A handle's values; `None` when it does not exist.
    Values(Option<Vec<HandleValue>>),
    /// Handles a search found, in index order.
    Found(Vec<Found>),
}

impl Answer {
    /// The answer's kind, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Answer::Record(_) => "a record",
            Answer::PrivateRead(_) => "a private read",
            Answer::Applied(_) => "a change",
            Answer::Count(_) => "a count",
            Answer::Handles(_) => "handles",
            Answer::Prefixes(_) => "prefixes",
            Answer::Values(_) => "values",
            Answer::Found(_) => "found handles",
        }
    }
}

/// Why a forwarded call failed, as the sender rebuilds it ([`Error::from`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Failure {
    /// [`Error::HandleNotFound`].
    HandleNotFound,
    /// [`Error::ValuesNotFound`].
    ValuesNotFound,
    /// [`Error::NotHere`].
    NotHere(Slot),
    /// [`Error::Refused`].
    Refused(Refusal),
    /// [`Error::AuthenticationNeeded`].
    AuthenticationNeeded,
    /// [`Error::Unreadable`].
    Unreadable,
    /// [`Error::Busy`].
    Busy,
    /// [`Error::Unavailable`].
    Unavailable(Slot),
    /// Any other error: its response code and message.
    Other {
        /// The response code (RFC 3652).
        code: u32,
        /// The message.
        message: String,
    },
}

/// The answer to a [`ForwardCall`].
pub type ForwardAnswer = Result<Answer, Failure>;

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        match error {
            Error::HandleNotFound => Failure::HandleNotFound,
            Error::ValuesNotFound => Failure::ValuesNotFound,
            Error::NotHere(slot) => Failure::NotHere(slot),
            Error::Refused(refusal) => Failure::Refused(refusal),
            Error::AuthenticationNeeded => Failure::AuthenticationNeeded,
            Error::Unreadable => Failure::Unreadable,
            Error::Busy => Failure::Busy,
            Error::Unavailable(slot) => Failure::Unavailable(slot),
            other => Failure::Other {
                code: other.response_code().to_u32(),
                message: other.to_string(),
            },
        }
    }
}

impl From<Failure> for Error {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::HandleNotFound => Error::HandleNotFound,
            Failure::ValuesNotFound => Error::ValuesNotFound,
            Failure::NotHere(slot) => Error::NotHere(slot),
            Failure::Refused(refusal) => Error::Refused(refusal),
            Failure::AuthenticationNeeded => Error::AuthenticationNeeded,
            Failure::Unreadable => Error::Unreadable,
            Failure::Busy => Error::Busy,
            Failure::Unavailable(slot) => Error::Unavailable(slot),
            Failure::Other { code, message } => Error::Remote {
                code: ResponseCode::from_u32(code).unwrap_or(ResponseCode::Error),
                message,
            },
        }
    }
}

/// Answers `call` with `service`, this node's own: what the node's endpoint does
/// with a forwarded call.
pub async fn answer_forwarded(service: &Service, call: ForwardCall) -> ForwardAnswer {
    run_local(service, &call, None).await.map_err(Failure::from)
}

/// Carries `call` out with `service`, this node's own, a resolution reusing the slot
/// the router found for its handle (`routed`). Only a write takes its operation (a
/// copy of it): a call routed again is sent whole again.
pub(super) async fn run_local(
    service: &Service,
    call: &ForwardCall,
    routed: Option<RoutedSlot>,
) -> Result<Answer, Error> {
    Ok(match call {
        ForwardCall::Resolve {
            handle,
            selection,
            freshness,
        } => Answer::Record(
            service
                .resolve_routed(handle, selection, *freshness, routed)
                .await?,
        ),
        ForwardCall::PrivateRead { handle, selection } => {
            Answer::PrivateRead(service.private_read(handle, selection).await?)
        }
        ForwardCall::ResolveAll {
            caller,
            handle,
            selection,
            freshness,
        } => Answer::Record(
            service
                .resolve_all(caller, handle, selection, *freshness)
                .await?,
        ),
        ForwardCall::Administer {
            caller,
            operation,
            request: None,
        } => Answer::Applied(service.administer(caller, operation.clone()).await?),
        ForwardCall::Administer {
            caller,
            operation,
            request: Some(request),
        } => Answer::Applied(
            service
                .administer_request(caller, operation.clone(), *request)
                .await?,
        ),
        ForwardCall::CountHandles { caller, prefix } => {
            Answer::Count(service.count_handles(caller, prefix).await?)
        }
        ForwardCall::ListHandles {
            caller,
            prefix,
            after,
            limit,
        } => {
            let limit = usize::try_from((*limit).min(MAX_PAGE)).unwrap_or(0);
            let page = service
                .list_handles(caller, prefix, after.as_ref(), limit)
                .await?;
            Answer::Handles(page)
        }
        ForwardCall::ListPrefixes { caller } => {
            Answer::Prefixes(service.list_prefixes(caller).await?)
        }
        ForwardCall::Values { handle } => Answer::Values(service.values_held_here(handle)?),
        ForwardCall::SearchHandles {
            caller,
            query,
            after,
            limit,
        } => {
            let limit = usize::try_from((*limit).min(MAX_PAGE)).unwrap_or(0);
            let found = service
                .search_handles(caller, query, after.as_ref(), limit)
                .await?;
            Answer::Found(found)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_answers_round_trip_through_postcard() {
        let call = ForwardCall::ListHandles {
            caller: Caller::anonymous("192.0.2.1".parse().unwrap()),
            prefix: "10.1000".into(),
            after: Some(Handle::parse("10.1000/Abc").unwrap()),
            limit: 50,
        };
        let bytes = postcard::to_stdvec(&call).unwrap();
        assert_eq!(postcard::from_bytes::<ForwardCall>(&bytes).unwrap(), call);
        let answers: [ForwardAnswer; 2] = [
            Ok(Answer::Handles(vec!["10.1000/Abc".into()])),
            Err(Failure::Refused(Refusal::NotHere(Slot(3)))),
        ];
        for answer in answers {
            let bytes = postcard::to_stdvec(&answer).unwrap();
            assert_eq!(
                postcard::from_bytes::<ForwardAnswer>(&bytes).unwrap(),
                answer
            );
        }
    }

    #[test]
    fn errors_keep_their_kind_or_their_code_across_the_link() {
        let back = |error: Error| Error::from(Failure::from(error));
        assert!(matches!(
            back(Error::NotHere(Slot(9))),
            Error::NotHere(Slot(9))
        ));
        assert!(matches!(back(Error::HandleNotFound), Error::HandleNotFound));
        assert!(matches!(
            back(Error::Refused(Refusal::HandleExists)),
            Error::Refused(Refusal::HandleExists)
        ));
        let unknown = back(Error::KeyNotHeld {
            handle: "0.NA/X".into(),
        });
        assert_eq!(unknown.response_code(), ResponseCode::AuthenticationError);
        assert!(unknown.to_string().contains("0.NA/X"), "{unknown}");
    }
}
