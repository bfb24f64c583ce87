//! The triage's model phases: a quick classification, which decides only
//! when confident, then a full plan.

use super::pre_plan::describe;
use crate::agent::graphs::steps;
use crate::agent::graphs::steps::NodeSettings;
use crate::agent::parse::triage::{parse_classification, parse_plan};
use crate::agent::run::limits::{PLANNER_TOOLS, TRIAGE_CONFIDENT};
use crate::agent::run::{AgentError, AgentEvent, AgentState, Agents, Decision, Effects};
use crate::agent::{prompts, schemas};

pub(super) async fn classify<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: NodeSettings,
    agents: Agents,
) -> Result<(), AgentError> {
    // Asked after the request under the default agent's code prompt: the
    // agent most requests go to then finds its first prompt cached.
    let system = steps::code_prompt(state, effects).await;
    let question = prompts::triage_classify(&agents.listed(), &agents.choices());
    let schema = schemas::triage_classification(&agents.names());
    let answer = settings
        .judge_after(state, effects, system, &question, schema)
        .await?;
    let (agent, confidence) = parse_classification(&answer.text, agents).unzip();
    let confidence = confidence.unwrap_or(0.0);
    match agent {
        Some(agent) if confidence >= TRIAGE_CONFIDENT => {
            effects.emit(AgentEvent::Status(format!(
                "triage: the {} agent takes it (confidence {confidence:.2})",
                agent.name()
            )));
            state.triage.decision = Some(Decision::Delegate {
                agent,
                task: state.request.clone(),
            });
        }
        _ => effects.emit(AgentEvent::Status("triage: planning".to_owned())),
    }
    Ok(())
}

pub(super) async fn plan<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: NodeSettings,
    agents: Agents,
) -> Result<(), AgentError> {
    let namespace = effects.namespace().await;
    let system = prompts::triage_plan(
        &state.pinned_namespace(&namespace),
        state.recent_cells_shown(),
        &state.skills,
        &agents.listed(),
        &agents.choices(),
    );
    let schema = schemas::triage_plan(&agents.names(), &PLANNER_TOOLS);
    let answer = settings.judge(state, effects, system, schema).await?;
    let decision = parse_plan(&answer.text, &state.request, agents);
    effects.emit(AgentEvent::Status(format!(
        "triage: {}",
        describe(&decision)
    )));
    state.triage.decision = Some(decision);
    Ok(())
}
