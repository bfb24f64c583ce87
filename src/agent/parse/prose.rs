//! Splitting a streamed answer into what the user reads now and what they
//! see later as a code panel. The code blocks that will run (by the rules of
//! [`super::code`]) are held back from the text stream, so no code shows
//! twice; everything else streams as it arrives, except the few characters
//! that might begin a fence or a `<assistant-repl-in>` tag, which wait until
//! they are known to be neither.

use super::code::{TAG_CLOSE, TAG_OPEN, is_python};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Ordinary text; `line_start` when nothing of the current line is out yet.
    Prose { line_start: bool },
    /// Inside a fenced block opened by `ticks` backticks; held back when it
    /// will run.
    Fenced { ticks: usize, runs: bool },
    /// Inside a `<assistant-repl-in>` block.
    Tagged,
}

/// A streaming filter: feed it pieces of an answer, get back the text to show.
#[derive(Debug)]
pub struct ProseFilter {
    state: State,
    /// Text received but not yet decided on.
    pending: String,
    /// A tagged block's text so far: shown after all if the tag never closes
    /// (an unclosed tag does not run).
    tagged: String,
}

impl Default for ProseFilter {
    fn default() -> Self {
        Self {
            state: State::Prose { line_start: true },
            pending: String::new(),
            tagged: String::new(),
        }
    }
}

impl ProseFilter {
    /// Takes the next piece of the answer; appends what can be shown now to
    /// `shown`.
    pub fn push(&mut self, text: &str, shown: &mut String) {
        self.pending.push_str(text);
        while self.step(shown) {}
    }

    /// The answer is complete: whatever was held back and does not run.
    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.pending);
        let state = std::mem::replace(&mut self.state, State::Prose { line_start: true });
        match state {
            State::Prose { .. } | State::Fenced { runs: false, .. } => rest,
            // A block left open at the end still runs (see extract).
            State::Fenced { runs: true, .. } => String::new(),
            State::Tagged => std::mem::take(&mut self.tagged) + &rest,
        }
    }

    /// Decides on some of the pending text; false when it must wait for more.
    fn step(&mut self, shown: &mut String) -> bool {
        match self.state {
            State::Prose { line_start: true } => self.line_start(shown),
            State::Prose { line_start: false } => self.mid_line(shown),
            State::Fenced { ticks, runs } => self.fenced(ticks, runs, shown),
            State::Tagged => self.tagged(),
        }
    }

    /// At the start of a line: a fence opens here only if the line, after
    /// indentation, starts with three or more backticks.
    fn line_start(&mut self, shown: &mut String) -> bool {
        let trimmed = self.pending.trim_start_matches([' ', '\t']);
        let ticks = trimmed.chars().take_while(|&c| c == '`').count();
        let decided = trimmed.len() > ticks || self.pending.contains('\n');
        if trimmed.is_empty() || (ticks > 0 && !decided) {
            return false; // indentation or backticks only, so far
        }
        if ticks < 3 {
            self.state = State::Prose { line_start: false };
            return true;
        }
        let Some(newline) = self.pending.find('\n') else {
            return false; // the info string decides whether it runs
        };
        let line: String = self.pending.drain(..=newline).collect();
        let info = &line.trim_start()[ticks..];
        let runs = is_python(info);
        if !runs {
            shown.push_str(&line);
        }
        self.state = State::Fenced { ticks, runs };
        true
    }

    /// Inside a line of prose: show up to the end of the line or the next
    /// tag, holding back what may be the start of a tag.
    fn mid_line(&mut self, shown: &mut String) -> bool {
        let newline = self.pending.find('\n');
        // Most pieces have no `<`: skip building a substring search for them.
        let may_tag = self.pending.contains('<');
        let tag = may_tag.then(|| self.pending.find(TAG_OPEN)).flatten();
        match (newline, tag) {
            (_, Some(tag)) if newline.is_none_or(|n| tag < n) => {
                shown.push_str(&self.pending[..tag]);
                self.pending.drain(..tag + TAG_OPEN.len());
                self.state = State::Tagged;
                true
            }
            (Some(newline), _) => {
                move_front(&mut self.pending, newline + 1, shown);
                self.state = State::Prose { line_start: true };
                true
            }
            (None, _) => {
                let keep = if may_tag {
                    partial_suffix(&self.pending, TAG_OPEN)
                } else {
                    0
                };
                let ready = self.pending.len() - keep;
                move_front(&mut self.pending, ready, shown);
                false
            }
        }
    }

    /// Inside a fence, a whole line at a time: the closing fence is a line of
    /// at least as many backticks and nothing else.
    fn fenced(&mut self, ticks: usize, runs: bool, shown: &mut String) -> bool {
        let Some(newline) = self.pending.find('\n') else {
            return false;
        };
        let line: String = self.pending.drain(..=newline).collect();
        let trimmed = line.trim();
        if trimmed.len() >= ticks && trimmed.chars().all(|c| c == '`') {
            self.state = State::Prose { line_start: true };
        }
        if !runs {
            shown.push_str(&line);
        }
        true
    }

    fn tagged(&mut self) -> bool {
        if let Some(end) = self.pending.find(TAG_CLOSE) {
            self.pending.drain(..end + TAG_CLOSE.len());
            self.tagged.clear();
            self.state = State::Prose { line_start: false };
            return true;
        }
        // Keep what may be the start of the closing tag; remember the rest.
        let keep = partial_suffix(&self.pending, TAG_CLOSE);
        let ready = self.pending.len() - keep;
        if ready == 0 {
            return false;
        }
        let held: String = self.pending.drain(..ready).collect();
        if self.tagged.is_empty() {
            self.tagged.push_str(TAG_OPEN);
        }
        self.tagged.push_str(&held);
        false
    }
}

