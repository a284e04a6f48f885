//! Server keys and signed answers against real `hdl serve` processes: the key file a
//! node makes and keeps, its public half in the HS_SITE server entry, certified (CT)
//! answers signed as J9 checks them (digest §2.5, §11.8), `hdl resolve --verify`
//! accepting them and refusing a tampered one, and a replica set whose HS_SITE lists
//! each member with its own key.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};
use std::thread;
use std::time::{Duration, Instant};

use hdl::auth::{SecretKey, SigningKey, VerifyingKey};
use hdl::client::{
    AdminRequest, Client, ClientError, Credentials, Key, Overwrite, ServerKeys, Transport,
};
use hdl::codec::{Frame, Message, OpFlags, ResponseCode, next_frame};
use hdl::names::Handle;
use hdl::values::{HandleValue, SiteInfo, ValueSelection};

use crate::harness::{
    ADMIN_KEY, ADMIN_SECRET, ADMIN_SECRET_TEXT, Node, Server, admin_credentials, lone_node_args,
};
use crate::raw;

/// How long a condition awaited here may take.
const WAIT: Duration = Duration::from_secs(30);

fn handle(text: &str) -> Handle {
    Handle::parse(text).expect("valid handle")
}

async fn create_url(client: &Client, name: &str) {
    let request = AdminRequest::Create {
        handle: handle(name),
        values: vec![HandleValue::new(1, "URL", "https://example.org/signed")],
        overwrite: Overwrite::Refuse,
    };
    client.admin(request).await.expect("create");
}

fn hdl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(args)
        .output()
        .expect("run hdl")
}

/// The HS_PUBKEY data of the key in the PEM file `path`.
fn public_key_of(path: &Path) -> Vec<u8> {
    let pem = std::fs::read_to_string(path).expect("key file");
    SigningKey::from_pem(&pem)
        .expect("a key")
        .public_key()
        .encode()
}

/// A CT resolution of `name`, sent raw over TCP with RequestId `id`.
fn certified_raw(server: SocketAddr, name: &str, id: u32) -> Message {
    let mut request = raw::resolution(name.as_bytes(), id);
    request.header.flags = OpFlags::J9_DEFAULT.with(OpFlags::CT);
    raw::tcp(server, &request.encode()).expect("an answer")
}

#[tokio::test]
async fn certified_answers_are_signed_with_the_key_of_the_site_entry() {
    let server = Server::start();
    let client = server.client();
    create_url(&client, "ADMIN/signed").await;
    let site = client.site_info().await.expect("site info");
    assert_eq!(site.servers.len(), 1);
    let entry_key = &site.servers[0].public_key;
    // J9 layout (digest §6.5): RSA_PUB_KEY, exponent first, four trailing zeros.
    assert!(
        entry_key.starts_with(b"\0\0\0\x0bRSA_PUB_KEY\0\0"),
        "{entry_key:?}"
    );
    assert!(entry_key.ends_with(&[0; 4]));
    let key = VerifyingKey::from_hs_pubkey(entry_key).expect("a usable key");

    let answer = certified_raw(server.address(), "ADMIN/signed", 71);
    assert_eq!(answer.header.response_code, ResponseCode::Success);
    let credential = answer.credential.clone().expect("a signed answer");
    assert_eq!(credential.credential_type, b"HS_SIGNED");
    assert_eq!(credential.digest_algorithm, b"SHA-256");
    assert_eq!(credential.signer_handle, b"");
    assert_eq!(credential.signer_index, 0);
    assert_eq!(credential.signature.len(), 256, "a 2048-bit RSA signature");
    assert_eq!(hdl::client::check_signature(&answer, &key), Ok(()));

    // An error answer to a CT request is signed too; an answer without CT is not.
    let missing = certified_raw(server.address(), "ADMIN/none", 72);
    assert_eq!(missing.header.response_code, ResponseCode::HandleNotFound);
    assert_eq!(hdl::client::check_signature(&missing, &key), Ok(()));
    let plain = raw::tcp(
        server.address(),
        &raw::resolution(b"ADMIN/signed", 73).encode(),
    )
    .expect("an answer");
    assert_eq!(plain.credential, None);

    // Over UDP as over TCP, through the client library.
    let keys = ServerKeys::from([(server.address(), key)]);
    for transport in [Transport::Udp, Transport::Tcp] {
        let resolution = client
            .resolve_certified(
                &handle("ADMIN/signed"),
                &ValueSelection::all(),
                transport,
                &keys,
            )
            .await
            .unwrap_or_else(|error| panic!("{transport}: {error}"));
        assert_eq!(resolution.values.len(), 1);
    }
    let server_key = client.server_key(server.address()).await.expect("key");
    let keys = ServerKeys::from([(server.address(), server_key)]);
    let found = client
        .resolve_certified(
            &handle("ADMIN/none"),
            &ValueSelection::all(),
            Transport::Auto,
            &keys,
        )
        .await;
    assert_eq!(
        found.expect_err("not found").response_code(),
        Some(ResponseCode::HandleNotFound)
    );
}

