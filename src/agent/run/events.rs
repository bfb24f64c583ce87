//! What a run tells the user as it goes ([`AgentEvent`]) and why it stops
//! early ([`AgentError`]).

use super::findings::{KeyInformation, Plan, Verdict};
use super::state::Execution;
use crate::agent::llm::LlmError;
use crate::exception::{ExceptionKind, PythonException};

/// Why a run stopped early.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Llm(#[from] LlmError),
    #[error("interrupted")]
    Interrupted,
    /// Python could not do what the run needs from it (ask the user, say).
    #[error("{0}")]
    Python(PythonException),
    /// A graph that routed where it cannot: a mistake in the graph.
    #[error("agent graph: {0}")]
    Graph(String),
}

impl From<PythonException> for AgentError {
    fn from(exception: PythonException) -> Self {
        match exception.kind() {
            ExceptionKind::Interrupt => AgentError::Interrupted,
            _ => AgentError::Python(exception),
        }
    }
}

/// What a run reports as it goes, besides streamed text (which
/// [`super::Effects::chat`] shows itself); the kernel turns these into panels.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// A code block is about to run (or would, with execution off).
    Code {
        turn: u32,
        block: usize,
        code: String,
    },
    /// A code block ran.
    Executed {
        turn: u32,
        block: usize,
        execution: Execution,
    },
    Verdict(Verdict),
    /// The analyst graph decided how to answer.
    Plan(Plan),
    /// The analyst graph gave up: every attempt at the code failed.
    GaveUp {
        failed: Vec<Execution>,
    },
    /// The planner graph's informer described these variables.
    Informed(Vec<KeyInformation>),
    /// A line on what the run is doing (a triage decision, a repair).
    Status(String),
    /// An answer given without a model call.
    Answer(String),
}
