//! The kernel proper: the five Jupyter channels and what each request does.
//!
//! One task per socket: heartbeat echoes, IOPub publishes (an actor behind a
//! handle), control answers kernel_info / interrupt / shutdown and manages
//! subshells at any time, and shell routes requests to the main shell or a
//! subshell, each serving its own one at a time on its own Python thread. Every shell and control request is wrapped in busy/idle on IOPub
//! with the request as parent, and nothing is published for a request after
//! its idle. This module never touches pyo3; Python is reached through
//! [`PythonHandle`].

mod control;
mod dap;
mod debugger;
mod dispatch;
mod execute_reply;
mod heartbeat;
mod info;
mod iopub;
mod requests;
mod router;
mod shell;
mod stdin;
mod subshells;

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jupyter_protocol::{ConnectionInfo, ExecutionState, Stdio, StreamContent, Transport};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::agent::session::AgentSession;
use crate::python::{
    AgentRuns, InputProvider, InputUnavailable, Interrupter, Output, OutputSink, Parent,
    PythonConfig, PythonHandle, StreamName,
};
use crate::wire::{Codec, Signer, SigningError, no_parent};
use crate::zmtp::{Endpoint, Listener, Mechanism, Router, RouterSender, XPub, curve};
use iopub::Iopub;
use router::{Replies, RouterChannel};
use stdin::Stdin;

pub use info::kernel_info;

/// How long what was sent gets to reach the clients at shutdown, like
/// ZeroMQ's linger: a reply handed to a socket is written by a peer's task,
/// so exiting at once could lose the shutdown_reply. A client that does not
/// read holds the exit this long at most.
const DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// How long the channels' tasks get to end once told to.
const TASKS_LIMIT: Duration = Duration::from_secs(1);

/// How long the interpreter gets to save its state at shutdown.
const PYTHON_SHUTDOWN_LIMIT: Duration = Duration::from_millis(500);

/// Why the kernel could not start.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error(transparent)]
    Signing(#[from] SigningError),
    #[error("cannot bind the {channel} channel to {endpoint}: {source}")]
    Bind {
        channel: &'static str,
        endpoint: String,
        source: std::io::Error,
    },
}

/// What the channel tasks share.
struct Shared {
    kernel_info: Value,
    /// The `connect_reply`: the kernel's ports.
    ports: Value,
    python: PythonHandle,
    interrupter: Interrupter,
    io: Arc<KernelIo>,
    shutdown: CancellationToken,
    /// Cells run so far, kernel-wide (the main shell and subshells share it).
    execution_count: AtomicU32,
    subshells: subshells::Subshells,
    /// The shell channel's replying side.
    shell_replies: Replies,
    debugger: debugger::Debugger,
    /// Where the debugger's events go.
    debug_events: Arc<debugger::EventSink>,
}

/// The kernel's five sockets, bound, and the connection information that
/// reaches them.
pub struct Sockets {
    connection: ConnectionInfo,
    /// Set when every socket speaks CURVE.
    encrypted: bool,
    heartbeat: Listener,
    iopub: Listener,
    control: Listener,
    shell: Listener,
    stdin: Listener,
}

impl Sockets {
    /// Binds the ports `connection` names; a TCP port of 0 is one the
    /// system picks, which [`Sockets::connection`] then names.
    pub async fn bind(connection: ConnectionInfo) -> Result<Self, KernelError> {
        Self::bind_choosing(connection, || None).await
    }

    /// [`Sockets::bind`], but where a port is taken, binds to the next port
    /// `alternative` offers instead, until it offers none.
    pub async fn bind_choosing(
        mut connection: ConnectionInfo,
        mut alternative: impl FnMut() -> Option<u16>,
    ) -> Result<Self, KernelError> {
        let address = (connection.transport.clone(), connection.ip.clone());
        let choose: &mut dyn FnMut() -> Option<u16> = &mut alternative;
        let heartbeat = bind("heartbeat", &address, &mut connection.hb_port, choose).await?;
        let iopub = bind("iopub", &address, &mut connection.iopub_port, choose).await?;
        let control = bind("control", &address, &mut connection.control_port, choose).await?;
        let shell = bind("shell", &address, &mut connection.shell_port, choose).await?;
        let stdin = bind("stdin", &address, &mut connection.stdin_port, choose).await?;
        Ok(Self {
            connection,
            encrypted: false,
            heartbeat,
            iopub,
            control,
            shell,
            stdin,
        })
    }

    /// Where the sockets listen, and the key messages are signed with.
    pub fn connection(&self) -> &ConnectionInfo {
        &self.connection
    }

