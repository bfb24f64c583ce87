//! What the kernel sends to a Python thread and what comes back: the
//! commands, the cell to run and its outcome, the request a command serves
//! (its parent), the environment to embed, and how input is asked for.

use super::runtime_request::RuntimeRequest;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::oneshot;

use crate::exception::PythonException;

/// Answers `input()` and `getpass()` in a cell. The kernel implements it by
/// asking the client that sent the cell over the stdin channel.
pub trait InputProvider: Send + Sync + 'static {
    /// Asks for a line of input, of the client that sent `parent`; the
    /// answer arrives on the returned channel (disconnected if it never
    /// will).
    fn request_input(
        &self,
        prompt: &str,
        password: bool,
        parent: &Parent,
    ) -> Result<std::sync::mpsc::Receiver<String>, InputUnavailable>;
}

/// The client that sent the request does not take input (`allow_stdin` false).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("raw_input was called, but this frontend does not support input requests.")]
pub struct InputUnavailable;

/// Which Python environment to embed.
#[derive(Debug, Clone, Default)]
pub struct PythonConfig {
    /// The environment's `python` executable (a venv's `bin/python` works:
    /// CPython finds `pyvenv.cfg` next to it). `None`: the interpreter mahtab
    /// was built against, as the loader finds it.
    pub executable: Option<PathBuf>,
    /// The kernel's connection file, which `%connect_info` names so another
    /// client (`jupyter console --existing`) can join.
    pub connection_file: Option<PathBuf>,
    /// Whether to offer the debugger: the environment has debugpy (the
    /// kernelspec says so; `mahtab install` checks).
    pub debugger: bool,
}

/// The request a command to Python serves: the output and input of the
/// command belong to it.
#[derive(Debug, Clone)]
pub struct Parent {
    pub header: Arc<Value>,
    /// The ROUTER identities of the client that sent it.
    pub identities: Vec<bytes::Bytes>,
    pub allow_stdin: bool,
    /// For a subshell's cell: what [`Interrupter::subshell_cell_coming`]
    /// returned when it was queued (an interrupt since then stops it before
    /// it starts).
    pub interrupts_seen: u64,
    /// The frontend's id of the notebook cell the request runs (the
    /// execute_request's metadata `cellId`, which JupyterLab and VS Code
    /// send).
    pub cell_id: Option<Arc<str>>,
}

impl Parent {
    /// No request (output before the first one is a child of nothing).
    pub fn none() -> Self {
        Self {
            header: Arc::new(Value::Object(Map::new())),
            identities: Vec::new(),
            allow_stdin: false,
            interrupts_seen: 0,
            cell_id: None,
        }
    }
}

/// One cell to run.
#[derive(Debug, Clone)]
pub struct ExecuteCell {
    pub code: String,
    /// The number shown for this cell (In[n]).
    pub execution_count: u32,
    pub silent: bool,
    pub store_history: bool,
    /// `user_expressions` from the request: name -> expression.
    pub user_expressions: Map<String, Value>,
    /// The execute_request.
    pub parent: Parent,
}

/// What running a cell produced, beyond its published output.
#[derive(Debug, Clone)]
pub struct ExecuteOutcome {
    pub error: Option<PythonException>,
    pub user_expressions: Value,
    pub payload: Vec<Value>,
}

impl ExecuteOutcome {
    /// A cell that succeeded, with nothing to report.
    pub fn ok() -> Self {
        Self {
            error: None,
            user_expressions: Value::Object(Map::new()),
            payload: Vec::new(),
        }
    }

    /// A cell that failed with `error`.
    pub fn failed(error: PythonException) -> Self {
        Self {
            error: Some(error),
            user_expressions: Value::Object(Map::new()),
            payload: Vec::new(),
        }
    }
}

pub(super) enum Command {
    Execute(ExecuteCell, oneshot::Sender<ExecuteOutcome>),
    Request {
        request: RuntimeRequest,
        content: Value,
        buffers: Vec<bytes::Bytes>,
        parent: Parent,
        /// Served for the control channel: output of the main shell's
        /// request goes on to it afterwards.
        aside: bool,
        reply: oneshot::Sender<Result<Value, PythonException>>,
    },
    /// The kernel is about to exit: save what must outlive it (history).
    Shutdown(oneshot::Sender<()>),
}

/// Whether the runtime is ready for subshells.
#[derive(Clone)]
pub(super) enum RuntimeState {
    Starting,
    Ready(Arc<pyo3::Py<pyo3::PyAny>>),
    Failed(String),
}
