//! The triage's review: is the request met, and if not, why, for the next
//! pass's plan.

use crate::agent::graphs::steps::{Settings, close_with_answer};
use crate::agent::llm::{ChatMessage, Role};
use crate::agent::parse::verdict::parse_verdict;
use crate::agent::run::{AgentError, AgentEvent, AgentState, Effects, Outcome};
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
    let verdict = parse_verdict(&answer?.text);
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
