//! The IOPub channel: one actor task owns the XPUB socket; everyone else
//! publishes through a cloneable [`Iopub`] handle.
//!
//! The actor signs each message and hands it to the socket, which queues it
//! for each subscriber without waiting (a subscriber that stops reading
//! misses messages past its queue's bound; the others are not delayed). On
//! each subscription it sends `iopub_welcome` (JEP 65) to that subscriber and
//! records that a subscriber exists, which the shell uses to avoid publishing
//! a client's first request into the void (the slow-joiner race).

use std::sync::Arc;
use std::time::Duration;

use crate::wire::{Codec, Outgoing, no_parent};
use crate::zmtp::XPub;
use bytes::Bytes;
use jupyter_protocol::{ExecutionState, IoPubWelcome, Status};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

enum Command {
    Publish(Box<Outgoing>),
    /// Answered once everything published before it has been written to
    /// every subscriber.
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
    /// Publishes on `socket` until `closing` is cancelled.
    pub fn start(
        socket: XPub,
        codec: Arc<Codec>,
        closing: CancellationToken,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (commands, receiver) = mpsc::unbounded_channel();
        let (subscribed_tx, subscribed) = watch::channel(false);
        let task = tokio::spawn(run(socket, codec, receiver, subscribed_tx, closing));
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
        let _ = self.commands.send(Command::Publish(Box::new(out)));
    }

    /// Publishes `status` with the given execution state.
    pub fn status(&self, execution_state: ExecutionState, parent: Arc<Value>) {
        self.send(Outgoing::typed(Status { execution_state }, parent));
    }

    /// Waits until everything published so far has been queued for each
    /// subscriber (never for a subscriber to read it).
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
    mut socket: XPub,
    codec: Arc<Codec>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    subscribed: watch::Sender<bool>,
    closing: CancellationToken,
) {
    loop {
        // Not biased: a steady stream of output must not keep a new
        // subscriber waiting for its welcome.
        tokio::select! {
            _ = closing.cancelled() => break,
            command = commands.recv() => match command {
                Some(Command::Publish(out)) => socket.publish(codec.encode(&out)),
                Some(Command::Flush(done)) => {
                    // Waited for beside the loop: a subscriber that does
                    // not read must not stop publishing to the others,
                    // nor hold its connection open once the kernel closes.
                    let drained = socket.drained();
                    let closing = closing.clone();
                    tokio::spawn(async move {
                        tokio::select! {
                            () = drained => { let _ = done.send(()); }
                            () = closing.cancelled() => {}
                        }
                    });
                }
                None => break,
            },
            Some(subscription) = socket.subscription() => {
                let topic = String::from_utf8_lossy(&subscription.topic).into_owned();
                tracing::debug!("iopub: new subscription {topic:?}");
                let mut welcome = Outgoing::typed(IoPubWelcome::new(topic), no_parent());
                welcome.identities = vec![subscription.topic];
                socket.send_to(subscription.peer, codec.encode(&welcome));
                subscribed.send_replace(true);
            }
        }
    }
}
