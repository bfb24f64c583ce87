//! The interpreter thread: initialises CPython in the chosen environment,
//! loads the runtime (the `mahtab` package, [`sources`]), then serves
//! commands one at a time.
//!
//! The thread holds the GIL only while it works on a command, so threads that
//! user code starts keep running between cells.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::{Arc, Mutex};

use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use pyo3::exceptions::{PyEOFError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::fd_capture::{self, FdCapture};
use super::inline::{self, AgentHost};
use super::interrupt::{self, CellRunning};
use super::output::{Output, OutputSink, StreamBuffer, StreamName};
use super::sources;
use super::subshell::{self, Serving, SubshellInbox};
use super::{
    Command, ExecuteCell, ExecuteOutcome, InputProvider, Parent, PythonConfig, PythonException,
    RuntimeState,
};

pyo3::create_exception!(
    _mahtab,
    StdinNotImplementedError,
    PyRuntimeError,
    "input() was called, but the frontend does not take input for this cell."
);

/// How often a waiting `input()` checks for an interrupt.
const INPUT_POLL: Duration = Duration::from_millis(50);

/// Bridge handed to the Python runtime: its only way to send output to Rust.
#[pyclass(frozen)]
struct Bridge {
    buffer: Arc<StreamBuffer>,
    input: Arc<dyn InputProvider>,
    agents: Arc<dyn AgentHost>,
    connection_file: Option<String>,
    /// The last parent header Python chose for a thread, parsed: a thread
    /// writes many times with the same one.
    last_parent: Mutex<Option<(String, Arc<Value>)>>,
}

fn stream_name(name: &str) -> StreamName {
    if name == "stderr" {
        StreamName::Stderr
    } else {
        StreamName::Stdout
    }
}

impl Bridge {
    /// The request the calling thread serves: a subshell's, or else the
    /// main shell's (also for threads the user started).
    fn serving(&self) -> Parent {
        subshell::serving().unwrap_or_else(|| self.buffer.main_request())
    }

    fn parent_from(&self, header: &str) -> PyResult<Arc<Value>> {
        let mut last = self
            .last_parent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((text, parsed)) = last.as_ref()
            && text == header
        {
            return Ok(parsed.clone());
        }
        let parsed: Value =
            serde_json::from_str(header).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let parsed = Arc::new(parsed);
        *last = Some((header.to_owned(), parsed.clone()));
        Ok(parsed)
    }
}

#[pymethods]
impl Bridge {
    /// The file name a cell with `code` compiles under (for debuggers).
    fn cell_file_name(&self, code: &str) -> String {
        crate::cell_files::file_name(code)
    }

    /// Writes the file a cell with `code` compiles under (in the kernel's
    /// private directory of cell files); its name, or None if it cannot.
    fn write_cell_file(&self, code: &str) -> Option<String> {
        crate::cell_files::write(code)
            .map_err(|e| tracing::warn!("cannot write a cell file: {e}"))
            .ok()
    }

    /// The kernel's connection file, if known.
    #[getter]
    fn connection_file(&self) -> Option<String> {
        self.connection_file.clone()
    }

    /// Adds text to a stream. `sys.stdout.write` is this method itself,
    /// bound to the stream's name (a Python frame per write would cost a
    /// print loop a good part of its time), so it checks its argument and
    /// returns the number of characters, as `write` does.
    fn write(&self, name: &str, text: &Bound<'_, PyAny>) -> PyResult<usize> {
        let Ok(text) = text.cast::<PyString>() else {
            let kind = text.get_type().name()?;
            return Err(PyTypeError::new_err(format!(
                "write() argument must be str, not {kind}"
            )));
        };
        let length = text.len()?;
        let text = text.to_str()?;
        let name = stream_name(name);
        // print() writes its text, then "\n": one look serves both.
        if text != "\n" {
            fd_capture::catch_up(name);
        }
        self.buffer.write(name, text);
        Ok(length)
    }

    /// `write` for a thread whose output belongs to another request than the
    /// main shell's (`set_thread_parent`): `parent` is that request's header,
    /// JSON text.
    fn write_for(&self, name: &str, text: &str, parent: &str) -> PyResult<()> {
        let name = stream_name(name);
        let parent = self.parent_from(parent)?;
        fd_capture::catch_up(name);
        self.buffer.write_for(name, text, Some(parent));
        Ok(())
    }

    fn flush(&self) {
        self.buffer.flush();
    }

    /// `input()` / `getpass()`: asks the client and waits for its answer,
    /// raising KeyboardInterrupt if the cell is interrupted meanwhile.
    fn input(&self, py: Python<'_>, prompt: &str, password: bool) -> PyResult<String> {
        self.buffer.flush();
        let interrupts = interrupt::interrupt_count();
        let mut answer = self
            .input
            .request_input(prompt, password, &self.serving())
            .map_err(|e| StdinNotImplementedError::new_err(e.to_string()))?;
        loop {
            let received;
            (answer, received) = super::recv_released(py, answer, INPUT_POLL);
            match received {
                // Ctrl-D in a terminal frontend, as in ipykernel.
                Ok(value) if value == "\u{4}" => {
                    return Err(PyEOFError::new_err("EOF when reading a line"));
                }
                Ok(value) => return Ok(value),
                Err(RecvTimeoutError::Timeout) => check_interrupt(py, interrupts)?,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(PyEOFError::new_err("the kernel is shutting down"));
                }
            }
        }
    }

    /// Runs an agent request (`%%ask`, `ask()`, `rlm()`, `%ask_config`;
    /// JSON text) and returns its result (JSON text). The run calls back
    /// into `scope` on this thread; see [`inline`].
    fn ask(&self, py: Python<'_>, request: &str, scope: Bound<'_, PyAny>) -> PyResult<String> {
        let request: Value =
            serde_json::from_str(request).map_err(|e| PyValueError::new_err(e.to_string()))?;
        // What the cell printed before comes before what the run shows.
        self.buffer.flush();
        let parent = self.serving().header;
        let result = inline::serve(py, self.agents.as_ref(), request, &scope, parent)?;
        Ok(result.to_string())
    }

    /// The header of the request being served (`channel` "shell"), or of
    /// the one last served on "control", as JSON text.
    #[pyo3(signature = (channel = "shell"))]
    fn parent_header(&self, channel: &str) -> String {
        match channel {
            "control" => self.buffer.sink().last_control_request().0.to_string(),
            _ => self.serving().header.to_string(),
        }
    }

    /// The ROUTER identities of that request (what ipykernel calls
    /// `_parent_ident`).
    #[pyo3(signature = (channel = "shell"))]
    fn parent_identities<'py>(&self, py: Python<'py>, channel: &str) -> Vec<Bound<'py, PyBytes>> {
        let identities = match channel {
            "control" => self.buffer.sink().last_control_request().1,
            _ => self.serving().identities,
        };
        identities
            .iter()
            .map(|identity| PyBytes::new(py, identity))
            .collect()
    }

    /// A record from Python's `logging` meant for the kernel's own log.
    fn log(&self, level: u32, message: &str) {
        match level {
            40.. => tracing::error!("{message}"),
            30..40 => tracing::warn!("{message}"),
            20..30 => tracing::info!("{message}"),
            _ => tracing::debug!("{message}"),
        }
    }

    /// Called by the runtime right before it runs the user's code; raises
    /// the KeyboardInterrupt of an interrupt that came before it started.
    fn user_code_starting(&self) -> PyResult<()> {
        let interrupted = if interrupt::on_interpreter_thread() {
            interrupt::user_code_starting()
        } else {
            subshell::interrupted_before_start()
        };
        if interrupted {
            return Err(pyo3::exceptions::PyKeyboardInterrupt::new_err(()));
        }
        Ok(())
    }

    /// Publishes an IOPub message after the buffered stream text, as a child
    /// of `parent` (a header, JSON text) or, without one, of the main shell's request.
    #[pyo3(signature = (msg_type, content, metadata = None, buffers = None, parent = None))]
    fn publish(
        &self,
        msg_type: String,
        content: &str,
        metadata: Option<&str>,
        buffers: Option<Vec<Vec<u8>>>,
        parent: Option<&str>,
    ) -> PyResult<()> {
        let parse = |text: &str| -> PyResult<Value> {
            serde_json::from_str(text).map_err(|e| PyValueError::new_err(e.to_string()))
        };
        let output = Output::Message {
            msg_type,
            content: parse(content)?,
            metadata: match metadata {
                Some(text) => parse(text)?,
                None => Value::Object(Map::new()),
            },
            buffers: buffers
                .unwrap_or_default()
                .into_iter()
                .map(bytes::Bytes::from)
                .collect(),
        };
        let parent = parent.map(|header| self.parent_from(header)).transpose()?;
        self.buffer.emit_after_flush(output, parent.as_ref());
        Ok(())
    }

    /// The body of a subshell's thread: serves the commands of `inbox` with
    /// `runtime` until the kernel drops the subshell.
    fn serve_subshell(
        &self,
        py: Python<'_>,
        inbox: &Bound<'_, SubshellInbox>,
        runtime: Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let Some(mut commands) = inbox.get().take() else {
            return Err(PyRuntimeError::new_err("this subshell is served already"));
        };
        loop {
            let command;
            (commands, command) = subshell::next_command(py, commands);
            match command {
                None => return Ok(()),
                Some(Command::Shutdown(done)) => {
                    let _ = done.send(());
                    return Ok(());
                }
                Some(Command::Execute(cell, reply)) => {
                    let outcome = execute(py, &runtime, &self.buffer, cell, Thread::Subshell);
                    let _ = reply.send(outcome);
                }
                Some(Command::Request {
                    msg_type,
                    content,
                    buffers,
                    parent,
                    reply,
                    aside: _,
                }) => {
                    let result = request(
                        py,
                        &runtime,
                        &self.buffer,
                        (msg_type, content, &buffers),
                        parent,
                        Thread::Subshell,
                    );
                    self.buffer.flush();
                    let _ = reply.send(result);
                }
            }
        }
    }
}

