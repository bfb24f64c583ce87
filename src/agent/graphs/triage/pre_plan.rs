//! The triage's first phase: requests plain enough to need no model (a
//! greeting, "describe df", "plot s", "read notes.txt", "explain the last
//! error") are decided by patterns.

use serde_json::Value;

use crate::agent::parse::action::tool_call;
use crate::agent::run::{Agent, AgentError, AgentEvent, AgentState, Context, Decision, Effects};

pub(super) async fn pre_plan<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
) -> Result<(), AgentError> {
    state.triage.decision = None;
    state.triage.agent_outcome = None;
    state.triage.pass_start = state.executions.len();
    state.checked.clear();
    // Patterns decide the first pass only: a pass that fell short needs a
    // plan that knows why, not the same shortcut again.
    if state.triage.reviews > 0 {
        return Ok(());
    }
    let context = effects.triage_context().await;
    if let Some(decision) = textual_plan(&state.request, &context) {
        effects.emit(AgentEvent::Status(format!(
            "triage: {} (no model call)",
            describe(&decision)
        )));
        state.triage.decision = Some(decision);
    }
    Ok(())
}

/// A decision for requests plain enough to need no model: a greeting, a
/// look at a variable, a file to read, the last error to explain.
pub fn textual_plan(request: &str, context: &Context) -> Option<Decision> {
    let text = request.trim().trim_end_matches(['?', '.', '!', ' ']);
    let text = match text.get(..7) {
        Some(please) if please.eq_ignore_ascii_case("please ") => &text[7..],
        _ => text,
    };
    let lower = text.to_ascii_lowercase();
    const GREETINGS: [&str; 6] = ["hi", "hello", "hey", "thanks", "thank you", "thx"];
    if GREETINGS.contains(&lower.as_str()) {
        let reply = if lower.starts_with("th") {
            "You're welcome."
        } else {
            "Hello! Ask me about your data or your code."
        };
        return Some(Decision::Respond(reply.to_owned()));
    }
    const ERRORS: [&str; 6] = [
        "last error",
        "that error",
        "this error",
        "why did that fail",
        "why did it fail",
        "what went wrong",
    ];
    if ERRORS.iter().any(|phrase| lower.contains(phrase))
        && let Some(error) = &context.last_error
    {
        let task = format!(
            "{request}\n\nThe error of my last failed cell:\n```\n{}\n```",
            error.trim_end()
        );
        return Some(Decision::Delegate {
            agent: Agent::Default,
            task,
        });
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    let [verb, target] = words.as_slice() else {
        return None;
    };
    let target = target.trim_matches(['`', '"', '\'']);
    let is_variable = context.variables.iter().any(|v| v == target);
    let code = match verb.to_ascii_lowercase().as_str() {
        "describe" | "summarize" | "summarise" | "inspect" if is_variable => {
            format!("print(describe({target}))")
        }
        "show" | "display" | "print" if is_variable => format!("display({target})"),
        "plot" | "chart" | "graph" if is_variable => format!(
            "import matplotlib.pyplot as plt\n\
             {target}.plot() if hasattr({target}, 'plot') else plt.plot({target})\n\
             plt.show()"
        ),
        "read" | "open" | "cat" | "show" if !is_variable && looks_like_path(target) => {
            format!(
                "print({})",
                tool_call("read", &Value::String(target.into()).to_string())
            )
        }
        _ => return None,
    };
    Some(Decision::Tool { code })
}

/// A file name or path: has an extension or a slash, and no spaces.
fn looks_like_path(text: &str) -> bool {
    (text.contains('/')
        || text.rsplit_once('.').is_some_and(|(stem, ext)| {
            !stem.is_empty() && !ext.is_empty() && ext.chars().all(char::is_alphanumeric)
        }))
        && !text.contains(char::is_whitespace)
}

pub(super) fn describe(decision: &Decision) -> String {
    match decision {
        Decision::Delegate { agent, .. } => format!("the {} agent takes it", agent.name()),
        Decision::Tool { code } => format!("runs {}", code.lines().collect::<Vec<_>>().join("; ")),
        Decision::Respond(_) => "a reply, no work needed".to_owned(),
        Decision::Done(_) => "done: the work so far meets the request".to_owned(),
    }
}
