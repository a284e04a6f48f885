//! Global resolution with real processes: two hdl services (ALPHA, BETA) and one hdl
//! Global Handle Registry on loopback. The GHR holds `0.NA/ALPHA` and `0.NA/BETA`
//! (HS_SITE of each service, written from `hdl site`), and `0.NA/DER` delegating the
//! derived prefixes `DER.*` to BETA (HS_SITE.PREFIX). `hdl resolve --root` reaches
//! handles of both services, through a prefix referral for `DER.SUB`; asked directly,
//! the GHR answers a service referral and a service a 301 for a prefix it does not
//! serve; homing works through `hdl home`, `hdl homed`, `hdl unhome`; aliases are
//! followed across services, a loop refused, `--no-follow` shows the alias; a prefix
//! re-homed at the GHR is found at its new home once its TTL ran out; `hdl create`,
//! `add`, `modify`, `remove` and `delete --root` change handles at the primary server
//! of their service, and refuse a prefix the GHR names no service for; `--config FILE`
//! names the GHR by the file's `[resolver] ghr` instead of `--root`.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use hdl::client::{AdminRequest, ClientError, Overwrite, Transport};
use hdl::codec::ResponseCode;
use hdl::names::Handle;
use hdl::resolver::{Aliases, Resolver};
use hdl::values::{HandleValue, Ttl, ValueSelection};

use crate::harness::{ADMIN_ARGS, Server};

/// The configuration of a service under the GHR: 301 for prefixes it does not serve.
const UNDER_GHR: &str = "[resolver]\nrefuse_unserved = true\n";

/// A service under the GHR.
pub(crate) fn service() -> Server {
    Server::start_with_config(UNDER_GHR)
}

/// How long the GHR's HS_SITE values of the re-homing test may be cached.
const SHORT_TTL: u32 = 2;
/// How long a re-homed prefix may take to be found at its new home.
const REHOME_PATIENCE: Duration = Duration::from_secs(30);

pub(crate) fn handle(text: &str) -> Handle {
    Handle::parse(text).expect("valid handle")
}

/// Runs `hdl ARGS`.
pub(crate) fn hdl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(args)
        .output()
        .expect("run hdl")
}

fn succeeds(args: &[&str]) -> (String, String) {
    let output = hdl(args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "hdl {args:?}: {stderr}");
    (String::from_utf8(output.stdout).expect("UTF-8"), stderr)
}

