//! `/api/handles/{handle}`: GET (resolve), PUT (create, replace, add or replace
//! values, mint a suffix) and DELETE (the handle or some values), after the
//! Handle.Net REST API (`HANDLE-NET-REFERENCE.md` §1.2).
//!
//! The handle is the rest of the path, percent-decoded as UTF-8 (`/` included); the
//! answer's `handle` echoes it as spelled. Every write goes through [`administer`],
//! which has the primary of the replica set apply it.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Uri, header};
use axum::response::Response;
use serde_json::json;

use super::HttpState;
use super::answer::{Failure, Format};
use super::codes::{Operation, http_status};
use super::query::{Query, QueryError, decode};
use crate::codec::ResponseCode;
use crate::names::{Handle, fold_key};
use crate::restjson::{parse_body, resolution_json};
use crate::service::{Caller, Error, Freshness};
use crate::replication::HandleCommand as Command;
use crate::storage::{Applied, ExistingHandle, ExistingValue};
use crate::values::HandleValue;

/// The path before the handle.
const API_PREFIX: &str = "/api/handles/";

/// Applies an administrative command for `caller` through the replica set: the HTTP
/// edge's one way to write.
pub async fn administer(
    state: &HttpState,
    caller: &Caller,
    command: Command,
) -> Result<Applied, Failure> {
    Ok(state.service.administer(caller, command).await?)
}

/// One API request on a handle: what every method reads first.
struct ApiRequest {
    spelled: String,
    query: Query,
    format: Format,
    caller: Caller,
}

impl ApiRequest {
    /// Reads the query and the handle; a malformed one is answered 400 at once.
    fn read(uri: &Uri, caller: Caller) -> Result<ApiRequest, Box<Response>> {
        let plain = Format::default();
        let query = Query::parse(uri.query())
            .map_err(|error| Failure::from(error).answer(Operation::Other, None, &plain))?;
        let format =
            Format::of(&query).map_err(|failure| failure.answer(Operation::Other, None, &plain))?;
        let raw = uri.path().strip_prefix(API_PREFIX).unwrap_or_default();
        let spelled = decode(raw, "path")
            .and_then(|octets| String::from_utf8(octets).map_err(|_| QueryError::NotUtf8("path")))
            .map_err(|error| {
                Box::new(Failure::from(error).answer(Operation::Other, None, &format))
            })?;
        Ok(ApiRequest {
            spelled,
            query,
            format,
            caller,
        })
    }

    fn handle(&self) -> Result<Handle, Failure> {
        Ok(Handle::parse(&self.spelled)?)
    }

    fn fail(&self, failure: &Failure, operation: Operation) -> Response {
        failure.answer(operation, Some(&self.spelled), &self.format)
    }

    fn done(&self, handle: &str, operation: Operation) -> Response {
        let body = json!({"responseCode": 1, "handle": handle});
        self.format
            .answer(http_status(ResponseCode::Success, operation), &body)
    }

    /// The selected values: public ones, or with `publicOnly=false` every one (for an
    /// administrator). No value matched is an empty list.
    async fn resolve(&self, state: &HttpState) -> Result<Vec<HandleValue>, Failure> {
        let handle = self.handle()?;
        let selection = self.query.selection()?;
        let freshness = freshness(&self.query)?;
        let found = if self.query.flag("publicOnly", true)? {
            state.service.resolve(&handle, &selection, freshness).await
        } else {
            let service = &state.service;
            service
                .resolve_all(&self.caller, &handle, &selection, freshness)
                .await
        };
        match found {
            Ok(record) => Ok(record.values),
            Err(Error::ValuesNotFound) => Ok(Vec::new()),
            Err(error) => Err(error.into()),
        }
    }

    async fn put(&self, state: &HttpState, body: &[u8]) -> Result<(String, Applied), Failure> {
        let json: serde_json::Value = serde_json::from_slice(body).map_err(|error| {
            Failure::new(
                ResponseCode::ProtocolError,
                format!("malformed JSON: {error}"),
            )
        })?;
        let parsed = parse_body(&json)?;
        if self.query.flag("mintNewSuffix", false)? {
            return self.mint(state, parsed.values).await;
        }
        let handle = self.handle()?;
        if let Some(named) = &parsed.handle
            && fold_key(named) != handle.key()
        {
            let message = format!(
                "the body names handle {named:?}, the path {:?}",
                self.spelled
            );
            return Err(Failure::new(ResponseCode::InvalidHandle, message));
        }
        let command = self.put_command(handle, parsed.values)?;
        let applied = administer(state, &self.caller, command).await?;
        Ok((self.spelled.clone(), applied))
    }

