//! A real HTTP server on loopback that answers chat requests with scripted
//! streams, one reply per request, in the wire format of the path asked for:
//! OpenAI-style SSE on `POST /v1/chat/completions`, Anthropic Messages SSE
//! (named events, usage in `message_start` and `message_delta`) on
//! `POST /v1/messages`. It records each request's head and body, and a
//! timeline of what it wrote and when the client closed the connection, so
//! tests can order the kernel's output against the server's writes.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::sync::Notify;

/// The longest a scripted reply waits on a gate or for the client to close:
/// a test that fails never leaves a connection open for long.
const HOLD_LIMIT: Duration = Duration::from_secs(60);

/// What the server sends for one request.
#[derive(Clone)]
pub enum Reply {
    /// Stream this text in pieces of a few characters, then usage and the
    /// end of the stream.
    Answer(String),
    /// Send the first piece, then stay silent for this long.
    Stall(String, Duration),
    /// Answer with this HTTP status and JSON body.
    Status(u16, String),
    /// Answer with this HTTP status, extra headers and JSON body.
    StatusWith(u16, Vec<(&'static str, String)>, String),
    /// A 200 event stream made of these steps; each write is its own HTTP
    /// chunk, sent as its own TCP segment.
    Steps(Vec<Step>),
    /// Close the connection without answering, as a server does with an idle
    /// keep-alive connection just as the client reuses it.
    HangUp,
}

/// One step of a scripted stream.
#[derive(Clone)]
pub enum Step {
    Write(Vec<u8>),
    Pause(Duration),
    /// Wait until the test notifies (or [`HOLD_LIMIT`] passes).
    Gate(Arc<Notify>),
    /// Keep the connection open until the client closes it.
    Hold,
}

impl Step {
    pub fn text(text: impl Into<String>) -> Self {
        Step::Write(text.into().into_bytes())
    }
}

/// What the server did, in order, with the time it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Request `n` (counting from 0) was read.
    Request(usize),
    /// Step `step` of request `n`'s reply was written.
    Wrote { request: usize, step: usize },
    /// The whole reply to request `n` was written.
    Ended(usize),
    /// The client closed request `n`'s connection before the reply ended.
    Closed(usize),
}

/// A request's head.
#[derive(Debug, Clone)]
pub struct Head {
    pub method: String,
    pub path: String,
    /// Names in lower case.
    pub headers: Vec<(String, String)>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Timeline {
    events: Mutex<Vec<(Instant, Event)>>,
    changed: Notify,
}

impl Timeline {
    fn record(&self, event: Event) {
        self.events.lock().unwrap().push((Instant::now(), event));
        self.changed.notify_waiters();
    }
}

pub struct FakeLlm {
    /// The OpenAI-style base URL (`http://host:port/v1`).
    pub base_url: String,
    /// The Anthropic-style base URL (`http://host:port`).
    pub root_url: String,
    /// Request bodies, in order.
    pub requests: Arc<Mutex<Vec<Value>>>,
    /// Request heads, in order.
    pub heads: Arc<Mutex<Vec<Head>>>,
    timeline: Arc<Timeline>,
}

impl FakeLlm {
    /// A server that says its context window (as llama.cpp does, in
    /// `GET /props`) and answers chat requests from `script`.
    pub async fn start(script: Vec<Reply>) -> Self {
        Self::start_with_window(script, Some(32_768)).await
    }

    /// [`FakeLlm::start`], saying `window` as its context window, or with
    /// `None` nothing (as many OpenAI-compatible servers do). Questions
    /// about the window are not recorded as requests.
    pub async fn start_with_window(script: Vec<Reply>, window: Option<u64>) -> Self {
        let props = window.map(|n_ctx| json!({"default_generation_settings": {"n_ctx": n_ctx}}));
        Self::start_with_props(script, props).await
    }