#[tokio::test]
async fn a_signature_by_another_key_is_refused() {
    let server = Server::start();
    let client = server.client();
    create_url(&client, "ADMIN/other").await;
    let pem = std::fs::read_to_string(crate::harness::OTHER_KEY).expect("other key");
    let other = SigningKey::from_pem(&pem).expect("key").public_key();
    let keys = ServerKeys::from([(
        server.address(),
        VerifyingKey::from_public_key(&other).expect("key"),
    )]);
    let refused = client
        .resolve_certified(
            &handle("ADMIN/other"),
            &ValueSelection::all(),
            Transport::Tcp,
            &keys,
        )
        .await;
    assert!(
        matches!(refused, Err(ClientError::Signature { .. })),
        "{refused:?}"
    );
}

/// A node makes its key once, 0600, and keeps it across restarts; `--server-key`
/// uses a given one.
#[tokio::test]
async fn the_key_file_is_made_once_and_kept() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let data = dir.path().join("data");
    let key_file = data.join("server_key.pem");
    let args = lone_node_args(&data);
    let first = Node::spawn(&args, &dir.path().join("stderr-1"));
    let mode = std::fs::metadata(&key_file)
        .expect("key file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let made = public_key_of(&key_file);
    assert_eq!(first.site().await.servers[0].public_key, made);
    drop(first);
    let again = Node::spawn(&args, &dir.path().join("stderr-2"));
    assert_eq!(again.site().await.servers[0].public_key, made);
    drop(again);

    let mut given = args.clone();
    given.extend(["--server-key".into(), OsString::from(ADMIN_KEY)]);
    let node = Node::spawn(&given, &dir.path().join("stderr-3"));
    let site = node.site().await;
    assert_eq!(
        site.servers[0].public_key,
        public_key_of(Path::new(ADMIN_KEY))
    );
    assert_eq!(
        public_key_of(&key_file),
        made,
        "the data dir's key is untouched"
    );

    std::fs::write(dir.path().join("bad.pem"), "not a key").expect("write");
    let bad = dir.path().join("bad.pem");
    let output = Command::new(env!("CARGO_BIN_EXE_hdl"))
        .arg("serve")
        .args(&args)
        .args(["--http", "127.0.0.1:0", "--server-key"])
        .arg(&bad)
        .output()
        .expect("run hdl serve");
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("bad.pem"), "{said}");
}

