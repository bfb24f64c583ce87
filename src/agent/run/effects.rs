//! Everything a run needs from outside, as one trait: the graphs call it,
//! the session implements it over the kernel's ports, and tests script it.

use std::future::Future;

use super::events::{AgentError, AgentEvent};
use super::findings::{Agreement, Context, KeyInformation, Repair, Targets, WrittenResult};
use super::state::Execution;
use crate::agent::llm::{ChatOutcome, ChatRequest};

/// Told when nodes start and finish, so a run can be shown as it happens.
pub trait Observer {
    /// `node` (its name) started doing `activity` (none: nothing the
    /// status line tells).
    fn node_started(&mut self, node: &'static str, activity: Option<Activity>);
    fn node_finished(&mut self, node: &'static str);
}

/// What a node does, as the status line tells the user while it works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// Asking the model for an answer (which may hold code).
    Answering,
    /// Asking the model for code.
    WritingCode,
    /// Asking the planner for its next step.
    PlanningTheNextStep,
    /// Asking the model for other solutions to compare.
    TryingOtherSolutions,
    RunningCode,
    Reviewing,
    /// Planning the request before any work.
    Planning,
    Evaluating,
    WritingTheAnswer,
    DescribingTheVariables,
    Repairing,
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
pub trait Effects: Observer + Send {
    /// Calls the model, showing its answer as it arrives as `showing` says.
    fn chat(
        &mut self,
        request: ChatRequest,
        showing: Showing,
    ) -> impl Future<Output = Result<ChatOutcome, AgentError>> + Send;

    /// Asks the model several questions side by side (the provider may
    /// answer them at once), none of them shown; each one's outcome.
    fn chat_side_by_side(
        &mut self,
        requests: Vec<ChatRequest>,
    ) -> impl Future<Output = Vec<Result<ChatOutcome, AgentError>>> + Send;

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
    ) -> impl Future<Output = Vec<KeyInformation>> + Send;

    /// Each of `names` (values the request names) beside the result the
    /// request writes out for the data the run's code (`codes`) read, where
    /// it writes one out; nothing where it does not.
    fn written_results(
        &mut self,
        request: &str,
        names: &[String],
        codes: &[&str],
    ) -> impl Future<Output = Vec<WrittenResult>> + Send;

    /// Which of `targets` (variables and files a request names) do not
    /// exist (files relative to the working directory).
    fn missing(&mut self, targets: &Targets) -> impl Future<Output = Targets> + Send;

    /// Runs each of `codes`, other solutions of the request, on a scratch
    /// copy of the namespace as it is at `start` (nothing the user sees or
    /// keeps changes); `own` is the code the run's values come from. How
    /// each went (none: nothing was tried).
    fn try_candidates(
        &mut self,
        codes: &[String],
        own: &str,
        start: TriedFrom,
    ) -> impl Future<Output = Result<Vec<CandidateOutcome>, AgentError>> + Send;

    /// How the turn's own solution compares on `names` with the candidates
    /// tried since [`Effects::try_candidates`].
    fn compare_candidates(&mut self, names: &[String]) -> impl Future<Output = Agreement> + Send;

    /// Puts back the objects the run's code rebound `names` away from
    /// (what each was before the run first rebound it); the names put back.
    fn restore(&mut self, names: &[String]) -> impl Future<Output = Vec<String>> + Send;

    /// Like [`Effects::restore`], for those of `names` that now hold other
    /// data than before (a list typed in again as its array is the same).
    fn restore_changed(&mut self, names: &[String]) -> impl Future<Output = Vec<String>> + Send;

    /// What the triage's pre-plan looks at: the user's variables and last
    /// error.
    fn triage_context(&mut self) -> impl Future<Output = Context> + Send;

    /// A fix for `code`, which failed with `error`, made without the model,
    /// if a known repair applies.
    fn repair(&mut self, code: &str, error: &str) -> impl Future<Output = Option<Repair>> + Send;

    /// Sends the model calls that follow to `model` (the claude CLI only
    /// when the run offers it as an agent).
    fn use_model(&mut self, model: ModelChoice);

    /// Reports progress to the user.
    fn emit(&mut self, event: AgentEvent);
}

/// How trying one other solution on a scratch copy went.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateOutcome {
    /// It ran to the end: what it computed is kept for the comparison.
    Ran,
    /// Not run, and why (it would write files, say).
    NotTried(String),
    /// It raised `error` (where in `code`, and what would mend it when
    /// known: a missing key's columns); `code` is the code that raised it,
    /// as fixes that need no model (a missing import, a dict never made, a
    /// misspelt column) left it.
    Raised { error: String, code: String },
}

/// The namespace other solutions of a request are tried on copies of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriedFrom {
    /// As it is, before the turn's own code runs.
    TurnStart,
    /// As it was before the run (from the undo journal), after its code ran.
    RunStart,
}
