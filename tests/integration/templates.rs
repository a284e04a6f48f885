//! Template handles end to end against a real `hdl serve`: prefix handles holding an
//! HS_NAMESPACE template make handles that do not exist resolve to values derived
//! from their base handle, over UDP and TCP (`hdl resolve`), the JSON API (which says
//! the answer is derived) and the proxy (which redirects to the derived URL);
//! `<notfound/>` leaves a handle missing, a delimiter of `/` templates the whole
//! prefix, a template may be cited from another handle and a base handle's own
//! template comes first, a malformed cited template is a clear error that leaves the
//! server serving, a handle that exists is never templated, and a malformed
//! HS_NAMESPACE is refused when written (Handle protocol and JSON API), naming the
//! fault.

use reqwest::StatusCode;
use reqwest::header::LOCATION;
use serde_json::json;

use crate::commands::{fails, succeeds};
use crate::http::{Api, json_of};

/// The template of prefix TPL: page links from the base's URL values, a description,
/// and not found for the extension `gone`.
const PAGES: &str = r#"<namespace><contact>ops@e.org</contact>
  <template delimiter="@">
    <if value="extension" test="equals" expression="gone"><notfound/></if>
    <foreach>
      <if value="type" test="equals" expression="URL">
        <value data="${data}?page=${extension}"/>
      </if>
    </foreach>
    <if test="matches" expression="(\d+)-(\d+)" parameter="range">
      <value index="100" type="DESC" data="pages ${range[1]} to ${range[2]} of ${base}"/>
    </if>
  </template></namespace>"#;

/// Creates `handle` through the API with `values` (JSON), as the administrator.
async fn put(api: &Api, handle: &str, values: serde_json::Value) {
    let response = api.put(&format!("/api/handles/{handle}"), &values).await;
    assert_eq!(response.status(), StatusCode::CREATED, "PUT {handle}");
}

async fn namespace(api: &Api, prefix: &str, xml: &str) {
    put(
        api,
        &format!("0.NA/{prefix}"),
        json!([{"index": 1, "type": "HS_NAMESPACE", "data": xml}]),
    )
    .await;
}

