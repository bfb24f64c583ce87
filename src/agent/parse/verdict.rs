//! Reading the reflection step's verdict: did the last turn finish the
//! request, why, and what to do next. Small models wrap the JSON in prose or
//! a code fence, or answer with XML tags instead; all of those are read. An
//! answer that says nothing readable counts as "not complete", with the text
//! kept as the reasoning, so the next turn still learns from it. Where the
//! answer came with its tokens' likeliest choices, how likely the model held
//! a yes-or-no field true is read from them.

use serde_json::Value;

use super::json::{json_objects, python_dicts, truthy};
use crate::agent::llm::TokenChoices;
use crate::agent::prompts::VERDICT_ANSWER_FIELD;
use crate::agent::run::Verdict;

/// How much of the answer field's description an answer must repeat, word
/// for word from its start, to count as a copy of it rather than an answer
/// that happens to begin the same way ("The result in one row: 3").
const COPIED_WORDS: usize = 6;

/// How likely the model held the boolean `field` true rather than false:
/// read at the token where its value begins (after `"field":`), from the
/// choices spelled `true` and `false` there. One of them missing from the
/// likeliest choices counts as no likelier than the least likely listed.
/// None when the field is not there or neither choice is among them.
pub fn likelihood_true(tokens: &[TokenChoices], field: &str) -> Option<f32> {
    let key = format!("\"{field}\":");
    let mut text = String::new();
    for token in tokens {
        if text.trim_end().ends_with(&key) && !token.token.trim().is_empty() {
            return weigh(&token.choices);
        }
        text.push_str(&token.token);
    }
    None
}

/// P(true) against P(false) among one token's choices.
fn weigh(choices: &[(String, f32)]) -> Option<f32> {
    let least = choices
        .iter()
        .map(|(_, p)| *p)
        .fold(f32::INFINITY, f32::min);
    let chance = |word: &str| -> Option<f32> {
        let found: Vec<f32> = choices
            .iter()
            .filter(|(token, _)| token.trim() == word)
            .map(|(_, logprob)| logprob.exp())
            .collect();
        (!found.is_empty()).then(|| found.iter().sum())
    };
    let (yes, no) = match (chance("true"), chance("false")) {
        (None, None) => return None,
        (yes, no) => (yes.unwrap_or(least.exp()), no.unwrap_or(least.exp())),
    };
    (yes + no > 0.0).then(|| yes / (yes + no))
}

/// Reads a verdict from a model's answer: JSON (also written as a Python
/// dict), XML-like tags, or `key: value` lines (Markdown lists and bold
/// keys too).
pub fn parse_verdict(answer: &str) -> Verdict {
    let read = json_objects(answer)
        .find_map(|value| from_json(&value))
        .or_else(|| python_dicts(answer).find_map(|value| from_json(&value)))
        .or_else(|| from_tags(answer))
        .or_else(|| from_lines(answer));
    match read {
        Some(mut verdict) => {
            verdict.answer = without_copied_description(&verdict.answer);
            verdict
        }
        None => Verdict {
            is_complete: false,
            cannot_fix: false,
            reasoning: answer.trim().to_owned(),
            next_action: String::new(),
            answer: String::new(),
            parsed: false,
            confidence: None,
            needed: None,
            cross_check: None,
        },
    }
}

fn from_json(value: &Value) -> Option<Verdict> {
    let object = value.as_object()?;
    let is_complete = match object.get("is_complete")? {
        Value::Bool(b) => *b,
        Value::String(s) => truthy(s)?,
        _ => return None,
    };
    let text = |key: &str| {
        object
            .get(key)
            .map(|v| match v {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            })
            .unwrap_or_default()
    };
    let cannot_fix = match object.get("cannot_fix") {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => truthy(s).unwrap_or(false),
        _ => false,
    };
    Some(Verdict {
        is_complete,
        // A request that is done is not also beyond repair.
        cannot_fix: cannot_fix && !is_complete,
        reasoning: text("reasoning"),
        next_action: text("next_action"),
        answer: if is_complete {
            text("answer")
        } else {
            String::new()
        },
        parsed: true,
        confidence: None,
        needed: None,
        cross_check: None,
    })
}