/// Calls the runtime's `method` with `args` (JSON text in and out).
pub(super) fn call_runtime(
    py: Python<'_>,
    runtime: &Py<PyAny>,
    method: &str,
    args: &Value,
) -> Result<Value, PythonException> {
    call_json(runtime.bind(py), method, (args.to_string(),)).map_err(|e| python_error(py, &e))
}

/// Starts a subshell's thread (named `name`) on `runtime`, serving the
/// commands that arrive on `commands`.
pub(super) fn start_subshell(
    py: Python<'_>,
    runtime: &Py<PyAny>,
    commands: std::sync::mpsc::Receiver<Command>,
    name: &str,
) -> Result<(), PythonException> {
    let inbox = Bound::new(py, SubshellInbox::new(commands)).map_err(|e| python_error(py, &e))?;
    runtime
        .bind(py)
        .call_method1("start_subshell", (inbox, name))
        .map(drop)
        .map_err(|e| python_error(py, &e))
}

/// Which kind of thread serves a command.
enum Thread<'a> {
    /// The interpreter thread: for the main shell, or `aside` for control
    /// (the main shell's request stays the one output goes to by default).
    /// `drain_fds` reads what C code wrote to fds 1 and 2 (it belongs to the
    /// command).
    Main {
        drain_fds: &'a dyn Fn(),
        aside: bool,
    },
    Subshell,
}

