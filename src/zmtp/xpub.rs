//! XPUB: a message goes to every peer subscribed to a prefix of its first
//! frame, through that peer's own bounded queue, and subscriptions are
//! reported to the socket's owner (which greets each new subscriber).
//!
//! Subscriptions arrive as ZMTP 3.0 messages (`\x01` + topic to subscribe,
//! `\x00` + topic to cancel) or as ZMTP 3.1's SUBSCRIBE and CANCEL commands.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use tokio::sync::mpsc;

use super::codec;
use super::listener::{Listener, accept_loop};
use super::outbox::{self, Offered, Outbox};
use super::peer::{self, Incoming, Mechanism, Reader, Writer};

/// Subscriptions are small; a peer may not send bigger messages.
const SUBSCRIPTION_LIMIT: u64 = 64 << 10;
/// How many subscriptions may wait for the owner before peers wait.
const EVENT_QUEUE: usize = 256;

/// One connection to the socket, for [`XPub::send_to`].
pub type PeerId = u64;

/// A new subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    pub peer: PeerId,
    pub topic: Bytes,
}

/// A bound XPUB socket.
pub struct XPub {
    shared: Arc<Shared>,
    subscriptions: mpsc::Receiver<Subscription>,
    accept: tokio::task::JoinHandle<()>,
}

struct Shared {
    peers: Mutex<Peers>,
}

#[derive(Default)]
struct Peers {
    by_id: HashMap<PeerId, Subscriber>,
    next: PeerId,
}

struct Subscriber {
    /// Topics, one entry per subscription (a topic subscribed twice needs
    /// two cancels, as in libzmq).
    topics: Vec<Bytes>,
    outbox: Outbox,
}

impl XPub {
    pub fn start(listener: Listener, name: &'static str) -> Self {
        let (events, subscriptions) = mpsc::channel(EVENT_QUEUE);
        let shared = Arc::new(Shared {
            peers: Mutex::new(Peers::default()),
        });
        let accept_shared = shared.clone();
        let mechanism = listener.mechanism().clone();
        let accept = accept_loop(listener, name, move |reader, writer, peer| {
            serve_peer(
                accept_shared.clone(),
                events.clone(),
                mechanism.clone(),
                (reader, writer),
                peer,
            )
        });
        Self {
            shared,
            subscriptions,
            accept,
        }
    }

    /// Sends `frames` to every subscriber of a prefix of `frames[0]`. Never
    /// waits; a peer whose queue is full misses it.
    pub fn publish(&self, frames: Vec<Bytes>) {
        let Some(topic) = frames.first() else { return };
        let outboxes: Vec<Outbox> = {
            let peers = self.lock();
            peers
                .by_id
                .values()
                .filter(|sub| sub.topics.iter().any(|t| topic.starts_with(t)))
                .map(|sub| sub.outbox.clone())
                .collect()
        };
        for outbox in outboxes {
            outbox.offer(frames.clone());
        }
    }

    /// Resolves once what was published so far is written to every
    /// subscriber (it holds no borrow, so the caller may go on publishing);
    /// a subscriber that does not read keeps it waiting.
    pub fn drained(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let outboxes = self
            .lock()
            .by_id
            .values()
            .map(|sub| sub.outbox.clone())
            .collect();
        outbox::drain_all(outboxes)
    }

    /// Sends `frames` to one peer only (whatever it subscribed to).
    pub fn send_to(&self, peer: PeerId, frames: Vec<Bytes>) -> Offered {
        let outbox = self.lock().by_id.get(&peer).map(|sub| sub.outbox.clone());
        outbox.map_or(Offered::Closed, |outbox| outbox.offer(frames))
    }

    /// The next subscription made by any peer.
    pub async fn subscription(&mut self) -> Option<Subscription> {
        self.subscriptions.recv().await
    }

    /// How many peers are connected (for tests and logs).
    pub fn peer_count(&self) -> usize {
        self.lock().by_id.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Peers> {
        self.shared
            .peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for XPub {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn serve_peer(
    shared: Arc<Shared>,
    events: mpsc::Sender<Subscription>,
    mechanism: Mechanism,
    (reader, writer): (Reader, Writer),
    name: String,
) {
    let established = match peer::handshake(reader, writer, "XPUB", &mechanism).await {
        Ok(established) => established,
        Err(e) => return peer::log_refused(&name, &e),
    };
    let mut inbound = established.inbound;
    let (id, outbox) = {
        let mut peers = shared.peers.lock().unwrap_or_else(PoisonError::into_inner);
        peers.next += 1;
        let id = peers.next;
        let forget = {
            let shared = shared.clone();
            move || forget(&shared, id)
        };
        let outbox = Outbox::spawn(established.outbound, name.clone(), forget);
        peers.by_id.insert(
            id,
            Subscriber {
                topics: Vec::new(),
                outbox: outbox.clone(),
            },
        );
        (id, outbox)
    };
    loop {
        let change = match peer::read_incoming(&mut inbound, SUBSCRIPTION_LIMIT).await {
            Ok(Incoming::Message(frames)) => {
                frames.first().and_then(|frame| match frame.split_first() {
                    Some((1, _)) => Some((true, frame.slice(1..))),
                    Some((0, _)) => Some((false, frame.slice(1..))),
                    _ => None,
                })
            }
            Ok(Incoming::Command(body)) => match codec::split_command(&body) {
                Ok(("SUBSCRIBE", topic)) => Some((true, Bytes::copy_from_slice(topic))),
                Ok(("CANCEL", topic)) => Some((false, Bytes::copy_from_slice(topic))),
                _ => {
                    outbox.answer_ping(&body);
                    None
                }
            },
            Ok(Incoming::Oversized(_)) => None,
            Err(e) => {
                peer::log_closed(&name, &e);
                break;
            }
        };
        let Some((subscribe, topic)) = change else {
            continue;
        };
        {
            let mut peers = shared.peers.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(sub) = peers.by_id.get_mut(&id) else {
                break;
            };
            if subscribe {
                sub.topics.push(topic.clone());
            } else if let Some(at) = sub.topics.iter().position(|t| *t == topic) {
                sub.topics.swap_remove(at);
            }
        }
        // Reported after it is in place, so a greeting sent in answer arrives.
        if subscribe && events.send(Subscription { peer: id, topic }).await.is_err() {
            break;
        }
    }
    forget(&shared, id);
}

fn forget(shared: &Shared, id: PeerId) {
    shared
        .peers
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .by_id
        .remove(&id);
}
