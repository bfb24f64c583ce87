//! ROUTER: messages from any peer arrive with that connection's routing id
//! as their first frame, and a message sent with a routing id first goes to
//! that connection only.
//!
//! Every connection gets a routing id no other live connection has: the
//! identity it declares when that is free, otherwise one made up (a zero
//! byte and a counter, libzmq's form). So two clients that declare one
//! identity each get their own replies. Since a Jupyter client's shell and
//! stdin connections declare the same identity, [`RouterSender::client_of`]
//! and [`RouterSender::route_of`] pair a connection on one socket with its
//! client's connection on another: by that identity and, among connections
//! declaring it, by the order they connected in.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::{BufMut, Bytes, BytesMut};
use tokio::sync::mpsc;

use super::listener::{Listener, MAX_MESSAGE_BYTES, accept_loop};
use super::outbox::{self, Offered, Outbox};
use super::peer::{self, Incoming, Mechanism, Reader, Writer};

/// How many received messages may wait for the kernel before the peers
/// that send them wait too (TCP backpressure, one peer at a time).
const INCOMING_QUEUE: usize = 1024;

/// A bound ROUTER socket: receives from every peer.
pub struct Router {
    incoming: mpsc::Receiver<Vec<Bytes>>,
    sender: RouterSender,
    accept: tokio::task::JoinHandle<()>,
}

/// The sending side of a [`Router`]; cloning is cheap, sending never waits.
#[derive(Clone)]
pub struct RouterSender {
    shared: Arc<Shared>,
}

struct Shared {
    name: &'static str,
    peers: Mutex<Peers>,
}

#[derive(Default)]
struct Peers {
    by_route: HashMap<Bytes, Peer>,
    /// Counts connections, so each has a serial number in connecting order.
    serial: u64,
    /// The next made-up routing id.
    next_auto: u32,
}

struct Peer {
    serial: u64,
    /// The identity it declared (empty if none).
    declared: Bytes,
    outbox: Outbox,
}

/// A client as another socket sees it: the identity its connections
/// declare, and which of the connections declaring it this is (0: the
/// oldest still connected).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    pub identity: Bytes,
    pub rank: usize,
}

impl Router {
    /// Serves `listener` as a socket of type `socket_type` (`ROUTER`, or
    /// `REP` for a heartbeat that echoes).
    pub fn start(listener: Listener, name: &'static str, socket_type: &'static str) -> Self {
        let (incoming_tx, incoming) = mpsc::channel(INCOMING_QUEUE);
        let shared = Arc::new(Shared {
            name,
            peers: Mutex::new(Peers::default()),
        });
        let accept_shared = shared.clone();
        let mechanism = listener.mechanism().clone();
        let accept = accept_loop(listener, name, move |reader, writer, peer| {
            serve_peer(
                accept_shared.clone(),
                (socket_type, mechanism.clone()),
                incoming_tx.clone(),
                (reader, writer),
                peer,
            )
        });
        Self {
            incoming,
            sender: RouterSender { shared },
            accept,
        }
    }

    /// The next message: the sender's routing id, then its frames.
    pub async fn recv(&mut self) -> Option<Vec<Bytes>> {
        self.incoming.recv().await
    }

