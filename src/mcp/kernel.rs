//! A client of one running kernel, from its connection file: shell and
//! control as DEALER sockets, IOPub as SUB. Each request gets its reply and
//! the IOPub messages it caused ([`Pending`]); requests may go to a subshell.
//! No stdin channel: the server's requests say `allow_stdin: false`, so
//! code that asks for input fails at once instead of waiting for an answer
//! no one can give.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::wire::{Codec, Message, Outgoing, Signer, no_parent};
use crate::zmtp::{Connection, Endpoint, Mechanism, Offered, Sender};

/// How long a reply on the control channel may take (the kernel answers
/// control requests even while cells run).
const CONTROL_LIMIT: Duration = Duration::from_secs(20);
/// How long the kernel may take to welcome the IOPub subscription.
const WELCOME_LIMIT: Duration = Duration::from_secs(10);

/// The channel a request goes on.
#[derive(Debug, Clone, Copy)]
pub enum Channel {
    Shell,
    Control,
}

/// What a request is waiting for: its reply and the IOPub messages whose
/// parent it is.
#[derive(Default)]
struct Waiter {
    reply: Option<oneshot::Sender<Message>>,
    iopub: Option<mpsc::UnboundedSender<Message>>,
}

/// The requests waiting for the kernel, whether it is gone (then no
/// request may wait: nothing would ever answer it), and the cells the main
/// shell runs or has queued that this client knows of.
#[derive(Default)]
struct Registry {
    waiting: HashMap<String, Waiter>,
    closed: bool,
    /// `execute_request` ids on the main shell: every client's from IOPub's
    /// busy statuses (until idle), this client's own from when they are
    /// sent (until replied to).
    main_shell: HashSet<String>,
}

type Waiters = Arc<Mutex<Registry>>;

/// A connected client.
pub struct KernelClient {
    codec: Arc<Codec>,
    shell: Sender,
    control: Sender,
    waiters: Waiters,
    /// Told once a channel to the kernel has closed.
    gone: Arc<tokio::sync::Notify>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// One request on its way: its reply, and its IOPub messages until the
/// kernel goes idle for it.
pub struct Pending {
    pub msg_id: String,
    reply: Option<oneshot::Receiver<Message>>,
    iopub: mpsc::UnboundedReceiver<Message>,
    waiters: Waiters,
}

impl Pending {
    /// The reply (once; later calls fail).
    pub async fn reply(&mut self) -> Result<Message> {
        let reply = self.reply.take().context("the reply was already read")?;
        reply
            .await
            .context("the kernel went away before it replied")
    }

    /// The reply's receiver, for a caller that waits for it beside the
    /// IOPub messages (once; `None` after).
    pub fn take_reply(&mut self) -> Option<oneshot::Receiver<Message>> {
        self.reply.take()
    }