/// A verdict written as `key: value` lines (`- **is_complete**: yes`).
fn from_lines(text: &str) -> Option<Verdict> {
    let value = |key: &str| {
        text.lines().find_map(|line| {
            let line = line.trim().trim_start_matches(['-', '*', ' ']);
            let (name, value) = line.split_once(':')?;
            let name = name
                .trim()
                .trim_matches(['*', '`', '"', ' '])
                .to_ascii_lowercase();
            (name.replace(' ', "_") == key).then(|| {
                value
                    .trim()
                    .trim_matches(['*', '`', '"', ' '])
                    .trim_end_matches(',')
                    .to_owned()
            })
        })
    };
    let is_complete = truthy(&value("is_complete")?)?;
    let cannot_fix = value("cannot_fix")
        .and_then(|v| truthy(&v))
        .unwrap_or(false);
    Some(Verdict {
        is_complete,
        cannot_fix: cannot_fix && !is_complete,
        reasoning: value("reasoning").unwrap_or_default(),
        next_action: value("next_action").unwrap_or_default(),
        answer: if is_complete {
            value("answer").unwrap_or_default()
        } else {
            String::new()
        },
        parsed: true,
        confidence: None,
        needed: None,
        cross_check: None,
    })
}

/// The answer without the prompt's description of the field, where a small
/// model wrote that description first (measured: a third of the local
/// model's "done" answers began "The result in one plain sentence, with the
/// values that matter, ...", some with nothing after it): what follows the
/// copy, or nothing. The user is shown the answer, never the instructions.
fn without_copied_description(answer: &str) -> String {
    let answer = answer.trim();
    // ASCII case only: the lowercase text keeps every byte where it was.
    let lower = answer.to_ascii_lowercase();
    let copied = [VERDICT_ANSWER_FIELD, described(VERDICT_ANSWER_FIELD)]
        .iter()
        .map(|description| shared_words(&lower, description))
        .max()
        .unwrap_or(0);
    if copied == 0 {
        return answer.to_owned();
    }
    let rest =
        answer[copied..].trim_start_matches(|c: char| c.is_whitespace() || ":;,.-".contains(c));
    let mut chars = rest.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The description without its lead-in ("when done: ").
fn described(field: &str) -> &str {
    field
        .split_once(": ")
        .map_or(field, |(_, described)| described)
}

/// The length of the longest start of `answer` (already lowercase) that
/// repeats `description` word for word, ending where a word of both ends;
/// 0 when fewer than [`COPIED_WORDS`] words are repeated.
fn shared_words(answer: &str, description: &str) -> usize {
    let description = description.to_ascii_lowercase();
    let same = answer
        .bytes()
        .zip(description.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    let ends_a_word = |text: &str, at: usize| {
        text[at..]
            .chars()
            .next()
            .is_none_or(|c| !c.is_alphanumeric())
    };
    // Back to the last place both texts end a word.
    let end = (0..=same)
        .rev()
        .find(|&at| {
            answer.is_char_boundary(at)
                && description.is_char_boundary(at)
                && ends_a_word(answer, at)
                && ends_a_word(&description, at)
        })
        .unwrap_or(0);
    let words = answer[..end].split_whitespace().count();
    if words >= COPIED_WORDS { end } else { 0 }
}

fn tag<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = text.find(&open)? + open.len();
    let end = text[start..].find(&close)? + start;
    Some(text[start..end].trim())
}

fn from_tags(text: &str) -> Option<Verdict> {
    let is_complete = truthy(tag(text, "is_complete")?)?;
    let cannot_fix = tag(text, "cannot_fix").and_then(truthy).unwrap_or(false);
    Some(Verdict {
        is_complete,
        cannot_fix: cannot_fix && !is_complete,
        reasoning: tag(text, "reasoning").unwrap_or_default().to_owned(),
        next_action: tag(text, "next_action").unwrap_or_default().to_owned(),
        answer: match is_complete {
            true => tag(text, "answer").unwrap_or_default().to_owned(),
            false => String::new(),
        },
        parsed: true,
        confidence: None,
        needed: None,
        cross_check: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(text: &str, choices: &[(&str, f32)]) -> TokenChoices {
        TokenChoices {
            token: text.into(),
            choices: choices.iter().map(|(t, p)| ((*t).to_owned(), *p)).collect(),
        }
    }

    #[test]
    fn the_likelihood_of_true_is_read_where_the_fields_value_begins() {
        // As the local model's server reported a verdict's tokens: a first
        // token the grammar refused, then the object.
        let tokens = [
            token("```", &[("```", -0.3), ("{\n", -2.0)]),
            token("{\n", &[("{\n", -0.02)]),
            token(" ", &[(" ", -0.1)]),
            token(" \"", &[(" \"", -0.0)]),
            token("is", &[("is", -0.0)]),
            token("_complete", &[("_complete", -0.0)]),
            token("\":", &[("\":", -0.0)]),
            token(" true", &[(" true", -0.2), (" false", -1.8), (" \"", -7.0)]),
        ];
        let p = likelihood_true(&tokens, "is_complete").unwrap();
        let expected = (-0.2f32).exp() / ((-0.2f32).exp() + (-1.8f32).exp());
        assert!((p - expected).abs() < 1e-6, "{p} vs {expected}");
        assert_eq!(likelihood_true(&tokens, "cannot_fix"), None);
        // "false" not among the choices: no likelier than the least listed.
        let sure = [
            token("\"right\":", &[]),
            token("true", &[("true", -0.01), ("1", -6.0)]),
        ];
        let p = likelihood_true(&sure, "right").unwrap();
        assert!(p > 0.99 && p < 1.0, "{p}");
        let neither = [token("\"right\":", &[]), token(" \"", &[(" \"", -0.1)])];
        assert_eq!(likelihood_true(&neither, "right"), None);
    }

    /// Verdicts Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, llama.cpp server,
    /// temperature 0) wrote with the verdict schema: a failed run (judged
    /// unfixable, wrongly: the review believes that only with an error that
    /// says so) and a finished one.
    const RECORDED_LOCAL_FAILED: &str = "{\n  \"reasoning\": \"The code attempts to compute the mean of a list, but the list is not defined or provided.\",\n  \"is_complete\": false,\n  \"cannot_fix\": true,\n  \"next_action\": \"Define the list 'prices' before running the code.\",\n  \"answer\": \"The mean price is not defined.\"\n}";
    const RECORDED_LOCAL_DONE: &str = "{\n  \"reasoning\": \"The output is the mean price, which is correctly computed.\",\n  \"is_complete\": true,\n  \"cannot_fix\": false,\n  \"next_action\": \"\",\n  \"answer\": \"The mean price is 2.0.\"\n}";

    #[test]
    fn verdicts_recorded_from_the_local_model_with_the_schema() {
        let failed = parse_verdict(RECORDED_LOCAL_FAILED);
        assert!(failed.parsed && !failed.is_complete && failed.cannot_fix);
        assert_eq!(
            failed.next_action,
            "Define the list 'prices' before running the code."
        );
        let done = parse_verdict(RECORDED_LOCAL_DONE);
        assert!(done.parsed && done.is_complete && !done.cannot_fix);
        assert_eq!(done.answer, "The mean price is 2.0.");
        assert_eq!(
            done.reasoning,
            "The output is the mean price, which is correctly computed."
        );
    }

    #[test]
    fn plain_json() {
        let v = parse_verdict(r#"{"is_complete": true, "reasoning": "done", "next_action": ""}"#);
        assert!(v.is_complete && v.parsed);
        assert_eq!(v.reasoning, "done");
    }

    #[test]
    fn a_complete_verdict_carries_the_answer_for_the_user() {
        let v = parse_verdict(
            r#"{"is_complete": true, "reasoning": "the mean is there", "next_action": "", "answer": "The mean price is 1.05."}"#,
        );
        assert_eq!(v.answer, "The mean price is 1.05.");
        let v = parse_verdict("<is_complete>yes</is_complete><answer>It is 6.</answer>");
        assert_eq!(v.answer, "It is 6.");
        // An answer to a request that is not done yet is no answer.
        let v = parse_verdict(r#"{"is_complete": false, "reasoning": "r", "answer": "guess"}"#);
        assert_eq!(v.answer, "");
    }

    /// "Done" answers Qwen2.5-Coder-1.5B-Instruct wrote with the review's
    /// prompt and schema: the field's description copied, with and
    /// without the answer after it.
    const RECORDED_COPIES: [(&str, &str); 3] = [
        (
            "The result in one plain sentence, with the values that matter, taken from the output or the variables (never invented): the pivot table with sum for D and mean for E.",
            "The pivot table with sum for D and mean for E.",
        ),
        (
            "The result in one plain sentence, with the values that matter, taken from the output or the variables (never invented):",
            "",
        ),
        (
            "The result in one plain sentence, with the values that matter, taken from the output or the variables (never invented): The output matches the desired format.",
            "The output matches the desired format.",
        ),
    ];

    #[test]
    fn an_answer_that_copies_the_fields_description_keeps_only_what_follows() {
        for (written, shown) in RECORDED_COPIES {
            let json = serde_json::json!({"reasoning": "r", "is_complete": true, "cannot_fix": false, "next_action": "", "answer": written});
            assert_eq!(parse_verdict(&json.to_string()).answer, shown, "{written}");
            let tags = format!("<is_complete>yes</is_complete><answer>{written}</answer>");
            assert_eq!(parse_verdict(&tags).answer, shown);
        }
        // With the lead-in, in other case.
        assert_eq!(
            without_copied_description("When done: the result in one plain sentence: 6 rows"),
            "6 rows"
        );
        // Answers that begin as the description does are answers.
        for answer in [
            "The result is the bin counts by user in the DataFrame.",
            "The result in one row: 3.5",
            "The result in one plain table is stored in `summary`.",
            "",
            "Ünïcode: 3",
        ] {
            assert_eq!(without_copied_description(answer), answer);
        }
    }

    #[test]
    fn a_verdict_can_say_the_request_cannot_be_done() {
        let v = parse_verdict(
            r#"{"is_complete": false, "cannot_fix": true, "reasoning": "sales.csv does not exist", "next_action": ""}"#,
        );
        assert!(v.cannot_fix && !v.is_complete);
        let v = parse_verdict(
            "<is_complete>no</is_complete><cannot_fix>yes</cannot_fix><reasoning>no such table</reasoning>",
        );
        assert!(v.cannot_fix);
        // Absent, it is false; and a finished request is never "cannot be done".
        assert!(!parse_verdict(r#"{"is_complete": false, "reasoning": "r"}"#).cannot_fix);
        assert!(
            !parse_verdict(r#"{"is_complete": true, "cannot_fix": true, "reasoning": "r"}"#)
                .cannot_fix
        );
    }

    #[test]
    fn json_inside_prose_or_a_fence() {
        let v = parse_verdict(
            "Here is my verdict:\n```json\n{\"is_complete\": false, \"reasoning\": \"the plot is missing\", \"next_action\": \"draw it\"}\n```\nThanks!",
        );
        assert!(!v.is_complete && v.parsed);
        assert_eq!(v.next_action, "draw it");
    }

    #[test]
    fn braces_inside_strings_and_nested_objects() {
        let v = parse_verdict(
            r#"{"is_complete": "yes", "reasoning": "a {b} c", "next_action": {"step": 1}}"#,
        );
        assert!(v.is_complete);
        assert_eq!(v.reasoning, "a {b} c");
        assert_eq!(v.next_action, r#"{"step":1}"#);
    }

    #[test]
    fn skips_json_that_is_not_a_verdict() {
        let v = parse_verdict(r#"{"x": 1} then {"is_complete": false, "reasoning": "r"}"#);
        assert!(!v.is_complete && v.parsed);
        assert_eq!(v.reasoning, "r");
    }

    #[test]
    fn xml_tag_form() {
        let v = parse_verdict(
            "<is_complete>True</is_complete><reasoning>all good</reasoning><next_action></next_action>",
        );
        assert!(v.is_complete && v.parsed);
        assert_eq!(v.reasoning, "all good");
    }

    #[test]
    fn a_python_dict_is_a_verdict_too() {
        let v = parse_verdict(
            "{'is_complete': True, 'cannot_fix': False, 'reasoning': \"it's there\", 'next_action': None, 'answer': 'n is 3'}",
        );
        assert!(v.is_complete && v.parsed, "{v:?}");
        assert_eq!(v.reasoning, "it's there");
        assert_eq!(v.answer, "n is 3");
        assert_eq!(v.next_action, "");
    }

    #[test]
    fn markdown_lines_are_a_verdict_too() {
        let v = parse_verdict(
            "Verdict:\n- **is_complete**: false\n- **reasoning**: the plot is missing\n- **next_action**: draw it",
        );
        assert!(!v.is_complete && v.parsed);
        assert_eq!(v.reasoning, "the plot is missing");
        assert_eq!(v.next_action, "draw it");
        let v = parse_verdict("Is complete: yes\nAnswer: 42 rows.");
        assert!(v.is_complete);
        assert_eq!(v.answer, "42 rows.");
    }

    #[test]
    fn unparseable_answers_are_incomplete_with_the_text_as_reasoning() {
        let v = parse_verdict("I think it is probably fine {not json");
        assert!(!v.is_complete && !v.parsed);
        assert_eq!(v.reasoning, "I think it is probably fine {not json");
    }
}
