//! The heartbeat channel: echo every message back, on its own task, so the
//! kernel looks alive to clients however long a cell runs.

use crate::zmtp::Router;

/// Echoes until the task is aborted. `socket` is a REP served as a ROUTER:
/// the echo keeps the sender's routing id and envelope, which is a reply.
pub async fn run(mut socket: Router) {
    let replies = socket.sender();
    while let Some(ping) = socket.recv().await {
        replies.send(ping);
    }
}
