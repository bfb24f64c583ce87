//! A real Jupyter client for the integration tests: it starts the `mahtab`
//! binary on free loopback ports with a fresh connection file and speaks the
//! wire protocol over real ZeroMQ sockets. Every wait has a deadline.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use bytes::Bytes;
use mahtab::wire::{Codec, Message, Outgoing, Signer, no_parent};
use serde_json::{Value, json};
use zeromq::util::PeerIdentity;
use zeromq::{
    DealerSocket, ReqSocket, Socket, SocketOptions, SocketRecv, SocketSend, SubSocket, ZmqMessage,
};

/// How long any single expected message may take.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// The prefix of every test kernel's key; each kernel gets its own key so a
/// message can never be accepted by another test's kernel.
pub const KEY: &str = "a0436f6c-1916-498b-8eb9";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Shell,
    Control,
}

/// A running kernel process with a connected client.
pub struct Kernel {
    child: Child,
    _dir: TempDir,
    pub shell: DealerSocket,
    /// Shares the shell socket's identity, as Jupyter clients do, so the
    /// kernel's input requests reach it.
    pub stdin: DealerSocket,
    pub control: DealerSocket,
    pub iopub: SubSocket,
    pub heartbeat: ReqSocket,
    pub codec: Codec,
    signer: Signer,
    /// IOPub messages read while waiting for another request's messages.
    backlog: std::collections::VecDeque<Message>,
}

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("mahtab-it-{tag}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A free loopback port, never the same twice in this test process: kernels
/// start concurrently, and a port handed to one kernel but not yet bound by it
/// must not be handed to another (whose client would then talk to the wrong
/// kernel). The ports lie below Linux's ephemeral range (32768 and up), so
/// neither a server bound to port 0 (the fake model servers) nor the local end
/// of an outgoing connection can take one before the kernel binds it.
fn free_port() -> u16 {
    const FIRST: u32 = 20_000;
    const COUNT: u32 = 12_000;
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    // Test processes that run at the same time start at different places.
    let offset = std::process::id() * 97;
    loop {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        assert!(n < COUNT, "ran out of test ports");
        let port = (FIRST + (offset + n) % COUNT) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// The `mahtab` binary under test.
pub fn mahtab_binary() -> &'static str {
    env!("CARGO_BIN_EXE_mahtab")
}

/// The connection file content for the given ports and scheme (tcp).
pub fn connection_json(ports: [u16; 5], scheme: &str) -> Value {
    let key = format!("{KEY}-{}", uuid::Uuid::new_v4());
    json!({
        "ip": "127.0.0.1", "transport": "tcp",
        "shell_port": ports[0], "iopub_port": ports[1], "stdin_port": ports[2],
        "control_port": ports[3], "hb_port": ports[4],
        "key": key, "signature_scheme": scheme, "kernel_name": "mahtab",
    })
}

/// Starts `mahtab kernel` with the given connection file content.
pub fn spawn_kernel(dir: &TempDir, connection: &Value) -> Child {
    spawn_kernel_with_env(dir, connection, &[])
}

/// Starts `mahtab kernel` with extra environment variables. Provider
/// settings of the test's own environment are removed, so a kernel talks to
/// a model only when a test says so.
pub fn spawn_kernel_with_env(dir: &TempDir, connection: &Value, env: &[(&str, String)]) -> Child {
    let file = dir.0.join("kernel.json");
    std::fs::write(&file, connection.to_string()).expect("write connection file");
    let mut command = Command::new(mahtab_binary());
    command.arg("kernel").arg("-f").arg(&file);
    // Files a test's cells or agent write land in the test's own directory.
    command.current_dir(&dir.0);
    // IPython's profile and the kernel's history live here; each test kernel
    // gets its own.
    command.env("IPYTHONDIR", dir.0.join("ipython"));
    command.env("JUPYTER_DATA_DIR", dir.0.join("jupyter"));
    // No %%ask settings file unless a test writes one.
    command.env("XDG_CONFIG_HOME", dir.0.join("config"));
    for name in [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "MAHTAB_PROVIDER",
        "MAHTAB_MODEL",
        "MAHTAB_CONFIG",
    ] {
        command.env_remove(name);
    }
    // Scripted servers answer in order: a judged "done" is compared with
    // other solutions (two more answers) only where a test asks for it.
    command.env("MAHTAB_CROSS_CHECKS", "0");
    for (name, value) in env {
        command.env(name, value);
    }
    // The environment cells run in: the test's own choice, else the run's.
    let python = env
        .iter()
        .find(|(name, _)| *name == "MAHTAB_TEST_PYTHON")
        .map(|(_, path)| std::ffi::OsString::from(path))
        .or_else(|| std::env::var_os("MAHTAB_TEST_PYTHON"));
    if let Some(python) = python {
        command.arg("--python").arg(python);
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the mahtab binary")
}

/// How the test client reaches the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Ipc,
}

impl Kernel {
    /// Starts a kernel on tcp and connects shell, control, IOPub and
    /// heartbeat, then waits for the IOPub welcome.
    pub async fn start() -> Self {
        Self::start_on(Transport::Tcp).await
    }

    pub async fn start_on(transport: Transport) -> Self {
        Self::start_with(transport, &[]).await
    }

    /// Starts a kernel (tcp) with extra environment variables.
    pub async fn start_with_env(env: &[(&str, String)]) -> Self {
        Self::start_with(Transport::Tcp, env).await
    }

    async fn start_with(transport: Transport, env: &[(&str, String)]) -> Self {
        let dir = TempDir::new("kernel");
        let mut ports = [1, 2, 3, 4, 5];
        let mut connection = connection_json(ports, "hmac-sha256");
        match transport {
            Transport::Tcp => {
                ports = ports.map(|_| free_port());
                connection = connection_json(ports, "hmac-sha256");
            }
            Transport::Ipc => {
                connection["transport"] = json!("ipc");
                connection["ip"] = json!(dir.0.join("kernel-ipc").display().to_string());
            }
        }
        let child = spawn_kernel_with_env(&dir, &connection, env);
        let ip = connection["ip"].as_str().unwrap_or_default().to_owned();
        let url = |port: u16| match transport {
            Transport::Tcp => format!("tcp://{ip}:{port}"),
            Transport::Ipc => format!("ipc://{ip}-{port}"),
        };

        let identity = uuid::Uuid::new_v4().to_string().into_bytes();
        let with_identity = || {
            let mut options = SocketOptions::default();
            options.peer_identity(PeerIdentity::try_from(identity.clone()).unwrap());
            options
        };
        let mut shell = DealerSocket::with_options(with_identity());
        let mut stdin = DealerSocket::with_options(with_identity());
        let mut control = DealerSocket::new();
        let mut iopub = SubSocket::new();
        let mut heartbeat = ReqSocket::new();
        // The kernel may still be binding: connect retries until it is up.
        within(TIMEOUT, async {
            shell.connect(&url(ports[0])).await.expect("connect shell");
            stdin.connect(&url(ports[2])).await.expect("connect stdin");
            iopub.connect(&url(ports[1])).await.expect("connect iopub");
            iopub.subscribe("").await.expect("subscribe");
            control
                .connect(&url(ports[3]))
                .await
                .expect("connect control");
            heartbeat
                .connect(&url(ports[4]))
                .await
                .expect("connect heartbeat");
        })
        .await;
        let key = connection["key"].as_str().unwrap_or_default();
        let signer = Signer::new("hmac-sha256", key.as_bytes()).unwrap();
        let mut kernel = Self {
            child,
            _dir: dir,
            shell,
            stdin,
            control,
            iopub,
            heartbeat,
            codec: Codec::new(signer.clone(), "test-client"),
            signer,
            backlog: Default::default(),
        };
        let welcome = kernel.next_iopub().await;
        assert_eq!(welcome.header.msg_type, "iopub_welcome");
        kernel
    }

    /// The next message the kernel sends on stdin (an input_request).
    pub async fn next_stdin(&mut self) -> Message {
        let message = tokio::time::timeout(TIMEOUT, self.stdin.recv())
            .await
            .expect("timed out waiting for an input_request")
            .expect("receive on stdin");
        self.codec
            .decode(message.into_vec())
            .expect("a valid stdin message")
    }

    /// Answers an input_request with `value`.
    pub async fn input_reply(&mut self, request: &Message, value: &str) {
        let out = Outgoing::new(
            "input_reply",
            json!({ "value": value }),
            request.raw_header.clone(),
        );
        let message = ZmqMessage::try_from(self.codec.encode(&out)).expect("frames");
        within(TIMEOUT, self.stdin.send(message))
            .await
            .expect("send input_reply");
    }

    /// The kernel's stderr (its log), for a test that reads it; there is
    /// one, so only the first call gets it.
    pub fn take_stderr(&mut self) -> Option<std::process::ChildStderr> {
        self.child.stderr.take()
    }

    /// The kernel's working directory (its settings live in `config/`).
    pub fn dir(&self) -> &Path {
        &self._dir.0
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signer(&self) -> &Signer {
        &self.signer
    }

    /// Sends a request; returns its msg_id.
    pub async fn send(&mut self, channel: Channel, msg_type: &str, content: Value) -> String {
        let msg_id = uuid::Uuid::new_v4().to_string();
        let frames = self
            .codec
            .encode_with_id(&Outgoing::new(msg_type, content, no_parent()), &msg_id);
        self.send_frames(channel, frames).await;
        msg_id
    }

    /// Sends raw frames (which may be malformed) on a channel.
    pub async fn send_frames(&mut self, channel: Channel, frames: Vec<Bytes>) {
        let message = ZmqMessage::try_from(frames).expect("at least one frame");
        let socket = match channel {
            Channel::Shell => &mut self.shell,
            Channel::Control => &mut self.control,
        };
        within(TIMEOUT, socket.send(message)).await.expect("send");
    }

    /// The next reply on `channel`.
    pub async fn reply(&mut self, channel: Channel) -> Message {
        let socket = match channel {
            Channel::Shell => &mut self.shell,
            Channel::Control => &mut self.control,
        };
        let message = tokio::time::timeout(TIMEOUT, socket.recv())
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for a {channel:?} reply"))
            .expect("receive a reply");
        self.codec
            .decode(message.into_vec())
            .expect("a valid reply")
    }

    /// The next reply on `channel`, or None if nothing arrives within `limit`.
    pub async fn reply_within(&mut self, channel: Channel, limit: Duration) -> Option<Message> {
        let socket = match channel {
            Channel::Shell => &mut self.shell,
            Channel::Control => &mut self.control,
        };
        let message = tokio::time::timeout(limit, socket.recv()).await.ok()?;
        Some(
            self.codec
                .decode(message.expect("receive").into_vec())
                .expect("a valid reply"),
        )
    }

    pub async fn next_iopub(&mut self) -> Message {
        let message = tokio::time::timeout(TIMEOUT, self.iopub.recv())
            .await
            .expect("timed out waiting for an IOPub message")
            .expect("receive on iopub");
        self.codec
            .decode(message.into_vec())
            .expect("a valid IOPub message")
    }

    /// The next IOPub message caused by `msg_id`; others are kept for later.
    /// Sends `code` to run and waits for its first IOPub message of
    /// `msg_type` (the cell goes on running); returns the request's msg_id
    /// and that message.
    pub async fn execute_until(&mut self, code: &str, msg_type: &str) -> (String, Message) {
        let msg_id = self
            .send(Channel::Shell, "execute_request", json!({ "code": code }))
            .await;
        loop {
            let message = self.next_for(&msg_id).await;
            if message.header.msg_type == msg_type {
                return (msg_id, message);
            }
        }
    }

    pub async fn next_for(&mut self, msg_id: &str) -> Message {
        if let Some(index) = self.backlog.iter().position(|m| parent_id(m) == msg_id) {
            return self.backlog.remove(index).expect("index is in range");
        }
        loop {
            let message = self.next_iopub().await;
            if parent_id(&message) == msg_id {
                return message;
            }
            self.backlog.push_back(message);
        }
    }

    /// IOPub messages caused by `msg_id`, from its busy through its idle.
    pub async fn iopub_for(&mut self, msg_id: &str) -> Vec<Message> {
        let mut messages = Vec::new();
        loop {
            let message = self.next_for(msg_id).await;
            let idle =
                message.header.msg_type == "status" && message.content["execution_state"] == "idle";
            messages.push(message);
            if idle {
                return messages;
            }
        }
    }

    /// Runs `code` with default options; returns the reply and its IOPub messages.
    pub async fn execute(&mut self, code: &str) -> (Message, Vec<Message>) {
        self.execute_with(json!({ "code": code })).await
    }

    /// Sends an execute_request with this content; returns reply and IOPub messages.
    pub async fn execute_with(&mut self, content: Value) -> (Message, Vec<Message>) {
        let msg_id = self.send(Channel::Shell, "execute_request", content).await;
        let reply = self.reply(Channel::Shell).await;
        assert_eq!(parent_id(&reply), msg_id, "reply to the request just sent");
        let iopub = self.iopub_for(&msg_id).await;
        (reply, iopub)
    }

    /// Sends a request and waits for its reply and idle.
    pub async fn request(
        &mut self,
        channel: Channel,
        msg_type: &str,
        content: Value,
    ) -> (Message, Vec<Message>) {
        let msg_id = self.send(channel, msg_type, content).await;
        let reply = self.reply(channel).await;
        assert_eq!(parent_id(&reply), msg_id);
        let iopub = self.iopub_for(&msg_id).await;
        (reply, iopub)
    }

    /// Asks for shutdown on control and waits for the process to exit.
    pub async fn shutdown(mut self, restart: bool) -> (Message, ExitStatus) {
        self.stop(restart).await
    }

    /// [`Kernel::shutdown`], keeping the client: what the kernel published
    /// before it exited can still be read.
    pub async fn stop(&mut self, restart: bool) -> (Message, ExitStatus) {
        let (reply, _) = self
            .request(
                Channel::Control,
                "shutdown_request",
                json!({ "restart": restart }),
            )
            .await;
        let status = wait_for_exit(&mut self.child, TIMEOUT).expect("kernel exits after shutdown");
        (reply, status)
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits up to `limit` for `child` to exit.
pub fn wait_for_exit(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub async fn within<T>(limit: Duration, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, future)
        .await
        .expect("timed out waiting for the kernel")
}

/// The msg_id of the request `message` belongs to.
pub fn parent_id(message: &Message) -> &str {
    message.parent_header["msg_id"].as_str().unwrap_or_default()
}

/// The message types in order.
pub fn types(messages: &[Message]) -> Vec<&str> {
    messages
        .iter()
        .map(|m| m.header.msg_type.as_str())
        .collect()
}

/// `text` without ANSI colour codes (IPython colours its tracebacks).
pub fn strip_ansi(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // Skip "ESC [ params letter".
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

/// Concatenated text of the stream messages named `name`.
pub fn stream_text(messages: &[Message], name: &str) -> String {
    messages
        .iter()
        .filter(|m| m.header.msg_type == "stream" && m.content["name"] == name)
        .map(|m| m.content["text"].as_str().unwrap_or_default())
        .collect()
}

/// Whether `message` is an `%%ask` panel (a `display_data` that is not the
/// run's status line).
pub fn is_panel(message: &Message) -> bool {
    message.header.msg_type == "display_data" && !is_status(message)
}

/// Whether `message` shows or updates an `%%ask` run's status line.
pub fn is_status(message: &Message) -> bool {
    message.content["metadata"]["mahtab"]["kind"] == "status"
}

/// The messages other than the status line's, as a run without one.
pub fn without_status(messages: &[Message]) -> Vec<Message> {
    messages.iter().filter(|m| !is_status(m)).cloned().collect()
}

/// The plain text of the `%%ask` panels of one kind (`mahtab.kind` in
/// their metadata) among `messages`.
pub fn panel_texts(messages: &[Message], kind: &str) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m.content["metadata"]["mahtab"]["kind"] == kind)
        .map(|m| m.content["data"]["text/plain"].as_str().unwrap().to_owned())
        .collect()
}

/// The `text/plain` of the execute_result among `iopub` (panics if none).
pub fn result_text(iopub: &[Message]) -> String {
    let result = iopub
        .iter()
        .find(|m| m.header.msg_type == "execute_result")
        .expect("an execute_result");
    result.content["data"]["text/plain"]
        .as_str()
        .expect("text/plain")
        .to_owned()
}

/// Everything a recorded chat request told the model, system prompt and
/// messages, in order.
pub fn told_model(request: &Value) -> String {
    request["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .filter_map(|m| m["content"].as_str())
                .collect::<Vec<_>>()
                .join("\n\n")
        })
        .unwrap_or_default()
}
