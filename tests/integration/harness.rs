//! Starts a real `hdl serve` on a free loopback port, in a temporary data directory,
//! and stops it with SIGKILL (then reaps it) when dropped.
//!
//! Readiness is the server's one stdout line `listening handle=<ip:port>
//! http=<ip:port> peer=<ip:port>[ https=<ip:port>]` (`handle=` first), awaited with a
//! deadline; the server's stderr goes to a file that is shown if it fails to start.
//! [`spawn_serve`] starts one with any arguments (HTTP on `127.0.0.1:0` unless they
//! say otherwise), for the cluster tests.
//!
//! Every server is started with a bootstrap administrator: `0.NA/ADMIN` holding the
//! secret of `tests/fixtures/admin.secret` as HS_SECKEY at index 300, and
//! `300:0.NA/ADMIN` a server administrator; [`Server::client`], [`ADMIN_ARGS`] and
//! [`ADMIN_BASIC`] (HTTP Basic, honoured over plain HTTP from loopback) authenticate
//! as it.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use hdl::client::{Client, Credentials, Key};
use tempfile::TempDir;

/// How long a server may take to announce its address.
const STARTUP: Duration = Duration::from_secs(20);
/// Lines of stdout read before giving up on the announcement.
const MAX_STARTUP_LINES: usize = 100;

/// A fixed test key (no key generation in tests).
pub const ADMIN_KEY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/admin.pem");
/// The bootstrap administrator's secret file.
pub const ADMIN_SECRET: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/admin.secret");
/// The bootstrap administrator's secret (the file without its newline).
pub const ADMIN_SECRET_TEXT: &str = "s3cret-for-tests";
/// The user of HTTP Basic credentials for the bootstrap administrator.
pub const ADMIN_BASIC: &str = "300%3A0.NA/ADMIN";
/// Another fixed key, which no server knows.
pub const OTHER_KEY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/other.pem");
/// The bootstrap administrator's identity.
pub const ADMIN: &str = "300:0.NA/ADMIN";
/// The bootstrap administrator of [`Server::start_keyed`], holding [`ADMIN_KEY`].
pub const KEYED_ADMIN: &str = "300:0.NA/SEC";
/// The options authenticating a client command as the bootstrap administrator.
pub const ADMIN_ARGS: [&str; 4] = ["--auth", ADMIN, "--secret-file", ADMIN_SECRET];

/// The options of `hdl serve` creating the bootstrap administrator.
pub fn bootstrap_args() -> Vec<OsString> {
    [
        "--admin-secret-file",
        ADMIN_SECRET,
        "--prefix",
        "ADMIN",
        "--server-admin",
        ADMIN,
    ]
    .map(OsString::from)
    .to_vec()
}

/// The bootstrap administrator's credentials.
pub fn admin_credentials() -> Credentials {
    Credentials {
        identity: hdl::config::parse_identity(ADMIN).expect("identity"),
        key: Key::Secret(hdl::auth::SecretKey(ADMIN_SECRET_TEXT.as_bytes().to_vec())),
    }
}

/// `config` with `[http] allow_plain_auth_from_loopback = true` added, so that tests
/// authenticate over plain HTTP on loopback.
fn with_plain_auth(config: &str) -> String {
    const LINE: &str = "allow_plain_auth_from_loopback = true\n";
    match config.split_once("[http]\n") {
        Some((before, after)) => format!("{before}[http]\n{LINE}{after}"),
        None => format!("{config}\n[http]\n{LINE}"),
    }
}

/// A running `hdl serve`.
pub struct Server {
    child: Child,
    listening: Listening,
    /// Holds the data directory until the server is gone.
    dir: TempDir,
}

impl Server {
    /// Starts a server on `127.0.0.1:0` and waits for its address.
    pub fn start() -> Server {
        Server::start_with_config("")
    }

    /// Starts a server with the TOML configuration `config` (its listeners still on
    /// `127.0.0.1:0`) and waits for its addresses.
    pub fn start_with_config(config: &str) -> Server {
        Server::spawn(&with_plain_auth(config), bootstrap_args())
    }

