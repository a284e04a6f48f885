//! The web proxy: `GET /<HandleRef>` redirects to the handle's URL or shows its
//! values (`HANDLE-NET-REFERENCE.md` §1.3, digest §10).
//!
//! The path (still percent-encoded) is handed to [`HandleRef::parse`] as a proxy URL,
//! so percent-decoding, `encoding@` modifiers and `hdl:`, `info:hdl/`, `urn:hdl:`
//! prefixes follow the names layer's rules exactly (a `%40` stays part of the
//! prefix); `doi:`, `info:doi/` and `urn:doi:` are read as their `hdl` twins.
//!
//! Target, in order: an HS_ALIAS (301 to the alias's proxy path, unless
//! `ignore_aliases`), a `10320/loc` location (see [`super::loc`]; its `http`
//! attribute may ask for 301, 303, 307 or 308), the first URL value, the first URL
//! subtype. Without one, or with `noredirect` / `action=showvalues`, the values page.
//! `urlappend=` is appended verbatim; `Expires` comes from the chosen value's TTL.
//! A handle that does not exist may be derived by its prefix's template, then
//! redirected as any other. Not found is a 404 page, never a redirect. `auth` reads authoritatively (as the
//! AT flag: every write acknowledged before the request).

use std::borrow::Cow;
use std::cell::RefCell;

use axum::extract::State;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::Response;
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

use super::HttpState;
use super::api::freshness;
use super::html::{error_page, redirect_page, values_page};
use super::loc;
use super::query::Query;
use crate::clock::unix_now;
use crate::names::{Handle, HandleRef, MAX_HANDLE_LEN, NameError};
use crate::service::{Error, resolve_or_derive};
use crate::values::select::type_matches;
use crate::values::{HandleValue, Ttl};

/// Octets percent-encoded in a proxy path or a `Location` header.
const PATH_ESCAPES: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'?')
    .add(b'<')
    .add(b'>')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}')
    .add(b'@');

/// Octets percent-encoded in a redirect target (it is already a URL).
const LOCATION_ESCAPES: &AsciiSet = &CONTROLS.add(b' ').add(b'"').add(b'<').add(b'>');

/// Reference prefixes read as another: DOI spellings of the `hdl` ones.
const SCHEME_ALIASES: [(&str, &str); 3] = [
    ("doi:", "hdl:"),
    ("info:doi/", "info:hdl/"),
    ("urn:doi:", "urn:hdl:"),
];

/// The proxy path of `handle`: `/` and the handle, percent-encoded where a URL path
/// needs it (and `@`, so no prefix reads as a modifier). A leading `/` of the handle
/// is encoded too: `//host/…` would send a browser to another site.
pub fn proxy_path(handle: &str) -> String {
    let (lead, rest) = match handle.strip_prefix('/') {
        Some(rest) => ("/%2F", rest),
        None => ("/", handle),
    };
    format!("{lead}{}", utf8_percent_encode(rest, PATH_ESCAPES))
}

/// Where a resolution sends the browser.
struct Target {
    location: String,
    status: StatusCode,
    ttl: Ttl,
}

/// The fallback route: every path that is not a page or the API.
pub async fn resolve(State(state): State<HttpState>, method: Method, uri: Uri) -> Response {
    if method != Method::GET && method != Method::HEAD {
        let message = "The proxy answers GET and HEAD only.";
        return error_page(
            StatusCode::METHOD_NOT_ALLOWED,
            "Method not allowed",
            message,
        );
    }
    let raw = uri.path().strip_prefix('/').unwrap_or_default();
    if raw.starts_with("api/") {
        let message = "No such API resource.";
        return error_page(StatusCode::NOT_FOUND, "Not found", message);
    }
    let query = match Query::parse(uri.query()) {
        Ok(query) => query,
        Err(error) => {
            return error_page(StatusCode::BAD_REQUEST, "Bad request", &error.to_string());
        }
    };
    answer(&state, raw, &query)
        .await
        .unwrap_or_else(|response| *response)
}

