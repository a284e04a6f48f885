//! The clients of a chaos run: writers creating and modifying handles over the Handle
//! protocol and readers resolving them authoritatively over HTTP, each operation one
//! request to one running member, recorded in the run's [`history`](super::history).
//!
//! Each operation goes to a single member picked at random among those running, so
//! the client library never re-sends it elsewhere: a create re-sent after its first
//! try was carried out would be answered "already exists", a failure of the client's
//! retries, not of the set (issue 16). Writes are acknowledged by the primary only
//! once committed by a quorum and applied; reads ask with `auth=true` (the member
//! waits for the primary's read index), so both must be linearizable.
//!
//! The handles are `<prefix>/<run>-<n>`, taken from a window of [`LIVE_KEYS`] numbers
//! that moves on by one every [`OPS_PER_KEY`] operations: clients meet on the same
//! handles, and each handle's history stays short enough to check quickly.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::client::{AdminRequest, Client, ClientError, Credentials, Overwrite, Transport};
use crate::codec::ResponseCode;
use crate::names::Handle;
use crate::values::{HandleValue, ValueIndex, ValueSelection};
use anyhow::Context;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::Value;
use tokio::time::Instant;

use super::history::{
    Clock, FinalValue, Key, Observed, Op, Outcome, ProcessId, Record, Ret, WriteId, observed,
    url_of,
};
use crate::cli::bench_close::no_answer;
use crate::cli::create::with_creator;

/// Handles in use at once.
pub const LIVE_KEYS: u64 = 16;
/// Operations after which the window of handles moves on by one.
pub const OPS_PER_KEY: u64 = 20;
/// How long one HTTP read may take.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause after an operation that failed, so a down member is not hammered.
const BACKOFF: Duration = Duration::from_millis(20);
/// The URL value's index in every handle.
const URL_INDEX: ValueIndex = ValueIndex(1);

/// The members, where they listen and which are running.
#[derive(Debug)]
pub struct Members {
    /// Handle protocol addresses.
    pub handle: Vec<SocketAddr>,
    /// HTTP addresses.
    pub http: Vec<SocketAddr>,
    up: Vec<AtomicBool>,
}

impl Members {
    /// Members listening at `handle` and `http`, all running.
    pub fn new(handle: Vec<SocketAddr>, http: Vec<SocketAddr>) -> Members {
        let up = handle.iter().map(|_| AtomicBool::new(true)).collect();
        Members { handle, http, up }
    }

    /// Marks member `index` running or not.
    pub fn set_up(&self, index: usize, up: bool) {
        self.up[index].store(up, Ordering::SeqCst);
    }

    /// A member picked at random among the running ones (any when none runs).
    fn pick(&self, rng: &mut StdRng) -> usize {
        let up: Vec<usize> = (0..self.up.len())
            .filter(|index| self.up[*index].load(Ordering::SeqCst))
            .collect();
        match up.len() {
            0 => rng.random_range(0..self.up.len()),
            n => up[rng.random_range(0..n)],
        }
    }
}

/// What every client of the run shares.
#[derive(Debug)]
pub struct Shared {
    /// The members.
    pub members: Members,
    /// The run's order.
    pub clock: Clock,
    /// `<prefix>/<run>-` starts every handle name.
    pub name_stem: String,
    /// When the clients stop.
    pub deadline: Instant,
    /// The percentage of writes that modify a handle rather than create one.
    pub modify_percent: u32,
    processes: AtomicU64,
    writes: AtomicU64,
    operations: AtomicU64,
}

impl Shared {
    /// Clients of `members` on handles `<prefix>/<run>-<n>` until `deadline`,
    /// `modify_percent` of whose writes modify.
    pub fn new(
        members: Members,
        prefix: &str,
        run: u32,
        deadline: Instant,
        modify_percent: u32,
    ) -> Shared {
        Shared {
            members,
            clock: Clock::default(),
            name_stem: format!("{prefix}/{run:08x}-"),
            deadline,
            modify_percent,
            processes: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            operations: AtomicU64::new(0),
        }
    }

    fn new_process(&self) -> ProcessId {
        ProcessId(self.processes.fetch_add(1, Ordering::SeqCst))
    }

    fn new_write(&self) -> WriteId {
        WriteId(self.writes.fetch_add(1, Ordering::SeqCst))
    }

    /// A handle of the current window.
    fn pick_key(&self, rng: &mut StdRng) -> Key {
        let base = self.operations.fetch_add(1, Ordering::SeqCst) / OPS_PER_KEY;
        Key(base + rng.random_range(0..LIVE_KEYS))
    }

    /// Every handle an operation may have named: `0..` this.
    pub fn keys_used(&self) -> u64 {
        self.operations.load(Ordering::SeqCst) / OPS_PER_KEY + LIVE_KEYS
    }

    /// The handle of `key`.
    pub fn handle(&self, key: Key) -> anyhow::Result<Handle> {
        let name = format!("{}{}", self.name_stem, key.0);
        Handle::parse(&name).with_context(|| format!("invalid handle {name}"))
    }
}

