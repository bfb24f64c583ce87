//! The planner graph (seed 001), chosen with `%%ask --graph planner`: a
//! planner that thinks and names one action per step, and a tool node that
//! performs it and reports what it saw:
//!
//! ```text
//! [informer ->] planner -> (finish: end) -> tool -> planner ...
//!                       -> (inform: informer -> planner)
//! ```
//!
//! An action is Python code to run, a call of one of the toolbox's
//! functions, or the final answer. With `--informer`, an informer first
//! describes the variables the request names (schema, size, missing values,
//! a few rows) for the planner's prompt, and again whenever the planner
//! asks it to. Every step counts as a turn; the run ends at `finish` or
//! after the last turn's action.

use serde_json::Value;

use super::checks;
use super::extract::{CodeBlock, code_blocks};
use super::graph::{Graph, Route};
use super::llm::ChatMessage;
use super::nodes::{Settings, node, run_pending};
use super::reflect::json_objects;
use super::{AgentError, AgentEvent, AgentState, Effects, Execution, Outcome, prompts};

/// The toolbox functions the planner may call by name (they are what
/// `prompts/toolbox.md` lists).
pub const TOOLS: &[&str] = &[
    "describe",
    "peek",
    "grep",
    "partition",
    "rlm",
    "files",
    "grep_files",
    "git",
    "read",
    "edit",
    "create",
    "skill",
    "claude_sessions",
];

/// Steps of a run unless told otherwise: each is one action, so a run
/// needs more of them than the default graph's turns.
pub const DEFAULT_MAX_TURNS: u32 = 8;

/// What the planner chose to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Run this code in the user's namespace.
    Python(String),
    /// Call a toolbox function; `input` is its arguments (Python or JSON).
    Tool { name: String, input: String },
    /// Ask the informer about these variables (names in free text).
    Inform(String),
    /// End the run with this answer.
    Finish(String),
    /// Prose with no action and no final answer in the expected form.
    Unclear(String),
}

/// A variable the informer described: its name and what it found.
pub type KeyInformation = (String, String);

/// The planner graph; with `informer`, the informer runs first.
pub fn planner_graph<E: Effects>(
    settings: Settings,
    max_turns: u32,
    informer: bool,
) -> Graph<AgentState, E> {
    let (plan_settings, execute) = (settings.clone(), settings.execute);
    // Each turn is a planner step, its action, and perhaps the informer.
    let step_cap = (max_turns as usize) * 3 + 3;
    let entry = if informer { "informer" } else { "planner" };
    let graph = Graph::new(entry, step_cap)
        .node(
            "planner",
            node(move |s, e| Box::pin(plan_step(s, e, plan_settings.clone(), informer))),
        )
        .node("tool", node(move |s, e| Box::pin(act(s, e, execute))));
    let graph = if informer {
        graph
            .node("informer", node(|s, e| Box::pin(inform(s, e))))
            .edge("informer", Route::To("planner"))
            .conditional_edge(
                "planner",
                &[
                    Route::To("tool"),
                    Route::To("informer"),
                    Route::To("planner"),
                    Route::End,
                ],
                |s: &AgentState| match (&s.outcome, &s.action) {
                    (Some(_), _) => Route::End,
                    (None, Some(Action::Inform(_))) => Route::To("informer"),
                    (None, None) => Route::To("planner"),
                    (None, _) => Route::To("tool"),
                },
            )
    } else {
        graph.conditional_edge(
            "planner",
            &[Route::To("tool"), Route::To("planner"), Route::End],
            |s: &AgentState| match (&s.outcome, &s.action) {
                (Some(_), _) => Route::End,
                (None, None) => Route::To("planner"),
                (None, _) => Route::To("tool"),
            },
        )
    };
    graph.conditional_edge(
        "tool",
        &[Route::To("planner"), Route::End],
        |s: &AgentState| match s.outcome {
            Some(_) => Route::End,
            None => Route::To("planner"),
        },
    )
}

