//! Finding the code a model wants run: fenced ```python blocks (```py too),
//! bare ``` fences whose text reads as Python (not a printed table, a shell
//! line such as `pip install x`, or output the model quotes), and the
//! `<assistant-repl-in>` tag form. Blocks of other languages (text, output,
//! json, ...) are never run.

use crate::agent::run::CodeBlock;

pub(super) const TAG_OPEN: &str = "<assistant-repl-in>";
pub(super) const TAG_CLOSE: &str = "</assistant-repl-in>";

/// Languages whose fenced blocks are run; an empty info string counts as Python.
pub(super) fn is_python(info: &str) -> bool {
    let lang = info
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    matches!(lang.as_str(), "" | "python" | "py" | "python3" | "ipython")
}

/// All runnable blocks in `text`. A block left open at the very end counts
/// too: small models often stop without the closing fence.
pub fn code_blocks(text: &str) -> Vec<CodeBlock> {
    blocks(text, true)
}

/// The runnable blocks of an answer cut off at the length limit: only the
/// closed ones (the open one at the end is the part cut).
pub fn closed_code_blocks(text: &str) -> Vec<CodeBlock> {
    blocks(text, false)
}

/// Whether `text` ends inside a block it opened: the last block is not
/// closed (an answer that stopped mid-block).
pub fn ends_in_open_block(text: &str) -> bool {
    code_blocks(text).len() > closed_code_blocks(text).len()
}

/// The blocks of a streaming answer known to be complete: those closed in
/// its finished lines (a closing fence counts once its line has ended).
/// They begin [`code_blocks`] of the whole answer, whatever follows.
pub fn complete_code_blocks(text: &str) -> Vec<CodeBlock> {
    let finished = text.rfind('\n').map_or("", |end| &text[..=end]);
    blocks(finished, false)
}

fn blocks(text: &str, open_at_end: bool) -> Vec<CodeBlock> {
    let mut blocks = Vec::new();
    let mut rest = text;
    loop {
        let fence = find_fence_start(rest);
        let tag = rest.find(TAG_OPEN);
        match (fence, tag) {
            (Some((start, _)), Some(tag_at)) if tag_at < start => {
                rest = take_tagged(rest, tag_at, &mut blocks);
            }
            (None, Some(tag_at)) => rest = take_tagged(rest, tag_at, &mut blocks),
            (Some((start, ticks)), _) => {
                rest = take_fenced(rest, start, ticks, open_at_end, &mut blocks);
            }
            (None, None) => return blocks,
        }
        if rest.is_empty() {
            return blocks;
        }
    }
}

/// The start of the next fence at the beginning of a line, and its length.
fn find_fence_start(text: &str) -> Option<(usize, usize)> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let ticks = trimmed.chars().take_while(|&c| c == '`').count();
        if ticks >= 3 {
            return Some((offset + (line.len() - trimmed.len()), ticks));
        }
        offset += line.len();
    }
    None
}

fn take_fenced<'a>(
    text: &'a str,
    start: usize,
    ticks: usize,
    open_at_end: bool,
    blocks: &mut Vec<CodeBlock>,
) -> &'a str {
    let after_ticks = &text[start + ticks..];
    let (info, body) = match after_ticks.find('\n') {
        Some(newline) => (&after_ticks[..newline], &after_ticks[newline + 1..]),
        None => return "",
    };
    // The closing fence: a line of at least as many backticks and nothing else.
    let mut offset = 0;
    for line in body.split_inclusive('\n') {
        let trimmed = line.trim();
        if trimmed.len() >= ticks && trimmed.chars().all(|c| c == '`') {
            push_runnable(info, dedent(body[..offset].trim_end_matches('\n')), blocks);
            return &body[offset + line.len()..];
        }
        offset += line.len();
    }
    if open_at_end {
        push_runnable(info, dedent(body.trim_end_matches('\n')), blocks);
    }
    ""
}

