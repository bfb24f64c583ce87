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
use super::curve::{self, CurveError};

/// How long a new connection may take to greet and say READY.
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(10);
/// The largest command accepted (READY, subscriptions); bigger ones close
/// the connection.
const COMMAND_LIMIT: u64 = 64 << 10;
/// The largest frame a CURVE peer may send: its box must be read whole to
/// be opened, so past this the connection closes.
const SEALED_FRAME_LIMIT: u64 = super::MAX_MESSAGE_BYTES + curve::MESSAGE_OVERHEAD as u64;
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
    #[error(transparent)]
    Curve(#[from] CurveError),
    #[error("no handshake within {HANDSHAKE_LIMIT:?}")]
    Timeout,
}

/// The security a connection is made with.
#[derive(Clone, Default)]
pub enum Mechanism {
    /// None: ZMTP's NULL mechanism, bytes in the clear.
    #[default]
    Null,
    /// CURVE as the server, with its long-term keys.
    CurveServer(Arc<curve::Keypair>),
    /// CURVE as a client of the server whose long-term public key this is.
    CurveClient(curve::PublicKey),
}

impl Mechanism {
    /// Its name in the greeting, and whether we are its server.
    fn greeting(&self) -> (&'static [u8], bool) {
        match self {
            Mechanism::Null => (b"NULL", false),
            Mechanism::CurveServer(_) => (curve::NAME, true),
            Mechanism::CurveClient(_) => (curve::NAME, false),
        }
    }
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

/// The reading half of a connection that has said READY.
pub struct Inbound {
    reader: Reader,
    opener: Option<curve::Opener>,
}

/// The writing half of a connection that has said READY, for
/// [`Outbox::spawn`].
pub struct Outbound {
    writer: Writer,
    sealer: Option<curve::Sealer>,
}

/// A connection after its handshake.
pub struct Established {
    pub peer: PeerReady,
    pub inbound: Inbound,
    pub outbound: Outbound,
}

/// Greets the peer as a socket of type `ours` with `mechanism`, and runs
/// the mechanism's handshake up to both sides' READY.
pub async fn handshake(
    mut reader: Reader,
    mut writer: Writer,
    ours: &'static str,
    mechanism: &Mechanism,
) -> Result<Established, ConnError> {
    let exchange = async {
        let (name, as_server) = mechanism.greeting();
        writer.write_all(&codec::greeting(name, as_server)).await?;
        writer.flush().await?;
        let mut greeting = [0u8; codec::GREETING_LEN];
        reader
            .read_exact(&mut greeting[..codec::SIGNATURE_LEN])
            .await?;
        codec::check_signature(&greeting[..codec::SIGNATURE_LEN])?;
        reader
            .read_exact(&mut greeting[codec::SIGNATURE_LEN..])
            .await?;
        codec::check_greeting_rest(&greeting[codec::SIGNATURE_LEN..], name)?;
        let mut inbound = Inbound {
            reader,
            opener: None,
        };
        let (peer, session) = match mechanism {
            Mechanism::Null => {
                send(&mut writer, &codec::ready(ours)).await?;
                (codec::parse_ready(&inbound.command().await?)?, None)
            }
            Mechanism::CurveServer(keys) => {
                let mut server = curve::Server::new(keys);
                send(&mut writer, &server.welcome(&inbound.command().await?)?).await?;
                let (peer, session, ready) = server.ready(&inbound.command().await?, ours)?;
                send(&mut writer, &ready).await?;
                (peer, Some(session))
            }
            Mechanism::CurveClient(server_key) => {
                let mut client = curve::Client::new(server_key.clone(), curve::Keypair::generate());
                send(&mut writer, &client.hello()).await?;
                let initiate = client.initiate(&inbound.command().await?, ours)?;
                send(&mut writer, &initiate).await?;
                let (peer, session) = client.ready(&inbound.command().await?)?;
                (peer, Some(session))
            }
        };
        codec::compatible(ours, &peer.socket_type)?;
        let (sealer, opener) = match session {
            Some(session) => (Some(session.sealer), Some(session.opener)),
            None => (None, None),
        };
        inbound.opener = opener;
        Ok(Established {
            peer,
            inbound,
            outbound: Outbound { writer, sealer },
        })
    };
    tokio::time::timeout(HANDSHAKE_LIMIT, exchange)
        .await
        .map_err(|_| ConnError::Timeout)?
}

async fn send(writer: &mut Writer, frame: &[u8]) -> std::io::Result<()> {
    writer.write_all(frame).await?;
    writer.flush().await
}

/// Logs a connection refused at its handshake: the first refusal for a
/// security reason (a client without the key, a tampered frame) as a
/// warning, everything after at debug level, so a flood of refused
/// connections cannot flood the log.
pub fn log_refused(name: &str, error: &ConnError) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    let security = matches!(
        error,
        ConnError::Curve(_) | ConnError::Protocol(ProtocolError::Mechanism(_))
    );
    if security && !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "{name}: connection refused: {error} (further refusals are logged at debug level)"
        );
    } else {
        tracing::debug!("{name}: handshake failed: {error}");
    }
}