/// Serves a request Python answers (its type, content and buffers) as a
/// child of `parent`.
fn request(
    py: Python<'_>,
    runtime: &Bound<'_, PyAny>,
    buffer: &StreamBuffer,
    (msg_type, content, buffers): (String, Value, &[bytes::Bytes]),
    parent: Parent,
    thread: Thread<'_>,
) -> Result<Value, PythonException> {
    let buffers: Vec<&[u8]> = buffers.iter().map(|b| b.as_ref()).collect();
    let content = content.to_string();
    let result = match thread {
        Thread::Main { drain_fds, aside } => {
            let previous = aside.then(|| buffer.main_request());
            buffer.serve_main(parent);
            let result = call_json(runtime, "request", (msg_type, content, buffers));
            drain_fds();
            if let Some(main) = previous {
                buffer.serve_main(main);
            }
            result
        }
        Thread::Subshell => {
            let header = parent.header.to_string();
            let _serving = Serving::start(parent, false);
            call_json(runtime, "request_for", (header, msg_type, content, buffers))
        }
    };
    result.map_err(|e| python_error(py, &e))
}

pub(super) fn spawn(
    config: PythonConfig,
    sink: Arc<dyn OutputSink>,
    input: Arc<dyn InputProvider>,
    agents: Arc<dyn AgentHost>,
    commands: Receiver<Command>,
    ready: tokio::sync::watch::Sender<RuntimeState>,
    wake_fd: Option<OwnedFd>,
) {
    std::thread::Builder::new()
        .name("mahtab-python".into())
        .stack_size(python_stack_size())
        .spawn(move || run(config, sink, input, agents, commands, ready, wake_fd))
        .expect("spawn the Python interpreter thread");
}