async fn plan_step<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: Settings,
    informer: bool,
) -> Result<(), AgentError> {
    let namespace = effects.namespace().await;
    let system = prompts::planner(
        &state.pinned_namespace(&namespace),
        &state.recent_cells,
        &state.skills,
        informer.then_some(state.key_information.as_slice()),
    );
    let answer = settings.answer(state, effects, system).await?;
    state.record_answer(answer.text);
    let mut action = parse_action(&state.answer);
    if let Action::Unclear(text) = &action {
        // Prose before anything ran, for a request that needs code: told
        // once how to answer; else taken as the final answer.
        let nudge = state.executions.is_empty()
            && !state.nudged_for_code
            && state.turn < state.max_turns
            && checks::needs_code(&state.request, &checks::summary_names(&namespace));
        if nudge {
            state.nudged_for_code = true;
            state
                .conversation
                .push(ChatMessage::user(prompts::PLANNER_FORMAT.to_owned()));
            state.action = None;
            return Ok(());
        }
        action = Action::Finish(text.clone());
    }
    if let Action::Finish(text) = &action {
        state.answer = text.clone();
        state.outcome = Some(if state.executions.is_empty() {
            Outcome::Answered
        } else {
            Outcome::Complete
        });
    }
    state.action = Some(action);
    Ok(())
}

/// The tool node: performs the planner's action and tells it what happened.
async fn act<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    execute: bool,
) -> Result<(), AgentError> {
    // The action as code, and why it cannot be taken, if it cannot.
    let (code, refusal) = match state.action.take() {
        Some(Action::Python(code)) => (code, None),
        // Printed, so text results read as text rather than as a repr.
        Some(Action::Tool { name, input }) if TOOLS.contains(&name.as_str()) => {
            (format!("print({})", tool_call(&name, &input)), None)
        }
        Some(Action::Tool { name, input }) => {
            let refusal = format!(
                "There is no action named {name:?}. The actions are python, {}, and finish.",
                TOOLS.join(", ")
            );
            (tool_call(&name, &input), Some(refusal))
        }
        Some(Action::Inform(input)) => {
            let refusal = "The informer is not part of this run; \
                 call describe(variable) to look at a variable.";
            (tool_call("inform", &input), Some(refusal.to_owned()))
        }
        Some(Action::Finish(_) | Action::Unclear(_)) | None => {
            return Err(AgentError::Graph("no action to take".into()));
        }
    };
    let observation = match refusal {
        None => {
            state.pending = vec![CodeBlock { code }];
            let ran = run_pending(state, effects, execute).await?;
            if !execute {
                state.outcome = Some(Outcome::Answered); // --no-exec: shown, not run
                return Ok(());
            }
            ran.report
        }
        Some(refusal) => {
            let turn = state.turn;
            effects.emit(AgentEvent::Code {
                turn,
                block: 0,
                code: code.clone(),
            });
            effects.emit(AgentEvent::Executed {
                turn,
                block: 0,
                execution: Execution {
                    code,
                    output: refusal.clone(),
                    shown: None,
                    failed: true,
                    finished: false,
                    changes: Vec::new(),
                    rich_outputs: 0,
                },
            });
            refusal
        }
    };
    state
        .conversation
        .push(ChatMessage::user(prompts::observation(&observation)));
    if state.turn >= state.max_turns {
        state.outcome = Some(Outcome::MaxTurns);
    }
    Ok(())
}

/// The informer node: describes the variables the planner asked about (at
/// the start, those the request names) for the planner's prompt.
async fn inform<E: Effects>(state: &mut AgentState, effects: &mut E) -> Result<(), AgentError> {
    let asked = match state.action.take() {
        Some(Action::Inform(names)) => Some(identifiers(&names)),
        _ => None,
    };
    let described = effects
        .describe(&state.request, asked.as_deref().unwrap_or_default())
        .await;
    effects.emit(AgentEvent::Informed(described.clone()));
    let names: Vec<_> = described.iter().map(|(name, _)| name.clone()).collect();
    for (name, text) in described {
        match state.key_information.iter_mut().find(|(n, _)| *n == name) {
            Some(known) => known.1 = text,
            None => state.key_information.push((name, text)),
        }
    }
    if asked.is_some() {
        // The planner spoke last; it is told where to look.
        let told = if names.is_empty() {
            "The informer found no such variables.".to_owned()
        } else {
            format!(
                "The informer described {} under Key information.",
                names.join(", ")
            )
        };
        state
            .conversation
            .push(ChatMessage::user(prompts::observation(&told)));
    }
    Ok(())
}

