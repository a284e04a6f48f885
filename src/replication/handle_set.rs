//! The state machine of a replica set: handle changes in the log, applied to the
//! handle store.
//!
//! Owns [`HandleCommand`], the set's log command, and its application to a
//! write batch ([`OpenBatch`]). A command holds everything it needs (its values carry their
//! timestamps; nothing here reads a clock), so applying the same commands in the same
//! order gives the same store and the same results on every replica. Refusals are
//! results, not failures.
//!
//! The command is a log format, read back for as long as a log or a node's disk holds
//! it: version 1 is the first seven variants below, in this order and with these
//! fields, as the first hdl wrote them; their encoding is pinned by a test. Version 2
//! appended the slot commands, version 3 [`HandleCommand::Guarded`], version 4
//! [`HandleCommand::PutHandles`] (bulk import). A later change to a command is a new
//! variant appended after them, never an edit.
//!
//! Once the store is sliced into a ring's slots, a change to a handle whose slot the
//! set does not take writes for (another set owns it, or it is changing hands) is
//! refused with [`Refusal::NotHere`]: the router finds the slot's owner and asks it.
//!
//! The service builds commands, in one place, from operations it has validated and
//! authorised; nothing else does.

use serde::{Deserialize, Serialize};

use super::guard::Basis;
use super::machine::Machine;
use crate::names::Handle;
use crate::storage::{
    Applied, ExistingHandle, ExistingValue, HandlePut, ImportTally, OpenBatch, Refusal, Sameness,
    Slice, Slot, SlotState, StorageError, slot_of,
};
use crate::values::{HandleValue, ValueIndex};

/// The machine of a replica set's group.
#[derive(Debug)]
pub enum HandleSet {}

/// What applying a [`HandleCommand`] did: a change, or a deterministic refusal.
pub type HandleResult = Result<Applied, Refusal>;

/// One change to a replica set's handles, as its log carries it (version 1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HandleCommand {
    /// Create a handle with these values.
    Create {
        /// The handle, as written by the client.
        handle: Handle,
        /// Its values, timestamps already assigned.
        values: Vec<HandleValue>,
        /// Whether an existing handle is replaced or refused.
        existing: ExistingHandle,
    },
    /// Delete a handle and its values.
    Delete {
        /// The handle.
        handle: Handle,
    },
    /// Add values with new indexes.
    AddValues {
        /// The handle.
        handle: Handle,
        /// The values to add.
        values: Vec<HandleValue>,
        /// Whether a value whose index is taken is refused or replaced (the
        /// OverwriteWhenExists flag).
        existing: ExistingValue,
    },
    /// Replace values with the same indexes.
    ModifyValues {
        /// The handle.
        handle: Handle,
        /// The new values.
        values: Vec<HandleValue>,
    },
    /// Remove values by index.
    RemoveValues {
        /// The handle.
        handle: Handle,
        /// The indexes to remove.
        indexes: Vec<ValueIndex>,
    },
    /// Mark a naming authority as served here.
    HomePrefix {
        /// The prefix, as written.
        prefix: String,
    },
    /// Stop serving a naming authority.
    UnhomePrefix {
        /// The prefix.
        prefix: String,
    },
    /// Slice the store into a ring of `slot_count` slots, of which the set owns `owned`
    /// (version 2).
    MakeSlice {
        /// The ring's slot count, a power of two.
        slot_count: u32,
        /// The slots the set owns.
        owned: Vec<Slot>,
    },
    /// Start exporting an owned slot: journal its changes (version 2).
    BeginExport {
        /// The slot.
        slot: Slot,
    },
    /// Hold writes to an exporting slot while it changes hands (version 2).
    FreezeSlot {
        /// The slot.
        slot: Slot,
    },
    /// Take an exporting or frozen slot back: writes again, journal forgotten (a move
    /// rolled back; version 2).
    ThawSlot {
        /// The slot.
        slot: Slot,
    },
    /// Give a slot up: delete its handles and journal, hold it no longer (version 2).
    DropSlot {
        /// The slot.
        slot: Slot,
    },
    /// Start importing a slot this set does not hold: drop anything a cut-short import
    /// left of it (version 2).
    BeginImport {
        /// The slot.
        slot: Slot,
    },
    /// Records of an importing slot, copied from the set it comes from: `records`
    /// replace what is there, `removed` are deleted where present (version 2).
    PutRecords {
        /// The slot.
        slot: Slot,
        /// Whole handles, as their owner holds them.
        records: Vec<(Handle, Vec<HandleValue>)>,
        /// Handles deleted at the source.
        removed: Vec<Handle>,
    },
    /// Own an imported slot: answer its reads, take its writes (version 2).
    AcceptSlot {
        /// The slot.
        slot: Slot,
    },
    /// `command`, applied only if every record of `basis` still reads as its
    /// authorisation read it; [`Refusal::AuthorityChanged`] otherwise (version 3).
    Guarded {
        /// What the authorisation read.
        basis: Vec<Basis>,
        /// The write.
        command: Box<HandleCommand>,
    },
    /// Whole handles, written as given, timestamps kept (a bulk import): each created,
    /// left unchanged when it holds these very values, and replaced or left as it is
    /// when it holds others, as its [`crate::storage::PutMode`] says. Refused whole with
    /// [`Refusal::NotHere`] when the set does not take writes for one of their slots
    /// (version 4).
    PutHandles {
        /// The handles.
        puts: Vec<HandlePut>,
        /// When an existing handle's values count as the same as a put's.
        sameness: Sameness,
    },
}