async fn answer(state: &HttpState, raw: &str, query: &Query) -> Result<Response, Box<Response>> {
    let bad =
        |message: String| Box::new(error_page(StatusCode::BAD_REQUEST, "Bad request", &message));
    let handle =
        referenced_handle(raw).map_err(|error| bad(format!("Not a handle reference: {error}.")))?;
    let selection = query.selection().map_err(|error| bad(error.to_string()))?;
    let freshness = freshness(query).map_err(|error| bad(error.to_string()))?;
    let spelled = handle.as_str();
    let resolved = resolve_or_derive(&*state.handler, None, &handle, &selection, freshness);
    let record = resolved
        .await
        .map_err(|error| Box::new(refusal_page(spelled, &error)))?
        .record;
    let show = query.first("noredirect").is_some()
        || query
            .first("action")
            .is_some_and(|action| action == "showvalues");
    if show {
        return Ok(values_page(spelled, &record.values));
    }
    let ignore_aliases = query
        .flag("ignore_aliases", false)
        .map_err(|e| bad(e.to_string()))?;
    let Some(target) = target(&record.values, query, ignore_aliases) else {
        return Ok(values_page(spelled, &record.values));
    };
    Ok(redirect(
        target,
        query.first("urlappend").unwrap_or_default(),
    ))
}

/// The handle the path (after its `/`) names. A path with no `%`, `@` or `:`, and no
/// longer than a handle, as nearly every one is, has no escape, modifier or scheme to
/// read: it is the handle, as [`HandleRef::parse`] would find it. Anything else is
/// parsed as a reference.
fn referenced_handle(raw: &str) -> Result<Handle, NameError> {
    if raw.len() <= MAX_HANDLE_LEN && !raw.contains(['%', '@', ':']) {
        return Handle::parse(raw);
    }
    HandleRef::parse(&reference_octets(raw)).map(|reference| reference.handle)
}

/// The octets to parse: the path as a proxy URL, or as the reference it starts with.
fn reference_octets(raw: &str) -> Vec<u8> {
    let starts_with = |scheme: &str| {
        raw.as_bytes()
            .get(..scheme.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(scheme.as_bytes()))
    };
    for (alias, twin) in SCHEME_ALIASES {
        if starts_with(alias) {
            return [twin, &raw[alias.len()..]].concat().into_bytes();
        }
    }
    let schemes = ["hdl:", "info:hdl/", "urn:hdl:"];
    if schemes.into_iter().any(starts_with) {
        return raw.as_bytes().to_vec();
    }
    ["http://proxy/", raw].concat().into_bytes()
}

fn refusal_page(handle: &str, error: &Error) -> Response {
    match error {
        Error::HandleNotFound => {
            let message = format!("The handle {handle} does not exist.");
            error_page(StatusCode::NOT_FOUND, "Handle not found", &message)
        }
        Error::ValuesNotFound => {
            let message = format!("The handle {handle} has no value that matches.");
            error_page(StatusCode::NOT_FOUND, "No values", &message)
        }
        other => error_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Resolution failed",
            &other.to_string(),
        ),
    }
}

/// The redirect the values ask for, if any.
fn target(values: &[HandleValue], query: &Query, ignore_aliases: bool) -> Option<Target> {
    let text = |value: &HandleValue| std::str::from_utf8(&value.data).ok().map(str::to_owned);
    let of_type = |wanted: &'static str| {
        values
            .iter()
            .filter(move |v| type_matches(wanted, &v.value_type))
    };
    if !ignore_aliases && let Some(alias) = of_type("HS_ALIAS").find_map(|v| Some((text(v)?, v))) {
        let mut location = proxy_path(&alias.0);
        if let Some(query) = query.raw() {
            location = format!("{location}?{query}");
        }
        let (status, ttl) = (StatusCode::MOVED_PERMANENTLY, alias.1.ttl);
        return Some(Target {
            location,
            status,
            ttl,
        });
    }
    for value in of_type("10320/loc") {
        let locations = loc::parse(&text(value)?);
        if let Some(chosen) = loc::choose(&locations, query.first("locatt"), rand::random::<f64>())
        {
            let status = match chosen.attribute("http") {
                Some(code @ ("301" | "303" | "307" | "308")) => code.parse().ok()?,
                _ => StatusCode::FOUND,
            };
            let location = chosen.href().to_owned();
            return Some(Target {
                location,
                status,
                ttl: value.ttl,
            });
        }
    }
    let url = of_type("URL").next().or_else(|| of_type("URL.").next())?;
    Some(Target {
        location: text(url)?,
        status: StatusCode::FOUND,
        ttl: url.ttl,
    })
}