    /// [`FakeLlm::start`], answering `GET /props` with `props` (llama.cpp's
    /// form: its window, its modalities), or 404 with `None`.
    pub async fn start_with_props(script: Vec<Reply>, props: Option<Value>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let root_url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let timeline = Arc::new(Timeline::default());
        let script = Arc::new(Mutex::new(script.into_iter()));
        let (seen, seen_heads, events) = (requests.clone(), heads.clone(), timeline.clone());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let _ = socket.set_nodelay(true);
                let (script, seen, seen_heads, events, props) = (
                    script.clone(),
                    seen.clone(),
                    seen_heads.clone(),
                    events.clone(),
                    props.clone(),
                );
                tokio::spawn(async move {
                    let Some((head, body)) = read_request(&mut socket).await else {
                        return;
                    };
                    if head.method == "GET" || head.path == "/api/show" {
                        let reply = match (head.path.as_str(), &props) {
                            ("/props", Some(props)) => Reply::Status(200, props.to_string()),
                            _ => Reply::Status(404, "{\"error\":\"no such path\"}".into()),
                        };
                        let _ =
                            respond(&mut socket, Format::OpenAi, reply, usize::MAX, &events).await;
                        return;
                    }
                    // An Anthropic request that forces a tool call is answered
                    // with the tool's input, as the API does.
                    let forced_tool = match &body["tool_choice"] {
                        choice if choice["type"] == "tool" => {
                            choice["name"].as_str().map(str::to_owned)
                        }
                        _ => None,
                    };
                    // One lock for all three, so indices agree across them.
                    let (index, reply) = {
                        let mut script = script.lock().unwrap();
                        let mut seen = seen.lock().unwrap();
                        seen.push(body);
                        seen_heads.lock().unwrap().push(head.clone());
                        (seen.len() - 1, script.next())
                    };
                    events.record(Event::Request(index));
                    let reply = reply.unwrap_or(Reply::Status(
                        500,
                        "{\"error\":{\"message\":\"script exhausted\"}}".into(),
                    ));
                    let format = match (head.method.as_str(), head.path.as_str()) {
                        ("POST", "/v1/messages") => match forced_tool {
                            Some(name) => Format::AnthropicTool(name),
                            None => Format::Anthropic,
                        },
                        ("POST", "/v1/chat/completions") => Format::OpenAi,
                        _ => {
                            let reply = Reply::Status(404, "{\"error\":\"no such path\"}".into());
                            let _ =
                                respond(&mut socket, Format::OpenAi, reply, index, &events).await;
                            return;
                        }
                    };
                    let _ = respond(&mut socket, format, reply, index, &events).await;
                });
            }
        });
        Self {
            base_url: format!("{root_url}/v1"),
            root_url,
            requests,
            heads,
            timeline,
        }
    }

    /// The content of the last message of the `n`th request.
    pub fn last_message(&self, n: usize) -> String {
        let requests = self.requests.lock().unwrap();
        let messages = requests[n]["messages"].as_array().unwrap();
        messages.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// How many requests the server has had.
    pub fn request_count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    /// The content of the last message of the latest request.
    pub fn last_prompt(&self) -> String {
        let latest = self.requests.lock().unwrap().len() - 1;
        self.last_message(latest)
    }

    /// The environment that points a kernel at this server (OpenAI format).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("OPENAI_BASE_URL", self.base_url.clone()),
            ("MAHTAB_MODEL", "fake-model".into()),
        ]
    }

    /// The environment that points a kernel at this server as Anthropic.
    pub fn anthropic_env(&self, key: &str) -> Vec<(&'static str, String)> {
        vec![
            ("ANTHROPIC_API_KEY", key.into()),
            ("ANTHROPIC_BASE_URL", self.root_url.clone()),
            ("MAHTAB_MODEL", "fake-model".into()),
        ]
    }

    /// The events so far.
    pub fn events(&self) -> Vec<(Instant, Event)> {
        self.timeline.events.lock().unwrap().clone()
    }

    /// When `event` happened, waiting for it up to `limit`.
    pub async fn wait_for(&self, event: Event, limit: Duration) -> Option<Instant> {
        let find = || {
            self.timeline
                .events
                .lock()
                .unwrap()
                .iter()
                .find(|(_, e)| *e == event)
                .map(|(at, _)| *at)
        };
        tokio::time::timeout(limit, async {
            loop {
                let changed = self.timeline.changed.notified();
                if let Some(at) = find() {
                    return at;
                }
                changed.await;
            }
        })
        .await
        .ok()
    }
}

