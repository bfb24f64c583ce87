//! Reading the planner's next action from its answer: the `Thought:` /
//! `Action:` / `Action Input:` text form, `Final Answer:`, JSON, or a bare
//! code block; and writing a toolbox call as Python.

use serde_json::Value;

use super::code::code_blocks;
use super::json::json_objects;
use crate::agent::run::Action;

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
                None => without_repeated_prefix(input.trim_matches('`').trim()),
            };
            Action::Python(code)
        }
        "finish" | "final" | "final_answer" | "answer" | "done" => Action::Finish(input.to_owned()),
        "inform" | "informer" => Action::Inform(input.to_owned()),
        _ => Action::Tool {
            name: name.to_owned(),
            input: tool_input(input).to_owned(),
        },
    }
}

/// A tool's input without what a small model writes after it: a stray
/// closing fence, or the output it goes on to invent (`Output:`), which
/// would become part of the arguments. A fenced input is the block's.
fn tool_input(input: &str) -> &str {
    if input.starts_with("```") {
        return input;
    }
    let mut offset = 0;
    for line in input.split_inclusive('\n') {
        if line.trim_start().starts_with("```") || line_starting(line, "output:").is_some() {
            return input[..offset].trim_end();
        }
        offset += line.len();
    }
    input
}

/// Unfenced code whose later lines each start `Action Input:` again (a small
/// model's way to write several lines), without those prefixes.
fn without_repeated_prefix(code: &str) -> String {
    let lines: Vec<&str> = code
        .lines()
        .map(|line| match line_starting(line, "action input:") {
            Some((_, rest)) => rest,
            None => line,
        })
        .collect();
    lines.join("\n")
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
        // What a small model writes after a tool's input is not part of it
        // (recorded from the 1.5B coder model).
        let invented = "Action: peek_raw\nAction Input: inn.txt\n```\nOutput:";
        assert_eq!(
            parse_action(invented),
            Action::Tool {
                name: "peek_raw".into(),
                input: "inn.txt".into()
            }
        );
        let fenced = "Action: edit\nAction Input:\n```\nedit('m.py', 'a', 'b')\n```";
        assert!(
            matches!(parse_action(fenced), Action::Tool { input, .. } if input.contains("edit('m.py'"))
        );
        // Unfenced lines each given their own `Action Input:` (recorded from
        // the 1.5B coder model) are one block.
        let lines = "Action: python\nAction Input: n = len(s.unique())\nAction Input: print(n)";
        assert_eq!(
            parse_action(lines),
            Action::Python("n = len(s.unique())\nprint(n)".into())
        );
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
}
