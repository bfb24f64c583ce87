//! The Anthropic Messages API format: the request body, and the named SSE
//! events of its stream (`message_start`, `content_block_delta`,
//! `message_delta`, `message_stop`, `ping`, `error`). Usage in
//! `message_delta` is cumulative; unknown events are ignored, as the API's
//! documentation asks.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Value, json};

use super::sse::SseEvent;
use super::{ChatEvent, ChatRequest, LlmError, Usage};

const PROVIDER: &str = "Anthropic";

/// The API version header value this translator speaks.
pub const API_VERSION: &str = "2023-06-01";

/// The JSON body of a streaming `POST {base}/v1/messages`.
pub fn request_body(request: &ChatRequest) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|message| {
            if message.images.is_empty() {
                return json!({ "role": message.role, "content": message.content });
            }
            // Figures as base64 image blocks, before the text about them.
            let mut parts: Vec<Value> = message
                .images
                .iter()
                .map(|png| {
                    json!({
                        "type": "image",
                        "source": { "type": "base64", "media_type": "image/png", "data": png },
                    })
                })
                .collect();
            parts.push(json!({ "type": "text", "text": message.content }));
            json!({ "role": message.role, "content": parts })
        })
        .collect();
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": messages,
        "stream": true,
    });
    if !request.system.is_empty() {
        // A cache breakpoint after the system prompt, which stays the same
        // for every call of a run (the run keeps the namespace it began
        // with): later calls read it from Anthropic's prompt cache.
        body["system"] = json!([{
            "type": "text",
            "text": request.system,
            "cache_control": { "type": "ephemeral" },
        }]);
    }
    if !request.stop.is_empty() {
        body["stop_sequences"] = json!(request.stop);
    }
    // The Messages API takes a temperature but no seed.
    if let Some(temperature) = request.sampling.temperature {
        body["temperature"] = json!(temperature);
    }
    // A schema that is a choice at its root (the triage's plan) is refused
    // as a tool's input, with a 400 that would cost every later request of
    // the session its schema: such a request is asked in words only.
    if let Some(schema) = request.schema.as_ref().filter(|s| takes_as_tool(&s.schema)) {
        // Structured output on this API is a tool the model must call: its
        // input, streamed as `input_json_delta` pieces, is the answer.
        body["tools"] = json!([{
            "name": schema.name,
            "description": schema.description,
            "input_schema": schema.schema,
        }]);
        body["tool_choice"] = json!({ "type": "tool", "name": schema.name });
    }
    body
}

/// Whether the API takes `schema` as a tool's input: an object, with no
/// `anyOf`, `oneOf` or `allOf` at its root.
fn takes_as_tool(schema: &Value) -> bool {
    schema["type"] == "object"
        && ["anyOf", "oneOf", "allOf"]
            .iter()
            .all(|choice| schema.get(choice).is_none())
}

/// Follows one stream, remembering the input token count from
/// `message_start` so each usage event carries both counts.
#[derive(Debug, Default)]
pub struct StreamState {
    input_tokens: u64,
    cache_read_tokens: u64,
    cache_write_tokens: u64,
}

/// A `content_block_delta` event, the one that comes once per token: read
/// into borrowed fields rather than a JSON tree.
#[derive(Deserialize)]
struct BlockDelta<'a> {
    #[serde(borrow)]
    delta: TextDelta<'a>,
}

#[derive(Deserialize)]
struct TextDelta<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    /// A piece of a tool call's input (`input_json_delta`): the answer to a
    /// request with a schema.
    #[serde(default, borrow)]
    partial_json: Option<Cow<'a, str>>,
}

impl TextDelta<'_> {
    /// The answer's text this delta adds, if any.
    fn answer_text(self) -> Option<String> {
        let text = match self.kind.as_ref() {
            "text_delta" => self.text,
            "input_json_delta" => self.partial_json,
            _ => None,
        }?;
        (!text.is_empty()).then(|| text.into_owned())
    }
}

