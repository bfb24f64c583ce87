//! The OpenAI-compatible chat completions format (OpenAI, Ollama, vLLM,
//! llama.cpp server, LM Studio): the request body, and the `data:` chunks
//! of its SSE stream, ending with `[DONE]`. Usage arrives in a last chunk
//! with no choices when `stream_options.include_usage` is set; servers that
//! never send it leave the usage unknown, which is not an error. Asked
//! for, each token's likeliest choices come with it (`logprobs`).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Value, json};

use super::sse::SseEvent;
use super::{ChatEvent, ChatRequest, LlmError, TokenChoices, Usage};

const PROVIDER: &str = "OpenAI-compatible server";

/// How the answer's length is limited: OpenAI's own API takes
/// `max_completion_tokens` (its reasoning models refuse `max_tokens`); the
/// servers that copy its format know `max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenLimit {
    MaxTokens,
    MaxCompletionTokens,
}

impl TokenLimit {
    /// The field OpenAI-compatible servers at `base_url` take.
    pub fn for_server(base_url: &str) -> Self {
        if is_openai_platform(base_url) {
            Self::MaxCompletionTokens
        } else {
            Self::MaxTokens
        }
    }

    fn field(self) -> &'static str {
        match self {
            Self::MaxTokens => "max_tokens",
            Self::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

/// Whether `base_url` is OpenAI's own API.
pub fn is_openai_platform(base_url: &str) -> bool {
    base_url.starts_with("https://api.openai.com")
}

/// Whether OpenAI's model `model` takes images: GPT-4o, GPT-4.1, GPT-5,
/// GPT-4 Turbo, o1, o3 and o4-mini do; o1-mini and o3-mini do not.
pub fn takes_images(model: &str) -> bool {
    const TEXT_ONLY: [&str; 2] = ["o1-mini", "o3-mini"];
    const SEEING: [&str; 8] = [
        "gpt-4o",
        "chatgpt-4o",
        "gpt-4.1",
        "gpt-5",
        "gpt-4-turbo",
        "o1",
        "o3",
        "o4-mini",
    ];
    !TEXT_ONLY.iter().any(|m| model.starts_with(m)) && SEEING.iter().any(|m| model.starts_with(m))
}

/// How many of each token's likeliest choices are asked for, when any are.
const TOP_CHOICES: u32 = 5;

/// The JSON body of a streaming `POST {base}/chat/completions`.
pub fn request_body(request: &ChatRequest, limit: TokenLimit) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(json!({ "role": "system", "content": request.system }));
    }
    for message in &request.messages {
        if message.images.is_empty() {
            messages.push(json!({ "role": message.role, "content": message.content }));
            continue;
        }
        // Figures go as data URLs after the text (the vision models' form).
        let mut parts = vec![json!({ "type": "text", "text": message.content })];
        parts.extend(message.images.iter().map(|png| {
            json!({ "type": "image_url", "image_url": { "url": format!("data:image/png;base64,{png}") } })
        }));
        messages.push(json!({ "role": message.role, "content": parts }));
    }
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    body[limit.field()] = json!(request.max_tokens);
    if let Some(temperature) = request.sampling.temperature {
        body["temperature"] = json!(temperature);
    }
    if let Some(seed) = request.sampling.seed {
        body["seed"] = json!(seed);
    }
    // OpenAI's own reasoning models refuse `stop`; the answer is cut at the
    // same text when it is read.
    if !request.stop.is_empty() && limit == TokenLimit::MaxTokens {
        body["stop"] = json!(request.stop);
    }
    if request.token_choices {
        body["logprobs"] = json!(true);
        body["top_logprobs"] = json!(TOP_CHOICES);
    }
    if let Some(schema) = &request.schema {
        // Not `strict`: OpenAI's strict mode refuses optional fields, and
        // llama.cpp turns any schema into a grammar regardless.
        body["response_format"] = json!({
            "type": "json_schema",
            "json_schema": { "name": schema.name, "schema": schema.schema },
        });
    }
    body
}

/// The parts of a stream chunk that matter, read without building a JSON tree
/// (a fast local model sends thousands of these a second); text is borrowed
/// from the event unless it has escapes.
#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Option<ChunkUsage>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    logprobs: Option<Logprobs<'a>>,
}

/// The tokens of a chunk with their likeliest choices (`logprobs.content`).
#[derive(Deserialize)]
struct Logprobs<'a> {
    #[serde(default, borrow)]
    content: Option<Vec<TokenLogprob<'a>>>,
}

#[derive(Deserialize)]
struct TokenLogprob<'a> {
    #[serde(borrow)]
    token: Cow<'a, str>,
    #[serde(default, borrow)]
    top_logprobs: Vec<TopLogprob<'a>>,
}

