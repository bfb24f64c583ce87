//! The types every graph shares: the run's state and what each graph finds,
//! the events a run reports, the effects it needs from outside, and its
//! limits. They depend on the model wire types ([`crate::agent::llm`]) only.

pub mod effects;
pub mod events;
pub mod findings;
pub mod limits;
pub mod state;

pub use effects::{Activity, CandidateOutcome, Effects, ModelChoice, Observer, Showing, TriedFrom};
pub use events::{AgentError, AgentEvent};
pub use findings::{
    Action, Agent, Agents, Agreement, AsWritten, Confidence, Consensus, Context, CrossCheck,
    Decision, Difference, Expected, Form, FormDispute, KeyInformation, Outcome, Plan, Repair,
    Targets, Triage, Verdict, WrittenResult,
};
pub use state::{AgentState, CodeBlock, Execution, OtherSolutions, RunChanges, Skill};