/// Refuses a change to `handle` when the store is sliced and the set does not take
/// writes for its slot now; the slot to journal the change in when it is exporting.
fn check_writable(
    batch: &mut OpenBatch<'_>,
    handle: &Handle,
) -> Result<Option<Slot>, StorageError> {
    let Slice::Ring(count) = batch.slice()? else {
        return Ok(None);
    };
    let slot = slot_of(handle.key(), count);
    match batch.slot_state(slot)? {
        Some(SlotState::Exporting) => Ok(Some(slot)),
        Some(state) if state.takes_writes() => Ok(None),
        _ => Err(Refusal::NotHere(slot).into()),
    }
}

impl HandleCommand {
    /// The handle the command changes, if it changes one.
    fn handle(&self) -> Option<&Handle> {
        match self {
            HandleCommand::Create { handle, .. }
            | HandleCommand::Delete { handle }
            | HandleCommand::AddValues { handle, .. }
            | HandleCommand::ModifyValues { handle, .. }
            | HandleCommand::RemoveValues { handle, .. } => Some(handle),
            HandleCommand::HomePrefix { .. }
            | HandleCommand::UnhomePrefix { .. }
            | HandleCommand::MakeSlice { .. }
            | HandleCommand::BeginExport { .. }
            | HandleCommand::FreezeSlot { .. }
            | HandleCommand::ThawSlot { .. }
            | HandleCommand::DropSlot { .. }
            | HandleCommand::BeginImport { .. }
            | HandleCommand::PutRecords { .. }
            | HandleCommand::AcceptSlot { .. }
            | HandleCommand::Guarded { .. }
            | HandleCommand::PutHandles { .. } => None,
        }
    }
}

impl Machine for HandleSet {
    type Command = HandleCommand;
    type Output = HandleResult;

    const NAME: &'static str = "handles";

    fn apply(
        batch: &mut OpenBatch<'_>,
        command: &HandleCommand,
    ) -> Result<HandleResult, StorageError> {
        match carry_out(batch, command) {
            Ok(applied) => Ok(Ok(applied)),
            Err(StorageError::Refused(refusal)) => Ok(Err(refusal)),
            Err(failure) => Err(failure),
        }
    }

    /// A write refused because what its permission check read changed, or because its
    /// slot is not taken here now, changed nothing and may go through when proposed
    /// again; every other result is the request's answer.
    fn settles(output: &HandleResult) -> bool {
        !matches!(output, Err(Refusal::AuthorityChanged | Refusal::NotHere(_)))
    }
}

