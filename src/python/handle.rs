//! The kernel's handle on a Python thread: it sends commands and awaits
//! their results, starts subshells, and serves requests that may run past
//! a time limit.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, mpsc};

use serde_json::Value;
use tokio::sync::{oneshot, watch};

use super::agent_runs::AgentRuns;
use super::async_exc::TimedCall;
use super::commands::{
    Command, ExecuteCell, ExecuteOutcome, InputProvider, Parent, PythonConfig, RuntimeState,
};
use super::interpreter;
use super::interrupt::{self, Interrupter};
use super::output::OutputSink;
use super::runtime_calls;
use super::runtime_method::RuntimeMethod;
use super::runtime_request::RuntimeRequest;
use super::subshell_interrupts;
use crate::exception::PythonException;

/// The kernel's way to reach the interpreter thread (or a subshell's
/// thread). Cloning is cheap.
#[derive(Clone)]
pub struct PythonHandle {
    commands: mpsc::Sender<Command>,
    /// Wakes the thread from the event loop it runs between cells (the
    /// interpreter thread's handle only).
    waker: Option<Arc<LoopWaker>>,
    /// The runtime, once Python has started: subshells are started on it.
    runtime: watch::Receiver<RuntimeState>,
    /// Whether this is a subshell's thread rather than the interpreter's.
    subshell: bool,
}

/// The write end of a pipe whose read end the interpreter thread's event
/// loop watches between cells: a byte there means work has come.
struct LoopWaker {
    write_end: OwnedFd,
}

impl LoopWaker {
    /// The waker and the read end to watch.
    fn new() -> std::io::Result<(Self, OwnedFd)> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two new descriptors into the array we own.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned by no one else.
        let (read_end, write_end) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok((Self { write_end }, read_end))
    }

    fn wake(&self) {
        // A full pipe already holds a wake-up: nothing is lost.
        // SAFETY: writes one byte from a static buffer to our descriptor.
        unsafe {
            libc::write(self.write_end.as_raw_fd(), b"!".as_ptr().cast(), 1);
        }
    }
}

/// How long a call past its time limit gets to end after its TimeoutError.
const CALL_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

const INTERPRETER_GONE: &str = "the Python interpreter thread is not running";

impl PythonHandle {
    /// Starts the interpreter thread. Returns at once: Python initialises in
    /// the background (the kernel answers kernel_info meanwhile) and requests
    /// queue until it is ready.
    pub fn start(
        config: PythonConfig,
        sink: Arc<dyn OutputSink>,
        input: Arc<dyn InputProvider>,
        agents: AgentRuns,
    ) -> (Self, Interrupter) {
        let (commands, receiver) = mpsc::channel();
        let (ready, runtime) = watch::channel(RuntimeState::Starting);
        let (waker, wake_fd) = match LoopWaker::new() {
            Ok((waker, read_end)) => (Some(Arc::new(waker)), Some(read_end)),
            Err(e) => {
                tracing::warn!("asyncio tasks will not run between cells: {e}");
                (None, None)
            }
        };
        interpreter::spawn(config, sink, input, agents, receiver, ready, wake_fd);
        let handle = Self {
            commands,
            waker,
            runtime,
            subshell: false,
        };
        (handle, Interrupter)
    }

    /// The runtime, once Python has started.
    async fn started_runtime(&self) -> Result<Arc<pyo3::Py<pyo3::PyAny>>, PythonException> {
        let mut state = self.runtime.clone();
        match state
            .wait_for(|state| !matches!(state, RuntimeState::Starting))
            .await
            .map(|state| state.clone())
        {
            Ok(RuntimeState::Ready(runtime)) => Ok(runtime),
            Ok(RuntimeState::Failed(message)) => Err(PythonException::internal(format!(
                "Python failed to start: {message}"
            ))),
            Ok(RuntimeState::Starting) | Err(_) => Err(PythonException::internal(INTERPRETER_GONE)),
        }
    }

    /// Calls the runtime's `method` (JSON text in and out) on a thread of
    /// its own, now: while a cell runs (taking the GIL when the cell lets go
    /// of it) or is stopped in the debugger. For what the debugger asks. The
    /// thread has a main thread's stack, as the interpreter's does (a repr of
    /// a deep structure recurses on it); past `limit`, the call is sent a
    /// TimeoutError at its next Python instruction, and if it still has not
    /// returned a moment later the answer is an error (the thread is left to
    /// finish on its own).
    pub async fn call_now(
        &self,
        method: RuntimeMethod,
        args: Value,
        limit: std::time::Duration,
    ) -> Result<Value, PythonException> {
        let runtime = self.started_runtime().await?;
        let call = Arc::new(TimedCall::default());
        let (done, result) = oneshot::channel();
        let thread_call = call.clone();
        let spawned = std::thread::Builder::new()
            .name("mahtab-call".into())
            .stack_size(interpreter::python_stack_size())
            .spawn(move || {
                let outcome = pyo3::Python::attach(|py| {
                    thread_call.begin();
                    let outcome = runtime_calls::call_runtime(py, &runtime, method, &args);
                    thread_call.end();
                    outcome
                });
                let _ = done.send(outcome);
            });
        if let Err(e) = spawned {
            return Err(PythonException::internal(format!(
                "cannot start a thread: {e}"
            )));
        }
        let gone = || PythonException::internal("the call to Python ended without an answer");
        let mut result = result;
        if let Ok(outcome) = tokio::time::timeout(limit, &mut result).await {
            return outcome.map_err(|_| gone())?;
        }
        tokio::task::spawn_blocking(move || call.time_out())
            .await
            .ok();
        match tokio::time::timeout(CALL_GRACE, result).await {
            Ok(outcome) => outcome.map_err(|_| gone())?,
            Err(_) => Err(PythonException::internal(format!(
                "Python did not answer within {limit:?}"
            ))),
        }
    }