pub(crate) fn fails(args: &[&str]) -> String {
    let output = hdl(args);
    assert!(!output.status.success(), "hdl {args:?} must fail");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `hdl ARGS --server SERVER` as the bootstrap administrator.
fn admin(server: &Server, args: &[&str]) -> String {
    let server_arg = server.server_arg();
    let mut all = args.to_vec();
    all.extend(["--server", &server_arg]);
    all.extend(ADMIN_ARGS);
    succeeds(&all).0
}

/// Creates `name` at `server` with `values`, as the bootstrap administrator.
pub(crate) async fn create(server: &Server, name: &str, values: Vec<HandleValue>) {
    let request = AdminRequest::Create {
        handle: handle(name),
        values,
        overwrite: Overwrite::Replace,
    };
    server.client().admin(request).await.expect(name);
}

pub(crate) fn url(index: u32, text: &str) -> HandleValue {
    HandleValue::new(index, "URL", text)
}

/// An HS_SITE-like value of `kind` describing `service`, cached for `ttl` seconds.
pub(crate) async fn site_value(service: &Server, kind: &str, ttl: u32) -> HandleValue {
    let site = service.client().site_info().await.expect("site info");
    HandleValue {
        ttl: Ttl::Relative(ttl),
        ..HandleValue::new(1, kind, site.encode())
    }
}

/// `hdl resolve HANDLE --root GHR EXTRA…`: its stdout and stderr.
fn resolve_at_root(ghr: &Server, name: &str, extra: &[&str]) -> (String, String) {
    let root = ghr.server_arg();
    let mut args = vec!["resolve", name, "--root", &root];
    args.extend(extra);
    succeeds(&args)
}

#[tokio::test]
async fn the_ghr_leads_to_both_services_and_refers_what_it_does_not_serve() {
    let (ghr, alpha, beta) = (Server::start(), service(), service());
    create(&alpha, "ALPHA/x", vec![url(1, "https://alpha.example/x")]).await;
    create(&beta, "BETA/y", vec![url(1, "https://beta.example/y")]).await;
    create(&beta, "DER.SUB/h", vec![url(1, "https://beta.example/h")]).await;
    let beta_site = site_value(&beta, "HS_SITE", 60).await;
    create(&beta, "0.NA/DER.SUB", vec![beta_site.clone()]).await;
    let site_hex = |service: &Server| {
        let (out, _) = succeeds(&["site", "--server", &service.server_arg()]);
        out.trim().to_owned()
    };
    let (alpha_hex, beta_hex) = (site_hex(&alpha), site_hex(&beta));
    admin(
        &ghr,
        &[
            "create",
            "0.NA/ALPHA",
            "--value",
            &format!("1:HS_SITE:{alpha_hex}"),
        ],
    );
    admin(
        &ghr,
        &[
            "create",
            "0.NA/BETA",
            "--value",
            &format!("1:HS_SITE:{beta_hex}"),
        ],
    );
    admin(
        &ghr,
        &[
            "create",
            "0.NA/DER",
            "--value",
            &format!("1:HS_SITE.PREFIX:{beta_hex}"),
        ],
    );

    // Both services through the GHR; the derived prefix through a prefix referral.
    let (out, _) = resolve_at_root(&ghr, "ALPHA/x", &[]);
    assert!(out.contains("https://alpha.example/x"), "{out}");
    let (out, trace) = resolve_at_root(&ghr, "BETA/y", &["--trace"]);
    assert!(out.contains("https://beta.example/y"), "{out}");
    assert!(trace.contains("for 0.NA/BETA"), "{trace}");
    assert!(trace.contains("resolved BETA/y: 1 value(s)"), "{trace}");
    let (out, trace) = resolve_at_root(&ghr, "DER.SUB/h", &["--trace"]);
    assert!(out.contains("https://beta.example/h"), "{out}");
    assert!(trace.contains("referral 303"), "{trace}");

    // Asked directly, the GHR refers to the service; a service under the GHR refuses
    // what it does not serve with 301, and answers 100 under a prefix it serves; a
    // service on its own (the GHR here) answers 100 for any prefix.
    let all = ValueSelection::default();
    let asked = ghr.anonymous_client();
    match asked
        .resolve(&handle("ALPHA/x"), &all, Transport::Tcp)
        .await
    {
        Err(ClientError::Referred { code, referral }) => {
            assert_eq!(code, ResponseCode::ServiceReferral);
            assert_eq!(referral.handle, b"0.NA/ALPHA");
            let values = referral.values.expect("the referral carries the sites");
            assert_eq!(values.len(), 1);
            assert_eq!(values[0].value_type, "HS_SITE");
        }
        other => panic!("expected a service referral, got {other:?}"),
    }
    let code = |result: Result<_, ClientError>| result.err().and_then(|e| e.response_code());
    let elsewhere = alpha
        .anonymous_client()
        .resolve(&handle("GAMMA/z"), &all, Transport::Tcp)
        .await;
    assert_eq!(code(elsewhere), Some(ResponseCode::ServerNotResponsible));
    let missing = alpha
        .anonymous_client()
        .resolve(&handle("ALPHA/missing"), &all, Transport::Tcp)
        .await;
    assert_eq!(code(missing), Some(ResponseCode::HandleNotFound));
    let on_its_own = asked
        .resolve(&handle("GAMMA/z"), &all, Transport::Tcp)
        .await;
    assert_eq!(code(on_its_own), Some(ResponseCode::HandleNotFound));

    // Homing: a server administrator homes, lists and unhomes; a homed prefix without
    // handles is served (not found, not 301).
    assert_eq!(admin(&alpha, &["home", "GAMMA"]).trim(), "homed 0.NA/GAMMA");
    assert_eq!(admin(&alpha, &["homed"]).trim(), "0.NA/GAMMA");
    let homed = alpha
        .anonymous_client()
        .resolve(&handle("GAMMA/z"), &all, Transport::Tcp)
        .await;
    assert_eq!(code(homed), Some(ResponseCode::HandleNotFound));
    admin(&alpha, &["unhome", "0.NA/GAMMA"]);
    assert_eq!(admin(&alpha, &["homed"]).trim(), "");
    let anonymous = fails(&["home", "DELTA", "--server", &alpha.server_arg()]);
    assert!(
        anonymous.contains("402") || anonymous.contains("credentials"),
        "{anonymous}"
    );

    // Aliases: followed across services, shown with --no-follow, a loop refused.
    let alias = |target: &str| vec![HandleValue::new(1, "HS_ALIAS", target)];
    create(&alpha, "ALPHA/alias", alias("BETA/y")).await;
    create(&alpha, "ALPHA/loop1", alias("ALPHA/loop2")).await;
    create(&alpha, "ALPHA/loop2", alias("ALPHA/loop1")).await;
    let (out, trace) = resolve_at_root(&ghr, "ALPHA/alias", &["--trace", "--type", "URL"]);
    assert!(out.contains("https://beta.example/y"), "{out}");
    assert!(
        trace.contains("ALPHA/alias is an alias of BETA/y"),
        "{trace}"
    );
    let (out, _) = resolve_at_root(&ghr, "ALPHA/alias", &["--no-follow"]);
    assert!(out.contains("HS_ALIAS") && out.contains("BETA/y"), "{out}");
    let root = ghr.server_arg();
    let looped = fails(&["resolve", "ALPHA/loop1", "--root", &root]);
    assert!(
        looped.contains("alias loop: ALPHA/loop1 -> ALPHA/loop2 -> ALPHA/loop1"),
        "{looped}"
    );
}

/// `hdl ARGS --root ROOT` as the bootstrap administrator.
fn at_root<'a>(root: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let mut all = args.to_vec();
    all.extend(["--root", root]);
    all.extend(ADMIN_ARGS);
    all
}

