//! The HTML the proxy and the pages answer with. Every piece of text that did not
//! come from this file goes through [`escape`]: handle names, types, data, messages.
//!
//! The values page lists each value's index, type, data, TTL, timestamp (UTC, ISO
//! 8601) and permissions in words. The data of a URL value (or URL subtype) is a link
//! only when it parses as an `http` or `https` URL: any other scheme (`javascript:`)
//! stays text. An HS_ADMIN that decodes (read by [`admin_record`], as authorisation
//! reads it) shows its administrator and the names of the permissions it grants;
//! everything else shows as the JSON API's data does ([`data_json`]).

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

use crate::auth::permissions::admin_record;
use crate::restjson::{data_json, timestamp};
use crate::values::select::type_matches;
use crate::values::{AdminPermissions, AdminRecord, HandleValue, Permissions, Ttl};

/// `text` safe inside HTML text and double- or single-quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    push_escaped(&mut out, text);
    out
}

/// Appends `text` to `out`, escaped as [`escape`] does: the runs between markup
/// characters (all ASCII, so never inside a UTF-8 sequence) are copied whole.
fn push_escaped(out: &mut String, text: &str) {
    let mut rest = text;
    while let Some(at) = rest
        .bytes()
        .position(|octet| matches!(octet, b'&' | b'<' | b'>' | b'"' | b'\''))
    {
        out.push_str(&rest[..at]);
        out.push_str(match rest.as_bytes()[at] {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            _ => "&#39;",
        });
        rest = &rest[at + 1..];
    }
    out.push_str(rest);
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
th{background:#eef1f6}td.data{font-family:monospace;white-space:pre-wrap;overflow-wrap:anywhere}\
td.when{white-space:nowrap}\
input[type=text]{width:28em;max-width:90%;padding:.4em}button{padding:.4em 1em}";

/// The page sent with a redirect: the link alone, for a client that does not follow
/// `Location` (browsers never show it). No style sheet: it goes with every redirect.
pub fn redirect_page(status: StatusCode, target: &str) -> Response {
    const HEAD: &str = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
                        <title>Handle redirect — hdl</title></head><body><p><a href=\"";
    const TAIL: &str = "</a></p></body></html>\n";
    let mut html = String::with_capacity(HEAD.len() + 2 * target.len() + 2 + TAIL.len());
    html.push_str(HEAD);
    push_escaped(&mut html, target);
    html.push_str("\">");
    push_escaped(&mut html, target);
    html.push_str(TAIL);
    let mut response = Response::new(Body::from(html));
    *response.status_mut() = status;
    // Room for Location and Expires, the edge's CORS and hyper's own (a full map
    // grows when hyper only looks for `connection`).
    let headers = response.headers_mut();
    *headers = HeaderMap::with_capacity(REDIRECT_HEADERS);
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(HTML));
    response
}

/// The headers a redirect's map is made for.
const REDIRECT_HEADERS: usize = 8;

/// The media type of every page.
const HTML: &str = "text/html; charset=utf-8";

/// A page saying what went wrong with a reference.
pub fn error_page(status: StatusCode, title: &str, message: &str) -> Response {
    page(status, title, &format!("<p>{}</p>", escape(message)))
}

/// The values of a handle as a table.
pub fn values_page(handle: &str, values: &[HandleValue]) -> Response {
    let rows: String = values.iter().map(value_row).collect();
    let body = format!(
        "<p>Handle <code>{}</code> has {} value{}.</p>\n<table><thead><tr><th>Index</th>\
         <th>Type</th><th>Data</th><th>TTL</th><th>Timestamp (UTC)</th><th>Permissions</th>\
         </tr></thead><tbody>\n{rows}</tbody></table>",
        escape(handle),
        values.len(),
        if values.len() == 1 { "" } else { "s" },
    );
    page(StatusCode::OK, &format!("Values of {handle}"), &body)
}

/// One row of the values table.
fn value_row(value: &HandleValue) -> String {
    format!(
        "<tr><td>{}</td><td>{}</td><td class=\"data\">{}</td><td class=\"when\">{}</td>\
         <td class=\"when\">{}</td><td>{}</td></tr>\n",
        value.index,
        escape(&value.value_type),
        data_cell(value),
        escape(&ttl_text(value.ttl)),
        escape(&timestamp(value.timestamp)),
        escape(&permission_words(value.permissions)),
    )
}

/// The data cell's HTML: a link, an administrator, or the data as text.
fn data_cell(value: &HandleValue) -> String {
    if let Some((url, text)) = web_url(value) {
        return format!(
            "<a href=\"{}\" rel=\"noopener\">{}</a>",
            escape(url.as_str()),
            escape(text)
        );
    }
    if let Some(record) = admin_record(value) {
        return escape(&admin_text(&record));
    }
    let data = data_json(value);
    let shown = match (data["format"].as_str(), data["value"].as_str()) {
        (Some("string"), Some(text)) => text.to_owned(),
        _ => serde_json::to_string_pretty(&data).unwrap_or_default(),
    };
    escape(&shown)
}

/// The `http` or `https` URL a URL value (or URL subtype) holds, parsed, and its text
/// as written; `None` for anything else, `javascript:` included.
fn web_url(value: &HandleValue) -> Option<(url::Url, &str)> {
    if !type_matches("URL.", &value.value_type) {
        return None;
    }
    let text = std::str::from_utf8(&value.data).ok()?;
    let url = url::Url::parse(text).ok()?;
    matches!(url.scheme(), "http" | "https").then_some((url, text))
}

/// How long the value may be cached: seconds, or the moment it expires.
fn ttl_text(ttl: Ttl) -> String {
    match ttl {
        Ttl::Relative(seconds) => format!("{seconds} s"),
        Ttl::Absolute(at) => format!("until {}", timestamp(at)),
    }
}

/// The four permission bits, in words.
const VALUE_PERMISSION_NAMES: [(Permissions, &str); 4] = [
    (Permissions::ADMIN_READ, "admin read"),
    (Permissions::ADMIN_WRITE, "admin write"),
    (Permissions::PUBLIC_READ, "public read"),
    (Permissions::PUBLIC_WRITE, "public write"),
];

/// The HS_ADMIN permission bits, in words, lowest bit first (digest §6.1).
const ADMIN_PERMISSION_NAMES: [(AdminPermissions, &str); 13] = [
    (AdminPermissions::ADD_HANDLE, "add handle"),
    (AdminPermissions::DELETE_HANDLE, "delete handle"),
    (AdminPermissions::ADD_DERIVED_PREFIX, "add derived prefix"),
    (
        AdminPermissions::DELETE_DERIVED_PREFIX,
        "delete derived prefix",
    ),
    (AdminPermissions::MODIFY_VALUE, "modify value"),
    (AdminPermissions::REMOVE_VALUE, "remove value"),
    (AdminPermissions::ADD_VALUE, "add value"),
    (AdminPermissions::MODIFY_ADMIN, "modify admin"),
    (AdminPermissions::REMOVE_ADMIN, "remove admin"),
    (AdminPermissions::ADD_ADMIN, "add admin"),
    (AdminPermissions::READ_VALUE, "read value"),
    (AdminPermissions::LIST_HANDLES, "list handles"),
    (AdminPermissions::LIST_NA, "list derived prefixes"),
];

/// The names of the flags `is_set` holds.
fn set_names<T: Copy>(names: &[(T, &str)], is_set: impl Fn(T) -> bool) -> Vec<String> {
    names
        .iter()
        .filter(|(flag, _)| is_set(*flag))
        .map(|(_, name)| (*name).to_owned())
        .collect()
}

/// Words joined by commas, or `none`.
fn listed(words: &[String]) -> String {
    if words.is_empty() {
        "none".to_owned()
    } else {
        words.join(", ")
    }
}

/// A value's permission bits in words, e.g. `admin read, admin write, public read`.
fn permission_words(permissions: Permissions) -> String {
    listed(&set_names(&VALUE_PERMISSION_NAMES, |bit| {
        permissions.contains(bit)
    }))
}

/// An HS_ADMIN record in two lines: who, and what they may do. Bits without a name
/// (kept from the wire) are shown in hex rather than hidden.
fn admin_text(record: &AdminRecord) -> String {
    let granted = record.permissions;
    let mut names = set_names(&ADMIN_PERMISSION_NAMES, |bit| granted.contains(bit));
    let unnamed = ADMIN_PERMISSION_NAMES
        .iter()
        .fold(granted, |rest, (bit, _)| rest.without(*bit));
    if unnamed.0 != 0 {
        names.push(format!("unnamed bits {:#06x}", unnamed.0));
    }
    let index = match record.admin_index {
        0 => "any index".to_owned(),
        index => format!("index {index}"),
    };
    format!(
        "administrator: {} ({index})\npermissions: {}",
        record.admin_handle,
        listed(&names)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admin(permissions: AdminPermissions, admin_index: u32) -> AdminRecord {
        AdminRecord {
            permissions,
            admin_handle: "0.NA/<b>".into(),
            admin_index,
            legacy_padding: false,
        }
    }

    #[test]
    fn admin_records_name_their_permissions_and_show_unnamed_bits() {
        assert_eq!(
            admin_text(&admin(AdminPermissions(0), 0)),
            "administrator: 0.NA/<b> (any index)\npermissions: none"
        );
        let odd = AdminPermissions::DELETE_HANDLE.with(AdminPermissions(0x8000));
        assert_eq!(
            admin_text(&admin(odd, 7)),
            "administrator: 0.NA/<b> (index 7)\npermissions: delete handle, unnamed bits 0x8000"
        );
        let all = admin_text(&admin(AdminPermissions::ALL, 300));
        assert!(
            all.ends_with("add admin, read value, list handles"),
            "{all}"
        );
    }

    #[test]
    fn an_undecodable_admin_shows_as_data_and_names_are_escaped() {
        let broken = HandleValue::new(100, "HS_ADMIN", vec![0xff]);
        assert!(data_cell(&broken).contains("base64"));
        let named = HandleValue::new(100, "HS_ADMIN", admin(AdminPermissions(0), 1).encode());
        assert_eq!(
            data_cell(&named),
            "administrator: 0.NA/&lt;b&gt; (index 1)\npermissions: none"
        );
    }

    #[test]
    fn only_url_types_holding_web_urls_are_links() {
        let link = |value_type: &str, data: &str| {
            web_url(&HandleValue::new(1, value_type, data)).map(|(url, _)| url.to_string())
        };
        assert_eq!(
            link("url", "HTTP://Example.org"),
            Some("http://example.org/".into())
        );
        assert_eq!(
            link("URL.mirror", "https://m.example/"),
            Some("https://m.example/".into())
        );
        for (value_type, data) in [
            ("URL", "javascript:alert(1)"),
            ("URL", " JavaScript:alert(1)"),
            ("URL", "data:text/html,<b>"),
            ("URL", "www.example.org"),
            ("URL", "ftp://example.org/"),
            ("DESC", "https://example.org/"),
            ("URLX", "https://example.org/"),
        ] {
            assert_eq!(link(value_type, data), None, "{value_type} {data}");
        }
    }

    #[test]
    fn a_hostile_web_url_stays_inside_its_link() {
        let hostile = HandleValue::new(1, "URL", r#"https://x/"><script>alert(1)</script>"#);
        assert_eq!(
            data_cell(&hostile),
            "<a href=\"https://x/%22%3E%3Cscript%3Ealert(1)%3C/script%3E\" rel=\"noopener\">\
             https://x/&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;</a>"
        );
        let quoted = HandleValue::new(1, "URL", "https://x/?q='&\"");
        assert_eq!(
            data_cell(&quoted),
            "<a href=\"https://x/?q=%27&amp;%22\" rel=\"noopener\">\
             https://x/?q=&#39;&amp;&quot;</a>"
        );
        let script = HandleValue::new(1, "URL", "javascript:alert('<b>')");
        assert_eq!(data_cell(&script), "javascript:alert(&#39;&lt;b&gt;&#39;)");
    }

    #[test]
    fn ttls_and_permissions_read_as_words() {
        assert_eq!(ttl_text(Ttl::Relative(60)), "60 s");
        assert_eq!(
            ttl_text(Ttl::Absolute(1_704_067_200)),
            "until 2024-01-01T00:00:00Z"
        );
        assert_eq!(permission_words(Permissions::from_bits(0)), "none");
        assert_eq!(
            permission_words(Permissions::ADMIN_ONLY),
            "admin read, admin write"
        );
    }

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape(r#"<script>alert("x" & 'y')</script>"#),
            "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;"
        );
    }
}