/// What the writers saw.
#[derive(Debug, Default)]
pub struct WriteTally {
    /// Creates carried out.
    pub created: u64,
    /// Modifies carried out.
    pub modified: u64,
    /// Creates refused: the handle exists.
    pub already_exists: u64,
    /// Modifies refused: no such handle.
    pub not_found: u64,
    /// Writes without a usable answer, by reason.
    pub unknown: BTreeMap<String, u64>,
    /// Writes not sent: the member's port was closed.
    pub not_sent: u64,
}

impl WriteTally {
    /// Writes carried out.
    pub fn acknowledged(&self) -> u64 {
        self.created + self.modified
    }

    /// Writes answered with an error or not at all.
    pub fn failed(&self) -> u64 {
        self.unknown.values().sum()
    }

    fn add(&mut self, other: &WriteTally) {
        self.created += other.created;
        self.modified += other.modified;
        self.already_exists += other.already_exists;
        self.not_found += other.not_found;
        self.not_sent += other.not_sent;
        for (reason, count) in &other.unknown {
            *self.unknown.entry(reason.clone()).or_default() += count;
        }
    }
}

/// What the readers saw.
#[derive(Debug, Default)]
pub struct ReadTally {
    /// Reads answered with a value or "not found".
    pub answered: u64,
    /// Reads without such an answer.
    pub failed: u64,
}

/// One client's share of the history and its counts.
#[derive(Debug, Default)]
pub struct Work {
    /// The operations it recorded.
    pub records: Vec<Record>,
    /// Its writes.
    pub writes: WriteTally,
    /// Its reads.
    pub reads: ReadTally,
}

impl Work {
    /// Adds `other`'s records and counts.
    pub fn add(&mut self, other: Work) {
        self.records.extend(other.records);
        self.writes.add(&other.writes);
        self.reads.answered += other.reads.answered;
        self.reads.failed += other.reads.failed;
    }
}

/// How a write ended.
enum WriteEnd {
    /// Answered: carried out or refused.
    Answered(Ret),
    /// No usable answer: it may or may not have been carried out.
    Unknown,
    /// Never sent: the member's port was closed.
    NotSent,
}

/// Creates and modifies (`modify_percent` of the writes) handles until the deadline, as a series of
/// processes (a new one after each write of unknown outcome). A create names the
/// writers' administrator in an HS_ADMIN value, so that it may modify the handle.
pub async fn write(
    shared: Arc<Shared>,
    credentials: Credentials,
    seed: u64,
) -> anyhow::Result<Work> {
    let mut rng = StdRng::seed_from_u64(seed);
    let clients: Vec<Client> = (shared.members.handle.iter())
        .map(|member| Client::new(vec![*member]).with_credentials(credentials.clone()))
        .collect();
    let mut work = Work::default();
    let mut process = shared.new_process();
    while Instant::now() < shared.deadline {
        let key = shared.pick_key(&mut rng);
        let write = shared.new_write();
        let url = vec![HandleValue::new(URL_INDEX.0, "URL", url_of(write))];
        let handle = shared.handle(key)?;
        let (op, request) = if !rng.random_ratio(shared.modify_percent, 100) {
            let overwrite = Overwrite::Refuse;
            let create = AdminRequest::Create {
                handle,
                values: with_creator(&url, Some(&credentials.identity)),
                overwrite,
            };
            (Op::Create(write), create)
        } else {
            let modify = AdminRequest::ModifyValues {
                handle,
                values: url,
            };
            (Op::Modify(write), modify)
        };
        let member = shared.members.pick(&mut rng);
        let invoked = shared.clock.tick();
        let answer = clients[member].admin(request).await;
        let at = shared.clock.tick();
        let outcome = match write_end(op, answer, &mut work.writes) {
            WriteEnd::Answered(ret) => Outcome::Returned { at, ret },
            WriteEnd::Unknown => Outcome::Unknown,
            WriteEnd::NotSent => {
                tokio::time::sleep(BACKOFF).await;
                continue;
            }
        };
        work.records.push(Record {
            process,
            member,
            key,
            op,
            invoked,
            outcome,
        });
        if outcome == Outcome::Unknown {
            process = shared.new_process();
            tokio::time::sleep(BACKOFF).await;
        }
    }
    Ok(work)
}

/// How a write ended, counted in `tally`.
fn write_end(
    op: Op,
    answer: Result<crate::codec::Response, ClientError>,
    tally: &mut WriteTally,
) -> WriteEnd {
    let code = match &answer {
        Ok(_) => Some(ResponseCode::Success),
        Err(error) => error.response_code(),
    };
    let (ret, count) = match (op, code) {
        (Op::Create(_), Some(ResponseCode::Success)) => (Ret::Created, &mut tally.created),
        (Op::Modify(_), Some(ResponseCode::Success)) => (Ret::Modified, &mut tally.modified),
        (Op::Create(_), Some(ResponseCode::HandleAlreadyExists)) => {
            (Ret::AlreadyExists, &mut tally.already_exists)
        }
        (Op::Modify(_), Some(ResponseCode::HandleNotFound)) => {
            (Ret::NotFound, &mut tally.not_found)
        }
        _ => {
            return match answer {
                Err(error) if no_answer(&error) == Some(true) => {
                    tally.not_sent += 1;
                    WriteEnd::NotSent
                }
                other => {
                    *tally.unknown.entry(reason(&other)).or_default() += 1;
                    WriteEnd::Unknown
                }
            };
        }
    };
    *count += 1;
    WriteEnd::Answered(ret)
}

