//! Agent runs asked for from Python: `%%ask` cells, `ask()`, `rlm()` and
//! `%ask_config` all call the bridge's `ask`, on the interpreter thread.
//!
//! The run itself is async work on the kernel's runtime ([`AgentRuns`]),
//! but everything it needs from Python (running the code the model wrote, a
//! summary of the namespace, a prompt for the user) must happen on this
//! very thread, which is blocked in the call. So the run's ports are
//! [`InlinePython`], made here: its calls travel to this thread, which
//! answers each with the GIL held until the run says it is done, and what
//! it shows goes out with the cell's other output. A run that calls
//! `ask()` again from the code it runs just nests another such loop.
//!
//! An interrupt lands in this loop (or in the code being served): the run is
//! cancelled, and once it has finished the call raises `KeyboardInterrupt`.

use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyDict, PyTuple};
use serde_json::{Map, Value};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::gil::recv_released;
use super::interrupt;
use super::output::{Output, StreamBuffer};
use super::pyerr::python_error;
use crate::agent::ports::{LiveText, Ports};
use crate::agent::session::AgentSession;
use crate::agent::shown::Shown;
use crate::exception::PythonException;

/// How often a thread serving a run checks for an interrupt.
const POLL: Duration = Duration::from_millis(50);

/// How long an interrupted run gets to finish (it only has to drop what it
/// waits on) before the interrupt is raised regardless.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// The agent session the kernel's runs belong to, and the async runtime
/// they run on.
#[derive(Clone)]
pub struct AgentRuns {
    session: Arc<AgentSession>,
    runtime: tokio::runtime::Handle,
}

impl AgentRuns {
    pub fn new(session: Arc<AgentSession>, runtime: tokio::runtime::Handle) -> Self {
        Self { session, runtime }
    }

    /// Starts a run of `request` (JSON from the runtime) working through
    /// `python`; its result goes back to the waiting thread.
    fn start(&self, request: Value, python: InlinePython) {
        let session = self.session.clone();
        self.runtime.spawn(async move {
            let result = session.handle(request, &python).await;
            python.finish(result);
        });
    }
}

enum Message {
    Call {
        method: String,
        args: Value,
        output: Option<LiveText>,
        reply: oneshot::Sender<Result<Value, PythonException>>,
    },
    Finished(Value),
}

/// A run's ports: the Python thread that asked for it, the cell's output,
/// and its stop button. Dropping it without [`InlinePython::finish`] ends
/// the call with an error.
struct InlinePython {
    messages: mpsc::Sender<Message>,
    output: Arc<StreamBuffer>,
    /// The request of the cell that asked for the run.
    parent: Arc<Value>,
    cancel: CancellationToken,
}

impl InlinePython {
    /// Calls `method` of the scope the run was started with, on the Python
    /// thread; `args` and the result are JSON. A Python exception comes back
    /// as the error (`KeyboardInterrupt` when the user pressed stop). With
    /// `output`, the method gets a second argument: a function that sends
    /// the text it is given there.
    async fn call(
        &self,
        method: &str,
        args: Value,
        output: Option<LiveText>,
    ) -> Result<Value, PythonException> {
        let (reply, result) = oneshot::channel();
        let message = Message::Call {
            method: method.to_owned(),
            args,
            output,
            reply,
        };
        self.messages
            .send(message)
            .map_err(|_| PythonException::internal("the Python caller of this run is gone"))?;
        result.await.unwrap_or_else(|_| {
            Err(PythonException::internal(
                "the Python caller of this run is gone",
            ))
        })
    }

    /// Ends the run with `result`, which the Python call returns.
    fn finish(self, result: Value) {
        let _ = self.messages.send(Message::Finished(result));
    }
}

impl Ports for InlinePython {
    fn publish(&self, shown: Shown) {
        let message = Output::Message {
            msg_type: shown.msg_type().to_owned(),
            content: shown.content(),
            metadata: Value::Object(Map::new()),
            buffers: Vec::new(),
        };
        // After what the cell's code printed so far, as the user expects.
        self.output.emit_after_flush(message, Some(&self.parent));
    }

    async fn python(&self, method: &str, args: Value) -> Result<Value, PythonException> {
        self.call(method, args, None).await
    }

    async fn python_with_output(
        &self,
        method: &str,
        args: Value,
        output: LiveText,
    ) -> Result<Value, PythonException> {
        self.call(method, args, Some(output)).await
    }

    async fn cancelled(&self) {
        self.cancel.cancelled().await;
    }
}

/// Starts a run of `request` and serves it on this thread until it
/// finishes; returns its result. `scope` is the Python object whose methods
/// the run calls (each takes and returns JSON text); what the run shows
/// goes to `output` as a child of `parent`.
pub(super) fn run_here(
    py: Python<'_>,
    runs: &AgentRuns,
    output: &Arc<StreamBuffer>,
    request: Value,
    scope: &Bound<'_, PyAny>,
    parent: Arc<Value>,
) -> PyResult<Value> {
    let (messages, mut inbox) = mpsc::channel();
    let cancel = CancellationToken::new();
    let interrupts = super::interrupt::interrupt_count();
    let python = InlinePython {
        messages,
        output: output.clone(),
        parent,
        cancel: cancel.clone(),
    };
    runs.start(request, python);
    let mut interrupted: Option<(PyErr, Instant)> = None;
    loop {
        let received;
        (inbox, received) = recv_released(py, inbox, POLL);
        match received {
            Ok(Message::Call {
                method,
                args,
                output,
                reply,
            }) => {
                let result = if interrupted.is_some() {
                    Err(PythonException::interrupted(""))
                } else {
                    call_scope(scope, &method, &args, output).map_err(|e| {
                        let error = python_error(py, &e);
                        if e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
                            cancel.cancel();
                            interrupted = Some((e, Instant::now()));
                        }
                        error
                    })
                };
                let _ = reply.send(result);
            }
            Ok(Message::Finished(result)) => {
                return match interrupted {
                    Some((error, _)) => Err(error),
                    None => Ok(result),
                };
            }
            Err(RecvTimeoutError::Timeout) => match &interrupted {
                None => {
                    if let Err(e) = interrupt::check_interrupt(py, interrupts) {
                        cancel.cancel();
                        interrupted = Some((e, Instant::now()));
                    }
                }
                Some((_, since)) if since.elapsed() > CANCEL_GRACE => {
                    tracing::warn!("an interrupted agent run did not finish in time");
                    return Err(interrupted.take().expect("matched above").0);
                }
                Some(_) => {}
            },
            Err(RecvTimeoutError::Disconnected) => {
                return match interrupted {
                    Some((error, _)) => Err(error),
                    None => Err(pyo3::exceptions::PyRuntimeError::new_err(
                        "the agent run ended without a result",
                    )),
                };
            }
        }
    }
}

fn call_scope(
    scope: &Bound<'_, PyAny>,
    method: &str,
    args: &Value,
    output: Option<LiveText>,
) -> PyResult<Value> {
    let args = args.to_string();
    let result = match output {
        None => scope.call_method1(method, (args,))?,
        Some(output) => {
            // A gone receiver (the run ended) only means no one watches.
            let send = move |args: &Bound<'_, PyTuple>, _: Option<&Bound<'_, PyDict>>| {
                let (text,): (String,) = args.extract()?;
                let _ = output.send(text);
                PyResult::Ok(())
            };
            let send = PyCFunction::new_closure(scope.py(), Some(c"output"), None, send)?;
            scope.call_method1(method, (args, send))?
        }
    };
    let text: String = result.extract()?;
    serde_json::from_str(&text).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}
