//! What openraft carries as a snapshot's data: a view of the store, streamed when the
//! snapshot is sent, or the scratch file a member receives a snapshot into.
//!
//! A group keeps no snapshot on disk. Its current snapshot is its store as one read
//! transaction sees it ([`StoreImage`]): the meta (the applied log id and membership,
//! which the store records in the same transactions as the applies) and the records
//! come from that one transaction, so a snapshot sent is exactly the store at its
//! meta's log id, however the store moves on meanwhile. Making one costs a read
//! transaction and one small read; redb keeps the pages that transaction sees until
//! the view is dropped, which openraft does at once unless it is sending the snapshot.
//!
//! openraft 0.9 receives snapshot chunks by seeking and writing in the snapshot data
//! (`AsyncWrite`, `AsyncSeek`), so a received snapshot is a scratch file and the data
//! implements those on it; a view of the store is never read or written as a file,
//! only streamed ([`StoreImage::write_to`]) or installed whole from another store
//! (openraft's storage test suite does), and answers those calls with an error.
//! May depend on storage's read snapshots and on the snapshot format
//! (the `snapshot` module); touches no file but the scratch file it holds.

use std::io::{self, SeekFrom, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};

use super::error::Error;
use super::snapshot::SnapshotWriter;
use super::types::SnapshotMeta;
use crate::storage::{ImageRecord, ReadSnapshot};

/// A snapshot's data, as openraft holds it.
#[derive(Debug)]
pub enum SnapshotData {
    /// The store as one read transaction saw it: this member's current snapshot.
    Store(StoreImage),
    /// A snapshot being received from a leader, or received whole: a scratch file.
    Received(tokio::fs::File),
}

/// The store as one read transaction sees it, with the meta that transaction records.
#[derive(Debug)]
pub struct StoreImage {
    read: Arc<ReadSnapshot>,
    meta: SnapshotMeta,
}

impl StoreImage {
    /// The image of `read`, whose applied state `meta` describes.
    pub(super) fn new(read: Arc<ReadSnapshot>, meta: SnapshotMeta) -> StoreImage {
        StoreImage { read, meta }
    }

    /// What the image covers.
    pub fn meta(&self) -> &SnapshotMeta {
        &self.meta
    }

    /// Passes every record of the image to `sink`, in image order.
    pub(super) fn export(
        &self,
        sink: impl FnMut(ImageRecord) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.read.export(sink)
    }

    /// Writes the image as snapshot data (format 4, streamed) on `out`,
    /// record by record; `out` after the data. The same bytes however often it is
    /// called.
    pub fn write_to<W: Write>(&self, out: W) -> Result<W, Error> {
        let mut writer = SnapshotWriter::new(out, &self.meta)?;
        self.export(|record| writer.record(&record))?;
        writer.finish()
    }
}

/// The error of a file call on a view of the store.
fn not_a_file() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "a view of the store is streamed, not used as a file",
    )
}

impl SnapshotData {
    /// The scratch file openraft's file calls go to; a view of the store has none.
    fn file(self: Pin<&mut Self>) -> io::Result<Pin<&mut tokio::fs::File>> {
        match self.get_mut() {
            SnapshotData::Received(file) => Ok(Pin::new(file)),
            SnapshotData::Store(_) => Err(not_a_file()),
        }
    }
}

impl AsyncRead for SnapshotData {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.file() {
            Ok(file) => file.poll_read(cx, buf),
            Err(error) => Poll::Ready(Err(error)),
        }
    }
}

impl AsyncWrite for SnapshotData {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.file() {
            Ok(file) => file.poll_write(cx, buf),
            Err(error) => Poll::Ready(Err(error)),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.file() {
            Ok(file) => file.poll_flush(cx),
            Err(error) => Poll::Ready(Err(error)),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.file() {
            Ok(file) => file.poll_shutdown(cx),
            Err(error) => Poll::Ready(Err(error)),
        }
    }
}

impl AsyncSeek for SnapshotData {
    fn start_seek(self: Pin<&mut Self>, position: SeekFrom) -> io::Result<()> {
        self.file()?.start_seek(position)
    }

    fn poll_complete(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        match self.file() {
            Ok(file) => file.poll_complete(cx),
            Err(error) => Poll::Ready(Err(error)),
        }
    }
}