/// An answer with no fence that is one call and nothing else (`grep('ERROR')`,
/// in backticks or not): what a small model writes when it means code but
/// forgets the fence. Only where every answer should be code (a search's
/// turns); a sentence is never one.
pub fn bare_call(text: &str) -> Option<CodeBlock> {
    let line = text.trim().trim_matches('`').trim();
    let open = line.find('(')?;
    let callee = &line[..open];
    let named = callee.split('.').all(|part| {
        part.chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
            && part.chars().all(|c| c.is_alphanumeric() || c == '_')
    });
    let closed = line.ends_with(')') && line.matches('(').count() == line.matches(')').count();
    (named && closed && !line.contains('\n')).then(|| CodeBlock {
        code: line.to_owned(),
    })
}

/// Keeps `code` when its fence says Python, or says nothing and the code
/// reads as Python.
fn push_runnable(info: &str, code: String, blocks: &mut Vec<CodeBlock>) {
    let bare = info.trim().is_empty();
    if code.trim().is_empty() || !is_python(info) || bare && !reads_as_python(&code) {
        return;
    }
    blocks.push(CodeBlock { code });
}

/// Whether the text of a bare fence is Python rather than a shell line, a
/// printed table or quoted output: it has a statement's shape somewhere (an
/// assignment, a call, a keyword that starts a statement) and does not start
/// with a shell command or a prompt.
pub fn reads_as_python(code: &str) -> bool {
    const SHELL: [&str; 12] = [
        "$", "pip", "pip3", "conda", "npm", "apt", "apt-get", "sudo", "cd", "ls", "git", "brew",
    ];
    const STATEMENTS: [&str; 17] = [
        "import", "from", "def", "class", "for", "while", "if", "with", "try", "print", "del",
        "assert", "return", "raise", "async", "await", "lambda",
    ];
    let Some(first) = code.lines().find(|line| !line.trim().is_empty()) else {
        return false;
    };
    let first_word = first.split_whitespace().next().unwrap_or("");
    if SHELL.contains(&first_word) || first.trim_start().starts_with(">>>") {
        return false;
    }
    code.lines().any(|line| {
        let line = line.trim();
        let word = line
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .next()
            .unwrap_or("");
        STATEMENTS.contains(&word)
            || line.starts_with('@')
            || line.starts_with('#')
            || line.contains('(') && line.contains(')')
            || assigns(line)
    })
}

/// Whether `line` assigns (`x = 1`, `df["a"] += 2`), not compares.
fn assigns(line: &str) -> bool {
    line.char_indices().any(|(i, c)| {
        c == '=' && !line[i + 1..].starts_with('=') && !line[..i].ends_with(['=', '!', '<', '>'])
    })
}

