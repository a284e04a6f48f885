//! The caching resolver (`hdl serve --cache`) with real processes, in front of the
//! two services and the GHR of `global`'s setup: a second resolution is a hit (its
//! `/metrics`), an answer is fresh once its TTL ran out and not before, a negative
//! answer is cached and expires, a burst of 1,000 concurrent resolutions of one
//! handle makes one upstream request (counted at the cache and at the service), its
//! web proxy redirects for handles of both services (and follows an alias),
//! administration sent to it is refused with RC 5, and an answer asked for with CT
//! is signed with the cache's own key.

use std::time::{Duration, Instant};

use hdl::client::{AdminRequest, Client, ClientError, Overwrite, Transport};
use hdl::codec::ResponseCode;
use hdl::values::{HandleValue, Ttl, ValueSelection};
use reqwest::StatusCode;
use reqwest::header::LOCATION;

use crate::global::{create, fails, handle, hdl, service, site_value, url};
use crate::harness::{ADMIN_ARGS, CacheServer, Server};
use crate::http::client as http_client;

/// The TTL of the values whose freshness is tested, and of negative answers.
const SHORT_TTL: u32 = 2;
/// The TTL of the values that must stay cached for the whole test.
const LONG_TTL: u32 = 3600;
/// How long a changed value may take to show through the cache.
const FRESH_PATIENCE: Duration = Duration::from_secs(30);
/// Concurrent resolutions of one handle in the burst.
const BURST: usize = 1000;

/// A URL value cached for `ttl` seconds.
fn url_for(ttl: u32, text: &str) -> HandleValue {
    HandleValue {
        ttl: Ttl::Relative(ttl),
        ..url(1, text)
    }
}

/// The GHR, two services under it (prefixes ALPHA and BETA) and a caching resolver
/// in front of the GHR, negative answers cached for [`SHORT_TTL`].
struct Namespace {
    _ghr: Server,
    alpha: Server,
    beta: Server,
    cache: CacheServer,
}

impl Namespace {
    async fn start() -> Namespace {
        let (ghr, alpha, beta) = (Server::start(), service(), service());
        let alpha_site = site_value(&alpha, "HS_SITE", LONG_TTL).await;
        create(&ghr, "0.NA/ALPHA", vec![alpha_site]).await;
        let beta_site = site_value(&beta, "HS_SITE", LONG_TTL).await;
        create(&ghr, "0.NA/BETA", vec![beta_site]).await;
        let config = format!("[cache]\nnegative_ttl_secs = {SHORT_TTL}\n");
        let cache = CacheServer::start(ghr.address(), &config);
        Namespace {
            _ghr: ghr,
            alpha,
            beta,
            cache,
        }
    }
}

/// The URLs `name` resolves to through `client`, or the response code it is
/// refused with.
async fn urls(
    client: &Client,
    name: &str,
    transport: Transport,
) -> Result<Vec<String>, ResponseCode> {
    match client
        .resolve(&handle(name), &ValueSelection::default(), transport)
        .await
    {
        Ok(resolution) => Ok(resolution
            .values
            .iter()
            .map(|value| String::from_utf8_lossy(&value.data).into_owned())
            .collect()),
        Err(error) => Err(error
            .response_code()
            .unwrap_or_else(|| panic!("{name}: {error}"))),
    }
}

/// The value of the sample `name` (a full name with its labels) in a `/metrics`
/// page; 0 when absent.
pub(crate) fn sample(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .map_or(0, |value| value.trim().parse().expect("a count"))
}

const HITS: &str = "hdl_cache_hits_total";
const NEGATIVE_HITS: &str = "hdl_cache_negative_hits_total";
const MISSES: &str = "hdl_cache_misses_total";
const UPSTREAM: &str = r#"hdl_cache_upstream_requests_total{outcome="values"}"#;
const RESOLVED: &str = r#"hdl_requests_total{protocol="handle",op="resolution",code="1"}"#;

