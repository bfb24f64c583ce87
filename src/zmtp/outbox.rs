//! The sending side of one connected peer: a writer task fed by a bounded
//! queue of its own. A peer that stops reading fills only its own queue;
//! past the bound its messages are dropped, as libzmq's PUB and ROUTER
//! sockets do at their high-water mark, and no other peer waits for it.
//! Under CURVE the writer seals every frame it writes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::sync::{mpsc, oneshot};

use super::codec;
use super::curve;
use super::peer::{Outbound, Writer};

/// How many messages may wait for one peer (libzmq's default SNDHWM).
pub const QUEUE_MESSAGES: usize = 1000;
/// How many bytes may wait for one peer, so that memory stays bounded
/// whatever the message sizes.
pub const QUEUE_BYTES: usize = 128 << 20;

/// What waits in a peer's queue.
enum Outgoing {
    Message(Vec<Bytes>),
    /// A command's body (a PONG).
    Command(Bytes),
    /// Answered once everything queued before it is written and flushed.
    Drained(oneshot::Sender<()>),
}

/// The sending side of one peer: a bounded queue its writer task drains.
/// Cloning shares the queue.
#[derive(Clone)]
pub struct Outbox {
    queue: mpsc::Sender<Outgoing>,
    state: Arc<OutboxState>,
}

struct OutboxState {
    /// Bytes waiting in the queue.
    queued: AtomicUsize,
    /// Set while the peer's queue is full (messages are being dropped).
    muted: AtomicBool,
    /// Messages dropped since the peer was last muted.
    dropped: AtomicUsize,
    /// Who the peer is, for the log.
    name: String,
}

/// Whether [`Outbox::offer`] queued the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offered {
    Queued,
    /// The peer's queue is full: it is not reading.
    Dropped,
    /// The peer is gone.
    Closed,
}

impl Outbox {
    /// Starts the writer task for `writer`; `ended` runs when it stops (the
    /// peer closed, a write failed, or every [`Outbox`] was dropped).
    pub fn spawn(outbound: Outbound, name: String, ended: impl FnOnce() + Send + 'static) -> Self {
        let (queue, messages) = mpsc::channel(QUEUE_MESSAGES);
        let state = Arc::new(OutboxState {
            queued: AtomicUsize::new(0),
            muted: AtomicBool::new(false),
            dropped: AtomicUsize::new(0),
            name,
        });
        let task_state = state.clone();
        tokio::spawn(async move {
            if let Err(e) = write_loop(outbound, messages, &task_state).await {
                tracing::debug!("{}: write failed: {e}", task_state.name);
            }
            ended();
        });
        Self { queue, state }
    }

    /// Queues `frames` for the peer, or drops them if its queue is full.
    /// Never waits.
    pub fn offer(&self, frames: Vec<Bytes>) -> Offered {
        let size: usize = frames.iter().map(Bytes::len).sum();
        let state = &self.state;
        let queued = state.queued.load(Ordering::Acquire);
        let result = if queued.saturating_add(size) > QUEUE_BYTES && queued > 0 {
            Offered::Dropped
        } else {
            state.queued.fetch_add(size, Ordering::AcqRel);
            match self.queue.try_send(Outgoing::Message(frames)) {
                Ok(()) => Offered::Queued,
                Err(full_or_closed) => {
                    state.queued.fetch_sub(size, Ordering::AcqRel);
                    match full_or_closed {
                        mpsc::error::TrySendError::Full(_) => Offered::Dropped,
                        mpsc::error::TrySendError::Closed(_) => Offered::Closed,
                    }
                }
            }
        };
        match result {
            Offered::Dropped => {
                state.dropped.fetch_add(1, Ordering::Relaxed);
                if !state.muted.swap(true, Ordering::AcqRel) {
                    tracing::warn!(
                        "{}: the peer is not reading; its messages are dropped until it does",
                        state.name
                    );
                }
            }
            Offered::Queued if state.muted.swap(false, Ordering::AcqRel) => {
                let dropped = state.dropped.swap(0, Ordering::Relaxed);
                tracing::info!("{}: the peer reads again ({dropped} dropped)", state.name);
            }
            _ => {}
        }
        result
    }
}

