//! Listing: `GET /api/handles?prefix=P&page=N&pageSize=M` and `GET /api/prefixes`;
//! `GET /api/handles` with a `TYPE=PATTERN` is a search (module `search`).
//!
//! Like every listing, these are administrative: listing handles needs LIST_HANDLES
//! on the prefix, listing prefixes a server administrator. `page` is 0-based; `pageSize` defaults to [`MAX_PAGE_SIZE`] and
//! `pageSize=0` answers only the count. `totalCount` is a JSON string, as the
//! reference server writes it.

use axum::Extension;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use serde_json::json;

use super::HttpState;
use super::answer::{Format, Refusal};
use super::codes::RequestKind;
use super::query::Query;
use super::search;
use crate::codec::ResponseCode;
use crate::names::{Handle, named_prefix};
use crate::service::{Caller, Handler};

/// The most handles one page holds.
pub const MAX_PAGE_SIZE: u64 = 10_000;

/// Handles read from the store per step while skipping to a page.
const STEP: usize = 1_000;

/// `GET /api/handles?prefix=…`, or a search.
pub async fn handles(
    State(state): State<HttpState>,
    Extension(caller): Extension<Caller>,
    uri: Uri,
) -> Response {
    let (query, format) = match read(&uri, &caller) {
        Ok(read) => read,
        Err(response) => return *response,
    };
    if !search::terms(&query).is_empty() {
        return search::answer(state.handler.as_ref(), &caller, &query, &format).await;
    }
    match page(state.handler.as_ref(), &caller, &query).await {
        Ok(body) => format.answer(StatusCode::OK, &body),
        Err(refusal) => refusal.answer(RequestKind::Other, None, &format),
    }
}

/// The page a listing query asks for.
async fn page(
    handler: &dyn Handler,
    caller: &Caller,
    query: &Query,
) -> Result<serde_json::Value, Refusal> {
    let Some(prefix) = query.first("prefix").filter(|prefix| !prefix.is_empty()) else {
        let message = "listing handles needs prefix=";
        return Err(Refusal::new(ResponseCode::ProtocolError, message));
    };
    // `0.NA/P` names the prefix `P`.
    let prefix = named_prefix(prefix).unwrap_or(prefix);
    let number = query.number("page", 0)?;
    let size = query.number("pageSize", MAX_PAGE_SIZE)?.min(MAX_PAGE_SIZE);
    let total = handler.count_handles(caller, prefix).await?;
    let skip = number.saturating_mul(size);
    let mut handles = Vec::new();
    let mut after: Option<Handle> = None;
    let mut skipped = 0u64;
    while size > 0 && (handles.len() as u64) < size {
        let batch = handler
            .list_handles(caller, prefix, after.as_ref(), STEP)
            .await?;
        let Some(last) = batch.last() else { break };
        after = Handle::parse(last).ok();
        for handle in batch {
            if skipped < skip {
                skipped += 1;
            } else if (handles.len() as u64) < size {
                handles.push(handle);
            }
        }
        if after.is_none() {
            break;
        }
    }
    Ok(json!({
        "responseCode": 1,
        "prefix": prefix,
        "totalCount": total.to_string(),
        "page": number,
        "pageSize": size,
        "handles": handles,
    }))
}

/// `GET /api/prefixes`: the naming authorities this node holds.
pub async fn prefixes(
    State(state): State<HttpState>,
    Extension(caller): Extension<Caller>,
    uri: Uri,
) -> Response {
    let (_, format) = match read(&uri, &caller) {
        Ok(read) => read,
        Err(response) => return *response,
    };
    match state.handler.list_prefixes(&caller).await {
        Ok(records) => {
            let names: Vec<_> = records.into_iter().map(|record| record.display).collect();
            format.answer(
                StatusCode::OK,
                &json!({"responseCode": 1, "prefixes": names}),
            )
        }
        Err(error) => Refusal::from(error).answer(RequestKind::Other, None, &format),
    }
}

fn read(uri: &Uri, caller: &Caller) -> Result<(Query, Format), Box<Response>> {
    let plain = Format::default();
    let query = Query::parse(uri.query())
        .map_err(|error| Box::new(Refusal::from(error).answer(RequestKind::Other, None, &plain)))?;
    let format = Format::of(&query, caller)
        .map_err(|refusal| Box::new(refusal.answer(RequestKind::Other, None, &plain)))?;
    Ok((query, format))
}
