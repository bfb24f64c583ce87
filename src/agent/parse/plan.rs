//! Reading the analyst's plan: does the request need code, do its
//! results deserve a critical look, and does the answer need words.

use super::json::{json_objects, truthy};
use crate::agent::run::Plan;

/// Reads a plan from the model's answer: JSON (also inside prose or a
/// fence), else `needs_code: true`-style lines. An unreadable answer plans to
/// run code without evaluation: in a notebook, guessing at data is worse
/// than computing something that was not strictly needed.
pub fn parse_plan(answer: &str) -> Plan {
    let from_json = json_objects(answer).find_map(|value| {
        let object = value.as_object()?;
        let flag = |key: &str| match object.get(key)? {
            serde_json::Value::Bool(b) => Some(*b),
            serde_json::Value::String(s) => truthy(s),
            _ => None,
        };
        Some(Plan {
            needs_code: flag("needs_code")?,
            needs_evaluation: flag("needs_evaluation").unwrap_or(false),
            needs_explanation: flag("needs_explanation").unwrap_or(true),
            reasoning: object
                .get("reasoning")
                .and_then(|r| r.as_str())
                .unwrap_or_default()
                .to_owned(),
            parsed: true,
        })
    });
    if let Some(plan) = from_json {
        return plan;
    }
    match flag_in_text(answer, "needs_code") {
        Some(needs_code) => Plan {
            needs_code,
            needs_evaluation: flag_in_text(answer, "needs_evaluation").unwrap_or(false),
            needs_explanation: flag_in_text(answer, "needs_explanation").unwrap_or(true),
            reasoning: String::new(),
            parsed: true,
        },
        None => Plan {
            needs_code: true,
            needs_evaluation: false,
            needs_explanation: true,
            reasoning: String::new(),
            parsed: false,
        },
    }
}

/// The value after `key:` or `key =` in free text, if it reads as a boolean.
fn flag_in_text(text: &str, key: &str) -> Option<bool> {
    let at = text.find(key)? + key.len();
    let rest = text[at..].trim_start_matches(['"', '\'', '*', ' ']);
    let rest = rest.strip_prefix([':', '='])?;
    let word: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect();
    truthy(&word)
}
