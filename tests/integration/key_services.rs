//! Administrators whose identity handles live at another service. A node given a
//! Global Handle Registry (`[resolver] ghr`) finds that service (`0.NA/<prefix>` →
//! HS_SITE → the server the site's hash picks) and checks the key there: an HS_PUBKEY
//! is resolved and the signature checked locally; an HS_SECKEY answer is sent to the
//! holder in an OC_VERIFY_RESPONSE (201). Refusals leave the store unchanged.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdl::auth::{SecretKey, SigningKey};
use hdl::client::{AdminRequest, Client, Credentials, Key, Overwrite, Transport};
use hdl::codec::ResponseCode;
use hdl::names::Handle;
use hdl::values::{AdminPermissions, AdminRecord, HandleValue, Permissions, ValueSelection};

use crate::harness::{ADMIN_KEY, OTHER_KEY, Server};
use crate::raw;

const OTHER_SECRET: &[u8] = b"the other service's secret";

fn handle(text: &str) -> Handle {
    Handle::parse(text).expect("valid handle")
}

fn signing_key(path: &str) -> Arc<SigningKey> {
    let pem = std::fs::read_to_string(path).expect("key file");
    Arc::new(SigningKey::from_pem(&pem).expect("PEM"))
}

fn create(name: &str, values: Vec<HandleValue>) -> AdminRequest {
    AdminRequest::Create {
        handle: handle(name),
        values,
        overwrite: Overwrite::Refuse,
    }
}

fn admin_value(index: u32, admin_index: u32) -> HandleValue {
    let record = AdminRecord {
        permissions: AdminPermissions::ADD_VALUE,
        admin_handle: "OTHER/user".into(),
        admin_index,
        legacy_padding: false,
    };
    HandleValue {
        permissions: Permissions::ADMIN_ONLY,
        ..HandleValue::new(index, "HS_ADMIN", record.encode())
    }
}

/// The other service, which is also the GHR: it holds `0.NA/OTHER` (its own HS_SITE)
/// and `OTHER/user` (OTHER_KEY at 300, a secret key at 301).
async fn other_service() -> Server {
    let service = Server::start();
    let admin = service.client();
    let site = admin.site_info().await.expect("site info").encode();
    let prefix = vec![HandleValue::new(1, "HS_SITE", site)];
    admin
        .admin(create("0.NA/OTHER", prefix))
        .await
        .expect("prefix handle");
    let public = signing_key(OTHER_KEY).public_key().encode();
    let user = vec![
        HandleValue::new(300, "HS_PUBKEY", public),
        HandleValue {
            permissions: Permissions::ADMIN_ONLY,
            ..HandleValue::new(301, "HS_SECKEY", OTHER_SECRET)
        },
    ];
    admin.admin(create("OTHER/user", user)).await.expect("user");
    service
}

/// A node whose GHR is `ghr`, holding `TEST/target`, which `300:OTHER/user` and
/// `301:OTHER/user` may add values to.
async fn node_asking(ghr: &Server) -> Server {
    let config = format!("[resolver]\nghr = [\"{}\"]\n", ghr.address());
    let node = Server::start_with_config(&config);
    let target = vec![
        admin_value(100, 300),
        admin_value(101, 301),
        HandleValue::new(1, "URL", "https://a.example/"),
    ];
    node.client()
        .admin(create("TEST/target", target))
        .await
        .expect("target");
    node
}

fn as_other_user(node: &Server, index: u32, key: Key) -> Client {
    let identity = hdl::config::parse_identity(&format!("{index}:OTHER/user")).expect("id");
    node.anonymous_client()
        .with_credentials(Credentials { identity, key })
}

fn add_url(index: u32) -> AdminRequest {
    AdminRequest::AddValues {
        handle: handle("TEST/target"),
        values: vec![HandleValue::new(index, "URL", "https://b.example/")],
        overwrite: Overwrite::Refuse,
    }
}

async fn target_indexes(node: &Server) -> Vec<u32> {
    let resolution = node
        .anonymous_client()
        .resolve(
            &handle("TEST/target"),
            &ValueSelection::all(),
            Transport::Tcp,
        )
        .await
        .expect("target resolves");
    resolution
        .values
        .iter()
        .map(|value| value.index.0)
        .collect()
}

#[tokio::test]
async fn keys_held_by_another_service_are_checked_there() {
    let other = other_service().await;
    let node = node_asking(&other).await;

    let public = as_other_user(&node, 300, Key::Public(signing_key(OTHER_KEY)));
    public
        .admin(add_url(2))
        .await
        .expect("public key checked at its service");
    let secret = Key::Secret(SecretKey(OTHER_SECRET.to_vec()));
    let secret = as_other_user(&node, 301, secret);
    secret
        .admin(add_url(3))
        .await
        .expect("secret key checked by OC 201");
    assert_eq!(target_indexes(&node).await, vec![1, 2, 3]);

    let wrong_key = as_other_user(&node, 300, Key::Public(signing_key(ADMIN_KEY)));
    let wrong_secret = as_other_user(&node, 301, Key::Secret(SecretKey(b"guess".to_vec())));
    for (who, client) in [("wrong key", wrong_key), ("wrong secret", wrong_secret)] {
        let error = client.admin(add_url(4)).await.expect_err(who);
        assert_eq!(
            error.response_code(),
            Some(ResponseCode::AuthenticationFailed),
            "{who}: {error}"
        );
    }
    assert_eq!(
        target_indexes(&node).await,
        vec![1, 2, 3],
        "refusals changed nothing"
    );
}