    /// The next IOPub message this request caused; `None` once the kernel
    /// has gone away.
    pub async fn next_output(&mut self) -> Option<Message> {
        self.iopub.recv().await
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        lock(&self.waiters).waiting.remove(&self.msg_id);
    }
}

fn lock(waiters: &Waiters) -> std::sync::MutexGuard<'_, Registry> {
    waiters.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The kernel is gone: every waiter learns it from its closed channels, and
/// no request waits from now on.
fn close(waiters: &Waiters, gone: &tokio::sync::Notify) {
    let mut registry = lock(waiters);
    registry.closed = true;
    registry.waiting.clear();
    gone.notify_waiters();
    gone.notify_one();
}

impl KernelClient {
    /// Connects to the kernel a connection file describes.
    pub async fn connect(connection_file: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(connection_file).with_context(|| {
            format!("cannot read connection file {}", connection_file.display())
        })?;
        let invalid = || format!("invalid connection file {}", connection_file.display());
        let json: Value = serde_json::from_str(&text).with_context(invalid)?;
        // A kernel serving with CURVE is reached as its client: its public
        // key is all a client needs (a fresh key pair of ours vouches).
        let mechanism =
            match crate::zmtp::curve::Keypair::from_connection_file(&json).with_context(invalid)? {
                Some(keys) => Mechanism::CurveClient(keys.public().clone()),
                None => Mechanism::Null,
            };
        let info: jupyter_protocol::ConnectionInfo =
            serde_json::from_value(json).with_context(invalid)?;
        let endpoint = |port: u16| match info.transport {
            jupyter_protocol::connection_info::Transport::TCP => {
                Endpoint::Tcp(connect_address(&info.ip), port)
            }
            jupyter_protocol::connection_info::Transport::IPC => {
                Endpoint::Ipc(format!("{}-{port}", info.ip).into())
            }
        };
        let signer = Signer::new(&info.signature_scheme, info.key.as_bytes())
            .context("the connection file's signature scheme")?;
        let codec = Arc::new(Codec::new(signer, uuid::Uuid::new_v4().to_string()));
        let open = |port, kind| {
            let endpoint = endpoint(port);
            let mechanism = mechanism.clone();
            async move {
                Connection::open(&endpoint, kind, &mechanism)
                    .await
                    .with_context(|| format!("cannot connect to the kernel at {endpoint}"))
            }
        };
        let shell = open(info.shell_port, "DEALER").await?;
        let control = open(info.control_port, "DEALER").await?;
        let iopub = open(info.iopub_port, "SUB").await?;
        let waiters = Waiters::default();
        let (shell_sender, control_sender) = (shell.sender(), control.sender());
        let (welcomed, welcome) = oneshot::channel();
        let gone = Arc::new(tokio::sync::Notify::new());
        let tasks = vec![
            tokio::spawn(read_replies(
                shell,
                codec.clone(),
                waiters.clone(),
                gone.clone(),
            )),
            tokio::spawn(read_replies(
                control,
                codec.clone(),
                waiters.clone(),
                gone.clone(),
            )),
            tokio::spawn(read_iopub(
                iopub,
                codec.clone(),
                waiters.clone(),
                gone.clone(),
                welcomed,
            )),
        ];
        // Until the kernel has taken the subscription, what a request
        // publishes could be missed: it says so with `iopub_welcome` (JEP 65).
        if tokio::time::timeout(WELCOME_LIMIT, welcome).await.is_err() {
            tracing::warn!("no iopub_welcome from the kernel within {WELCOME_LIMIT:?}");
        }
        Ok(Self {
            codec,
            shell: shell_sender,
            control: control_sender,
            waiters,
            gone,
            tasks,
        })
    }

    /// Sends a request; the returned [`Pending`] receives what answers it.
    pub fn send(
        &self,
        channel: Channel,
        msg_type: &str,
        content: Value,
        subshell: Option<&str>,
    ) -> Result<Pending> {
        let msg_id = uuid::Uuid::new_v4().to_string();
        let (reply_tx, reply_rx) = oneshot::channel();
        let (iopub_tx, iopub_rx) = mpsc::unbounded_channel();
        {
            let mut registry = lock(&self.waiters);
            anyhow::ensure!(
                !registry.closed,
                "the kernel has gone away (restarted or shut down)"
            );
            registry.waiting.insert(
                msg_id.clone(),
                Waiter {
                    reply: Some(reply_tx),
                    iopub: Some(iopub_tx),
                },
            );
        }
        if matches!(channel, Channel::Shell) && subshell.is_none() && msg_type == "execute_request"
        {
            lock(&self.waiters).main_shell.insert(msg_id.clone());
        }
        let pending = Pending {
            msg_id: msg_id.clone(),
            reply: Some(reply_rx),
            iopub: iopub_rx,
            waiters: self.waiters.clone(),
        };
        let frames = self.codec.encode_request(
            &Outgoing::new(msg_type, content, no_parent()),
            &msg_id,
            subshell,
        );
        let socket = match channel {
            Channel::Shell => &self.shell,
            Channel::Control => &self.control,
        };
        match socket.send(frames) {
            Offered::Queued => Ok(pending),
            Offered::Dropped => anyhow::bail!("the kernel is not reading its {channel:?} channel"),
            Offered::Closed => anyhow::bail!("the connection to the kernel is closed"),
        }
    }

    /// Sends a control request and waits for its reply's content.
    pub async fn control(&self, msg_type: &str, content: Value) -> Result<Value> {
        let mut pending = self.send(Channel::Control, msg_type, content, None)?;
        let reply = tokio::time::timeout(CONTROL_LIMIT, pending.reply())
            .await
            .with_context(|| format!("no {msg_type} reply within {CONTROL_LIMIT:?}"))??;
        Ok(reply.content)
    }

    /// Whether the main shell runs no cell this client knows of, its own or
    /// another client's (one started before this client subscribed is
    /// known once a cell of this client's queued behind it: see
    /// [`KernelClient::queue_on_main_shell`]).
    pub fn main_shell_idle(&self) -> bool {
        lock(&self.waiters).main_shell.is_empty()
    }