    /// Hands `command` to the thread, waking it from its event loop;
    /// false if the thread is gone.
    fn send(&self, command: Command) -> bool {
        if self.commands.send(command).is_err() {
            return false;
        }
        if let Some(waker) = &self.waker {
            waker.wake();
        }
        true
    }

    /// Starts a subshell's Python thread (named after `id`) and returns the
    /// handle that serves it; dropping every clone of it ends the thread
    /// once it is done with what it runs.
    pub async fn create_subshell(&self, id: &str) -> Result<PythonHandle, PythonException> {
        let runtime = self.started_runtime().await?;
        let (commands, receiver) = mpsc::channel();
        let name = format!("subshell-{id}");
        // Taking the GIL may wait for a cell to let go of it: not on the
        // async runtime's threads.
        tokio::task::spawn_blocking(move || {
            pyo3::Python::attach(|py| runtime_calls::start_subshell(py, &runtime, receiver, &name))
        })
        .await
        .map_err(|e| PythonException::internal(format!("cannot start a subshell: {e}")))??;
        Ok(Self {
            commands,
            waker: None,
            runtime: self.runtime.clone(),
            subshell: true,
        })
    }

    /// Runs a cell; stream output, displays and the error message (if any)
    /// have all been emitted to the sink when this returns.
    pub async fn execute(&self, cell: ExecuteCell) -> ExecuteOutcome {
        let (reply, outcome) = oneshot::channel();
        if !self.subshell {
            interrupt::cell_queued();
        }
        if !self.send(Command::Execute(cell, reply)) {
            if self.subshell {
                subshell_interrupts::cell_dropped();
            }
            return ExecuteOutcome::failed(PythonException::internal(INTERPRETER_GONE));
        }
        outcome
            .await
            .unwrap_or_else(|_| ExecuteOutcome::failed(PythonException::internal(INTERPRETER_GONE)))
    }

    /// Lets the runtime save its state before the process exits, waiting at
    /// most `limit` (the interpreter may be stuck in a cell that ignored the
    /// interrupt; the exit must not wait for it).
    pub async fn shutdown(&self, limit: std::time::Duration) {
        let (done, finished) = oneshot::channel();
        if self.send(Command::Shutdown(done))
            && tokio::time::timeout(limit, finished).await.is_err()
        {
            tracing::warn!("the interpreter did not finish its shutdown in time");
        }
    }

    /// Serves a request that Python answers (complete, inspect, is_complete,
    /// history, comm_info, and the comm messages): `content` and `buffers`
    /// are the message's, the result the reply's content.
    pub async fn request(
        &self,
        request: RuntimeRequest,
        content: Value,
        buffers: Vec<bytes::Bytes>,
        parent: Parent,
    ) -> Result<Value, PythonException> {
        self.send_request(request, content, buffers, parent, false)
            .await
    }

    /// [`PythonHandle::request`] for a control request (the debugger's
    /// start), between the main shell's requests: output the main shell's
    /// request makes later still goes to it.
    pub async fn request_aside(
        &self,
        request: RuntimeRequest,
        content: Value,
        parent: Parent,
    ) -> Result<Value, PythonException> {
        self.send_request(request, content, Vec::new(), parent, true)
            .await
    }

    async fn send_request(
        &self,
        request: RuntimeRequest,
        content: Value,
        buffers: Vec<bytes::Bytes>,
        parent: Parent,
        aside: bool,
    ) -> Result<Value, PythonException> {
        let (reply, result) = oneshot::channel();
        let command = Command::Request {
            request,
            content,
            buffers,
            parent,
            aside,
            reply,
        };
        if !self.send(command) {
            return Err(PythonException::internal(INTERPRETER_GONE));
        }
        result
            .await
            .unwrap_or_else(|_| Err(PythonException::internal(INTERPRETER_GONE)))
    }
}

/// The version of the libpython mahtab is linked against, e.g. "3.11.7".
/// To be called before the interpreter's thread starts, never beside it:
/// Py_GetVersion writes the static buffer it returns on every call, and
/// the interpreter's start reads it for `sys.version`.
pub fn linked_python_version() -> String {
    // SAFETY: Py_GetVersion returns a static NUL-terminated string and may be
    // called before Py_Initialize (with no other thread calling it).
    let full = unsafe { std::ffi::CStr::from_ptr(pyo3::ffi::Py_GetVersion()) };
    full.to_string_lossy()
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}