#[tokio::test]
async fn hdl_resolve_verify_accepts_a_signed_answer_and_refuses_a_tampered_one() {
    let server = Server::start();
    let client = server.client();
    create_url(&client, "ADMIN/cli").await;
    let address = server.server_arg();
    for transport in ["--udp", "--tcp"] {
        let output = hdl(&[
            "resolve",
            "ADMIN/cli",
            "--server",
            &address,
            "--verify",
            transport,
        ]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let said = String::from_utf8_lossy(&output.stdout);
        assert!(said.contains("https://example.org/signed"), "{said}");
    }

    // A proxy that flips one octet of the answer's body (inside the URL).
    let proxy = TamperingProxy::start(server.address());
    let proxied = proxy.address.to_string();
    let unverified = hdl(&["resolve", "ADMIN/cli", "--server", &proxied, "--tcp"]);
    assert!(unverified.status.success(), "the tampered answer decodes");
    let said = String::from_utf8_lossy(&unverified.stdout);
    assert!(said.contains("https://example.org/sigoed"), "{said}");

    let dir = tempfile::tempdir().expect("temporary directory");
    let key_file = dir.path().join("pubkey.bin");
    let site = client.site_info().await.expect("site info");
    std::fs::write(&key_file, &site.servers[0].public_key).expect("key file");
    let key_arg = key_file.to_str().expect("UTF-8 path");
    let args = [
        "resolve",
        "ADMIN/cli",
        "--server",
        &proxied,
        "--tcp",
        "--verify",
    ];
    let refused = hdl(&[&args[..], &["--server-pubkey", key_arg]].concat());
    assert!(!refused.status.success(), "a tampered answer is refused");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("refused") && said.contains("signature does not match"),
        "{said}"
    );
    // Without a key given, the proxy's address has no entry in the site information.
    let no_key = hdl(&args);
    assert!(!no_key.status.success());
    let said = String::from_utf8_lossy(&no_key.stderr);
    assert!(said.contains("no key to verify"), "{said}");

    // The same key as hex text, through the honest server.
    let hex: String = site.servers[0]
        .public_key
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(&key_file, hex).expect("key file");
    let direct = ["resolve", "ADMIN/cli", "--server", &address, "--verify"];
    let accepted = hdl(&[&direct[..], &["--server-pubkey", key_arg]].concat());
    assert!(
        accepted.status.success(),
        "{}",
        String::from_utf8_lossy(&accepted.stderr)
    );
}

/// J9 9.2.0's certified resolution of `TEST/signed` (CT set: flags `59000000`), as
/// recorded over TCP and over UDP in the `j9` namespace.
const J9_CERTIFIED_TCP: &str = "020b020b0000000051177ff60000000000000033000000010000000059000000000100006b05764d000000170000000b544553542f7369676e6564000000000000000000000000";
const J9_CERTIFIED_UDP: &str = "020b020b0000000001ed03f80000000000000033000000010000000059000000000100006b05764e000000170000000b544553542f7369676e6564000000000000000000000000";

/// J9 9.2.0's session setup (OC 400) for `300:0.NA/TEST`, Diffie-Hellman (mode 4), as
/// GenericBatch sent it over TCP in the `j9` namespace.
const J9_SESSION_SETUP: [&str; 8] = [
    "020b020b000000002a39590f0000000000000157000001900000000059800000ffff00006b05766d0000013b0004",
    "0001518000000009302e4e412f544553540000012c0000011e0000000a44485f5055425f4b455900000000008074a5",
    "2d7986d2d415980d6a391d53b766a7927cdf8e5c3d1cfa2ffcf736717fae8915f99c8a53cf66d99e6ee1cb979926d5",
    "1dc7487720fa14b966737046b4ab739f07fa7d7274142b79fcb120d1868281092647a0564c157d7e102885d02cfed9",
    "3522d8c4560cd7b75ffc7496ab245e0813029363740f046110812f02384f5e9d0000008100ffffffffffffffffc90f",
    "daa22168c234c4c6628b80dc1cd129024e088a67cc74020bbea63b139b22514a08798e3404ddef9519b3cd3a431b30",
    "2b0a6df25f14374fe1356d6d51c245e485b576625e7ec6f44c42e9a637ed6b0bff5cb6f406b7edee386bfb5a899fa5",
    "ae9f24117c4b1fe649286651ece65381ffffffffffffffff0000000102000000000000",
];

fn octets(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).expect("hex"))
        .collect()
}