#[derive(Clone)]
enum Format {
    Anthropic,
    /// Anthropic, answering with a call of this tool.
    AnthropicTool(String),
    OpenAi,
}

/// Reads one HTTP request; returns its head and JSON body (null if none).
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<(Head, Value)> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
        let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let text = String::from_utf8_lossy(&data[..end]).into_owned();
        let mut lines = text.split("\r\n");
        let mut request_line = lines.next()?.split(' ');
        let (method, path) = (request_line.next()?, request_line.next()?);
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let head = Head {
            method: method.to_owned(),
            path: path.to_owned(),
            headers,
        };
        let length: usize = head
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if data.len() >= end + 4 + length {
            let body = serde_json::from_slice(&data[end + 4..end + 4 + length]).unwrap_or_default();
            return Some((head, body));
        }
    }
}

/// An answer that starts with `first`, then says `line` three times and
/// would go on: the stream stays open until the client closes it.
pub fn repeating(first: &str, line: &str) -> Reply {
    let mut steps = vec![Step::text(openai_chunk(first))];
    steps.extend((0..3).map(|_| Step::text(openai_chunk(line))));
    steps.push(Step::Hold);
    Reply::Steps(steps)
}

/// An answer that says `text` and then stops at the length limit
/// (`finish_reason: length`), as a server does at the request's
/// `max_tokens`.
pub fn cut_off(text: &str) -> Reply {
    let end = json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}], "usage": null});
    let usage = json!({"id": "c", "choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 50, "total_tokens": 80}});
    Reply::Steps(vec![Step::text(format!(
        "{}data: {end}\n\ndata: {usage}\n\ndata: [DONE]\n\n",
        openai_chunk(text)
    ))])
}

/// One OpenAI-style `chat.completion.chunk` event carrying `text`.
fn openai_chunk(text: &str) -> String {
    let event = json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}], "usage": null});
    format!("data: {event}\n\n")
}

/// Anthropic Messages stream events, as the API sends them.
pub mod anthropic {
    use serde_json::json;

    /// Input tokens reported by `message_start`.
    pub const INPUT_TOKENS: u64 = 30;
    /// Output tokens reported by `message_delta`.
    pub const OUTPUT_TOKENS: u64 = 12;

    fn event(name: &str, data: serde_json::Value) -> String {
        format!("event: {name}\ndata: {data}\n\n")
    }

    /// `message_start`, `content_block_start` and a `ping`.
    pub fn start() -> String {
        let message = json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message", "role": "assistant", "content": [], "model": "fake-model", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": 1}}});
        let block = json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}});
        event("message_start", message)
            + &event("content_block_start", block)
            + &event("ping", json!({"type": "ping"}))
    }

    /// One `text_delta`.
    pub fn delta(text: &str) -> String {
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        )
    }

    /// `content_block_stop`, `message_delta` with the usage, `message_stop`.
    pub fn end() -> String {
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ) + &event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": OUTPUT_TOKENS}}),
        ) + &event("message_stop", json!({"type": "message_stop"}))
    }

    /// An `error` event, e.g. `("overloaded_error", "Overloaded")`.
    pub fn error(kind: &str, message: &str) -> String {
        event(
            "error",
            json!({"type": "error", "error": {"type": kind, "message": message}}),
        )
    }

    /// A whole stream calling the tool `name` with `input` (JSON text), as
    /// the API answers a forced tool call: a `tool_use` block whose input
    /// comes in `input_json_delta` pieces, the first one empty.
    pub fn tool_answer(name: &str, input: &str) -> String {
        let message = json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message", "role": "assistant", "content": [], "model": "fake-model", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": 1}}});
        let block = json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_fake", "name": name, "input": {}}});
        let chars: Vec<char> = input.chars().collect();
        let pieces = std::iter::once(String::new())
            .chain(chars.chunks(7).map(|piece| piece.iter().collect()));
        let deltas: String = pieces
            .map(|piece| {
                event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": piece}}),
                )
            })
            .collect();
        event("message_start", message)
            + &event("content_block_start", block)
            + &deltas
            + &event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            )
            + &event(
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": OUTPUT_TOKENS}}),
            )
            + &event("message_stop", json!({"type": "message_stop"}))
    }

    /// A whole stream of `text`, in deltas of a few characters.
    pub fn answer(text: &str) -> String {
        let chars: Vec<char> = text.chars().collect();
        let deltas: String = chars
            .chunks(7)
            .map(|piece| delta(&piece.iter().collect::<String>()))
            .collect();
        start() + &deltas + &end()
    }
}

