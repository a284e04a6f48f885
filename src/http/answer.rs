//! JSON answers of the API: the status from the response code, JSONP (`callback=`),
//! `pretty`, and the error shape `{"responseCode","handle","message"}`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::codes::{Operation, http_status};
use super::query::{Query, QueryError};
use super::sessions::SessionError;
use crate::codec::ResponseCode;
use crate::names::NameError;
use crate::restjson::JsonError;
use crate::service::Error;

/// How a JSON answer is written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Format {
    callback: Option<String>,
    pretty: bool,
}

impl Format {
    /// The format a query asks for. A callback must be a JavaScript identifier path
    /// (letters, digits, `_`, `$`, `.`), so JSONP cannot inject script.
    pub fn of(query: &Query) -> Result<Format, Failure> {
        let callback = query.first("callback").map(str::to_owned);
        if let Some(name) = &callback {
            let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.');
            if name.is_empty() || name.len() > 128 || !name.chars().all(allowed) {
                let message = "callback must be a JavaScript name ([A-Za-z0-9_$.])";
                return Err(Failure::new(ResponseCode::ProtocolError, message));
            }
        }
        Ok(Format {
            callback,
            pretty: query.flag("pretty", false)?,
        })
    }

    /// `body` with `status`, as JSON or JSONP.
    pub fn answer(&self, status: StatusCode, body: &Value) -> Response {
        let text = if self.pretty {
            serde_json::to_string_pretty(body)
        } else {
            serde_json::to_string(body)
        }
        .unwrap_or_else(|_| String::from("{}"));
        let (text, content_type) = match &self.callback {
            Some(callback) => (
                format!("{callback}({text});"),
                "application/javascript; charset=utf-8",
            ),
            None => (text, "application/json; charset=utf-8"),
        };
        let mut response = (status, text).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        response
    }
}

/// A request answered with an error response code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The response code.
    pub code: ResponseCode,
    /// Why, for people.
    pub message: String,
}

impl Failure {
    /// A failure with `code` and `message`.
    pub fn new(code: ResponseCode, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// The JSON answer, naming `handle` when there is one.
    pub fn answer(&self, operation: Operation, handle: Option<&str>, format: &Format) -> Response {
        let mut body = json!({"responseCode": self.code.to_u32()});
        if let Some(handle) = handle {
            body["handle"] = json!(handle);
        }
        body["message"] = json!(self.message);
        format.answer(http_status(self.code, operation), &body)
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure::new(crate::server::response_code(&error), error.to_string())
    }
}

impl From<QueryError> for Failure {
    fn from(error: QueryError) -> Self {
        let code = match error {
            QueryError::NotUtf8(_) => ResponseCode::InvalidHandle,
            _ => ResponseCode::ProtocolError,
        };
        Failure::new(code, error.to_string())
    }
}

impl From<SessionError> for Failure {
    fn from(error: SessionError) -> Self {
        let code = match error {
            SessionError::Full { .. } => ResponseCode::ServerTooBusy,
            SessionError::Unknown => ResponseCode::AuthenticationNeeded,
            SessionError::Random(_) => ResponseCode::Error,
        };
        Failure::new(code, error.to_string())
    }
}

impl From<JsonError> for Failure {
    fn from(error: JsonError) -> Self {
        Failure::new(ResponseCode::ProtocolError, error.to_string())
    }
}

impl From<NameError> for Failure {
    fn from(error: NameError) -> Self {
        Failure::new(ResponseCode::InvalidHandle, error.to_string())
    }
}