#[tokio::test]
async fn the_certified_requests_j9_sends_get_answers_signed_as_it_checks() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let args: Vec<OsString> = [
        "--data-dir",
        dir.path().join("data").to_str().expect("UTF-8 path"),
        "--listen",
        "127.0.0.1:0",
        "--peer",
        "127.0.0.1:0",
        "--admin-secret-file",
        ADMIN_SECRET,
        "--prefix",
        "TEST",
    ]
    .map(OsString::from)
    .to_vec();
    let node = Node::spawn(&args, &dir.path().join("stderr"));
    let server = node.listening.handle;
    let credentials = Credentials {
        identity: hdl::config::parse_identity("300:0.NA/TEST").expect("identity"),
        key: Key::Secret(SecretKey(ADMIN_SECRET_TEXT.as_bytes().to_vec())),
    };
    let client = Client::new(vec![server]).with_credentials(credentials);
    let request = AdminRequest::Create {
        handle: handle("TEST/signed"),
        values: vec![HandleValue::new(1, "URL", "https://example.org/j9")],
        overwrite: Overwrite::Refuse,
    };
    client.admin(request).await.expect("create");
    let site = node.site().await;
    let key = VerifyingKey::from_hs_pubkey(&site.servers[0].public_key).expect("key");

    let tcp = raw::tcp(server, &octets(J9_CERTIFIED_TCP)).expect("an answer");
    let udp_request = Message::decode(&octets(J9_CERTIFIED_UDP)).expect("J9's request");
    let (udp, _) = raw::udp(server, &udp_request);
    for (transport, answer, id) in [("TCP", tcp, 0x5117_7ff6), ("UDP", udp, 0x01ed_03f8)] {
        assert_eq!(
            answer.header.response_code,
            ResponseCode::Success,
            "{transport}"
        );
        assert_eq!(answer.envelope.request_id, id, "{transport}");
        assert!(answer.header.flags.contains(OpFlags::CT), "{transport}");
        assert_eq!(
            hdl::client::check_signature(&answer, &key),
            Ok(()),
            "{transport}"
        );
    }

    // A session setup's answer is signed whatever it says, with CT (as J9 sends it)
    // or without (its OpFlag octet 0x59 turned to 0x19).
    let setup = octets(&J9_SESSION_SETUP.concat());
    let mut without_ct = setup.clone();
    assert_eq!(without_ct[28], 0x59, "the OpFlag's first octet");
    without_ct[28] = 0x19;
    for (what, request) in [("with CT", setup), ("without CT", without_ct)] {
        let answer = raw::tcp(server, &request).expect("an answer");
        assert_eq!(
            answer.header.opcode,
            hdl::codec::OpCode::SessionSetup,
            "{what}"
        );
        // Never challenged, though it names an identity, as the reference server
        // answers it; J9 reads the session id as a Java int and needs it positive.
        assert_eq!(answer.header.response_code, ResponseCode::Success, "{what}");
        let id = answer.envelope.session_id;
        assert!(i32::try_from(id).is_ok_and(|id| id > 0), "{what}: {id:#x}");
        assert_eq!(
            hdl::client::check_signature(&answer, &key),
            Ok(()),
            "{what}: {:?}",
            answer.header.response_code
        );
    }
}

