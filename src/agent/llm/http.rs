//! Streaming model calls over HTTP: the Anthropic Messages API and
//! OpenAI-compatible chat completions, through one client with connect and
//! idle timeouts, and bounded retries with backoff when the provider is
//! overloaded (only before any text has arrived, so nothing is shown twice).
//!
//! Dropping the future of [`HttpProvider::chat`] drops the response, which
//! closes the connection: that is how an interrupt stops a stream.
//!
//! Between attempts the client waits what the server asks in `retry-after`
//! (or `retry-after-ms`), else 1 s, then 2 s. A server that asks for more
//! than [`MAX_RETRY_AFTER`] gets no retry: the call fails at once rather than
//! keep the cell waiting for an answer that is unlikely to come.
//!
//! A server that refuses a request with an answer schema (HTTP 400 or 422:
//! one that copies OpenAI's format without `response_format`, an older
//! model) gets it again without; when that goes through, no schema is sent
//! to that model again in this process: the prompts ask for the same shape
//! in words.

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use super::sse::{SseDecoder, SseEvent};
use super::{ChatEvent, ChatOutcome, ChatRequest, LlmError, Usage, anthropic, openai};

/// How long to wait for a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stream may stay silent before it counts as failed, by default.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// How many times within the idle timeout a stream is checked for silence.
const IDLE_CHECKS: u32 = 4;
/// Attempts for a call the provider refuses as overloaded or rate-limited.
pub const ATTEMPTS: u32 = 3;
/// The wait before the first retry when the server does not say; doubled after.
const FIRST_RETRY_DELAY: Duration = Duration::from_secs(1);
/// The longest `retry-after` that is waited for.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

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
    /// How long a stream may stay silent before it counts as failed.
    idle_timeout: Duration,
}

/// The models (`base_url model`) whose server refused an answer schema.
static SCHEMA_REFUSED: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Mutex::default);

impl HttpProvider {
    pub fn new(
        format: WireFormat,
        base_url: &str,
        model: &str,
        key: ApiKey,
    ) -> Result<Self, LlmError> {
        let client = shared_client().map_err(|message| LlmError::Connect {
            provider: name(format),
            message,
        })?;
        Ok(Self {
            format,
            base_url: base_url.trim_end_matches('/').to_owned(),
            model: model.to_owned(),
            key,
            client,
            idle_timeout: IDLE_TIMEOUT,
        })
    }

    /// The same provider, failing a stream that stays silent for `idle`
    /// (default two minutes).
    pub fn with_idle_timeout(mut self, idle: Duration) -> Self {
        self.idle_timeout = idle;
        self
    }

