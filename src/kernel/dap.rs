//! A Debug Adapter Protocol client connection: messages framed as
//! `Content-Length: N\r\n\r\n` and N bytes of UTF-8 JSON, over TCP to a
//! debug adapter (debugpy's). Requests get sequence numbers of this
//! connection, and their responses are matched by `request_seq`; events go
//! to a callback as they arrive.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::oneshot;

/// A response the kernel writes itself, to a request it answers without
/// the adapter (or when the adapter could not answer).
#[derive(Debug, serde::Serialize)]
pub struct Response {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Value::is_null")]
    request_seq: Value,
    success: bool,
    command: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<Value>,
}

impl Response {
    /// `command` succeeded, with `body` where it has one.
    pub fn success(command: &str, body: Option<Value>) -> Self {
        Self {
            kind: "response",
            request_seq: Value::Null,
            success: true,
            command: command.to_owned(),
            message: None,
            body,
        }
    }

    /// `command` failed, for the reason `message` gives.
    pub fn failure(command: &str, message: impl Into<String>) -> Self {
        Self {
            success: false,
            message: Some(message.into()),
            ..Self::success(command, None)
        }
    }

    /// The same, with a body (a failure's, where a frontend expects one).
    pub fn with_body(self, body: Value) -> Self {
        Self {
            body: Some(body),
            ..self
        }
    }

    /// The same, naming `request` (by its `seq`) as the one it answers.
    pub fn answering(self, request: &Value) -> Self {
        Self {
            request_seq: request["seq"].clone(),
            ..self
        }
    }

    pub fn into_json(self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// How long a request waits for its response before it is given up.
const RESPONSE_LIMIT: Duration = Duration::from_secs(30);

/// Why a request got no response.
#[derive(Debug, thiserror::Error)]
pub enum DapError {
    #[error("the debug adapter connection failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the debug adapter closed the connection")]
    Closed,
    #[error("the debug adapter did not answer {0} in time")]
    Timeout(String),
}

type Pending = Arc<Mutex<HashMap<i64, oneshot::Sender<Value>>>>;

/// A connection to a debug adapter.
pub struct DapClient {
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    next_seq: Mutex<i64>,
    pending: Pending,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for DapClient {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl DapClient {
    /// Connects to the adapter at `port` on loopback; `on_event` gets every
    /// event, in order.
    pub async fn connect(
        port: u16,
        on_event: impl Fn(Value) + Send + 'static,
    ) -> Result<Self, DapError> {
        let stream = TcpStream::connect(("127.0.0.1", port)).await?;
        let (mut read, writer) = stream.into_split();
        let pending: Pending = Arc::default();
        let responses = pending.clone();
        let reader = tokio::spawn(async move {
            let mut frames = Frames::default();
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                let n = match read.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                for message in frames.push(&chunk[..n]) {
                    if message["type"] == "response" {
                        let seq = message["request_seq"].as_i64().unwrap_or(-1);
                        let waiting = responses
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .remove(&seq);
                        if let Some(waiting) = waiting {
                            let _ = waiting.send(message);
                        }
                    } else {
                        on_event(message);
                    }
                }
            }
            // Whoever still waits learns the connection is gone.
            responses
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clear();
        });
        Ok(Self {
            writer: tokio::sync::Mutex::new(writer),
            next_seq: Mutex::new(1),
            pending,
            reader,
        })
    }

    /// Sends `command` with `arguments` and waits for its response.
    pub async fn request(&self, command: &str, arguments: Value) -> Result<Value, DapError> {
        let (seq, response) = self.send(command, arguments).await?;
        self.response(seq, command, response).await
    }

    /// Sends a request; its sequence number and where its response arrives.
    pub async fn send(
        &self,
        command: &str,
        arguments: Value,
    ) -> Result<(i64, oneshot::Receiver<Value>), DapError> {
        let seq = {
            let mut next = self.next_seq.lock().unwrap_or_else(PoisonError::into_inner);
            let seq = *next;
            *next += 1;
            seq
        };
        let (sender, response) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(seq, sender);
        let message = json!({
            "seq": seq,
            "type": "request",
            "command": command,
            "arguments": arguments,
        });
        let body = message.to_string();
        let mut writer = self.writer.lock().await;
        writer
            .write_all(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes())
            .await?;
        writer.write_all(body.as_bytes()).await?;
        Ok((seq, response))
    }

    /// Waits for the response to the request `seq` sent as `command`.
    pub async fn response(
        &self,
        seq: i64,
        command: &str,
        response: oneshot::Receiver<Value>,
    ) -> Result<Value, DapError> {
        match tokio::time::timeout(RESPONSE_LIMIT, response).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(_)) => Err(DapError::Closed),
            Err(_) => {
                self.pending
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&seq);
                Err(DapError::Timeout(command.to_owned()))
            }
        }
    }
}

/// Cuts a byte stream into DAP messages.
#[derive(Default)]
struct Frames {
    buffer: Vec<u8>,
}

impl Frames {
    /// Takes more bytes; returns the messages now complete. A message that
    /// is not JSON is logged and skipped.
    fn push(&mut self, bytes: &[u8]) -> Vec<Value> {
        self.buffer.extend_from_slice(bytes);
        let mut messages = Vec::new();
        while let Some(end) = find(&self.buffer, b"\r\n\r\n") {
            let length = String::from_utf8_lossy(&self.buffer[..end])
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.trim()
                        .eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                });
            let Some(length) = length else {
                tracing::warn!("debugger: a message without Content-Length; dropped");
                self.buffer.drain(..end + 4);
                continue;
            };
            let start = end + 4;
            if self.buffer.len() < start + length {
                break;
            }
            let body: Vec<u8> = self.buffer.drain(..start + length).skip(start).collect();
            match serde_json::from_slice(&body) {
                Ok(message) => messages.push(message),
                Err(e) => tracing::warn!("debugger: an unreadable message ({e}); dropped"),
            }
        }
        messages
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(body: &str) -> Vec<u8> {
        format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
    }

    #[test]
    fn messages_are_cut_at_their_length_in_bytes_however_they_arrive() {
        let first = r#"{"type":"event","event":"output","body":{"output":"é日本\n"}}"#;
        let second = r#"{"type":"response","request_seq":3}"#;
        let mut stream = framed(first);
        stream.extend(framed(second));
        // One byte at a time, splitting the UTF-8 sequences too.
        let mut frames = Frames::default();
        let mut got = Vec::new();
        for byte in &stream {
            got.extend(frames.push(std::slice::from_ref(byte)));
        }
        assert_eq!(got.len(), 2);
        assert_eq!(got[0]["body"]["output"], "é日本\n");
        assert_eq!(got[1]["request_seq"], 3);
        // All at once, too.
        assert_eq!(Frames::default().push(&stream).len(), 2);
    }

    #[test]
    fn garbage_is_skipped() {
        let mut frames = Frames::default();
        let mut stream = b"X-Nothing: 1\r\n\r\n".to_vec();
        stream.extend(framed("not json"));
        stream.extend(framed(r#"{"type":"event"}"#));
        assert_eq!(frames.push(&stream), [json!({"type": "event"})]);
    }
}
