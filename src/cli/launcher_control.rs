//! The control socket of a running `hdl cluster up`: `<data_dir>/launcher.sock`, a
//! Unix socket through which `hdl cluster restart` asks the launcher for a rolling
//! restart and reads its progress. The launcher does the restart itself because it
//! is the nodes' parent: a node ends with the process that started it
//! (`--exit-with-parent`), so only the launcher can start one again under that bond.
//!
//! The protocol is lines: the request `restart`, then the launcher's progress, a line
//! a step, ending with `done` or `failed: <why>`. Only the launcher's own user may
//! ask: the socket is made mode 0600 and every caller's uid is checked. Requests are
//! served one at a time; a request is one line of at most [`MAX_REQUEST`] octets, read
//! within [`REQUEST_TIMEOUT`]; the caller waits at most [`STEP_TIMEOUT`] for each line.

use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use rustix::process::getuid;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::timeout;

/// The socket's name in the data directory.
pub const SOCKET_FILE: &str = "launcher.sock";
/// The one request: a rolling restart.
const RESTART: &str = "restart";
/// The last line of a restart that went through.
const DONE: &str = "done";
/// The head of the last line of one that did not.
const FAILED: &str = "failed: ";
/// The longest request line.
pub const MAX_REQUEST: u64 = 64;
/// How long a caller has to send its request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a caller waits for each progress line: a node's stop, start and
/// catching up each take well under a minute.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(180);
/// Progress lines waiting to be written to a slow caller; more are dropped.
const BACKLOG: usize = 256;
/// The pause after a failed accept.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
/// Progress lines a caller reads at most.
const MAX_LINES: usize = 10_000;

/// The listening socket of a launcher; removed when dropped.
#[derive(Debug)]
pub struct Control {
    listener: UnixListener,
    path: PathBuf,
}