    pub fn name(&self) -> &'static str {
        name(self.format)
    }

    /// Streams one answer; `on_text` gets each piece of text as it arrives.
    pub async fn chat(
        &self,
        request: ChatRequest,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ChatOutcome, LlmError> {
        self.chat_telling_retries(request, on_text, &mut |_, _| {})
            .await
    }

    /// Like [`HttpProvider::chat`]; `on_retry` hears why and for how long it
    /// waits before each new attempt, so the user is not left in silence.
    pub async fn chat_telling_retries(
        &self,
        mut request: ChatRequest,
        on_text: &mut (dyn FnMut(&str) + Send),
        on_retry: &mut (dyn FnMut(&LlmError, Duration) + Send),
    ) -> Result<ChatOutcome, LlmError> {
        // A request names its model when it is not the provider's own (the
        // judge model); else the provider's.
        if request.model.is_empty() {
            request.model = self.model.clone();
        }
        if self.schema_refused() {
            request.schema = None;
        }
        let mut delay = FIRST_RETRY_DELAY;
        for attempt in 1..=ATTEMPTS {
            let mut shown = false;
            let mut forward = |text: &str| {
                shown = true;
                on_text(text);
            };
            let mut result = self.attempt(&request, &mut forward).await;
            // A request that could not be sent at all may have met a pooled
            // connection the server closed a moment before (servers drop idle
            // keep-alive connections on their own schedule); send it again at
            // once, on a fresh connection, before counting a failed attempt.
            if let Err(Failure {
                error: LlmError::Connect { .. },
                ..
            }) = &result
            {
                tracing::debug!(
                    "{provider}: the request was not sent; sending it again",
                    provider = self.name()
                );
                result = self.attempt(&request, &mut forward).await;
            }
            if let Err(Failure {
                error:
                    error @ LlmError::Http {
                        status: 400 | 422, ..
                    },
                ..
            }) = &result
                && request.schema.is_some()
            {
                tracing::warn!(
                    "{provider} refused a request with an answer schema ({error}); sending it without",
                    provider = self.name(),
                    error = self.redact(error.clone()),
                );
                request.schema = None;
                result = self.attempt(&request, &mut forward).await;
                // Only a request that goes through without it shows the
                // schema was what the server refused (not, say, the length).
                if result.is_ok() {
                    self.refuse_schemas();
                }
            }
            let failure = match result {
                Ok(outcome) => return Ok(outcome),
                Err(failure) => failure,
            };
            let error = self.redact(failure.error);
            if !error.is_retryable() || shown {
                return Err(error);
            }
            if attempt == ATTEMPTS {
                return Err(with_note(
                    error,
                    &format!("gave up after {ATTEMPTS} attempts"),
                ));
            }
            let wait = match failure.retry_after {
                Some(asked) if asked > MAX_RETRY_AFTER => {
                    let note = format!("the server asks to retry in {} s", asked.as_secs());
                    return Err(with_note(error, &note));
                }
                Some(asked) => asked,
                None => delay,
            };
            tracing::warn!("{error}; attempt {attempt} of {ATTEMPTS}, retrying in {wait:?}");
            on_retry(&error, wait);
            tokio::time::sleep(wait).await;
            delay *= 2;
        }
        unreachable!("the last attempt returns")
    }

    /// Whether this model's server refused an answer schema before.
    fn schema_refused(&self) -> bool {
        let refused = SCHEMA_REFUSED.lock().unwrap_or_else(|e| e.into_inner());
        refused.contains(&format!("{} {}", self.base_url, self.model))
    }

    /// Remembers that this model's server refused an answer schema.
    fn refuse_schemas(&self) {
        let mut refused = SCHEMA_REFUSED.lock().unwrap_or_else(|e| e.into_inner());
        refused.insert(format!("{} {}", self.base_url, self.model));
    }

    /// `error` with every occurrence of the key replaced: some servers and
    /// proxies echo the key they were sent in their error messages.
    fn redact(&self, error: LlmError) -> LlmError {
        match &self.key.0 {
            Some(key) if key.len() >= 8 => map_message(error, |m| m.replace(key, "<key>")),
            _ => error,
        }
    }

    async fn attempt(
        &self,
        request: &ChatRequest,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ChatOutcome, Failure> {
        let provider = self.name();
        let (url, body) = match self.format {
            WireFormat::Anthropic => (
                format!("{}/v1/messages", self.base_url),
                anthropic::request_body(request),
            ),
            WireFormat::OpenAi => (
                format!("{}/chat/completions", self.base_url),
                openai::request_body(request, openai::TokenLimit::for_server(&self.base_url)),
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
            let retry_after = retry_after(response.headers());
            let body = response.text().await.unwrap_or_default();
            let error = match self.format {
                WireFormat::Anthropic => anthropic::http_error(status.as_u16(), &body),
                WireFormat::OpenAi => openai::http_error(status.as_u16(), &body),
            };
            return Err(Failure { error, retry_after });
        }

        let mut answer = Answer::default();
        let mut decoder = SseDecoder::default();
        // Silence is noticed by a check every quarter of the idle timeout:
        // a timer or a clock reading for every chunk costs more than the
        // chunk's token. A stream fails after 3/4 to 4/4 of the timeout.
        let check_every = self.idle_timeout / IDLE_CHECKS;
        let mut checks =
            tokio::time::interval_at(tokio::time::Instant::now() + check_every, check_every);
        // Missed checks are not made up in a rush, which would count silence
        // that never was.
        checks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut silent_checks = 0;
        let mut got_data = false;
        while !answer.done {
            let chunk = tokio::select! {
                biased;
                chunk = response.chunk() => chunk.map_err(|e| LlmError::Failed {
                    provider,
                    message: without_url(&e),
                })?,
                _ = checks.tick() => {
                    silent_checks = if std::mem::take(&mut got_data) { 0 } else { silent_checks + 1 };
                    if silent_checks == IDLE_CHECKS {
                        return Err(LlmError::Failed {
                            provider,
                            message: format!("no data for {}", duration_text(self.idle_timeout)),
                        }
                        .into());
                    }
                    continue;
                }
            };
            let Some(chunk) = chunk else {
                break;
            };
            got_data = true;
            decoder.push(&chunk, |event| answer.read(self.format, event, on_text))?;
        }
        if !answer.done {
            decoder.finish(|event| answer.read(self.format, event, on_text))?;
        }
        let Answer {
            outcome,
            done,
            finished,
            ..
        } = answer;
        if !done && outcome.text.is_empty() {
            return Err(LlmError::Malformed {
                provider,
                message: "the stream ended without an answer".into(),
            }
            .into());
        }
        // Both formats say when the answer is complete (Anthropic's
        // `message_stop`; OpenAI's `finish_reason`, then `[DONE]`); without
        // that the connection was cut, and running half an answer's code
        // would be wrong.
        if !done && !finished {
            return Err(LlmError::Failed {
                provider,
                message: "the stream ended before the answer was complete".into(),
            }
            .into());
        }
        if outcome.usage == Usage::default() {
            tracing::debug!("{provider} reported no usage");
        }
        Ok(outcome)
    }
}

/// What one attempt has read of the answer so far.
#[derive(Default)]
struct Answer {
    outcome: ChatOutcome,
    anthropic: anthropic::StreamState,
    /// The provider said the answer is complete.
    done: bool,
    /// The text is complete (OpenAI's `finish_reason`), though the stream goes on.
    finished: bool,
}

impl Answer {
    /// Takes in one event of the stream; text goes on to `on_text` at once.
    fn read(
        &mut self,
        format: WireFormat,
        event: &SseEvent,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), LlmError> {
        let events = match format {
            WireFormat::Anthropic => self.anthropic.parse_event(event),
            WireFormat::OpenAi => openai::parse_event(event),
        };
        for event in events {
            match event {
                ChatEvent::Text(text) => {
                    on_text(&text);
                    self.outcome.text.push_str(&text);
                }
                ChatEvent::TokenChoices(choices) => self.outcome.token_choices.extend(choices),
                ChatEvent::Usage(usage) => self.outcome.usage = usage,
                ChatEvent::Finished => self.finished = true,
                ChatEvent::Truncated => self.outcome.truncated = true,
                ChatEvent::Done => self.done = true,
                ChatEvent::Error(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Why one attempt failed, and how long the server asked to wait before the next.
struct Failure {
    error: LlmError,
    retry_after: Option<Duration>,
}

impl From<LlmError> for Failure {
    fn from(error: LlmError) -> Self {
        Self {
            error,
            retry_after: None,
        }
    }
}

/// The wait a response asks for: `retry-after-ms` (OpenAI), else
/// `retry-after` in seconds. The HTTP-date form is not used by these APIs
/// and falls back to the client's own backoff.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let number = |name: &str| -> Option<f64> {
        let value: f64 = headers.get(name)?.to_str().ok()?.trim().parse().ok()?;
        (value.is_finite() && value >= 0.0).then_some(value)
    };
    number("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| number("retry-after"))
        .map(|seconds| Duration::from_secs_f64(seconds.min(86_400.0)))
}

/// `error` with its message changed by `f`.
fn map_message(error: LlmError, f: impl FnOnce(&str) -> String) -> LlmError {
    match error {
        LlmError::Http {
            provider,
            status,
            message,
        } => LlmError::Http {
            provider,
            status,
            message: f(&message),
        },
        LlmError::Overloaded { provider, message } => LlmError::Overloaded {
            provider,
            message: f(&message),
        },
        LlmError::ServerError {
            provider,
            status,
            message,
        } => LlmError::ServerError {
            provider,
            status,
            message: f(&message),
        },
        LlmError::Connect { provider, message } => LlmError::Connect {
            provider,
            message: f(&message),
        },
        LlmError::Malformed { provider, message } => LlmError::Malformed {
            provider,
            message: f(&message),
        },
        LlmError::Failed { provider, message } => LlmError::Failed {
            provider,
            message: f(&message),
        },
    }
}

/// `error` with `note` in parentheses after its message.
fn with_note(error: LlmError, note: &str) -> LlmError {
    map_message(error, |m| format!("{m} ({note})"))
}

/// The one HTTP client of the process. Building a client loads and parses
/// the system's root certificates (milliseconds); every `%%ask` cell used to
/// pay that. Clones share the client's connection pool.
pub(super) fn shared_client() -> Result<reqwest::Client, String> {
    static CLIENT: std::sync::OnceLock<Result<reqwest::Client, String>> =
        std::sync::OnceLock::new();
    CLIENT
        .get_or_init(|| {
            // The TLS backend needs a process-wide crypto provider; installing
            // it twice is harmless (the second attempt reports it is set).
            let _ = rustls::crypto::ring::default_provider().install_default();
            reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .build()
                .map_err(|e| e.to_string())
        })
        .clone()
}

/// "120 s", or "400 ms" for less than a second.
fn duration_text(duration: Duration) -> String {
    if duration < Duration::from_secs(1) {
        format!("{} ms", duration.as_millis())
    } else {
        format!("{} s", duration.as_secs())
    }
}

fn name(format: WireFormat) -> &'static str {
    match format {
        WireFormat::Anthropic => "Anthropic",
        WireFormat::OpenAi => "OpenAI-compatible server",
    }
}

/// A transport error's text with its causes ("error sending request:
/// connection closed before message completed"), without the URL (which may
/// carry a key in a query string for some servers).
fn without_url(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    if let Some(url) = error.url() {
        text = text.replace(url.as_str(), "<url>");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_in_milliseconds_or_seconds() {
        let mut headers = reqwest::header::HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", "150".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(150)));
        headers.insert("retry-after-ms", "-1".parse().unwrap());
        headers.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn errors_never_carry_the_key() {
        let provider = HttpProvider::new(
            WireFormat::OpenAi,
            "http://127.0.0.1:9/v1",
            "m",
            ApiKey::new(Some("sk-very-secret".into())),
        )
        .unwrap();
        let error = provider.redact(LlmError::Http {
            provider: "p",
            status: 401,
            message: "bad key sk-very-secret".into(),
        });
        assert_eq!(error.to_string(), "p returned HTTP 401: bad key <key>");
        assert!(!format!("{provider:?}").contains("sk-very-secret"));
    }
}
