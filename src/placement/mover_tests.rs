//! The mover against two in-process stores standing in for two replica sets, with
//! clients writing to the moving slots while they move.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::*;
use crate::replication::admin::Member;
use crate::replication::{HandleSet, Machine, Node, alone_settings, slot_of, test_host};
use crate::storage::{ExistingHandle, Store};
use crate::values::ValueSelection;

const SLOTS: u32 = 8;

/// Two sets, each a store written directly through the set's machine; the first
/// `page` call of each slot also writes to the source, as a client would mid-copy.
struct TwoSets {
    stores: BTreeMap<SetId, Store>,
    writes_during_copy: Mutex<Vec<(SetId, HandleCommand)>>,
}

impl TwoSets {
    fn write(&self, set: SetId, command: HandleCommand) -> crate::storage::Applied {
        let batch = self.stores[&set].write().unwrap();
        let applied = HandleSet::apply(&mut batch.open(), &command)
            .unwrap()
            .unwrap();
        batch.commit().unwrap();
        applied
    }
}

#[async_trait]
impl SetAccess for TwoSets {
    async fn apply(&self, set: SetId, command: SlotCommand) -> Result<(), MoveError> {
        let batch = self.stores[&set].write().unwrap();
        let result = HandleSet::apply(&mut batch.open(), &command.into()).unwrap();
        match result {
            Ok(_) => {
                batch.commit().unwrap();
                Ok(())
            }
            Err(refusal) => Err(MoveError::Set {
                set: set.0,
                reason: refusal.to_string(),
            }),
        }
    }

    async fn page(
        &self,
        set: SetId,
        slot: Slot,
        after: Option<String>,
        limit: usize,
    ) -> Result<Vec<StoredRecord>, MoveError> {
        let pending: Vec<_> = std::mem::take(&mut *self.writes_during_copy.lock().unwrap());
        for (at, command) in pending {
            self.write(at, command);
        }
        let read = self.stores[&set].read().unwrap();
        Ok(read.slot_page(slot, after.as_deref(), limit).unwrap())
    }

    async fn journal(
        &self,
        set: SetId,
        slot: Slot,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<JournalRecord>, MoveError> {
        let read = self.stores[&set].read().unwrap();
        Ok(read.journal_records(slot, after, limit).unwrap())
    }
}

fn create(name: &str, target: &str) -> HandleCommand {
    HandleCommand::Create {
        handle: Handle::parse(name).unwrap(),
        values: vec![HandleValue::new(1, "URL", target)],
        existing: ExistingHandle::Overwrite,
    }
}

fn slot_of_name(name: &str) -> Slot {
    slot_of(&name.to_ascii_uppercase(), SLOTS)
}

fn targets(store: &Store) -> BTreeMap<String, String> {
    let read = store.read().unwrap();
    let handles = read.list_handles("10.5", None, 100_000).unwrap();
    handles
        .into_iter()
        .map(|name| {
            let handle = Handle::parse(&name).unwrap();
            let record = read.get(&handle, &ValueSelection::all()).unwrap().unwrap();
            let target = String::from_utf8_lossy(&record.values[0].data).into_owned();
            (name.to_ascii_uppercase(), target)
        })
        .collect()
}

#[tokio::test]
async fn moves_carry_every_handle_and_every_write_made_while_copying() {
    let dir = tempfile::tempdir().unwrap();
    let host = test_host("127.0.0.1:2641".parse().unwrap()).await;
    let map_dir = dir.path().join("map");
    std::fs::create_dir_all(&map_dir).unwrap();
    let map = MapGroup::start(&alone_settings(), &map_dir, host)
        .await
        .unwrap();
    let (one, two) = (SetId(1), SetId(2));
    for set in [one, two] {
        let member = Member {
            id: u64::from(set.0),
            node: Node::default(),
            voter: true,
        };
        let record = MapCommand::RecordSet {
            set,
            members: vec![member],
        };
        map.change(record).await.unwrap().unwrap();
    }
    let ring = MapCommand::MakeRing {
        slot_count: SLOTS,
        sets: vec![one],
    };
    map.change(ring).await.unwrap().unwrap();

    let stores = [one, two]
        .into_iter()
        .map(|set| {
            let path = dir.path().join(format!("set-{}.redb", set.0));
            (set, Store::open(&path).unwrap())
        })
        .collect();
    let sets = TwoSets {
        stores,
        writes_during_copy: Mutex::new(Vec::new()),
    };
    let all: Vec<Slot> = (0..SLOTS).map(Slot).collect();
    let slice = |owned| HandleCommand::MakeSlice {
        slot_count: SLOTS,
        owned,
    };
    sets.write(one, slice(all));
    sets.write(two, slice(Vec::new()));
    let names: Vec<String> = (0..1_200).map(|n| format!("10.5/{n}")).collect();
    for name in &names {
        sets.write(one, create(name, "first"));
    }
    // Clients change handles while the slots are being copied: a new handle, a
    // changed one, a deleted one.
    let moving = |name: &&String| slot_of_name(name).0 >= SLOTS / 2;
    let changed: Vec<&String> = names.iter().filter(moving).take(3).collect();
    let pending = vec![
        (one, create("10.5/new-during-copy", "new")),
        (one, create(changed[0], "second")),
        (
            one,
            HandleCommand::Delete {
                handle: Handle::parse(changed[1]).unwrap(),
            },
        ),
    ];
    *sets.writes_during_copy.lock().unwrap() = pending;

    let moves = crate::placement::rebalance(&map.map().unwrap(), &[]);
    assert_eq!(moves.len(), SLOTS as usize / 2);
    map.change(MapCommand::PlanMoves { moves })
        .await
        .unwrap()
        .unwrap();
    let mover = Mover::new(map.clone(), sets);
    mover.step_all().await.unwrap();

    let after = map.map().unwrap();
    assert!(after.migrations.is_empty());
    assert_eq!(after.slots_per_set()[&two], SLOTS / 2);
    assert_eq!(after.moved.slots, u64::from(SLOTS / 2));
    let (a, b) = (
        targets(&mover.sets.stores[&one]),
        targets(&mover.sets.stores[&two]),
    );
    let mut expected: BTreeMap<String, String> = names
        .iter()
        .map(|name| (name.to_ascii_uppercase(), "first".to_owned()))
        .collect();
    expected.insert(changed[0].to_ascii_uppercase(), "second".into());
    expected.remove(&changed[1].to_ascii_uppercase());
    expected.insert("10.5/NEW-DURING-COPY".into(), "new".into());
    for (name, target) in &expected {
        let owner = after.owner(slot_of(name, SLOTS)).unwrap();
        let (here, there) = if owner == one { (&a, &b) } else { (&b, &a) };
        assert_eq!(here.get(name), Some(target), "{name} at its owner");
        assert_eq!(there.get(name), None, "{name} on one set only");
    }
    assert_eq!(a.len() + b.len(), expected.len());
    map.group().shutdown().await.unwrap();
}