/// Why a write has no usable answer, in a few words.
fn reason(answer: &Result<crate::codec::Response, ClientError>) -> String {
    match answer {
        Ok(_) => "an answer of the wrong kind".into(),
        Err(error) => match error.response_code() {
            Some(code) => format!("{} {}", code.to_u32(), crate::client::describe(code)),
            None if no_answer(error).is_some() => "no answer".into(),
            None => error.to_string(),
        },
    }
}

/// Resolves handles of the window authoritatively over HTTP until the deadline. A
/// read without an answer is left out of the history (it constrains nothing), so
/// one process does them all.
pub async fn read(shared: Arc<Shared>, seed: u64) -> anyhow::Result<Work> {
    let mut rng = StdRng::seed_from_u64(seed);
    let http = reqwest::Client::builder()
        .timeout(READ_TIMEOUT)
        .build()
        .context("cannot make an HTTP client")?;
    let process = shared.new_process();
    let mut work = Work::default();
    while Instant::now() < shared.deadline {
        let key = shared.pick_key(&mut rng);
        let member = shared.members.pick(&mut rng);
        let url = format!(
            "http://{}/api/handles/{}?auth=true&index={}",
            shared.members.http[member],
            shared.handle(key)?,
            URL_INDEX.0
        );
        let invoked = shared.clock.tick();
        let answer = read_answer(&http, &url).await;
        let at = shared.clock.tick();
        let Some(ret) = answer else {
            work.reads.failed += 1;
            tokio::time::sleep(BACKOFF).await;
            continue;
        };
        work.reads.answered += 1;
        work.records.push(Record {
            process,
            member,
            key,
            op: Op::Read,
            invoked,
            outcome: Outcome::Returned { at, ret },
        });
    }
    Ok(work)
}

/// The URL value an HTTP resolution found, "not found", or `None` for any other
/// answer (or none).
async fn read_answer(http: &reqwest::Client, url: &str) -> Option<Ret> {
    let response = http.get(url).send().await.ok()?;
    let status = response.status().as_u16();
    let body: Value = serde_json::from_slice(&response.bytes().await.ok()?).ok()?;
    match (status, body["responseCode"].as_u64()) {
        // 200 without the URL value (responseCode 200) is a state no write makes.
        (200, Some(1 | 200)) => {
            let values = body["values"].as_array().map_or(&[][..], Vec::as_slice);
            let url = values.iter().find(|value| value["index"] == URL_INDEX.0);
            let url = url.and_then(|value| value["data"]["value"].as_str());
            Some(Ret::Value(
                url.map_or(Observed::Foreign, |url| observed(url.as_bytes())),
            ))
        }
        (404, Some(100)) => Some(Ret::NotFound),
        _ => None,
    }
}

/// Tries of each final resolution before the check gives up.
const FINAL_TRIES: usize = 5;

/// Every member's value of every handle `0..keys`, each resolved over UDP at the
/// member itself (no AT flag: every member has caught up by now), recorded as reads
/// of one process per member.
pub async fn final_values(shared: &Shared, keys: u64) -> anyhow::Result<Vec<(FinalValue, Record)>> {
    let mut finals = Vec::new();
    let selection = ValueSelection {
        indexes: vec![URL_INDEX],
        types: Vec::new(),
    };
    for (member, address) in shared.members.handle.iter().enumerate() {
        let client = Client::new(vec![*address]);
        let process = shared.new_process();
        for key in (0..keys).map(Key) {
            let handle = shared.handle(key)?;
            let invoked = shared.clock.tick();
            let value = final_value(&client, &handle, &selection)
                .await
                .with_context(|| format!("resolving {handle} at {address}"))?;
            let at = shared.clock.tick();
            let record = Record {
                process,
                member,
                key,
                op: Op::Read,
                invoked,
                outcome: Outcome::Returned { at, ret: value },
            };
            finals.push((FinalValue { member, key, value }, record));
        }
    }
    Ok(finals)
}

async fn final_value(
    client: &Client,
    handle: &Handle,
    selection: &ValueSelection,
) -> anyhow::Result<Ret> {
    let mut last = None;
    for _ in 0..FINAL_TRIES {
        match client.resolve(handle, selection, Transport::Auto).await {
            Ok(found) => {
                let url = found.values.iter().find(|value| value.index == URL_INDEX);
                let seen = url.map_or(Observed::Foreign, |url| observed(&url.data));
                return Ok(Ret::Value(seen));
            }
            Err(error) if error.response_code() == Some(ResponseCode::HandleNotFound) => {
                return Ok(Ret::NotFound);
            }
            Err(error) => last = Some(error),
        }
    }
    Err(last.map_or_else(|| anyhow::anyhow!("no try"), anyhow::Error::from))
}