/// The smallest stack a thread that runs Python gets: what a main thread
/// has by default (`ulimit -s` is 8 MiB on Linux).
const MIN_PYTHON_STACK: usize = 8 << 20;

/// The most: deep enough for any recursion CPython allows in practice; the
/// stack is reserved address space, and pages are used only as it grows.
const MAX_PYTHON_STACK: usize = 1 << 30;

/// The stack for a thread that runs Python. CPython 3.11 recurses on the C
/// stack (repr of nested containers, pickling, the compiler) as deep as
/// `sys.setrecursionlimit` lets it, and a user who raises the limit expects a
/// main thread's stack, as in ipykernel; a Rust thread's default 2 MiB
/// would end the process instead of raising RecursionError.
pub(super) fn python_stack_size() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes to the struct we own.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_STACK, &mut limit) } == 0 {
        limit.rlim_cur
    } else {
        libc::RLIM_INFINITY
    };
    if soft == libc::RLIM_INFINITY {
        return MAX_PYTHON_STACK;
    }
    usize::try_from(soft)
        .unwrap_or(MAX_PYTHON_STACK)
        .clamp(MIN_PYTHON_STACK, MAX_PYTHON_STACK)
}

fn run(
    config: PythonConfig,
    sink: Arc<dyn OutputSink>,
    input: Arc<dyn InputProvider>,
    agents: Arc<dyn AgentHost>,
    commands: Receiver<Command>,
    ready: tokio::sync::watch::Sender<RuntimeState>,
    wake_fd: Option<OwnedFd>,
) {
    let buffer = StreamBuffer::start(sink);
    let runtime = initialize(&config).and_then(|()| {
        let connection_file = config
            .connection_file
            .as_ref()
            .map(|path| path.to_string_lossy().into_owned());
        let bridge = || Bridge {
            buffer: buffer.clone(),
            input: input.clone(),
            agents: agents.clone(),
            connection_file: connection_file.clone(),
            last_parent: Mutex::new(None),
        };
        let runtime = Python::attach(|py| load_runtime(py, bridge).map_err(|e| describe(py, &e)));
        // After the runtime's imports, which may have set Python's own handler.
        interrupt::install_on_interpreter_thread();
        runtime
    });
    // Start-up messages went to the kernel's log; from here on, output on
    // fds 1 and 2 belongs to the cells.
    let capture = match FdCapture::start(buffer.clone()) {
        Ok(capture) => Some(capture),
        Err(e) => {
            tracing::warn!("output of C code and subprocesses is not captured: {e}");
            None
        }
    };
    let drain = || {
        if let Some(capture) = &capture {
            capture.drain();
        }
    };
    let _ = ready.send(match &runtime {
        Ok(runtime) => RuntimeState::Ready(Arc::new(Python::attach(|py| runtime.clone_ref(py)))),
        Err(message) => {
            tracing::error!("Python failed to start: {message}");
            RuntimeState::Failed(message.clone())
        }
    });
    // Release the GIL that initialisation left with this thread; each command
    // takes it again for as long as it runs.
    // SAFETY: this thread holds the GIL after Py_InitializeFromConfig (or none,
    // if initialisation failed, in which case we skip this).
    if runtime.is_ok() {
        unsafe {
            pyo3::ffi::PyEval_SaveThread();
        }
    }

    loop {
        let command = match commands.try_recv() {
            Ok(command) => command,
            Err(TryRecvError::Disconnected) => break,
            Err(TryRecvError::Empty) => {
                // Idle: asyncio tasks that cells created go on until work
                // comes (a byte on the wake pipe), as in ipykernel, whose
                // own loop runs them.
                if let (Ok(runtime), Some(wake_fd)) = (&runtime, &wake_fd)
                    && run_event_loop(runtime, wake_fd)
                {
                    drain();
                    buffer.flush();
                    continue;
                }
                match commands.recv() {
                    Ok(command) => command,
                    Err(_) => break,
                }
            }
        };
        match (command, &runtime) {
            (Command::Shutdown(done), Ok(runtime)) => {
                Python::attach(|py| {
                    if let Err(e) = runtime.bind(py).call_method0("shutdown") {
                        tracing::warn!("runtime shutdown failed: {}", describe(py, &e));
                    }
                });
                drain();
                buffer.close();
                let _ = done.send(());
                return;
            }
            (Command::Shutdown(done), Err(_)) => {
                let _ = done.send(());
                return;
            }
            (Command::Execute(cell, reply), Ok(runtime)) => {
                let thread = Thread::Main {
                    drain_fds: &drain,
                    aside: false,
                };
                let outcome =
                    Python::attach(|py| execute(py, runtime.bind(py), &buffer, cell, thread));
                let _ = reply.send(outcome);
            }
            (Command::Execute(cell, reply), Err(message)) => {
                let error = PythonException::internal(format!("Python failed to start: {message}"));
                buffer.emit_after_flush(error_output(&error), Some(&cell.parent.header));
                let _ = reply.send(ExecuteOutcome::failed(error));
            }
            (
                Command::Request {
                    msg_type,
                    content,
                    buffers,
                    parent,
                    aside,
                    reply,
                },
                Ok(runtime),
            ) => {
                let thread = Thread::Main {
                    drain_fds: &drain,
                    aside,
                };
                let result = Python::attach(|py| {
                    let message = (msg_type, content, buffers.as_slice());
                    request(py, runtime.bind(py), &buffer, message, parent, thread)
                });
                buffer.flush();
                let _ = reply.send(result);
            }
            (Command::Request { reply, .. }, Err(message)) => {
                let error = PythonException::internal(format!("Python failed to start: {message}"));
                let _ = reply.send(Err(error));
            }
        }
    }
    buffer.close();
}

