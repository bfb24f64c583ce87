//! Prompt templates (in `prompts/*.md`, embedded at build time) and their
//! rendering. Placeholders are `{name}`; values are inserted verbatim.

const SYSTEM: &str = include_str!("../../prompts/system.md");
const REFLECT: &str = include_str!("../../prompts/reflect.md");

/// The system prompt for a generate turn, with the namespace summary and
/// the cells the user ran since the last request.
pub fn system(namespace: &str, recent_cells: &[String]) -> String {
    let namespace = if namespace.trim().is_empty() {
        "(no user variables yet)"
    } else {
        namespace
    };
    let recent = if recent_cells.is_empty() {
        "(none)".to_owned()
    } else {
        recent_cells
            .iter()
            .map(|code| format!("```python\n{}\n```", code.trim_end()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    SYSTEM
        .replace("{namespace}", namespace)
        .replace("{recent_cells}", &recent)
}

/// The system prompt of the reflection step.
pub fn reflect(request: &str) -> String {
    REFLECT.replace("{request}", request)
}

/// The message that carries a failed verdict into the next generate turn.
pub fn not_done_yet(reasoning: &str, next_action: &str) -> String {
    let mut text = String::from("The request is not finished yet.");
    if !reasoning.trim().is_empty() {
        text.push_str(&format!(" Review: {}", reasoning.trim()));
    }
    if !next_action.trim().is_empty() {
        text.push_str(&format!("\nNext step: {}", next_action.trim()));
    }
    text
}

/// What the model is told about one executed block.
pub fn execution_report(code: &str, output: &str, failed: bool) -> String {
    let status = if failed { "failed" } else { "ran" };
    let output = if output.trim().is_empty() {
        "(no output)"
    } else {
        output
    };
    format!("This code {status}:\n```python\n{code}\n```\nOutput:\n```\n{output}\n```")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_fill_their_placeholders() {
        let prompt = system("df: DataFrame (3 rows)", &["df = load()".to_owned()]);
        assert!(prompt.contains("df: DataFrame (3 rows)"));
        assert!(prompt.contains("```python\ndf = load()\n```"));
        assert!(!prompt.contains("{namespace}") && !prompt.contains("{recent_cells}"));
        assert!(system("", &[]).contains("(no user variables yet)"));
        assert!(reflect("plot it").contains("plot it"));
    }

    #[test]
    fn feedback_messages_carry_reasoning_and_next_step() {
        let text = not_done_yet("no plot yet", "draw the histogram");
        assert!(text.contains("no plot yet") && text.contains("draw the histogram"));
        assert!(execution_report("1/0", "ZeroDivisionError", true).contains("failed"));
        assert!(execution_report("x = 1", "", false).contains("(no output)"));
    }
}