/// Resolves `name` through the cache until its URL is `expected`, within
/// [`FRESH_PATIENCE`]; when it was.
async fn until_resolved_to(
    cache: &Client,
    name: &str,
    expected: Result<Vec<String>, ResponseCode>,
) -> Instant {
    let deadline = Instant::now() + FRESH_PATIENCE;
    loop {
        if urls(cache, name, Transport::Tcp).await == expected {
            return Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "{name} still not {expected:?} after {FRESH_PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_second_resolution_is_a_hit_and_an_answer_lasts_its_ttl() {
    let ns = Namespace::start().await;
    create(
        &ns.alpha,
        "ALPHA/stable",
        vec![url_for(LONG_TTL, "https://alpha.example/stable")],
    )
    .await;
    create(
        &ns.beta,
        "BETA/stable",
        vec![url_for(LONG_TTL, "https://beta.example/stable")],
    )
    .await;
    let cache = ns.cache.client();

    // Both services through the cache; the second resolution of each is a hit.
    for (name, target) in [
        ("ALPHA/stable", "https://alpha.example/stable"),
        ("BETA/stable", "https://beta.example/stable"),
    ] {
        for transport in [Transport::Tcp, Transport::Udp] {
            assert_eq!(
                urls(&cache, name, transport).await,
                Ok(vec![target.to_owned()])
            );
        }
    }
    let metrics = ns.cache.metrics().await;
    assert_eq!(sample(&metrics, MISSES), 2, "{metrics}");
    assert_eq!(sample(&metrics, HITS), 2, "{metrics}");
    assert_eq!(sample(&metrics, UPSTREAM), 2, "{metrics}");
    assert!(sample(&metrics, "hdl_cache_bytes") > 0, "{metrics}");
    assert_eq!(sample(&metrics, "hdl_cache_entries"), 2, "{metrics}");

    // A changed value shows once the TTL of the cached one ran out, never before.
    create(
        &ns.alpha,
        "ALPHA/x",
        vec![url_for(SHORT_TTL, "https://old.example/x")],
    )
    .await;
    let first_asked = Instant::now();
    assert_eq!(
        urls(&cache, "ALPHA/x", Transport::Tcp).await,
        Ok(vec!["https://old.example/x".to_owned()])
    );
    create(
        &ns.alpha,
        "ALPHA/x",
        vec![url_for(SHORT_TTL, "https://new.example/x")],
    )
    .await;
    let ttl = Duration::from_secs(u64::from(SHORT_TTL));
    let right_after = urls(&cache, "ALPHA/x", Transport::Tcp).await;
    if first_asked.elapsed() < ttl {
        assert_eq!(
            right_after,
            Ok(vec!["https://old.example/x".to_owned()]),
            "the cached answer within its TTL"
        );
    }
    let fresh = until_resolved_to(
        &cache,
        "ALPHA/x",
        Ok(vec!["https://new.example/x".to_owned()]),
    )
    .await;
    assert!(
        fresh - first_asked >= ttl,
        "the new value came before the old one's TTL ran out"
    );

    // A negative answer is cached for its time, then asked again.
    let first_missed = Instant::now();
    assert_eq!(
        urls(&cache, "BETA/later", Transport::Tcp).await,
        Err(ResponseCode::HandleNotFound)
    );
    create(
        &ns.beta,
        "BETA/later",
        vec![url_for(LONG_TTL, "https://beta.example/later")],
    )
    .await;
    let right_after = urls(&cache, "BETA/later", Transport::Tcp).await;
    if first_missed.elapsed() < ttl {
        assert_eq!(
            right_after,
            Err(ResponseCode::HandleNotFound),
            "the negative answer within its time"
        );
        let metrics = ns.cache.metrics().await;
        assert!(sample(&metrics, NEGATIVE_HITS) >= 1, "{metrics}");
    }
    let found = until_resolved_to(
        &cache,
        "BETA/later",
        Ok(vec!["https://beta.example/later".to_owned()]),
    )
    .await;
    assert!(
        found - first_missed >= ttl,
        "the handle was found before the negative answer expired"
    );
    // No service for a prefix is "not found" too.
    assert_eq!(
        urls(&cache, "NOWHERE/x", Transport::Tcp).await,
        Err(ResponseCode::HandleNotFound)
    );
}

#[tokio::test]
async fn a_burst_of_misses_for_one_handle_makes_one_upstream_request() {
    let ns = Namespace::start().await;
    create(
        &ns.beta,
        "BETA/burst",
        vec![url_for(LONG_TTL, "https://beta.example/burst")],
    )
    .await;
    let resolved_before = sample(&ns.beta.metrics().await, RESOLVED);
    let cache = ns.cache.client();
    let askers: Vec<_> = (0..BURST)
        .map(|_| {
            let cache = cache.clone();
            tokio::spawn(async move { urls(&cache, "BETA/burst", Transport::Udp).await })
        })
        .collect();
    for asker in askers {
        let answer = asker.await.expect("asker");
        assert_eq!(answer, Ok(vec!["https://beta.example/burst".to_owned()]));
    }
    let metrics = ns.cache.metrics().await;
    assert_eq!(
        sample(&metrics, UPSTREAM),
        1,
        "one upstream request: {metrics}"
    );
    let answered = sample(&metrics, HITS) + sample(&metrics, MISSES);
    assert!(
        answered >= BURST as u64,
        "every resolution counted: {metrics}"
    );
    let resolved_after = sample(&ns.beta.metrics().await, RESOLVED);
    assert_eq!(
        resolved_after - resolved_before,
        1,
        "the service resolved it once"
    );
}

#[tokio::test]
async fn the_proxy_redirects_for_both_services_and_administration_is_refused() {
    let ns = Namespace::start().await;
    create(
        &ns.alpha,
        "ALPHA/page",
        vec![url_for(LONG_TTL, "https://alpha.example/page")],
    )
    .await;
    create(
        &ns.beta,
        "BETA/page",
        vec![url_for(LONG_TTL, "https://beta.example/page")],
    )
    .await;
    create(
        &ns.alpha,
        "ALPHA/alias",
        vec![HandleValue::new(1, "HS_ALIAS", "BETA/page")],
    )
    .await;
    let browser = http_client();
    let proxy = |path: &str| {
        browser
            .get(format!("{}/{path}", ns.cache.http_url()))
            .send()
    };
    for (path, target) in [
        ("ALPHA/page", "https://alpha.example/page"),
        ("BETA/page", "https://beta.example/page"),
    ] {
        let response = proxy(path).await.expect("proxy");
        assert_eq!(response.status(), StatusCode::FOUND, "{path}");
        assert_eq!(response.headers()[LOCATION], target, "{path}");
    }
    let alias = proxy("ALPHA/alias").await.expect("proxy");
    assert_eq!(alias.status(), StatusCode::MOVED_PERMANENTLY);
    assert_eq!(alias.headers()[LOCATION], "/BETA/page");
    let missing = proxy("ALPHA/none").await.expect("proxy");
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);

    // Administration: over the Handle protocol (after the challenge) and over HTTP.
    let refused = ns
        .cache
        .client()
        .with_credentials(crate::harness::admin_credentials())
        .admin(AdminRequest::Create {
            handle: handle("ALPHA/new"),
            values: vec![url(1, "https://alpha.example/new")],
            overwrite: Overwrite::Refuse,
        })
        .await;
    match refused {
        Err(ClientError::Server { code, message }) => {
            assert_eq!(code, ResponseCode::OperationNotSupported);
            assert!(message.contains("caching resolver"), "{message}");
        }
        other => panic!("administration must be refused, got {other:?}"),
    }
    let cache = ns.cache.address().to_string();
    let mut args = vec!["delete", "ALPHA/page", "--server", &cache];
    args.extend(ADMIN_ARGS);
    let said = fails(&args);
    assert!(said.contains("caching resolver"), "{said}");
    let delete = browser
        .delete(format!("{}/api/handles/ALPHA/page", ns.cache.http_url()))
        .send()
        .await
        .expect("DELETE");
    assert_eq!(delete.status(), StatusCode::NOT_IMPLEMENTED);
    let text = delete.text().await.expect("body");
    let body: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(body["responseCode"], 5, "{body}");
    // Nothing changed upstream.
    let alpha = ns.alpha.anonymous_client();
    assert_eq!(
        urls(&alpha, "ALPHA/new", Transport::Tcp).await,
        Err(ResponseCode::HandleNotFound)
    );
    let page = urls(&alpha, "ALPHA/page", Transport::Tcp).await;
    assert_eq!(page, Ok(vec!["https://alpha.example/page".to_owned()]));
}

/// A resolution asked for with CT through the cache is signed with the cache's own
/// server key: `hdl resolve --verify`, which takes the key from the site information
/// of the server it asks, accepts it over UDP and TCP, and the signature does not
/// pass as the service's — a client checks the answer of the cache it trusts.
#[tokio::test]
async fn a_certified_answer_through_the_cache_is_signed_by_the_cache() {
    let ns = Namespace::start().await;
    let target = "https://alpha.example/signed";
    create(&ns.alpha, "ALPHA/signed", vec![url_for(LONG_TTL, target)]).await;
    let cache = ns.cache.address().to_string();
    for transport in ["--udp", "--tcp"] {
        let args = ["resolve", "ALPHA/signed", "--server", &cache, "--verify"];
        let output = hdl(&[&args[..], &[transport]].concat());
        let said = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{transport}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(said.contains(target), "{said}");
    }

    let dir = tempfile::tempdir().expect("temporary directory");
    let key_file = dir.path().join("alpha.pubkey");
    let alpha_site = ns.alpha.client().site_info().await.expect("site info");
    std::fs::write(&key_file, &alpha_site.servers[0].public_key).expect("key file");
    let key_arg = key_file.to_str().expect("UTF-8 path");
    let args = [
        "resolve",
        "ALPHA/signed",
        "--server",
        &cache,
        "--verify",
        "--tcp",
    ];
    let as_alpha = hdl(&[&args[..], &["--server-pubkey", key_arg]].concat());
    assert!(
        !as_alpha.status.success(),
        "the cache's signature passed as the service's"
    );
    let said = String::from_utf8_lossy(&as_alpha.stderr);
    assert!(said.contains("signature does not match"), "{said}");
}