/// One frame as read: its flags, size, and data unless it was skipped.
struct Frame {
    more: bool,
    command: bool,
    size: u64,
    data: Option<Bytes>,
}

impl Inbound {
    /// The next command, during a handshake (a message there is an error).
    async fn command(&mut self) -> Result<Bytes, ConnError> {
        // A limit of 0: a message before READY is never kept.
        match read_incoming(self, 0).await? {
            Incoming::Command(body) => Ok(body),
            _ => Err(ProtocolError::NotReady("a message".into()).into()),
        }
    }

    /// The next frame. A message frame bigger than `room` is read without
    /// being kept (in the clear it is not even held in memory).
    async fn frame(&mut self, room: u64) -> Result<Frame, ConnError> {
        let header = codec::frame_header(self.reader.read_u8().await?)?;
        let size = if header.long {
            self.reader.read_u64().await?
        } else {
            u64::from(self.reader.read_u8().await?)
        };
        let Some(opener) = &mut self.opener else {
            let data = if header.command {
                if size > COMMAND_LIMIT {
                    return Err(ProtocolError::BadCommand.into());
                }
                Some(read_exact(&mut self.reader, size).await?.freeze())
            } else if size > room {
                skip(&mut self.reader, size).await?;
                None
            } else {
                Some(read_exact(&mut self.reader, size).await?.freeze())
            };
            return Ok(Frame {
                more: header.more,
                command: header.command,
                size,
                data,
            });
        };
        // Under CURVE every frame travels alone in a MESSAGE (sent by
        // libzmq as a plain frame, by the RFC's letter as a command).
        if header.more || size > SEALED_FRAME_LIMIT {
            return Err(ProtocolError::BadCommand.into());
        }
        let opened = opener.open_frame(read_exact(&mut self.reader, size).await?)?;
        let size = opened.data.len() as u64;
        if opened.command && size > COMMAND_LIMIT {
            return Err(ProtocolError::BadCommand.into());
        }
        Ok(Frame {
            more: opened.more,
            command: opened.command,
            size,
            data: (opened.command || size <= room).then_some(opened.data),
        })
    }
}

/// Reads the next message or command. A message bigger than `limit` bytes
/// is read to its end without being kept, so the connection stays usable.
pub async fn read_incoming(inbound: &mut Inbound, limit: u64) -> Result<Incoming, ConnError> {
    let mut frames = Vec::new();
    let mut total: u64 = 0;
    let mut oversized = false;
    loop {
        let room = if oversized {
            0
        } else {
            limit.saturating_sub(total)
        };
        let frame = inbound.frame(room).await?;
        if frame.command {
            if !frames.is_empty() || oversized || frame.more {
                return Err(ProtocolError::BadCommand.into());
            }
            return Ok(Incoming::Command(frame.data.unwrap_or_default()));
        }
        total = total.saturating_add(frame.size);
        match frame.data {
            Some(data) if !oversized => frames.push(data),
            _ => {
                oversized = true;
                frames.clear();
            }
        }
        if !frame.more {
            return Ok(if oversized {
                Incoming::Oversized(total)
            } else {
                Incoming::Message(frames)
            });
        }
    }
}

async fn read_exact(reader: &mut Reader, size: u64) -> Result<BytesMut, ConnError> {
    // `size` is within a limit the caller checked, so it fits in memory.
    let size = usize::try_from(size).map_err(|_| ProtocolError::BadCommand)?;
    let mut buf = BytesMut::zeroed(size);
    reader.read_exact(&mut buf).await?;
    Ok(buf)
}

async fn skip(reader: &mut Reader, size: u64) -> Result<(), ConnError> {
    let copied = tokio::io::copy(&mut reader.take(size), &mut tokio::io::sink()).await?;
    if copied < size {
        return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
    }
    Ok(())
}

/// What waits in a peer's queue.
enum Outgoing {
    Message(Vec<Bytes>),
    /// A command's body (a PONG).
    Command(Bytes),
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
    while let Some(item) = queue.recv().await {
        write_item(&mut out, &item, sealer.as_mut(), state).await?;
        // Write what else is waiting before flushing, in one go.
        while let Ok(item) = queue.try_recv() {
            write_item(&mut out, &item, sealer.as_mut(), state).await?;
        }
        out.flush().await?;
    }
    Ok(())
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

    fn reader(bytes: Vec<u8>) -> Inbound {
        Inbound {
            reader: BufReader::new(Box::new(std::io::Cursor::new(bytes))),
            opener: None,
        }
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
