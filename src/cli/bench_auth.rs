//! `hdl bench auth-write`: what one authenticated create costs, over the Handle protocol
//! (each create challenged and answered: two round trips and a signature or MAC on
//! both sides; with `--session`, inside one authenticated session: one MAC each) and
//! over HTTP (Basic credentials checked on every request, or with `--http-session` one
//! `/api/sessions` session authenticated once, then only its id).
//!
//! Creates `--count` handles `<prefix>/write/<run>/<n>` one after another (a fresh
//! random `<run>` per invocation, so runs never collide) and prints one latency line
//! per protocol asked for.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use base64::Engine;
use clap::Args;
use hdl::auth::{RestAlgorithm, RestAnswer, mac_rest, sign_rest};
use hdl::client::authorization::{answer_header, session_header};
use hdl::client::{AdminRequest, Client, Credentials, Key, Overwrite};
use hdl::names::Handle;
use hdl::values::HandleValue;
use hdrhistogram::Histogram;
use serde_json::json;

use super::admin_arg::AuthArgs;
use super::bench::{Unit, line};

/// What this bench counts.
const CREATES: Unit = Unit("creates", "creates/s");
use super::connect::{ServerArg, client, with_credentials};

/// Arguments of `hdl bench auth-write`.
#[derive(Debug, Args)]
pub struct AuthWriteBench {
    /// The Handle protocol server (creates over TCP), unless --only-http.
    #[command(flatten)]
    server: ServerArg,
    /// Also create over the node's HTTP API at HOST:PORT (needs --secret-file).
    #[arg(long, value_name = "HOST:PORT")]
    http: Option<String>,
    /// Skip the Handle protocol.
    #[arg(long, requires = "http")]
    only_http: bool,
    /// Over HTTP, open one session (POST /api/sessions), authenticate it once with
    /// --key or --secret-file, then send only its id, instead of Basic credentials.
    #[arg(long, requires = "http")]
    http_session: bool,
    /// Creates per protocol.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    count: u32,
    /// Create over the Handle protocol inside one authenticated session (one
    /// challenge, then requests signed with the session key) instead of answering a
    /// challenge for each.
    #[arg(long)]
    session: bool,
    /// The prefix of the created handles.
    #[arg(long, default_value = "BENCH")]
    prefix: String,
    #[command(flatten)]
    auth: AuthArgs,
}

/// Runs the creates and prints the figures.
pub async fn run(bench: &AuthWriteBench) -> anyhow::Result<()> {
    let run: u32 = rand::random();
    if !bench.only_http {
        let mut client = with_credentials(client(&bench.server).await?, &bench.auth)?;
        if bench.session {
            client = client.with_session();
            client.open_session().await.context("opening a session")?;
        }
        let (histogram, seconds) = handle_protocol(&client, bench, run).await?;
        if bench.session {
            println!("create over the Handle protocol (one session):");
        } else {
            println!("create over the Handle protocol (challenge-response each):");
        }
        println!("{}", line(&histogram, seconds, CREATES));
    }
    if let (Some(address), true) = (&bench.http, bench.http_session) {
        let (histogram, seconds) = http_session(address, bench, run).await?;
        println!("create over HTTP (one session):");
        println!("{}", line(&histogram, seconds, CREATES));
    } else if let Some(address) = &bench.http {
        let authorization = bench
            .auth
            .basic_header()?
            .context("--http needs --auth and --secret-file")?;
        let client = reqwest::Client::new();
        let (histogram, seconds) = http(&client, address, &authorization, bench, run).await?;
        println!("create over HTTP (Basic credentials each):");
        println!("{}", line(&histogram, seconds, CREATES));
    }
    Ok(())
}

fn histogram() -> anyhow::Result<Histogram<u64>> {
    Histogram::new(3).context("cannot make a histogram")
}

async fn handle_protocol(
    client: &Client,
    bench: &AuthWriteBench,
    run: u32,
) -> anyhow::Result<(Histogram<u64>, f64)> {
    let mut latencies = histogram()?;
    let started = Instant::now();
    for n in 0..bench.count {
        let name = format!("{}/write/{run}/tcp{n}", bench.prefix);
        let request = AdminRequest::Create {
            handle: Handle::parse(&name).context("invalid --prefix")?,
            values: vec![HandleValue::new(1, "URL", "https://example.org/")],
            overwrite: Overwrite::Refuse,
        };
        let sent = Instant::now();
        client
            .admin(request)
            .await
            .with_context(|| format!("creating {name}"))?;
        record(&mut latencies, sent.elapsed())?;
    }
    Ok((latencies, started.elapsed().as_secs_f64()))
}

