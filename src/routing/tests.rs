//! The router over a real store and metadata group, with the other replica set faked:
//! which calls leave the node, re-routing bounds, listing and search merge, and authorisation
//! records read from their owner.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;

use super::merge::{merge_pages, union_prefixes};
use super::*;
use crate::auth::Identity;
use crate::config::SiteConfig;
use crate::metrics::Metrics;
use crate::names::Handle;
use crate::placement::{MapCommand, MapGroup};
use crate::replication::admin::Member;
use crate::replication::{HandleCommand, Node, slot_of};
use crate::service::Service;
use crate::service::{
    AuthPolicy, Caller, Error, ExistingHandle, Found, Freshness, HandleRecord, Handler, Operation,
    PrefixRecord, SearchPosition,
};
use crate::storage::{Slot, Store};
use crate::values::{
    AdminPermissions, AdminRecord, HandleValue, Permissions, SearchQuery, ValueSelection,
};

/// Eight slots: set 1 (this node, node 1) owns 0-3, set 2 (node 2, faked) 4-7.
const SLOTS: u32 = 8;

/// The peer address of node 2, the faked set's one member.
const OTHER: &str = "192.0.2.2:2642";

/// How the faked set answers.
type Answering = fn(&ForwardCall) -> Result<ForwardAnswer, ()>;

/// Set 2: records every call and answers as `answering` says.
#[derive(Debug)]
struct FakeSet {
    calls: Mutex<Vec<ForwardCall>>,
    answering: Answering,
}

#[async_trait]
impl Peers for FakeSet {
    async fn forward(
        &self,
        peer: SocketAddr,
        call: ForwardCall,
    ) -> Result<ForwardAnswer, ForwardError> {
        assert_eq!(peer, OTHER.parse().unwrap());
        self.calls.lock().unwrap().push(call.clone());
        (self.answering)(&call).map_err(|()| ForwardError::NotAnswered {
            peer,
            reason: "down".into(),
        })
    }
}

struct World {
    _dir: tempfile::TempDir,
    router: Router,
    fake: Arc<FakeSet>,
    metrics: Arc<Metrics>,
}

fn member(id: u64, peer: &str) -> Member {
    Member {
        id,
        node: Node {
            handle: "127.0.0.1:2641".parse().unwrap(),
            peer: peer.parse().unwrap(),
            http: None,
        },
        voter: true,
    }
}

/// The server administrator of the local service.
fn server_admin() -> Caller {
    Caller::Administrator {
        identity: Identity {
            handle: "0.NA/ADMIN".into(),
            index: 300,
        },
    }
}

/// A handle `<prefix>/<n>` for the first `n` whose slot is in `set` (1: 0-3, 2: 4-7).
fn handle_in(set: u32, prefix: &str) -> Handle {
    (0..)
        .map(|n| Handle::parse(&format!("{prefix}/{n}")).unwrap())
        .find(|handle| (slot_of(handle.key(), SLOTS).0 < 4) == (set == 1))
        .unwrap()
}

async fn world(answering: Answering) -> World {
    let dir = tempfile::tempdir().unwrap();
    let handle_addr = "127.0.0.1:2641".parse().unwrap();
    let store_path = dir.path().join("handles.redb");
    let store = Arc::new(Store::open(&store_path).unwrap());
    let set_dir = dir.path().join("set");
    std::fs::create_dir_all(&set_dir).unwrap();
    let group = crate::replication::start_alone(Arc::clone(&store), &set_dir, handle_addr).await;
    let map_dir = dir.path().join("map");
    std::fs::create_dir_all(&map_dir).unwrap();
    let host = crate::replication::test_host(handle_addr).await;
    let settings = crate::replication::alone_settings();
    let map = MapGroup::start(&settings, &map_dir, host).await.unwrap();
    let owned = (0..4).map(Slot).collect();
    let slice = HandleCommand::MakeSlice {
        slot_count: SLOTS,
        owned,
    };
    group.client_write(slice).await.unwrap().unwrap();
    for (set, node, peer) in [(1, 1, "127.0.0.1:1"), (2, 2, OTHER)] {
        let command = MapCommand::RecordSet {
            set: SetId(set),
            members: vec![member(node, peer)],
        };
        map.change(command).await.unwrap().unwrap();
    }
    let ring = MapCommand::MakeRing {
        slot_count: SLOTS,
        sets: vec![SetId(1), SetId(2)],
    };
    map.change(ring).await.unwrap().unwrap();
    let fake = Arc::new(FakeSet {
        calls: Mutex::new(Vec::new()),
        answering,
    });
    let metrics = Arc::new(Metrics::new());
    let peers: Arc<dyn Peers> = fake.clone();
    let forwarder = Forwarder::new(map, peers, 1, Arc::clone(&metrics));
    let policy = AuthPolicy {
        server_admins: vec![Identity {
            handle: "0.NA/ADMIN".into(),
            index: 300,
        }],
    };
    let service = Service::new(
        Arc::clone(&store),
        group.clone(),
        policy,
        SiteConfig::default(),
    )
    .with_records(Arc::new(forwarder.clone()));
    let local = LocalSet {
        id: SetId(1),
        group,
        store,
        service,
    };
    let router = Router::new(
        forwarder,
        watch::channel(Some(local)).1,
        SiteConfig::default(),
    );
    World {
        _dir: dir,
        router,
        fake,
        metrics,
    }
}

