//! Whether a block reads a name before it binds one of its own: what it
//! takes from code that ran before it (`revenue = revenue.sum()` takes
//! `revenue`; `x = 1` then `print(x)` takes nothing). Read line by line,
//! outside strings and comments but inside an f-string's placeholders; a
//! line's simple assignment binds its targets after its right-hand side is
//! read.

use super::checks::{is_identifier, words};
use super::retyped::outside_strings;

/// Whether `code` reads `name` before any line of it binds `name`.
pub fn reads_before_binding(code: &str, name: &str) -> bool {
    for line in code.lines() {
        let mut text: String = outside_strings(line).collect();
        text.push_str(&placeholders(line));
        let (targets, read) = match simple_assignment(&text) {
            Some((targets, value)) => (targets, value),
            None => (Vec::new(), text.as_str()),
        };
        if words(read).any(|word| word == name) {
            return true;
        }
        if targets.contains(&name) {
            return false;
        }
    }
    false
}

/// The text inside the braces of a line that holds an f-string (`f"{x}"`),
/// where a string's words are code.
fn placeholders(line: &str) -> String {
    let formatted = ["f\"", "f'", "F\"", "F'"]
        .iter()
        .any(|start| line.contains(start));
    if !formatted {
        return String::new();
    }
    line.split('{')
        .skip(1)
        .filter_map(|after| after.split_once('}').map(|(inside, _)| inside))
        .map(|inside| format!(" {inside}"))
        .collect()
}

/// The targets and the value of `a = ...` or `a, b = ...` (not `a == b`,
/// `a += 1` or `a[0] = 1`, which read `a`).
fn simple_assignment(text: &str) -> Option<(Vec<&str>, &str)> {
    let (left, right) = text.split_once('=')?;
    if right.starts_with('=')
        || left.ends_with(['+', '-', '*', '/', '%', '<', '>', '!', '&', '|', '^', ':'])
    {
        return None;
    }
    let targets: Vec<&str> = left.split(',').map(str::trim).collect();
    targets
        .iter()
        .all(|target| is_identifier(target))
        .then_some((targets, right))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_read_before_the_block_binds_it_is_taken_from_earlier_code() {
        assert!(reads_before_binding("revenue = revenue.sum()", "revenue"));
        assert!(reads_before_binding(
            "print(f\"The largest price is {largest['price']}\")",
            "largest"
        ));
        assert!(reads_before_binding("total += 1", "total"));
        assert!(reads_before_binding("table[0] = 1", "table"));
        assert!(reads_before_binding("if n == 3:\n    n = 4", "n"));
    }

    #[test]
    fn a_name_the_block_binds_first_or_only_mentions_in_text_is_its_own() {
        assert!(!reads_before_binding(
            "result = df.sum()\nprint(result)",
            "result"
        ));
        assert!(!reads_before_binding("a, b = 1, 2\nprint(a + b)", "a"));
        assert!(!reads_before_binding(
            "print('the result')  # result",
            "result"
        ));
        assert!(!reads_before_binding("x = 1", "result"));
    }
}
