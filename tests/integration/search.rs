//! Reverse lookup end to end against a real `hdl serve`: `GET /api/handles?TYPE=PATTERN`
//! exact and with wildcards, by prefix, ANDed, paged, following writes; who may search
//! (LIST_HANDLES) and what they find (values they may read); and `hdl search`.

use std::collections::BTreeSet;
use std::process::Command;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{ADMIN_ARGS, Server};
use crate::http::{Api, basic_client, client, json_of};

fn url(index: u32, url: &str) -> Value {
    json!({"index": index, "type": "URL", "data": url})
}

fn email(index: u32, address: &str, permissions: &str) -> Value {
    json!({"index": index, "type": "EMAIL", "data": address, "permissions": permissions})
}

async fn put(api: &Api, handle: &str, values: Value) {
    let response = api.put(&format!("/api/handles/{handle}"), &values).await;
    assert!(
        response.status().is_success(),
        "PUT {handle}: {}",
        response.status()
    );
}

/// The handles `query` finds for `api`'s administrator.
async fn found(api: &Api, query: &str) -> Vec<String> {
    let (status, body) = json_of(api.get(&format!("/api/handles?{query}")).await).await;
    assert_eq!(status, StatusCode::OK, "{query}: {body}");
    serde_json::from_value(body).expect("a list of handles")
}

async fn world(api: &Api) {
    put(api, "TEST/a", json!([url(1, "https://a.example/doc.pdf")])).await;
    put(api, "TEST/b", json!([url(1, "https://a.example/doc.html")])).await;
    let other = json!([
        url(1, "https://b.example/doc.pdf"),
        email(2, "curator@b.example", "1110")
    ]);
    put(api, "OTHER/c", other).await;
    for n in 0..5 {
        put(
            api,
            &format!("PAGE/{n}"),
            json!([url(1, "https://same.example/")]),
        )
        .await;
    }
}

#[tokio::test]
async fn handles_are_found_by_exact_and_wildcard_values_by_prefix_and_in_pages() {
    let api = Api::start();
    world(&api).await;
    let cases: &[(&str, &[&str])] = &[
        ("URL=https://a.example/doc.pdf", &["TEST/a"]),
        ("URL=https://a.example/*", &["TEST/b", "TEST/a"]),
        ("URL=*.pdf", &["TEST/a", "OTHER/c"]),
        ("url=*example/doc*&prefix=test", &["TEST/b", "TEST/a"]),
        ("URL=*example/doc*&prefix=0.NA/OTHER", &["OTHER/c"]),
        ("URL=*.pdf&EMAIL=curator@*", &["OTHER/c"]),
        ("URL=https://*&URL=*.html", &["TEST/b"]),
        ("URL=HTTPS://A.EXAMPLE/*", &[]),
        ("URL=https://a.example/doc", &[]),
    ];
    for (query, expected) in cases {
        assert_eq!(found(&api, query).await, *expected, "{query}");
    }

    let mut paged = BTreeSet::new();
    for (page, size) in [(0, 2), (1, 2), (2, 1), (3, 0)] {
        let query = format!("URL=https://same.example/&limit=2&page={page}");
        let handles = found(&api, &query).await;
        assert_eq!(handles.len(), size, "{query}");
        paged.extend(handles);
    }
    assert_eq!(paged.len(), 5, "every handle once: {paged:?}");
    assert_eq!(found(&api, "URL=*&pageSize=3").await.len(), 3);

    let (status, body) = json_of(api.get("/api/handles?DESC=anything").await).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["responseCode"], 4);
    assert!(
        body["message"].as_str().unwrap_or("").contains("URL"),
        "{body}"
    );

    let moved = json!([url(1, "https://a.example/moved.pdf")]);
    put(&api, "TEST/b", moved).await;
    assert!(
        api.delete("/api/handles/TEST/a")
            .await
            .status()
            .is_success()
    );
    assert_eq!(found(&api, "URL=https://a.example/*").await, ["TEST/b"]);
    assert_eq!(found(&api, "URL=*.html").await, Vec::<String>::new());
}

#[tokio::test]
async fn searching_needs_list_handles_and_finds_only_values_the_caller_may_read() {
    let api = Api::start();
    world(&api).await;
    let user = json!([
        {"index": 300, "type": "HS_SECKEY", "data": "user-secret"}
    ]);
    put(&api, "TEST/user", user).await;
    let private = json!([
        url(1, "https://private.example/"),
        email(2, "secret@private.example", "1100")
    ]);
    put(&api, "TEST/private", private).await;
    let user = basic_client("300%3ATEST/user", "user-secret");
    let search = |who: &reqwest::Client, query: &str| {
        let request = who.get(api.url(&format!("/api/handles?{query}")));
        async move { json_of(request.send().await.expect("GET")).await }
    };

    let (status, body) = search(&client(), "URL=*").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "anonymous: {body}");
    let (status, body) = search(&user, "prefix=TEST&URL=*").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "no LIST_HANDLES: {body}");
    let (status, body) = search(&user, "URL=*").await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!([])),
        "no prefix to list"
    );

    // TEST/user may now list TEST, and read no value that is not public.
    let lister = json!([{"index": 100, "type": "HS_ADMIN", "data": {"format": "admin",
        "value": {"handle": "TEST/user", "index": 300, "permissions": "100000000000"}}}]);
    put(&api, "0.NA/TEST", lister).await;
    let (status, body) = search(&user, "URL=https://*").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!(["TEST/b", "TEST/a", "TEST/private"]),
        "the handles of TEST only"
    );
    let (_, body) = search(&user, "prefix=TEST&EMAIL=secret@private.example").await;
    assert_eq!(body, json!([]), "a value it may not read is not found");
    let (_, body) = search(&user, "prefix=TEST&URL=https://private.example/").await;
    assert_eq!(body, json!(["TEST/private"]), "its public value is");
    assert_eq!(
        found(&api, "EMAIL=secret@*").await,
        ["TEST/private"],
        "the administrator reads it"
    );
}

fn hdl(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(args)
        .output()
        .expect("run hdl")
}

#[tokio::test]
async fn hdl_search_prints_every_handle_found_one_a_line() {
    let api = Api::start();
    world(&api).await;
    let server: &Server = &api.server;
    let http = server.http_address().to_string();
    let mut args = vec!["search", "--http", &http];
    args.extend(ADMIN_ARGS);
    let run = |more: &[&str]| {
        let mut all = args.clone();
        all.extend(more);
        hdl(&all)
    };
    let output = run(&["URL=*.pdf"]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "TEST/a\nOTHER/c\n");
    let output = run(&["--prefix", "PAGE", "URL=https://same.example/"]);
    assert_eq!(String::from_utf8_lossy(&output.stdout).lines().count(), 5);
    let output = run(&["--max", "2", "URL=https://same.example/"]);
    assert!(!output.status.success());
    let output = run(&["DESC=x"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("indexes"),
        "{stderr}"
    );
    let anonymous = hdl(&["search", "--http", &http, "URL=*"]);
    assert!(!anonymous.status.success());
    assert!(
        String::from_utf8_lossy(&anonymous.stderr).contains("401"),
        "{anonymous:?}"
    );
}
