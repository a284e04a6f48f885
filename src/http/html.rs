//! The HTML the proxy and the pages answer with. Every piece of text that did not
//! come from this file goes through [`escape`]: handle names, types, data, messages.

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

use crate::restjson::data_json;
use crate::values::HandleValue;

/// `text` safe inside HTML text and double- or single-quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

/// A whole page: `title` is escaped, `body` is HTML built by this module's callers.
pub fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let title = escape(title);
    let html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} — hdl</title><style>{STYLE}</style></head>\
         <body><header><a href=\"/\">hdl</a> handle proxy</header>\
         <main><h1>{title}</h1>\n{body}\n</main></body></html>\n"
    );
    (status, Html(html)).into_response()
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0;color:#1d2330}\
header{background:#1d3557;color:#fff;padding:.6em 1.2em}header a{color:#fff;font-weight:bold}\
main{padding:1em 1.5em;max-width:72em}table{border-collapse:collapse;width:100%}\
th,td{border:1px solid #ccd;padding:.35em .6em;text-align:left;vertical-align:top}\
th{background:#eef1f6}td.data{font-family:monospace;white-space:pre-wrap;word-break:break-all}\
input[type=text]{width:28em;max-width:90%;padding:.4em}button{padding:.4em 1em}";

/// A page saying what went wrong with a reference.
pub fn error_page(status: StatusCode, title: &str, message: &str) -> Response {
    page(status, title, &format!("<p>{}</p>", escape(message)))
}

/// The values of a handle as a table.
pub fn values_page(handle: &str, values: &[HandleValue]) -> Response {
    let mut rows = String::new();
    for value in values {
        let data = data_json(value);
        let shown = match (data["format"].as_str(), data["value"].as_str()) {
            (Some("string"), Some(text)) => text.to_owned(),
            _ => serde_json::to_string_pretty(&data).unwrap_or_default(),
        };
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td class=\"data\">{}</td><td>{}</td></tr>\n",
            value.index,
            escape(&value.value_type),
            escape(&shown),
            value.ttl.seconds(),
        ));
    }
    let body = format!(
        "<p>Handle <code>{}</code> has {} value{}.</p>\n<table><thead><tr><th>Index</th>\
         <th>Type</th><th>Data</th><th>TTL (s)</th></tr></thead><tbody>\n{rows}</tbody></table>",
        escape(handle),
        values.len(),
        if values.len() == 1 { "" } else { "s" },
    );
    page(StatusCode::OK, &format!("Values of {handle}"), &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape(r#"<script>alert("x" & 'y')</script>"#),
            "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;"
        );
    }
}
