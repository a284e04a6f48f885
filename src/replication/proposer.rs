//! Group commit at the leader: client writes that arrive while earlier ones are being
//! committed are proposed together, as one log entry (a [`Proposal`]).
//!
//! openraft 0.9 appends and flushes every proposed entry on its own, so a leader that
//! proposed one entry per write made one fsync per write, and the set's write rate
//! was its disk's fsync rate. A group's [`Proposer`] takes every write made on this
//! node, local or forwarded, and keeps at most [`IN_FLIGHT`] entries being committed
//! at once: a write that finds room is proposed at once, alone; writes that arrive
//! while the room is taken wait in the queue and go together in the next entry (at
//! most [`MAX_REQUESTS`] of them and [`MAX_OCTETS`] of their encoding). So a lone
//! writer waits for nothing more than before, and a set under load commits many
//! writes per fsync. Each write is answered with its own output, or with the error
//! that kept its entry from committing (not the leader, stopped).
//!
//! Entries are proposed in the order their writes were queued, and no write is
//! answered before its entry is applied. The queue is bounded ([`QUEUE`]): a write
//! waits for room in it, within its caller's patience.
//!
//! [`Proposer::hold`] takes all the room: once every entry in flight is applied it
//! returns, and until its [`Hold`] is dropped nothing more is proposed (writes queue),
//! so the log stays still while the leader hands its leadership over.

use std::sync::Arc;

use openraft::Raft;
use openraft::error::{ClientWriteError, Fatal, RaftError};
use postcard::ser_flavors::Size;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

use super::machine::Machine;
use super::network::ForwardError;
use super::types::{GroupConfig, NodeId, Proposal, Request};

/// Entries being committed at once: one being replicated while the next is appended.
pub const IN_FLIGHT: u32 = 2;
/// Most client requests in one entry.
pub const MAX_REQUESTS: usize = 1024;
/// Most octets of encoded requests in one entry (a request larger than this goes
/// alone): 300 such entries, as many as one append carries by default, fit a peer
/// frame (an append that does not is sent again with fewer entries).
pub const MAX_OCTETS: usize = 128 << 10;
/// Writes waiting to be proposed.
pub const QUEUE: usize = 4096;

/// What a write is answered: its command's output, or why it was not applied.
pub type Answer<M> = Result<<M as Machine>::Output, ForwardError>;

/// A write waiting to be proposed, and where its answer goes.
struct Submission<M: Machine> {
    request: Request<M::Command>,
    octets: usize,
    answer: oneshot::Sender<Answer<M>>,
}

/// Proposes a group's client writes at this node's Raft; clones share its queue.
pub struct Proposer<M: Machine> {
    queue: mpsc::Sender<Submission<M>>,
    /// Entries that may be in flight: a permit each.
    room: Arc<Semaphore>,
}

impl<M: Machine> Clone for Proposer<M> {
    fn clone(&self) -> Self {
        Proposer {
            queue: self.queue.clone(),
            room: Arc::clone(&self.room),
        }
    }
}

/// While held, the proposer proposes nothing ([`Proposer::hold`]).
#[derive(Debug)]
pub struct Hold {
    /// Every permit of the room, given back when dropped; none if the room was
    /// closed, when the proposer has stopped proposing anyway.
    _room: Option<OwnedSemaphorePermit>,
}

impl<M: Machine> Proposer<M> {
    /// Starts proposing writes to `raft`; stops when every clone is dropped.
    pub fn start(raft: Raft<GroupConfig<M>>) -> Proposer<M> {
        let (queue, submissions) = mpsc::channel(QUEUE);
        let room = Arc::new(Semaphore::new(IN_FLIGHT as usize));
        tokio::spawn(propose_all(raft, submissions, Arc::clone(&room)));
        Proposer { queue, room }
    }

    /// Waits until every entry in flight is applied (or refused), then proposes
    /// nothing more until the returned [`Hold`] is dropped; writes made meanwhile
    /// queue, and are proposed (or refused, if this node no longer leads) after.
    pub async fn hold(&self) -> Hold {
        let room = Arc::clone(&self.room).acquire_many_owned(IN_FLIGHT);
        Hold {
            _room: room.await.ok(),
        }
    }