/// One choice; a log-probability of minus infinity comes as `null`.
#[derive(Deserialize)]
struct TopLogprob<'a> {
    #[serde(borrow)]
    token: Cow<'a, str>,
    #[serde(default)]
    logprob: Option<f32>,
}

impl TokenLogprob<'_> {
    fn choices(self) -> TokenChoices {
        TokenChoices {
            token: self.token.into_owned(),
            choices: self
                .top_logprobs
                .into_iter()
                .map(|c| (c.token.into_owned(), c.logprob.unwrap_or(f32::NEG_INFINITY)))
                .collect(),
        }
    }
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ChunkUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

/// OpenAI's count of the prompt tokens read from its cache.
#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: u64,
}

/// Translates one SSE event of the stream.
pub fn parse_event(event: &SseEvent) -> Vec<ChatEvent> {
    let data = event.data.trim();
    if data == "[DONE]" {
        return vec![ChatEvent::Done];
    }
    // The common case, typed; errors and odd shapes go the general way.
    if let Ok(chunk) = serde_json::from_str::<Chunk>(data)
        && chunk.error.is_none()
    {
        let mut events = Vec::new();
        for choice in chunk.choices.unwrap_or_default() {
            if let Some(text) = choice.delta.and_then(|d| d.content)
                && !text.is_empty()
            {
                events.push(ChatEvent::Text(text.into_owned()));
            }
            if let Some(tokens) = choice.logprobs.and_then(|l| l.content)
                && !tokens.is_empty()
            {
                let choices = tokens.into_iter().map(TokenLogprob::choices).collect();
                events.push(ChatEvent::TokenChoices(choices));
            }
            if let Some(reason) = choice.finish_reason {
                if reason == "length" {
                    events.push(ChatEvent::Truncated);
                }
                events.push(ChatEvent::Finished);
            }
        }
        if let Some(usage) = chunk.usage {
            events.push(ChatEvent::Usage(Usage {
                input_tokens: usage.prompt_tokens,
                output_tokens: usage.completion_tokens,
                cache_read_tokens: usage.prompt_tokens_details.map_or(0, |d| d.cached_tokens),
                ..Usage::default()
            }));
        }
        return events;
    }
    let chunk: Value = match serde_json::from_str(data) {
        Ok(chunk) => chunk,
        Err(e) => {
            return vec![ChatEvent::Error(LlmError::Malformed {
                provider: PROVIDER,
                message: format!("{e} in {}", truncate(data)),
            })];
        }
    };
    if let Some(error) = chunk.get("error") {
        return vec![ChatEvent::Error(error_from_body(error))];
    }
    let mut events = Vec::new();
    if let Some(choices) = chunk.get("choices").and_then(Value::as_array) {
        for choice in choices {
            if let Some(text) = choice.pointer("/delta/content").and_then(Value::as_str)
                && !text.is_empty()
            {
                events.push(ChatEvent::Text(text.to_owned()));
            }
            if let Some(reason) = choice.get("finish_reason").filter(|r| !r.is_null()) {
                if reason == "length" {
                    events.push(ChatEvent::Truncated);
                }
                events.push(ChatEvent::Finished);
            }
        }
    }
    if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
        events.push(ChatEvent::Usage(Usage {
            input_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
            output_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
            cache_read_tokens: usage
                .pointer("/prompt_tokens_details/cached_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            ..Usage::default()
        }));
    }
    events
}

/// The error for a non-2xx response with this status and body.
pub fn http_error(status: u16, body: &str) -> LlmError {
    let parsed = serde_json::from_str::<Value>(body).ok();
    let field = |pointer: &str| {
        parsed
            .as_ref()
            .and_then(|v| v.pointer(pointer).and_then(Value::as_str))
            .map(str::to_owned)
    };
    let message = field("/error/message").unwrap_or_else(|| truncate(body));
    // A quota used up is a 429 too, but waiting does not refill it.
    let quota = field("/error/code")
        .or_else(|| field("/error/type"))
        .as_deref()
        == Some("insufficient_quota");
    match status {
        429 if quota => LlmError::Http {
            provider: PROVIDER,
            status,
            message,
        },
        429 | 503 | 529 => LlmError::Overloaded {
            provider: PROVIDER,
            message,
        },
        500 | 502 | 504 => LlmError::ServerError {
            provider: PROVIDER,
            status,
            message,
        },
        _ => LlmError::Http {
            provider: PROVIDER,
            status,
            message,
        },
    }
}