/// Schemes the proxy never redirects to: a handle's owner may store them, a browser
/// following them would run or show what the owner wrote as if the proxy's site did.
const REFUSED_SCHEMES: [&str; 4] = ["javascript", "data", "vbscript", "file"];

/// Why the proxy cannot redirect to `location`, if it cannot: values store what their
/// owner wrote (`www.example.org`), not only absolute URLs. A path on this proxy (an
/// alias's handle) is fine; `//host` and `/\\host` are not paths but other sites.
fn unredirectable(location: &str) -> Option<String> {
    if let Some(path) = location.strip_prefix('/') {
        if path.starts_with(['/', '\\']) {
            return Some(format!(
                "The handle's target {location:?} names another site without a scheme; the proxy cannot redirect to it."
            ));
        }
        return None;
    }
    if is_plain_web_url(location) {
        return None;
    }
    match url::Url::parse(location) {
        Err(error) => Some(format!(
            "The handle's target {location:?} is not an absolute URL ({error}); the proxy cannot redirect to it."
        )),
        Ok(url) if REFUSED_SCHEMES.contains(&url.scheme()) => Some(format!(
            "The handle's target uses the {} scheme, which the proxy never redirects to.",
            url.scheme()
        )),
        Ok(_) => None,
    }
}

/// Whether `location` is plainly an absolute `http` or `https` URL whose host is a
/// name of ASCII letters, digits, `-` and `.` (no port, user or IDNA label, and its
/// last label not a number): what nearly every handle holds, and what
/// [`url::Url::parse`] always accepts (nothing after the host can make it fail), so
/// the proxy need not parse it.
fn is_plain_web_url(location: &str) -> bool {
    let Some(rest) = ["https://", "http://"]
        .iter()
        .find_map(|scheme| location.strip_prefix(scheme))
    else {
        return false;
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let last_label = host.trim_end_matches('.').rsplit('.').next();
    host.bytes()
        .all(|octet| octet.is_ascii_alphanumeric() || octet == b'-' || octet == b'.')
        && last_label.is_some_and(|label| label.starts_with(|c: char| c.is_ascii_alphabetic()))
        && !host
            .as_bytes()
            .windows(4)
            .any(|four| four.eq_ignore_ascii_case(b"xn--"))
}

/// The redirect response: `Location`, `Expires` and a tiny page with the link; an
/// error page when the target is nothing a browser should be sent to.
fn redirect(target: Target, append: &str) -> Response {
    let mut location = target.location;
    location.push_str(append);
    if let Some(message) = unredirectable(&location) {
        return error_page(StatusCode::BAD_GATEWAY, "Bad target", &message);
    }
    // Most targets need no escape: then the location itself becomes the header.
    let escaped = match Cow::from(utf8_percent_encode(&location, LOCATION_ESCAPES)) {
        Cow::Owned(escaped) => Some(escaped),
        Cow::Borrowed(_) => None,
    };
    let encoded = escaped.unwrap_or(location);
    let mut response = redirect_page(target.status, &encoded);
    let Ok(header_value) = HeaderValue::try_from(encoded) else {
        let message = "The handle's target cannot be sent as a Location header.";
        return error_page(StatusCode::BAD_GATEWAY, "Bad target", message);
    };
    let expires = match target.ttl {
        Ttl::Relative(seconds) => u64::from(unix_now()) + u64::from(seconds),
        Ttl::Absolute(at) => u64::from(at),
    };
    let headers = response.headers_mut();
    headers.insert(header::LOCATION, header_value);
    if let Some(expires) = http_date(expires) {
        headers.insert(header::EXPIRES, expires);
    }
    response
}

thread_local! {
    /// The last [`http_date`] of this thread: nearly every redirect in a second
    /// expires at the same second (the same TTL, most often the default).
    static LAST_HTTP_DATE: RefCell<Option<(u64, HeaderValue)>> = const { RefCell::new(None) };
}

/// `seconds` since the epoch as an HTTP date header value, made once a second per
/// thread rather than once a request (hyper keeps its `Date` the same way).
fn http_date(seconds: u64) -> Option<HeaderValue> {
    LAST_HTTP_DATE.with_borrow_mut(|last| {
        if let Some((at, value)) = last
            && *at == seconds
        {
            return Some(value.clone());
        }
        let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds);
        let value = HeaderValue::try_from(httpdate::fmt_http_date(when)).ok()?;
        *last = Some((seconds, value.clone()));
        Some(value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_web_urls_are_exactly_those_a_full_parse_accepts_without_doubt() {
        for plain in [
            "https://example.org/a?b=c#d",
            "http://EXAMPLE.org",
            "https://a-b.example./x y",
            "http://localhost?q",
        ] {
            assert!(is_plain_web_url(plain), "{plain}");
            assert!(url::Url::parse(plain).is_ok(), "{plain}");
        }
        for parsed in [
            "https://1.2.3.4/",
            "https://1.2.3.256/",
            "http://example.org:99999/",
            "http://user@example.org/",
            "http://xn--a.example/",
            "http://EXAMPLE.XN--A/",
            "http:///x",
            "http://./",
            "http://a.0x1/",
            "HTTPS://example.org/",
            "https://exa%mple.org/",
            "https://[::1]/",
            "ftp://example.org/",
        ] {
            assert!(!is_plain_web_url(parsed), "{parsed}");
        }
    }

    #[test]
    fn only_absolute_urls_and_paths_are_redirected_to() {
        for fine in [
            "https://example.org/a",
            "ftp://x.example/",
            "/10.1000/alias",
            "urn:isbn:1",
        ] {
            assert_eq!(unredirectable(fine), None, "{fine}");
        }
        for refused in [
            "www.url.foo",
            "",
            "javascript:alert(1)",
            "DATA:text/html,x",
            "file:///etc/passwd",
            "https://1.2.3.256/",
            "http://example.org:99999/",
            "//evil.example/x",
            "/\\evil.example/x",
        ] {
            assert!(unredirectable(refused).is_some(), "{refused}");
        }
    }

    #[test]
    fn references_keep_their_scheme_or_become_proxy_urls() {
        assert_eq!(reference_octets("DOI:10.1/x"), b"hdl:10.1/x");
        assert_eq!(reference_octets("info:doi/10.1/x"), b"info:hdl/10.1/x");
        assert_eq!(reference_octets("urn:hdl:10.1/x"), b"urn:hdl:10.1/x");
        assert_eq!(reference_octets("10.1/a%20b"), b"http://proxy/10.1/a%20b");
        let parsed = HandleRef::parse(&reference_octets("iso-8859-7@test/%E1%E2")).unwrap();
        assert_eq!(parsed.handle.as_str(), "test/αβ");
    }

    #[test]
    fn a_plain_path_is_the_handle_a_reference_parse_finds() {
        let long = format!("10.1/{}", "x".repeat(MAX_HANDLE_LEN));
        for raw in [
            "10.1000/abc",
            "ADMIN/x",
            "0.NA/10.1",
            "a.b/c/d+e",
            "10.1/",
            "/10.1/x",
            "noslash",
            "",
            "..a/b",
            &long[..MAX_HANDLE_LEN],
            &long,
            "10.1/a%20b",
            "UTF-8@10.1/x",
            "hdl:10.1/x",
            "doi:10.1/x",
        ] {
            let parsed = HandleRef::parse(&reference_octets(raw)).map(|found| found.handle);
            assert_eq!(referenced_handle(raw), parsed, "{raw}");
        }
    }

    #[test]
    fn http_dates_are_the_date_of_each_second_asked() {
        for seconds in [
            1_704_067_200,
            1_704_067_200,
            0,
            1_704_067_201,
            1_704_067_200,
        ] {
            let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds);
            assert_eq!(http_date(seconds).unwrap(), httpdate::fmt_http_date(when));
        }
        assert_eq!(http_date(0).unwrap(), "Thu, 01 Jan 1970 00:00:00 GMT");
    }

    #[test]
    fn proxy_paths_escape_what_a_path_cannot_hold() {
        assert_eq!(proxy_path("a@b/c d?#"), "/a%40b/c%20d%3F%23");
        assert_eq!(
            proxy_path("cnri.test/日本"),
            "/cnri.test/%E6%97%A5%E6%9C%AC"
        );
        assert_eq!(proxy_path("/evil.example/x"), "/%2Fevil.example/x");
    }
}