    /// Proposes `request` (with others waiting, if any) and answers once its entry is
    /// applied here, or with the reason it was not: a node that is not the leader
    /// says which node is.
    pub async fn propose(&self, request: Request<M::Command>) -> Answer<M> {
        // An unencodable request fails at the log's append; weigh it as large.
        let octets =
            postcard::serialize_with_flavor(&request, Size::default()).unwrap_or(MAX_OCTETS);
        let (answer, answered) = oneshot::channel();
        let submission = Submission {
            request,
            octets,
            answer,
        };
        if self.queue.send(submission).await.is_err() {
            return Err(stopped());
        }
        match answered.await {
            Ok(answer) => answer,
            Err(_dropped) => Err(stopped()),
        }
    }
}

/// Takes writes from `submissions` and proposes them, together when they have queued,
/// until every [`Proposer`] is dropped.
async fn propose_all<M: Machine>(
    raft: Raft<GroupConfig<M>>,
    mut submissions: mpsc::Receiver<Submission<M>>,
    room: Arc<Semaphore>,
) {
    let mut held = None;
    loop {
        let first = match held.take() {
            Some(first) => first,
            None => match submissions.recv().await {
                Some(first) => first,
                None => return,
            },
        };
        // The semaphore is never closed.
        let Ok(permit) = Arc::clone(&room).acquire_owned().await else {
            return;
        };
        // Writes that queued while the room was taken join this entry.
        let (batch, next) = gather(first, &mut submissions);
        held = next;
        propose(&raft, batch, permit).await;
    }
}

/// `first` and the writes queued after it, as many as one entry takes; the first
/// write that did not fit, if any.
fn gather<M: Machine>(
    first: Submission<M>,
    submissions: &mut mpsc::Receiver<Submission<M>>,
) -> (Vec<Submission<M>>, Option<Submission<M>>) {
    let mut octets = first.octets;
    let mut batch = vec![first];
    while batch.len() < MAX_REQUESTS {
        let Ok(next) = submissions.try_recv() else {
            break;
        };
        if octets + next.octets > MAX_OCTETS {
            return (batch, Some(next));
        }
        octets += next.octets;
        batch.push(next);
    }
    (batch, None)
}

/// Hands `batch` to Raft as one entry (in order with the entries before it) and
/// answers its writes once it is applied, holding `permit` until then.
async fn propose<M: Machine>(
    raft: &Raft<GroupConfig<M>>,
    batch: Vec<Submission<M>>,
    permit: OwnedSemaphorePermit,
) {
    let (requests, answers): (Vec<_>, Vec<_>) = batch
        .into_iter()
        .map(|submission| (submission.request, submission.answer))
        .unzip();
    match raft.client_write_ff(Proposal(requests.into())).await {
        Ok(committed) => {
            tokio::spawn(async move {
                let answered = match committed.await {
                    Ok(Ok(written)) => Ok(written.data),
                    Ok(Err(refused)) => Err(refusal(refused)),
                    Err(_dropped) => Err(stopped()),
                };
                answer_all::<M>(answered, answers);
                drop(permit);
            });
        }
        Err(fatal) => answer_all::<M>(Err(ForwardError::Fatal(fatal)), answers),
    }
}

/// Sends each write its output of `applied` (one per write, in order), or the error.
fn answer_all<M: Machine>(
    applied: Result<Vec<M::Output>, ForwardError>,
    answers: Vec<oneshot::Sender<Answer<M>>>,
) {
    let applied = match applied {
        Ok(outputs) if outputs.len() != answers.len() => Err(ForwardError::Unanswered {
            requests: answers.len(),
            outputs: outputs.len(),
        }),
        applied => applied,
    };
    // A caller that stopped waiting dropped its receiver: nothing to tell it.
    match applied {
        Ok(outputs) => {
            for (answer, output) in answers.into_iter().zip(outputs) {
                let _ = answer.send(Ok(output));
            }
        }
        Err(error) => {
            for answer in answers {
                let _ = answer.send(Err(error.clone()));
            }
        }
    }
}

fn refusal(refused: ClientWriteError<NodeId, super::Node>) -> ForwardError {
    ForwardError::from(RaftError::APIError(refused))
}

fn stopped() -> ForwardError {
    ForwardError::Fatal(Fatal::Stopped)
}
