//! Replica sets of real `hdl serve` processes, formed with `hdl cluster`: writes
//! through any member, a primary killed under load, a secondary restarted on its data;
//! `faults` kills and restarts members and changes membership under load, `chaos`
//! runs `hdl bench chaos` (kills under load, then the history check), `disk` fills
//! or fails one member's disk, `groups` checks the metadata group beside the set,
//! `up` runs `hdl cluster up`, `restart` restarts its nodes one by one under load
//! with `hdl cluster restart`, `peer_port` floods the members' peer ports with
//! connections that never authenticate, `membership` makes changes at once,
//! `partitions` cuts members off in network namespaces ([`netns`]), `backup` backs a
//! set up under writes and restores it, `catch_up` adds a learner to a set whose log
//! is purged right behind each snapshot, `kept_answers` checks the UDP edge's kept
//! answers after an apply on a secondary and a snapshot install on a learner,
//! `identities` authenticates a new identity at once on a secondary that lags.

mod backup;
mod catch_up;
mod chaos;
mod disk;
mod faults;
mod groups;
mod identities;
mod kept_answers;
mod membership;
mod netns;
mod partitions;
mod peer_port;
mod restart;
mod sharded;
mod up;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use hdl::client::{AdminRequest, Client, Credentials, Overwrite};
use hdl::codec::{Body, Message, OpFlags, Request, Response, ResponseCode};
use hdl::names::Handle;
use hdl::values::{HandleValue, SiteInfo};
use serde_json::Value;
use tempfile::TempDir;

use crate::harness::{
    ADMIN_SECRET, Listening, admin_credentials, is_address_taken, lone_node_args, spawn_serve,
    stable_address, try_spawn_serve_through,
};
use crate::raw;
use netns::Lab;

/// The longest any awaited condition may take.
const WAIT: Duration = Duration::from_secs(30);
/// Status polls before giving up (each is bounded by the CLI's own timeouts).
const MAX_POLLS: usize = 300;
/// The pause between status polls: [`MAX_POLLS`] of them span [`WAIT`].
const POLL_PAUSE: Duration = Duration::from_millis(100);

/// Quick Raft timing, so that an election takes well under a second, and snapshots
/// every 20 entries keeping 5, and at most 10 for a member behind, so that a member
/// absent for a few dozen writes can only catch up from a snapshot.
const CONFIG: &str = "[cluster]\nheartbeat_ms = 50\nelection_timeout_min_ms = 300\n\
                      election_timeout_max_ms = 600\nsnapshot_every = 20\n\
                      keep_after_snapshot = 5\nkeep_for_members = 10\n\
                      [auth]\nserver_admins = [\"300:0.NA/ADMIN\"]\n\
                      [http]\nallow_plain_auth_from_loopback = true\n";

/// One member process; killed and reaped when dropped.
struct Member {
    id: u64,
    child: Option<Child>,
    listening: Listening,
}