    /// Encrypts every socket's connections with CURVE, serving with `keys`
    /// (the connection file's `curve_publickey`/`curve_secretkey`).
    pub fn encrypt(&mut self, keys: curve::Keypair) {
        let mechanism = Mechanism::CurveServer(Arc::new(keys));
        for listener in [
            &mut self.heartbeat,
            &mut self.iopub,
            &mut self.control,
            &mut self.shell,
            &mut self.stdin,
        ] {
            listener.secure(mechanism.clone());
        }
        self.encrypted = true;
    }
}

/// Runs a kernel on the sockets of `connection` until a shutdown_request,
/// encrypted with `curve` keys if there are any.
pub async fn run(
    connection: ConnectionInfo,
    curve: Option<curve::Keypair>,
    python: PythonConfig,
) -> Result<(), KernelError> {
    let exposed = connection.transport == Transport::TCP && !is_loopback(&connection.ip);
    let mut sockets = Sockets::bind(connection).await?;
    match curve {
        Some(keys) => sockets.encrypt(keys),
        None if exposed => tracing::warn!(
            "the kernel listens beyond this host without encryption: code and output cross the \
             network in the clear (a client requiring transport encryption provides CurveZMQ keys)"
        ),
        None => {}
    }
    serve(sockets, python).await
}