#[tokio::test]
async fn an_identity_no_service_holds_is_refused_and_changes_nothing() {
    let other = other_service().await;
    let node = node_asking(&other).await;
    let identity = hdl::config::parse_identity("300:NOWHERE/user").expect("id");
    let key = Key::Public(signing_key(OTHER_KEY));
    let client = node
        .anonymous_client()
        .with_credentials(Credentials { identity, key });
    let error = client.admin(add_url(2)).await.expect_err("no service");
    assert_eq!(
        error.response_code(),
        Some(ResponseCode::AuthenticationError),
        "{error}"
    );

    // Without a GHR the node asks nobody.
    let alone = Server::start();
    let error = as_other_user(&alone, 300, Key::Public(signing_key(OTHER_KEY)))
        .admin(create(
            "ADMIN/x",
            vec![HandleValue::new(1, "URL", "https://c.example/")],
        ))
        .await
        .expect_err("not held");
    assert_eq!(
        error.response_code(),
        Some(ResponseCode::AuthenticationError),
        "{error}"
    );
    assert_eq!(target_indexes(&node).await, vec![1]);
}

#[tokio::test]
async fn a_server_answers_verify_requests_for_the_secret_keys_it_holds() {
    let other = other_service().await;
    let client = other.anonymous_client();
    let challenge = hdl::auth::ChallengeBody {
        request_digest: hdl::codec::RequestDigest::for_version(
            hdl::codec::ProtocolVersion::new(2, 11),
            b"some request",
        ),
        nonce: vec![7; 16],
    };
    let version = hdl::codec::ProtocolVersion::new(2, 11);
    let answer = |secret: &[u8]| {
        hdl::auth::answer_secret(&challenge, version, &SecretKey(secret.to_vec())).expect("answer")
    };
    let request = |index: u32, answer: Vec<u8>| hdl::codec::VerifyRequest {
        key_handle: b"OTHER/user".to_vec(),
        key_index: index,
        nonce: challenge.nonce.clone(),
        digest: challenge.request_digest.clone(),
        answer,
    };
    assert!(
        client
            .verify_answer(request(301, answer(OTHER_SECRET)))
            .await
            .expect("201")
    );
    assert!(
        client
            .verify_answer(request(0, answer(OTHER_SECRET)))
            .await
            .expect("any index")
    );
    assert!(
        !client
            .verify_answer(request(301, answer(b"guess")))
            .await
            .expect("201")
    );
    assert!(
        !client
            .verify_answer(request(301, b"garbage".to_vec()))
            .await
            .expect("201")
    );
    let missing = hdl::codec::VerifyRequest {
        key_handle: b"OTHER/nobody".to_vec(),
        ..request(301, answer(OTHER_SECRET))
    };
    let error = client.verify_answer(missing).await.expect_err("not held");
    assert_eq!(
        error.response_code(),
        Some(ResponseCode::AuthenticationError)
    );
}

/// One verify request tests one guess of a secret: past ten failures from one
/// address in a minute, its checks are refused (RC 3) — the right secret too.
#[tokio::test]
async fn guesses_of_a_secret_key_are_bounded_per_source() {
    let other = other_service().await;
    let client = other.anonymous_client();
    let version = hdl::codec::ProtocolVersion::new(2, 11);
    let challenge = hdl::auth::ChallengeBody {
        request_digest: hdl::codec::RequestDigest::for_version(version, b"some request"),
        nonce: vec![7; 16],
    };
    let request = |secret: &[u8]| hdl::codec::VerifyRequest {
        key_handle: b"OTHER/user".to_vec(),
        key_index: 301,
        nonce: challenge.nonce.clone(),
        digest: challenge.request_digest.clone(),
        answer: hdl::auth::answer_secret(&challenge, version, &SecretKey(secret.to_vec()))
            .expect("answer"),
    };
    for guess in 0..10 {
        let valid = client
            .verify_answer(request(format!("guess-{guess}").as_bytes()))
            .await
            .expect("201");
        assert!(!valid);
    }
    let error = client
        .verify_answer(request(OTHER_SECRET))
        .await
        .expect_err("the source has used up its budget");
    assert_eq!(
        error.response_code(),
        Some(ResponseCode::ServerTooBusy),
        "{error}"
    );
}

