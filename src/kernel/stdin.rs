//! The stdin channel: `input()` in a cell becomes an `input_request` to the
//! client that sent the cell, and its `input_reply` becomes the return value.
//!
//! One task owns the ROUTER socket. The interpreter thread asks for input
//! through [`Stdin::request`] and waits on a plain channel (so it can also
//! watch for interrupts); replies that arrive with nobody waiting, such as
//! one for an interrupted request, are dropped.

use std::sync::Arc;
use std::sync::mpsc as std_mpsc;

use bytes::Bytes;
use jupyter_protocol::InputRequest;
use serde_json::Value;
use tokio::sync::mpsc;
use zeromq::{RouterRecvHalf, RouterSendHalf, RouterSocket, SocketRecv, SocketSend, ZmqMessage};

use crate::wire::{Codec, Outgoing};

struct Request {
    prompt: String,
    password: bool,
    identities: Vec<Bytes>,
    parent: Arc<Value>,
    reply: std_mpsc::Sender<String>,
}

/// A handle for asking the client for input. Cloning is cheap.
#[derive(Clone)]
pub struct Stdin {
    requests: mpsc::UnboundedSender<Request>,
}

impl Stdin {
    pub fn start(socket: RouterSocket, codec: Arc<Codec>) -> (Self, tokio::task::JoinHandle<()>) {
        let (requests, receiver) = mpsc::unbounded_channel();
        let (send, recv) = socket.split();
        let task = tokio::spawn(run(send, recv, codec, receiver));
        (Self { requests }, task)
    }

    /// Sends an input_request to the client at `identities`, parented to the
    /// execute request `parent`; the answer arrives on the returned channel.
    pub fn request(
        &self,
        prompt: &str,
        password: bool,
        identities: Vec<Bytes>,
        parent: Arc<Value>,
    ) -> std_mpsc::Receiver<String> {
        let (reply, answer) = std_mpsc::channel();
        let request = Request {
            prompt: prompt.to_owned(),
            password,
            identities,
            parent,
            reply,
        };
        // If the task is gone (shutdown), the receiver reports disconnection.
        let _ = self.requests.send(request);
        answer
    }
}

async fn run(
    mut send: RouterSendHalf,
    mut recv: RouterRecvHalf,
    codec: Arc<Codec>,
    mut requests: mpsc::UnboundedReceiver<Request>,
) {
    let mut waiting: Option<std_mpsc::Sender<String>> = None;
    loop {
        tokio::select! {
            request = requests.recv() => {
                let Some(request) = request else { return };
                let prompt = InputRequest { prompt: request.prompt, password: request.password };
                let mut out = Outgoing::typed(prompt, request.parent);
                out.identities = request.identities;
                match ZmqMessage::try_from(codec.encode(&out)) {
                    Ok(message) => {
                        if let Err(e) = send.send(message).await {
                            tracing::warn!("stdin: cannot send input_request: {e}");
                        }
                    }
                    Err(e) => tracing::warn!("stdin: cannot frame input_request: {e:?}"),
                }
                waiting = Some(request.reply);
            }
            incoming = recv.recv() => {
                let frames = match incoming {
                    Ok(message) => message.into_vec(),
                    Err(e) => {
                        tracing::debug!("stdin: receive error: {e}");
                        continue;
                    }
                };
                let message = match codec.decode(frames) {
                    Ok(message) => message,
                    Err(e) => {
                        tracing::warn!("stdin: dropped message: {e}");
                        continue;
                    }
                };
                if message.header.msg_type != "input_reply" {
                    tracing::warn!("stdin: unexpected {}", message.header.msg_type);
                    continue;
                }
                let value = message.content.get("value").and_then(Value::as_str).unwrap_or_default();
                match waiting.take() {
                    Some(reply) => {
                        let _ = reply.send(value.to_owned());
                    }
                    None => tracing::debug!("stdin: input_reply with no input() waiting"),
                }
            }
        }
    }
}
