//! The front page (a resolve form), `/status` and `/metrics`.

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};

use super::HttpState;
use super::html::{escape, page};
use super::proxy::proxy_path;
use super::query::Query;
use crate::metrics::Protocol;

/// `GET /`: the resolve form; `/?handle=H[&noredirect]` (what the form sends) goes
/// on to the proxy path of `H`.
pub async fn front(uri: Uri) -> Response {
    let query = Query::parse(uri.query()).unwrap_or_default();
    if let Some(handle) = query
        .first("handle")
        .filter(|handle| !handle.trim().is_empty())
    {
        let mut target = proxy_path(handle.trim());
        if query.first("noredirect").is_some() {
            target.push_str("?noredirect");
        }
        return Redirect::to(&target).into_response();
    }
    let body = "<form action=\"/\" method=\"get\">\
        <p><label for=\"handle\">Handle</label><br>\
        <input type=\"text\" id=\"handle\" name=\"handle\" placeholder=\"10.1000/1\" autofocus>\
        <button type=\"submit\">Resolve</button></p>\
        <p><label><input type=\"checkbox\" name=\"noredirect\" value=\"\"> \
        Show the values instead of redirecting</label></p></form>\
        <p>Or go to <code>/&lt;handle&gt;</code> directly. The JSON API is under \
        <code>/api/handles/&lt;handle&gt;</code>; this node's state is on \
        <a href=\"/status\">/status</a>.</p>";
    page(StatusCode::OK, "Resolve a handle", body)
}

/// `GET /status`: what this node is and how busy it has been.
pub async fn status(State(state): State<HttpState>) -> Response {
    let node = &state.node;
    let uptime = state.metrics.uptime();
    let seconds = uptime.as_secs_f64().max(1.0);
    let rate = |protocol| {
        let total = state.metrics.total(protocol);
        format!("{total} ({:.1}/s on average)", total as f64 / seconds)
    };
    let https = node
        .https
        .map_or_else(|| "off".to_owned(), |address| address.to_string());
    let rows = [
        (
            "Role",
            "standalone (one node; no replica set configured)".to_owned(),
        ),
        (
            "Replica set members",
            format!("this node ({})", node.handle),
        ),
        ("Primary", "this node".to_owned()),
        ("Handle protocol", node.handle.to_string()),
        ("HTTP", node.http.to_string()),
        ("HTTPS", https),
        (
            "Uptime",
            humantime::format_duration(std::time::Duration::from_secs(uptime.as_secs()))
                .to_string(),
        ),
        ("Handle protocol requests", rate(Protocol::Handle)),
        ("HTTP requests", rate(Protocol::Http)),
        ("Version", env!("CARGO_PKG_VERSION").to_owned()),
    ];
    let mut body = String::from("<table><tbody>\n");
    for (name, value) in rows {
        body.push_str(&format!(
            "<tr><th>{}</th><td>{}</td></tr>\n",
            escape(name),
            escape(&value)
        ));
    }
    body.push_str("</tbody></table>\n<p>Every counter: <a href=\"/metrics\">/metrics</a>.</p>");
    page(StatusCode::OK, "Node status", &body)
}

/// `GET /metrics`: the Prometheus text format.
pub async fn metrics(State(state): State<HttpState>) -> Response {
    let mut response = state.metrics.render().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}
