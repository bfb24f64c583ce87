//! The kernel's side of the agent: a thin adapter that starts the agent
//! session's runs for the Python side (`%%ask` cells, `ask()`,
//! `%ask_config`) and implements the session's ports: publishing on IOPub
//! with the calling cell as parent, calling back into the Python thread
//! that asked, and the stop button.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::iopub::Iopub;
use crate::agent::ports::{LiveText, Ports};
use crate::agent::session::AgentSession;
use crate::agent::shown::Shown;
use crate::exception::PythonException;
use crate::python::{AgentHost, InlinePython};

/// Starts agent runs on the kernel's async runtime.
pub(super) struct AgentAdapter {
    pub(super) session: Arc<AgentSession>,
    pub(super) iopub: Iopub,
    pub(super) runtime: tokio::runtime::Handle,
}

impl AgentHost for AgentAdapter {
    fn start(
        &self,
        request: Value,
        parent: Arc<Value>,
        python: InlinePython,
        cancel: CancellationToken,
    ) {
        let ports = KernelPorts {
            iopub: self.iopub.clone(),
            parent,
            python,
            cancel,
        };
        let session = self.session.clone();
        self.runtime.spawn(async move {
            let result = session.handle(request, &ports).await;
            ports.python.finish(result);
        });
    }
}

/// The ports of one run.
struct KernelPorts {
    iopub: Iopub,
    /// The request of the cell that asked for the run.
    parent: Arc<Value>,
    python: InlinePython,
    cancel: CancellationToken,
}

impl Ports for KernelPorts {
    fn publish(&self, shown: Shown) {
        self.iopub
            .publish(shown.msg_type(), shown.content(), self.parent.clone());
    }

    async fn python(&self, method: &str, args: Value) -> Result<Value, PythonException> {
        self.python.call(method, args, None).await
    }

    async fn python_with_output(
        &self,
        method: &str,
        args: Value,
        output: LiveText,
    ) -> Result<Value, PythonException> {
        self.python.call(method, args, Some(output)).await
    }

    async fn cancelled(&self) {
        self.cancel.cancelled().await;
    }
}