    /// A handle for sending on this socket.
    pub fn sender(&self) -> RouterSender {
        self.sender.clone()
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl RouterSender {
    /// Sends `frames[1..]` to the connection whose routing id is `frames[0]`.
    /// A message for no connected peer is dropped, as libzmq's ROUTER does.
    pub fn send(&self, mut frames: Vec<Bytes>) -> Offered {
        if frames.len() < 2 {
            return Offered::Closed;
        }
        let route = frames.remove(0);
        let outbox = self.lock().by_route.get(&route).map(|p| p.outbox.clone());
        match outbox {
            Some(outbox) => outbox.offer(frames),
            None => {
                tracing::debug!("{}: no peer {route:?}; message dropped", self.shared.name);
                Offered::Closed
            }
        }
    }

    /// Waits until what was sent so far is written to every peer; a peer
    /// that does not read keeps this waiting, so bound it with a deadline.
    pub async fn drain(&self) {
        let outboxes = self
            .lock()
            .by_route
            .values()
            .map(|p| p.outbox.clone())
            .collect();
        outbox::drain_all(outboxes).await;
    }

    /// The client behind the connection with routing id `route`.
    pub fn client_of(&self, route: &[u8]) -> Option<Client> {
        let peers = self.lock();
        let peer = peers.by_route.get(route)?;
        if peer.declared.is_empty() {
            return Some(Client {
                identity: Bytes::copy_from_slice(route),
                rank: 0,
            });
        }
        let rank = peers
            .by_route
            .values()
            .filter(|other| other.declared == peer.declared && other.serial < peer.serial)
            .count();
        Some(Client {
            identity: peer.declared.clone(),
            rank,
        })
    }

    /// The routing id of `client`'s connection to this socket: the one
    /// declaring its identity with its rank, else the newest declaring it.
    pub fn route_of(&self, client: &Client) -> Option<Bytes> {
        let peers = self.lock();
        let mut same: Vec<(&Bytes, &Peer)> = peers
            .by_route
            .iter()
            .filter(|(_, peer)| peer.declared == client.identity)
            .collect();
        same.sort_by_key(|(_, peer)| peer.serial);
        same.get(client.rank)
            .or(same.last())
            .map(|(route, _)| (*route).clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Peers> {
        self.shared
            .peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// One connection, from handshake to close.
async fn serve_peer(
    shared: Arc<Shared>,
    (socket_type, mechanism): (&'static str, Mechanism),
    incoming: mpsc::Sender<Vec<Bytes>>,
    (reader, writer): (Reader, Writer),
    name: String,
) {
    let established = match peer::handshake(reader, writer, socket_type, &mechanism).await {
        Ok(established) => established,
        Err(e) => return peer::log_refused(&name, &e),
    };
    let (ready, mut inbound) = (established.peer, established.inbound);
    let (route, serial, outbox) = {
        let mut peers = shared.peers.lock().unwrap_or_else(PoisonError::into_inner);
        peers.serial += 1;
        let serial = peers.serial;
        let route = if !ready.identity.is_empty() && !peers.by_route.contains_key(&ready.identity) {
            ready.identity.clone()
        } else {
            made_up_route(&mut peers)
        };
        let forget = {
            let shared = shared.clone();
            let route = route.clone();
            move || forget(&shared, &route, serial)
        };
        let outbox = Outbox::spawn(established.outbound, name.clone(), forget);
        peers.by_route.insert(
            route.clone(),
            Peer {
                serial,
                declared: ready.identity,
                outbox: outbox.clone(),
            },
        );
        (route, serial, outbox)
    };
    tracing::debug!("{name}: connected as {route:?}");
    loop {
        match peer::read_incoming(&mut inbound, MAX_MESSAGE_BYTES).await {
            Ok(Incoming::Message(mut frames)) => {
                frames.insert(0, route.clone());
                if incoming.send(frames).await.is_err() {
                    break;
                }
            }
            Ok(Incoming::Oversized(size)) => {
                tracing::warn!(
                    "{name}: dropped a message of {size} bytes (over the {MAX_MESSAGE_BYTES}-byte limit)"
                );
            }
            Ok(Incoming::Command(command)) => {
                outbox.answer_ping(&command);
            }
            Err(e) => {
                peer::log_closed(&name, &e);
                break;
            }
        }
    }
    forget(&shared, &route, serial);
}

/// Removes the peer at `route` if it is still the connection `serial`
/// (the route may have gone to a newer connection since).
fn forget(shared: &Shared, route: &Bytes, serial: u64) {
    let mut peers = shared.peers.lock().unwrap_or_else(PoisonError::into_inner);
    if peers
        .by_route
        .get(route)
        .is_some_and(|p| p.serial == serial)
    {
        peers.by_route.remove(route);
    }
}

/// A routing id no live connection has: a zero byte, then a counter.
fn made_up_route(peers: &mut Peers) -> Bytes {
    loop {
        let mut id = BytesMut::with_capacity(5);
        id.put_u8(0);
        id.put_u32(peers.next_auto);
        peers.next_auto = peers.next_auto.wrapping_add(1);
        let id = id.freeze();
        if !peers.by_route.contains_key(&id) {
            return id;
        }
    }
}