const STREAM_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";

/// Writes `data` as one HTTP chunk.
async fn write_chunk(socket: &mut WriteHalf<'_>, data: &[u8]) -> std::io::Result<()> {
    let mut frame = format!("{:x}\r\n", data.len()).into_bytes();
    frame.extend_from_slice(data);
    frame.extend_from_slice(b"\r\n");
    socket.write_all(&frame).await?;
    socket.flush().await
}

/// Waits for `until` while watching the connection; false if the client
/// closed it (or sent anything, which no client does mid-response).
async fn wait_open(reader: &mut ReadHalf<'_>, until: impl Future<Output = ()>) -> bool {
    let mut byte = [0u8; 1];
    tokio::select! {
        () = until => true,
        _ = reader.read(&mut byte) => false,
    }
}

async fn respond(
    socket: &mut tokio::net::TcpStream,
    format: Format,
    reply: Reply,
    index: usize,
    timeline: &Timeline,
) -> std::io::Result<()> {
    let steps = match (reply, format) {
        (Reply::HangUp, _) => return socket.shutdown().await,
        (Reply::Status(status, body), _) => return status_reply(socket, status, &[], &body).await,
        (Reply::StatusWith(status, headers, body), _) => {
            return status_reply(socket, status, &headers, &body).await;
        }
        (Reply::Answer(text), Format::OpenAi) => {
            let chars: Vec<char> = text.chars().collect();
            let mut stream: String = chars
                .chunks(7)
                .map(|piece| openai_chunk(&piece.iter().collect::<String>()))
                .collect();
            let usage = json!({"id": "c", "choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42}});
            stream.push_str(&format!("data: {usage}\n\ndata: [DONE]\n\n"));
            vec![Step::text(stream)]
        }
        (Reply::Answer(text), Format::Anthropic) => vec![Step::text(anthropic::answer(&text))],
        (Reply::Answer(input), Format::AnthropicTool(name)) => {
            vec![Step::text(anthropic::tool_answer(&name, &input))]
        }
        (Reply::Stall(first, pause), Format::OpenAi) => vec![
            Step::text(openai_chunk(&first)),
            Step::Pause(pause),
            Step::text("data: [DONE]\n\n"),
        ],
        (Reply::Stall(first, pause), Format::Anthropic | Format::AnthropicTool(_)) => vec![
            Step::text(anthropic::start() + &anthropic::delta(&first)),
            Step::Pause(pause),
            Step::text(anthropic::end()),
        ],
        (Reply::Steps(steps), _) => steps,
    };
    let (mut reader, mut writer) = socket.split();
    writer.write_all(STREAM_HEAD).await?;
    for (step, action) in steps.into_iter().enumerate() {
        let open = match action {
            Step::Write(bytes) => write_chunk(&mut writer, &bytes).await.is_ok(),
            Step::Pause(pause) => wait_open(&mut reader, tokio::time::sleep(pause)).await,
            Step::Gate(gate) => {
                let gate = async {
                    let _ = tokio::time::timeout(HOLD_LIMIT, gate.notified()).await;
                };
                wait_open(&mut reader, gate).await
            }
            Step::Hold => wait_open(&mut reader, tokio::time::sleep(HOLD_LIMIT)).await,
        };
        if !open {
            timeline.record(Event::Closed(index));
            return Ok(());
        }
        timeline.record(Event::Wrote {
            request: index,
            step,
        });
    }
    if write_chunk(&mut writer, b"").await.is_err() {
        timeline.record(Event::Closed(index));
        return Ok(());
    }
    timeline.record(Event::Ended(index));
    Ok(())
}

async fn status_reply(
    socket: &mut tokio::net::TcpStream,
    status: u16,
    headers: &[(&str, String)],
    body: &str,
) -> std::io::Result<()> {
    let extra: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let head = format!(
        "HTTP/1.1 {status} Error\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body.as_bytes()).await
}