/// Runs the event loop of the cells between them, if it has work, until
/// the kernel has something to do; returns whether it ran.
fn run_event_loop(runtime: &Py<PyAny>, wake_fd: &OwnedFd) -> bool {
    Python::attach(|py| {
        match runtime
            .bind(py)
            .call_method1("run_event_loop", (wake_fd.as_raw_fd(),))
            .and_then(|ran| ran.extract::<bool>())
        {
            Ok(ran) => ran,
            Err(e) => {
                tracing::warn!("the event loop between cells failed: {}", describe(py, &e));
                false
            }
        }
    })
}

/// Initialises CPython for the configured environment.
fn initialize(config: &PythonConfig) -> Result<(), String> {
    // SAFETY: the PyConfig API is used as CPython documents it: init, set
    // fields, initialise from it, clear it. This runs once, on this thread,
    // before anything else touches Python.
    unsafe {
        if pyo3::ffi::Py_IsInitialized() != 0 {
            return Err("Python was already initialised".into());
        }
        let mut cfg = std::mem::MaybeUninit::<pyo3::ffi::PyConfig>::zeroed();
        pyo3::ffi::PyConfig_InitPythonConfig(cfg.as_mut_ptr());
        let mut cfg = cfg.assume_init();
        // Python's own SIGINT handler makes KeyboardInterrupt possible (it is
        // installed only if SIGINT is not ignored); the interrupt module then
        // takes over the OS-level disposition.
        interrupt::sigint_default_before_python();
        cfg.install_signal_handlers = 1;
        cfg.parse_argv = 0;
        let mut status = pyo3::ffi::PyStatus_Ok();
        if let Some(executable) = &config.executable {
            let path = CString::new(executable.as_os_str().as_bytes())
                .map_err(|_| "the Python path contains a NUL byte".to_string())?;
            let field = std::ptr::addr_of_mut!(cfg.executable);
            status = pyo3::ffi::PyConfig_SetBytesString(&mut cfg, field, path.as_ptr());
        }
        if pyo3::ffi::PyStatus_Exception(status) == 0 {
            status = pyo3::ffi::Py_InitializeFromConfig(&cfg);
        }
        pyo3::ffi::PyConfig_Clear(&mut cfg);
        if pyo3::ffi::PyStatus_Exception(status) != 0 {
            let message = if status.err_msg.is_null() {
                "unknown error".to_string()
            } else {
                CStr::from_ptr(status.err_msg)
                    .to_string_lossy()
                    .into_owned()
            };
            return Err(format!("CPython initialisation failed: {message}"));
        }
    }
    Ok(())
}

