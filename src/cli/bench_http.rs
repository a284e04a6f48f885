//! `hdl bench http`: load on a running node's HTTP edge.
//!
//! Seeds `--handles` handles `<prefix>/bench/<n>` (one URL value each) with API PUTs
//! (replacing any that exist); then `--concurrency` tasks send `GET
//! /api/handles/<handle>` (expecting 200), or with `--proxy` `GET /<handle>`
//! (expecting a 302 to the URL), for `--duration` seconds over kept-alive HTTP/1.1
//! connections. Latencies go into HDR histograms (microseconds); an unexpected
//! status or a failed request counts as an error, not a latency.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use hdrhistogram::Histogram;
use reqwest::{Client, StatusCode};
use serde_json::json;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::bench::{Unit, line};

/// Arguments of `hdl bench http`.
#[derive(Debug, Args)]
pub struct HttpBench {
    /// The node's HTTP address, HOST:PORT.
    #[arg(long)]
    server: String,
    /// Concurrent clients.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    concurrency: u32,
    /// Seconds to run.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    duration: u64,
    /// Handles to seed and read.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    handles: u32,
    /// The prefix of the seeded handles.
    #[arg(long, default_value = "BENCH")]
    prefix: String,
    /// Measure proxy redirects (`GET /<handle>`) instead of API reads.
    #[arg(long)]
    proxy: bool,
    /// The administrator seeding the handles (HTTP Basic: `--secret-file`).
    #[command(flatten)]
    auth: super::admin_arg::AuthArgs,
}

/// Seeds, runs and prints the figures.
pub async fn run(bench: &HttpBench) -> anyhow::Result<()> {
    let client = Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .context("cannot build the HTTP client")?;
    let base = format!("http://{}", bench.server);
    let names: Arc<Vec<String>> = Arc::new(
        (0..bench.handles)
            .map(|n| format!("{}/bench/{n}", bench.prefix))
            .collect(),
    );
    let authorization = bench.auth.basic_header()?;
    seed(&client, &base, &names, authorization.as_deref()).await?;
    let deadline = Instant::now() + Duration::from_secs(bench.duration);
    let started = Instant::now();
    let mut workers = JoinSet::new();
    for _ in 0..bench.concurrency {
        let (client, base, names) = (client.clone(), base.clone(), names.clone());
        let proxy = bench.proxy;
        workers.spawn(async move { work(&client, &base, &names, proxy, deadline).await });
    }
    let mut latencies = histogram()?;
    let mut errors = 0u64;
    while let Some(result) = workers.join_next().await {
        let (histogram, failed) = result.context("a client task failed")??;
        latencies.add(&histogram)?;
        errors += failed;
    }
    let seconds = started.elapsed().as_secs_f64();
    let what = if bench.proxy {
        "proxy redirect"
    } else {
        "API GET"
    };
    println!(
        "http {what}: {} clients, {seconds:.1} s, {} handles",
        bench.concurrency, bench.handles
    );
    println!(
        "ok     {}",
        line(&latencies, seconds, Unit("requests", "req/s"))
    );
    println!("errors {errors}");
    if latencies.is_empty() {
        bail!("every request failed ({errors} errors)");
    }
    Ok(())
}

fn histogram() -> anyhow::Result<Histogram<u64>> {
    Ok(Histogram::new_with_bounds(1, 600_000_000, 3)?)
}

/// PUTs every handle, one after another (the seed is not what is measured).
async fn seed(
    client: &Client,
    base: &str,
    names: &[String],
    authorization: Option<&str>,
) -> anyhow::Result<()> {
    for name in names {
        let body =
            json!([{"index": 1, "type": "URL", "data": format!("https://example.org/{name}")}]);
        let mut request = client
            .put(format!("{base}/api/handles/{name}"))
            .header(reqwest::header::CONTENT_TYPE, "application/json");
        if let Some(authorization) = authorization {
            request = request.header(reqwest::header::AUTHORIZATION, authorization);
        }
        let response = request
            .body(body.to_string())
            .send()
            .await
            .with_context(|| format!("seeding {name}"))?;
        if !response.status().is_success() {
            bail!("seeding {name}: HTTP {}", response.status());
        }
    }
    Ok(())
}

/// Sends requests until the deadline; the latencies and the error count.
async fn work(
    client: &Client,
    base: &str,
    names: &[String],
    proxy: bool,
    deadline: Instant,
) -> anyhow::Result<(Histogram<u64>, u64)> {
    let mut latencies = histogram()?;
    let mut errors = 0;
    let (path, expected) = if proxy {
        ("", StatusCode::FOUND)
    } else {
        ("/api/handles", StatusCode::OK)
    };
    while Instant::now() < deadline {
        let name = &names[rand::random_range(0..names.len())];
        let started = Instant::now();
        let outcome = client.get(format!("{base}{path}/{name}")).send().await;
        let ok = match outcome {
            Ok(response) => response.status() == expected && response.bytes().await.is_ok(),
            Err(_) => false,
        };
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        if ok {
            latencies.saturating_record(micros);
        } else {
            errors += 1;
        }
    }
    Ok((latencies, errors))
}
