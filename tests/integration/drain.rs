//! `hdl serve` gets SIGTERM under `hdl bench resolve` load (issue 10): it stops
//! accepting at once, answers every request it had accepted, exits 0 within the drain
//! bound, and each bench reports 0 errors up to the moment the listener closed.
//!
//! Two benches run at once, each its own child process (stopped with SIGKILL and reaped
//! if the test fails): one over UDP asking only for handles that do not exist, one over
//! TCP only for handles that do, so that the server's metrics show each under load. Beside them, slow clients hold
//! a request half sent on a connection the server has accepted when the SIGTERM
//! comes, and send the rest well after the listener closed: the drain waits for them.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use hdl::codec::{Frame, Message, OpFlags, ResponseCode, next_frame};
use hdl::node::DRAIN_DEADLINE;

use crate::harness::{ADMIN_ARGS, Server};
use crate::raw::resolution;

/// How long a step may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);
/// The process exits this long after the drain's deadline at the latest (stopping
/// Raft and the runtime).
const EXIT_SLACK: Duration = Duration::from_secs(3);
/// Resolutions of each bench the server must have answered before the SIGTERM.
const UNDER_LOAD: u64 = 1000;
/// Slow clients holding a request half sent.
const SLOW_CLIENTS: usize = 4;
/// How long after the listener closed a slow client sends the rest of its request:
/// longer than a server that does not drain takes to exit.
const SLOW: Duration = Duration::from_millis(300);
/// Lines read from a bench before giving up.
const MAX_LINES: usize = 100;

/// A running `hdl bench resolve`, its stdout lines on a channel.
struct Bench {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Drop for Bench {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Bench {
    /// Starts a bench against `server` over `transport` (`--udp` or `--tcp`), on
    /// handles of its own `prefix`, `misses` percent of its requests for handles that
    /// do not exist, and waits until it has seeded them.
    fn start(server: &Server, transport: &str, prefix: &str, misses: &str) -> Bench {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hdl"))
            .args([
                "bench",
                "resolve",
                "--server",
                &server.server_arg(),
                transport,
            ])
            .args(["--prefix", prefix, "--handles", "100", "--concurrency", "8"])
            .args(["--misses", misses])
            .args(["--duration", "120"])
            .args(ADMIN_ARGS)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn hdl bench resolve");
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let bench = Bench { child, lines };
        let seeded = bench.next_line();
        assert!(seeded.starts_with("seeded "), "{seeded}");
        bench
    }

    fn next_line(&self) -> String {
        self.lines
            .recv_timeout(PATIENCE)
            .expect("a line from the bench")
    }

    /// Waits for the bench to end; its output after the seeding.
    fn finish(mut self) -> String {
        let mut output = Vec::new();
        for _ in 0..MAX_LINES {
            match self.lines.recv_timeout(PATIENCE) {
                Ok(line) => output.push(line),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => panic!("the bench did not end"),
            }
        }
        let output = output.join("\n");
        let status = self.child.wait().expect("wait for the bench");
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            let _ = pipe.read_to_string(&mut stderr);
        }
        assert!(status.success(), "bench failed: {output}\n{stderr}");
        output
    }
}

/// Resolutions the server has answered with response code `code`, from `/metrics`
/// (plain HTTP/1.0).
fn resolutions(http: SocketAddr, code: ResponseCode) -> u64 {
    let mut stream = TcpStream::connect_timeout(&http, PATIENCE).expect("connect to HTTP");
    stream.set_read_timeout(Some(PATIENCE)).expect("timeout");
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\n\r\n")
        .expect("ask for metrics");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("metrics");
    let series = format!(
        r#"hdl_requests_total{{protocol="handle",op="resolution",code="{}"}} "#,
        code.to_u32()
    );
    text.lines()
        .filter_map(|line| line.strip_prefix(&series)?.parse::<u64>().ok())
        .sum()
}

/// Waits (bounded) until the server has answered [`UNDER_LOAD`] resolutions with
/// each of `codes`.
fn await_load(server: &Server, codes: &[ResponseCode]) {
    let deadline = Instant::now() + PATIENCE;
    for _ in 0..1000 {
        let loaded = codes
            .iter()
            .all(|code| resolutions(server.http_address(), *code) >= UNDER_LOAD);
        if loaded {
            return;
        }
        assert!(Instant::now() < deadline, "no load on the server");
        thread::sleep(Duration::from_millis(20));
    }
    panic!("no load on the server");
}

/// Reads one whole answer; `None` if the connection ended first.
fn answer(stream: &mut TcpStream) -> Option<Message> {
    stream.set_read_timeout(Some(PATIENCE)).expect("timeout");
    let mut buffer = Vec::new();
    for _ in 0..1000 {
        if let Frame::Ready { len } = next_frame(&buffer) {
            return Some(Message::decode(&buffer[..len]).expect("decodable answer"));
        }
        let mut chunk = [0u8; 4096];
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(read) => buffer.extend_from_slice(&chunk[..read]),
        }
    }
    panic!("the answer never completed");
}