    /// Starts a server whose bootstrap administrator [`KEYED_ADMIN`] holds the public
    /// half of [`ADMIN_KEY`]; credentials over plain HTTP from loopback are honoured
    /// when `plain_auth` is set.
    pub fn start_keyed(plain_auth: bool) -> Server {
        let config = format!("[http]\nallow_plain_auth_from_loopback = {plain_auth}\n");
        let bootstrap = ["--admin-key", ADMIN_KEY, "--prefix", "SEC"];
        Server::spawn(&config, bootstrap.map(OsString::from).to_vec())
    }

    /// Starts a server with HTTPS (a self-signed certificate) where credentials are
    /// honoured over HTTPS only, as in production.
    pub fn start_https_only() -> Server {
        let config = "[http]\nallow_plain_auth_from_loopback = false\n\
                      https_listen = \"127.0.0.1:0\"\nself_signed = true\n";
        Server::spawn(config, bootstrap_args())
    }

    /// Starts `hdl serve` with the TOML `config` and the bootstrap options `bootstrap`.
    fn spawn(config: &str, bootstrap: Vec<OsString>) -> Server {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut args = configured_args(dir.path(), config);
        args.extend(bootstrap);
        let (child, listening) = spawn_serve(&args, &dir.path().join("stderr"));
        Server {
            child,
            listening,
            dir,
        }
    }

