//! One connected peer: the handshake, reading its messages, and a writer
//! task fed by a bounded queue of its own ([`Outbox`]). A peer that stops
//! reading fills only its own queue; past the bound its messages are dropped,
//! as libzmq's PUB and ROUTER sockets do at their high-water mark, and no
//! other peer waits for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::mpsc;

use super::codec::{self, PeerReady, ProtocolError};

/// How long a new connection may take to greet and say READY.
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(10);
/// The largest command accepted (READY, subscriptions); bigger ones close
/// the connection.
const COMMAND_LIMIT: u64 = 64 << 10;
/// How many messages may wait for one peer (libzmq's default SNDHWM).
pub const QUEUE_MESSAGES: usize = 1000;
/// How many bytes may wait for one peer, so that memory stays bounded
/// whatever the message sizes.
pub const QUEUE_BYTES: usize = 128 << 20;

pub type Reader = BufReader<Box<dyn AsyncRead + Send + Unpin>>;
pub type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    #[error("no handshake within {HANDSHAKE_LIMIT:?}")]
    Timeout,
}

/// What a peer sent.
pub enum Incoming {
    /// A whole message, its frames in order.
    Message(Vec<Bytes>),
    /// A command: its whole body (see [`codec::split_command`]).
    Command(Bytes),
    /// A message over the size limit, read and thrown away; its size.
    Oversized(u64),
}

/// Greets the peer as a socket of type `ours` and reads its READY.
pub async fn handshake(
    reader: &mut Reader,
    writer: &mut Writer,
    ours: &'static str,
) -> Result<PeerReady, ConnError> {
    let exchange = async {
        writer.write_all(&codec::greeting()).await?;
        writer.flush().await?;
        let mut greeting = [0u8; codec::GREETING_LEN];
        reader
            .read_exact(&mut greeting[..codec::SIGNATURE_LEN])
            .await?;
        codec::check_signature(&greeting[..codec::SIGNATURE_LEN])?;
        reader
            .read_exact(&mut greeting[codec::SIGNATURE_LEN..])
            .await?;
        codec::check_greeting_rest(&greeting[codec::SIGNATURE_LEN..])?;
        writer.write_all(&codec::ready(ours)).await?;
        writer.flush().await?;
        // A limit of 0: a message before READY is never kept.
        let ready = match read_incoming(reader, 0).await? {
            Incoming::Command(body) => codec::parse_ready(&body)?,
            _ => return Err(ProtocolError::NotReady("a message".into()).into()),
        };
        codec::compatible(ours, &ready.socket_type)?;
        Ok(ready)
    };
    tokio::time::timeout(HANDSHAKE_LIMIT, exchange)
        .await
        .map_err(|_| ConnError::Timeout)?
}

/// Reads the next message or command. A message bigger than `limit` bytes
/// is read to its end without being kept, so the connection stays usable.
pub async fn read_incoming(reader: &mut Reader, limit: u64) -> Result<Incoming, ConnError> {
    let mut frames = Vec::new();
    let mut total: u64 = 0;
    let mut oversized = false;
    loop {
        let header = codec::frame_header(reader.read_u8().await?)?;
        let size = if header.long {
            reader.read_u64().await?
        } else {
            u64::from(reader.read_u8().await?)
        };
        if header.command {
            if !frames.is_empty() || oversized || header.more || size > COMMAND_LIMIT {
                return Err(ProtocolError::BadCommand.into());
            }
            return Ok(Incoming::Command(read_exact(reader, size).await?));
        }
        total = total.saturating_add(size);
        if oversized || total > limit {
            oversized = true;
            frames.clear();
            let copied =
                tokio::io::copy(&mut (&mut *reader).take(size), &mut tokio::io::sink()).await?;
            if copied < size {
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
            }
        } else {
            frames.push(read_exact(reader, size).await?);
        }
        if !header.more {
            return Ok(if oversized {
                Incoming::Oversized(total)
            } else {
                Incoming::Message(frames)
            });
        }
    }
}