impl Drop for Control {
    fn drop(&mut self) {
        // Gone already is fine.
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Control {
    /// Listens on `<data_dir>/launcher.sock`, replacing one a launcher that ended
    /// without removing it left; refuses when another launcher answers on it.
    pub async fn open(data_dir: &Path) -> anyhow::Result<Control> {
        let path = data_dir.join(SOCKET_FILE);
        match UnixStream::connect(&path).await {
            Ok(_) => bail!("another launcher runs on {}", data_dir.display()),
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            Err(_) => std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove the stale {}", path.display()))?,
        }
        let listener = UnixListener::bind(&path)
            .with_context(|| format!("cannot listen on {}", path.display()))?;
        let control = Control { listener, path };
        std::fs::set_permissions(&control.path, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("cannot restrict {}", control.path.display()))?;
        Ok(control)
    }

    /// The next caller that asks for a restart; others (another user, a request not
    /// understood or too slow) are told why and dropped.
    pub async fn next_restart(&self) -> Caller {
        loop {
            let stream = match self.listener.accept().await {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of descriptors, say: give it a moment rather than spin.
                    tracing::warn!(%error, "cannot accept a control connection");
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                    continue;
                }
            };
            match read_request(stream).await {
                Ok(caller) => return caller,
                Err(refused) => tracing::warn!(%refused, "refused a control request"),
            }
        }
    }
}

/// Reads the request on `stream`: a caller of this user's asking for a restart, or
/// why not (told to the caller too).
async fn read_request(mut stream: UnixStream) -> Result<Caller, String> {
    let caller = stream.peer_cred().ok().map(|cred| cred.uid());
    let refusal = if caller != Some(getuid().as_raw()) {
        "only the launcher's own user may control it".to_owned()
    } else {
        let mut line = String::new();
        let mut request = BufReader::new((&mut stream).take(MAX_REQUEST));
        match timeout(REQUEST_TIMEOUT, request.read_line(&mut line)).await {
            Ok(Ok(_)) if line.trim_end() == RESTART => return Ok(Caller { stream }),
            Ok(Ok(_)) => format!("not a request: {:?}", line.trim_end()),
            Ok(Err(error)) => format!("cannot read the request: {error}"),
            Err(_) => format!("no request within {REQUEST_TIMEOUT:?}"),
        }
    };
    let told = format!("{FAILED}{refusal}\n");
    // A caller that hung up needs no answer.
    let _ = timeout(REQUEST_TIMEOUT, stream.write_all(told.as_bytes())).await;
    Err(refusal)
}

/// A caller waiting for a restart's progress.
#[derive(Debug)]
pub struct Caller {
    stream: UnixStream,
}

impl Caller {
    /// A sender of progress lines to the caller, and the task writing them; the task
    /// ends once every sender is dropped and the lines are written (or the caller has
    /// gone, or a line waited [`REQUEST_TIMEOUT`] to be written).
    pub fn progress(self) -> (mpsc::Sender<String>, JoinHandle<()>) {
        let (lines, mut queued) = mpsc::channel::<String>(BACKLOG);
        let mut stream = self.stream;
        let writer = tokio::spawn(async move {
            while let Some(line) = queued.recv().await {
                let line = format!("{line}\n");
                let written = timeout(REQUEST_TIMEOUT, stream.write_all(line.as_bytes())).await;
                if !matches!(written, Ok(Ok(()))) {
                    return;
                }
            }
        });
        (lines, writer)
    }
}

/// The last progress line of a restart that ended with `outcome`.
pub fn last_line(outcome: &anyhow::Result<()>) -> String {
    match outcome {
        Ok(()) => DONE.to_owned(),
        Err(error) => format!("{FAILED}{error:#}"),
    }
}

/// Asks the launcher running on `data_dir` for a rolling restart and hands each
/// progress line to `show` until it is done; fails with the launcher's reason.
pub async fn ask_restart(data_dir: &Path, mut show: impl FnMut(&str)) -> anyhow::Result<()> {
    let path = data_dir.join(SOCKET_FILE);
    let mut stream = UnixStream::connect(&path).await.with_context(|| {
        format!(
            "no `hdl cluster up` answers on {} (is one running on this data directory?)",
            path.display()
        )
    })?;
    stream.write_all(format!("{RESTART}\n").as_bytes()).await?;
    let mut lines = BufReader::new(stream).lines();
    for _ in 0..MAX_LINES {
        let line = timeout(STEP_TIMEOUT, lines.next_line())
            .await
            .with_context(|| format!("the launcher said nothing for {STEP_TIMEOUT:?}"))??;
        let Some(line) = line else {
            bail!("the launcher hung up before the restart ended (did it stop?)");
        };
        if line == DONE {
            return Ok(());
        }
        if let Some(why) = line.strip_prefix(FAILED) {
            bail!("the rolling restart failed: {why}");
        }
        show(&line);
    }
    bail!("the launcher said more than {MAX_LINES} lines")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_second_launcher_is_refused_and_a_stale_socket_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let control = Control::open(dir.path()).await.unwrap();
        let mode = std::fs::metadata(dir.path().join(SOCKET_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let error = Control::open(dir.path()).await.unwrap_err().to_string();
        assert!(error.contains("another launcher runs"), "{error}");
        drop(control);
        assert!(!dir.path().join(SOCKET_FILE).exists());
        // A launcher that ended without removing its socket leaves a file nobody
        // answers on.
        drop(std::os::unix::net::UnixListener::bind(dir.path().join(SOCKET_FILE)).unwrap());
        Control::open(dir.path()).await.unwrap();
    }

    #[tokio::test]
    async fn a_request_not_understood_is_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let control = Control::open(dir.path()).await.unwrap();
        let path = dir.path().join(SOCKET_FILE);
        let asker = tokio::spawn(async move {
            let mut stream = UnixStream::connect(&path).await.unwrap();
            stream.write_all(b"reboot\n").await.unwrap();
            let mut told = String::new();
            stream.read_to_string(&mut told).await.unwrap();
            told
        });
        let told = tokio::select! {
            told = asker => told.unwrap(),
            _ = control.next_restart() => panic!("a bad request was taken for a restart"),
        };
        assert_eq!(told, "failed: not a request: \"reboot\"\n");
    }

    #[tokio::test]
    async fn a_restart_request_gets_the_progress_and_the_outcome() {
        let dir = tempfile::tempdir().unwrap();
        let control = Control::open(dir.path()).await.unwrap();
        let data_dir = dir.path().to_owned();
        let asker = tokio::spawn(async move {
            let mut shown = Vec::new();
            let outcome = ask_restart(&data_dir, |line| shown.push(line.to_owned())).await;
            (shown, outcome.map_err(|e| e.to_string()))
        });
        let (lines, writer) = control.next_restart().await.progress();
        lines.send("node 2: stopping".into()).await.unwrap();
        let failed: anyhow::Result<()> = Err(anyhow::anyhow!("node 2 did not start"));
        lines.send(last_line(&failed)).await.unwrap();
        drop(lines);
        writer.await.unwrap();
        let (shown, outcome) = asker.await.unwrap();
        assert_eq!(shown, ["node 2: stopping"]);
        assert_eq!(
            outcome.unwrap_err(),
            "the rolling restart failed: node 2 did not start"
        );
    }
}