#[tokio::test]
async fn templates_derive_missing_handles_over_every_edge() {
    let api = Api::start();
    let server = &api.server;
    put(
        &api,
        "TPL/base",
        json!([
            {"index": 1, "type": "URL", "data": "https://e.org/doc"},
            {"index": 2, "type": "EMAIL", "data": "a@e.org"},
        ]),
    )
    .await;
    put(
        &api,
        "TPL/base@fixed",
        json!([{"index": 1, "type": "URL", "data": "https://e.org/stored"}]),
    )
    .await;
    namespace(&api, "TPL", PAGES).await;
    namespace(&api, "WHOLE", r#"<namespace><template delimiter="/"><value type="URL" data="https://w.org/${extension}?from=${base}"/></template></namespace>"#).await;
    // A malformed namespace cannot be written (see below); a template it cites, held
    // by a value of another type, is read only when a handle is derived.
    put(
        &api,
        "BAD/tpl",
        json!([{"index": 1, "type": "DESC", "data": r#"<template><vlaue type="URL"/></template>"#}]),
    )
    .await;
    namespace(
        &api,
        "BAD",
        r#"<namespace><template delimiter="@" ref="1:BAD/tpl"/></namespace>"#,
    )
    .await;

    // The Handle protocol, over UDP and over TCP.
    for transport in ["--udp", "--tcp"] {
        let out = succeeds(server, &["resolve", "TPL/base@3-9", transport]);
        assert!(
            out.contains("https://e.org/doc?page=3-9"),
            "{transport}: {out}"
        );
        assert!(
            out.contains("pages 3 to 9 of TPL/base"),
            "{transport}: {out}"
        );
        assert!(
            !out.contains("a@e.org"),
            "{transport}: only URL values are copied: {out}"
        );
    }
    let typed = succeeds(server, &["resolve", "TPL/base@3-9", "--type", "DESC"]);
    assert!(
        typed.contains("pages 3 to 9") && !typed.contains("https://"),
        "{typed}"
    );
    let gone = fails(server, &["resolve", "TPL/base@gone"]);
    assert!(gone.contains("not found"), "{gone}");
    let whole = succeeds(server, &["resolve", "WHOLE/any/thing"]);
    assert!(
        whole.contains("https://w.org/any/thing?from=WHOLE"),
        "{whole}"
    );

    // The JSON API says where a derived answer came from; a stored one has no mark.
    let (status, body) = json_of(api.get("/api/handles/TPL/base@12").await).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["values"][0]["data"]["value"],
        "https://e.org/doc?page=12"
    );
    assert_eq!(
        body["template"],
        json!({"namespace": "0.NA/TPL", "base": "TPL/base"})
    );
    let (status, body) = json_of(api.get("/api/handles/TPL/base@gone").await).await;
    assert_eq!(
        (status, &body["responseCode"]),
        (StatusCode::NOT_FOUND, &json!(100))
    );

    // Handles that exist are answered as stored.
    let (_, stored) = json_of(api.get("/api/handles/TPL/base@fixed").await).await;
    assert_eq!(stored["values"][0]["data"]["value"], "https://e.org/stored");
    assert!(stored.get("template").is_none(), "{stored}");
    let (_, base) = json_of(api.get("/api/handles/TPL/base").await).await;
    assert_eq!(base["values"].as_array().map(Vec::len), Some(2), "{base}");

    // The proxy redirects to the derived URL; not found is a 404 page.
    let redirect = api.get("/TPL/base@7").await;
    assert_eq!(redirect.status(), StatusCode::FOUND);
    assert_eq!(redirect.headers()[LOCATION], "https://e.org/doc?page=7");
    assert_eq!(
        api.get("/TPL/base@gone").await.status(),
        StatusCode::NOT_FOUND
    );

    // A template cited from another handle's value; a base handle's own template.
    put(
        &api,
        "REF/tpl",
        json!([{"index": 2, "type": "DESC",
        "data": r#"<template><value type="URL" data="https://r.org/${extension}"/></template>"#}]),
    )
    .await;
    namespace(
        &api,
        "REF",
        r#"<namespace><template delimiter="@" ref="2:REF/tpl"/></namespace>"#,
    )
    .await;
    let cited = succeeds(server, &["resolve", "REF/any@x1"]);
    assert!(cited.contains("https://r.org/x1"), "{cited}");
    put(&api, "TPL/own", json!([
        {"index": 1, "type": "URL", "data": "https://e.org/own"},
        {"index": 2, "type": "HS_NAMESPACE",
         "data": r#"<namespace><template><value type="URL" data="https://own.org/${extension}"/></template></namespace>"#},
    ]))
    .await;
    let (_, own) = json_of(api.get("/api/handles/TPL/own@5").await).await;
    assert_eq!(
        own["values"][0]["data"]["value"], "https://own.org/5",
        "{own}"
    );
    assert_eq!(own["template"]["namespace"], "TPL/own", "{own}");

    // A malformed cited template: a clear error (RC 2, HTTP 500) naming the handle
    // holding it; the server goes on serving.
    let refused = fails(server, &["resolve", "BAD/x@y"]);
    assert!(
        refused.contains("BAD/tpl") && refused.contains("unknown template element <vlaue>"),
        "{refused}"
    );
    let (status, body) = json_of(api.get("/api/handles/BAD/x@y").await).await;
    assert_eq!(
        (status, &body["responseCode"]),
        (StatusCode::INTERNAL_SERVER_ERROR, &json!(2))
    );
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("<vlaue>")),
        "{body}"
    );
    let again = succeeds(server, &["resolve", "TPL/base@1"]);
    assert!(again.contains("https://e.org/doc?page=1"), "{again}");
}

#[tokio::test]
async fn malformed_namespaces_are_refused_when_written() {
    let api = Api::start();
    let server = &api.server;
    let misspelt =
        r#"<namespace><template delimiter="@"><vlaue type="URL"/></template></namespace>"#;
    let value = format!("1:HS_NAMESPACE:{misspelt}");

    // The Handle protocol: create, and add to a prefix handle that exists.
    let refused = fails(server, &["create", "0.NA/BROKEN", "--value", &value]);
    assert!(
        refused.starts_with("hdl: 202 invalid value")
            && refused.contains("HS_NAMESPACE data is not a valid namespace")
            && refused.contains("unknown template element <vlaue>"),
        "{refused}"
    );
    succeeds(server, &["create", "0.NA/BROKEN", "--value", "2:DESC:ops"]);
    let unclosed = "1:HS_NAMESPACE:<namespace><template delimiter=\"@\">";
    let refused = fails(server, &["add", "0.NA/BROKEN", "--value", unclosed]);
    assert!(
        refused.starts_with("hdl: 202 invalid value") && refused.contains("not well-formed XML"),
        "{refused}"
    );

    // The JSON API.
    let response = api
        .put(
            "/api/handles/0.NA/BROKEN2",
            &json!([{"index": 1, "type": "HS_NAMESPACE", "data": misspelt}]),
        )
        .await;
    let (status, body) = json_of(response).await;
    assert_eq!(
        (status, &body["responseCode"]),
        (StatusCode::BAD_REQUEST, &json!(202)),
        "{body}"
    );
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("unknown template element <vlaue>")),
        "{body}"
    );

    // Nothing was stored: the prefix handle holds only its DESC, BROKEN2 does not exist.
    let stored = succeeds(server, &["resolve", "0.NA/BROKEN"]);
    assert!(!stored.contains("HS_NAMESPACE"), "{stored}");
    let missing = fails(server, &["resolve", "0.NA/BROKEN2"]);
    assert!(missing.contains("not found"), "{missing}");
}
