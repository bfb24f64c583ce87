//! The heartbeat channel: echo every message back, on its own task, so the
//! kernel looks alive to clients however long a cell runs.

use tokio_util::sync::CancellationToken;

use crate::zmtp::Router;

/// Echoes until `stop` is cancelled. `socket` is a REP served as a ROUTER:
/// the echo keeps the sender's routing id and envelope, which is a reply.
pub async fn run(mut socket: Router, stop: CancellationToken) {
    let replies = socket.sender();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            ping = socket.recv() => match ping {
                Some(ping) => { replies.send(ping); }
                None => return,
            },
        }
    }
}
