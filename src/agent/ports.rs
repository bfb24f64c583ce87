//! The agent's ports: all it needs from the rest of the kernel, which
//! implements them. With these, a run publishes what the user sees, works
//! in Python, and notices the stop button; it never touches ZeroMQ or pyo3.

use std::future::Future;

use serde_json::Value;

/// A call into Python that raised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonFailure {
    pub ename: String,
    pub evalue: String,
}

impl PythonFailure {
    /// A reply of `method` that is not what the call expects.
    pub fn bad_reply(method: &str, error: &dyn std::fmt::Display) -> Self {
        Self {
            ename: "ValueError".into(),
            evalue: format!("unreadable reply of {method}: {error}"),
        }
    }

    /// The user pressed stop while Python worked.
    pub fn is_interrupt(&self) -> bool {
        self.ename == "KeyboardInterrupt"
    }
}

impl std::fmt::Display for PythonFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.evalue.is_empty() {
            f.write_str(&self.ename)
        } else {
            write!(f, "{}: {}", self.ename, self.evalue)
        }
    }
}

/// What a run needs from the kernel.
pub trait Ports: Send + Sync {
    /// Publishes an IOPub message (`stream`, `display_data`) for the cell
    /// the run belongs to.
    fn publish(&self, msg_type: &str, content: Value);

    /// Calls `method` of the Python scope the run works in, on the Python
    /// thread that asked for the run; arguments and result are JSON.
    fn python(
        &self,
        method: &str,
        args: Value,
    ) -> impl Future<Output = Result<Value, PythonFailure>> + Send;

    /// Like [`Ports::python`], for a call whose code writes text (agent
    /// code running): what it writes goes to `output` as it is written.
    /// Ports that cannot tell drop it; the text is in the result anyway.
    fn python_with_output(
        &self,
        method: &str,
        args: Value,
        output: Output,
    ) -> impl Future<Output = Result<Value, PythonFailure>> + Send {
        drop(output);
        self.python(method, args)
    }

    /// Resolves when the user presses stop.
    fn cancelled(&self) -> impl Future<Output = ()> + Send;
}

/// Where a Python call sends the text its code writes, as it writes it.
pub type Output = tokio::sync::mpsc::UnboundedSender<String>;