fn url(data: &str) -> HandleValue {
    HandleValue::new(1, "URL", data)
}

fn record(display: &str) -> HandleRecord {
    HandleRecord {
        display: display.into(),
        values: vec![url("https://b.example/")],
    }
}

fn create(handle: &Handle, values: Vec<HandleValue>) -> Operation {
    Operation::Create {
        handle: handle.clone(),
        values,
        existing: ExistingHandle::Refuse,
    }
}

fn sent(world: &World) -> Vec<ForwardCall> {
    world.fake.calls.lock().unwrap().clone()
}

#[tokio::test]
async fn a_handle_goes_to_the_set_owning_its_slot_and_each_forward_is_counted() {
    let world = world(|call| match call {
        ForwardCall::Resolve { handle, .. } => Ok(Ok(Answer::Record(record(handle.as_str())))),
        ForwardCall::Administer { .. } => Ok(Ok(Answer::Applied(crate::service::Applied::Created))),
        _ => Err(()),
    })
    .await;
    let (mine, theirs) = (handle_in(1, "10.1000"), handle_in(2, "10.1000"));
    let (admin, all) = (server_admin(), ValueSelection::all());
    for handle in [&mine, &theirs] {
        let operation = create(handle, vec![url("https://a.example/")]);
        world.router.administer(&admin, operation).await.unwrap();
    }
    let local = world.router.resolve(&mine, &all, Freshness::Local).await;
    assert_eq!(local.unwrap().values[0].data, b"https://a.example/");
    // This set's handle is read at once; another set's, or an AT read, must wait.
    let at_once = world.router.resolve_at_once(&mine, &all, Freshness::Local);
    assert_eq!(
        at_once.unwrap().unwrap().values[0].data,
        b"https://a.example/"
    );
    let fresh = Freshness::Authoritative;
    assert!(world.router.resolve_at_once(&mine, &all, fresh).is_none());
    let theirs_at_once = world
        .router
        .resolve_at_once(&theirs, &all, Freshness::Local);
    assert!(theirs_at_once.is_none());
    let remote = world.router.resolve(&theirs, &all, Freshness::Local).await;
    assert_eq!(remote.unwrap().values[0].data, b"https://b.example/");
    let calls = sent(&world);
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(
        matches!(&calls[0], ForwardCall::Administer { operation, .. } if operation.handle() == Some(&theirs))
    );
    assert!(matches!(&calls[1], ForwardCall::Resolve { handle, .. } if handle == &theirs));
    let text = world.metrics.render();
    assert!(
        text.contains(r#"hdl_forwarded_requests_total{kind="read"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"hdl_forwarded_requests_total{kind="write"} 1"#),
        "{text}"
    );
}

#[tokio::test]
async fn the_local_service_answers_not_here_for_a_slot_it_does_not_hold() {
    let world = world(|_| Err(())).await;
    let theirs = handle_in(2, "10.1000");
    let service = world.router.local_service().unwrap();
    let read = service
        .resolve(&theirs, &ValueSelection::all(), Freshness::Local)
        .await;
    assert!(
        matches!(read, Err(Error::NotHere(slot)) if slot.0 >= 4),
        "{read:?}"
    );
    let write = service
        .administer(&server_admin(), create(&theirs, vec![url("x:")]))
        .await;
    assert!(matches!(write, Err(Error::NotHere(_))), "{write:?}");
}

#[tokio::test]
async fn not_here_everywhere_is_unavailable_after_a_bounded_time_never_not_found() {
    let world = world(|call| {
        Ok(Err(Failure::NotHere(slot_of(
            call.handle().unwrap().key(),
            SLOTS,
        ))))
    })
    .await;
    let theirs = handle_in(2, "10.1000");
    let started = std::time::Instant::now();
    let read = world
        .router
        .resolve(&theirs, &ValueSelection::all(), Freshness::Local)
        .await;
    let took = started.elapsed();
    assert!(matches!(read, Err(Error::Unavailable(_))), "{read:?}");
    assert_eq!(read.unwrap_err().response_code().to_u32(), 3);
    assert!(
        took <= REROUTE_PATIENCE + Duration::from_millis(500),
        "{took:?}"
    );
    let tries = sent(&world).len();
    assert!((3..=20).contains(&tries), "{tries} tries");
}

#[tokio::test]
async fn an_owner_set_that_cannot_be_reached_is_unavailable_at_once() {
    let world = world(|_| Err(())).await;
    let theirs = handle_in(2, "10.1000");
    let started = std::time::Instant::now();
    let read = world
        .router
        .resolve(&theirs, &ValueSelection::all(), Freshness::Local)
        .await;
    assert!(matches!(read, Err(Error::Unavailable(_))), "{read:?}");
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn authorisation_reads_the_prefix_handle_from_its_owner() {
    // The prefix handle 0.NA/<prefix> lives in set 2's slots; it lets 10.X/editor
    // create handles.
    let prefix = (0..)
        .map(|n| format!("10.{n}"))
        .find(|p| slot_of(&format!("0.NA/{p}"), SLOTS).0 >= 4)
        .unwrap();
    let world = world(|call| match call {
        ForwardCall::Values { handle } if handle.as_str().starts_with("0.NA/") => {
            let editor = format!("{}/editor", &handle.as_str()[5..]);
            let admin = AdminRecord {
                permissions: AdminPermissions::ADD_HANDLE,
                admin_handle: editor,
                admin_index: 300,
                legacy_padding: false,
            };
            let value = HandleValue {
                permissions: Permissions::ADMIN_ONLY,
                ..HandleValue::new(100, "HS_ADMIN", admin.encode())
            };
            Ok(Ok(Answer::Values(Some(vec![value]))))
        }
        ForwardCall::Values { .. } => Ok(Ok(Answer::Values(None))),
        _ => Err(()),
    })
    .await;
    let editor = Caller::Administrator {
        identity: Identity {
            handle: format!("{prefix}/editor"),
            index: 300,
        },
    };
    let mine = handle_in(1, &prefix);
    let created = world
        .router
        .administer(&editor, create(&mine, vec![url("x:")]))
        .await;
    assert!(created.is_ok(), "{created:?}");
    assert!(
        sent(&world)
            .iter()
            .any(|call| matches!(call, ForwardCall::Values { handle } if handle.as_str() == format!("0.NA/{prefix}")))
    );
    let stranger = Caller::Administrator {
        identity: Identity {
            handle: format!("{prefix}/stranger"),
            index: 300,
        },
    };
    // Not an administrator of the prefix: refused on the prefix handle's values.
    let operation = create(&mine, vec![url("x:")]);
    let refused = world.router.administer(&stranger, operation).await;
    assert!(
        matches!(refused, Err(Error::NotPermitted(_))),
        "{refused:?}"
    );
}

#[tokio::test]
async fn listing_merges_every_set_in_folded_key_order_with_paging() {
    let world = world(|call| match call {
        ForwardCall::ListHandles { after, limit, .. } => {
            let all = ["10.1000/b", "10.1000/D", "10.1000/f"];
            let page = all
                .iter()
                .filter(|h| {
                    after
                        .as_ref()
                        .is_none_or(|a| crate::names::fold_key(h).as_str() > a.key())
                })
                .take(usize::try_from(*limit).unwrap())
                .map(|h| (*h).to_owned())
                .collect();
            Ok(Ok(Answer::Handles(page)))
        }
        ForwardCall::CountHandles { .. } => Ok(Ok(Answer::Count(3))),
        _ => Err(()),
    })
    .await;
    let admin = server_admin();
    let mine: Vec<Handle> = ["a", "C", "e", "g"]
        .iter()
        .map(|n| Handle::parse(&format!("10.1000/{n}")).unwrap())
        .filter(|h| slot_of(h.key(), SLOTS).0 < 4)
        .collect();
    for handle in &mine {
        world
            .router
            .administer(&admin, create(handle, vec![url("x:")]))
            .await
            .unwrap();
    }
    let mut listed = Vec::new();
    let mut after: Option<Handle> = None;
    loop {
        let page = world
            .router
            .list_handles(&admin, "10.1000", after.as_ref(), 2)
            .await
            .unwrap();
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        after = Some(Handle::parse(last).unwrap());
        listed.extend(page);
    }
    let mut expected: Vec<String> = mine.iter().map(|h| h.as_str().to_owned()).collect();
    expected.extend(["10.1000/b", "10.1000/D", "10.1000/f"].map(String::from));
    expected.sort_by_key(|h| crate::names::fold_key(h));
    assert_eq!(listed, expected);
    let count = world.router.count_handles(&admin, "10.1000").await.unwrap();
    assert_eq!(count, u64::try_from(mine.len()).unwrap() + 3);
}

#[tokio::test]
async fn searching_merges_every_set_in_index_order_with_paging() {
    let world = world(|call| match call {
        ForwardCall::SearchHandles { after, limit, .. } => {
            let theirs = [
                ("https://b/", "10.1000/theirs-b"),
                ("https://d/", "10.1000/theirs-d"),
            ];
            let found = theirs
                .iter()
                .map(|(data, handle)| Found {
                    position: SearchPosition {
                        data: data.as_bytes().to_vec(),
                        key: crate::names::fold_key(handle),
                    },
                    handle: (*handle).to_owned(),
                })
                .filter(|found| after.as_ref().is_none_or(|a| found.position > *a))
                .take(usize::try_from(*limit).unwrap())
                .collect();
            Ok(Ok(Answer::Found(found)))
        }
        ForwardCall::Values { .. } => Ok(Ok(Answer::Values(None))),
        _ => Err(()),
    })
    .await;
    let admin = server_admin();
    let ours: Vec<Handle> = (0..)
        .map(|n| Handle::parse(&format!("10.1000/ours-{n}")).unwrap())
        .filter(|h| slot_of(h.key(), SLOTS).0 < 4)
        .take(3)
        .collect();
    for (handle, data) in ours.iter().zip(["https://a/", "https://c/", "https://e/"]) {
        world
            .router
            .administer(&admin, create(handle, vec![url(data)]))
            .await
            .unwrap();
    }
    let query = SearchQuery::new(None, [("URL", "https://*")]).unwrap();
    let mut found = Vec::new();
    let mut after: Option<SearchPosition> = None;
    loop {
        let page = world
            .router
            .search_handles(&admin, &query, after.as_ref(), 2)
            .await
            .unwrap();
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        after = Some(last.position.clone());
        found.extend(page.into_iter().map(|hit| hit.handle));
    }
    let expected = [
        ours[0].as_str(),
        "10.1000/theirs-b",
        ours[1].as_str(),
        "10.1000/theirs-d",
        ours[2].as_str(),
    ];
    assert_eq!(found, expected);
}

#[test]
fn pages_merge_once_each_in_folded_order_and_prefixes_unite() {
    let pages = vec![
        vec!["10.1/a".to_owned(), "10.1/C".to_owned()],
        vec![
            "10.1/B".to_owned(),
            "10.1/c".to_owned(),
            "10.1/d".to_owned(),
        ],
    ];
    assert_eq!(merge_pages(pages, 3), ["10.1/a", "10.1/B", "10.1/C"]);
    let record = |display: &str, handle_count, homed| PrefixRecord {
        display: display.into(),
        handle_count,
        homed,
    };
    let lists = vec![
        vec![record("10.A", 2, false), record("10.b", 1, false)],
        vec![record("10.a", 3, true)],
    ];
    assert_eq!(
        union_prefixes(lists),
        [record("10.A", 5, true), record("10.b", 1, false)]
    );
}