/// Moves the first `len` bytes of `from` to the end of `to`.
fn move_front(from: &mut String, len: usize, to: &mut String) {
    to.push_str(&from[..len]);
    from.drain(..len);
}

/// The length of the longest end of `text` that begins `marker`.
fn partial_suffix(text: &str, marker: &str) -> usize {
    (1..marker.len().min(text.len() + 1))
        .rev()
        .find(|&n| {
            text.is_char_boundary(text.len() - n) && marker.starts_with(&text[text.len() - n..])
        })
        .unwrap_or(0)
}

/// A whole answer's text without the code that runs: what `ask()` returns.
pub fn without_code(answer: &str) -> String {
    let mut filter = ProseFilter::default();
    let mut shown = String::new();
    filter.push(answer, &mut shown);
    shown.push_str(&filter.finish());
    shown.trim().to_owned()
}

/// A review's words as a line for the user: prose only (a small model's
/// review often holds code, which the next turn gets but the user need not
/// read), on one line, cut at a sentence end near 200 characters.
pub fn review_words(text: &str) -> String {
    let prose = text.split("```").step_by(2).collect::<Vec<_>>().join(" ");
    let words = prose.split_whitespace().collect::<Vec<_>>().join(" ");
    if looks_like_code(&words) {
        return String::new();
    }
    if words.chars().count() <= 200 {
        return words;
    }
    let cut: String = words.chars().take(200).collect();
    match cut.rfind(". ") {
        Some(end) if end > 40 => cut[..=end].to_owned(),
        _ => format!("{}…", cut.trim_end()),
    }
}