/// Loads the Python side and creates the session's runtime: IPython's when
/// IPython imports, else plain Python (and says so once, on stderr).
fn load_runtime(py: Python<'_>, bridge: impl Fn() -> Bridge) -> PyResult<Py<PyAny>> {
    sources::install(py)?;
    let ipython = py
        .import("mahtab.ipython_runtime")
        .and_then(|ipython| ipython.getattr("IPythonRuntime")?.call1((bridge(),)));
    match ipython {
        Ok(shell) => Ok(shell.unbind()),
        Err(e) => {
            // Without a working IPython the kernel still runs plain Python.
            // The kernel's log says so once; a cell that uses a magic says so
            // in its error.
            let plain = py
                .import("mahtab.plain_runtime")?
                .getattr("Runtime")?
                .call1((bridge(),))?;
            let reason = if e.is_instance_of::<pyo3::exceptions::PyImportError>(py) {
                format!("IPython is not available ({})", e.value(py))
            } else {
                let error = python_error(py, &e);
                tracing::error!("IPython failed to start:\n{}", error.traceback.join("\n"));
                format!(
                    "IPython failed to start ({}: {})",
                    error.ename, error.evalue
                )
            };
            tracing::warn!(
                "{reason}, so cells run as plain Python; magics such as %time need IPython \
                 (pip install ipython in the kernel's environment)"
            );
            Ok(plain.unbind())
        }
    }
}

#[derive(Deserialize)]
struct ExecuteReplyFields {
    status: String,
    #[serde(flatten)]
    error: Option<PythonException>,
    #[serde(default)]
    user_expressions: Value,
    #[serde(default)]
    payload: Vec<Value>,
}

