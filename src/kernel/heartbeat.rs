//! The heartbeat channel: echo every message back, on its own task, so the
//! kernel looks alive to clients however long a cell runs.

use zeromq::{RepSocket, SocketRecv, SocketSend};

pub async fn run(mut socket: RepSocket) {
    loop {
        match socket.recv().await {
            Ok(ping) => {
                if let Err(e) = socket.send(ping).await {
                    tracing::debug!("heartbeat: reply failed: {e}");
                }
            }
            Err(e) => tracing::debug!("heartbeat: receive error: {e}"),
        }
    }
}
