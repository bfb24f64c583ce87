//! One connected peer: the handshake (NULL or CURVE) and reading its
//! messages; what is sent to it goes through its [`Outbox`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

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
/// [`super::outbox::Outbox::spawn`].
pub struct Outbound {
    pub(super) writer: Writer,
    pub(super) sealer: Option<curve::Sealer>,
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

/// Logs a connection refused at its handshake (see [`log_closed`]).
pub fn log_refused(name: &str, error: &ConnError) {
    if !warn_once_if_security(name, error) {
        tracing::debug!("{name}: handshake failed: {error}");
    }
}

/// Logs a connection that ended after its handshake: a tampered or
/// replayed frame is a security matter, anything else routine.
pub fn log_closed(name: &str, error: &ConnError) {
    if !warn_once_if_security(name, error) {
        tracing::debug!("{name}: closed: {error}");
    }
}

/// Warns of the first connection ended for a security reason (a client
/// without the key, a tampered frame); everything after goes to the debug
/// level, so a flood of refused connections cannot flood the log. True if
/// `error` was such a reason.
fn warn_once_if_security(name: &str, error: &ConnError) -> bool {
    static WARNED: AtomicBool = AtomicBool::new(false);
    let security = matches!(
        error,
        ConnError::Curve(_) | ConnError::Protocol(ProtocolError::Mechanism(_))
    );
    if !security {
        return false;
    }
    if WARNED.swap(true, Ordering::Relaxed) {
        tracing::debug!("{name}: connection refused: {error}");
    } else {
        tracing::warn!(
            "{name}: connection refused: {error} (further refusals are logged at debug level)"
        );
    }
    true
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

#[cfg(test)]
mod tests {
    use super::*;

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