fn execute(
    py: Python<'_>,
    runtime: &Bound<'_, PyAny>,
    buffer: &StreamBuffer,
    cell: ExecuteCell,
    thread: Thread<'_>,
) -> ExecuteOutcome {
    let expressions = Value::Object(cell.user_expressions).to_string();
    let args = (
        cell.code,
        cell.execution_count,
        cell.silent,
        cell.store_history,
        expressions,
    );
    // Errors the runtime could not publish go to the cell's request.
    let parent = cell.parent.header.clone();
    let result = match thread {
        Thread::Main { drain_fds, .. } => {
            buffer.serve_main(cell.parent);
            let running = CellRunning::start();
            let result = call_json(runtime, "execute", args);
            drop(running);
            discard_pending_interrupt(py);
            drain_fds();
            result
        }
        Thread::Subshell => {
            let header = parent.to_string();
            let _serving = Serving::start(cell.parent, true);
            let (code, count, silent, store_history, expressions) = args;
            call_json(
                runtime,
                "execute_for",
                (header, code, count, silent, store_history, expressions),
            )
        }
    };
    let parent = Some(&parent);
    let outcome = match result.map(serde_json::from_value::<ExecuteReplyFields>) {
        Ok(Ok(fields)) if fields.status == "ok" => ExecuteOutcome {
            error: None,
            user_expressions: non_null_object(fields.user_expressions),
            payload: fields.payload,
        },
        Ok(Ok(fields)) => ExecuteOutcome {
            error: Some(
                fields
                    .error
                    .unwrap_or_else(|| PythonException::internal("cell failed without details")),
            ),
            user_expressions: non_null_object(fields.user_expressions),
            payload: fields.payload,
        },
        Ok(Err(e)) => {
            let error =
                PythonException::internal(format!("unreadable result from the runtime: {e}"));
            buffer.emit_after_flush(error_output(&error), parent);
            ExecuteOutcome::failed(error)
        }
        // An exception escaped the runtime itself, e.g. an interrupt that
        // arrived just before or after the user's code. The runtime publishes
        // the errors it catches; this one the client has not seen yet.
        Err(e) => {
            let outcome = ExecuteOutcome::failed(python_error(py, &e));
            if let Some(error) = &outcome.error {
                buffer.emit_after_flush(error_output(error), parent);
            }
            outcome
        }
    };
    buffer.flush();
    outcome
}

fn non_null_object(value: Value) -> Value {
    if value.is_object() {
        value
    } else {
        Value::Object(Map::new())
    }
}

fn error_output(error: &PythonException) -> Output {
    Output::Message {
        metadata: Value::Object(Map::new()),
        buffers: Vec::new(),
        msg_type: "error".into(),
        content: serde_json::json!({
            "ename": error.ename,
            "evalue": error.evalue,
            "traceback": error.traceback,
        }),
    }
}

/// Calls a runtime method that returns JSON text and parses it.
fn call_json<'py>(
    runtime: &Bound<'py, PyAny>,
    method: &str,
    args: impl pyo3::call::PyCallArgs<'py>,
) -> PyResult<Value> {
    let text: String = runtime.call_method1(method, args)?.extract()?;
    serde_json::from_str(&text).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Raises the KeyboardInterrupt of an interrupt that came while the kernel
/// waited on this thread: CPython's flag, or failing that (Python code may
/// have swallowed the exception) the kernel's count, seen at
/// `interrupts` when the wait began.
pub(super) fn check_interrupt(py: Python<'_>, interrupts: u64) -> PyResult<()> {
    py.check_signals()?;
    if interrupt::interrupt_count() != interrupts {
        super::subshell::interrupt_delivered();
        return Err(pyo3::exceptions::PyKeyboardInterrupt::new_err(()));
    }
    Ok(())
}

/// A SIGINT that arrived as a cell ended is still pending in CPython; consume
/// it now so it cannot surface in the next cell.
fn discard_pending_interrupt(py: Python<'_>) {
    if let Err(e) = py.check_signals() {
        tracing::debug!("discarded a late interrupt: {e}");
    }
}

/// The one conversion from a Python exception to an error message's fields.
pub(super) fn python_error(py: Python<'_>, err: &PyErr) -> PythonException {
    let ename = err
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    let evalue = err.value(py).to_string();
    let mut traceback = Vec::new();
    if let Some(tb) = err.traceback(py)
        && let Ok(text) = tb.format()
    {
        traceback.extend(text.lines().map(str::to_owned));
    }
    traceback.push(format!("{ename}: {evalue}"));
    PythonException {
        ename,
        evalue,
        traceback,
    }
}

/// A readable one-line description of a start-up failure.
fn describe(py: Python<'_>, err: &PyErr) -> String {
    let error = python_error(py, err);
    format!("{}: {}", error.ename, error.evalue)
}
