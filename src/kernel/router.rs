//! What the shell and control channels share: receiving decoded requests from
//! a ROUTER socket, replying to their senders, and the busy/idle envelope.

use std::sync::Arc;

use jupyter_protocol::{ExecutionState, JupyterMessageContent};
use serde_json::{Value, json};
use zeromq::{RouterRecvHalf, RouterSendHalf, SocketRecv, SocketSend, ZmqMessage};

use super::iopub::Iopub;
use crate::wire::{Codec, Message, Outgoing};

/// The receiving side of one ROUTER channel (shell or control).
pub struct RouterChannel {
    pub name: &'static str,
    recv: RouterRecvHalf,
    codec: Arc<Codec>,
}

/// The replying side of a ROUTER channel, shared by everyone who answers
/// its requests (the main shell and each subshell answer on shell).
#[derive(Clone)]
pub struct Replies {
    pub name: &'static str,
    send: Arc<tokio::sync::Mutex<RouterSendHalf>>,
    codec: Arc<Codec>,
    pub iopub: Iopub,
}

impl RouterChannel {
    /// The two sides of the ROUTER socket that `split` came from.
    pub fn new(
        name: &'static str,
        (send, recv): (RouterSendHalf, RouterRecvHalf),
        codec: Arc<Codec>,
        iopub: Iopub,
    ) -> (Self, Replies) {
        let replies = Replies {
            name,
            send: Arc::new(tokio::sync::Mutex::new(send)),
            codec: codec.clone(),
            iopub,
        };
        (Self { name, recv, codec }, replies)
    }

    /// The next authentic, well-formed request. Anything else is logged and
    /// dropped here, unanswered, as jupyter_client and ipykernel do.
    pub async fn next(&mut self) -> Message {
        loop {
            let frames = match self.recv.recv().await {
                Ok(message) => message.into_vec(),
                Err(e) => {
                    tracing::debug!("{}: receive error: {e}", self.name);
                    continue;
                }
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
        let frames = self.codec.encode(&out);
        match ZmqMessage::try_from(frames) {
            Ok(message) => {
                if let Err(e) = self.send.lock().await.send(message).await {
                    tracing::warn!("{}: failed to send {}: {e}", self.name, out.msg_type);
                }
            }
            Err(e) => tracing::warn!("{}: cannot frame {}: {e:?}", self.name, out.msg_type),
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