/// Whether a line reads as code rather than words (an assignment, a call
/// with no sentence around it). What a double-quoted span holds does not
/// count: an error message quoted in a sentence (`the code failed
/// (KeyError: "... [('A', 'B'), ...]")`) is still a sentence.
fn looks_like_code(words: &str) -> bool {
    let unquoted: String = words.split('"').step_by(2).collect();
    let words = unquoted.as_str();
    let letters = words
        .chars()
        .filter(|c| c.is_alphabetic() || *c == ' ')
        .count();
    let symbols = words
        .chars()
        .filter(|c| "=()[]{}_.:'\"".contains(*c))
        .count();
    !words.is_empty()
        && (symbols * 4 > letters || words.starts_with("import ") || words.starts_with("print("))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_code_keeps_the_prose_of_a_whole_answer() {
        let answer = "The total is below.\n```python\nprint(sum(xs))\n```\nIt is 6.\n";
        let prose = without_code(answer);
        assert!(!prose.contains("print"), "{prose:?}");
        assert!(prose.starts_with("The total is below.") && prose.ends_with("It is 6."));
    }
    use crate::agent::parse::code::code_blocks;

    /// The text shown for `answer` fed in pieces of `size` characters.
    fn shown(answer: &str, size: usize) -> String {
        let mut filter = ProseFilter::default();
        let chars: Vec<char> = answer.chars().collect();
        let mut out = String::new();
        for piece in chars.chunks(size) {
            filter.push(&piece.iter().collect::<String>(), &mut out);
        }
        out + &filter.finish()
    }

    /// Every chunking shows the same text.
    fn shown_in_any_chunking(answer: &str) -> String {
        let whole = shown(answer, answer.len().max(1));
        for size in 1..=8 {
            assert_eq!(shown(answer, size), whole, "pieces of {size}: {answer:?}");
        }
        whole
    }

    #[test]
    fn python_blocks_are_held_back_and_prose_streams() {
        let answer = "Let me compute it.\n```python\nx = 6 * 7\nprint(x)\n```\nThat prints 42.";
        assert_eq!(
            shown_in_any_chunking(answer),
            "Let me compute it.\nThat prints 42."
        );
        assert_eq!(code_blocks(answer).len(), 1);
    }

    #[test]
    fn blocks_that_do_not_run_are_shown() {
        let answer = "Output:\n```text\n42\n```\n```json\n{\"a\": 1}\n```\nend";
        assert_eq!(shown_in_any_chunking(answer), answer);
        assert!(code_blocks(answer).is_empty());
    }

    #[test]
    fn bare_and_longer_fences_and_indented_ones() {
        assert_eq!(shown_in_any_chunking("a\n```\nb = 2\n```\nc"), "a\nc");
        assert_eq!(
            shown_in_any_chunking("````python\ns = '```'\n````\nafter"),
            "after"
        );
        assert_eq!(
            shown_in_any_chunking("1. Run:\n   ```py\n   t = 5\n   ```\n2. Done"),
            "1. Run:\n2. Done"
        );
    }

    #[test]
    fn inline_backticks_are_prose() {
        let answer = "Use `x` or ``y`` here.\n`` not a fence\n";
        assert_eq!(shown_in_any_chunking(answer), answer);
    }

    #[test]
    fn a_block_left_open_at_the_end_runs_so_it_is_not_shown() {
        let answer = "Here:\n```python\nx = 1\nprint(x)";
        assert_eq!(shown_in_any_chunking(answer), "Here:\n");
        assert_eq!(code_blocks(answer).len(), 1);
    }

    #[test]
    fn tags_are_held_back_unless_they_never_close() {
        let answer = "First <assistant-repl-in>\nx = 2\n</assistant-repl-in> then done";
        assert_eq!(shown_in_any_chunking(answer), "First  then done");
        let open = "Try <assistant-repl-in>x = 1";
        assert_eq!(shown_in_any_chunking(open), open);
        assert!(code_blocks(open).is_empty());
        // Something that merely starts like a tag is text.
        assert_eq!(shown_in_any_chunking("a <assist b"), "a <assist b");
    }

    #[test]
    fn text_streams_before_the_line_ends() {
        let mut filter = ProseFilter::default();
        let mut push = |text: &str| {
            let mut shown = String::new();
            filter.push(text, &mut shown);
            shown
        };
        assert_eq!(push("The answer"), "The answer");
        assert_eq!(push(" is <assis"), " is ");
        assert_eq!(push("tant>"), "<assistant>");
        // At a line start, backticks wait for the rest of the line.
        assert_eq!(push("\n``"), "\n");
        assert_eq!(push("`py"), "");
        assert_eq!(push("thon\nx = 1\n"), "");
        assert_eq!(push("```\nok"), "ok");
    }

    #[test]
    fn a_quoted_error_in_a_sentence_is_shown_but_code_is_not() {
        let failed = "the code failed (KeyError: \"The following id_vars or value_vars are not \
                      present in the DataFrame: [('A', 'A', 'A'), ('B', 'B', 'C')]\")";
        assert!(review_words(failed).starts_with("the code failed (KeyError: \"The following"));
        assert_eq!(
            review_words("df[\"total\"] = df[\"price\"] * df[\"qty\"]"),
            ""
        );
        assert_eq!(review_words("print(\"The answer is\", total)"), "");
    }
}
