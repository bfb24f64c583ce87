//! The bridge the Python runtime holds: its only way to reach Rust. It
//! writes and publishes output, asks for input, serves `ask()` inline, and
//! is the body of a subshell's thread.

use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::{PyEOFError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use serde_json::{Map, Value};

use super::agent_runs::{self, AgentRuns};
use super::commands::{Command, InputProvider, Parent};
use super::fd_capture::{self};
use super::gil::recv_released;
use super::interrupt::{self, check_interrupt};
use super::output::{Output, StreamBuffer, StreamName};
use super::runtime_calls::{Thread, execute, request};
use super::subshell::{self, SubshellInbox};
use super::subshell_interrupts;

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
pub(super) struct Bridge {
    buffer: Arc<StreamBuffer>,
    input: Arc<dyn InputProvider>,
    agents: AgentRuns,
    connection_file: Option<String>,
    /// The last parent header Python chose for a thread, parsed: a thread
    /// writes many times with the same one.
    last_parent: Mutex<Option<(String, Arc<Value>)>>,
}

impl Bridge {
    pub(super) fn new(
        buffer: Arc<StreamBuffer>,
        input: Arc<dyn InputProvider>,
        agents: AgentRuns,
        connection_file: Option<String>,
    ) -> Self {
        Self {
            buffer,
            input,
            agents,
            connection_file,
            last_parent: Mutex::new(None),
        }
    }
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
            (answer, received) = recv_released(py, answer, INPUT_POLL);
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
    /// into `scope` on this thread; see [`agent_runs`].
    fn ask(&self, py: Python<'_>, request: &str, scope: Bound<'_, PyAny>) -> PyResult<String> {
        let request: Value =
            serde_json::from_str(request).map_err(|e| PyValueError::new_err(e.to_string()))?;
        // What the cell printed before comes before what the run shows.
        self.buffer.flush();
        let parent = self.serving().header;
        let result = agent_runs::run_here(py, &self.agents, &self.buffer, request, &scope, parent)?;
        Ok(result.to_string())
    }

    /// The frontend's id of the notebook cell being run, if it sent one.
    fn cell_id(&self) -> Option<String> {
        self.serving().cell_id.map(|id| id.to_string())
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
            subshell_interrupts::interrupted_before_start()
        };
        if interrupted {
            return Err(pyo3::exceptions::PyKeyboardInterrupt::new_err(()));
        }
        Ok(())
    }

    /// `time.sleep` (the runtime's replacement calls this with the real
    /// one): in a subshell's cell, a sleep an interrupt ends at once, since
    /// only the main thread's blocking calls see signals; anywhere else, or
    /// for an argument the real one must judge, the real sleep.
    fn sleep(
        &self,
        py: Python<'_>,
        real: Bound<'_, PyAny>,
        seconds: Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let plain_number = seconds.is_instance_of::<pyo3::types::PyFloat>()
            || seconds.is_instance_of::<pyo3::types::PyInt>();
        let length = plain_number
            .then(|| seconds.extract::<f64>().ok())
            .flatten()
            .and_then(|s| std::time::Duration::try_from_secs_f64(s).ok());
        let (Some(length), Some(seen)) = (length, subshell_interrupts::delivered_to_this_cell())
        else {
            real.call1((seconds,))?;
            return Ok(());
        };
        // Counted from what the cell has had, not from now: an interrupt
        // that came just before the sleep (its exception not yet set) ends
        // it at once rather than a minute later.
        let interrupts = interrupt::interrupt_count()
            .wrapping_sub(subshell_interrupts::interrupt_count())
            .wrapping_add(seen);
        let deadline = std::time::Instant::now() + length;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            py.detach(|| subshell_interrupts::wait_for_interrupt(seen, left));
            check_interrupt(py, interrupts)?;
        }
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
                    request: asked,
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
                        (asked, content, &buffers),
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