/// Removes the indentation all non-blank lines share (a block inside a list
/// item is indented as a whole).
fn dedent(code: &str) -> String {
    let indent = code
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.len() - line.trim_start().len())
        .min()
        .unwrap_or(0);
    code.lines()
        .map(|line| line.get(indent..).unwrap_or_else(|| line.trim_start()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn take_tagged<'a>(text: &'a str, start: usize, blocks: &mut Vec<CodeBlock>) -> &'a str {
    let body = &text[start + TAG_OPEN.len()..];
    match body.find(TAG_CLOSE) {
        Some(end) => {
            let code = body[..end].trim_matches('\n');
            if !code.trim().is_empty() {
                blocks.push(CodeBlock {
                    code: code.to_owned(),
                });
            }
            &body[end + TAG_CLOSE.len()..]
        }
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(text: &str) -> Vec<String> {
        code_blocks(text).into_iter().map(|b| b.code).collect()
    }

    #[test]
    fn single_python_block() {
        assert_eq!(
            codes("Sure:\n```python\nx = 1\nprint(x)\n```\nDone."),
            ["x = 1\nprint(x)"]
        );
    }

    #[test]
    fn several_blocks_in_order_and_other_languages_skipped() {
        let text = "```py\na = 1\n```\n```text\nnot code\n```\n```\nb = 2\n```\n```json\n{}\n```";
        assert_eq!(codes(text), ["a = 1", "b = 2"]);
    }

    #[test]
    fn bare_fences_run_only_when_they_read_as_python() {
        let text = "```\n   fruit  qty\n0  apple    3\n1   pear    1\n```\n\
                    ```\npip install seaborn\n```\n```\n$ ls -la\n```\n\
                    ```\noutput: 23\n```\n```\nimport seaborn as sns\n```\n```\ntotal = 3\n```";
        assert_eq!(codes(text), ["import seaborn as sns", "total = 3"]);
        assert!(reads_as_python("df.head()"));
        assert!(reads_as_python("for x in xs:\n    print(x)"));
        assert!(!reads_as_python("| a | b |\n|---|---|\n| 1 | 2 |"));
        assert!(!reads_as_python("a == b"));
        // A fence that says python always runs.
        assert_eq!(codes("```python\noutput: 23\n```"), ["output: 23"]);
    }

    #[test]
    fn a_cut_off_answer_runs_only_its_closed_blocks() {
        let cut = "```python\na = 1\n```\nand then\n```python\nb = [1, 2,";
        let closed: Vec<String> = closed_code_blocks(cut)
            .into_iter()
            .map(|b| b.code)
            .collect();
        assert_eq!(closed, ["a = 1"]);
        assert_eq!(codes(cut).len(), 2);
    }

    #[test]
    fn no_code_at_all() {
        assert!(codes("The answer is 42.").is_empty());
        assert!(codes("").is_empty());
    }

    #[test]
    fn malformed_blocks_are_not_run() {
        // A fence left open at the end still counts: the model stopped there.
        assert_eq!(codes("```python\nx = 1\nprint(x)\n"), ["x = 1\nprint(x)"]);
        // Fence with nothing inside.
        assert!(codes("```python\n```").is_empty());
        // Backticks inside a line are not a fence.
        assert!(codes("use `x` or ``y`` here").is_empty());
    }

    #[test]
    fn complete_blocks_of_a_streaming_answer_begin_its_final_blocks() {
        let answer = "Here:\n```python\na = 1\n```\nthen\n<assistant-repl-in>\nb = 2\n</assistant-repl-in>\n```python\nc = 3\n```";
        let complete = |text: &str| -> Vec<String> {
            complete_code_blocks(text)
                .into_iter()
                .map(|b| b.code)
                .collect()
        };
        let mut seen = 0;
        for end in (0..=answer.len()).filter(|i| answer.is_char_boundary(*i)) {
            let now = complete(&answer[..end]);
            assert!(now.len() >= seen, "blocks never disappear");
            assert_eq!(now[..], codes(answer)[..now.len()], "at {end}");
            seen = now.len();
        }
        // The last block's closing line has not ended: it is not known yet.
        assert_eq!(seen, 2);
        assert_eq!(complete("```python\nx = 1\n```\n"), ["x = 1"]);
        // A fence still open is not complete (though it would run at the end).
        assert!(complete("```python\nx = 1\n").is_empty());
        // A line of backticks that has not ended may yet be something else.
        assert!(complete("```python\nx = 1\n```").is_empty());
    }

    #[test]
    fn longer_fences_can_hold_triple_backticks() {
        let text = "````python\ns = '```'\n````";
        assert_eq!(codes(text), ["s = '```'"]);
    }

    #[test]
    fn tag_form_and_mixed_forms() {
        let text =
            "First <assistant-repl-in>\nx = 2\n</assistant-repl-in> then\n```python\ny = 3\n```";
        assert_eq!(codes(text), ["x = 2", "y = 3"]);
        assert!(codes("<assistant-repl-in>x = 1").is_empty());
    }

    #[test]
    fn indented_fences_inside_lists() {
        let text = "1. Run this:\n   ```python\n   total = 5\n   ```\n";
        assert_eq!(codes(text), ["total = 5"]);
        let nested = "   ```python\n   if x:\n       y = 1\n   ```";
        assert_eq!(codes(nested), ["if x:\n    y = 1"]);
    }

    #[test]
    fn a_lone_call_without_a_fence_is_code_and_a_sentence_is_not() {
        let code = |text: &str| bare_call(text).map(|block| block.code);
        assert_eq!(code("grep('ERROR')").as_deref(), Some("grep('ERROR')"));
        assert_eq!(
            code(" `peek(context, 500)`\n").as_deref(),
            Some("peek(context, 500)")
        );
        assert_eq!(
            code("re.findall(r'a(b)', context)").as_deref(),
            Some("re.findall(r'a(b)', context)")
        );
        assert_eq!(code("The error is on line 3 (db)."), None);
        assert_eq!(code("grep('ERROR')\nthen read it"), None);
        assert_eq!(code("FINAL('x') and more"), None);
        assert_eq!(code("2 + 3"), None);
        assert_eq!(code(""), None);
    }
}
