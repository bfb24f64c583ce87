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
//! repair fixes two common failures without asking the model: a missing
//! import of a module the session already uses, and a misspelt column with
//! a single close match. Every call's messages are fitted to the model's
//! context window ([`crate::agent::budget`]), so long review loops stay within it.

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

use super::steps::{Settings, node};
use crate::agent::graph::{Graph, Route};
use crate::agent::run::limits::TRIAGE_MAX_REVIEWS;
use crate::agent::run::{AgentState, Agents, Decision, Effects};

/// The triage graph handing work to `agents`; `max_reviews` is capped at
/// [`TRIAGE_MAX_REVIEWS`].
pub fn triage_graph<E: Effects>(
    settings: Settings,
    max_reviews: u32,
    agents: Agents,
) -> Graph<AgentState, E> {
    let reviews = max_reviews.clamp(1, TRIAGE_MAX_REVIEWS);
    let (classify_settings, plan_settings) = (settings.clone(), settings.clone());
    let (delegate_settings, review_settings) = (settings.clone(), settings.clone());
    let execute = settings.execute;
    // A pass is at most six nodes; the sub-agents count their own steps.
    let step_cap = (reviews as usize + 1) * 6;
    const DECIDED: &[Route] = &[
        Route::To("delegate"),
        Route::To("tool"),
        Route::To("respond"),
    ];
    const WORKED: &[Route] = &[Route::To("repair"), Route::To("review"), Route::End];
    Graph::new("pre_plan", step_cap)
        .node("pre_plan", node(|s, e| Box::pin(pre_plan(s, e))))
        .node(
            "classify",
            node(move |s, e| Box::pin(classify(s, e, classify_settings.clone(), agents))),
        )
        .node(
            "plan",
            node(move |s, e| Box::pin(plan(s, e, plan_settings.clone(), agents))),
        )
        .node(
            "delegate",
            node(move |s, e| Box::pin(delegate(s, e, delegate_settings.clone(), reviews))),
        )
        .node("tool", node(move |s, e| Box::pin(tool(s, e, execute))))
        .node(
            "respond",
            node(|s, e| Box::pin(async move { respond(s, e) })),
        )
        .node("repair", node(|s, e| Box::pin(repair(s, e))))
        .node(
            "review",
            node(move |s, e| Box::pin(review(s, e, review_settings.clone(), reviews))),
        )
        .conditional_edge(
            "pre_plan",
            &[
                Route::To("delegate"),
                Route::To("tool"),
                Route::To("respond"),
                Route::To("classify"),
            ],
            |s: &AgentState| decided(s).unwrap_or(Route::To("classify")),
        )
        .conditional_edge(
            "classify",
            &[Route::To("delegate"), Route::To("plan")],
            |s: &AgentState| decided(s).unwrap_or(Route::To("plan")),
        )
        .conditional_edge("plan", DECIDED, |s: &AgentState| {
            decided(s).unwrap_or(Route::To("delegate"))
        })
        .conditional_edge("delegate", WORKED, after_work)
        .conditional_edge("tool", WORKED, after_work)
        .edge("respond", Route::End)
        .edge("repair", Route::To("review"))
        .conditional_edge(
            "review",
            &[Route::To("pre_plan"), Route::End],
            |s: &AgentState| match s.outcome {
                Some(_) => Route::End,
                None => Route::To("pre_plan"),
            },
        )
}

/// Where a phase's decision leads, if it decided.
fn decided(state: &AgentState) -> Option<Route> {
    Some(match state.triage.decision.as_ref()? {
        Decision::Delegate { .. } => Route::To("delegate"),
        Decision::Tool { .. } => Route::To("tool"),
        Decision::Respond(_) | Decision::Done(_) => Route::To("respond"),
    })
}

/// After the work: repair its failure if the pass's last run failed, else
/// review (or end, when the run already ended: `--no-exec`, or the agent
/// found the request cannot be done).
fn after_work(state: &AgentState) -> Route {
    if state.outcome.is_some() {
        Route::End
    } else if pass_failure(state).is_some() {
        Route::To("repair")
    } else {
        Route::To("review")
    }
}