/// A resolution of a missing handle under RequestId `request_id`, asking to keep the
/// connection (KC).
fn kept_resolution(request_id: u32) -> Vec<u8> {
    let mut message = resolution(b"DRAIN/none", request_id);
    message.header.flags = message.header.flags.with(OpFlags::KC);
    message.encode()
}

/// A connection the server has surely accepted (it answered a request on it),
/// holding the first half of a second request.
fn half_sent(server: SocketAddr) -> (TcpStream, Vec<u8>) {
    let mut stream = TcpStream::connect_timeout(&server, PATIENCE).expect("connect");
    stream.write_all(&kept_resolution(1)).expect("send");
    let first = answer(&mut stream).expect("an answer");
    assert_eq!(first.header.response_code, ResponseCode::HandleNotFound);
    let second = kept_resolution(2);
    let (sent, rest) = second.split_at(second.len() / 2);
    stream.write_all(sent).expect("send half");
    (stream, rest.to_vec())
}

/// Connects until the server refuses (bounded): its listener has closed.
fn await_refusal(server: SocketAddr) {
    for _ in 0..500 {
        match TcpStream::connect_timeout(&server, PATIENCE) {
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused => return,
            // Half open when the listener closed: reset.
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(error) => panic!("connect: {error}"),
            Ok(before_the_close) => drop(before_the_close),
        }
        thread::sleep(Duration::from_millis(10));
    }
    panic!("the listener did not close");
}

/// The bench's last line says the server closed with no errors before.
fn assert_no_errors_before_the_close(output: &str) {
    let closed = output
        .lines()
        .find(|line| line.starts_with("server closed after "))
        .unwrap_or_else(|| panic!("the bench did not see the server close:\n{output}"));
    assert!(closed.contains("; 0 errors before"), "{output}");
    let total = output
        .lines()
        .find(|line| line.starts_with("total "))
        .unwrap_or_else(|| panic!("no total:\n{output}"));
    assert!(total.ends_with(", 0 errors"), "{output}");
}

#[test]
fn sigterm_under_load_answers_every_accepted_request_and_exits_zero() {
    let mut server = Server::start();
    let udp = Bench::start(&server, "--udp", "DRAINU", "100");
    let tcp = Bench::start(&server, "--tcp", "DRAINT", "0");
    let slow: Vec<_> = (0..SLOW_CLIENTS)
        .map(|_| half_sent(server.address()))
        .collect();
    await_load(
        &server,
        &[ResponseCode::HandleNotFound, ResponseCode::Success],
    );

    let terminated = Instant::now();
    server.terminate();
    await_refusal(server.address());
    thread::sleep(SLOW);
    for (mut stream, rest) in slow {
        stream.write_all(&rest).expect("the rest of the request");
        let second = answer(&mut stream).expect("the request in flight is answered");
        assert_eq!(second.header.response_code, ResponseCode::HandleNotFound);
        assert!(
            answer(&mut stream).is_none(),
            "then the connection is closed"
        );
    }
    let status = server
        .wait_exit(DRAIN_DEADLINE + EXIT_SLACK)
        .expect("the server exits within the drain bound");
    assert!(status.success(), "{status}");
    assert!(terminated.elapsed() < DRAIN_DEADLINE + EXIT_SLACK);

    assert_no_errors_before_the_close(&udp.finish());
    assert_no_errors_before_the_close(&tcp.finish());
}