async fn http(
    client: &reqwest::Client,
    address: &str,
    authorization: &str,
    bench: &AuthWriteBench,
    run: u32,
) -> anyhow::Result<(Histogram<u64>, f64)> {
    let mut latencies = histogram()?;
    let body = json!([{"index": 1, "type": "URL", "data": "https://example.org/"}]).to_string();
    let started = Instant::now();
    for n in 0..bench.count {
        let url = format!(
            "http://{address}/api/handles/{}/write/{run}/http{n}",
            bench.prefix
        );
        let sent = Instant::now();
        let response = client
            .put(&url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::AUTHORIZATION, authorization)
            .body(body.clone())
            .send()
            .await
            .with_context(|| format!("PUT {url}"))?;
        if !response.status().is_success() {
            bail!("PUT {url}: HTTP {}", response.status());
        }
        record(&mut latencies, sent.elapsed())?;
    }
    Ok((latencies, started.elapsed().as_secs_f64()))
}

/// Opens and authenticates one session, creates as [`http`] does with only its id,
/// then closes it.
async fn http_session(
    address: &str,
    bench: &AuthWriteBench,
    run: u32,
) -> anyhow::Result<(Histogram<u64>, f64)> {
    let credentials = bench
        .auth
        .credentials()?
        .context("--http-session needs --auth with --key or --secret-file")?;
    let client = reqwest::Client::new();
    let opened = session_call(&client, reqwest::Method::POST, address, "", None).await?;
    let session = string_field(&opened, "sessionId")?;
    let nonce = base64::engine::general_purpose::STANDARD
        .decode(string_field(&opened, "nonce")?)
        .context("the session nonce is not base64")?;
    let answer = session_answer(&credentials, &nonce)?;
    let header = answer_header(&session, &answer).context("no REST form for this proof")?;
    session_call(
        &client,
        reqwest::Method::PUT,
        address,
        "/this",
        Some(&header),
    )
    .await?;
    let only = session_header(&session);
    let measured = http(&client, address, &only, bench, run).await?;
    session_call(
        &client,
        reqwest::Method::DELETE,
        address,
        "/this",
        Some(&only),
    )
    .await?;
    Ok(measured)
}

/// The answer to `nonce`: an RSA signature with the key, or PBKDF2-HMAC-SHA1 with
/// the secret (what J9 clients send).
fn session_answer(credentials: &Credentials, nonce: &[u8]) -> anyhow::Result<RestAnswer> {
    let cnonce: [u8; 16] = rand::random();
    let proof = match &credentials.key {
        Key::Public(key) => sign_rest(nonce, &cnonce, key)?,
        Key::Secret(secret) => mac_rest(nonce, &cnonce, secret, RestAlgorithm::Pbkdf2HmacSha1)?,
    };
    Ok(RestAnswer {
        identity: credentials.identity.clone(),
        cnonce: cnonce.to_vec(),
        proof,
    })
}

/// `method /api/sessions{path}`; its JSON (null when empty), or the error.
async fn session_call(
    client: &reqwest::Client,
    method: reqwest::Method,
    address: &str,
    path: &str,
    authorization: Option<&str>,
) -> anyhow::Result<serde_json::Value> {
    let url = format!("http://{address}/api/sessions{path}");
    let mut request = client.request(method.clone(), &url);
    if let Some(authorization) = authorization {
        request = request.header(reqwest::header::AUTHORIZATION, authorization);
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("{method} {url}"))?;
    let status = response.status();
    let text = response
        .text()
        .await
        .with_context(|| format!("{method} {url}"))?;
    if !status.is_success() {
        bail!("{method} {url}: HTTP {status}: {text}");
    }
    if text.is_empty() {
        return Ok(serde_json::Value::Null);
    }
    serde_json::from_str(&text).with_context(|| format!("{method} {url}: not JSON"))
}

fn string_field(json: &serde_json::Value, name: &str) -> anyhow::Result<String> {
    json[name]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("no {name} in {json}"))
}

fn record(histogram: &mut Histogram<u64>, elapsed: Duration) -> anyhow::Result<()> {
    let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
    histogram.record(micros).context("latency out of range")
}
