//! The agent's ports: all it needs from the rest of the kernel, which the
//! Python side implements (`python::agent_runs`, on the thread that asked for
//! the run). With these, a run publishes what the user sees, works
//! in Python, and notices the stop button; it never touches ZeroMQ or pyo3.

use std::future::Future;

use serde_json::Value;

use crate::agent::shown::Shown;
use crate::exception::PythonException;

/// What a run needs from the kernel.
pub trait Ports: Send + Sync {
    /// Publishes what the run shows (a `stream` or a panel) on IOPub, for
    /// the cell the run belongs to.
    fn publish(&self, shown: Shown);

    /// Calls `method` of the Python scope the run works in, on the Python
    /// thread that asked for the run; arguments and result are JSON.
    fn python(
        &self,
        method: &str,
        args: Value,
    ) -> impl Future<Output = Result<Value, PythonException>> + Send;

    /// Like [`Ports::python`], for a call whose code writes text (agent
    /// code running): what it writes goes to `output` as it is written.
    /// Ports that cannot tell drop it; the text is in the result anyway.
    fn python_with_output(
        &self,
        method: &str,
        args: Value,
        output: LiveText,
    ) -> impl Future<Output = Result<Value, PythonException>> + Send {
        drop(output);
        self.python(method, args)
    }

    /// Resolves when the user presses stop.
    fn cancelled(&self) -> impl Future<Output = ()> + Send;
}

/// Where a Python call sends the text its code writes, as it writes it.
pub type LiveText = tokio::sync::mpsc::UnboundedSender<String>;