/// Whether `ip` (a connection file's) reaches this host only.
fn is_loopback(ip: &str) -> bool {
    ip == "localhost"
        || ip
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

/// Runs a kernel on bound `sockets` until a shutdown_request.
pub async fn serve(sockets: Sockets, python: PythonConfig) -> Result<(), KernelError> {
    serve_until(sockets, python, CancellationToken::new()).await
}

/// [`serve`], but cancelling `stop` shuts the kernel down too, as a
/// shutdown_request does (a launcher's own shutdown request, say).
pub async fn serve_until(
    sockets: Sockets,
    python: PythonConfig,
    stop: CancellationToken,
) -> Result<(), KernelError> {
    let Sockets {
        connection,
        encrypted,
        heartbeat,
        iopub: iopub_socket,
        control,
        shell,
        stdin,
    } = sockets;
    let signer = Signer::new(&connection.signature_scheme, connection.key.as_bytes())?;
    let codec = Arc::new(Codec::new(signer, uuid::Uuid::new_v4().to_string()));

    // Cancelled once what the kernel sent at shutdown has been written.
    let closing = CancellationToken::new();
    let (iopub, iopub_task) = Iopub::start(
        XPub::start(iopub_socket, "iopub"),
        codec.clone(),
        closing.clone(),
    );
    iopub.status(ExecutionState::Starting, no_parent());
    let shell = Router::start(shell, "shell", "ROUTER");
    let control = Router::start(control, "control", "ROUTER");
    let stdin = Router::start(stdin, "stdin", "ROUTER");
    let senders = [shell.sender(), control.sender(), stdin.sender()];
    let (stdin, stdin_task) = Stdin::start(stdin, shell.sender(), codec.clone(), closing.clone());
    let io = Arc::new(KernelIo::new(iopub.clone(), stdin));
    let agents = Arc::new(AgentSession::default());
    let agents = AgentRuns::new(agents, tokio::runtime::Handle::current());
    let debugger = python.debugger;
    // Read before the interpreter's thread starts: Py_GetVersion formats
    // into a static buffer, and a call racing the interpreter's own start
    // once tore its `sys.version` ("3.11.7 () [GCC ...]"), which `platform`
    // cannot parse, so `import pandas` failed in that kernel.
    let python_version = crate::python::linked_python_version();
    let (python_handle, interrupter) = PythonHandle::start(python, io.clone(), io.clone(), agents);
    let (control, control_replies) =
        RouterChannel::new("control", control, codec.clone(), iopub.clone());
    let (shell, shell_replies) = RouterChannel::new("shell", shell, codec.clone(), iopub.clone());
    let debug_io = io.clone();
    let shared = Arc::new(Shared {
        kernel_info: kernel_info(&python_version, debugger, encrypted),
        ports: json!({
            "status": "ok",
            "shell_port": connection.shell_port,
            "iopub_port": connection.iopub_port,
            "stdin_port": connection.stdin_port,
            "control_port": connection.control_port,
            "hb_port": connection.hb_port,
        }),
        python: python_handle,
        interrupter,
        io,
        shutdown: stop,
        execution_count: AtomicU32::new(0),
        subshells: subshells::Subshells::new(shell::start),
        shell_replies,
        debugger: debugger::Debugger::default(),
        debug_events: Arc::new(debugger::EventSink {
            iopub: iopub.clone(),
            parent: {
                let io = debug_io;
                Box::new(move || io.control_header())
            },
        }),
    });

    let heartbeat_task = tokio::spawn(heartbeat::run(
        Router::start(heartbeat, "heartbeat", "REP"),
        shared.shutdown.clone(),
    ));
    let control_task = tokio::spawn(control::run(control, control_replies, shared.clone()));
    let shell_task = tokio::spawn(shell::run(shell, shared.clone()));

    shared.shutdown.cancelled().await;
    shared.python.shutdown(PYTHON_SHUTDOWN_LIMIT).await;
    crate::cell_files::remove_all();
    // The local model's server is shared by this user's kernels and stops
    // by itself when unused: nothing of the agent's to stop here.
    let written = futures_util::future::join(
        iopub.flush(),
        futures_util::future::join_all(senders.iter().map(RouterSender::drain)),
    );
    if tokio::time::timeout(DRAIN_LIMIT, written).await.is_err() {
        tracing::debug!("shutdown: a client did not read what was left for it");
    }
    closing.cancel();
    let tasks = [
        heartbeat_task,
        control_task,
        shell_task,
        stdin_task,
        iopub_task,
    ];
    if tokio::time::timeout(TASKS_LIMIT, futures_util::future::join_all(tasks))
        .await
        .is_err()
    {
        tracing::warn!("shutdown: a channel's task did not end in time");
    }
    Ok(())
}

/// Binds `port` at `address` (transport, ip), or where that is taken the
/// ports `alternative` offers; sets `port` to the port it got.
async fn bind(
    channel: &'static str,
    (transport, ip): &(Transport, String),
    port: &mut u16,
    alternative: &mut dyn FnMut() -> Option<u16>,
) -> Result<Listener, KernelError> {
    loop {
        let endpoint = match transport {
            Transport::TCP => Endpoint::Tcp(ip.clone(), *port),
            Transport::IPC => Endpoint::Ipc(format!("{ip}-{port}").into()),
        };
        match Listener::bind(&endpoint).await {
            Ok(listener) => {
                if let Endpoint::Tcp(..) = endpoint {
                    *port = listener.port;
                }
                return Ok(listener);
            }
            Err(source) => match alternative() {
                Some(next) => {
                    tracing::debug!("{channel}: {endpoint} is taken ({source}); trying {next}");
                    *port = next;
                }
                None => {
                    return Err(KernelError::Bind {
                        channel,
                        endpoint: endpoint.to_string(),
                        source,
                    });
                }
            },
        }
    }
}

/// Python's way out of the kernel: output published on IOPub and input
/// asked over stdin, each for the request the command to Python carries;
/// and the request last served on control, which Python can ask about.
struct KernelIo {
    iopub: Iopub,
    stdin: Stdin,
    /// The request last served on the control channel.
    control: Mutex<(Arc<Value>, Vec<bytes::Bytes>)>,
}

impl KernelIo {
    fn new(iopub: Iopub, stdin: Stdin) -> Self {
        Self {
            iopub,
            stdin,
            control: Mutex::new((no_parent(), Vec::new())),
        }
    }

    /// The header of the control request served last.
    fn control_header(&self) -> Arc<Value> {
        self.control
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .clone()
    }

    /// `request` is being served on the control channel.
    fn set_control(&self, request: &crate::wire::Message) {
        *self.control.lock().unwrap_or_else(PoisonError::into_inner) =
            (request.raw_header.clone(), request.identities.clone());
    }
}

impl OutputSink for KernelIo {
    fn last_control_request(&self) -> (Value, Vec<bytes::Bytes>) {
        let control = self.control.lock().unwrap_or_else(PoisonError::into_inner);
        (control.0.as_ref().clone(), control.1.clone())
    }

    fn emit(&self, output: Output, parent: &Arc<Value>) {
        let parent = parent.clone();
        match output {
            Output::Stream { name, text } => {
                let name = match name {
                    StreamName::Stdout => Stdio::Stdout,
                    StreamName::Stderr => Stdio::Stderr,
                };
                let stream = StreamContent { name, text };
                self.iopub
                    .send(crate::wire::Outgoing::typed(stream, parent));
            }
            Output::Message {
                msg_type,
                content,
                metadata,
                buffers,
            } => {
                let mut out = crate::wire::Outgoing::new(msg_type, content, parent);
                out.metadata = metadata;
                out.buffers = buffers;
                self.iopub.send(out);
            }
        }
    }
}

impl InputProvider for KernelIo {
    fn request_input(
        &self,
        prompt: &str,
        password: bool,
        parent: &Parent,
    ) -> Result<std::sync::mpsc::Receiver<String>, InputUnavailable> {
        if !parent.allow_stdin {
            return Err(InputUnavailable);
        }
        let identities = parent.identities.clone();
        Ok(self
            .stdin
            .request(prompt, password, identities, parent.header.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::is_loopback;

    #[test]
    fn only_addresses_of_this_host_count_as_loopback() {
        for ip in ["127.0.0.1", "127.0.0.5", "::1", "localhost"] {
            assert!(is_loopback(ip), "{ip}");
        }
        for ip in ["0.0.0.0", "*", "10.0.0.7", "::", "kernel-host"] {
            assert!(!is_loopback(ip), "{ip}");
        }
    }
}