impl Outbox {
    /// Waits until everything queued so far is written to the peer, or the
    /// peer is gone. A peer that does not read keeps this waiting: callers
    /// bound it with a deadline.
    pub async fn drain(&self) {
        let (done, written) = oneshot::channel();
        if self.queue.send(Outgoing::Drained(done)).await.is_ok() {
            let _ = written.await;
        }
    }

    /// Answers a ZMTP 3.1 PING (the body of a command the peer sent) with
    /// its PONG; true if it was one. Other commands are the caller's.
    pub fn answer_ping(&self, command: &[u8]) -> bool {
        let Some(pong) = codec::pong_for(command) else {
            return false;
        };
        // A PONG the full queue cannot take is simply not sent: the peer
        // is not reading, and its next PING will ask again.
        let _ = self.queue.try_send(Outgoing::Command(pong));
        true
    }
}

async fn write_loop(
    outbound: Outbound,
    mut queue: mpsc::Receiver<Outgoing>,
    state: &OutboxState,
) -> std::io::Result<()> {
    let Outbound { writer, mut sealer } = outbound;
    let mut out = BufWriter::with_capacity(64 << 10, writer);
    let mut drained = Vec::new();
    while let Some(first) = queue.recv().await {
        // Write what else is waiting before flushing, in one go.
        let mut next = Some(first);
        while let Some(item) = next {
            match item {
                Outgoing::Drained(done) => drained.push(done),
                item => write_item(&mut out, &item, sealer.as_mut(), state).await?,
            }
            next = queue.try_recv().ok();
        }
        out.flush().await?;
        for done in drained.drain(..) {
            let _ = done.send(());
        }
    }
    Ok(())
}

/// Waits until every one of `outboxes` is drained ([`Outbox::drain`]).
pub async fn drain_all(outboxes: Vec<Outbox>) {
    futures_util::future::join_all(outboxes.iter().map(Outbox::drain)).await;
}

async fn write_item(
    out: &mut BufWriter<Writer>,
    item: &Outgoing,
    mut sealer: Option<&mut curve::Sealer>,
    state: &OutboxState,
) -> std::io::Result<()> {
    let frames = match item {
        Outgoing::Message(frames) => frames.as_slice(),
        Outgoing::Command(body) => {
            return write_frame(out, body, false, true, sealer).await;
        }
        Outgoing::Drained(_) => return Ok(()),
    };
    let mut size = 0;
    for (i, frame) in frames.iter().enumerate() {
        write_frame(
            out,
            frame,
            i + 1 < frames.len(),
            false,
            sealer.as_deref_mut(),
        )
        .await?;
        size += frame.len();
    }
    state.queued.fetch_sub(size, Ordering::AcqRel);
    Ok(())
}