fn error_from_body(error: &Value) -> LlmError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| error.to_string(), str::to_owned);
    LlmError::Failed {
        provider: PROVIDER,
        message,
    }
}

fn truncate(text: &str) -> String {
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod retry_tests {
    use super::*;

    #[test]
    fn server_errors_and_rate_limits_are_retried_but_not_an_exhausted_quota() {
        let quota = r#"{"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}}"#;
        assert!(!http_error(429, quota).is_retryable());
        let limited = r#"{"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}"#;
        assert!(http_error(429, limited).is_retryable());
        for status in [500, 502, 503, 504] {
            assert!(
                http_error(status, "<html>bad gateway</html>").is_retryable(),
                "{status}"
            );
        }
        assert!(!http_error(400, "{}").is_retryable());
        assert!(!http_error(401, "{}").is_retryable());
    }
}

#[cfg(test)]
mod tests {
    use super::super::sse::decode_in_chunks;
    use super::super::{AnswerSchema, ChatMessage};
    use super::*;

    const RECORDED: &str = concat!(
        "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
        "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":24,\"completion_tokens\":2,\"total_tokens\":26}}\n\n",
        "data: [DONE]\n\n",
    );

    fn events(stream: &str, chunk: usize) -> Vec<ChatEvent> {
        decode_in_chunks(stream.as_bytes(), chunk)
            .iter()
            .flat_map(parse_event)
            .collect()
    }

    #[test]
    fn cached_prompt_tokens_are_counted() {
        let stream = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":2000,\"completion_tokens\":9,\"prompt_tokens_details\":{\"cached_tokens\":1536}}}\n\ndata: [DONE]\n\n";
        let usage = events(stream, 13).into_iter().find_map(|e| match e {
            ChatEvent::Usage(usage) => Some(usage),
            _ => None,
        });
        assert_eq!(
            usage,
            Some(Usage {
                input_tokens: 2000,
                output_tokens: 9,
                cache_read_tokens: 1536,
                ..Usage::default()
            })
        );
    }

    #[test]
    fn request_body_has_system_first_and_asks_for_usage() {
        let request = ChatRequest {
            model: "m".into(),
            system: "be brief".into(),
            messages: vec![ChatMessage::user("hi")],
            max_tokens: 100,
            sampling: Default::default(),
            schema: None,
            stop: &[],
            token_choices: false,
        };
        let body = request_body(&request, TokenLimit::MaxTokens);
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "be brief"})
        );
        assert_eq!(
            body["messages"][1],
            json!({"role": "user", "content": "hi"})
        );
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["max_tokens"], 100);
        assert!(body.get("max_completion_tokens").is_none());
    }

    #[test]
    fn figures_go_as_data_urls_after_the_text() {
        let mut report = ChatMessage::user("[output]\n[displayed: figure: ...]");
        report.images = vec!["iVBORw0KGgo=".into()];
        let request = ChatRequest {
            messages: vec![ChatMessage::user("plot it"), report],
            ..ChatRequest::default()
        };
        let body = request_body(&request, TokenLimit::MaxTokens);
        assert_eq!(
            body["messages"][0],
            json!({"role": "user", "content": "plot it"})
        );
        assert_eq!(
            body["messages"][1]["content"],
            json!([
                {"type": "text", "text": "[output]\n[displayed: figure: ...]"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ])
        );
    }

    #[test]
    fn stop_text_goes_to_compatible_servers_but_not_to_openais_own_api() {
        let request = ChatRequest {
            stop: &["\nObservation:"],
            ..ChatRequest::default()
        };
        let body = request_body(&request, TokenLimit::MaxTokens);
        assert_eq!(body["stop"], json!(["\nObservation:"]));
        let body = request_body(&request, TokenLimit::MaxCompletionTokens);
        assert!(body.get("stop").is_none());
        let body = request_body(&ChatRequest::default(), TokenLimit::MaxTokens);
        assert!(body.get("stop").is_none());
    }

    #[test]
    fn an_answer_with_a_schema_asks_for_it_in_response_format() {
        let schema = json!({"type": "object", "properties": {"is_complete": {"type": "boolean"}}});
        let request = ChatRequest {
            messages: vec![ChatMessage::user("judge")],
            max_tokens: 100,
            schema: Some(AnswerSchema {
                name: "verdict",
                description: "whether the request is done",
                schema: schema.clone(),
            }),
            ..ChatRequest::default()
        };
        let body = request_body(&request, TokenLimit::MaxTokens);
        assert_eq!(
            body["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema}})
        );
        let free_text = ChatRequest {
            schema: None,
            ..request
        };
        assert!(
            request_body(&free_text, TokenLimit::MaxTokens)
                .get("response_format")
                .is_none()
        );
    }

    #[test]
    fn openais_own_api_gets_max_completion_tokens() {
        let request = ChatRequest {
            model: "o3".into(),
            system: String::new(),
            messages: vec![ChatMessage::user("hi")],
            max_tokens: 100,
            sampling: Default::default(),
            schema: None,
            stop: &[],
            token_choices: false,
        };
        let limit = TokenLimit::for_server("https://api.openai.com/v1");
        let body = request_body(&request, limit);
        assert_eq!(body["max_completion_tokens"], 100);
        assert!(body.get("max_tokens").is_none());
        assert_eq!(
            TokenLimit::for_server("http://127.0.0.1:11434/v1"),
            TokenLimit::MaxTokens
        );
    }

    #[test]
    fn token_choices_are_asked_for_and_read_from_the_chunks() {
        let request = ChatRequest {
            token_choices: true,
            ..Default::default()
        };
        let body = request_body(&request, TokenLimit::MaxTokens);
        assert_eq!(
            (body["logprobs"].clone(), body["top_logprobs"].clone()),
            (json!(true), json!(5))
        );
        let plain = request_body(&ChatRequest::default(), TokenLimit::MaxTokens);
        assert!(plain.get("logprobs").is_none(), "{plain}");
        // As the local model's llama.cpp server sends them (one token a
        // chunk; `bytes` and `id` unread; minus infinity as null).
        let stream = concat!(
            "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\" true\"},",
            "\"logprobs\":{\"content\":[{\"id\":830,\"token\":\" true\",\"bytes\":[32,116,114,117,101],",
            "\"logprob\":-0.09,\"top_logprobs\":[{\"id\":830,\"token\":\" true\",\"bytes\":[32],\"logprob\":-0.09},",
            "{\"id\":895,\"token\":\" false\",\"bytes\":[32],\"logprob\":-2.5},",
            "{\"id\":1,\"token\":\"\\\"\",\"bytes\":[34],\"logprob\":null}]}]}}],",
            "\"object\":\"chat.completion.chunk\"}\n\n",
            "data: [DONE]\n\n",
        );
        let expected = vec![
            ChatEvent::Text(" true".into()),
            ChatEvent::TokenChoices(vec![TokenChoices {
                token: " true".into(),
                choices: vec![
                    (" true".into(), -0.09),
                    (" false".into(), -2.5),
                    ("\"".into(), f32::NEG_INFINITY),
                ],
            }]),
            ChatEvent::Done,
        ];
        assert_eq!(events(stream, 9), expected);
    }

    #[test]
    fn recorded_stream_in_any_chunking() {
        let expected = vec![
            ChatEvent::Text("Hel".into()),
            ChatEvent::Text("lo".into()),
            ChatEvent::Finished,
            ChatEvent::Usage(Usage {
                input_tokens: 24,
                output_tokens: 2,
                cost_usd: None,
                ..Default::default()
            }),
            ChatEvent::Done,
        ];
        for chunk in [1, 7, 64, RECORDED.len()] {
            assert_eq!(events(RECORDED, chunk), expected, "chunks of {chunk}");
        }
    }

    #[test]
    fn escaped_text_odd_shapes_and_nulls() {
        let stream = concat!(
            "data: {\"choices\":[{\"delta\":{\"content\":\"a\\n\\\"b\\\" \\u00e9\"}}]}\n\n",
            "data: {\"choices\":null,\"usage\":null}\n\n",
            "data: {\"choices\":[{\"delta\":null,\"finish_reason\":null}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":[1]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\n",
        );
        // `length`: the answer was cut off at the limit.
        assert_eq!(
            events(stream, 3),
            [
                ChatEvent::Text("a\n\"b\" é".into()),
                ChatEvent::Truncated,
                ChatEvent::Finished
            ]
        );
    }

    #[test]
    fn errors_in_the_stream_and_over_http() {
        let got = events("data: {\"error\":{\"message\":\"model crashed\"}}\n\n", 5);
        assert!(
            matches!(&got[..], [ChatEvent::Error(LlmError::Failed { message, .. })] if message == "model crashed")
        );
        let got = events("data: {not json\n\n", 5);
        assert!(matches!(
            &got[..],
            [ChatEvent::Error(LlmError::Malformed { .. })]
        ));
        assert!(http_error(429, "{\"error\":{\"message\":\"slow down\"}}").is_retryable());
        let err = http_error(401, "{\"error\":{\"message\":\"bad key\"}}");
        assert_eq!(
            err.to_string(),
            "OpenAI-compatible server returned HTTP 401: bad key"
        );
    }
}
