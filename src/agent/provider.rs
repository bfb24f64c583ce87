//! The model provider of a run: an HTTP API (Anthropic's or an
//! OpenAI-compatible one) or the `claude` CLI, behind one `chat`.

use std::time::Duration;

use super::ChatOutcome;
use super::config::ProviderChoice;
use super::llm::claude_cli::ClaudeCli;
use super::llm::http::HttpProvider;
use super::llm::{ChatRequest, LlmError};

/// A run's provider.
pub enum Provider {
    Http(HttpProvider),
    Cli(ClaudeCli),
}

impl Provider {
    /// An HTTP provider for `choice`.
    pub fn http(choice: &ProviderChoice) -> Result<Self, LlmError> {
        HttpProvider::new(
            choice.format,
            &choice.base_url,
            &choice.model,
            choice.key.clone(),
        )
        .map(Provider::Http)
    }

    pub fn name(&self) -> &'static str {
        match self {
            Provider::Http(http) => http.name(),
            Provider::Cli(_) => "claude CLI",
        }
    }

    pub fn model(&self) -> &str {
        match self {
            Provider::Http(http) => &http.model,
            Provider::Cli(cli) => cli.model.as_deref().unwrap_or("default model"),
        }
    }

    /// Streams one answer: text to `on_text` as it arrives, and each wait
    /// before a retry to `on_retry`.
    pub async fn chat(
        &self,
        request: ChatRequest,
        on_text: &mut (dyn FnMut(&str) + Send),
        on_retry: &mut (dyn FnMut(&LlmError, Duration) + Send),
    ) -> Result<ChatOutcome, LlmError> {
        match self {
            Provider::Http(http) => http.chat_telling_retries(request, on_text, on_retry).await,
            Provider::Cli(cli) => cli.chat(request, on_text).await,
        }
    }
}
