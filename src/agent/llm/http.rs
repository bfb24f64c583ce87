//! Streaming model calls over HTTP: the Anthropic Messages API and
//! OpenAI-compatible chat completions, through one client with connect and
//! idle timeouts, and bounded retries with backoff when the provider is
//! overloaded (only before any text has arrived, so nothing is shown twice).
//!
//! Dropping the future of [`HttpProvider::chat`] drops the response, which
//! closes the connection: that is how an interrupt stops a stream.

use std::time::Duration;

use super::sse::SseDecoder;
use super::{ChatEvent, ChatRequest, LlmError, Usage, anthropic, openai};
use crate::agent::ChatOutcome;

/// How long to wait for a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stream may stay silent before it counts as failed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Attempts for a call the provider refuses as overloaded or rate-limited.
const ATTEMPTS: u32 = 3;

/// Which wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireFormat {
    Anthropic,
    OpenAi,
}

/// An API key. Never printed: `Debug` shows only whether there is one.
#[derive(Clone, Default)]
pub struct ApiKey(Option<String>);

impl ApiKey {
    pub fn new(key: Option<String>) -> Self {
        Self(key.filter(|k| !k.is_empty()))
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "ApiKey(<set>)"
        } else {
            "ApiKey(<none>)"
        })
    }
}

/// A model behind an HTTP API.
#[derive(Debug, Clone)]
pub struct HttpProvider {
    pub format: WireFormat,
    /// e.g. `https://api.anthropic.com` or `http://127.0.0.1:8089/v1`.
    pub base_url: String,
    pub model: String,
    key: ApiKey,
    client: reqwest::Client,
}

impl HttpProvider {
    pub fn new(
        format: WireFormat,
        base_url: &str,
        model: &str,
        key: ApiKey,
    ) -> Result<Self, LlmError> {
        // The TLS backend needs a process-wide crypto provider; installing it
        // twice is harmless (the second attempt reports it is already set).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| LlmError::Connect {
                provider: name(format),
                message: e.to_string(),
            })?;
        Ok(Self {
            format,
            base_url: base_url.trim_end_matches('/').to_owned(),
            model: model.to_owned(),
            key,
            client,
        })
    }

    pub fn name(&self) -> &'static str {
        name(self.format)
    }

    /// Streams one answer; `on_text` gets each piece of text as it arrives.
    pub async fn chat(
        &self,
        mut request: ChatRequest,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ChatOutcome, LlmError> {
        request.model = self.model.clone();
        let mut delay = Duration::from_secs(1);
        for attempt in 1..=ATTEMPTS {
            let mut shown = false;
            let mut forward = |text: &str| {
                shown = true;
                on_text(text);
            };
            let result = self.attempt(&request, &mut forward).await;
            match result {
                Err(e) if e.is_retryable() && !shown && attempt < ATTEMPTS => {
                    tracing::warn!("{e}; retrying in {delay:?}");
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
                other => return other,
            }
        }
        unreachable!("the last attempt returns")
    }

    async fn attempt(
        &self,
        request: &ChatRequest,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ChatOutcome, LlmError> {
        let provider = self.name();
        let (url, body) = match self.format {
            WireFormat::Anthropic => (
                format!("{}/v1/messages", self.base_url),
                anthropic::request_body(request),
            ),
            WireFormat::OpenAi => (
                format!("{}/chat/completions", self.base_url),
                openai::request_body(request),
            ),
        };
        let mut builder = self
            .client
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        builder = match (self.format, &self.key.0) {
            (WireFormat::Anthropic, Some(key)) => builder
                .header("x-api-key", key)
                .header("anthropic-version", anthropic::API_VERSION),
            (WireFormat::Anthropic, None) => {
                builder.header("anthropic-version", anthropic::API_VERSION)
            }
            (WireFormat::OpenAi, Some(key)) => builder.bearer_auth(key),
            (WireFormat::OpenAi, None) => builder,
        };
        let mut response = builder.send().await.map_err(|e| LlmError::Connect {
            provider,
            message: without_url(&e),
        })?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(match self.format {
                WireFormat::Anthropic => anthropic::http_error(status.as_u16(), &body),
                WireFormat::OpenAi => openai::http_error(status.as_u16(), &body),
            });
        }

        let mut decoder = SseDecoder::default();
        let mut anthropic_state = anthropic::StreamState::default();
        let mut outcome = ChatOutcome::default();
        let mut done = false;
        let mut handle =
            |event: &super::sse::SseEvent, outcome: &mut ChatOutcome| -> Result<bool, LlmError> {
                let events = match self.format {
                    WireFormat::Anthropic => anthropic_state.parse_event(event),
                    WireFormat::OpenAi => openai::parse_event(event),
                };
                let mut finished = false;
                for event in events {
                    match event {
                        ChatEvent::Text(text) => {
                            on_text(&text);
                            outcome.text.push_str(&text);
                        }
                        ChatEvent::Usage(usage) => outcome.usage = usage,
                        ChatEvent::Done => finished = true,
                        ChatEvent::Error(e) => return Err(e),
                    }
                }
                Ok(finished)
            };
        while !done {
            let chunk = tokio::time::timeout(IDLE_TIMEOUT, response.chunk())
                .await
                .map_err(|_| LlmError::Failed {
                    provider,
                    message: format!("no data for {} s", IDLE_TIMEOUT.as_secs()),
                })?
                .map_err(|e| LlmError::Failed {
                    provider,
                    message: without_url(&e),
                })?;
            let Some(chunk): Option<bytes::Bytes> = chunk else {
                break;
            };
            for event in decoder.push(&chunk) {
                done |= handle(&event, &mut outcome)?;
            }
        }
        if !done && let Some(event) = decoder.finish() {
            done |= handle(&event, &mut outcome)?;
        }
        if !done && outcome.text.is_empty() {
            return Err(LlmError::Malformed {
                provider,
                message: "the stream ended without an answer".into(),
            });
        }
        if outcome.usage == Usage::default() {
            tracing::debug!("{provider} reported no usage");
        }
        Ok(outcome)
    }
}

fn name(format: WireFormat) -> &'static str {
    match format {
        WireFormat::Anthropic => "Anthropic",
        WireFormat::OpenAi => "OpenAI-compatible server",
    }
}

/// A transport error's text without the URL (which may carry a key in a
/// query string for some servers).
fn without_url(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    if let Some(url) = error.url() {
        text = text.replace(url.as_str(), "<url>");
    }
    text
}
