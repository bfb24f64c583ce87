//! A real HTTP server on loopback that answers chat requests with recorded
//! OpenAI-style SSE streams, one scripted answer per request, and records
//! the requests it got.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the server sends for one request.
#[derive(Clone)]
pub enum Reply {
    /// Stream this text in chunks of a few characters, then usage and [DONE].
    Answer(String),
    /// Send the first chunk, then stay silent for this long.
    Stall(String, Duration),
    /// Answer with this HTTP status and JSON body.
    Status(u16, String),
}

pub struct FakeLlm {
    pub base_url: String,
    pub requests: Arc<Mutex<Vec<Value>>>,
}

impl FakeLlm {
    pub async fn start(script: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(script.into_iter()));
        let seen = requests.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let script = script.clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    let Some(body) = read_request(&mut socket).await else {
                        return;
                    };
                    seen.lock().unwrap().push(body);
                    let reply = script.lock().unwrap().next();
                    let reply = reply.unwrap_or(Reply::Status(
                        500,
                        "{\"error\":{\"message\":\"script exhausted\"}}".into(),
                    ));
                    let _ = respond(&mut socket, reply).await;
                });
            }
        });
        Self { base_url, requests }
    }

    /// The environment that points a kernel at this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("OPENAI_BASE_URL", self.base_url.clone()),
            ("MAHTAB_MODEL", "fake-model".into()),
        ]
    }
}

/// Reads one HTTP request; returns its JSON body.
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<Value> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&data);
        if let Some(end) = text.find("\r\n\r\n") {
            let length: usize = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().ok())
                })
                .flatten()
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                return serde_json::from_slice(&data[end + 4..end + 4 + length]).ok();
            }
        }
    }
}

fn chunk(text: &str) -> String {
    let event = json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}], "usage": null});
    format!("data: {event}\n\n")
}

async fn respond(socket: &mut tokio::net::TcpStream, reply: Reply) -> std::io::Result<()> {
    match reply {
        Reply::Status(status, body) => {
            let head = format!(
                "HTTP/1.1 {status} Error\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            socket.write_all(head.as_bytes()).await?;
            socket.write_all(body.as_bytes()).await
        }
        Reply::Answer(text) => {
            socket.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n").await?;
            let chars: Vec<char> = text.chars().collect();
            for piece in chars.chunks(7) {
                socket
                    .write_all(chunk(&piece.iter().collect::<String>()).as_bytes())
                    .await?;
            }
            let usage = json!({"id": "c", "choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42}});
            socket
                .write_all(format!("data: {usage}\n\ndata: [DONE]\n\n").as_bytes())
                .await
        }
        Reply::Stall(first, pause) => {
            socket.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n").await?;
            socket.write_all(chunk(&first).as_bytes()).await?;
            socket.flush().await?;
            tokio::time::sleep(pause).await;
            socket.write_all(b"data: [DONE]\n\n").await
        }
    }
}
