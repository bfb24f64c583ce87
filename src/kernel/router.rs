//! What the shell and control channels share: receiving decoded requests from
//! a ROUTER socket, replying to their senders, and the busy/idle envelope.

use std::sync::Arc;

use jupyter_protocol::{ExecutionState, JupyterMessageContent};
use serde_json::{Value, json};

use super::iopub::Iopub;
use crate::wire::{Codec, Message, Outgoing};
use crate::zmtp::{Offered, Router, RouterSender};

/// The receiving side of one ROUTER channel (shell or control).
pub struct RouterChannel {
    pub name: &'static str,
    socket: Router,
    codec: Arc<Codec>,
}

/// The replying side of a ROUTER channel, shared by everyone who answers
/// its requests (the main shell and each subshell answer on shell). A reply
/// goes to its client's own queue: a client that does not read its replies
/// delays nobody else's.
#[derive(Clone)]
pub struct Replies {
    pub name: &'static str,
    send: RouterSender,
    codec: Arc<Codec>,
    pub iopub: Iopub,
}

impl RouterChannel {
    /// The receiving and replying sides of `socket`.
    pub fn new(
        name: &'static str,
        socket: Router,
        codec: Arc<Codec>,
        iopub: Iopub,
    ) -> (Self, Replies) {
        let replies = Replies {
            name,
            send: socket.sender(),
            codec: codec.clone(),
            iopub,
        };
        (
            Self {
                name,
                socket,
                codec,
            },
            replies,
        )
    }

    /// The next authentic, well-formed request. Anything else is logged and
    /// dropped here, unanswered, as jupyter_client and ipykernel do.
    pub async fn next(&mut self) -> Message {
        loop {
            let Some(frames) = self.socket.recv().await else {
                // The socket's peers feed it until it is dropped.
                std::future::pending::<()>().await;
                continue;
            };
            match self.codec.decode(frames) {
                Ok(message) => return message,
                Err(e) => tracing::warn!("{}: dropped message: {e}", self.name),
            }
        }
    }
}

impl Replies {
    /// Sends `content` as `reply_type` to the sender of `request`.
    pub async fn reply(&self, request: &Message, reply_type: &str, content: Value) {
        let out = Outgoing::reply_to(request, reply_type, content);
        self.send_outgoing(out).await;
    }

    pub async fn send_outgoing(&self, out: Outgoing) {
        match self.send.send(self.codec.encode(&out)) {
            Offered::Queued => {}
            Offered::Dropped => {
                tracing::debug!(
                    "{}: {} dropped (client not reading)",
                    self.name,
                    out.msg_type
                )
            }
            Offered::Closed => tracing::debug!("{}: {} for a gone client", self.name, out.msg_type),
        }
    }

    /// Sends `content`, one of jupyter-protocol's reply types, to the sender
    /// of `request`.
    pub async fn reply_typed(&self, request: &Message, content: impl Into<JupyterMessageContent>) {
        let mut out = Outgoing::typed(content, request.raw_header.clone());
        out.identities = request.identities.clone();
        self.send_outgoing(out).await;
    }

    /// Replies with `status: error`, for a request the kernel cannot serve
    /// (built by hand: any request type can get it).
    pub async fn reply_error(&self, request: &Message, ename: &str, evalue: &str) {
        let reply_type = reply_type(&request.header.msg_type);
        let content = json!({
            "status": "error",
            "ename": ename,
            "evalue": evalue,
            "traceback": [],
        });
        self.reply(request, &reply_type, content).await;
    }

    pub fn busy(&self, request: &Message) {
        self.iopub
            .status(ExecutionState::Busy, request.raw_header.clone());
    }

    pub fn idle(&self, request: &Message) {
        self.iopub
            .status(ExecutionState::Idle, request.raw_header.clone());
    }
}

/// `foo_request` -> `foo_reply`; other names get `_reply` appended.
pub fn reply_type(request_type: &str) -> String {
    match request_type.strip_suffix("_request") {
        Some(stem) => format!("{stem}_reply"),
        None => format!("{request_type}_reply"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reply_type_mirrors_the_request() {
        assert_eq!(
            super::reply_type("kernel_info_request"),
            "kernel_info_reply"
        );
        assert_eq!(super::reply_type("odd"), "odd_reply");
    }
}
