//! The triage's review: is the request met, and if not, why, for the next
//! pass's plan.

use super::work::pass_failure;
use crate::agent::graphs::check::{Work, check, doubt_cannot_fix};
use crate::agent::graphs::steps::{NodeSettings, close_with_answer};
use crate::agent::graphs::unmet::{raised, unmet};
use crate::agent::llm::{ChatMessage, Role};
use crate::agent::prompts;
use crate::agent::run::{AgentError, AgentEvent, AgentState, Decision, Effects, Outcome, Verdict};

pub(super) async fn review<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: NodeSettings,
    max_reviews: u32,
) -> Result<(), AgentError> {
    // The agent spoke last: its words are the answer the check reads, and
    // the run needs no closing answer of the review's.
    let asked = state
        .conversation
        .last()
        .is_some_and(|m| m.role == Role::Assistant);
    // A variable, file or figure the request names that is missing settles
    // it without a judge; the delegated agent's own passed check of this
    // very request settles it too (and was shown already).
    let failure = pass_failure(state).filter(|failed| raised(failed));
    let (verdict, shown) = if let Some(unmet) = unmet(state, effects, &[], failure).await {
        (Verdict::not_done(unmet.reasoning, unmet.next_action), false)
    } else if let Some(verdict) = delegated_check(state) {
        (verdict, true)
    } else {
        (judge(state, effects, &settings, asked).await?, false)
    };
    if !shown {
        effects.emit(AgentEvent::Verdict(verdict.clone()));
    }
    if verdict.is_complete {
        state.outcome = Some(match state.triage.agent_outcome {
            Some(Outcome::Answered) if state.executions.is_empty() => Outcome::Answered,
            _ => Outcome::Complete,
        });
        if !asked {
            // Unless the agent's own last word was the answer already.
            close_with_answer(state, effects, &verdict.answer);
        }
    } else if verdict.cannot_fix {
        state.outcome = Some(Outcome::CannotBeDone);
    } else {
        state.triage.reviews += 1;
        if state.triage.reviews >= max_reviews {
            state.outcome = Some(Outcome::MaxTurns);
        } else {
            let feedback = prompts::not_done_yet(&verdict.reasoning, &verdict.next_action);
            state.conversation.push(ChatMessage::user(feedback));
        }
    }
    state.verdict = Some(verdict);
    Ok(())
}

/// The delegated agent's verdict, when it checked the user's very request
/// and found it done.
fn delegated_check(state: &AgentState) -> Option<Verdict> {
    let same_request = matches!(&state.triage.decision,
        Some(Decision::Delegate { task, .. }) if task == &state.request);
    let checked = same_request
        && state.triage.agent_outcome == Some(Outcome::Complete)
        && !state.checked.is_empty();
    state.verdict.clone().filter(|v| checked && v.is_complete)
}

/// The check of what the pass ran and answered (`asked`: the agent spoke
/// last, and its words are the answer).
async fn judge<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: &NodeSettings,
    asked: bool,
) -> Result<Verdict, AgentError> {
    let answer = asked
        .then(|| state.conversation.last().map(|m| m.content.clone()))
        .flatten();
    state.looked_at += 1;
    let work_failed = pass_failure(state).is_some();
    let work = Work {
        since: state.triage.pass_start,
        failed: work_failed,
        answer: answer.as_deref(),
        agreed: None,
        sent_back: state.looked_at - 1,
    };
    let mut verdict = check(state, effects, settings, work).await?;
    doubt_cannot_fix(state, &mut verdict, work_failed);
    Ok(verdict)
}
