//! JSON as small models write it: objects inside prose or a fence, Python
//! dict literals, and yes/no words for booleans. The verdict, plan and
//! triage parsers all read their answers through these.

use serde_json::Value;

/// A yes/no word (`true`, `no`, `1`) as a boolean.
pub fn truthy(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" => Some(true),
        "false" | "no" | "0" => Some(false),
        _ => None,
    }
}

/// Every balanced `{...}` in `text` that parses as JSON, outermost first.
pub fn json_objects(text: &str) -> impl Iterator<Item = Value> + '_ {
    let starts = text.match_indices('{').map(|(i, _)| i);
    starts.filter_map(move |start| {
        let end = matching_brace(&text[start..])?;
        serde_json::from_str(&text[start..start + end]).ok()
    })
}

/// The length of the balanced object starting at `text[0] == '{'`, honouring
/// strings and escapes.
fn matching_brace(text: &str) -> Option<usize> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, c) in text.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => depth += 1,
            '}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// Every balanced `{...}` in `text` written as a Python literal (single
/// quotes, `True`, `False`, `None`), read as JSON.
pub fn python_dicts(text: &str) -> impl Iterator<Item = Value> + '_ {
    let starts = text.match_indices('{').map(|(i, _)| i);
    starts.filter_map(move |start| {
        let json = python_literal_as_json(&text[start..])?;
        serde_json::from_str(&json).ok()
    })
}

/// The Python literal at the start of `text` (`{'a': True}`) as JSON text,
/// up to its closing brace; None if it does not close.
fn python_literal_as_json(text: &str) -> Option<String> {
    let mut out = String::new();
    let mut depth = 0usize;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                // A string: copied as a JSON string, whatever its quotes.
                out.push('"');
                let mut escaped = false;
                for inner in chars.by_ref() {
                    match (escaped, inner) {
                        (true, _) => {
                            if inner != '\'' {
                                out.push('\\');
                            }
                            out.push(inner);
                            escaped = false;
                        }
                        (false, '\\') => escaped = true,
                        (false, q) if q == c => break,
                        (false, '"') => out.push_str("\\\""),
                        (false, other) => out.push(other),
                    }
                }
                out.push('"');
            }
            '{' | '[' => {
                depth += 1;
                out.push(c);
            }
            '}' | ']' => {
                depth = depth.checked_sub(1)?;
                out.push(c);
                if depth == 0 {
                    return Some(out);
                }
            }
            c if c.is_alphabetic() => {
                let mut word = String::from(c);
                while let Some(&next) = chars.peek() {
                    if !next.is_alphanumeric() && next != '_' {
                        break;
                    }
                    word.push(next);
                    chars.next();
                }
                out.push_str(match word.as_str() {
                    "True" | "true" => "true",
                    "False" | "false" => "false",
                    "None" | "null" => "null",
                    _ => return None,
                });
            }
            other => out.push(other),
        }
    }
    None
}
