//! What administrative and resolution requests ask of the service, and how their
//! successes are answered: the mapping from Handle protocol request bodies to
//! [`Operation`]s, handle names and selections, and [`Done`] messages (refusals are
//! [`Refusal`]s).
//!
//! Owns no state and touches no socket; the [`super::responder`] calls it.

use crate::codec::{Message, OpFlags, Request, ResolutionRequest, Response, ResponseCode};
use crate::names::{Handle, named_prefix, prefix_handle};
use crate::service::{ExistingHandle, ExistingValue, Operation};
use crate::values::ValueSelection;

use super::codes::Refusal;
use super::exchange::Exchange;

/// A successful administrative outcome.
pub(super) enum Done {
    /// Nothing to report.
    Plain,
    /// A handle was created (OW flag: it replaced one).
    Created(Vec<u8>, OpFlags),
}

impl Done {
    pub(super) fn into_message(self, exchange: &Exchange) -> Message {
        match self {
            Done::Plain => exchange.success(Response::Done),
            Done::Created(handle, flags) => exchange.reply(
                ResponseCode::Success,
                Response::CreateHandle {
                    handle: Some(handle),
                },
                flags,
            ),
        }
    }
}

/// The handle a request names. A handle without `/` means the prefix handle
/// `0.NA/<it>`, as the reference server reads it.
pub(super) fn parse_handle(bytes: &[u8]) -> Result<Handle, Refusal> {
    if !bytes.contains(&b'/')
        && let Ok(prefix) = std::str::from_utf8(bytes)
        && !prefix.is_empty()
    {
        return Ok(prefix_handle(prefix)?);
    }
    Ok(Handle::from_utf8(bytes)?)
}

pub(super) fn parse_resolution(
    request: &ResolutionRequest,
) -> Result<(Handle, ValueSelection), Refusal> {
    let handle = parse_handle(&request.handle)?;
    let types = request
        .types
        .iter()
        .map(|t| String::from_utf8(t.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| Refusal::new(ResponseCode::ProtocolError, "a type is not UTF-8"))?;
    let selection = ValueSelection {
        indexes: request.indexes.clone(),
        types,
    };
    Ok((handle, selection))
}

/// The naming authority a list or (un)home request names: `0.NA/<prefix>` or the
/// bare prefix.
pub(super) fn list_prefix(bytes: &[u8]) -> Result<String, Refusal> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| Refusal::new(ResponseCode::InvalidHandle, "prefix is not UTF-8"))?;
    let prefix = match named_prefix(text) {
        Some(prefix) => prefix,
        None if text.contains('/') => {
            let message = "list takes a prefix handle 0.NA/<prefix> or a bare prefix";
            return Err(Refusal::new(ResponseCode::InvalidHandle, message));
        }
        None => text,
    };
    if prefix.is_empty() {
        return Err(Refusal::new(ResponseCode::InvalidHandle, "empty prefix"));
    }
    Ok(prefix.to_owned())
}

/// The operation an administrative request asks for.
pub(super) fn admin_operation(flags: OpFlags, request: Request) -> Result<Operation, Refusal> {
    Ok(match request {
        Request::CreateHandle(body) => {
            let existing = if flags.contains(OpFlags::OW) {
                ExistingHandle::Overwrite
            } else {
                ExistingHandle::Refuse
            };
            Operation::Create {
                handle: parse_handle(&body.handle)?,
                values: body.values,
                existing,
            }
        }
        Request::DeleteHandle { handle } => Operation::Delete {
            handle: parse_handle(&handle)?,
        },
        Request::AddValue(body) => Operation::AddValues {
            handle: parse_handle(&body.handle)?,
            values: body.values,
            existing: if flags.contains(OpFlags::OW) {
                ExistingValue::Replace
            } else {
                ExistingValue::Refuse
            },
        },
        Request::ModifyValue(body) => Operation::ModifyValues {
            handle: parse_handle(&body.handle)?,
            values: body.values,
        },
        Request::RemoveValue { handle, indexes } => Operation::RemoveValues {
            handle: parse_handle(&handle)?,
            indexes,
        },
        Request::HomeNa { prefix } => Operation::HomePrefix {
            prefix: list_prefix(&prefix)?,
        },
        Request::UnhomeNa { prefix } => Operation::UnhomePrefix {
            prefix: list_prefix(&prefix)?,
        },
        Request::Resolution(_)
        | Request::GetSiteInfo { .. }
        | Request::ListHandles { .. }
        | Request::ListHomedNas { .. }
        | Request::ChallengeResponse(_)
        | Request::VerifyResponse(_)
        | Request::SessionSetup(_)
        | Request::SessionTerminate { .. }
        | Request::SessionExchangeKey { .. } => {
            let message = "not an administrative request";
            return Err(Refusal::new(ResponseCode::ProtocolError, message));
        }
    })
}

/// Whether `request` needs an authenticated administrator (digest §3.4–§3.6). A
/// session setup never does, whatever identity it names: as the reference server
/// does, the first administrative request inside the session is challenged (§3.8).
pub(super) fn is_administrative(request: &Request) -> bool {
    matches!(
        request,
        Request::CreateHandle(_)
            | Request::DeleteHandle { .. }
            | Request::AddValue(_)
            | Request::RemoveValue { .. }
            | Request::ModifyValue(_)
            | Request::ListHandles { .. }
            | Request::HomeNa { .. }
            | Request::UnhomeNa { .. }
            | Request::ListHomedNas { .. }
    )
}

/// Whether answering `request` may run a key check (a signature or secret-key answer,
/// or a session's key exchange): what an anonymous source's work budget is for.
pub(super) fn may_check_keys(request: &Request) -> bool {
    matches!(
        request,
        Request::ChallengeResponse(_) | Request::VerifyResponse(_) | Request::SessionSetup(_)
    )
}
