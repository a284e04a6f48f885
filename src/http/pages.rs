//! The front page (a resolve form), `/status` and `/metrics`.

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};

use super::HttpState;
use super::html::{escape, page};
use super::proxy::proxy_path;
use super::query::Query;
use std::time::Duration;

use crate::metrics::{Protocol, ReplicationState};
use crate::service::Role;

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

/// `GET /status`: what this node is, its replica set, and how busy it has been.
pub async fn status(State(state): State<HttpState>) -> Response {
    let node = &state.node;
    let replica = state.handler.status();
    let uptime = state.metrics.uptime();
    let seconds = uptime.as_secs_f64().max(1.0);
    let rate = |protocol| {
        let total = state.metrics.total(protocol);
        format!("{total} ({:.1}/s on average)", total as f64 / seconds)
    };
    let index = |index: Option<u64>| index.map_or_else(|| "none".to_owned(), |i| i.to_string());
    let lag = match (replica.applied, replica.last_log) {
        (Some(applied), Some(last)) => last.saturating_sub(applied).to_string(),
        _ => "0".to_owned(),
    };
    let primary = replica
        .primary
        .map_or_else(|| "unknown".to_owned(), |leader| format!("node {leader}"));
    let https = node
        .https
        .map_or_else(|| "off".to_owned(), |a| a.to_string());
    let uptime = Duration::from_secs(uptime.as_secs());
    let rows = [
        ("Node", format!("{} ({})", node.id, replica.role.name())),
        ("Primary", primary),
        ("Applied index", index(replica.applied)),
        ("Last log index", index(replica.last_log)),
        ("Entries not yet applied", lag),
        (
            "Snapshots installed",
            replica.snapshots_installed.to_string(),
        ),
        ("Handle protocol", node.handle.to_string()),
        ("HTTP / HTTPS", format!("{} / {https}", node.http)),
        (
            "Peer",
            node.peer
                .map_or_else(|| "none".to_owned(), |a| a.to_string()),
        ),
        ("Uptime", humantime::format_duration(uptime).to_string()),
        ("Handle protocol requests", rate(Protocol::Handle)),
        ("HTTP requests", rate(Protocol::Http)),
        ("Version", env!("CARGO_PKG_VERSION").to_owned()),
    ];
    let mut body = table(
        rows.iter()
            .map(|(name, value)| vec![(*name).to_owned(), value.clone()]),
        None,
    );
    body.push_str("<h2>Replica set</h2>\n");
    let header = ["Id", "Role", "Handle", "Peer", "HTTP"]
        .map(str::to_owned)
        .to_vec();
    let members = replica.members.iter().map(|member| {
        let role = if replica.primary == Some(member.id) {
            "primary"
        } else if member.voter {
            "secondary"
        } else {
            "learner"
        };
        let http = member.http.map_or_else(String::new, |a| a.to_string());
        vec![
            member.id.to_string(),
            role.to_owned(),
            member.handle.to_string(),
            member.peer.to_string(),
            http,
        ]
    });
    body.push_str(&table(members, Some(header)));
    body.push_str("<p>Every counter: <a href=\"/metrics\">/metrics</a>.</p>");
    page(StatusCode::OK, "Node status", &body)
}

/// An HTML table of escaped cells, the first cell of a row as its header when there
/// is no header row.
fn table(rows: impl Iterator<Item = Vec<String>>, header: Option<Vec<String>>) -> String {
    let mut html = String::from("<table>");
    if let Some(header) = &header {
        html.push_str("<thead><tr>");
        for cell in header {
            html.push_str(&format!("<th>{}</th>", escape(cell)));
        }
        html.push_str("</tr></thead>");
    }
    html.push_str("<tbody>\n");
    for row in rows {
        html.push_str("<tr>");
        for (column, cell) in row.iter().enumerate() {
            let tag = if header.is_none() && column == 0 {
                "th"
            } else {
                "td"
            };
            html.push_str(&format!("<{tag}>{}</{tag}>", escape(cell)));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody></table>\n");
    html
}

/// `GET /metrics`: the Prometheus text format.
pub async fn metrics(State(state): State<HttpState>) -> Response {
    let replica = state.handler.status();
    state.metrics.observe_replication(&ReplicationState {
        applied: replica.applied,
        last_log: replica.last_log,
        primary: replica.role == Role::Primary,
        term: replica.term,
        lag: replica.lag,
        snapshots_installed: replica.snapshots_installed,
        snapshot_octets_installed: replica.snapshot_octets_installed,
    });
    let mut response = state.metrics.render().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}
