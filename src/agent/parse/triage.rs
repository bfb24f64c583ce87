//! Reading the triage's answers: the quick classification (which agent,
//! how confident) and the full plan (delegate, one tool call, or a reply).

use serde_json::Value;

use super::action::tool_call;
use super::json::json_objects;
use crate::agent::llm::TokenChoices;
use crate::agent::run::limits::PLANNER_TOOLS;
use crate::agent::run::{Agent, Agents, Decision};

/// The decision in a plan's JSON; anything unreadable (or an agent not
/// among `agents`) hands the request to the default agent, which can always
/// make progress.
pub fn parse_plan(text: &str, request: &str, agents: Agents) -> Decision {
    let fallback = || Decision::Delegate {
        agent: Agent::Default,
        task: request.to_owned(),
    };
    let Some(plan) = json_objects(text).find(|value| value.get("action").is_some()) else {
        return fallback();
    };
    let field = |key: &str| match plan.get(key) {
        Some(Value::String(text)) => text.trim().to_owned(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    match field("action").to_ascii_lowercase().as_str() {
        "tool" | "tools" => {
            // One call ("tool", "input"), or several ("tool_calls"): each a
            // line that prints its result; a tool the toolbox lacks is left out.
            let listed = match plan.get("tool_calls") {
                Some(Value::Array(calls)) => calls.clone(),
                _ => vec![plan.clone()],
            };
            let lines: Vec<String> = listed
                .iter()
                .filter_map(|call| {
                    let name = call.get("tool")?.as_str()?.trim();
                    let input = match call.get("input") {
                        Some(Value::String(text)) => text.trim().to_owned(),
                        Some(Value::Null) | None => String::new(),
                        Some(other) => other.to_string(),
                    };
                    PLANNER_TOOLS
                        .contains(&name)
                        .then(|| format!("print({})", tool_call(name, &input)))
                })
                .collect();
            if lines.is_empty() {
                fallback()
            } else {
                Decision::Tool {
                    code: lines.join("\n"),
                }
            }
        }
        "respond" if !field("response").is_empty() => Decision::Respond(field("response")),
        "done" => Decision::Done(match field("response") {
            response if response.is_empty() => field("reasoning"),
            response => response,
        }),
        _ => {
            let agent = agents.parse(&field("agent")).unwrap_or(Agent::Default);
            let task = match field("task") {
                task if task.is_empty() => request.to_owned(),
                task => task,
            };
            Decision::Delegate { agent, task }
        }
    }
}

/// The agent and confidence of a classification's JSON, if it has both
/// and the agent is one of `agents`.
pub fn parse_classification(text: &str, agents: Agents) -> Option<(Agent, f64)> {
    json_objects(text).find_map(|value| {
        let agent = agents.parse(value.get("agent")?.as_str()?)?;
        let confidence = match value.get("confidence")? {
            Value::Number(n) => n.as_f64()?,
            Value::String(s) => s.trim().trim_end_matches('%').parse().ok()?,
            _ => return None,
        };
        // "95" and "95%" mean a percentage.
        let confidence = if confidence > 1.0 {
            confidence / 100.0
        } else {
            confidence
        };
        Some((agent, confidence))
    })
}

/// How likely the model held the agent it named (`chosen`), among the
/// agents it could have named: the weight of the first token of its
/// `"agent"` value that fits `chosen`'s name, against every one that fits
/// an agent's name. A small model states a confidence of 1.0 for nearly
/// every choice; its token weights say how plain the choice was. `None`
/// when the answer's tokens do not show the value.
pub fn likelihood_of_agent(tokens: &[TokenChoices], chosen: Agent, agents: Agents) -> Option<f64> {
    let mut text = String::new();
    for token in tokens {
        let said = text.trim_end();
        let opened = said.ends_with("\"agent\":") || said.ends_with("\"agent\": \"");
        let opened = opened || said.ends_with("\"agent\":\"");
        let value = token.token.trim_start().trim_start_matches('"');
        if opened && !value.is_empty() {
            let fits = |piece: &str, agent: Agent| {
                let piece = piece
                    .trim_start()
                    .trim_start_matches('"')
                    .trim_end_matches('"');
                !piece.is_empty() && agent.name().starts_with(piece)
            };
            let (mut mine, mut all) = (0.0, 0.0);
            for (piece, logprob) in &token.choices {
                let chance = f64::from(*logprob).exp();
                if fits(piece, chosen) {
                    mine += chance;
                }
                if agents.available().any(|agent| fits(piece, agent)) {
                    all += chance;
                }
            }
            return (all > 0.0).then(|| mine / all);
        }
        text.push_str(&token.token);
    }
    None
}