async fn read_exact(reader: &mut Reader, size: u64) -> Result<Bytes, ConnError> {
    // `size` is within a limit the caller checked, so it fits in memory.
    let size = usize::try_from(size).map_err(|_| ProtocolError::BadCommand)?;
    let mut buf = BytesMut::zeroed(size);
    reader.read_exact(&mut buf).await?;
    Ok(buf.freeze())
}

/// The sending side of one peer: a bounded queue its writer task drains.
/// Cloning shares the queue.
#[derive(Clone)]
pub struct Outbox {
    queue: mpsc::Sender<Vec<Bytes>>,
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
    pub fn spawn(writer: Writer, name: String, ended: impl FnOnce() + Send + 'static) -> Self {
        let (queue, messages) = mpsc::channel(QUEUE_MESSAGES);
        let state = Arc::new(OutboxState {
            queued: AtomicUsize::new(0),
            muted: AtomicBool::new(false),
            dropped: AtomicUsize::new(0),
            name,
        });
        let task_state = state.clone();
        tokio::spawn(async move {
            if let Err(e) = write_loop(writer, messages, &task_state).await {
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
            match self.queue.try_send(frames) {
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

async fn write_loop(
    writer: Writer,
    mut messages: mpsc::Receiver<Vec<Bytes>>,
    state: &OutboxState,
) -> std::io::Result<()> {
    let mut out = BufWriter::with_capacity(64 << 10, writer);
    while let Some(frames) = messages.recv().await {
        write_message(&mut out, &frames, state).await?;
        // Write what else is waiting before flushing, in one go.
        while let Ok(frames) = messages.try_recv() {
            write_message(&mut out, &frames, state).await?;
        }
        out.flush().await?;
    }
    Ok(())
}

async fn write_message(
    out: &mut BufWriter<Writer>,
    frames: &[Bytes],
    state: &OutboxState,
) -> std::io::Result<()> {
    let mut header = BytesMut::with_capacity(9);
    let mut size = 0;
    for (i, frame) in frames.iter().enumerate() {
        header.clear();
        codec::put_frame_header(&mut header, frame.len(), i + 1 < frames.len(), false);
        out.write_all(&header).await?;
        out.write_all(frame).await?;
        size += frame.len();
    }
    state.queued.fetch_sub(size, Ordering::AcqRel);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An outbox whose peer never reads: the other end of a tiny pipe.
    fn stalled_outbox() -> (Outbox, tokio::io::DuplexStream) {
        let (ours, theirs) = tokio::io::duplex(64);
        (Outbox::spawn(Box::new(ours), "test".into(), || {}), theirs)
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
        let outbox = Outbox::spawn(Box::new(ours), "test".into(), || {});
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

    fn reader(bytes: Vec<u8>) -> Reader {
        BufReader::new(Box::new(std::io::Cursor::new(bytes)))
    }

    fn frame(more: bool, data: &[u8]) -> Vec<u8> {
        let mut out = BytesMut::new();
        codec::put_frame_header(&mut out, data.len(), more, false);
        out.extend_from_slice(data);
        out.to_vec()
    }

    #[tokio::test]
    async fn an_oversized_message_is_skipped_and_the_next_one_read() {
        let mut bytes = frame(true, b"12345");
        bytes.extend(frame(false, &[0; 300]));
        bytes.extend(frame(true, b"a"));
        bytes.extend(frame(false, b"b"));
        let mut reader = reader(bytes);
        assert!(matches!(
            read_incoming(&mut reader, 100).await.unwrap(),
            Incoming::Oversized(305)
        ));
        match read_incoming(&mut reader, 100).await.unwrap() {
            Incoming::Message(frames) => assert_eq!(frames, [&b"a"[..], &b"b"[..]]),
            _ => panic!("expected the next message"),
        }
        assert!(matches!(
            read_incoming(&mut reader, 100).await,
            Err(ConnError::Io(_))
        ));
    }

    #[tokio::test]
    async fn a_command_inside_a_message_closes_the_connection() {
        let mut bytes = frame(true, b"x");
        bytes.extend(codec::command("PING", b"").to_vec());
        assert!(matches!(
            read_incoming(&mut reader(bytes), 100).await,
            Err(ConnError::Protocol(ProtocolError::BadCommand))
        ));
    }
}