    /// Queues a silent empty cell on the main shell, so that the shell
    /// counts as busy until every cell started before it has ended.
    pub fn queue_on_main_shell(&self) -> Result<Pending> {
        let content = json!({
            "code": "",
            "silent": true,
            "store_history": false,
            "user_expressions": {},
            "allow_stdin": false,
            "stop_on_error": false,
        });
        self.send(Channel::Shell, "execute_request", content, None)
    }

    /// Whether a channel to the kernel has closed.
    pub fn is_gone(&self) -> bool {
        lock(&self.waiters).closed
    }

    /// Resolves once a channel to the kernel has closed (it was shut down
    /// or restarted).
    pub async fn gone(&self) {
        let notified = self.gone.notified();
        if lock(&self.waiters).closed {
            return;
        }
        notified.await;
    }

    /// Asks the kernel for a subshell of its own (JEP 91); its id.
    pub async fn create_subshell(&self) -> Result<String> {
        let content = self.control("create_subshell_request", json!({})).await?;
        content["subshell_id"]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("the kernel made no subshell: {content}"))
    }
}

impl Drop for KernelClient {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Where a client connects for a kernel bound to `ip` (a kernel bound to
/// every interface is reached on this host).
fn connect_address(ip: &str) -> String {
    match ip {
        "*" | "0.0.0.0" | "" => "127.0.0.1".to_owned(),
        "::" => "::1".to_owned(),
        ip => ip.to_owned(),
    }
}

/// The id of the request a message answers, if any.
fn parent_id(message: &Message) -> Option<&str> {
    message.parent_header.get("msg_id")?.as_str()
}

fn decode(codec: &Codec, frames: Vec<bytes::Bytes>, channel: &str) -> Option<Message> {
    match codec.decode(frames) {
        Ok(message) => Some(message),
        Err(e) => {
            tracing::warn!("{channel}: dropped a message from the kernel: {e}");
            None
        }
    }
}

async fn read_replies(
    mut socket: Connection,
    codec: Arc<Codec>,
    waiters: Waiters,
    gone: Arc<tokio::sync::Notify>,
) {
    while let Some(frames) = socket.recv().await {
        let Some(message) = decode(&codec, frames, "reply") else {
            continue;
        };
        let Some(parent) = parent_id(&message) else {
            continue;
        };
        let mut registry = lock(&waiters);
        registry.main_shell.remove(parent);
        let reply = registry
            .waiting
            .get_mut(parent)
            .and_then(|waiter| waiter.reply.take());
        drop(registry);
        if let Some(reply) = reply {
            let _ = reply.send(message);
        }
    }
    close(&waiters, &gone);
}

async fn read_iopub(
    mut socket: Connection,
    codec: Arc<Codec>,
    waiters: Waiters,
    gone: Arc<tokio::sync::Notify>,
    welcomed: oneshot::Sender<()>,
) {
    let mut welcomed = Some(welcomed);
    while let Some(frames) = socket.recv().await {
        let Some(message) = decode(&codec, frames, "iopub") else {
            continue;
        };
        if message.header.msg_type == "iopub_welcome" {
            if let Some(welcomed) = welcomed.take() {
                let _ = welcomed.send(());
            }
            continue;
        }
        let Some(parent) = parent_id(&message) else {
            continue;
        };
        if message.header.msg_type == "status" {
            track_main_shell(&waiters, parent, &message);
        }
        if let Some(iopub) = lock(&waiters)
            .waiting
            .get(parent)
            .and_then(|waiter| waiter.iopub.as_ref())
        {
            let _ = iopub.send(message);
        }
    }
    close(&waiters, &gone);
}

/// Follows the main shell's cells from a status message of any client's
/// request: an `execute_request` without a subshell is the main shell's.
fn track_main_shell(waiters: &Waiters, parent: &str, status: &Message) {
    let header = &status.parent_header;
    let on_main = header.get("msg_type").and_then(Value::as_str) == Some("execute_request")
        && header.get("subshell_id").is_none_or(Value::is_null);
    if !on_main {
        return;
    }
    let mut registry = lock(waiters);
    match status
        .content
        .get("execution_state")
        .and_then(Value::as_str)
    {
        Some("busy") => {
            registry.main_shell.insert(parent.to_owned());
        }
        Some("idle") => {
            registry.main_shell.remove(parent);
        }
        _ => {}
    }
}
