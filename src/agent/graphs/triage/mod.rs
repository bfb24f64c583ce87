//! The triage graph (seed 004), chosen with `%%ask --graph triage`: three
//! planning phases, each more costly than the last, decide who does the
//! work; the work is checked, repaired locally where it can be, and planned
//! again when it falls short:
//!
//! ```text
//! pre_plan (patterns, no model) -> classify (a quick model call) -> plan (a full one)
//!     each phase that decides: -> delegate | tool | respond (or done)
//! delegate (default, analyst or planner runs) -> [repair] -> review
//! tool (toolbox calls)                         -> [repair] -> review
//! review -> (not met, reviews left) -> pre_plan ... | end
//! ```
//!
//! The pre-plan resolves plain requests without a model call: "describe
//! df", "show df", "plot s", "read notes.txt", "explain the last error", a
//! greeting. The classification acts only when the model is confident. The
//! repair fixes common failures without asking the model: a missing
//! import of a module the session already uses, a dict whose keys the code
//! sets before making it, and a misspelt column with a single close match.
//! Every call's messages are fitted to the model's context window
//! ([`crate::agent::budget`]), so long review loops stay within it.

mod decide;
mod pre_plan;
mod review;
#[cfg(test)]
mod tests;
mod work;

use decide::{classify, plan};
use pre_plan::pre_plan;
use review::review;
use work::{delegate, pass_failure, repair, respond, tool};

use super::steps::{NodeSettings, node};
use crate::agent::graph::{Activity, Graph, Route, nodes};
use crate::agent::run::limits::TRIAGE_MAX_REVIEWS;
use crate::agent::run::{AgentState, Agents, Decision, Effects};

nodes! {
    /// The triage graph's nodes (a delegated agent's own nodes tell the status line what they do).
    pub enum Step {
        PrePlan = "pre_plan", Some(Activity::Planning);
        Classify = "classify", Some(Activity::Planning);
        Plan = "plan", Some(Activity::Planning);
        Delegate = "delegate", None;
        Tool = "tool", Some(Activity::RunningCode);
        Respond = "respond", None;
        Repair = "repair", Some(Activity::Repairing);
        Review = "review", Some(Activity::Reviewing);
    }
}

/// The triage graph handing work to `agents`; `max_reviews` is capped at
/// [`TRIAGE_MAX_REVIEWS`].
pub fn triage_graph<E: Effects>(
    settings: NodeSettings,
    max_reviews: u32,
    agents: Agents,
) -> Graph<AgentState, E, Step> {
    let reviews = max_reviews.clamp(1, TRIAGE_MAX_REVIEWS);
    let (classify_settings, plan_settings) = (settings.clone(), settings.clone());
    let (delegate_settings, review_settings) = (settings.clone(), settings.clone());
    let execute = settings.execute;
    // A pass is at most six nodes; the sub-agents count their own steps.
    let step_cap = (reviews as usize + 1) * 6;
    const DECIDED: &[Route<Step>] = &[
        Route::To(Step::Delegate),
        Route::To(Step::Tool),
        Route::To(Step::Respond),
    ];
    const WORKED: &[Route<Step>] = &[Route::To(Step::Repair), Route::To(Step::Review), Route::End];
    Graph::new(Step::PrePlan, step_cap)
        .node(Step::PrePlan, node(|s, e| Box::pin(pre_plan(s, e))))
        .node(
            Step::Classify,
            node(move |s, e| Box::pin(classify(s, e, classify_settings.clone(), agents))),
        )
        .node(
            Step::Plan,
            node(move |s, e| Box::pin(plan(s, e, plan_settings.clone(), agents))),
        )
        .node(
            Step::Delegate,
            node(move |s, e| Box::pin(delegate(s, e, delegate_settings.clone(), reviews))),
        )
        .node(Step::Tool, node(move |s, e| Box::pin(tool(s, e, execute))))
        .node(
            Step::Respond,
            node(|s, e| Box::pin(async move { respond(s, e) })),
        )
        .node(Step::Repair, node(|s, e| Box::pin(repair(s, e))))
        .node(
            Step::Review,
            node(move |s, e| Box::pin(review(s, e, review_settings.clone(), reviews))),
        )
        .conditional_edge(
            Step::PrePlan,
            &[
                Route::To(Step::Delegate),
                Route::To(Step::Tool),
                Route::To(Step::Respond),
                Route::To(Step::Classify),
            ],
            |s: &AgentState| decided(s).unwrap_or(Route::To(Step::Classify)),
        )
        .conditional_edge(
            Step::Classify,
            &[Route::To(Step::Delegate), Route::To(Step::Plan)],
            |s: &AgentState| decided(s).unwrap_or(Route::To(Step::Plan)),
        )
        .conditional_edge(Step::Plan, DECIDED, |s: &AgentState| {
            decided(s).unwrap_or(Route::To(Step::Delegate))
        })
        .conditional_edge(Step::Delegate, WORKED, after_work)
        .conditional_edge(Step::Tool, WORKED, after_work)
        .edge(Step::Respond, Route::End)
        .edge(Step::Repair, Route::To(Step::Review))
        .conditional_edge(
            Step::Review,
            &[Route::To(Step::PrePlan), Route::End],
            |s: &AgentState| match s.outcome {
                Some(_) => Route::End,
                None => Route::To(Step::PrePlan),
            },
        )
}

/// Where a phase's decision leads, if it decided.
fn decided(state: &AgentState) -> Option<Route<Step>> {
    Some(match state.triage.decision.as_ref()? {
        Decision::Delegate { .. } => Route::To(Step::Delegate),
        Decision::Tool { .. } => Route::To(Step::Tool),
        Decision::Respond(_) | Decision::Done(_) => Route::To(Step::Respond),
    })
}

/// After the work: repair its failure if the pass's last run failed, else
/// review (or end, when the run already ended: `--no-exec`, or the agent
/// found the request cannot be done).
fn after_work(state: &AgentState) -> Route<Step> {
    if state.outcome.is_some() {
        Route::End
    } else if pass_failure(state).is_some() {
        Route::To(Step::Repair)
    } else {
        Route::To(Step::Review)
    }
}
