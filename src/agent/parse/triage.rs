//! Reading the triage's answers: the quick classification (which agent,
//! how confident) and the full plan (delegate, one tool call, or a reply).

use serde_json::Value;

use super::action::tool_call;
use super::json::json_objects;
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
