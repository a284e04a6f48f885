//! Named documents: a small replicated state kept whole under one name, such as the
//! cluster map of the metadata group. The bytes are opaque to the store; they commit
//! in the caller's [`WriteBatch`] like every other write.

use redb::ReadableTable;

use super::batch::WriteBatch;
use super::error::StorageError;
use super::read::ReadSnapshot;
use super::tables::DOCUMENTS;

impl WriteBatch {
    /// The document `name` as this batch sees it (its own writes included).
    pub fn document(&self, name: &str) -> Result<Option<Vec<u8>>, StorageError> {
        let table = self.txn().open_table(DOCUMENTS)?;
        let found = table.get(name.as_bytes())?;
        Ok(found.map(|bytes| bytes.value().to_vec()))
    }

    /// Replaces the document `name` with `bytes`.
    pub fn put_document(&self, name: &str, bytes: &[u8]) -> Result<(), StorageError> {
        self.changes_everything();
        self.txn()
            .open_table(DOCUMENTS)?
            .insert(name.as_bytes(), bytes)?;
        Ok(())
    }
}

impl ReadSnapshot {
    /// The document `name`, if one was written.
    pub fn document(&self, name: &str) -> Result<Option<Vec<u8>>, StorageError> {
        let table = self.txn().open_table(DOCUMENTS)?;
        let found = table.get(name.as_bytes())?;
        Ok(found.map(|bytes| bytes.value().to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::Store;

    #[test]
    fn a_document_is_replaced_whole_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.redb")).unwrap();
        assert_eq!(store.read().unwrap().document("map").unwrap(), None);
        let batch = store.write().unwrap();
        batch.put_document("map", b"one").unwrap();
        batch.put_document("map", b"two").unwrap();
        assert_eq!(batch.document("map").unwrap(), Some(b"two".to_vec()));
        batch.commit().unwrap();
        let read = store.read().unwrap();
        assert_eq!(read.document("map").unwrap(), Some(b"two".to_vec()));
        assert_eq!(read.document("other").unwrap(), None);
        let documents = read.image().into_iter();
        let documents = documents.filter(|r| matches!(r, super::super::ImageRecord::Document(..)));
        assert_eq!(documents.count(), 1);
    }
}