/// An OC 201 whose answer is right and costs the most PBKDF2 iterations a server
/// accepts (100,000): no guess budget applies to it, only the work budget.
fn costly_verify_request(request_id: u32) -> hdl::codec::Message {
    use hmac::Mac;
    let version = hdl::codec::ProtocolVersion::new(2, 11);
    let challenge = hdl::auth::ChallengeBody {
        request_digest: hdl::codec::RequestDigest::for_version(version, b"some request"),
        nonce: vec![7; 16],
    };
    let (salt, iterations, key_bits) = (vec![3; 16], 100_000, 160);
    let mut key = vec![0; 20];
    pbkdf2::pbkdf2_hmac::<sha1::Sha1>(OTHER_SECRET, &salt, iterations, &mut key);
    let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(&key).expect("any key length");
    mac.update(&challenge.signed_bytes());
    let answer = hdl::auth::SecretAnswer::Pbkdf2 {
        salt,
        iterations,
        key_bits,
        mac: mac.finalize().into_bytes().to_vec(),
    };
    let request = hdl::codec::VerifyRequest {
        key_handle: b"OTHER/user".to_vec(),
        key_index: 301,
        nonce: challenge.nonce.clone(),
        digest: challenge.request_digest.clone(),
        answer: answer.encode(),
    };
    raw::encode(hdl::codec::Request::VerifyResponse(request), request_id)
}

/// Datagrams of costly verify requests a second from the flooding address.
const FLOOD_RATE: u32 = 3_000;
/// How long the flood lasts.
const FLOOD_FOR: Duration = Duration::from_secs(4);

/// Sends [`FLOOD_RATE`] costly verify requests a second to `server` from `socket`
/// for [`FLOOD_FOR`], reading what comes back; the response codes of the answers.
fn flood(socket: &UdpSocket, server: SocketAddr) -> Vec<ResponseCode> {
    let datagram = costly_verify_request(1).encode();
    socket.set_nonblocking(true).expect("non-blocking");
    let started = Instant::now();
    let mut sent = 0u32;
    let mut codes = Vec::new();
    let mut buffer = [0u8; 2048];
    while started.elapsed() < FLOOD_FOR + Duration::from_secs(3) {
        let elapsed_ms = started.elapsed().min(FLOOD_FOR).as_millis();
        let due = u32::try_from(elapsed_ms * u128::from(FLOOD_RATE) / 1000).unwrap_or(u32::MAX);
        while sent < due {
            let _ = socket.send_to(&datagram, server);
            sent += 1;
        }
        while let Ok((len, _)) = socket.recv_from(&mut buffer) {
            if let Ok(answer) = hdl::codec::Message::decode(&buffer[..len]) {
                codes.push(answer.header.response_code);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    codes
}

/// Sends `count` costly verify requests at once from another loopback address to
/// `server`; the response codes of their answers.
fn checks_from_another_address(server: SocketAddr, count: u32) -> Vec<ResponseCode> {
    let socket = UdpSocket::bind("127.0.0.2:0").expect("bind a second loopback address");
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    for request_id in 2..2 + count {
        socket
            .send_to(&costly_verify_request(request_id).encode(), server)
            .expect("send");
    }
    let mut buffer = [0u8; 2048];
    (0..count)
        .map(|_| {
            let (len, _) = socket.recv_from(&mut buffer).expect("an answer");
            let answer = hdl::codec::Message::decode(&buffer[..len]).expect("answer");
            answer.header.response_code
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_costly_checks_from_one_address_starves_neither_resolution_nor_others() {
    let other = other_service().await;
    let server = other.address();
    let flooder = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let flooding = tokio::task::spawn_blocking(move || flood(&flooder, server));

    // Another address's checks go through while the flooding one is held back. Half
    // a second in, the flooder has sent 1,500 checks and its first hundreds wait for
    // the verifier (its budget is charged only once they ran): without a share per
    // source they would hold every place the edge has for them, and each of these
    // would find one only in the moment between a check's end and the flooder's
    // next datagram.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let other_codes = checks_from_another_address(server, 3);

    // Resolutions meanwhile, from another socket: every one answered, none busy.
    let resolver = other.anonymous_client();
    let mut busy = 0;
    let mut resolved = 0;
    for _ in 0..40 {
        match resolver
            .resolve(
                &handle("0.NA/OTHER"),
                &ValueSelection::all(),
                Transport::Udp,
            )
            .await
        {
            Ok(_) => resolved += 1,
            Err(error) if error.response_code() == Some(ResponseCode::ServerTooBusy) => busy += 1,
            Err(error) => panic!("resolution failed under the flood: {error}"),
        }
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    let codes = flooding.await.expect("flood");
    assert_eq!(
        busy, 0,
        "{busy} of 40 resolutions answered busy ({resolved} resolved)"
    );
    assert_eq!(
        other_codes,
        [ResponseCode::Success; 3],
        "another address was refused"
    );
    let checked = codes
        .iter()
        .filter(|code| **code == ResponseCode::Success)
        .count();
    let refused = codes
        .iter()
        .filter(|code| **code == ResponseCode::ServerTooBusy)
        .count();
    // 2 s of budget and a quarter of a second back each second: some dozens of
    // checks, whatever one costs here; the rest refused before any check.
    assert!(
        refused > 5 * checked.max(1),
        "{refused} refused, {checked} checked"
    );
}