/// Carries `command` out on `batch`: a guarded one once its basis holds, a change to
/// a handle once its slot takes writes (journalled while the slot is exporting).
fn carry_out(batch: &mut OpenBatch<'_>, command: &HandleCommand) -> Result<Applied, StorageError> {
    if let HandleCommand::Guarded { basis, command } = command {
        check_basis(batch, basis)?;
        return carry_out(batch, command);
    }
    let Some(handle) = command.handle().cloned() else {
        return change(batch, command);
    };
    let journal = check_writable(batch, &handle)?;
    let applied = change(batch, command)?;
    if let Some(slot) = journal {
        batch.batch().journal_change(slot, handle.key())?;
    }
    Ok(applied)
}

/// Refuses with [`Refusal::AuthorityChanged`] unless every record of `basis` reads
/// now as the authorisation read it.
fn check_basis(batch: &mut OpenBatch<'_>, basis: &[Basis]) -> Result<(), StorageError> {
    for read in basis {
        if !read.holds_for(batch.values(&read.handle)?.as_deref()) {
            return Err(Refusal::AuthorityChanged.into());
        }
    }
    Ok(())
}

/// Carries `command` out on `batch`. The command stays the log's: what the store
/// keeps of it (a handle's values) is copied, a bulk put's handles are written from it.
fn change(batch: &mut OpenBatch<'_>, command: &HandleCommand) -> Result<Applied, StorageError> {
    match command {
        HandleCommand::Create {
            handle,
            values,
            existing,
        } => batch
            .create(handle, values.clone(), *existing)
            .map(Applied::from),
        HandleCommand::Delete { handle } => batch.delete(handle).map(|()| Applied::Done),
        HandleCommand::AddValues {
            handle,
            values,
            existing,
        } => batch
            .add_values(handle, values.clone(), *existing)
            .map(|()| Applied::Done),
        HandleCommand::ModifyValues { handle, values } => batch
            .modify_values(handle, values.clone())
            .map(|()| Applied::Done),
        HandleCommand::RemoveValues { handle, indexes } => {
            batch.remove_values(handle, indexes).map(|()| Applied::Done)
        }
        HandleCommand::HomePrefix { prefix } => batch.home_prefix(prefix).map(|()| Applied::Done),
        HandleCommand::UnhomePrefix { prefix } => {
            batch.unhome_prefix(prefix).map(|()| Applied::Done)
        }
        HandleCommand::MakeSlice { slot_count, owned } => batch
            .batch()
            .make_slice(*slot_count, owned)
            .map(|()| Applied::Done),
        HandleCommand::BeginExport { slot } => {
            let from = [SlotState::Owned, SlotState::Exporting, SlotState::Frozen];
            let to = |state| match state {
                SlotState::Owned => SlotState::Exporting,
                other => other,
            };
            move_slot(batch, *slot, &from, to)
        }
        HandleCommand::FreezeSlot { slot } => {
            let from = [SlotState::Exporting, SlotState::Frozen];
            move_slot(batch, *slot, &from, |_| SlotState::Frozen)
        }
        HandleCommand::ThawSlot { slot } => {
            let from = [SlotState::Owned, SlotState::Exporting, SlotState::Frozen];
            move_slot(batch, *slot, &from, |_| SlotState::Owned)?;
            batch.batch().clear_journal(*slot).map(|()| Applied::Done)
        }
        HandleCommand::DropSlot { slot } => drop_slot(batch, *slot),
        HandleCommand::BeginImport { slot } => begin_import(batch, *slot),
        HandleCommand::PutRecords {
            slot,
            records,
            removed,
        } => put_records(batch, *slot, records, removed),
        HandleCommand::AcceptSlot { slot } => {
            let from = [SlotState::Importing, SlotState::Owned];
            move_slot(batch, *slot, &from, |_| SlotState::Owned)
        }
        guarded @ HandleCommand::Guarded { .. } => carry_out(batch, guarded),
        HandleCommand::PutHandles { puts, sameness } => put_handles(batch, puts, *sameness),
    }
}

/// Writes whole handles, once the set takes writes for every one's slot (each
/// written one journalled when its slot is exporting); what they came to.
fn put_handles(
    batch: &mut OpenBatch<'_>,
    puts: &[HandlePut],
    sameness: Sameness,
) -> Result<Applied, StorageError> {
    let journals = journal_slots(batch, puts)?;
    let outcomes = batch.batch().put_handles(puts, sameness)?;
    let mut tally = ImportTally::default();
    for ((put, journal), outcome) in puts.iter().zip(journals).zip(outcomes) {
        tally.count(outcome);
        if let (Some(slot), true) = (journal, outcome.wrote()) {
            batch.batch().journal_change(slot, put.handle.key())?;
        }
    }
    Ok(Applied::Imported(tally))
}

