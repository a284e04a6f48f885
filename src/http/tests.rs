//! The router in-process, for what a loopback test cannot show: a caller from
//! another machine (its address given as `ConnectInfo`, no socket involved).

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use tower::ServiceExt;

use super::*;
use crate::storage::Store;

async fn call(method: &str, path: &str, from: &str, body: &str) -> (StatusCode, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("handles.redb")).unwrap());
    let address: SocketAddr = "127.0.0.1:1".parse().unwrap();
    let replica = crate::replication::start_alone(Arc::clone(&store), dir.path(), address).await;
    let state = HttpState {
        service: Service::new(store, replica),
        metrics: Arc::new(Metrics::new()),
        node: NodeInfo {
            id: 1,
            handle: address,
            http: address,
            https: None,
            peer: address,
        },
    };
    let peer: SocketAddr = from.parse().unwrap();
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_owned()))
        .unwrap();
    request.extensions_mut().insert(ConnectInfo(peer));
    let response = router(state).oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn administration_from_another_machine_is_refused_with_403() {
    let body = r#"[{"index":1,"type":"URL","data":"https://a/"}]"#;
    let remote = "192.0.2.7:5000";
    for (method, path) in [
        ("PUT", "/api/handles/TEST/x"),
        ("DELETE", "/api/handles/TEST/x"),
        ("GET", "/api/handles?prefix=TEST"),
        ("GET", "/api/prefixes"),
        ("GET", "/api/handles/TEST/x?publicOnly=false"),
    ] {
        let (status, json) = call(method, path, remote, body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {json}");
        assert_eq!(json["responseCode"], 400, "{method} {path}: {json}");
    }
    let (status, json) = call("PUT", "/api/handles/TEST/x", "[::1]:5000", body).await;
    assert_eq!(
        (status, json["responseCode"].as_u64()),
        (StatusCode::CREATED, Some(1))
    );
}
