//! `/api/handles/{handle}`: GET (resolve), PUT (create, replace, add or replace
//! values, mint a suffix) and DELETE (the handle or some values), after the
//! Handle.Net REST API (`HANDLE-NET-REFERENCE.md` §1.2). A resolution a template
//! derived (the handle does not exist; its prefix's HS_NAMESPACE made the values)
//! says so in a `template` field the reference does not have.
//!
//! The handle is the rest of the path, percent-decoded as UTF-8 (`/` included); the
//! answer's `handle` echoes it as spelled. Every write goes through [`administer`],
//! which hands it to the node's handler.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Uri, header};
use axum::response::Response;
use serde_json::json;

use super::HttpState;
use super::answer::{Format, Refusal};
use super::codes::{RequestKind, http_status};
use super::query::{Query, QueryError, decode};
use crate::codec::ResponseCode;
use crate::names::{Handle, fold_key};
use crate::restjson::{Resolution, parse_body};
use crate::service::{
    Applied, Caller, Error, ExistingHandle, ExistingValue, Freshness, Operation, TemplateOrigin,
    resolve_or_derive,
};
use crate::values::HandleValue;

/// The path before the handle.
const API_PREFIX: &str = "/api/handles/";

/// Whether `path` is `/api/handles/` and a handle: what the route
/// `/api/handles/{*handle}` matches (an empty rest is not a handle).
pub fn names_a_handle(path: &str) -> bool {
    path.strip_prefix(API_PREFIX)
        .is_some_and(|rest| !rest.is_empty())
}

/// Carries out an administrative operation for `caller`: the HTTP edge's one way to
/// write.
pub async fn administer(
    state: &HttpState,
    caller: &Caller,
    operation: Operation,
) -> Result<Applied, Refusal> {
    Ok(state.handler.administer(caller, operation).await?)
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
            .map_err(|error| Refusal::from(error).answer(RequestKind::Other, None, &plain))?;
        let format = Format::of(&query, &caller)
            .map_err(|refusal| refusal.answer(RequestKind::Other, None, &plain))?;
        let raw = uri.path().strip_prefix(API_PREFIX).unwrap_or_default();
        let spelled = decode(raw, "path")
            .and_then(|octets| String::from_utf8(octets).map_err(|_| QueryError::NotUtf8("path")))
            .map_err(|error| {
                Box::new(Refusal::from(error).answer(RequestKind::Other, None, &format))
            })?;
        Ok(ApiRequest {
            spelled,
            query,
            format,
            caller,
        })
    }

    fn handle(&self) -> Result<Handle, Refusal> {
        Ok(Handle::parse(&self.spelled)?)
    }

    fn fail(&self, refusal: &Refusal, kind: RequestKind) -> Response {
        refusal.answer(kind, Some(&self.spelled), &self.format)
    }

    fn done(&self, handle: &str, kind: RequestKind) -> Response {
        let body = json!({"responseCode": 1, "handle": handle});
        self.format
            .answer(http_status(ResponseCode::Success, kind), &body)
    }

    /// The selected values: public ones, or with `publicOnly=false` every one (for an
    /// administrator), and the template that derived them if one did. No value
    /// matched is an empty list.
    async fn resolve(
        &self,
        state: &HttpState,
    ) -> Result<(Vec<HandleValue>, Option<TemplateOrigin>), Refusal> {
        let handle = self.handle()?;
        let selection = self.query.selection()?;
        let freshness = freshness(&self.query)?;
        let reader = (!self.query.flag("publicOnly", true)?).then_some(&self.caller);
        let found =
            resolve_or_derive(&*state.handler, reader, &handle, &selection, freshness).await;
        match found {
            Ok(resolved) => Ok((resolved.record.values, resolved.template)),
            Err(Error::ValuesNotFound) => Ok((Vec::new(), None)),
            Err(error) => Err(error.into()),
        }
    }

    async fn put(&self, state: &HttpState, body: &[u8]) -> Result<(String, Applied), Refusal> {
        let json: serde_json::Value = serde_json::from_slice(body).map_err(|error| {
            Refusal::new(
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
            return Err(Refusal::new(ResponseCode::InvalidHandle, message));
        }
        let operation = self.put_operation(handle, parsed.values)?;
        let applied = administer(state, &self.caller, operation).await?;
        Ok((self.spelled.clone(), applied))
    }

    /// Without `index=`: create or (unless `overwrite=false`) replace the handle.
    /// With `index=various`, or indexes that name exactly the body's values: add or
    /// replace those values.
    fn put_operation(
        &self,
        handle: Handle,
        values: Vec<HandleValue>,
    ) -> Result<Operation, Refusal> {
        let various = self.query.all("index").any(|index| index == "various");
        let mut indexes = self.query.indexes()?;
        if !various && indexes.is_empty() {
            let existing = if self.query.flag("overwrite", true)? {
                ExistingHandle::Overwrite
            } else {
                ExistingHandle::Refuse
            };
            return Ok(Operation::Create {
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
            return Err(Refusal::new(ResponseCode::ProtocolError, message));
        }
        Ok(Operation::AddValues {
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
    ) -> Result<(String, Applied), Refusal> {
        let (handle, applied) = state
            .handler
            .mint(&self.caller, &self.spelled, values)
            .await?;
        Ok((handle.as_str().to_owned(), applied))
    }

    async fn delete(&self, state: &HttpState) -> Result<(), Refusal> {
        let handle = self.handle()?;
        let indexes = self.query.indexes()?;
        let operation = match (self.query.first("index"), indexes.is_empty()) {
            (None, _) => Operation::Delete { handle },
            (Some(_), false) => Operation::RemoveValues { handle, indexes },
            (Some(_), true) => {
                let message = "DELETE takes numeric index= parameters, or none for the handle";
                return Err(Refusal::new(ResponseCode::ProtocolError, message));
            }
        };
        administer(state, &self.caller, operation).await.map(drop)
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
        Ok((values, _)) if values.is_empty() => {
            let body = json!({"responseCode": 200, "handle": request.spelled, "values": []});
            let status = http_status(ResponseCode::ValuesNotFound, RequestKind::Resolve);
            request.format.answer(status, &body)
        }
        Ok((values, template)) => {
            let body = Resolution {
                handle: &request.spelled,
                values: &values,
                template: template.map(|origin| template_json(&origin)),
            };
            request.format.answer_json(
                http_status(ResponseCode::Success, RequestKind::Resolve),
                body.to_json(),
            )
        }
        Err(refusal) => request.fail(&refusal, RequestKind::Resolve),
    }
}

/// What a template-derived answer says of its origin: `{"namespace": "0.NA/P",
/// "base": "P/base"}`, the handle whose HS_NAMESPACE derived it and the base handle.
fn template_json(origin: &TemplateOrigin) -> serde_json::Value {
    json!({"namespace": origin.namespace.as_str(), "base": origin.base})
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
        let refusal = Refusal::new(
            ResponseCode::ProtocolError,
            "Content-Type must be application/json",
        );
        return request.fail(&refusal, RequestKind::Other);
    }
    match request.put(&state, &body).await {
        Ok((handle, Applied::Created)) => request.done(&handle, RequestKind::Created),
        Ok((handle, _)) => request.done(&handle, RequestKind::Other),
        Err(refusal) => request.fail(&refusal, RequestKind::Other),
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
        Ok(()) => request.done(&request.spelled, RequestKind::Other),
        Err(refusal) => request.fail(&refusal, RequestKind::Other),
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}
