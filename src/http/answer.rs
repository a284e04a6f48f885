//! JSON answers of the API: the status from the response code, JSONP (`callback=`),
//! `pretty`, and the error shape `{"responseCode","handle","message"}` of this edge's
//! refused outcome, [`Refusal`] (which code answers what is decided in `codes`).

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde::Serialize;
use serde_json::{Value, json};

use super::codes::{RequestKind, http_status};
use super::query::Query;
use crate::codec::ResponseCode;
use crate::service::Caller;

/// How a JSON answer is written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Format {
    callback: Option<String>,
    pretty: bool,
}

impl Format {
    /// The format a query from `caller` asks for. A callback must be a JavaScript
    /// identifier path (letters, digits, `_`, `$`, `.`), so JSONP cannot inject
    /// script, and JSONP answers anonymous callers only: a browser sends cached
    /// credentials with any page's `<script>`, which would read what they unlock.
    pub fn of(query: &Query, caller: &Caller) -> Result<Format, Refusal> {
        let callback = query.first("callback").map(str::to_owned);
        if callback.is_some() && !caller.is_anonymous() {
            let message = "callback (JSONP) answers anonymous requests only";
            return Err(Refusal::new(ResponseCode::ProtocolError, message));
        }
        if let Some(name) = &callback {
            let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.');
            if name.is_empty() || name.len() > 128 || !name.chars().all(allowed) {
                let message = "callback must be a JavaScript name ([A-Za-z0-9_$.])";
                return Err(Refusal::new(ResponseCode::ProtocolError, message));
            }
        }
        Ok(Format {
            callback,
            pretty: query.flag("pretty", false)?,
        })
    }

    /// `body` with `status`, as JSON or JSONP.
    pub fn answer(&self, status: StatusCode, body: &impl Serialize) -> Response {
        let text = serde_json::to_string(body).unwrap_or_else(|_| String::from("{}"));
        self.answer_json(status, text)
    }

    /// `json` (compact JSON text, such as [`Resolution::to_json`] writes) with
    /// `status`, as JSON or JSONP; with `pretty`, read again and indented.
    ///
    /// [`Resolution::to_json`]: crate::restjson::Resolution::to_json
    pub fn answer_json(&self, status: StatusCode, json: String) -> Response {
        let text = if self.pretty {
            serde_json::from_str::<Value>(&json)
                .and_then(|tree| serde_json::to_string_pretty(&tree))
                .unwrap_or(json)
        } else {
            json
        };
        let (text, content_type) = match &self.callback {
            Some(callback) => (
                format!("{callback}({text});"),
                "application/javascript; charset=utf-8",
            ),
            None => (text, "application/json; charset=utf-8"),
        };
        let mut response = Response::new(Body::from(text));
        *response.status_mut() = status;
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        response
    }
}

/// A request refused: answered with an error response code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The response code.
    pub code: ResponseCode,
    /// Why, for people.
    pub message: String,
}

impl Refusal {
    /// A refusal with `code` and `message`.
    pub fn new(code: ResponseCode, message: impl Into<String>) -> Self {
        Refusal {
            code,
            message: message.into(),
        }
    }

    /// The JSON answer, naming `handle` when there is one.
    pub fn answer(&self, kind: RequestKind, handle: Option<&str>, format: &Format) -> Response {
        let mut body = json!({"responseCode": self.code.to_u32()});
        if let Some(handle) = handle {
            body["handle"] = json!(handle);
        }
        body["message"] = json!(self.message);
        format.answer(http_status(self.code, kind), &body)
    }
}
