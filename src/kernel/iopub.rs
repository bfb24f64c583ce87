//! The IOPub channel: one actor task owns the XPUB socket; everyone else
//! publishes through a cloneable [`Iopub`] handle.
//!
//! zeromq's XPUB registers a subscriber only when the socket is read, so the
//! actor reads subscriptions while it publishes. On each subscription it sends
//! `iopub_welcome` (JEP 65) and records that a subscriber exists, which the
//! shell uses to avoid publishing a client's first request into the void (the
//! slow-joiner race).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use jupyter_protocol::{ExecutionState, IoPubWelcome, Status};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use zeromq::{SocketRecv, SocketSend, XPubSocket, ZmqMessage};

use crate::wire::{Codec, Outgoing, no_parent};

enum Command {
    Publish(Outgoing),
    /// Answered once everything published before it has been sent.
    Flush(oneshot::Sender<()>),
}

/// A handle for publishing on IOPub. Messages keep the order of `publish` calls.
#[derive(Clone)]
pub struct Iopub {
    commands: mpsc::UnboundedSender<Command>,
    subscribed: watch::Receiver<bool>,
}

impl Iopub {
    /// Starts the actor that owns `socket`.
    pub fn start(socket: XPubSocket, codec: Arc<Codec>) -> (Self, tokio::task::JoinHandle<()>) {
        let (commands, receiver) = mpsc::unbounded_channel();
        let (subscribed_tx, subscribed) = watch::channel(false);
        let task = tokio::spawn(run(socket, codec, receiver, subscribed_tx));
        (
            Self {
                commands,
                subscribed,
            },
            task,
        )
    }

    /// Publishes `msg_type` with `content` and the given parent header.
    pub fn publish(&self, msg_type: &str, content: Value, parent: Arc<Value>) {
        self.send(Outgoing::new(msg_type, content, parent));
    }

    /// Publishes a fully built message; its topic is its message type.
    pub fn send(&self, mut out: Outgoing) {
        out.identities = vec![Bytes::from(out.msg_type.clone())];
        // The actor ends only at shutdown; messages after that have nowhere to go.
        let _ = self.commands.send(Command::Publish(out));
    }

    /// Publishes `status` with the given execution state.
    pub fn status(&self, execution_state: ExecutionState, parent: Arc<Value>) {
        self.send(Outgoing::typed(Status { execution_state }, parent));
    }

    /// Waits until everything published so far has been handed to the socket.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.commands.send(Command::Flush(done)).is_ok() {
            let _ = wait.await;
        }
    }

    /// Waits up to `limit` for a first subscriber; returns whether one exists.
    pub async fn wait_for_subscriber(&self, limit: Duration) -> bool {
        let mut subscribed = self.subscribed.clone();
        tokio::time::timeout(limit, subscribed.wait_for(|seen| *seen))
            .await
            .is_ok_and(|result| result.is_ok())
    }
}

async fn run(
    mut socket: XPubSocket,
    codec: Arc<Codec>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    subscribed: watch::Sender<bool>,
) {
    loop {
        tokio::select! {
            biased;
            command = commands.recv() => match command {
                Some(Command::Publish(out)) => send(&mut socket, &codec, &out).await,
                Some(Command::Flush(done)) => {
                    let _ = done.send(());
                }
                None => break,
            },
            incoming = socket.recv() => match incoming {
                Ok(message) => {
                    if let Some(topic) = subscription_topic(&message) {
                        tracing::debug!("iopub: new subscription {topic:?}");
                        let topic_frame = Bytes::from(topic.clone().into_bytes());
                        let mut welcome = Outgoing::typed(IoPubWelcome::new(topic), no_parent());
                        welcome.identities = vec![topic_frame];
                        send(&mut socket, &codec, &welcome).await;
                        subscribed.send_replace(true);
                    }
                }
                Err(e) => tracing::debug!("iopub: receive error: {e}"),
            },
        }
    }
}

async fn send(socket: &mut XPubSocket, codec: &Codec, out: &Outgoing) {
    let frames = codec.encode(out);
    match ZmqMessage::try_from(frames) {
        Ok(message) => {
            if let Err(e) = socket.send(message).await {
                tracing::warn!("iopub: failed to publish {}: {e}", out.msg_type);
            }
        }
        Err(e) => tracing::warn!("iopub: cannot frame {}: {e:?}", out.msg_type),
    }
}

/// The topic of a subscribe message (`\x01` + topic); None for unsubscribes.
fn subscription_topic(message: &ZmqMessage) -> Option<String> {
    let frame = message.get(0)?;
    match frame.split_first() {
        Some((1, topic)) => Some(String::from_utf8_lossy(topic).into_owned()),
        _ => None,
    }
}
