//! The slot commands of the handle set's machine: a slot's way from one set to
//! another, and what each step lets in.

use super::*;
use crate::storage::{ReadSnapshot, Store};
use crate::values::ValueSelection;

const SLOTS: u32 = 4;

fn open(dir: &tempfile::TempDir, name: &str) -> Store {
    Store::open(&dir.path().join(name)).unwrap()
}

fn apply(store: &Store, command: HandleCommand) -> HandleResult {
    let batch = store.write().unwrap();
    let result = HandleSet::apply(&mut batch.open(), &command).unwrap();
    batch.commit().unwrap();
    result
}

fn create(name: &str, target: &str) -> HandleCommand {
    HandleCommand::Create {
        handle: Handle::parse(name).unwrap(),
        values: vec![HandleValue::new(1, "URL", target)],
        existing: ExistingHandle::Overwrite,
    }
}

/// A handle name of `slot` (the first of `10.5/n` that hashes there).
fn name_in(slot: Slot) -> String {
    (0..10_000)
        .map(|n| format!("10.5/{n}"))
        .find(|name| slot_of(&name.to_ascii_uppercase(), SLOTS) == slot)
        .unwrap()
}

fn target(read: &ReadSnapshot, name: &str) -> Option<String> {
    let handle = Handle::parse(name).unwrap();
    let record = read.get(&handle, &ValueSelection::all()).unwrap()?;
    Some(String::from_utf8_lossy(&record.values[0].data).into_owned())
}

fn slice(owned: &[u32]) -> HandleCommand {
    HandleCommand::MakeSlice {
        slot_count: SLOTS,
        owned: owned.iter().copied().map(Slot).collect(),
    }
}

#[test]
fn a_sliced_set_takes_writes_only_for_the_slots_it_owns() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, "a.redb");
    let (mine, theirs) = (name_in(Slot(0)), name_in(Slot(1)));
    // Whole: everything is taken.
    assert_eq!(apply(&store, create(&theirs, "u")), Ok(Applied::Created));
    assert_eq!(apply(&store, slice(&[0])), Ok(Applied::Done));
    assert_eq!(apply(&store, create(&mine, "u")), Ok(Applied::Created));
    assert_eq!(
        apply(&store, create(&theirs, "v")),
        Err(Refusal::NotHere(Slot(1)))
    );
}

#[test]
fn an_exporting_slot_journals_changes_and_a_frozen_one_holds_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, "a.redb");
    let name = name_in(Slot(2));
    apply(&store, slice(&[0, 1, 2, 3])).unwrap();
    apply(&store, create(&name, "before")).unwrap();
    let export = HandleCommand::BeginExport { slot: Slot(2) };
    assert_eq!(apply(&store, export.clone()), Ok(Applied::Done));
    assert_eq!(
        apply(&store, export),
        Ok(Applied::Done),
        "a repeat is harmless"
    );
    apply(&store, create(&name, "during")).unwrap();
    let delete = HandleCommand::Delete {
        handle: Handle::parse(&name).unwrap(),
    };
    apply(&store, delete).unwrap();
    let journal = store
        .read()
        .unwrap()
        .journal_page(Slot(2), None, 10)
        .unwrap();
    let key = name.to_ascii_uppercase();
    assert_eq!(journal, [(0, key.clone()), (1, key)]);
    apply(&store, HandleCommand::FreezeSlot { slot: Slot(2) }).unwrap();
    assert_eq!(
        apply(&store, create(&name, "frozen")),
        Err(Refusal::NotHere(Slot(2)))
    );
    // A rolled-back move takes writes again and forgets its journal.
    apply(&store, HandleCommand::ThawSlot { slot: Slot(2) }).unwrap();
    assert_eq!(apply(&store, create(&name, "thawed")), Ok(Applied::Created));
    let read = store.read().unwrap();
    assert!(read.journal_page(Slot(2), None, 10).unwrap().is_empty());
    assert_eq!(target(&read, &name).as_deref(), Some("thawed"));
}

#[test]
fn an_imported_slot_is_written_only_by_copies_until_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, "b.redb");
    let (name, other) = (name_in(Slot(3)), name_in(Slot(0)));
    apply(&store, slice(&[0])).unwrap();
    assert_eq!(
        apply(&store, HandleCommand::BeginImport { slot: Slot(0) }),
        Err(Refusal::NotHere(Slot(0))),
        "an owned slot is not imported"
    );
    apply(&store, HandleCommand::BeginImport { slot: Slot(3) }).unwrap();
    assert_eq!(
        apply(&store, create(&name, "client")),
        Err(Refusal::NotHere(Slot(3)))
    );
    let copy = |records: Vec<&str>, removed: Vec<&str>| HandleCommand::PutRecords {
        slot: Slot(3),
        records: records
            .into_iter()
            .map(|n| {
                let values = vec![HandleValue::new(1, "URL", "copied")];
                (Handle::parse(n).unwrap(), values)
            })
            .collect(),
        removed: removed
            .into_iter()
            .map(|n| Handle::parse(n).unwrap())
            .collect(),
    };
    assert_eq!(apply(&store, copy(vec![&name], vec![])), Ok(Applied::Done));
    assert_eq!(
        apply(&store, copy(vec![&other], vec![])),
        Err(Refusal::NotHere(Slot(3))),
        "a record of another slot is refused"
    );
    apply(&store, HandleCommand::AcceptSlot { slot: Slot(3) }).unwrap();
    assert_eq!(
        target(&store.read().unwrap(), &name).as_deref(),
        Some("copied")
    );
    assert_eq!(
        apply(&store, create(&name, "client")),
        Ok(Applied::Replaced)
    );
    assert_eq!(
        apply(&store, copy(vec![], vec![&name])),
        Err(Refusal::NotHere(Slot(3))),
        "an owned slot takes no copies"
    );
}

#[test]
fn a_dropped_slot_loses_its_handles_and_journal_and_a_new_import_starts_empty() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, "a.redb");
    let (name, kept) = (name_in(Slot(1)), name_in(Slot(0)));
    apply(&store, slice(&[0, 1])).unwrap();
    apply(&store, create(&name, "u")).unwrap();
    apply(&store, create(&kept, "u")).unwrap();
    apply(&store, HandleCommand::BeginExport { slot: Slot(1) }).unwrap();
    apply(&store, create(&name, "v")).unwrap();
    assert_eq!(
        apply(&store, HandleCommand::DropSlot { slot: Slot(1) }),
        Err(Refusal::NotHere(Slot(1))),
        "only a frozen slot is dropped"
    );
    apply(&store, HandleCommand::FreezeSlot { slot: Slot(1) }).unwrap();
    apply(&store, HandleCommand::DropSlot { slot: Slot(1) }).unwrap();
    assert_eq!(
        apply(&store, HandleCommand::DropSlot { slot: Slot(1) }),
        Ok(Applied::Done),
        "a repeat is harmless"
    );
    let read = store.read().unwrap();
    assert_eq!(target(&read, &name), None);
    assert_eq!(target(&read, &kept).as_deref(), Some("u"));
    assert!(read.journal_page(Slot(1), None, 10).unwrap().is_empty());
    assert_eq!(read.slot_state(Slot(1)).unwrap(), None);
    drop(read);
    // The slot comes back later: the import starts from nothing.
    apply(&store, HandleCommand::BeginImport { slot: Slot(1) }).unwrap();
    assert_eq!(
        store.read().unwrap().slot_state(Slot(1)).unwrap(),
        Some(SlotState::Importing)
    );
}