    /// Its data directory.
    pub fn data_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("data")
    }

    /// The address of its TCP and UDP listeners.
    pub fn address(&self) -> SocketAddr {
        self.listening.handle
    }

    /// `http://ip:port`, the base of its HTTP URLs.
    pub fn http_url(&self) -> String {
        format!("http://{}", self.listening.http)
    }

    /// Its HTTPS address, when it announced one.
    pub fn https(&self) -> Option<SocketAddr> {
        self.listening.https
    }

    /// `ip:port`, as `--server` takes it.
    pub fn server_arg(&self) -> String {
        self.address().to_string()
    }

    /// A client of this server alone, authenticating as the bootstrap administrator.
    pub fn client(&self) -> Client {
        self.anonymous_client()
            .with_credentials(admin_credentials())
    }

    /// A client of this server alone, without credentials.
    pub fn anonymous_client(&self) -> Client {
        Client::new(vec![self.address()])
    }

    /// Its `/metrics` page.
    pub async fn metrics(&self) -> String {
        metrics_of(&self.http_url()).await
    }

    /// Its HTTP address.
    pub fn http_address(&self) -> SocketAddr {
        self.listening.http
    }

    /// Its peer address.
    pub fn peer_address(&self) -> SocketAddr {
        self.listening.peer
    }

    /// Sends it SIGTERM: it drains and stops.
    pub fn terminate(&self) {
        let pid = rustix::process::Pid::from_child(&self.child);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    }

    /// Waits (polling, within `within`) for it to exit and reaps it; `None` if it is
    /// still running then.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        const POLL: Duration = Duration::from_millis(10);
        let deadline = Instant::now() + within;
        let polls = within.as_millis() / POLL.as_millis() + 1;
        for _ in 0..polls {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                break;
            }
            thread::sleep(POLL);
        }
        self.child.try_wait().expect("try_wait")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGKILL: the test is over, nothing needs a graceful stop (a server that has
        // exited already is only reaped).
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One `hdl serve` started with arguments of the test's choosing; killed and reaped
/// when dropped.
pub struct Node {
    child: Child,
    /// The addresses it announced.
    pub listening: Listening,
}

impl Node {
    /// Starts `hdl serve ARGS` ([`spawn_serve`]), its stderr in the file `stderr`.
    pub fn spawn(args: &[OsString], stderr: &Path) -> Node {
        let (child, listening) = spawn_serve(args, stderr);
        Node { child, listening }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The addresses a server announced.
#[derive(Debug, Clone, Copy)]
pub struct Listening {
    /// Its Handle protocol address (TCP and UDP).
    pub handle: SocketAddr,
    /// Its HTTP address.
    pub http: SocketAddr,
    /// Its peer address.
    pub peer: SocketAddr,
    /// Its HTTPS address, when HTTPS is on.
    pub https: Option<SocketAddr>,
}

/// The options of an `hdl serve` in `dir`: the TOML `config` (written to
/// `dir/hdl.toml`), its data in `dir/data`, Handle protocol on a free loopback port.
fn configured_args(dir: &Path, config: &str) -> Vec<OsString> {
    let config_path = dir.join("hdl.toml");
    std::fs::write(&config_path, config).expect("config file");
    vec![
        "--config".into(),
        config_path.into(),
        "--data-dir".into(),
        dir.join("data").into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
    ]
}

/// A loopback address, `127.0.0.1:PORT`, whose port lies outside this machine's
/// ephemeral range (`ip_local_port_range`) and is free for TCP and UDP now: for a
/// member that will be restarted on its ports. An ephemeral port (`:0`) may be handed
/// to another test's client socket while the member is down; these never are. Each is
/// handed out once per process. Another program may still take it before the member
/// binds it: a first start retries on fresh addresses ([`is_address_taken`]).
pub fn stable_address() -> String {
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut handed_out = HANDED_OUT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let ephemeral = ephemeral_ports();
    for _attempt in 0..1000 {
        let port: u16 = rand::random_range(10_000..65_000);
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        let free = !ephemeral.contains(&port)
            && !handed_out.contains(&port)
            && std::net::TcpListener::bind(address).is_ok()
            && std::net::UdpSocket::bind(address).is_ok();
        if free {
            handed_out.push(port);
            return address.to_string();
        }
    }
    panic!("no free stable port in 1000 draws (ephemeral ports: {ephemeral:?})")
}

/// The kernel's range of ephemeral ports (Linux's default when it cannot be read).
fn ephemeral_ports() -> std::ops::RangeInclusive<u16> {
    let configured = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| {
            let mut bounds = text.split_whitespace().map(|bound| bound.parse::<u16>());
            Some(bounds.next()?.ok()?..=bounds.next()?.ok()?)
        });
    configured.unwrap_or(32_768..=60_999)
}

/// Whether a server failed to start because another program held one of its
/// addresses (the message [`try_spawn_serve_through`] returns).
pub fn is_address_taken(failure: &str) -> bool {
    failure.contains("Address already in use")
}

/// The arguments of a lone `hdl serve` on `data`, every address on a free loopback
/// port (it forms set 1 alone; no administrator given).
pub fn lone_node_args(data: &Path) -> Vec<OsString> {
    vec![
        "--data-dir".into(),
        data.into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--peer".into(),
        "127.0.0.1:0".into(),
    ]
}

/// Starts `hdl serve` with `args`, its stderr in the file `stderr`, and waits (within
/// [`STARTUP`]) for its announcement; the child is the caller's to kill and reap.
pub fn spawn_serve(args: &[OsString], stderr: &Path) -> (Child, Listening) {
    try_spawn_serve_through(&[], args, stderr).unwrap_or_else(|failure| panic!("{failure}"))
}

/// [`spawn_serve`] through the command `through` (such as `ip netns exec NAME`), which
/// must exec `hdl` in its own place: the child's pid is then `hdl`'s. Says why the
/// server did not start (its stderr included); the failed child is killed and reaped.
pub fn try_spawn_serve_through(
    through: &[OsString],
    args: &[OsString],
    stderr: &Path,
) -> Result<(Child, Listening), String> {
    try_spawn_announcing(through, args, stderr, Listening::named)
}

/// [`try_spawn_serve_through`], the announcement's addresses read by `read`.
fn try_spawn_announcing<L>(
    through: &[OsString],
    args: &[OsString],
    stderr: &Path,
    read: fn(&Announced) -> Result<L, String>,
) -> Result<(Child, L), String> {
    let log = File::create(stderr).expect("stderr file");
    let hdl = OsString::from(env!("CARGO_BIN_EXE_hdl"));
    let (program, before) = match through.split_first() {
        Some((program, rest)) => (program.clone(), [rest, &[hdl]].concat()),
        None => (hdl, Vec::new()),
    };
    let mut child = Command::new(program)
        .args(before)
        .arg("serve")
        .args(args)
        .args(if args.iter().any(|arg| arg == "--http") {
            &[][..]
        } else {
            &["--http", "127.0.0.1:0"][..]
        })
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("spawn hdl serve");
    let stdout = child.stdout.take().expect("piped stdout");
    let (lines, announced) = mpsc::channel();
    // Forwards stdout lines until the server exits (so it never blocks on a full
    // pipe); ends by itself at EOF, when the server is killed.
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    match await_listening(&announced).and_then(|addresses| read(&addresses)) {
        Ok(listening) => Ok((child, listening)),
        Err(error) => {
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(stderr).unwrap_or_default();
            Err(format!("hdl serve did not start ({error}): {log}"))
        }
    }
}

/// The addresses of an announcement by name (`handle`, `http`, …).
type Announced = HashMap<String, SocketAddr>;

impl Listening {
    /// The addresses a node announced: `peer=` is required.
    fn named(addresses: &Announced) -> Result<Listening, String> {
        Ok(Listening {
            handle: named(addresses, "handle")?,
            http: named(addresses, "http")?,
            peer: named(addresses, "peer")?,
            https: addresses.get("https").copied(),
        })
    }
}

fn named(addresses: &Announced, name: &str) -> Result<SocketAddr, String> {
    addresses
        .get(name)
        .copied()
        .ok_or_else(|| format!("no {name}= address in {addresses:?}"))
}

/// A running `hdl serve --cache`, a caching resolver in front of the GHR it was
/// given; killed and reaped when dropped.
pub struct CacheServer {
    child: Child,
    handle: SocketAddr,
    http: SocketAddr,
    /// Holds its data directory (its server key) until it is gone.
    _dir: TempDir,
}

impl CacheServer {
    /// Starts `hdl serve --cache --root ROOT` with the TOML `config`, on free loopback
    /// ports, and waits for its addresses.
    pub fn start(root: SocketAddr, config: &str) -> CacheServer {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut args = configured_args(dir.path(), config);
        args.extend(["--cache".into(), "--root".into(), root.to_string().into()]);
        let stderr = dir.path().join("stderr");
        let read =
            |addresses: &Announced| Ok((named(addresses, "handle")?, named(addresses, "http")?));
        let (child, (handle, http)) = try_spawn_announcing(&[], &args, &stderr, read)
            .unwrap_or_else(|failure| panic!("{failure}"));
        CacheServer {
            child,
            handle,
            http,
            _dir: dir,
        }
    }

    /// The address of its TCP and UDP listeners.
    pub fn address(&self) -> SocketAddr {
        self.handle
    }

    /// `http://ip:port`, the base of its HTTP URLs.
    pub fn http_url(&self) -> String {
        format!("http://{}", self.http)
    }

    /// A client of it, without credentials.
    pub fn client(&self) -> Client {
        Client::new(vec![self.handle])
    }

    /// Its `/metrics` page.
    pub async fn metrics(&self) -> String {
        metrics_of(&self.http_url()).await
    }
}

impl Drop for CacheServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `/metrics` page of the server at `http_url`.
pub async fn metrics_of(http_url: &str) -> String {
    reqwest::get(format!("{http_url}/metrics"))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics text")
}

/// Reads stdout lines until the announcement, within [`STARTUP`].
fn await_listening(lines: &mpsc::Receiver<String>) -> Result<Announced, String> {
    let deadline = Instant::now() + STARTUP;
    for _ in 0..MAX_STARTUP_LINES {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .map_err(|error| error.to_string())?;
        if let Some(pairs) = line.strip_prefix("listening ") {
            if !pairs.starts_with("handle=") {
                return Err(format!("handle= must come first: {line:?}"));
            }
            return pairs
                .split(' ')
                .map(|pair| {
                    let (name, address) = pair.split_once('=')?;
                    Some((name.to_owned(), address.parse::<SocketAddr>().ok()?))
                })
                .collect::<Option<Announced>>()
                .ok_or_else(|| format!("bad address in {line:?}"));
        }
    }
    Err("no announcement".into())
}