/// The Python identifiers in `text`, in order, once each.
fn identifiers(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        let starts_well = word.starts_with(|c: char| c.is_alphabetic() || c == '_');
        if starts_well && !names.iter().any(|n| n == word) {
            names.push(word.to_owned());
        }
    }
    names
}

/// Reads the action from a planner's answer. JSON (`{"thought", "action",
/// "input"}`) and the text form (`Action:` / `Action Input:` lines, or
/// `Final Answer:`) are both read; an answer with only a code block runs it,
/// and one with neither is the final answer.
pub fn parse_action(answer: &str) -> Action {
    // A dict in the code is the code's, not an action.
    let prose = without_code(answer);
    if let Some(action) = json_objects(&prose).find_map(|value| from_json(&value)) {
        return action;
    }
    // What the model wrote after inventing an observation is not its own.
    let answer = cut_at_line_starting(answer, "observation:");
    let action_at = line_starting(answer, "action:");
    let final_at = line_starting(answer, "final answer:");
    match (action_at, final_at) {
        (Some((line, rest)), final_at) if final_at.is_none_or(|(f, _)| line < f) => {
            let (name, after) = rest.split_once('\n').unwrap_or((rest, ""));
            let input = match line_starting(after, "action input:") {
                Some((_, input)) => input,
                None => after,
            };
            // A final answer written in the same breath waits for the result.
            classify(name, cut_at_line_starting(input, "final answer:"))
        }
        (_, Some((_, text))) => Action::Finish(text.trim().to_owned()),
        _ => {
            let blocks = code_blocks(answer);
            if blocks.is_empty() {
                Action::Unclear(answer.trim().to_owned())
            } else {
                let code: Vec<_> = blocks.into_iter().map(|b| b.code).collect();
                Action::Python(code.join("\n\n"))
            }
        }
    }
}

/// `text` without its fenced blocks other than ```json ones.
fn without_code(text: &str) -> String {
    let mut kept = String::new();
    let mut fence: Option<(usize, bool)> = None; // (ticks, keep)
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        let ticks = trimmed.chars().take_while(|&c| c == '`').count();
        match fence {
            None if ticks >= 3 => {
                let info = trimmed[ticks..].trim().to_ascii_lowercase();
                fence = Some((ticks, info == "json"));
            }
            Some((open, _)) if ticks >= open && trimmed.len() == ticks => fence = None,
            Some((_, true)) | None => kept.push_str(line),
            Some((_, false)) => {}
        }
    }
    kept
}

fn from_json(value: &Value) -> Option<Action> {
    let object = value.as_object()?;
    let name = object.get("action")?.as_str()?;
    let input = ["input", "action_input", "args", "code", "answer"]
        .iter()
        .find_map(|key| object.get(*key))
        .map_or(String::new(), |value| match value {
            Value::String(text) => text.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        });
    Some(classify(name, &input))
}

/// The action a name stands for, with its input.
fn classify(name: &str, input: &str) -> Action {
    let name = name
        .trim()
        .trim_matches(|c| matches!(c, '`' | '*' | '"' | '\''));
    // `Action: grep(log, "ERROR")` names the call on one line.
    let (name, input) = match name.split_once('(') {
        Some((called, _)) if input.trim().is_empty() && name.ends_with(')') => {
            (called.trim(), name.to_owned())
        }
        _ => (name, input.to_owned()),
    };
    let input = input.trim();
    match name.to_ascii_lowercase().as_str() {
        "python" | "python_repl" | "code" | "run" | "execute" | "py" => {
            let code = match code_blocks(input).into_iter().next() {
                Some(block) => block.code,
                None => input.trim_matches('`').trim().to_owned(),
            };
            Action::Python(code)
        }
        "finish" | "final" | "final_answer" | "answer" | "done" => Action::Finish(input.to_owned()),
        "inform" | "informer" => Action::Inform(input.to_owned()),
        _ => Action::Tool {
            name: name.to_owned(),
            input: input.to_owned(),
        },
    }
}