#[tokio::test]
async fn administrative_commands_reach_the_primary_server_through_the_ghr() {
    let (ghr, alpha, beta) = (Server::start(), service(), service());
    for (prefix, service) in [("ALPHA", &alpha), ("BETA", &beta)] {
        let site = site_value(service, "HS_SITE", 60).await;
        create(&ghr, &format!("0.NA/{prefix}"), vec![site]).await;
    }
    let root = ghr.server_arg();
    let created = |name: &str, url: &str| {
        let value = format!("1:URL:{url}");
        succeeds(&at_root(&root, &["create", name, "--value", &value]))
    };
    created("ALPHA/new", "https://alpha.example/new");
    created("ALPHA/kept", "https://alpha.example/kept");
    created("BETA/new", "https://beta.example/new");
    succeeds(&at_root(
        &root,
        &["add", "BETA/new", "--value", "2:DESC:added"],
    ));
    succeeds(&at_root(
        &root,
        &["modify", "BETA/new", "--value", "2:DESC:modified"],
    ));

    // Each change landed at the prefix's own service, not at the GHR.
    let at = |service: &Server, name: &str| {
        succeeds(&["resolve", name, "--server", &service.server_arg()]).0
    };
    assert!(at(&alpha, "ALPHA/new").contains("https://alpha.example/new"));
    let beta_new = at(&beta, "BETA/new");
    assert!(
        beta_new.contains("https://beta.example/new") && beta_new.contains("modified"),
        "{beta_new}"
    );
    let not_at_ghr = fails(&["resolve", "BETA/new", "--server", &ghr.server_arg()]);
    assert!(not_at_ghr.contains("302"), "{not_at_ghr}");

    succeeds(&at_root(&root, &["remove", "BETA/new", "--index", "2"]));
    assert!(!at(&beta, "BETA/new").contains("modified"));
    succeeds(&at_root(&root, &["delete", "ALPHA/new"]));
    let deleted = fails(&["resolve", "ALPHA/new", "--server", &alpha.server_arg()]);
    assert!(deleted.contains("not found"), "{deleted}");

    // A prefix the GHR names no service for, and --root with --server, are refused.
    let nowhere = fails(&at_root(
        &root,
        &["create", "GAMMA/x", "--value", "1:URL:https://x.example/"],
    ));
    assert!(
        nowhere.contains("cannot find where GAMMA/x is administered"),
        "{nowhere}"
    );
    assert!(nowhere.contains("no service for prefix GAMMA"), "{nowhere}");
    let alpha_arg = alpha.server_arg();
    let both = fails(&at_root(
        &root,
        &["delete", "ALPHA/x", "--server", &alpha_arg],
    ));
    assert!(both.contains("cannot be used with"), "{both}");
}