impl StreamState {
    /// Translates one SSE event of the stream.
    pub fn parse_event(&mut self, event: &SseEvent) -> Vec<ChatEvent> {
        if event.event == "content_block_delta"
            && let Ok(block) = serde_json::from_str::<BlockDelta>(&event.data)
        {
            return block
                .delta
                .answer_text()
                .map(ChatEvent::Text)
                .into_iter()
                .collect();
        }
        let data: Value = match serde_json::from_str(&event.data) {
            Ok(data) => data,
            Err(e) => {
                return vec![ChatEvent::Error(LlmError::Malformed {
                    provider: PROVIDER,
                    message: e.to_string(),
                })];
            }
        };
        let kind = if event.event.is_empty() {
            data["type"].as_str().unwrap_or_default()
        } else {
            event.event.as_str()
        };
        match kind {
            "message_start" => {
                let usage = &data["message"]["usage"];
                self.cache_write_tokens =
                    usage["cache_creation_input_tokens"].as_u64().unwrap_or(0);
                self.cache_read_tokens = usage["cache_read_input_tokens"].as_u64().unwrap_or(0);
                self.input_tokens = usage["input_tokens"].as_u64().unwrap_or(0)
                    + self.cache_write_tokens
                    + self.cache_read_tokens;
                vec![]
            }
            "content_block_delta" => {
                let delta = &data["delta"];
                let text = match delta["type"].as_str() {
                    Some("text_delta") => delta["text"].as_str(),
                    Some("input_json_delta") => delta["partial_json"].as_str(),
                    _ => None,
                };
                text.filter(|text| !text.is_empty())
                    .map(|text| ChatEvent::Text(text.to_owned()))
                    .into_iter()
                    .collect()
            }
            "message_delta" => {
                let mut events = vec![ChatEvent::Usage(Usage {
                    input_tokens: self.input_tokens,
                    output_tokens: data["usage"]["output_tokens"].as_u64().unwrap_or(0),
                    cache_read_tokens: self.cache_read_tokens,
                    cache_write_tokens: self.cache_write_tokens,
                    cost_usd: None,
                })];
                if data["delta"]["stop_reason"] == "max_tokens" {
                    events.push(ChatEvent::Truncated);
                }
                events
            }
            "message_stop" => vec![ChatEvent::Done],
            "error" => vec![ChatEvent::Error(error_from(&data["error"], None))],
            _ => vec![], // ping, content_block_start/stop, and future events
        }
    }
}

/// The error for a non-2xx response with this status and body.
pub fn http_error(status: u16, body: &str) -> LlmError {
    match serde_json::from_str::<Value>(body) {
        Ok(value) if value["error"].is_object() => error_from(&value["error"], Some(status)),
        // A proxy or load balancer in front of the API answers in its own
        // words; the status alone says whether to try again.
        _ if matches!(status, 500 | 502 | 504) => LlmError::ServerError {
            provider: PROVIDER,
            status,
            message: body.chars().take(300).collect(),
        },
        _ if matches!(status, 429 | 503 | 529) => LlmError::Overloaded {
            provider: PROVIDER,
            message: format!(
                "HTTP {status}: {}",
                body.chars().take(300).collect::<String>()
            ),
        },
        _ => LlmError::Http {
            provider: PROVIDER,
            status,
            message: body.chars().take(300).collect(),
        },
    }
}

