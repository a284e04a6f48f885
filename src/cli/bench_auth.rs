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

use crate::client::{AdminRequest, Client, Overwrite};
use crate::names::Handle;
use crate::values::HandleValue;
use anyhow::{Context, bail};
use clap::Args;
use hdrhistogram::Histogram;
use serde_json::json;

use super::admin_arg::AuthArgs;
use super::bench::{Unit, line};
use super::http_session::HttpSession;

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
    let session = HttpSession::open(&client, &format!("http://{address}"), &credentials).await?;
    let measured = http(&client, address, &session.header, bench, run).await?;
    session.close(&client).await?;
    Ok(measured)
}

fn record(histogram: &mut Histogram<u64>, elapsed: Duration) -> anyhow::Result<()> {
    let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
    histogram.record(micros).context("latency out of range")
}