#[tokio::test]
async fn a_configuration_file_names_the_ghr_for_resolution_and_changes() {
    let (ghr, alpha) = (Server::start(), service());
    let site = site_value(&alpha, "HS_SITE", 60).await;
    create(&ghr, "0.NA/ALPHA", vec![site]).await;
    let dir = tempfile::tempdir().expect("temporary directory");
    let config = dir.path().join("client.toml");
    let ghr_line = format!("[resolver]\nghr = [\"{}\"]\n", ghr.address());
    std::fs::write(&config, ghr_line).expect("write the config");
    let config = config.to_str().expect("UTF-8 path");

    let mut create_args = vec![
        "create",
        "ALPHA/conf",
        "--value",
        "1:URL:https://a.example/c",
    ];
    create_args.extend(["--config", config]);
    create_args.extend(ADMIN_ARGS);
    succeeds(&create_args);
    let (out, trace) = succeeds(&["resolve", "ALPHA/conf", "--config", config, "--trace"]);
    assert!(out.contains("https://a.example/c"), "{out}");
    assert!(trace.contains("0.NA/ALPHA"), "{trace}");
    let (at_alpha, _) = succeeds(&["resolve", "ALPHA/conf", "--server", &alpha.server_arg()]);
    assert!(at_alpha.contains("https://a.example/c"), "{at_alpha}");

    let bare = dir.path().join("bare.toml");
    std::fs::write(&bare, "[resolver]\nrefuse_unserved = true\n").expect("write");
    let bare = bare.to_str().expect("UTF-8 path");
    let no_ghr = fails(&["resolve", "ALPHA/conf", "--config", bare]);
    assert!(
        no_ghr.contains("names no Global Handle Registry"),
        "{no_ghr}"
    );
    let missing = fails(&["resolve", "ALPHA/conf", "--config", "/nonexistent/hdl.toml"]);
    assert!(missing.contains("cannot read config"), "{missing}");
    let root = ghr.server_arg();
    let both = fails(&["resolve", "ALPHA/conf", "--config", config, "--root", &root]);
    assert!(both.contains("cannot be used with"), "{both}");
    let with_server = &[
        "resolve",
        "ALPHA/conf",
        "--config",
        config,
        "--server",
        &root,
    ];
    assert!(fails(with_server).contains("cannot be used with"));
}

#[tokio::test]
async fn a_rehomed_prefix_is_found_at_its_new_home_once_its_ttl_ran_out() {
    let (ghr, alpha, beta) = (Server::start(), service(), service());
    create(&alpha, "MOVE/x", vec![url(1, "https://old.example/x")]).await;
    create(&beta, "MOVE/x", vec![url(1, "https://new.example/x")]).await;
    let old_home = site_value(&alpha, "HS_SITE", SHORT_TTL).await;
    create(&ghr, "0.NA/MOVE", vec![old_home]).await;

    let resolver = Resolver::new(vec![ghr.address()]);
    let first_asked = Instant::now();
    let urls = |values: &[HandleValue]| {
        values
            .iter()
            .map(|value| String::from_utf8_lossy(&value.data).into_owned())
            .collect::<Vec<_>>()
    };
    let x = handle("MOVE/x");
    let all = ValueSelection::default();
    let first = resolver
        .resolve_following(&x, &all, Aliases::Follow)
        .await
        .expect("resolved at the old home");
    assert_eq!(urls(&first.values), ["https://old.example/x"]);

    let new_home = site_value(&beta, "HS_SITE", SHORT_TTL).await;
    create(&ghr, "0.NA/MOVE", vec![new_home]).await;
    let deadline = Instant::now() + REHOME_PATIENCE;
    let found_new = loop {
        let resolved = resolver
            .resolve_following(&x, &all, Aliases::Follow)
            .await
            .expect("resolved");
        if urls(&resolved.values) == ["https://new.example/x"] {
            break Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "MOVE/x still at its old home after {REHOME_PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // The old site was kept for its TTL: the new home cannot have been asked sooner.
    assert!(
        found_new - first_asked >= Duration::from_secs(u64::from(SHORT_TTL)),
        "the old site information was not kept for its TTL"
    );
}
