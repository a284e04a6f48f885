//! What administrative and resolution requests mean for the store, and how their
//! outcomes are answered: the mapping from Handle protocol request bodies to store
//! commands, handle names and selections, and [`Rejection`]/[`Done`] messages.
//!
//! Owns no state and touches no socket; the [`super::responder`] calls it.

use crate::codec::{Message, OpFlags, Request, ResolutionRequest, Response, ResponseCode};
use crate::names::{Handle, NameError, named_prefix, prefix_handle};
use crate::service::Error;
use crate::storage::{Command, ExistingHandle, ExistingValue};
use crate::values::ValueSelection;

use super::codes::response_code;
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

/// A request answered with an error code and a message.
pub(super) struct Rejection {
    pub(super) code: ResponseCode,
    pub(super) message: String,
}

impl Rejection {
    pub(super) fn new(code: ResponseCode, message: impl Into<String>) -> Self {
        Rejection {
            code,
            message: message.into(),
        }
    }

    pub(super) fn into_message(self, exchange: &Exchange) -> Message {
        exchange.error(self.code, self.message)
    }
}

impl From<Error> for Rejection {
    fn from(error: Error) -> Self {
        Rejection::new(response_code(&error), error.to_string())
    }
}

impl From<NameError> for Rejection {
    fn from(error: NameError) -> Self {
        Rejection::new(ResponseCode::InvalidHandle, error.to_string())
    }
}

/// The handle a request names. A handle without `/` means the prefix handle
/// `0.NA/<it>`, as the reference server reads it.
pub(super) fn parse_handle(bytes: &[u8]) -> Result<Handle, Rejection> {
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
) -> Result<(Handle, ValueSelection), Rejection> {
    let handle = parse_handle(&request.handle)?;
    let types = request
        .types
        .iter()
        .map(|t| String::from_utf8(t.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| Rejection::new(ResponseCode::ProtocolError, "a type is not UTF-8"))?;
    let selection = ValueSelection {
        indexes: request.indexes.clone(),
        types,
    };
    Ok((handle, selection))
}

/// The naming authority a list request names: `0.NA/<prefix>` or the bare prefix.
pub(super) fn list_prefix(bytes: &[u8]) -> Result<String, Rejection> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| Rejection::new(ResponseCode::InvalidHandle, "prefix is not UTF-8"))?;
    let prefix = match named_prefix(text) {
        Some(prefix) => prefix,
        None if text.contains('/') => {
            let message = "list takes a prefix handle 0.NA/<prefix> or a bare prefix";
            return Err(Rejection::new(ResponseCode::InvalidHandle, message));
        }
        None => text,
    };
    if prefix.is_empty() {
        return Err(Rejection::new(ResponseCode::InvalidHandle, "empty prefix"));
    }
    Ok(prefix.to_owned())
}

/// The store command an administrative request asks for.
pub(super) fn admin_command(flags: OpFlags, request: Request) -> Result<Command, Rejection> {
    Ok(match request {
        Request::CreateHandle(body) => {
            let existing = if flags.contains(OpFlags::OW) {
                ExistingHandle::Overwrite
            } else {
                ExistingHandle::Refuse
            };
            Command::Create {
                handle: parse_handle(&body.handle)?,
                values: body.values,
                existing,
            }
        }
        Request::DeleteHandle { handle } => Command::Delete {
            handle: parse_handle(&handle)?,
        },
        Request::AddValue(body) => Command::AddValues {
            handle: parse_handle(&body.handle)?,
            values: body.values,
            existing: if flags.contains(OpFlags::OW) {
                ExistingValue::Replace
            } else {
                ExistingValue::Refuse
            },
        },
        Request::ModifyValue(body) => Command::ModifyValues {
            handle: parse_handle(&body.handle)?,
            values: body.values,
        },
        Request::RemoveValue { handle, indexes } => Command::RemoveValues {
            handle: parse_handle(&handle)?,
            indexes,
        },
        Request::Resolution(_)
        | Request::GetSiteInfo { .. }
        | Request::ListHandles { .. }
        | Request::ChallengeResponse(_)
        | Request::VerifyResponse(_)
        | Request::SessionSetup(_)
        | Request::SessionTerminate { .. }
        | Request::SessionExchangeKey { .. } => {
            let message = "not an administrative request";
            return Err(Rejection::new(ResponseCode::ProtocolError, message));
        }
    })
}

/// Whether `request` needs an authenticated administrator (digest §3.4, §3.5), or
/// is a session setup naming an identity, which is challenged as one (§3.8).
pub(super) fn is_administrative(request: &Request) -> bool {
    match request {
        Request::SessionSetup(setup) => !setup.identity_handle.is_empty(),
        other => matches!(
            other,
            Request::CreateHandle(_)
                | Request::DeleteHandle { .. }
                | Request::AddValue(_)
                | Request::RemoveValue { .. }
                | Request::ModifyValue(_)
                | Request::ListHandles { .. }
        ),
    }
}
