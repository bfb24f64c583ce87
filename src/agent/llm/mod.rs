//! Talking to language models: one request shape, one event stream, and a
//! translator per provider wire format. The translators are pure (request
//! body out, parsed events in) so they are tested against recorded streams
//! without a network; the shared decoders live in [`sse`].

pub mod anthropic;
pub mod claude_cli;
pub mod http;
pub mod local;
pub mod openai;
pub mod prices;
pub mod sse;
pub mod window;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who said a message in the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
    /// Figures for a model that sees images (base64 PNGs); never saved with
    /// the conversation, and sent only in a run's own messages.
    #[serde(skip)]
    pub images: Vec<String>,
}

impl ChatMessage {
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
            images: Vec::new(),
        }
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
            images: Vec::new(),
        }
    }
}

/// A model's complete answer to one call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatOutcome {
    pub text: String,
    pub usage: Usage,
    /// How many of the answer's code blocks were shown as panels while it
    /// streamed (the first ones, in order).
    pub blocks_shown: usize,
    /// The answer was cut off before it ended: at the length limit, or
    /// stopped inside a code block for repeating itself.
    pub truncated: bool,
    /// Each token's likeliest choices, when the request asked for them and
    /// the provider gave them (empty otherwise).
    pub token_choices: Vec<TokenChoices>,
}

/// One token of an answer and the model's likeliest choices at that point,
/// with their log-probabilities (an OpenAI-compatible server's
/// `top_logprobs`): what a yes-or-no answer is weighed by.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TokenChoices {
    pub token: String,
    pub choices: Vec<(String, f32)>,
}

/// A provider-independent chat request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    pub model: String,
    pub system: String,
    pub messages: Vec<ChatMessage>,
    pub max_tokens: u32,
    /// How the model samples, where the provider takes it.
    pub sampling: Sampling,
    /// The shape the answer must have, for answers the kernel reads rather
    /// than shows (a verdict, a plan); `None` for free text.
    pub schema: Option<AnswerSchema>,
    /// Text at which the model stops writing (the planner's `Observation:`,
    /// which is the kernel's to write), where the provider takes it.
    pub stop: &'static [&'static str],
    /// Ask for each token's likeliest choices ([`TokenChoices`]), where the
    /// provider gives them.
    pub token_choices: bool,
}

/// A JSON schema for an answer, which a provider enforces where it can
/// (OpenAI-compatible servers' `response_format`, a forced tool call on
/// Anthropic's API). The answer is still read leniently: a provider that
/// cannot enforce it gets the same request in words, from the prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerSchema {
    /// A short identifier (letters, digits, `_`): the schema's or tool's name.
    pub name: &'static str,
    /// What the answer is, for providers that show the model a description.
    pub description: &'static str,
    pub schema: Value,
}

/// Sampling settings: a temperature of 0 and a fixed seed make a model's
/// answers repeatable (the local model's default); `None` leaves the
/// provider's own default (reasoning models refuse any other temperature).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Sampling {
    pub temperature: Option<f32>,
    pub seed: Option<u64>,
}

/// Token counts (and cost, where the provider reports it) of one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Usage {
    /// All input, cached or not.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Of the input, what was read from the provider's prompt cache.
    pub cache_read_tokens: u64,
    /// Of the input, what was written to the prompt cache.
    pub cache_write_tokens: u64,
    pub cost_usd: Option<f64>,
}

impl Usage {
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.cost_usd = match (self.cost_usd, other.cost_usd) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
    }
}

/// What a streaming response says, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatEvent {
    /// A piece of the answer's text.
    Text(String),
    /// The likeliest choices of the tokens just sent, when asked for.
    TokenChoices(Vec<TokenChoices>),
    /// Token counts; the last one seen holds the totals.
    Usage(Usage),
    /// The answer's text is complete, but the stream goes on (OpenAI's
    /// `finish_reason`, before the usage chunk and `[DONE]`).
    Finished,
    /// The answer was cut off at the length limit (OpenAI's
    /// `finish_reason: length`, Anthropic's `stop_reason: max_tokens`).
    Truncated,
    /// The answer is complete.
    Done,
    /// The provider reported an error inside the stream.
    Error(LlmError),
}

/// Why a model call failed. Messages never contain keys.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("{provider} returned HTTP {status}: {message}")]
    Http {
        provider: &'static str,
        status: u16,
        message: String,
    },
    #[error("{provider} is overloaded or rate-limited: {message}")]
    Overloaded {
        provider: &'static str,
        message: String,
    },
    /// A 500, 502 or 504: the provider's own failure, often gone a moment later.
    #[error("{provider} had a server error (HTTP {status}): {message}")]
    ServerError {
        provider: &'static str,
        status: u16,
        message: String,
    },
    #[error("cannot reach {provider}: {message}")]
    Connect {
        provider: &'static str,
        message: String,
    },
    #[error("{provider} sent a response that could not be read: {message}")]
    Malformed {
        provider: &'static str,
        message: String,
    },
    #[error("{provider} failed: {message}")]
    Failed {
        provider: &'static str,
        message: String,
    },
}

impl LlmError {
    /// Whether waiting and trying again may help (429 other than an
    /// exhausted quota, 529, overloaded, and the provider's own 5xx).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LlmError::Overloaded { .. } | LlmError::ServerError { .. }
        )
    }
}