    /// Without `index=`: create or (unless `overwrite=false`) replace the handle.
    /// With `index=various`, or indexes that name exactly the body's values: add or
    /// replace those values.
    fn put_command(&self, handle: Handle, values: Vec<HandleValue>) -> Result<Command, Failure> {
        let various = self.query.all("index").any(|index| index == "various");
        let mut indexes = self.query.indexes()?;
        if !various && indexes.is_empty() {
            let existing = if self.query.flag("overwrite", true)? {
                ExistingHandle::Overwrite
            } else {
                ExistingHandle::Refuse
            };
            return Ok(Command::Create {
                handle,
                values,
                existing,
            });
        }
        let mut sent: Vec<_> = values.iter().map(|value| value.index).collect();
        indexes.sort_unstable();
        indexes.dedup();
        sent.sort_unstable();
        if !various && indexes != sent {
            let message = "the index= parameters must name exactly the values of the body";
            return Err(Failure::new(ResponseCode::ProtocolError, message));
        }
        Ok(Command::AddValues {
            handle,
            values,
            existing: ExistingValue::Replace,
        })
    }

    /// Creates the path's prefix (or `prefix/start`) followed by a random UUID.
    async fn mint(
        &self,
        state: &HttpState,
        values: Vec<HandleValue>,
    ) -> Result<(String, Applied), Failure> {
        let (handle, applied) = state
            .service
            .mint(&self.caller, &self.spelled, values)
            .await?;
        Ok((handle.as_str().to_owned(), applied))
    }

    async fn delete(&self, state: &HttpState) -> Result<(), Failure> {
        let handle = self.handle()?;
        let indexes = self.query.indexes()?;
        let command = match (self.query.first("index"), indexes.is_empty()) {
            (None, _) => Command::Delete { handle },
            (Some(_), false) => Command::RemoveValues { handle, indexes },
            (Some(_), true) => {
                let message = "DELETE takes numeric index= parameters, or none for the handle";
                return Err(Failure::new(ResponseCode::ProtocolError, message));
            }
        };
        administer(state, &self.caller, command).await.map(drop)
    }
}

/// `auth=true` asks for every write acknowledged before the request (the AT flag);
/// otherwise this member's applied state answers.
pub fn freshness(query: &Query) -> Result<Freshness, QueryError> {
    Ok(if query.flag("auth", false)? {
        Freshness::Authoritative
    } else {
        Freshness::Local
    })
}

/// `GET /api/handles/{handle}`.
pub async fn get(
    State(state): State<HttpState>,
    Extension(caller): Extension<Caller>,
    uri: Uri,
) -> Response {
    let request = match ApiRequest::read(&uri, caller) {
        Ok(request) => request,
        Err(response) => return *response,
    };
    match request.resolve(&state).await {
        Ok(values) if values.is_empty() => {
            let body = json!({"responseCode": 200, "handle": request.spelled, "values": []});
            let status = http_status(ResponseCode::ValuesNotFound, Operation::Resolve);
            request.format.answer(status, &body)
        }
        Ok(values) => {
            let body = resolution_json(&request.spelled, &values);
            request.format.answer(
                http_status(ResponseCode::Success, Operation::Resolve),
                &body,
            )
        }
        Err(failure) => request.fail(&failure, Operation::Resolve),
    }
}

/// `PUT /api/handles/{handle}`: the body must be `application/json`.
pub async fn put(
    State(state): State<HttpState>,
    Extension(caller): Extension<Caller>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = match ApiRequest::read(&uri, caller) {
        Ok(request) => request,
        Err(response) => return *response,
    };
    if !is_json(&headers) {
        let failure = Failure::new(
            ResponseCode::ProtocolError,
            "Content-Type must be application/json",
        );
        return request.fail(&failure, Operation::Other);
    }
    match request.put(&state, &body).await {
        Ok((handle, Applied::Created)) => request.done(&handle, Operation::Created),
        Ok((handle, _)) => request.done(&handle, Operation::Other),
        Err(failure) => request.fail(&failure, Operation::Other),
    }
}

/// `DELETE /api/handles/{handle}[?index=…]`.
pub async fn delete(
    State(state): State<HttpState>,
    Extension(caller): Extension<Caller>,
    uri: Uri,
) -> Response {
    let request = match ApiRequest::read(&uri, caller) {
        Ok(request) => request,
        Err(response) => return *response,
    };
    match request.delete(&state).await {
        Ok(()) => request.done(&request.spelled, Operation::Other),
        Err(failure) => request.fail(&failure, Operation::Other),
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}
