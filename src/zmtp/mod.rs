//! ZeroMQ's transport, the listening side the kernel needs: ZMTP 3.0 with
//! the NULL or CURVE mechanism over TCP or Unix sockets, and the three socket kinds
//! a Jupyter kernel binds: ROUTER (shell, control, stdin), XPUB (IOPub) and
//! REP (heartbeat, served as a ROUTER that echoes). Also the connecting
//! side a client of a kernel needs (DEALER, SUB), for `mahtab mcp`.
//!
//! Why not a general ZeroMQ library: the kernel needs two guarantees the
//! pure-Rust `zeromq` crate (0.7) does not give. Its XPUB awaits each
//! subscriber in turn, so one client that stops reading stalls IOPub for
//! all; and its ROUTER keys peers by the identity they declare, so two
//! clients declaring one identity (every client of a jupyter_client
//! `KernelManager` does) get each other's replies. Here every peer has a
//! writer task and a bounded queue of its own (messages past the bound are
//! dropped for that peer only, as libzmq's PUB and ROUTER drop at their
//! high-water mark), and every connection has a routing id of its own.
//! Clients are libzmq (pyzmq) and any other ZMTP 3.x peer; the integration
//! tests talk to it with the `zeromq` crate.

pub mod codec;
mod connect;
pub mod curve;
mod listener;
mod outbox;
mod peer;
mod router;
mod xpub;

pub use connect::{Connection, Sender};
pub use listener::{Endpoint, Listener, MAX_MESSAGE_BYTES};
pub use outbox::{Offered, QUEUE_BYTES, QUEUE_MESSAGES};
pub use peer::Mechanism;
pub use router::{Client, Router, RouterSender};
pub use xpub::{PeerId, Subscription, XPub};
