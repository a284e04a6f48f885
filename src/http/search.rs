//! Reverse lookup: `GET /api/handles?[prefix=P&]TYPE=PATTERN…[&limit=N&page=N]`, the
//! query of the EUDAT reverse-lookup service that pyhandle's `search_handle` sends,
//! answered as that service answers: a JSON list of handles.
//!
//! Every parameter but `prefix`, `limit`, `pageSize`, `page`, `callback` and `pretty`
//! is a `TYPE=PATTERN` (see [`crate::values::search`]: exact, case-sensitive values,
//! `*` anywhere; several are ANDed). A listing request (`prefix=` alone) is answered
//! by module `list`. `limit` (or `pageSize`, as the listing names it) defaults to
//! [`DEFAULT_LIMIT`] and is at most [`MAX_PAGE_SIZE`]; `page` is 0-based and skips
//! `page × limit` hits (the EUDAT SQL back end reads it as a count of hits to skip).
//! Who may search, and what they find, is the service's to decide
//! ([`Handler::search_handles`]): LIST_HANDLES on the prefix, as the listing needs.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::json;

use super::answer::{Format, Refusal};
use super::codes::RequestKind;
use super::list::MAX_PAGE_SIZE;
use super::query::Query;
use crate::codec::ResponseCode;
use crate::names::named_prefix;
use crate::service::{Caller, Handler, SearchPosition};
use crate::values::SearchQuery;

/// The handles a page holds when `limit` is not given, as the EUDAT service.
pub const DEFAULT_LIMIT: u64 = 1_000;

/// The most hits asked of the service at a time while skipping to a page.
const STEP: u64 = 1_000;

/// The parameters that are not `TYPE=PATTERN`.
const RESERVED: [&str; 6] = ["prefix", "limit", "pageSize", "page", "callback", "pretty"];

/// The `TYPE=PATTERN` pairs of `query`; a search when there is one.
pub fn terms(query: &Query) -> Vec<(&str, &str)> {
    query
        .pairs()
        .filter(|(name, _)| !RESERVED.contains(name))
        .collect()
}

/// Answers the search `query` asks for with `format`.
pub async fn answer(
    handler: &dyn Handler,
    caller: &Caller,
    query: &Query,
    format: &Format,
) -> Response {
    match page(handler, caller, query).await {
        Ok(handles) => format.answer(StatusCode::OK, &json!(handles)),
        Err(refusal) => refusal.answer(RequestKind::Other, None, format),
    }
}

/// The handles of the page `query` asks for.
async fn page(
    handler: &dyn Handler,
    caller: &Caller,
    query: &Query,
) -> Result<Vec<String>, Refusal> {
    // `0.NA/P` names the prefix `P`.
    let prefix = query
        .first("prefix")
        .filter(|prefix| !prefix.is_empty())
        .map(|prefix| named_prefix(prefix).unwrap_or(prefix));
    let search = SearchQuery::new(prefix, terms(query))
        .map_err(|error| Refusal::new(ResponseCode::ProtocolError, error.to_string()))?;
    let size = match query.first("limit") {
        Some(_) => query.number("limit", DEFAULT_LIMIT)?,
        None => query.number("pageSize", DEFAULT_LIMIT)?,
    }
    .min(MAX_PAGE_SIZE);
    let skip = query.number("page", 0)?.saturating_mul(size);
    let mut handles = Vec::new();
    let mut skipped = 0u64;
    let mut after: Option<SearchPosition> = None;
    while (handles.len() as u64) < size {
        let wanted = (skip - skipped + size - handles.len() as u64).min(STEP);
        let limit = usize::try_from(wanted).unwrap_or(0);
        let found = handler
            .search_handles(caller, &search, after.as_ref(), limit)
            .await?;
        let complete = found.len() < limit;
        after = found.last().map(|hit| hit.position.clone());
        for hit in found {
            if skipped < skip {
                skipped += 1;
            } else {
                handles.push(hit.handle);
            }
        }
        if complete {
            break;
        }
    }
    Ok(handles)
}