/// The first line of `text` that starts with `prefix` (case aside, after
/// Markdown emphasis): where it starts, and what follows the prefix.
fn line_starting<'a>(text: &'a str, prefix: &str) -> Option<(usize, &'a str)> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let bare = line.trim_start().trim_start_matches(['*', '#', ' ']);
        let head = bare.get(..prefix.len());
        if head.is_some_and(|head| head.eq_ignore_ascii_case(prefix)) {
            let bare_at = offset + (line.len() - bare.len());
            let rest = &text[bare_at + prefix.len()..];
            return Some((offset, rest.trim_start_matches(['*', ' '])));
        }
        offset += line.len();
    }
    None
}

fn cut_at_line_starting<'a>(text: &'a str, prefix: &str) -> &'a str {
    match line_starting(text, prefix) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

/// The Python call of toolbox function `name` with `input`: a call written
/// out whole, JSON arguments (an object as keywords, an array as
/// positions, anything else as the one argument), or Python arguments as
/// they are. Text that cannot be arguments becomes one string argument.
pub fn tool_call(name: &str, input: &str) -> String {
    let input = input.trim();
    let input = match code_blocks(input).into_iter().next() {
        Some(block) if input.starts_with("```") => block.code,
        _ => input.trim_matches('`').trim().to_owned(),
    };
    if input.starts_with(&format!("{name}(")) && input.ends_with(')') {
        return input;
    }
    let args = match serde_json::from_str::<Value>(&input) {
        Ok(Value::Object(fields)) => fields
            .iter()
            .map(|(key, value)| format!("{key}={}", python_literal(value)))
            .collect::<Vec<_>>()
            .join(", "),
        Ok(Value::Array(items)) => items
            .iter()
            .map(python_literal)
            .collect::<Vec<_>>()
            .join(", "),
        Ok(value) => python_literal(&value),
        Err(_) if looks_like_arguments(&input) => input,
        Err(_) => python_literal(&Value::String(input)),
    };
    format!("{name}({args})")
}

/// Whether `text` reads as Python arguments: a variable's name, or text
/// with the quotes, brackets or commas that arguments have.
fn looks_like_arguments(text: &str) -> bool {
    let is_name = text.starts_with(|c: char| c.is_alphabetic() || c == '_')
        && text.chars().all(|c| c.is_alphanumeric() || c == '_');
    is_name || text.is_empty() || text.contains(['"', '\'', '(', '[', '{', ',', '='])
}

