//! The `%%ask` agent: a graph that asks a model for Python, runs it in the
//! user's namespace, looks at the result and keeps going until the request is
//! done or the turn limit is reached.
//!
//! Nothing here touches ZeroMQ or pyo3. The graph ([`graph`]) and its nodes
//! ([`nodes`]) reach the world only through [`Effects`]: a model call, a code
//! execution, a namespace summary, and events for the user. A run's real
//! effects ([`session`]) work through the [`ports`] the kernel implements;
//! tests provide scripted ones.

pub mod analyst;
pub mod budget;
pub mod checks;
pub mod config;
pub mod config_file;
pub mod extract;
pub mod graph;
mod indent;
pub mod live;
pub mod llm;
pub mod memory;
pub mod nodes;
pub mod options;
pub mod planner;
pub mod ports;
pub mod prompts;
pub mod prose;
pub mod provider;
pub mod reflect;
pub mod render;
pub mod rlm;
pub mod schemas;
#[cfg(test)]
mod script;
pub mod session;
mod settings;
pub mod state;
pub mod stream;
pub mod triage;

use std::future::Future;

pub use state::{AgentState, Execution, Outcome};

use llm::{ChatRequest, LlmError, Usage};
use reflect::Verdict;

/// Why a run stopped early.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Llm(#[from] LlmError),
    #[error("interrupted")]
    Interrupted,
    #[error("agent graph: {0}")]
    Graph(String),
}

/// What a run reports as it goes, besides streamed text (which
/// [`Effects::chat`] shows itself); the kernel turns these into panels.
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
    Plan(analyst::Plan),
    /// The analyst graph gave up: every attempt at the code failed.
    GaveUp {
        failed: Vec<Execution>,
    },
    /// The planner graph's informer described these variables.
    Informed(Vec<planner::KeyInformation>),
    /// A line on what the run is doing (a triage decision, a repair).
    Status(String),
    /// An answer given without a model call.
    Answer(String),
}

/// A model's complete answer to one call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatOutcome {
    pub text: String,
    pub usage: Usage,
    /// How many of the answer's code blocks were shown as panels while it
    /// streamed (the first ones, in order).
    pub blocks_shown: usize,
    /// The answer was cut off at the length limit.
    pub truncated: bool,
}

/// How a model's answer is shown while it streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Showing {
    /// Not at all: a judgement the kernel reads.
    Hidden,
    /// Its prose streams; code blocks are held back.
    Prose,
    /// Its prose streams, and each code block shows as a code panel of
    /// `turn` as soon as it is complete (for answers whose code will run).
    ProseAndCode { turn: u32 },
}

/// Which model answers a run's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ModelChoice {
    /// The provider the run was configured with.
    #[default]
    Configured,
    /// The claude CLI, which the triage graph hands work to when installed.
    ClaudeCli,
}

/// Everything a run needs from outside.
pub trait Effects: graph::Observer + Send {
    /// Calls the model, showing its answer as it arrives as `showing` says.
    fn chat(
        &mut self,
        request: ChatRequest,
        showing: Showing,
    ) -> impl Future<Output = Result<ChatOutcome, AgentError>> + Send;

    /// Runs `code` in the user's namespace; the result as the model sees it.
    fn execute(&mut self, code: &str)
    -> impl Future<Output = Result<Execution, AgentError>> + Send;

    /// A summary of the live namespace for the prompt.
    fn namespace(&mut self) -> impl Future<Output = String> + Send;

    /// Describes variables in detail (schema, size, missing values, a few
    /// rows): those in `names` that exist, or with no names, those that
    /// `request` mentions.
    fn describe(
        &mut self,
        request: &str,
        names: &[String],
    ) -> impl Future<Output = Vec<planner::KeyInformation>> + Send;

    /// Which of `targets` (variables and files a request names) do not
    /// exist (files relative to the working directory).
    fn missing(
        &mut self,
        targets: &checks::Targets,
    ) -> impl Future<Output = checks::Targets> + Send;

    /// What the triage's pre-plan looks at: the user's variables and last
    /// error.
    fn triage_context(&mut self) -> impl Future<Output = triage::Context> + Send;

    /// A fix for `code`, which failed with `error`, made without the model,
    /// if a known repair applies.
    fn repair(
        &mut self,
        code: &str,
        error: &str,
    ) -> impl Future<Output = Option<triage::Repair>> + Send;

    /// Sends the model calls that follow to `model` (the claude CLI only
    /// when the run offers it as an agent).
    fn use_model(&mut self, model: ModelChoice);

    /// Reports progress to the user.
    fn emit(&mut self, event: AgentEvent);
}
