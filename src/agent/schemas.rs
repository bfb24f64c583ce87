//! The JSON schemas of the answers the kernel reads rather than shows: the
//! review's verdict, the analyst's plan, the triage's classification and
//! plan. Each says in types what its prompt says in words; a provider that
//! enforces it (a llama.cpp grammar, OpenAI's `response_format`, Anthropic's
//! forced tool call) leaves a small model no room to wander off into prose,
//! and the lenient parsers still read whatever comes back.
//!
//! Closed objects (`additionalProperties: false`) with every field required
//! where the prompt asks for it, in the prompt's order: a grammar writes the
//! fields in that order, so the reasoning comes before the decision.

use serde_json::{Value, json};

use super::llm::AnswerSchema;

/// The longest reasoning a judgement may write: without a limit a small
/// model can loop inside the string until it runs out of tokens.
const REASONING_CHARS: u32 = 300;
/// The longest answer text (a review's short answer, a planned task).
const ANSWER_CHARS: u32 = 800;

fn short_text() -> Value {
    json!({ "type": "string", "maxLength": REASONING_CHARS })
}

fn text() -> Value {
    json!({ "type": "string", "maxLength": ANSWER_CHARS })
}

/// An object with `fields`, all required, in order.
fn object(fields: &[(&str, Value)]) -> Value {
    let properties: serde_json::Map<String, Value> = fields
        .iter()
        .map(|(name, schema)| ((*name).to_owned(), schema.clone()))
        .collect();
    let required: Vec<&str> = fields.iter().map(|(name, _)| *name).collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// The review's verdict (see `prompts/reflect.md`).
pub fn verdict() -> AnswerSchema {
    AnswerSchema {
        name: "verdict",
        description: "Whether the request is done, and if not, what to do next.",
        schema: object(&[
            ("reasoning", short_text()),
            (DONE_FIELD, json!({ "type": "boolean" })),
            ("cannot_fix", json!({ "type": "boolean" })),
            ("next_action", short_text()),
            ("answer", text()),
        ]),
    }
}

/// The field of a verdict that says "done".
pub const DONE_FIELD: &str = "is_complete";

/// A verdict alone, `{"is_complete": true}`: what a "done" is weighed by
/// ([`crate::agent::graphs::NodeSettings::likelihood_done`]).
pub fn verdict_alone() -> AnswerSchema {
    AnswerSchema {
        name: "verdict",
        description: "Whether the request is done.",
        schema: object(&[(DONE_FIELD, json!({ "type": "boolean" }))]),
    }
}

/// The form a named value must have (see `prompts/expected_form.md`).
pub fn expected_form() -> AnswerSchema {
    AnswerSchema {
        name: "expected_form",
        description: "What the variable the request names must hold once it is done.",
        schema: object(&[
            (
                "form",
                json!({ "type": "string", "enum": crate::agent::parse::form::FORM_NAMES }),
            ),
            (
                "shape",
                json!({ "type": "array", "items": { "type": "integer", "minimum": 0 }, "maxItems": 4 }),
            ),
        ]),
    }
}

/// The keys a dict the request names must have (see
/// `prompts/dict_keys.md`).
pub fn dict_keys() -> AnswerSchema {
    AnswerSchema {
        name: "dict_keys",
        description: "The keys the request writes out for the dict it names.",
        schema: object(&[(
            "keys",
            json!({ "type": "array", "items": { "type": "string", "maxLength": 60 }, "maxItems": 12 }),
        )]),
    }
}

/// The analyst's plan (see `prompts/plan.md`).
pub fn analyst_plan() -> AnswerSchema {
    AnswerSchema {
        name: "plan",
        description: "Whether the request needs code run, its results examined, and an explanation.",
        schema: object(&[
            ("needs_code", json!({ "type": "boolean" })),
            ("needs_evaluation", json!({ "type": "boolean" })),
            ("needs_explanation", json!({ "type": "boolean" })),
            ("reasoning", short_text()),
        ]),
    }
}

/// The triage's classification among `agents` (their names).
pub fn triage_classification(agents: &[&str]) -> AnswerSchema {
    AnswerSchema {
        name: "classification",
        description: "The agent that suits the request best, and how sure that is.",
        schema: object(&[
            ("agent", json!({ "type": "string", "enum": agents })),
            (
                "confidence",
                json!({ "type": "number", "minimum": 0, "maximum": 1 }),
            ),
        ]),
    }
}

/// The triage's plan: delegate to one of `agents`, call one of `tools`, or
/// respond; each choice with only its own fields (a model made to fill the
/// others too writes its reply twice). An object at the top, as Anthropic's
/// tool input must be.
pub fn triage_plan(agents: &[&str], tools: &[&str]) -> AnswerSchema {
    let choice = |action: &str, fields: &[(&str, Value)]| {
        let mut all = vec![
            ("action", json!({ "const": action })),
            ("reasoning", short_text()),
        ];
        all.extend(fields.iter().cloned());
        object(&all)
    };
    AnswerSchema {
        name: "triage_plan",
        description: "How to handle the request: hand it to an agent, call tools, reply, or stop.",
        schema: json!({
            "type": "object",
            "anyOf": [
                choice("delegate", &[
                    ("agent", json!({ "type": "string", "enum": agents })),
                    ("task", text()),
                ]),
                choice("tool", &[
                    ("tool", json!({ "type": "string", "enum": tools })),
                    ("input", text()),
                ]),
                choice("tools", &[(
                    "tool_calls",
                    json!({
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 5,
                        "items": object(&[
                            ("tool", json!({ "type": "string", "enum": tools })),
                            ("input", text()),
                        ]),
                    }),
                )]),
                choice("respond", &[("response", text())]),
                choice("done", &[("response", text())]),
            ],
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_closed_and_keep_their_fields_in_order() {
        let schema = verdict().schema;
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(
            schema["required"],
            json!([
                "reasoning",
                "is_complete",
                "cannot_fix",
                "next_action",
                "answer"
            ])
        );
        let names: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(
            names,
            [
                "reasoning",
                "is_complete",
                "cannot_fix",
                "next_action",
                "answer"
            ]
        );
    }

    #[test]
    fn choices_are_enums_of_what_exists() {
        let classification = triage_classification(&["default", "analyst"]).schema;
        assert_eq!(
            classification["properties"]["agent"]["enum"],
            json!(["default", "analyst"])
        );
        let plan = triage_plan(&["default"], &["describe", "grep"]).schema;
        let tool = &plan["anyOf"][1];
        assert_eq!(tool["properties"]["action"]["const"], "tool");
        assert_eq!(
            tool["properties"]["tool"]["enum"],
            json!(["describe", "grep"])
        );
        assert_eq!(
            tool["required"],
            json!(["action", "reasoning", "tool", "input"])
        );
    }

    #[test]
    fn names_are_identifiers() {
        for schema in [
            verdict(),
            analyst_plan(),
            triage_classification(&["default"]),
            triage_plan(&["default"], &["peek"]),
        ] {
            assert!(
                schema
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{}",
                schema.name
            );
        }
    }
}
