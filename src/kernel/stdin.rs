//! The stdin channel: `input()` in a cell becomes an `input_request` to the
//! client that sent the cell, and its `input_reply` becomes the return value.
//!
//! One task owns the ROUTER socket. The interpreter thread asks for input
//! through [`Stdin::request`] and waits on a plain channel (so it can also
//! watch for interrupts). Several prompts can wait at once (a subshell's cell
//! and the main shell's): each `input_reply` goes to the prompt its parent
//! header names, and only a reply that names none goes to the oldest prompt
//! still waiting. Replies for nobody (an interrupted prompt's) are dropped.

use std::sync::Arc;
use std::sync::mpsc as std_mpsc;

use bytes::Bytes;
use jupyter_protocol::InputRequest;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::wire::{Codec, Outgoing};
use crate::zmtp::{Router, RouterSender};

/// How many prompts are remembered as waiting; older ones (interrupted
/// prompts nobody answered) are forgotten first.
const MAX_WAITING: usize = 64;

struct Request {
    prompt: String,
    password: bool,
    /// The shell request's ROUTER identities.
    identities: Vec<Bytes>,
    parent: Arc<Value>,
    reply: std_mpsc::Sender<String>,
}

/// A handle for asking the client for input. Cloning is cheap.
#[derive(Clone)]
pub struct Stdin {
    requests: mpsc::UnboundedSender<Request>,
}

/// A prompt sent and not yet answered.
struct Waiting {
    /// The input_request's msg_id, which its reply names as parent.
    msg_id: String,
    reply: std_mpsc::Sender<String>,
}

impl Stdin {
    /// Serves `socket`; `shell` tells which client sent a shell request, so
    /// its prompt goes to that client's stdin connection.
    pub fn start(
        socket: Router,
        shell: RouterSender,
        codec: Arc<Codec>,
        closing: CancellationToken,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (requests, receiver) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(socket, shell, codec, receiver, closing));
        (Self { requests }, task)
    }

    /// Sends an input_request to the client at `identities` (those of its
    /// shell request), parented to that request `parent`; the answer arrives
    /// on the returned channel.
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
    mut socket: Router,
    shell: RouterSender,
    codec: Arc<Codec>,
    mut requests: mpsc::UnboundedReceiver<Request>,
    closing: CancellationToken,
) {
    let send = socket.sender();
    let mut waiting: Vec<Waiting> = Vec::new();
    loop {
        tokio::select! {
            _ = closing.cancelled() => return,
            request = requests.recv() => {
                let Some(request) = request else { return };
                let prompt = InputRequest { prompt: request.prompt, password: request.password };
                let mut out = Outgoing::typed(prompt, request.parent);
                out.identities = stdin_identities(&shell, &send, request.identities);
                let msg_id = uuid::Uuid::new_v4().to_string();
                send.send(codec.encode_with_id(&out, &msg_id));
                if waiting.len() == MAX_WAITING {
                    waiting.remove(0);
                }
                waiting.push(Waiting { msg_id, reply: request.reply });
            }
            Some(frames) = socket.recv() => {
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
                let parent = message.parent_header.get("msg_id").and_then(Value::as_str);
                answer(&mut waiting, parent, value);
            }
        }
    }
}

/// Hands `value` to the prompt whose msg_id is `parent`, or with no parent
/// to the oldest prompt still waiting.
fn answer(waiting: &mut Vec<Waiting>, parent: Option<&str>, value: &str) {
    match parent.filter(|id| !id.is_empty()) {
        Some(id) => match waiting.iter().position(|w| w.msg_id == id) {
            Some(at) => {
                let _ = waiting.remove(at).reply.send(value.to_owned());
            }
            None => tracing::debug!("stdin: input_reply to no waiting prompt"),
        },
        None => {
            // Prompts given up on (interrupted) no longer listen: skip them.
            while !waiting.is_empty() {
                if waiting.remove(0).reply.send(value.to_owned()).is_ok() {
                    return;
                }
            }
            tracing::debug!("stdin: input_reply with no input() waiting");
        }
    }
}

/// The ROUTER identities that reach, on stdin, the client whose shell
/// request came with `shell_identities`: its stdin connection declares the
/// same identity as its shell connection.
fn stdin_identities(
    shell: &RouterSender,
    stdin: &RouterSender,
    mut shell_identities: Vec<Bytes>,
) -> Vec<Bytes> {
    let route = shell_identities
        .first()
        .and_then(|route| shell.client_of(route))
        .and_then(|client| stdin.route_of(&client));
    if let (Some(route), Some(first)) = (route, shell_identities.first_mut()) {
        *first = route;
    }
    shell_identities
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(id: &str) -> (Waiting, std_mpsc::Receiver<String>) {
        let (reply, answer) = std_mpsc::channel();
        let waiting = Waiting {
            msg_id: id.to_owned(),
            reply,
        };
        (waiting, answer)
    }

    #[test]
    fn each_reply_reaches_the_prompt_it_names() {
        let (a, answer_a) = prompt("a");
        let (b, answer_b) = prompt("b");
        let mut waiting = vec![a, b];
        answer(&mut waiting, Some("b"), "for b");
        answer(&mut waiting, Some("a"), "for a");
        assert_eq!(answer_a.try_recv().unwrap(), "for a");
        assert_eq!(answer_b.try_recv().unwrap(), "for b");
        assert!(waiting.is_empty());
    }

    #[test]
    fn a_reply_naming_no_prompt_goes_to_the_oldest_still_listening() {
        let (gone, answer_gone) = prompt("gone");
        drop(answer_gone);
        let (a, answer_a) = prompt("a");
        let (b, answer_b) = prompt("b");
        let mut waiting = vec![gone, a, b];
        answer(&mut waiting, None, "first");
        assert_eq!(answer_a.try_recv().unwrap(), "first");
        assert!(answer_b.try_recv().is_err());
        // A reply to a prompt nobody waits for is dropped.
        answer(&mut waiting, Some("unknown"), "lost");
        assert!(answer_b.try_recv().is_err());
        assert_eq!(waiting.len(), 1);
    }
}