fn error_from(error: &Value, status: Option<u16>) -> LlmError {
    let kind = error["type"].as_str().unwrap_or("error");
    let message = format!(
        "{kind}: {}",
        error["message"].as_str().unwrap_or("(no message)")
    );
    match (kind, status) {
        ("overloaded_error" | "rate_limit_error", _) | (_, Some(429 | 529)) => {
            LlmError::Overloaded {
                provider: PROVIDER,
                message,
            }
        }
        ("api_error", Some(status)) | (_, Some(status @ (500 | 502 | 504))) => {
            LlmError::ServerError {
                provider: PROVIDER,
                status,
                message,
            }
        }
        (_, Some(status)) => LlmError::Http {
            provider: PROVIDER,
            status,
            message,
        },
        (_, None) => LlmError::Failed {
            provider: PROVIDER,
            message,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::sse::decode_in_chunks;
    use super::super::{AnswerSchema, ChatMessage};
    use super::*;

    const RECORDED: &str = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude\",\"stop_reason\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: ping\ndata: {\"type\":\"ping\"}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hé\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"llo\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n",
        "event: brand_new_event\ndata: {\"type\":\"brand_new_event\"}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );

    fn events(stream: &str, chunk: usize) -> Vec<ChatEvent> {
        let mut state = StreamState::default();
        decode_in_chunks(stream.as_bytes(), chunk)
            .iter()
            .flat_map(|e| state.parse_event(e))
            .collect()
    }

    #[test]
    fn server_errors_are_retried() {
        let api_error = r#"{"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}"#;
        assert!(http_error(500, api_error).is_retryable());
        assert!(http_error(502, "<html>bad gateway</html>").is_retryable());
        let invalid =
            r#"{"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}"#;
        assert!(!http_error(400, invalid).is_retryable());
    }

    #[test]
    fn an_answer_stopped_at_max_tokens_is_marked_cut_off() {
        let stream = concat!(
            "event: message_delta\n",
            "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":50}}\n\n",
        );
        let found = events(stream, 7);
        assert_eq!(found.last(), Some(&ChatEvent::Truncated));
        assert!(!events(RECORDED, 7).contains(&ChatEvent::Truncated));
    }

    #[test]
    fn figures_go_as_base64_image_blocks_before_the_text() {
        let mut report = ChatMessage::user("[output]");
        report.images = vec!["iVBORw0KGgo=".into()];
        let body = request_body(&ChatRequest {
            messages: vec![report],
            ..ChatRequest::default()
        });
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                {"type": "text", "text": "[output]"},
            ]}])
        );
    }

    #[test]
    fn prompt_cache_reads_and_writes_are_counted_apart() {
        let stream = concat!(
            "event: message_start\n",
            "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"cache_creation_input_tokens\":200,\"cache_read_input_tokens\":3000,\"output_tokens\":1}}}\n\n",
            "event: message_delta\n",
            "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":5}}\n\n",
        );
        assert_eq!(
            events(stream, 11)[0],
            ChatEvent::Usage(Usage {
                input_tokens: 3210,
                output_tokens: 5,
                cache_read_tokens: 3000,
                cache_write_tokens: 200,
                cost_usd: None,
            })
        );
    }

    #[test]
    fn deltas_with_escapes_other_kinds_and_odd_shapes() {
        let stream = concat!(
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\\n\\\"b\\\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"no type\"}}\n\n",
        );
        assert_eq!(events(stream, 5), [ChatEvent::Text("a\n\"b\"".into())]);
    }

    #[test]
    fn request_body_puts_the_system_prompt_at_top_level() {
        let body = request_body(&ChatRequest {
            model: "claude".into(),
            system: "be brief".into(),
            messages: vec![ChatMessage::user("hi")],
            max_tokens: 50,
            sampling: super::super::Sampling {
                temperature: Some(0.0),
                seed: Some(7),
            },
            schema: None,
            stop: &[],
            token_choices: false,
        });
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
        assert!(body.get("stop_sequences").is_none());
        let stopping = request_body(&ChatRequest {
            stop: &["\nObservation:"],
            ..ChatRequest::default()
        });
        assert_eq!(stopping["stop_sequences"], json!(["\nObservation:"]));
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}])
        );
        assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
        assert_eq!(body["stream"], true);
        // A temperature, but the Messages API has no seed.
        assert_eq!(body["temperature"], 0.0);
        assert!(body.get("seed").is_none());
    }

    #[test]
    fn recorded_stream_in_any_chunking() {
        let expected = vec![
            ChatEvent::Text("Hé".into()),
            ChatEvent::Text("llo".into()),
            ChatEvent::Usage(Usage {
                input_tokens: 25,
                output_tokens: 15,
                cost_usd: None,
                ..Default::default()
            }),
            ChatEvent::Done,
        ];
        for chunk in [1, 3, 50, RECORDED.len()] {
            assert_eq!(events(RECORDED, chunk), expected, "chunks of {chunk}");
        }
    }

    #[test]
    fn overloaded_errors_are_retryable() {
        let got = events(
            "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
            4,
        );
        assert!(matches!(&got[..], [ChatEvent::Error(e)] if e.is_retryable()));
        let body = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_1"}"#;
        let err = http_error(401, body);
        assert!(!err.is_retryable());
        assert_eq!(
            err.to_string(),
            "Anthropic returned HTTP 401: authentication_error: invalid x-api-key"
        );
        assert!(
            http_error(
                529,
                r#"{"error":{"type":"overloaded_error","message":"busy"}}"#
            )
            .is_retryable()
        );
        // A proxy's own page: the status decides.
        assert!(http_error(529, "<html>busy</html>").is_retryable());
        assert!(http_error(429, "slow down").is_retryable());
        assert!(!http_error(404, "<html>not found</html>").is_retryable());
    }

    fn verdict_schema() -> AnswerSchema {
        AnswerSchema {
            name: "verdict",
            description: "whether the request is done",
            schema: json!({"type": "object", "properties": {"is_complete": {"type": "boolean"}}}),
        }
    }

    #[test]
    fn an_answer_with_a_schema_is_a_forced_tool_call() {
        let body = request_body(&ChatRequest {
            model: "claude".into(),
            messages: vec![ChatMessage::user("judge")],
            max_tokens: 50,
            schema: Some(verdict_schema()),
            stop: &[],
            ..ChatRequest::default()
        });
        assert_eq!(
            body["tools"],
            json!([{
                "name": "verdict",
                "description": "whether the request is done",
                "input_schema": {"type": "object", "properties": {"is_complete": {"type": "boolean"}}},
            }])
        );
        assert_eq!(
            body["tool_choice"],
            json!({"type": "tool", "name": "verdict"})
        );
    }

    #[test]
    fn a_schema_that_is_a_choice_at_its_root_is_asked_in_words_only() {
        let plan = crate::agent::schemas::triage_plan(&["default"], &["peek"]);
        assert!(plan.schema.get("anyOf").is_some());
        let body = request_body(&ChatRequest {
            model: "claude".into(),
            messages: vec![ChatMessage::user("hi")],
            max_tokens: 50,
            schema: Some(plan),
            ..ChatRequest::default()
        });
        assert!(body.get("tools").is_none(), "{body}");
        assert!(body.get("tool_choice").is_none(), "{body}");
        // Every other schema the kernel asks for is an object the API takes.
        let classification = crate::agent::schemas::triage_classification(&["default"]);
        for schema in [
            crate::agent::schemas::verdict(),
            crate::agent::schemas::verdict_alone(),
            crate::agent::schemas::expected_form(),
            crate::agent::schemas::analyst_plan(),
            classification,
        ] {
            assert!(takes_as_tool(&schema.schema), "{}", schema.name);
        }
    }

    /// A forced tool call's stream, in the API's own form: the tool's input
    /// comes in `input_json_delta` pieces (the first one empty), and the
    /// message stops for `tool_use`.
    const RECORDED_TOOL_USE: &str = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_2\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude\",\"stop_reason\":null,\"usage\":{\"input_tokens\":310,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"verdict\",\"input\":{}}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"is_complete\\\": tr\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"ue}\"}}\n\n",
        "event: content_block_stop\n",
        "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":12}}\n\n",
        "event: message_stop\n",
        "data: {\"type\":\"message_stop\"}\n\n",
    );

    #[test]
    fn a_tool_calls_input_is_the_answer_text() {
        for chunk in [1, 9, 4096] {
            let found = events(RECORDED_TOOL_USE, chunk);
            let text: String = found
                .iter()
                .filter_map(|event| match event {
                    ChatEvent::Text(text) => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(text, r#"{"is_complete": true}"#, "chunk {chunk}");
            assert!(found.contains(&ChatEvent::Usage(Usage {
                input_tokens: 310,
                output_tokens: 12,
                cost_usd: None,
                ..Default::default()
            })));
            assert_eq!(found.last(), Some(&ChatEvent::Done));
            assert!(!found.contains(&ChatEvent::Truncated));
        }
    }
}
