//! Starts a real `hdl serve` on a free loopback port, in a temporary data directory,
//! and stops it with SIGKILL (then reaps it) when dropped.
//!
//! Readiness is the server's one stdout line `listening handle=<ip:port>
//! http=<ip:port> …` (space-separated `name=address` pairs, `handle=` first), awaited
//! with a deadline; the server's stderr goes to a file that is shown if it fails to
//! start.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use hdl::client::Client;
use tempfile::TempDir;

/// How long a server may take to announce its address.
const STARTUP: Duration = Duration::from_secs(20);
/// Lines of stdout read before giving up on the announcement.
const MAX_STARTUP_LINES: usize = 100;

/// A running `hdl serve`.
pub struct Server {
    child: Child,
    addresses: HashMap<String, SocketAddr>,
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
        let dir = tempfile::tempdir().expect("temporary directory");
        let stderr = File::create(dir.path().join("stderr")).expect("stderr file");
        let config_path = dir.path().join("hdl.toml");
        std::fs::write(&config_path, config).expect("config file");
        let mut child = Command::new(env!("CARGO_BIN_EXE_hdl"))
            .arg("serve")
            .arg("--config")
            .arg(&config_path)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
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
        let mut server = Server {
            child,
            addresses: HashMap::new(),
            dir,
        };
        server.addresses = server.await_addresses(&announced);
        server
    }

    /// Reads stdout lines until the announcement, within [`STARTUP`].
    fn await_addresses(&self, lines: &mpsc::Receiver<String>) -> HashMap<String, SocketAddr> {
        let deadline = Instant::now() + STARTUP;
        for _ in 0..MAX_STARTUP_LINES {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(pairs) = line.strip_prefix("listening ") {
                        assert!(pairs.starts_with("handle="), "handle= comes first: {line}");
                        return pairs
                            .split(' ')
                            .filter_map(|pair| pair.split_once('='))
                            .map(|(name, address)| {
                                (name.to_owned(), address.parse().expect("announced address"))
                            })
                            .collect();
                    }
                }
                Err(error) => panic!("hdl serve did not start ({error}): {}", self.stderr()),
            }
        }
        panic!("hdl serve printed no address: {}", self.stderr());
    }

    /// The server's stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }

    /// The address it announced as `name=`, if it announced one.
    pub fn announced(&self, name: &str) -> Option<SocketAddr> {
        self.addresses.get(name).copied()
    }

    /// The address of its TCP and UDP listeners.
    pub fn address(&self) -> SocketAddr {
        self.announced("handle").expect("handle= address")
    }

    /// `http://ip:port`, the base of its HTTP URLs.
    pub fn http_url(&self) -> String {
        format!("http://{}", self.announced("http").expect("http= address"))
    }

    /// `ip:port`, as `--server` takes it.
    pub fn server_arg(&self) -> String {
        self.address().to_string()
    }

    /// A client of this server alone.
    pub fn client(&self) -> Client {
        Client::new(vec![self.address()])
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGKILL: the test is over, nothing needs a graceful stop.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