/// Writes one frame: its header and data, or under CURVE the MESSAGE
/// command that carries it.
async fn write_frame(
    out: &mut BufWriter<Writer>,
    data: &[u8],
    more: bool,
    command: bool,
    sealer: Option<&mut curve::Sealer>,
) -> std::io::Result<()> {
    match sealer {
        None => {
            let mut header = BytesMut::with_capacity(9);
            codec::put_frame_header(&mut header, data.len(), more, command);
            out.write_all(&header).await?;
            out.write_all(data).await
        }
        Some(sealer) => {
            let mut sealed = BytesMut::with_capacity(data.len() + curve::MESSAGE_OVERHEAD + 9);
            sealer.seal_frame(&mut sealed, data, more, command);
            out.write_all(&sealed).await
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncReadExt;

    use super::*;

    fn outbound(writer: tokio::io::DuplexStream) -> Outbound {
        Outbound {
            writer: Box::new(writer),
            sealer: None,
        }
    }

    /// An outbox whose peer never reads: the other end of a tiny pipe.
    fn stalled_outbox() -> (Outbox, tokio::io::DuplexStream) {
        let (ours, theirs) = tokio::io::duplex(64);
        (Outbox::spawn(outbound(ours), "test".into(), || {}), theirs)
    }

    #[tokio::test]
    async fn a_peer_that_does_not_read_holds_at_most_the_bound_in_messages() {
        let (outbox, _theirs) = stalled_outbox();
        let frame = Bytes::from_static(&[7; 100]);
        let queued = (0..QUEUE_MESSAGES * 2)
            .filter(|_| outbox.offer(vec![frame.clone()]) == Offered::Queued)
            .count();
        // The writer holds one message it cannot finish writing.
        assert!(queued <= QUEUE_MESSAGES + 1, "{queued} queued");
        assert!(queued >= QUEUE_MESSAGES, "{queued} queued");
        assert_eq!(outbox.offer(vec![frame]), Offered::Dropped);
    }

    #[tokio::test]
    async fn a_peer_that_does_not_read_holds_at_most_the_bound_in_bytes() {
        let (outbox, _theirs) = stalled_outbox();
        // One buffer shared by every message: the count is what is checked.
        let frame = Bytes::from(vec![0u8; 1 << 20]);
        let queued = (0..QUEUE_BYTES / frame.len() * 2)
            .filter(|_| outbox.offer(vec![frame.clone()]) == Offered::Queued)
            .count();
        assert!(
            queued * frame.len() <= QUEUE_BYTES + frame.len(),
            "{queued} MiB queued"
        );
        assert!(
            queued * frame.len() >= QUEUE_BYTES - frame.len(),
            "{queued} MiB queued"
        );
    }

    #[tokio::test]
    async fn a_message_bigger_than_the_bound_still_goes_to_an_idle_peer() {
        let (ours, mut theirs) = tokio::io::duplex(1 << 16);
        let outbox = Outbox::spawn(outbound(ours), "test".into(), || {});
        let frame = Bytes::from(vec![1u8; QUEUE_BYTES + 1]);
        assert_eq!(outbox.offer(vec![frame]), Offered::Queued);
        let mut header = [0u8; 9];
        theirs.read_exact(&mut header).await.unwrap();
        assert_eq!(header[0], 0x02, "one long frame");
        assert_eq!(
            u64::from_be_bytes(header[1..].try_into().unwrap()),
            QUEUE_BYTES as u64 + 1
        );
    }

    #[tokio::test]
    async fn drain_waits_until_what_was_queued_is_written() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let outbox = Outbox::spawn(outbound(ours), "test".into(), || {});
        assert_eq!(
            outbox.offer(vec![Bytes::from(vec![3u8; 1000])]),
            Offered::Queued
        );
        // The peer has not read: the message cannot all be written yet.
        let unread = tokio::time::timeout(Duration::from_millis(100), outbox.drain()).await;
        assert!(unread.is_err(), "drained before the peer read");
        let reader = tokio::spawn(async move {
            let mut message = vec![0u8; 9 + 1000];
            theirs.read_exact(&mut message).await.map(|_| message)
        });
        tokio::time::timeout(Duration::from_secs(10), outbox.drain())
            .await
            .expect("drained once the peer read");
        let message = reader.await.unwrap().unwrap();
        assert!(message[9..].iter().all(|&byte| byte == 3));
    }

    #[tokio::test]
    async fn drain_returns_when_the_peer_is_gone() {
        let (ours, theirs) = tokio::io::duplex(64);
        let outbox = Outbox::spawn(outbound(ours), "test".into(), || {});
        drop(theirs);
        outbox.offer(vec![Bytes::from(vec![3u8; 1000])]);
        tokio::time::timeout(Duration::from_secs(10), outbox.drain())
            .await
            .expect("a gone peer does not hold the drain");
    }
}