/// For each put, the slot to journal its change in (see [`check_writable`]), the
/// slots' states read once each; [`Refusal::NotHere`] when one does not take writes.
fn journal_slots(
    batch: &mut OpenBatch<'_>,
    puts: &[HandlePut],
) -> Result<Vec<Option<Slot>>, StorageError> {
    let Slice::Ring(count) = batch.slice()? else {
        return Ok(vec![None; puts.len()]);
    };
    let mut states = std::collections::HashMap::new();
    let mut journals = Vec::with_capacity(puts.len());
    for put in puts {
        let slot = slot_of(put.handle.key(), count);
        let state = match states.get(&slot) {
            Some(state) => *state,
            None => *states.entry(slot).or_insert(batch.slot_state(slot)?),
        };
        journals.push(match state {
            Some(SlotState::Exporting) => Some(slot),
            Some(state) if state.takes_writes() => None,
            _ => return Err(Refusal::NotHere(slot).into()),
        });
    }
    Ok(journals)
}

/// Moves `slot` from one of the states `from` to `to(state)`; a slot in another state
/// (or not held) is [`Refusal::NotHere`]. Repeating a move changes nothing.
fn move_slot(
    batch: &mut OpenBatch<'_>,
    slot: Slot,
    from: &[SlotState],
    to: impl FnOnce(SlotState) -> SlotState,
) -> Result<Applied, StorageError> {
    let Slice::Ring(_) = batch.slice()? else {
        return Err(Refusal::NotHere(slot).into());
    };
    match batch.slot_state(slot)? {
        Some(state) if from.contains(&state) => {
            batch.batch().set_slot_state(slot, Some(to(state)))?;
            Ok(Applied::Done)
        }
        _ => Err(Refusal::NotHere(slot).into()),
    }
}

/// The slot count of a sliced store; a whole store holds no slot.
fn slot_count(batch: &mut OpenBatch<'_>, slot: Slot) -> Result<u32, StorageError> {
    match batch.slice()? {
        Slice::Ring(count) => Ok(count),
        Slice::Whole => Err(Refusal::NotHere(slot).into()),
    }
}

/// Gives `slot` up (it must be frozen, or already given up): its handles and journal go.
fn drop_slot(batch: &mut OpenBatch<'_>, slot: Slot) -> Result<Applied, StorageError> {
    slot_count(batch, slot)?;
    match batch.slot_state(slot)? {
        Some(SlotState::Frozen) => {}
        None => return Ok(Applied::Done),
        Some(_) => return Err(Refusal::NotHere(slot).into()),
    }
    let batch = batch.batch();
    batch.delete_slot(slot)?;
    batch.clear_journal(slot)?;
    batch.set_slot_state(slot, None)?;
    Ok(Applied::Done)
}

/// Starts importing `slot` (not held, or importing already: a fresh start either way,
/// dropping what a cut-short import left).
fn begin_import(batch: &mut OpenBatch<'_>, slot: Slot) -> Result<Applied, StorageError> {
    slot_count(batch, slot)?;
    match batch.slot_state(slot)? {
        None | Some(SlotState::Importing) => {}
        Some(_) => return Err(Refusal::NotHere(slot).into()),
    }
    let batch = batch.batch();
    batch.delete_slot(slot)?;
    batch.set_slot_state(slot, Some(SlotState::Importing))?;
    Ok(Applied::Done)
}

