//! The metadata group's state machine: [`MapCommand`]s applied to the cluster map, kept
//! whole as one document of the group's store.
//!
//! The document is `u8 layout (2) ‖ postcard ClusterMap`. Layout 1, written before the
//! map had a ring, is `postcard (epoch, sets)` and is read as a map without a ring. A
//! layout this build does not know, or bytes that do not decode, stop the node (the
//! store is not what it must be).

use super::map::{ClusterMap, MapCommand, MapResult};
use crate::replication::Machine;
use crate::storage::{OpenBatch, ReadSnapshot, StorageError};

/// The name of the map's document in the metadata group's store.
const MAP_DOCUMENT: &str = "cluster_map";

/// The layout of the map document.
const MAP_LAYOUT: u8 = 2;

/// The layout written before the map had a ring: its epoch and sets only.
const MAP_LAYOUT_WITHOUT_RING: u8 = 1;

/// The machine of the metadata group.
#[derive(Debug)]
pub enum MapMachine {}

impl Machine for MapMachine {
    type Command = MapCommand;
    type Output = MapResult;

    const NAME: &'static str = "the cluster map";

    fn apply(batch: &mut OpenBatch<'_>, command: &MapCommand) -> Result<MapResult, StorageError> {
        let batch = batch.batch();
        let mut map = decode(batch.document(MAP_DOCUMENT)?)?;
        let result = map.apply(command.clone());
        if result.is_ok() {
            batch.put_document(MAP_DOCUMENT, &encode(&map)?)?;
        }
        Ok(result)
    }
}

/// The map as of `read`: empty before anything was recorded.
pub(super) fn read_map(read: &ReadSnapshot) -> Result<ClusterMap, StorageError> {
    decode(read.document(MAP_DOCUMENT)?)
}

fn encode(map: &ClusterMap) -> Result<Vec<u8>, StorageError> {
    postcard::to_extend(map, vec![MAP_LAYOUT]).map_err(|error| corrupt(error.to_string()))
}

fn decode(bytes: Option<Vec<u8>>) -> Result<ClusterMap, StorageError> {
    let Some(bytes) = bytes else {
        return Ok(ClusterMap::default());
    };
    match bytes.split_first() {
        Some((&MAP_LAYOUT, rest)) => {
            postcard::from_bytes(rest).map_err(|error| corrupt(error.to_string()))
        }
        Some((&MAP_LAYOUT_WITHOUT_RING, rest)) => {
            let (epoch, sets) =
                postcard::from_bytes(rest).map_err(|error| corrupt(error.to_string()))?;
            Ok(ClusterMap {
                epoch,
                sets,
                ..ClusterMap::default()
            })
        }
        Some((layout, _)) => Err(corrupt(format!("unknown layout {layout}"))),
        None => Err(corrupt("empty".to_owned())),
    }
}

fn corrupt(reason: String) -> StorageError {
    StorageError::CorruptDocument {
        name: MAP_DOCUMENT.to_owned(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::SetId;
    use crate::storage::Store;

    #[test]
    fn the_map_survives_its_store_and_a_bad_layout_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("map.redb")).unwrap();
        assert_eq!(
            read_map(&store.read().unwrap()).unwrap(),
            ClusterMap::default()
        );
        let batch = store.write().unwrap();
        let command = MapCommand::RecordSet {
            set: SetId(1),
            members: Vec::new(),
        };
        let changed = MapMachine::apply(&mut batch.open(), &command).unwrap();
        assert_eq!(changed.unwrap().epoch, 1);
        batch.commit().unwrap();
        let map = read_map(&store.read().unwrap()).unwrap();
        assert_eq!(map.epoch, 1);
        assert!(map.sets.contains_key(&SetId(1)));

        let batch = store.write().unwrap();
        batch.put_document(MAP_DOCUMENT, &[9, 0]).unwrap();
        let command = MapCommand::RecordSet {
            set: SetId(2),
            members: Vec::new(),
        };
        assert!(matches!(
            MapMachine::apply(&mut batch.open(), &command),
            Err(StorageError::CorruptDocument { .. })
        ));
    }
}