/// Every member of a replica set signs with its own key, and the HS_SITE any member
/// answers lists each member with its key.
#[tokio::test]
async fn each_member_of_a_set_signs_with_its_own_key_listed_in_hs_site() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, format!("{}\n", "5a".repeat(32))).expect("secret file");
    let members: Vec<Node> = (1..=2)
        .map(|id| {
            let mut args = lone_node_args(&dir.path().join(format!("data-{id}")));
            args.extend([
                "--node-id".into(),
                id.to_string().into(),
                "--secret-file".into(),
                secret.clone().into(),
                "--no-bootstrap".into(),
            ]);
            Node::spawn(&args, &dir.path().join(format!("stderr-{id}")))
        })
        .collect();
    let first = members[0].listening.peer.to_string();
    let secret_arg = secret.to_str().expect("UTF-8 path");
    cluster(&[
        "init",
        "--peer",
        &first,
        "--admin-secret-file",
        ADMIN_SECRET,
        "--prefix",
        "ADMIN",
        "--secret-file",
        secret_arg,
    ]);
    let second = members[1].listening;
    cluster(&[
        "add-secondary",
        "--peer",
        &first,
        "--id",
        "2",
        "--node-peer",
        &second.peer.to_string(),
        "--node-handle",
        &second.handle.to_string(),
        "--voter",
        "--secret-file",
        secret_arg,
    ]);
    let keys: Vec<Vec<u8>> = (1..=2)
        .map(|id| public_key_of(&dir.path().join(format!("data-{id}/server_key.pem"))))
        .collect();
    assert_ne!(keys[0], keys[1]);
    for member in &members {
        let site = member
            .site_until(|site| {
                site.servers.len() == 2 && site.servers.iter().all(|s| !s.public_key.is_empty())
            })
            .await;
        for entry in &site.servers {
            let id = usize::try_from(entry.server_id).expect("id");
            assert_eq!(entry.public_key, keys[id - 1], "server {id}");
        }
    }
    let client = Client::new(vec![members[0].listening.handle, second.handle])
        .with_credentials(admin_credentials());
    create_url(&client, "ADMIN/set").await;
    for (member, key) in members.iter().zip(&keys) {
        let key = VerifyingKey::from_hs_pubkey(key).expect("key");
        let answer = await_certified(member.listening.handle, "ADMIN/set");
        assert_eq!(hdl::client::check_signature(&answer, &key), Ok(()));
    }
    let output = cluster(&["site-values", "--peer", &first, "--secret-file", secret_arg]);
    let said = String::from_utf8_lossy(&output.stdout);
    for key in &keys {
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        assert!(said.contains(&hex), "site-values lists each key: {said}");
    }
}

/// A certified answer for `name` from `server`, once the handle is there (a
/// secondary applies the write shortly after the primary).
fn await_certified(server: SocketAddr, name: &str) -> Message {
    let deadline = Instant::now() + WAIT;
    for id in 1..=300 {
        let answer = certified_raw(server, name, 1000 + id);
        if answer.header.response_code == ResponseCode::Success {
            return answer;
        }
        assert!(
            Instant::now() < deadline,
            "{name} never appeared at {server}"
        );
        thread::sleep(Duration::from_millis(100));
    }
    panic!("{name} never appeared at {server}");
}

fn cluster(args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_hdl"))
        .arg("cluster")
        .args(args)
        .output()
        .expect("run hdl cluster");
    assert!(
        output.status.success(),
        "hdl cluster {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

impl Node {
    async fn site(&self) -> SiteInfo {
        Client::new(vec![self.listening.handle])
            .site_info()
            .await
            .expect("site info")
    }

    /// Its site information once `ready` holds of it.
    async fn site_until(&self, ready: impl Fn(&SiteInfo) -> bool) -> SiteInfo {
        let deadline = Instant::now() + WAIT;
        loop {
            let site = self.site().await;
            if ready(&site) {
                return site;
            }
            assert!(Instant::now() < deadline, "site info never ready: {site:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A TCP proxy in front of a server that flips one octet of each answer: the one
/// that turns the `n` of `signed` in the URL into `o`.
struct TamperingProxy {
    address: SocketAddr,
}

impl TamperingProxy {
    fn start(server: SocketAddr) -> TamperingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address");
        // Serves connections until the test process ends (a blocked accept holds no
        // child process); each connection is one request and one answer.
        thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let _ = relay(stream, server);
            }
        });
        TamperingProxy { address }
    }
}

fn relay(mut client: TcpStream, server: SocketAddr) -> std::io::Result<()> {
    client.set_read_timeout(Some(WAIT))?;
    let request = read_frame(&mut client)?;
    let mut upstream = TcpStream::connect(server)?;
    upstream.set_read_timeout(Some(WAIT))?;
    upstream.write_all(&request)?;
    let mut answer = read_frame(&mut upstream)?;
    if let Some(at) = answer
        .windows(b"signed".len())
        .position(|window| window == b"signed")
    {
        answer[at + 3] = b'o';
    }
    client.write_all(&answer)
}

fn read_frame(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut buffer = Vec::new();
    for _ in 0..10_000 {
        if let Frame::Ready { len } = next_frame(&buffer) {
            buffer.truncate(len);
            return Ok(buffer);
        }
        let mut chunk = [0u8; 4096];
        let read = stream.read(&mut chunk)?;
        if read == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    Err(std::io::ErrorKind::InvalidData.into())
}