/// Writes copied records of an importing slot; a record of another slot is refused
/// whole (the batch is left as it was).
fn put_records(
    batch: &mut OpenBatch<'_>,
    slot: Slot,
    records: &[(Handle, Vec<HandleValue>)],
    removed: &[Handle],
) -> Result<Applied, StorageError> {
    let count = slot_count(batch, slot)?;
    if batch.slot_state(slot)? != Some(SlotState::Importing) {
        return Err(Refusal::NotHere(slot).into());
    }
    let named = records.iter().map(|(handle, _)| handle).chain(removed);
    if named
        .into_iter()
        .any(|handle| slot_of(handle.key(), count) != slot)
    {
        return Err(Refusal::NotHere(slot).into());
    }
    for handle in removed {
        match batch.delete(handle) {
            Ok(()) | Err(StorageError::Refused(Refusal::HandleNotFound)) => {}
            Err(error) => return Err(error),
        }
    }
    for (handle, values) in records {
        batch.create(handle, values.clone(), ExistingHandle::Overwrite)?;
    }
    Ok(Applied::Done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Store;
    use crate::values::ValueSelection;

    fn url(index: u32, target: &str) -> HandleValue {
        HandleValue::new(index, "URL", target)
    }

    #[test]
    fn commands_apply_and_refusals_are_results() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("handles.redb")).unwrap();
        let h = Handle::parse("10.1000/cmd").unwrap();
        let batch = store.write().unwrap();
        let create = HandleCommand::Create {
            handle: h.clone(),
            values: vec![url(1, "https://a/")],
            existing: ExistingHandle::Refuse,
        };
        let apply = |batch: &mut OpenBatch<'_>, command: HandleCommand| {
            HandleSet::apply(batch, &command).unwrap()
        };
        assert_eq!(
            apply(&mut batch.open(), create.clone()),
            Ok(Applied::Created)
        );
        assert_eq!(apply(&mut batch.open(), create), Err(Refusal::HandleExists));
        let remove = HandleCommand::RemoveValues {
            handle: h.clone(),
            indexes: vec![ValueIndex(2)],
        };
        assert_eq!(
            apply(&mut batch.open(), remove),
            Err(Refusal::ValueNotFound(ValueIndex(2)))
        );
        let add = HandleCommand::AddValues {
            existing: ExistingValue::Refuse,
            handle: h.clone(),
            values: vec![url(2, "https://b/")],
        };
        assert_eq!(apply(&mut batch.open(), add), Ok(Applied::Done));
        batch.commit().unwrap();
        let read = store.read().unwrap();
        let record = read.get(&h, &ValueSelection::all()).unwrap().unwrap();
        assert_eq!(record.values.len(), 2);
    }

    /// Version 1 of the log command, byte for byte as the first hdl wrote it (these
    /// vectors were taken from that build's `storage::Command`): entries written by
    /// earlier builds must still decode to the same commands.
    #[test]
    fn version_1_commands_keep_their_encoding() {
        let handle = Handle::parse("10.1/a").unwrap();
        let value = HandleValue {
            timestamp: 7,
            ..url(1, "u")
        };
        let cases: Vec<(HandleCommand, &str)> = vec![
            (
                HandleCommand::Create {
                    handle: handle.clone(),
                    values: vec![value.clone()],
                    existing: ExistingHandle::Overwrite,
                },
                "000631302e312f6101010355524c01750080a305070e0001",
            ),
            (
                HandleCommand::Delete {
                    handle: handle.clone(),
                },
                "010631302e312f61",
            ),
            (
                HandleCommand::AddValues {
                    handle: handle.clone(),
                    values: vec![value.clone()],
                    existing: ExistingValue::Replace,
                },
                "020631302e312f6101010355524c01750080a305070e0001",
            ),
            (
                HandleCommand::ModifyValues {
                    handle: handle.clone(),
                    values: vec![value.clone()],
                },
                "030631302e312f6101010355524c01750080a305070e00",
            ),
            (
                HandleCommand::RemoveValues {
                    handle: handle.clone(),
                    indexes: vec![ValueIndex(3)],
                },
                "040631302e312f610103",
            ),
            (
                HandleCommand::HomePrefix {
                    prefix: "10.1".into(),
                },
                "050431302e31",
            ),
            (
                HandleCommand::UnhomePrefix {
                    prefix: "10.1".into(),
                },
                "060431302e31",
            ),
        ];
        for (command, expected) in cases {
            let bytes = postcard::to_stdvec(&command).unwrap();
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(hex, expected, "{command:?}");
            let back: HandleCommand = postcard::from_bytes(&bytes).unwrap();
            assert_eq!(back, command);
        }
    }
}

#[cfg(test)]
#[path = "handle_set_slots_tests.rs"]
mod slots_tests;
