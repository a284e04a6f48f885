//! The UDP edge's kept answers on the members of a replica set: a write applied on a
//! secondary, and a snapshot installed on a learner that fell behind, show in the very
//! next UDP answer of that member, its old answer kept until then.

use hdl::client::{AdminRequest, Client};
use hdl::codec::ResponseCode;
use hdl::names::Handle;
use hdl::values::HandleValue;

use super::{CONFIG, Member, Set, create, url};
use crate::answer_cache::{HITS, udp_answer, values_of};
use crate::caching::sample;
use crate::harness::{admin_credentials, metrics_of};

/// Creates written while a learner is stopped: many more than a snapshot's interval
/// and the entries kept for a member behind ([`CONFIG`]), so it must install one.
const WHILE_STOPPED: usize = 60;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A counter or gauge of `member`'s `/metrics`.
fn metric(member: &Member, name: &str) -> u64 {
    let url = format!("http://{}", member.listening.http);
    sample(&runtime().block_on(metrics_of(&url)), name)
}

/// Replaces the URL of `name` with `data` through `member`, as the administrator.
fn modify(member: &Member, name: &str, data: &str) {
    let client = Client::new(vec![member.listening.handle]).with_credentials(admin_credentials());
    let request = AdminRequest::ModifyValues {
        handle: Handle::parse(name).expect("handle"),
        values: vec![HandleValue::new(1, "URL", data)],
    };
    runtime()
        .block_on(client.admin(request))
        .expect("the modify is made");
}

/// The URL `member` answers for `name` over UDP (asked as RequestId `id`).
fn url_at(member: &Member, name: &str, id: u32) -> Vec<u8> {
    let (code, values) = values_of(&udp_answer(member.listening.handle, name, &[], id));
    assert_eq!(code, ResponseCode::Success, "{name} at node {}", member.id);
    values.into_iter().next().expect("a value").1
}

/// Resolves `name` at `member` over UDP until an answer comes from its kept answers
/// (a member that has just joined forwards resolutions, which are not kept, until
/// its copy of the cluster map and its slots are settled, and each change of those
/// drops every kept answer): its URL, the same in every answer.
fn kept_url(member: &Member, name: &str) -> Vec<u8> {
    const ATTEMPTS: u32 = 100;
    let hits = metric(member, HITS);
    let first = url_at(member, name, 1);
    for attempt in 2..ATTEMPTS {
        assert_eq!(url_at(member, name, attempt), first);
        if metric(member, HITS) > hits {
            return first;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!(
        "node {} never answered {name} from a kept answer",
        member.id
    );
}

/// Waits until member `index` has applied every entry in the log of the primary,
/// asked through member `via`: its status says so (`hdl cluster status`), and a member
/// commits the applies it holds uncommitted before it answers a status, so its
/// answers show them. (Its `hdl_raft_applied_index` metric is openraft's, which
/// counts such an apply a few milliseconds before its commit.)
fn await_applied(set: &Set, via: usize, index: usize) {
    let id = set.members[index].id;
    set.await_status(via, "the member applied the write", |s| {
        s["members"]
            .as_array()
            .is_some_and(|members| members.iter().any(|m| m["id"] == id && m["lag"] == 0))
    });
}

#[test]
fn a_write_applied_on_a_secondary_shows_in_its_next_udp_answer() {
    let set = Set::form(2);
    let primary = set.primary(0);
    let secondary = 1 - primary;
    let name = "test/kept";
    assert_eq!(create(&set.members[primary], name), ResponseCode::Success);
    await_applied(&set, primary, secondary);
    for member in &set.members {
        assert_eq!(kept_url(member, name), url(name).data);
    }

    modify(
        &set.members[secondary],
        name,
        "https://example.org/modified",
    );
    let modified = b"https://example.org/modified".to_vec();
    assert_eq!(url_at(&set.members[primary], name, 300), modified);
    await_applied(&set, primary, secondary);
    assert_eq!(url_at(&set.members[secondary], name, 301), modified);
}

#[test]
fn a_snapshot_installed_on_a_learner_shows_in_its_next_udp_answer() {
    let mut set = Set::empty();
    std::fs::write(set.dir.path().join("config.toml"), CONFIG).expect("config file");
    set.form_members(1);
    let name = "test/kept";
    assert_eq!(create(&set.members[0], name), ResponseCode::Success);
    let learner = set.spawn_new(2);
    set.add_learner(0, &learner);
    set.members.push(learner);
    await_applied(&set, 0, 1);
    assert_eq!(kept_url(&set.members[1], name), url(name).data);
    let installed = "hdl_raft_snapshots_installed_total";
    let installs = metric(&set.members[1], installed);

    signal(&set.members[1], rustix::process::Signal::STOP);
    modify(&set.members[0], name, "https://example.org/while-stopped");
    for n in 0..WHILE_STOPPED {
        let filler = format!("test/filler-{n}");
        assert_eq!(create(&set.members[0], &filler), ResponseCode::Success);
    }
    signal(&set.members[1], rustix::process::Signal::CONT);
    await_applied(&set, 0, 1);
    assert!(
        metric(&set.members[1], installed) > installs,
        "the learner caught up from a snapshot: {}",
        set.stderr(1)
    );
    assert_eq!(
        url_at(&set.members[1], name, 300),
        b"https://example.org/while-stopped"
    );
}

/// Sends `member` `signal`.
fn signal(member: &Member, signal: rustix::process::Signal) {
    let child = member.child.as_ref().expect("a running member");
    let pid = rustix::process::Pid::from_child(child);
    rustix::process::kill_process(pid, signal).expect("signal sent");
}
