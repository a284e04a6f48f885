//! `hdl bench resolve --udp` end to end: against a real `hdl serve`, open loop and
//! `--each-once`, and against an echo of its own requests; every request it sent is
//! accounted for, answered or not.

use std::net::UdpSocket;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::harness::{ADMIN_ARGS, Server};

/// How long the echo serves at most, whatever happens to the test.
const ECHO_LIFETIME: Duration = Duration::from_secs(60);

/// Runs `hdl bench resolve --server SERVER --udp ARGS…`; its stdout, once it succeeded.
fn bench(server: &str, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(["bench", "resolve", "--server", server, "--udp"])
        .args(args)
        .output()
        .expect("run hdl bench resolve");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    assert!(
        output.status.success(),
        "hdl bench resolve {args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The counts of a bench's report.
#[derive(Debug, Default)]
struct Counts {
    hits: u64,
    misses: u64,
    echoed: u64,
    sent: u64,
    answered: u64,
    busy: u64,
    wrong: u64,
    unanswered: u64,
}

/// The first number after `word` in `text` (digits only, then anything).
fn number_after(text: &str, word: &str) -> u64 {
    let after = text
        .split_once(word)
        .unwrap_or_else(|| panic!("no {word:?} in {text:?}"))
        .1;
    let digits: String = after
        .trim_start_matches([' ', '(', ':'])
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number after {word:?} in {text:?}"))
}

/// Reads `hits`, `misses`, `echoed` and the `sent` line of a report.
fn counts(report: &str) -> Counts {
    let mut counts = Counts::default();
    for line in report.lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("hits") => counts.hits = number_after(line, "hits"),
            Some("misses") => counts.misses = number_after(line, "misses"),
            Some("echoed") => counts.echoed = number_after(line, "echoed"),
            Some("sent") => {
                counts.sent = number_after(line, "sent");
                counts.answered = number_after(line, "requests:");
                counts.busy = number_after(line, "answered");
                counts.wrong = number_after(line, "busy\",");
                counts.unanswered = number_after(line, "wrong),");
            }
            _ => {}
        }
    }
    assert!(counts.sent > 0, "nothing sent: {report}");
    counts
}

/// Every request sent was answered or given up, and the answers add up.
fn assert_accounted(counts: &Counts, report: &str) {
    assert_eq!(counts.answered + counts.unanswered, counts.sent, "{report}");
    assert_eq!(
        counts.hits + counts.misses + counts.echoed + counts.busy + counts.wrong,
        counts.answered,
        "{report}"
    );
}

#[test]
fn udp_bench_accounts_for_every_request_it_sent() {
    let server = Server::start();
    let address = server.server_arg();
    let mut open_loop = vec!["--rate", "2000", "--duration", "2"];
    open_loop.extend(["--prefix", "UDPB", "--handles", "50", "--misses", "20"]);
    open_loop.extend(ADMIN_ARGS);
    let report = bench(&address, &open_loop);
    let open = counts(&report);
    assert_accounted(&open, &report);
    assert!(open.hits > 0 && open.misses > 0, "{report}");
    assert_eq!(open.echoed + open.wrong, 0, "{report}");
    assert!(report.contains("\nlate "), "{report}");

    let each_once = [
        "--no-seed",
        "--each-once",
        "--prefix",
        "UDPB",
        "--handles",
        "50",
        "--misses",
        "0",
        "--duration",
        "30",
    ];
    let report = bench(&address, &each_once);
    let once = counts(&report);
    assert_accounted(&once, &report);
    assert_eq!(once.sent, 50, "each of the 50 names once: {report}");
    assert!(once.hits > 0, "{report}");
}

/// A UDP echo on loopback, sending every datagram back, until dropped.
struct Echo {
    socket: UdpSocket,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Echo {
    fn start() -> Echo {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("bind the echo");
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .expect("read timeout");
        let stop = Arc::new(AtomicBool::new(false));
        let (echo, stopped) = (socket.try_clone().expect("clone"), Arc::clone(&stop));
        let thread = thread::spawn(move || {
            let until = Instant::now() + ECHO_LIFETIME;
            let mut buffer = [0u8; 2048];
            while !stopped.load(Ordering::Relaxed) && Instant::now() < until {
                if let Ok((len, from)) = echo.recv_from(&mut buffer) {
                    let _ = echo.send_to(&buffer[..len], from);
                }
            }
        });
        Echo {
            socket,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[test]
fn requests_sent_back_count_as_echoed_not_as_errors() {
    let echo = Echo::start();
    let address = echo.socket.local_addr().expect("address").to_string();
    let closed_loop = [
        "--no-seed",
        "--concurrency",
        "4",
        "--duration",
        "1",
        "--misses",
        "0",
    ];
    let report = bench(&address, &closed_loop);
    let echoed = counts(&report);
    assert_accounted(&echoed, &report);
    assert!(echoed.echoed > 0, "{report}");
    assert_eq!(echoed.hits + echoed.wrong, 0, "{report}");
    assert!(report.contains(", 0 errors"), "{report}");
}
