//! The triage's review: is the request met, and if not, why, for the next
//! pass's plan.

use crate::agent::graphs::steps::{Settings, close_with_answer};
use crate::agent::graphs::unmet::unmet;
use crate::agent::llm::{ChatMessage, Role};
use crate::agent::parse::verdict::parse_verdict;
use crate::agent::run::{AgentError, AgentEvent, AgentState, Effects, Outcome, Verdict};
use crate::agent::{prompts, schemas};

pub(super) async fn review<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: Settings,
    max_reviews: u32,
) -> Result<(), AgentError> {
    // The judge answers a user message; after an agent's answer, one asks.
    let asked = state
        .conversation
        .last()
        .is_some_and(|m| m.role == Role::Assistant);
    // A variable, file or figure the request names that is missing settles
    // it without a judge.
    let verdict = match unmet(state, effects, &[]).await {
        Some(unmet) => Verdict {
            is_complete: false,
            cannot_fix: false,
            reasoning: unmet.reasoning,
            next_action: unmet.next_action,
            answer: String::new(),
            parsed: true,
        },
        None => judge(state, effects, &settings, asked).await?,
    };
    effects.emit(AgentEvent::Verdict(verdict.clone()));
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

/// The model's verdict on the pass (`asked`: the agent spoke last, so a
/// user message asks for the review).
async fn judge<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: &Settings,
    asked: bool,
) -> Result<Verdict, AgentError> {
    if asked {
        state
            .conversation
            .push(ChatMessage::user(prompts::REVIEW_NOW.to_owned()));
    }
    let system = prompts::reflect(&state.request);
    let answer = settings
        .judge(state, effects, system, schemas::verdict())
        .await;
    if asked {
        state.conversation.pop();
    }
    Ok(parse_verdict(&answer?.text))
}
