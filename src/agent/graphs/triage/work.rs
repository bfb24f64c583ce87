//! The triage's work: handing the task to another graph, one toolbox call,
//! a reply, and repairing a failure without the model where a known fix
//! applies.

use crate::agent::graphs::analyst::analyst_graph;
use crate::agent::graphs::default::default_graph;
use crate::agent::graphs::planner::{FailedStep, planner_graph};
use crate::agent::graphs::steps::{NodeSettings, run_pending};
use crate::agent::llm::{ChatMessage, Role, claude_cli};
use crate::agent::run::{
    Agent, AgentError, AgentEvent, AgentState, CodeBlock, Decision, Effects, Execution,
    ModelChoice, Outcome,
};

/// Runs the chosen agent's graph on the task, within this run: its turns,
/// panels and answer are this run's. It gets its own turn limit, or the
/// run's, if that is lower.
pub(super) async fn delegate<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: NodeSettings,
    max_turns: u32,
) -> Result<(), AgentError> {
    let Some(Decision::Delegate { agent, task }) = state.triage.decision.clone() else {
        return Err(AgentError::Graph("delegate without an agent".into()));
    };
    if task != state.request {
        // The task stands for the request when it is the last word; else it
        // follows (and is merged with the user's message before it when sent).
        match state.conversation.last_mut() {
            Some(last) if last.role == Role::User && last.content == state.request => {
                last.content = task.clone();
            }
            _ => state.conversation.push(ChatMessage::user(task.clone())),
        }
    }
    let request = std::mem::replace(&mut state.request, task);
    let turns = agent.turns().min(max_turns);
    let saved_max_turns = std::mem::replace(&mut state.max_turns, state.turn + turns);
    let execute = settings.execute;
    let ended = match agent {
        Agent::Default => {
            default_graph::<E>(settings, turns)
                .run(state, effects)
                .await
        }
        Agent::Analyst => {
            analyst_graph::<E>(settings, turns)
                .run(state, effects)
                .await
        }
        Agent::Planner => {
            planner_graph::<E>(settings, turns, false, FailedStep::LeftToCaller)
                .run(state, effects)
                .await
        }
        Agent::Claude => {
            // Its calls go to the CLI, whose model has a larger window.
            let settings = NodeSettings {
                context_tokens: settings.context_tokens.max(claude_cli::CONTEXT_TOKENS),
                ..settings
            };
            effects.use_model(ModelChoice::ClaudeCli);
            let ended = default_graph::<E>(settings, turns)
                .run(state, effects)
                .await;
            effects.use_model(ModelChoice::Configured);
            ended
        }
    };
    state.request = request;
    state.max_turns = saved_max_turns;
    ended?;
    state.triage.agent_outcome = state.outcome.take();
    match state.triage.agent_outcome {
        // Its own review found it cannot be done; another pass would not help.
        Some(Outcome::CannotBeDone) => state.outcome = Some(Outcome::CannotBeDone),
        // --no-exec: the code was shown, nothing ran to review.
        Some(Outcome::Answered) if !execute => state.outcome = Some(Outcome::Answered),
        _ => {}
    }
    Ok(())
}

pub(super) async fn tool<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    execute: bool,
) -> Result<(), AgentError> {
    let Some(Decision::Tool { code }) = state.triage.decision.clone() else {
        return Err(AgentError::Graph("tool without a call".into()));
    };
    state.pending = vec![CodeBlock { code }];
    let ran = run_pending(state, effects, execute).await?;
    if execute {
        state.conversation.push(ChatMessage::user(ran.report));
    } else {
        state.outcome = Some(Outcome::Answered);
    }
    Ok(())
}

pub(super) fn respond<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
) -> Result<(), AgentError> {
    let (text, outcome) = match state.triage.decision.clone() {
        // A plan that finds the work so far meets the request overrules the
        // check that sent it back (a pass is planned only after a "not
        // done"): its words stand, but it is no "done" claim.
        Some(Decision::Respond(text) | Decision::Done(text)) => (text, Outcome::Answered),
        _ => return Err(AgentError::Graph("respond without a reply".into())),
    };
    if !text.trim().is_empty() {
        effects.emit(AgentEvent::Answer(text.clone()));
        state
            .conversation
            .push(ChatMessage::assistant(text.clone()));
        state.answer = text;
    }
    state.outcome = Some(outcome);
    Ok(())
}

/// Fixes the pass's failed code without the model when a known repair
/// applies, and runs the fix.
pub(super) async fn repair<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
) -> Result<(), AgentError> {
    let Some(failed) = pass_failure(state).cloned() else {
        return Ok(());
    };
    let Some(fix) = effects.repair(&failed.code, &failed.output).await else {
        return Ok(());
    };
    effects.emit(AgentEvent::Status(format!("repair: {}", fix.change)));
    state.pending = vec![CodeBlock { code: fix.code }];
    let ran = run_pending(state, effects, true).await?;
    let report = format!(
        "The failed code was repaired ({}).\n{}",
        fix.change, ran.report
    );
    state.conversation.push(ChatMessage::user(report));
    Ok(())
}

/// The failed execution that ended this pass's work, if it ended so.
pub(super) fn pass_failure(state: &AgentState) -> Option<&Execution> {
    state.executions[state.triage.pass_start.min(state.executions.len())..]
        .last()
        .filter(|execution| execution.failed)
}
