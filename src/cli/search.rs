//! `hdl search [--prefix P] TYPE=PATTERN… [--http ADDR] [--auth … --secret-file F |
//! --key K]`: reverse lookup through a node's JSON API (`GET /api/handles?TYPE=PATTERN`),
//! every page of it, one handle a line.
//!
//! A secret authenticates with HTTP Basic on each request, a key with one
//! `/api/sessions` session (module `http_session`). Over plain HTTP the node honours
//! credentials only from loopback with `[http] allow_plain_auth_from_loopback`; give
//! an `https://` URL otherwise.

use crate::client::Key;
use anyhow::{Context, bail};
use clap::Args;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::admin_arg::AuthArgs;
use super::connect::runtime;
use super::http_session::HttpSession;

/// Handles asked for per request (the most a node answers in one page).
const PAGE: usize = 10_000;

/// What a query parameter keeps as it is: the unreserved characters, and `*`.
const KEPT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'*');

/// Arguments of `hdl search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// What to look for, `TYPE=PATTERN` (e.g. `URL=https://example.org/*`): the value
    /// exactly and case-sensitively, `*` standing for any run of characters; several
    /// are ANDed (two of one type must hold for one value). One needs an indexed type
    /// (`[search] indexed_types`, URL and EMAIL by default).
    #[arg(required = true, value_name = "TYPE=PATTERN", value_parser = parse_term)]
    terms: Vec<(String, String)>,
    /// Only handles under this prefix (`10.1000` or `0.NA/10.1000`); without it, every
    /// prefix the administrator may list.
    #[arg(long)]
    prefix: Option<String>,
    /// The node's HTTP API: `HOST:PORT` (plain HTTP) or an `http://` or `https://` URL.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8000")]
    http: String,
    /// Fail rather than read more than this many handles.
    #[arg(long, default_value_t = 100_000)]
    max: usize,
    #[command(flatten)]
    auth: AuthArgs,
}

/// Parses `TYPE=PATTERN` (a clap value parser).
fn parse_term(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((value_type, pattern)) if !value_type.is_empty() => {
            Ok((value_type.to_owned(), pattern.to_owned()))
        }
        _ => Err(format!(
            "{text:?} is not TYPE=PATTERN, e.g. URL=https://example.org/*"
        )),
    }
}

/// Searches and prints the handles found.
pub fn run(args: &SearchArgs) -> anyhow::Result<()> {
    let handles = runtime()?.block_on(search(args))?;
    for handle in handles {
        println!("{handle}");
    }
    Ok(())
}

async fn search(args: &SearchArgs) -> anyhow::Result<Vec<String>> {
    let client = reqwest::Client::new();
    let base = base_url(&args.http);
    let session = match args.auth.credentials()? {
        Some(credentials) if matches!(credentials.key, Key::Public(_)) => {
            Some(HttpSession::open(&client, &base, &credentials).await?)
        }
        _ => None,
    };
    let authorization = match &session {
        Some(session) => Some(session.header.clone()),
        None => args.auth.basic_header()?,
    };
    let mut handles = Vec::new();
    for page in 0.. {
        let url = format!(
            "{base}/api/handles?{}&limit={PAGE}&page={page}",
            query(args)
        );
        let found = get_page(&client, &url, authorization.as_deref()).await?;
        let last = found.len() < PAGE;
        handles.extend(found);
        if handles.len() > args.max {
            bail!("more than {} handles match; raise --max", args.max);
        }
        if last {
            break;
        }
    }
    if let Some(session) = session {
        session.close(&client).await?;
    }
    Ok(handles)
}

/// `http://ADDR` for a bare `HOST:PORT`, the URL itself otherwise (no trailing `/`).
fn base_url(http: &str) -> String {
    let base = if http.contains("://") {
        http.to_owned()
    } else {
        format!("http://{http}")
    };
    base.trim_end_matches('/').to_owned()
}

/// The query string of the search, every part percent-encoded but `*`.
fn query(args: &SearchArgs) -> String {
    let encode = |text: &str| utf8_percent_encode(text, KEPT).to_string();
    let mut parts: Vec<String> = args
        .terms
        .iter()
        .map(|(value_type, pattern)| format!("{}={}", encode(value_type), encode(pattern)))
        .collect();
    if let Some(prefix) = &args.prefix {
        parts.push(format!("prefix={}", encode(prefix)));
    }
    parts.join("&")
}

/// The handles of one page, or the node's refusal.
async fn get_page(
    client: &reqwest::Client,
    url: &str,
    authorization: Option<&str>,
) -> anyhow::Result<Vec<String>> {
    let mut request = client.get(url);
    if let Some(authorization) = authorization {
        request = request.header(reqwest::header::AUTHORIZATION, authorization);
    }
    let response = request.send().await.with_context(|| format!("GET {url}"))?;
    let status = response.status();
    let text = response
        .text()
        .await
        .with_context(|| format!("GET {url}"))?;
    if !status.is_success() {
        let json: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let message = json["message"].as_str().unwrap_or(&text);
        bail!("the search was refused: HTTP {status}: {message}");
    }
    serde_json::from_str(&text).with_context(|| format!("GET {url}: not a JSON list: {text}"))
}
