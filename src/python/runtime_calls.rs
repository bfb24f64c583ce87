//! Serving one command on a Python thread (the interpreter's or a
//! subshell's): running a cell and turning its outcome into the reply's
//! fields, serving a request Python answers, calling the runtime with JSON.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::commands::{Command, ExecuteCell, ExecuteOutcome, Parent};
use super::interrupt::{self, CellRunning};
use super::output::{Output, StreamBuffer};
use super::pyerr::python_error;
use super::runtime_method::RuntimeMethod;
use super::runtime_request::RuntimeRequest;
use super::subshell::{Serving, SubshellInbox};
use crate::exception::PythonException;

/// Calls the runtime's `method` with `args` (JSON text in and out).
pub(super) fn call_runtime(
    py: Python<'_>,
    runtime: &Py<PyAny>,
    method: RuntimeMethod,
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
        .call_method1(RuntimeMethod::StartSubshell.name(), (inbox, name))
        .map(drop)
        .map_err(|e| python_error(py, &e))
}

/// Which kind of thread serves a command.
pub(super) enum Thread<'a> {
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

/// Serves a request Python answers (what it asks, its content and buffers)
/// as a child of `parent`: the runtime's method for it gets the content
/// (the whole message, for a comm message).
pub(super) fn request(
    py: Python<'_>,
    runtime: &Bound<'_, PyAny>,
    buffer: &StreamBuffer,
    (asked, content, buffers): (RuntimeRequest, Value, &[bytes::Bytes]),
    parent: Parent,
    thread: Thread<'_>,
) -> Result<Value, PythonException> {
    let buffers: Vec<&[u8]> = buffers.iter().map(|b| b.as_ref()).collect();
    let content = content.to_string();
    let (method, replies) = (asked.method(), asked.replies());
    let result = match thread {
        Thread::Main { drain_fds, aside } => {
            let previous = aside.then(|| buffer.main_request());
            buffer.serve_main(parent);
            let result = call_json(
                runtime,
                RuntimeMethod::Request,
                (method, replies, content, buffers),
            );
            drain_fds();
            if let Some(main) = previous {
                buffer.serve_main(main);
            }
            result
        }
        Thread::Subshell => {
            let header = parent.header.to_string();
            let _serving = Serving::start(parent, false);
            call_json(
                runtime,
                RuntimeMethod::RequestFor,
                (header, method, replies, content, buffers),
            )
        }
    };
    result.map_err(|e| python_error(py, &e))
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

pub(super) fn execute(
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
            let result = call_json(runtime, RuntimeMethod::Execute, args);
            drop(running);
            interrupt::discard_pending_interrupt(py);
            drain_fds();
            result
        }
        Thread::Subshell => {
            let header = parent.to_string();
            let _serving = Serving::start(cell.parent, true);
            let (code, count, silent, store_history, expressions) = args;
            call_json(
                runtime,
                RuntimeMethod::ExecuteFor,
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

pub(super) fn error_output(error: &PythonException) -> Output {
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
    method: RuntimeMethod,
    args: impl pyo3::call::PyCallArgs<'py>,
) -> PyResult<Value> {
    let text: String = runtime.call_method1(method.name(), args)?.extract()?;
    serde_json::from_str(&text).map_err(|e| PyValueError::new_err(e.to_string()))
}
