//! Agent runs asked for from Python: `%%ask` cells, `ask()`, `rlm()` and
//! `%ask_config` all call the bridge's `ask`, on the interpreter thread.
//!
//! The run itself is async work elsewhere (the [`AgentHost`] the kernel
//! provides), but everything it needs from Python (running the code the
//! model wrote, a summary of the namespace, a prompt for the user) must
//! happen on this very thread, which is blocked in the call. So the thread
//! serves the run inline: it waits for the run's [`InlinePython::call`]s and
//! answers each with the GIL held, until the run says it is done. A run that
//! calls `ask()` again from the code it runs just nests another such loop.
//!
//! An interrupt lands in this loop (or in the code being served): the run is
//! cancelled, and once it has finished the call raises `KeyboardInterrupt`.

use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyDict, PyTuple};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::gil::recv_released;
use super::interrupt;
use super::pyerr::python_error;
use crate::exception::PythonException;

/// Where a call's method sends the text its code writes, as it writes it.
pub type LiveText = tokio::sync::mpsc::UnboundedSender<String>;

/// How often a thread serving a run checks for an interrupt.
const POLL: Duration = Duration::from_millis(50);

/// How long an interrupted run gets to finish (it only has to drop what it
/// waits on) before the interrupt is raised regardless.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// Starts agent runs for the Python side. The kernel implements it.
pub trait AgentHost: Send + Sync + 'static {
    /// Starts a run of `request` (JSON from the runtime), whose output
    /// belongs to `parent` (the header of the request that asked). The run reaches Python only through `python`, and must
    /// end, by [`InlinePython::finish`] or by dropping it, soon after
    /// `cancel` is cancelled.
    fn start(
        &self,
        request: Value,
        parent: Arc<Value>,
        python: InlinePython,
        cancel: CancellationToken,
    );
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

/// A run's way to the Python thread that asked for it. Dropping it without
/// [`InlinePython::finish`] ends the call with an error.
pub struct InlinePython {
    messages: mpsc::Sender<Message>,
}

impl InlinePython {
    /// Calls `method` of the scope the run was started with, on the Python
    /// thread; `args` and the result are JSON. A Python exception comes back
    /// as the error (`KeyboardInterrupt` when the user pressed stop). With
    /// `output`, the method gets a second argument: a function that sends
    /// the text it is given there.
    pub async fn call(
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
    pub fn finish(self, result: Value) {
        let _ = self.messages.send(Message::Finished(result));
    }
}

/// Starts a run of `request` with `host` and serves it on this thread until
/// it finishes; returns its result. `scope` is the Python object whose
/// methods the run calls (each takes and returns JSON text).
pub(super) fn serve(
    py: Python<'_>,
    host: &dyn AgentHost,
    request: Value,
    scope: &Bound<'_, PyAny>,
    parent: Arc<Value>,
) -> PyResult<Value> {
    let (messages, mut inbox) = mpsc::channel();
    let cancel = CancellationToken::new();
    let interrupts = super::interrupt::interrupt_count();
    host.start(request, parent, InlinePython { messages }, cancel.clone());
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
