//! The connecting side, for a client of a kernel (`mahtab mcp`): a DEALER
//! or SUB socket with one connection, made once. Sending goes through the
//! same bounded writer task as the listening side's peers; reading is the
//! caller's, one message at a time.

use bytes::Bytes;
use tokio::io::BufReader;
use tokio::net::{TcpStream, UnixStream};

use super::listener::{Endpoint, MAX_MESSAGE_BYTES};
use super::outbox::{Offered, Outbox};
use super::peer::{self, ConnError, Inbound, Incoming, Mechanism, Reader};

/// One connection to a listening socket.
pub struct Connection {
    inbound: Inbound,
    outbox: Outbox,
    name: String,
}

impl Connection {
    /// Connects to `endpoint` as a socket of type `ours` ("DEALER" or
    /// "SUB"), with `mechanism` (NULL, or CURVE as a client).
    pub async fn open(
        endpoint: &Endpoint,
        ours: &'static str,
        mechanism: &Mechanism,
    ) -> Result<Self, ConnError> {
        let (reader, writer): (Reader, peer::Writer) = match endpoint {
            Endpoint::Tcp(ip, port) => {
                let stream = TcpStream::connect((ip.as_str(), *port)).await?;
                stream.set_nodelay(true)?;
                let (read, write) = stream.into_split();
                (BufReader::new(Box::new(read)), Box::new(write))
            }
            Endpoint::Ipc(path) => {
                let (read, write) = UnixStream::connect(path).await?.into_split();
                (BufReader::new(Box::new(read)), Box::new(write))
            }
        };
        let established = peer::handshake(reader, writer, ours, mechanism).await?;
        let name = format!("{ours} {endpoint}");
        let outbox = Outbox::spawn(established.outbound, name.clone(), || {});
        let connection = Self {
            inbound: established.inbound,
            outbox,
            name,
        };
        if ours == "SUB" {
            // ZMTP 3.0's form (a message `\x01` + topic): every version of
            // the peer reads it. The empty topic: every message.
            connection.send(vec![Bytes::from_static(b"\x01")]);
        }
        Ok(connection)
    }

    /// Queues a message; never waits (see [`Outbox::offer`]).
    pub fn send(&self, frames: Vec<Bytes>) -> Offered {
        self.outbox.offer(frames)
    }

    /// A handle that sends on this connection, for other tasks.
    pub fn sender(&self) -> Sender {
        Sender(self.outbox.clone())
    }

    /// The next message; `None` once the connection ends. Commands are
    /// skipped (a PING answered), and so are messages over the size limit
    /// (logged).
    pub async fn recv(&mut self) -> Option<Vec<Bytes>> {
        loop {
            match peer::read_incoming(&mut self.inbound, MAX_MESSAGE_BYTES).await {
                Ok(Incoming::Message(frames)) => return Some(frames),
                Ok(Incoming::Command(command)) => {
                    self.outbox.answer_ping(&command);
                }
                Ok(Incoming::Oversized(size)) => {
                    tracing::warn!("{}: dropped a message of {size} bytes", self.name);
                }
                Err(e) => {
                    tracing::debug!("{}: connection ended: {e}", self.name);
                    return None;
                }
            }
        }
    }
}

/// Sends on a [`Connection`] from anywhere.
#[derive(Clone)]
pub struct Sender(Outbox);

impl Sender {
    pub fn send(&self, frames: Vec<Bytes>) -> Offered {
        self.0.offer(frames)
    }
}