impl Member {
    /// A lone `hdl serve` on `<dir>/data` ([`lone_node_args`]), its stderr in `dir`.
    fn start_lone(dir: &std::path::Path) -> Member {
        let args = lone_node_args(&dir.join("data"));
        let (child, listening) = spawn_serve(&args, &dir.join("stderr"));
        Member {
            id: 1,
            child: Some(child),
            listening,
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Member {
    /// Its exit status, if it has exited (reaped then).
    fn try_exit(&mut self) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut()?;
        child.try_wait().expect("try_wait")
    }

    /// SIGKILL, then reap.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A replica set in one temporary directory with one secret file; its members on
/// the host's loopback, or each in a namespace of a [`Lab`].
struct Set {
    dir: TempDir,
    members: Vec<Member>,
    /// Dropped after the members, which run inside it.
    lab: Option<Lab>,
}

impl Set {
    /// Starts `size` nodes on loopback that wait to be joined, then forms the set
    /// with the CLI: `init` on node 1, `add-secondary --voter` for the others.
    fn form(size: u64) -> Set {
        Set::form_in(size, None)
    }

    /// [`Set::form`] with the members in `lab`'s namespaces, when given; the CLI then
    /// runs in its hub.
    fn form_in(size: u64, lab: Option<Lab>) -> Set {
        let mut set = Set::empty_in(lab);
        set.form_members(size);
        set
    }

    /// A set of no members yet, on loopback: its directory, secret and configuration.
    fn empty() -> Set {
        Set::empty_in(None)
    }

    /// [`Set::empty`], its members to run in `lab`'s namespaces when given.
    fn empty_in(lab: Option<Lab>) -> Set {
        let dir = tempfile::tempdir().expect("temporary directory");
        std::fs::write(dir.path().join("secret"), format!("{}\n", "5a".repeat(32)))
            .expect("secret file");
        std::fs::write(dir.path().join("config.toml"), CONFIG).expect("config file");
        Set {
            dir,
            members: Vec::new(),
            lab,
        }
    }

    /// Starts members 1 to `size` and forms them into the set, as [`Set::form`].
    fn form_members(&mut self, size: u64) {
        for id in 1..=size {
            let member = match &self.lab {
                // Each member has a namespace, and so ports, of its own.
                Some(lab) => self.spawn(id, &lab.socket(id, 2641), &lab.socket(id, 2651)),
                None => self.spawn_new(id),
            };
            self.members.push(member);
        }
        let first = self.members[0].listening.peer.to_string();
        let init = self.cli(&[
            "init",
            "--peer",
            &first,
            "--admin-secret-file",
            ADMIN_SECRET,
            "--prefix",
            "ADMIN",
        ]);
        let said = String::from_utf8_lossy(&init.stdout);
        assert!(said.contains("created 0.NA/ADMIN"), "{said}");
        for member in &self.members[1..] {
            let added = self.add_voter(0, member);
            assert!(
                added.status.success(),
                "add-secondary: {}",
                String::from_utf8_lossy(&added.stderr)
            );
        }
    }

    /// `add-secondary --voter` of `member` through member `via`.
    fn add_voter(&self, via: usize, member: &Member) -> Output {
        self.add_secondary(via, member, &["--voter"])
    }

    /// `add-secondary` of `member` as a learner through member `via`, which must
    /// succeed (it returns once the learner has caught up).
    fn add_learner(&self, via: usize, member: &Member) {
        let added = self.add_secondary(via, member, &[]);
        assert!(
            added.status.success(),
            "add-secondary: {}",
            String::from_utf8_lossy(&added.stderr)
        );
    }

    /// `add-secondary` of `member` through member `via`, with `options`.
    fn add_secondary(&self, via: usize, member: &Member, options: &[&str]) -> Output {
        let (id, listening) = (member.id.to_string(), member.listening);
        let (peer, handle) = (listening.peer.to_string(), listening.handle.to_string());
        let words = [
            "add-secondary",
            "--peer",
            &self.peer(via),
            "--id",
            &id,
            "--node-peer",
            &peer,
            "--node-handle",
            &handle,
        ];
        self.try_cli(&[&words[..], options].concat())
    }

    /// The data directory of member `id`.
    fn data_dir(&self, id: u64) -> PathBuf {
        self.dir.path().join(format!("data-{id}"))
    }

    /// What member `index` has written to stderr.
    fn stderr(&self, index: usize) -> String {
        let path = self
            .dir
            .path()
            .join(format!("stderr-{}", self.members[index].id));
        std::fs::read_to_string(path).expect("stderr file")
    }

    /// Starts new member `id` on loopback, on stable addresses of its own: drawn again
    /// (a few times) when another program took one between the draw and the bind.
    fn spawn_new(&self, id: u64) -> Member {
        const DRAWS: usize = 5;
        let mut failures = Vec::new();
        for _ in 0..DRAWS {
            match self.try_spawn(id, &stable_address(), &stable_address()) {
                Ok(member) => return member,
                Err(failure) if is_address_taken(&failure) => failures.push(failure),
                Err(failure) => panic!("{failure}"),
            }
        }
        panic!("member {id}'s addresses were taken {DRAWS} times: {failures:#?}")
    }

    /// Starts member `id` on `handle` and `peer`, which it must get.
    fn spawn(&self, id: u64, handle: &str, peer: &str) -> Member {
        self.try_spawn(id, handle, peer)
            .unwrap_or_else(|failure| panic!("{failure}"))
    }

    /// Starts member `id` on `handle` and `peer`, or says why it did not start.
    fn try_spawn(&self, id: u64, handle: &str, peer: &str) -> Result<Member, String> {
        let path = |name: &str| self.dir.path().join(name);
        let args: Vec<OsString> = vec![
            "--config".into(),
            path("config.toml").into(),
            "--data-dir".into(),
            self.data_dir(id).into(),
            "--listen".into(),
            handle.into(),
            "--peer".into(),
            peer.into(),
            "--node-id".into(),
            id.to_string().into(),
            "--secret-file".into(),
            path("secret").into(),
            "--no-bootstrap".into(),
        ];
        let through = self.lab.as_ref().map(|lab| lab.exec_in(Some(id)));
        let stderr = path(&format!("stderr-{id}"));
        let (child, listening) =
            try_spawn_serve_through(&through.unwrap_or_default(), &args, &stderr)?;
        Ok(Member {
            id,
            child: Some(child),
            listening,
        })
    }

    /// SIGKILLs member `index` (if running) and starts it again on its data and ports.
    fn restart(&mut self, index: usize) {
        let (id, listening) = (self.members[index].id, self.members[index].listening);
        self.members[index].kill();
        let (handle, peer) = (listening.handle.to_string(), listening.peer.to_string());
        self.members[index] = self.spawn(id, &handle, &peer);
    }

    /// The peer address of member `index`, as `--peer` takes it.
    fn peer(&self, index: usize) -> String {
        self.members[index].listening.peer.to_string()
    }

    /// Runs `hdl cluster <args> --secret-file <the set's>`, which must succeed.
    fn cli(&self, args: &[&str]) -> Output {
        let output = self.try_cli(args);
        assert!(
            output.status.success(),
            "hdl cluster {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    fn try_cli(&self, args: &[&str]) -> Output {
        let secret: PathBuf = self.dir.path().join("secret");
        let hdl = OsString::from(env!("CARGO_BIN_EXE_hdl"));
        let words = match &self.lab {
            Some(lab) => [lab.exec_in(None), vec![hdl]].concat(),
            None => vec![hdl],
        };
        Command::new(&words[0])
            .args(&words[1..])
            .arg("cluster")
            .args(args)
            .arg("--secret-file")
            .arg(secret)
            .output()
            .expect("run hdl cluster")
    }

    /// `hdl cluster status --json` asked of member `via`, once it satisfies `ready`.
    fn await_status(&self, via: usize, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        let peer = self.members[via].listening.peer.to_string();
        for _ in 0..MAX_POLLS {
            let output = self.try_cli(&["status", "--peer", &peer, "--json"]);
            if output.status.success() {
                let status: Value = serde_json::from_slice(&output.stdout).expect("JSON");
                if ready(&status) {
                    return status;
                }
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            thread::sleep(POLL_PAUSE);
        }
        panic!("gave up waiting for {what}");
    }

    /// The index of the member that is the primary, as member `via` sees the set.
    fn primary(&self, via: usize) -> usize {
        let status = self.await_status(via, "a primary", |s| s["leader"].is_u64());
        self.index_of_leader(&status)
    }

    /// The index of the primary that member `via` knows of, once it is not node
    /// `not` (a primary killed or cut off).
    fn primary_besides(&self, via: usize, not: u64) -> usize {
        let status = self.await_status(via, "another primary", |s| {
            s["leader"].as_u64().is_some_and(|leader| leader != not)
        });
        self.index_of_leader(&status)
    }

    fn index_of_leader(&self, status: &Value) -> usize {
        let leader = status["leader"].as_u64();
        self.members
            .iter()
            .position(|m| Some(m.id) == leader)
            .expect("the primary is a member")
    }
}

fn url(name: &str) -> HandleValue {
    HandleValue::new(1, "URL", format!("https://example.org/{name}"))
}

/// The create of `name` with `value`, refused if `name` exists.
fn create_request(name: &str, value: HandleValue) -> AdminRequest {
    AdminRequest::Create {
        handle: Handle::parse(name).expect("handle"),
        values: vec![value],
        overwrite: Overwrite::Refuse,
    }
}

/// Creates `name` through the Handle protocol at `member`, authenticated as the
/// bootstrap administrator; the response code (RC_ERROR when nothing answered).
fn create(member: &Member, name: &str) -> ResponseCode {
    administer(member, admin_credentials(), create_request(name, url(name)))
}

/// Carries out `request` through the Handle protocol at `member`, authenticated with
/// `credentials`; the response code (RC_ERROR when nothing answered).
fn administer(member: &Member, credentials: Credentials, request: AdminRequest) -> ResponseCode {
    let client = Client::new(vec![member.listening.handle]).with_credentials(credentials);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    match runtime.block_on(client.admin(request)) {
        Ok(_) => ResponseCode::Success,
        Err(error) => error.response_code().unwrap_or(ResponseCode::Error),
    }
}

/// An authoritative resolution (AT flag) of `name` at `member`.
fn resolve_at(member: &Member, name: &str) -> Message {
    let mut message = raw::resolution(name.as_bytes(), 9);
    message.header.flags = message.header.flags.with(OpFlags::AT);
    raw::tcp(member.listening.handle, &message.encode()).expect("an answer")
}

fn assert_resolves(member: &Member, name: &str) {
    assert_resolves_data(member, name, &url(name).data);
}

/// `name` resolves at `member`, its first value holding `data`.
fn assert_resolves_data(member: &Member, name: &str, data: &[u8]) {
    let answer = resolve_at(member, name);
    assert_eq!(
        answer.header.response_code,
        ResponseCode::Success,
        "{name} at node {}: {answer:?}",
        member.id
    );
    let Body::Response {
        response: Response::Resolution(found),
        ..
    } = answer.body
    else {
        panic!("not a resolution: {answer:?}")
    };
    assert_eq!(found.values[0].data, data, "{name} at node {}", member.id);
}

#[test]
fn a_set_formed_with_the_cli_takes_a_write_through_a_secondary() {
    let set = Set::form(3);
    let status = set.await_status(0, "three caught-up members", |s| {
        s["members"].as_array().is_some_and(|members| {
            members.len() == 3 && members.iter().all(|m| m["lag"] == 0 && m["voter"] == true)
        })
    });
    let members = status["members"].as_array().expect("members");
    let mut roles: Vec<&str> = members.iter().filter_map(|m| m["role"].as_str()).collect();
    roles.sort_unstable();
    assert_eq!(roles, ["primary", "secondary", "secondary"]);
    for member in &set.members {
        let row = members
            .iter()
            .find(|m| m["id"] == member.id)
            .expect("listed");
        let pid = member.child.as_ref().map(Child::id);
        assert_eq!(
            row["pid"].as_u64(),
            pid.map(u64::from),
            "node {}",
            member.id
        );
        assert_eq!(row["peer"], member.listening.peer.to_string());
    }

    let primary = set.primary(0);
    let secondary = (primary + 1) % 3;
    assert_eq!(
        create(&set.members[secondary], "test/fwd"),
        ResponseCode::Success
    );
    assert_eq!(
        create(&set.members[primary], "test/FWD"),
        ResponseCode::HandleAlreadyExists
    );
    for member in &set.members {
        assert_resolves(member, "test/fwd");
    }

    let site = site_info(&set.members[secondary]);
    let mut ids: Vec<u32> = site.servers.iter().map(|s| s.server_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3]);
    let primary_id = set.members[primary].id.to_string();
    assert!(site.attributes.contains(&("primary".into(), primary_id)));
}

fn site_info(member: &Member) -> SiteInfo {
    let request = Request::GetSiteInfo {
        handle: b"/".to_vec(),
    };
    let answer = raw::tcp(member.listening.handle, &raw::encode(request, 3).encode());
    match answer.expect("an answer").body {
        Body::Response {
            response: Response::SiteInfo { site },
            ..
        } => SiteInfo::decode(&site).expect("HS_SITE"),
        other => panic!("not site info: {other:?}"),
    }
}

/// Creates `test/load-N` at `member` until `stop`; sends the name of every
/// acknowledged create.
fn write_until(listening: Listening, stop: Arc<AtomicBool>, acked: mpsc::Sender<String>) {
    let member = Member {
        id: 0,
        child: None,
        listening,
    };
    for n in 0..100_000 {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let name = format!("test/load-{n}");
        if create(&member, &name) == ResponseCode::Success && acked.send(name).is_err() {
            return;
        }
    }
}

/// Receives `count` more acknowledged names within [`WAIT`].
fn receive(acked: &mpsc::Receiver<String>, count: usize, into: &mut Vec<String>) {
    let deadline = Instant::now() + WAIT;
    for _ in 0..count {
        let left = deadline.saturating_duration_since(Instant::now());
        into.push(
            acked
                .recv_timeout(left)
                .expect("acknowledged creates keep coming"),
        );
    }
}

/// A thread running [`write_until`] at one member, and the names it got acknowledged.
struct Writer {
    stop: Arc<AtomicBool>,
    acked: mpsc::Receiver<String>,
    thread: thread::JoinHandle<()>,
}

impl Writer {
    /// Starts creating `test/load-N` at the member listening at `listening`.
    fn start(listening: Listening) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let (sender, acked) = mpsc::channel();
        let thread = {
            let stop = Arc::clone(&stop);
            thread::spawn(move || write_until(listening, stop, sender))
        };
        Writer {
            stop,
            acked,
            thread,
        }
    }

    /// Waits for `count` more acknowledged names (within [`WAIT`]), then takes those
    /// already there too, into `into`.
    fn receive(&self, count: usize, into: &mut Vec<String>) {
        receive(&self.acked, count, into);
        into.extend(self.acked.try_iter());
    }

    /// Stops the thread; the names acknowledged meanwhile go into `into`.
    fn finish(self, into: &mut Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("writer");
        into.extend(self.acked.try_iter());
    }
}

#[test]
fn a_new_primary_takes_writes_and_keeps_every_acknowledged_one() {
    let mut set = Set::form(3);
    let primary = set.primary(0);
    let writer_at = (primary + 1) % 3;
    let writer = Writer::start(set.members[writer_at].listening);
    let mut names = Vec::new();
    writer.receive(20, &mut names);
    set.members[primary].kill();
    let before_kill = names.len();
    // Creates acknowledged after the kill went through a new primary.
    writer.receive(before_kill + 20, &mut names);
    writer.finish(&mut names);

    let survivors: Vec<&Member> = set.members.iter().filter(|m| m.child.is_some()).collect();
    let new_primary = set.primary(writer_at);
    assert_ne!(new_primary, primary);
    for member in survivors {
        for name in &names {
            assert_resolves(member, name);
        }
    }
}

/// Kills a secondary, makes `missed` creates `test/<label>-N` without it, restarts it
/// on its data, and checks that it catches up and resolves every one of them.
pub(crate) fn secondary_catches_up_after(missed: usize, label: &str) {
    let mut set = Set::form(3);
    let primary = set.primary(0);
    let lagging = (primary + 1) % 3;
    set.members[lagging].kill();
    let names: Vec<String> = (0..missed).map(|n| format!("test/{label}-{n}")).collect();
    for name in &names {
        assert_eq!(create(&set.members[primary], name), ResponseCode::Success);
    }
    let id = set.members[lagging].id;
    set.restart(lagging);
    set.await_status(primary, "the restarted member caught up", |s| {
        s["members"].as_array().is_some_and(|members| {
            members
                .iter()
                .any(|m| m["id"] == id && m["lag"] == 0 && m["role"] == "secondary")
        })
    });
    for name in &names {
        assert_resolves(&set.members[lagging], name);
    }
}

#[test]
fn a_restarted_secondary_catches_up_on_its_data() {
    secondary_catches_up_after(10, "missed");
}