/// A JSON value as a Python literal (a JSON string is a valid Python str
/// literal as serde writes it).
fn python_literal(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(number) => number.to_string(),
        Value::String(_) => value.to_string(),
        Value::Array(items) => {
            let items: Vec<_> = items.iter().map(python_literal).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(fields) => {
            let fields: Vec<_> = fields
                .iter()
                .map(|(key, value)| {
                    format!("{}: {}", Value::String(key.clone()), python_literal(value))
                })
                .collect();
            format!("{{{}}}", fields.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::graph::RunEnd;
    use crate::agent::script::{Script, assert_roles_alternate, fails_once, latest, ok};

    fn settings(execute: bool) -> Settings {
        Settings {
            model: "test-model".into(),
            max_tokens: 1000,
            context_tokens: 100_000,
            execute,
            once: false,
            sampling: Default::default(),
        }
    }

    fn run(script: &mut Script, state: &mut AgentState, informer: bool, execute: bool) -> RunEnd {
        let graph = planner_graph::<Script>(settings(execute), state.max_turns, informer);
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(graph.run(state, script))
            .unwrap()
    }

    #[test]
    fn actions_are_read_from_text_json_code_or_plain_answers() {
        let text = "Thought: look for errors\nAction: grep\nAction Input: log, \"ERROR\"\n";
        assert_eq!(
            parse_action(text),
            Action::Tool {
                name: "grep".into(),
                input: "log, \"ERROR\"".into()
            }
        );
        let code = "Thought: sum\n**Action:** python\n**Action Input:**\n```python\nprint(sum(x))\n```\nObservation: 6";
        assert_eq!(parse_action(code), Action::Python("print(sum(x))".into()));
        let json = r#"{"thought": "done", "action": "finish", "input": "It is 6."}"#;
        assert_eq!(parse_action(json), Action::Finish("It is 6.".into()));
        let json = r#"```json
{"thought": "x", "action": "peek", "input": {"text": "abc", "n": 2}}
```"#;
        let Action::Tool { name, input } = parse_action(json) else {
            panic!("a tool call");
        };
        // Keyword arguments in the order the model wrote them.
        assert_eq!(tool_call(&name, &input), r#"peek(text="abc", n=2)"#);
        assert_eq!(
            parse_action("Thought: known\nFinal Answer: The mean is 2."),
            Action::Finish("The mean is 2.".into())
        );
        assert_eq!(
            parse_action("```python\nx = 1\n```\nand\n```python\nprint(x)\n```"),
            Action::Python("x = 1\n\nprint(x)".into())
        );
        assert_eq!(
            parse_action("A list is ordered."),
            Action::Unclear("A list is ordered.".into())
        );
        // A dict in the code is not an action; a JSON action in prose is.
        let code = "Action: python\nAction Input:\n```python\nrow = {\"action\": \"buy\", \"input\": 3}\nrows.append(row)\n```";
        assert!(matches!(parse_action(code), Action::Python(c) if c.contains("rows.append")));
        assert_eq!(
            parse_action("Action: grep(log, 'ERROR')"),
            Action::Tool {
                name: "grep".into(),
                input: "grep(log, 'ERROR')".into()
            }
        );
        assert_eq!(
            parse_action("Action: inform\nAction Input: df, prices"),
            Action::Inform("df, prices".into())
        );
        // An action before a final answer is still taken first.
        let both = "Action: python\nAction Input: print(1)\nFinal Answer: 1";
        assert_eq!(parse_action(both), Action::Python("print(1)".into()));
    }

    #[test]
    fn tool_calls_are_written_as_python() {
        assert_eq!(
            tool_call("grep", "log, 'ERROR', 2"),
            "grep(log, 'ERROR', 2)"
        );
        assert_eq!(tool_call("describe", "df"), "describe(df)");
        assert_eq!(tool_call("describe", "`df`"), "describe(df)");
        assert_eq!(tool_call("read", "notes.txt"), r#"read("notes.txt")"#);
        assert_eq!(tool_call("skill", "\"debug\""), r#"skill("debug")"#);
        assert_eq!(
            tool_call("grep", r#"["a \"b\"\n", "x", null, true]"#),
            r#"grep("a \"b\"\n", "x", None, True)"#
        );
        assert_eq!(tool_call("peek", "peek(s, 10)"), "peek(s, 10)");
        assert_eq!(tool_call("claude_sessions", ""), "claude_sessions()");
        assert_eq!(
            tool_call("edit", "```\nedit('m.py', 'a', 'b')\n```"),
            "edit('m.py', 'a', 'b')"
        );
        assert_eq!(
            python_literal(&serde_json::json!({"k": [1.5, {}]})),
            r#"{"k": [1.5, {}]}"#
        );
    }

    #[test]
    fn the_planner_loops_through_tools_until_it_finishes() {
        let mut script = Script::new(
            &[
                "Thought: look\nAction: describe\nAction Input: x",
                "Thought: compute\nAction: python\nAction Input:\n```python\nprint(x * 42)\n```",
                "Thought: I know it\nFinal Answer: It is 42.",
            ],
            ok,
        );
        let mut state = AgentState::new("what is x times 42?", Vec::new(), 5);
        let end = run(&mut script, &mut state, false, true);
        assert_eq!(
            script.nodes,
            ["planner", "tool", "planner", "tool", "planner"]
        );
        assert_eq!(end, RunEnd::Finished { steps: 5 });
        assert_eq!(script.executed, ["print(describe(x))", "print(x * 42)"]);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        assert_eq!(state.answer, "It is 42.");
        assert_eq!(state.turn, 3);
        // Each observation reached the next planner step.
        let second = latest(&script.requests[1]);
        assert!(
            second.starts_with("Observation:") && second.contains("describe(x)"),
            "{second}"
        );
        // The planner's prompt lists the tools and how to answer.
        let system = &script.requests[0].system;
        assert!(system.contains("Action Input:") && system.contains("describe("));
        assert!(!system.contains("inform"), "{system}");
        assert_roles_alternate(&script);
    }

    #[test]
    fn a_failure_and_an_unknown_tool_are_observations_the_planner_sees() {
        let mut script = Script::new(
            &[
                "Action: python\nAction Input: 1/0",
                "Action: frobnicate\nAction Input: x",
                "Final Answer: could not",
            ],
            fails_once,
        );
        let mut state = AgentState::new("divide", Vec::new(), 5);
        run(&mut script, &mut state, false, true);
        assert_eq!(script.executed, ["1/0"]);
        let told = |n: usize| script.requests[n].messages.last().unwrap().content.clone();
        assert!(told(1).contains("ZeroDivisionError"), "{}", told(1));
        assert!(
            told(2).contains("no action named \"frobnicate\"") && told(2).contains("grep"),
            "{}",
            told(2)
        );
        let refused = script.events.iter().any(|e| {
            matches!(e, AgentEvent::Executed { execution, .. }
                if execution.failed && execution.output.contains("frobnicate"))
        });
        assert!(refused, "{:?}", script.events);
        assert_roles_alternate(&script);
    }

    #[test]
    fn the_last_turns_action_runs_and_then_the_run_stops() {
        let mut script = Script::new(
            &[
                "Action: python\nAction Input: a = 1",
                "Action: python\nAction Input: b = 2",
            ],
            ok,
        );
        let mut state = AgentState::new("never done", Vec::new(), 2);
        run(&mut script, &mut state, false, true);
        assert_eq!(script.executed, ["a = 1", "b = 2"]);
        assert_eq!(state.outcome, Some(Outcome::MaxTurns));
        assert_eq!(state.turn, 2);
    }

    #[test]
    fn a_plain_answer_ends_the_run_at_once() {
        let mut script = Script::new(&["Lists keep their order."], ok);
        let mut state = AgentState::new("what is a list?", Vec::new(), 5);
        run(&mut script, &mut state, false, true);
        assert_eq!(script.nodes, ["planner"]);
        assert_eq!(state.outcome, Some(Outcome::Answered));
        assert_eq!(state.answer, "Lists keep their order.");
    }

    #[test]
    fn no_exec_shows_the_first_action_and_stops() {
        let mut script = Script::new(&["Action: python\nAction Input: import os"], ok);
        let mut state = AgentState::new("show me", Vec::new(), 5);
        run(&mut script, &mut state, false, false);
        assert!(script.executed.is_empty());
        assert_eq!(script.nodes, ["planner", "tool"]);
        assert!(
            script
                .events
                .iter()
                .any(|e| matches!(e, AgentEvent::Code { code, .. } if code == "import os"))
        );
        assert_eq!(state.outcome, Some(Outcome::Answered));
    }

    #[test]
    fn the_informer_runs_first_and_again_when_the_planner_asks() {
        let mut script = Script::new(
            &[
                "Thought: I need prices too\nAction: inform\nAction Input: prices",
                "Final Answer: x is 1.",
            ],
            ok,
        );
        let mut state = AgentState::new("what is x?", Vec::new(), 5);
        run(&mut script, &mut state, true, true);
        assert_eq!(script.nodes, ["informer", "planner", "informer", "planner"]);
        assert_eq!(script.described, [vec![], vec!["prices".to_owned()]]);
        // The first planner prompt had what the informer found at the start,
        // the second what it found next: the system prompt changes with it.
        let first = &script.requests[0];
        let system = &first.system;
        assert!(system.contains("Key information") && system.contains("x: int = 1"));
        assert!(system.contains("inform"), "{system}");
        let second = &script.requests[1];
        assert!(
            second.system.contains("prices: list of 3"),
            "{}",
            second.system
        );
        let told = &second.messages.last().unwrap().content;
        assert!(told.contains("described prices"), "{told}");
        let informed = script
            .events
            .iter()
            .filter(|e| matches!(e, AgentEvent::Informed(_)))
            .count();
        assert_eq!(informed, 2);
        assert_eq!(state.outcome, Some(Outcome::Answered));
        assert_roles_alternate(&script);
    }

    #[test]
    fn without_the_informer_asking_for_it_is_refused() {
        let mut script = Script::new(&["Action: inform\nAction Input: x", "Final Answer: ok"], ok);
        let mut state = AgentState::new("what is x?", Vec::new(), 5);
        run(&mut script, &mut state, false, true);
        assert_eq!(script.nodes, ["planner", "tool", "planner"]);
        assert!(script.described.is_empty());
        let told = &script.requests[1].messages.last().unwrap().content;
        assert!(told.contains("describe(variable)"), "{told}");
    }

    #[test]
    fn odd_answers_never_panic_and_always_give_an_action() {
        for answer in [
            "",
            "Action:",
            "Action:\n",
            "action input: x",
            "Final Answer:",
            "```",
            "```python",
            "Action: ```\nAction Input: ```",
            "Action: grep(",
            "Action: )(",
            "Thought: ü\nAction: pëek\nAction Input: «x», 3",
            "**Action:** **",
            "Observation: first\nAction: python",
            "{\"action\": 3}",
            "{\"action\": \"python\", \"input\": {\"code\": 1}}",
            "Action: 日本\nAction Input: 語",
        ] {
            let action = parse_action(answer);
            if let Action::Tool { name, input } = &action {
                let _ = tool_call(name, input);
            }
        }
        for input in ["", "`", "```", "```\n", "\"", "[", "{", "日本", "a b (c"] {
            let _ = tool_call("grep", input);
        }
    }

    #[test]
    fn identifiers_are_found_once_each() {
        assert_eq!(
            identifiers("df, prices and df; 3x _y"),
            ["df", "prices", "and", "_y"]
        );
    }

    #[test]
    fn the_tools_are_the_toolboxs_functions() {
        let toolbox = prompts::toolbox(&[]);
        let listed: Vec<_> = toolbox
            .lines()
            .filter_map(|line| line.strip_prefix("- ")?.split_once('(').map(|(n, _)| n))
            .collect();
        assert_eq!(listed, TOOLS);
    }

    #[test]
    fn prose_before_any_action_is_sent_back_once_for_a_request_that_needs_code() {
        let mut script = Script::new(
            &[
                "The mean is probably 2.",
                "Thought: compute it\nAction: python\nAction Input: print(sum(x) / len(x))",
                "Final Answer: 42",
            ],
            ok,
        );
        let mut state = AgentState::new("Compute the mean of x", Vec::new(), 5);
        run(&mut script, &mut state, false, true);
        assert_eq!(script.executed, ["print(sum(x) / len(x))"]);
        assert!(latest(&script.requests[1]).starts_with(prompts::PLANNER_FORMAT));
        assert_eq!(state.outcome, Some(Outcome::Complete));
        // A question that needs no code is answered in prose.
        let mut script = Script::new(&["A list keeps its order."], ok);
        let mut state = AgentState::new("What is a list?", Vec::new(), 5);
        run(&mut script, &mut state, false, true);
        assert_eq!(state.outcome, Some(Outcome::Answered));
        assert_eq!(script.requests.len(), 1);
    }
}
