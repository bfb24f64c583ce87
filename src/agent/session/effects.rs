//! A run's effects over the kernel's ports: model calls streamed into the
//! cell, agent code run in the user's namespace (its output shown live, its
//! code asked about when the guard or the user wants), the namespace
//! summary and the other look-ups the graphs make.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::agent::budget;
use crate::agent::config::options::BlockRules;
use crate::agent::graph::Observer;
use crate::agent::llm::prices::Prices;
use crate::agent::llm::{ChatOutcome, ChatRequest, LlmError, Usage};
use crate::agent::parse::code::{code_blocks, complete_code_blocks, ends_in_open_block};
use crate::agent::parse::repetition::RepeatWatch;
use crate::agent::ports::Ports;
use crate::agent::render::live::{self, LiveOutput};
use crate::agent::render::stream::ShownText;
use crate::agent::render::writing::WritingCode;
use crate::agent::render::{self, publish};
use crate::agent::run::{
    Activity, AgentError, AgentEvent, Agreement, CandidateOutcome, Context, Effects, Execution,
    KeyInformation, ModelChoice, Repair, Showing, Targets, TriedFrom, WrittenResult,
};
use crate::agent::scope_calls;
use crate::exception::{ExceptionKind, PythonException};

use super::provider::Provider;

/// Streamed text waits at most this long before it is published.
pub(super) const STREAM_COALESCE: Duration = Duration::from_millis(20);

/// Gives the Python scope a piece of a shown answer, for an `ask()`
/// caller's `on_token` (which runs on the caller's thread).
async fn forward_token<P: Ports>(ports: &P, text: String) {
    if let Err(e) = scope_calls::call(ports, &scope_calls::Token { text: &text }).await {
        tracing::debug!("%%ask: on_token was not called: {e}");
    }
}

/// About how many tokens `request` sends.
fn estimated_prompt(request: &ChatRequest) -> u64 {
    let messages = request.messages.iter().map(|m| m.content.as_str());
    std::iter::once(request.system.as_str())
        .chain(messages)
        .map(|text| budget::estimate_tokens(text) as u64)
        .sum()
}

/// What a call was for, in the trace: its answer schema's name, else `code`
/// for an answer whose code runs, `text` for other free text.
fn call_purpose(request: &ChatRequest, showing: Showing) -> &'static str {
    match (request.schema.as_ref().map(|schema| schema.name), showing) {
        (Some(name), _) => name,
        (None, Showing::ProseAndCode { .. }) => "code",
        (None, _) => "text",
    }
}

/// The outcome of a call stopped early with `text`, cut back to where it
/// started to repeat (the provider never said what it counted, so the usage
/// is estimated). `truncated` when that is inside a code block: the block is
/// half-written and must not run.
fn cut_short(text: &str, prompt_tokens: u64) -> ChatOutcome {
    ChatOutcome {
        text: text.to_owned(),
        usage: Usage {
            input_tokens: prompt_tokens,
            output_tokens: budget::estimate_tokens(text) as u64,
            ..Usage::default()
        },
        truncated: ends_in_open_block(text),
        ..ChatOutcome::default()
    }
}

/// What the model is told of a block the user did not approve.
const DECLINED: &str = "Not run: the user chose not to run this code.";

/// What the model is told of a block that needed approval where no one can
/// give it (a frontend that takes no input, such as nbclient).
const NO_ONE_TO_ASK: &str = "Not run: every block needs the user's approval in this run \
(approve = always), and this frontend takes no input, so no one can approve it. Answer in words \
instead, and tell the user that %ask_config --approve risky lets code run without asking.";

/// The effects of one run: the graph's view of the kernel's ports.
pub(super) struct RunEffects<'a, P> {
    pub(super) ports: &'a P,
    pub(super) provider: &'a Provider,
    /// The claude CLI, when the run may hand work to it.
    pub(super) claude: Option<&'a Provider>,
    /// Which of the two answers the calls now.
    pub(super) model: ModelChoice,
    /// What each block of agent code may do, and for how long.
    pub(super) block_rules: BlockRules,
    /// What calls cost, for providers that do not say.
    pub(super) prices: Prices,
    /// The nodes visited so far, each with its time.
    pub(super) trace: Vec<render::TraceStep>,
    /// Each model call so far, in order.
    pub(super) calls: Vec<render::ModelCall>,
    /// When the nodes running now started, outermost first (a triage node
    /// runs another graph's nodes inside it).
    pub(super) started: Vec<Instant>,
    /// The display id of the run's status line, once shown.
    pub(super) status: Option<String>,
    /// What the last agent code that failed raised (cleared by a success).
    pub(super) last_error: Option<String>,
    /// The shown answers' text also goes to the Python scope's `token` (an
    /// `ask()` caller's `on_token`).
    pub(super) forward_tokens: bool,
}

impl<'a, P: Ports> RunEffects<'a, P> {
    /// Says what the run does now on its status line, one line updated in
    /// place (shown when the first node that does something starts).
    fn show_status(&mut self, activity: Activity) {
        let text = render::status_text(activity, self.last_error.as_deref());
        let (placement, id) = render::in_place(&mut self.status, "status");
        publish(self.ports, render::status(&text, &id, placement));
    }

    /// Empties the status line at the end of the run, so no stale line stays.
    pub(super) fn clear_status(&mut self) {
        if let Some(id) = self.status.take() {
            publish(
                self.ports,
                render::status("", &id, render::Placement::InPlace),
            );
        }
    }

    /// Puts `names` back (with `if_changed`, those holding other data
    /// only); the names put back.
    async fn put_back(&mut self, names: &[String], if_changed: bool) -> Vec<String> {
        let call = scope_calls::Restore { names, if_changed };
        match scope_calls::call(self.ports, &call).await {
            Ok(restored) => restored.names,
            Err(e) => {
                tracing::warn!("%%ask: cannot put variables back: {e}");
                Vec::new()
            }
        }
    }

    /// The provider the next model call goes to.
    fn current_provider(&self) -> &'a Provider {
        match (self.model, self.claude) {
            (ModelChoice::ClaudeCli, Some(claude)) => claude,
            _ => self.provider,
        }
    }
}

impl<P: Ports> Observer for RunEffects<'_, P> {
    fn node_started(&mut self, node: &'static str, activity: Option<Activity>) {
        tracing::debug!("%%ask: {node} started");
        self.started.push(Instant::now());
        if let Some(activity) = activity {
            self.show_status(activity);
        }
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
        // Prose that loops ends the call (judgements are bounded by their
        // schema's lengths).
        let mut repeats = (showing != Showing::Hidden).then(RepeatWatch::default);
        let looping = tokio::sync::Notify::new();
        let prompt_tokens = estimated_prompt(&request);
        let purpose = call_purpose(&request, showing);
        let asked = Instant::now();
        let mut first_text = None;
        let model;
        let result = {
            let mut on_text = |text: &str| {
                if first_text.is_none() && !text.is_empty() {
                    first_text = Some(asked.elapsed());
                }
                if forward {
                    let _ = token_sender.send(text.to_owned());
                }
                if let Some(watch) = repeats.as_mut()
                    && watch.push(text)
                {
                    looping.notify_one();
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
            let provider = self.current_provider();
            // The model that answers: the request's, else the provider's own.
            model = match request.model.as_str() {
                "" => provider.model().to_owned(),
                named => named.to_owned(),
            };
            let chat = provider.chat(request, &mut on_text, &mut on_retry);
            tokio::pin!(chat);
            let mut tick = tokio::time::interval(STREAM_COALESCE);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    result = &mut chat => break Some(result),
                    _ = tick.tick() => lock().coalescer.tick(),
                    Some(text) = tokens.recv() => forward_token(ports, text).await,
                    // Dropping the call closes its connection, which ends
                    // the generation on the server too.
                    _ = looping.notified() => break None,
                }
            }
        };
        let result = match (result, repeats) {
            (Some(result), _) => result,
            (None, watch) => {
                lock()
                    .coalescer
                    .interject("\n(stopped here: the model was repeating itself)\n");
                Ok(cut_short(watch.unwrap_or_default().text(), prompt_tokens))
            }
        };
        if let Some(emptied) = blocks.and_then(BlockWatch::finish) {
            publish(ports, emptied);
        }
        while let Ok(text) = tokens.try_recv() {
            forward_token(ports, text).await;
        }
        shown
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .finish();
        let mut outcome = result?;
        self.calls.push(render::ModelCall {
            shown: showing != Showing::Hidden,
            purpose,
            first_text,
            took: asked.elapsed(),
            input_tokens: outcome.usage.input_tokens,
            cached_tokens: outcome.usage.cache_read_tokens,
            output_tokens: outcome.usage.output_tokens,
            cut_off: outcome.truncated.then(|| outcome.text.clone()),
        });
        if outcome.usage.cost_usd.is_none()
            && let Some(price) = self.prices.of(&model)
        {
            outcome.usage.cost_usd = Some(price.cost(&outcome.usage));
        }
        Ok(ChatOutcome {
            blocks_shown,
            ..outcome
        })
    }

    async fn chat_side_by_side(
        &mut self,
        requests: Vec<ChatRequest>,
    ) -> Vec<Result<ChatOutcome, AgentError>> {
        let provider = self.current_provider();
        let asked = requests.into_iter().map(|request| async move {
            let purpose = call_purpose(&request, Showing::Hidden);
            let started = Instant::now();
            let model = match request.model.as_str() {
                "" => provider.model().to_owned(),
                named => named.to_owned(),
            };
            let answer = provider
                .chat(
                    request,
                    &mut |_: &str| {},
                    &mut |_: &LlmError, _: Duration| {},
                )
                .await;
            (model, purpose, started.elapsed(), answer)
        });
        let mut outcomes = Vec::new();
        for (model, purpose, took, answer) in futures_util::future::join_all(asked).await {
            outcomes.push(answer.map_err(AgentError::from).map(|mut outcome| {
                self.calls.push(render::ModelCall {
                    shown: false,
                    purpose,
                    first_text: None,
                    took,
                    input_tokens: outcome.usage.input_tokens,
                    cached_tokens: outcome.usage.cache_read_tokens,
                    output_tokens: outcome.usage.output_tokens,
                    cut_off: outcome.truncated.then(|| outcome.text.clone()),
                });
                if outcome.usage.cost_usd.is_none()
                    && let Some(price) = self.prices.of(&model)
                {
                    outcome.usage.cost_usd = Some(price.cost(&outcome.usage));
                }
                outcome
            }));
        }
        outcomes
    }

    async fn execute(&mut self, code: &str) -> Result<Execution, AgentError> {
        let execution = run_block(self.ports, code, &self.block_rules).await?;
        // Only code that ran (it has a panel) says what the last error was.
        if execution.shown.is_some() {
            self.last_error = execution.failed.then(|| error_name(&execution.output));
        }
        Ok(execution)
    }

    async fn namespace(&mut self) -> String {
        match scope_calls::call(self.ports, &scope_calls::NamespaceSummary {}).await {
            Ok(reply) => reply.summary,
            Err(e) => {
                tracing::warn!("%%ask: no namespace summary: {e}");
                String::new()
            }
        }
    }

    async fn describe(&mut self, request: &str, names: &[String]) -> Vec<KeyInformation> {
        match scope_calls::call(self.ports, &scope_calls::Describe { request, names }).await {
            Ok(reply) => reply.described,
            Err(e) => {
                tracing::warn!("%%ask: the informer found nothing: {e}");
                Vec::new()
            }
        }
    }

    async fn written_results(
        &mut self,
        request: &str,
        names: &[String],
        codes: &[&str],
    ) -> Vec<WrittenResult> {
        let call = scope_calls::CompareWritten {
            request,
            names,
            codes,
        };
        match scope_calls::call(self.ports, &call).await {
            Ok(reply) => reply.results,
            Err(e) => {
                tracing::warn!("%%ask: no comparison with the written result: {e}");
                Vec::new()
            }
        }
    }

    async fn try_candidates(
        &mut self,
        codes: &[String],
        own: &str,
        start: TriedFrom,
    ) -> Result<Vec<CandidateOutcome>, AgentError> {
        let before_run = start == TriedFrom::RunStart;
        let call = scope_calls::TryCandidates {
            codes,
            own,
            before_run,
        };
        match scope_calls::call(self.ports, &call).await {
            Ok(tried) => Ok(tried.outcomes),
            Err(e) if e.is_interrupt() => Err(AgentError::Interrupted),
            Err(e) => {
                tracing::warn!("%%ask: other solutions not tried: {e}");
                Ok(Vec::new())
            }
        }
    }

    async fn compare_candidates(&mut self, names: &[String]) -> Agreement {
        match scope_calls::call(self.ports, &scope_calls::CompareCandidates { names }).await {
            Ok(agreement) => agreement,
            Err(e) => {
                tracing::warn!("%%ask: solutions not compared: {e}");
                Agreement::default()
            }
        }
    }

    async fn restore(&mut self, names: &[String]) -> Vec<String> {
        self.put_back(names, false).await
    }

    async fn restore_changed(&mut self, names: &[String]) -> Vec<String> {
        self.put_back(names, true).await
    }

    async fn missing(&mut self, targets: &Targets) -> Targets {
        let missing = scope_calls::Missing {
            names: &targets.names,
            files: &targets.files,
        };
        match scope_calls::call(self.ports, &missing).await {
            Ok(missing) => missing,
            Err(e) => {
                tracing::warn!("%%ask: cannot check what exists: {e}");
                Targets::default()
            }
        }
    }

    async fn triage_context(&mut self) -> Context {
        match scope_calls::call(self.ports, &scope_calls::TriageContext {}).await {
            Ok(context) => context,
            Err(e) => {
                tracing::warn!("%%ask: no context for the triage: {e}");
                Context::default()
            }
        }
    }

    async fn repair(&mut self, code: &str, error: &str) -> Option<Repair> {
        match scope_calls::call(self.ports, &scope_calls::FindRepair { code, error }).await {
            Ok(reply) => reply.repair,
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

/// Asks the user whether to run the block just shown (through the kernel's
/// stdin channel, which every frontend answers): the refusal the model is
/// told, or None when the user typed "y" or "yes".
async fn refusal<P: Ports>(ports: &P) -> Result<Option<&'static str>, AgentError> {
    let question = scope_calls::Input {
        prompt: "Run this code? [y/N] ",
        password: false,
    };
    match scope_calls::call(ports, &question).await {
        Ok(typed) => {
            let text = typed.value.trim().to_ascii_lowercase();
            Ok((text != "y" && text != "yes").then_some(DECLINED))
        }
        Err(e) if e.kind() == ExceptionKind::NoInput => Ok(Some(NO_ONE_TO_ASK)),
        Err(e) => Err(e.into()),
    }
}

/// Runs agent code in the user's namespace, its output shown live, under
/// `rules`: asked about first with `confirm` (`--approve always`), the
/// guard's kinds in `allow` let through, stopped past `seconds`. A block
/// the user declined, or that could not run, comes back as not run (with
/// no `shown`).
pub(super) async fn run_block<P: Ports>(
    ports: &P,
    code: &str,
    rules: &BlockRules,
) -> Result<Execution, AgentError> {
    if rules.confirm
        && let Some(refusal) = refusal(ports).await?
    {
        let mut declined = Execution::not_run(code, refusal);
        declined.failed = refusal == NO_ONE_TO_ASK;
        return Ok(declined);
    }
    // What the code writes shows while it runs (see `live`).
    let (output, mut written) = tokio::sync::mpsc::unbounded_channel();
    let run = scope_calls::RunCode {
        code,
        confirm: rules.confirm,
        allow: &rules.allow,
        seconds: rules.seconds,
    };
    let call = scope_calls::call_with_output(ports, &run, output);
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
                    publish(ports, shown);
                }
            }
        }
    };
    if let Some(emptied) = live.finish() {
        publish(ports, emptied);
    }
    match result {
        Ok(run) if run.refused => Ok(Execution::not_run(code, run.output)),
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
                finished: run.finished,
                changes: run.changes,
                rich_outputs: run.rich_outputs,
                images: run.images,
            })
        }
        Err(e) if e.is_interrupt() => Err(AgentError::Interrupted),
        Err(e) => Ok(failed_run(code, &e)),
    }
}

/// Finds the code blocks of a streaming answer as they complete, for panels
/// shown before the answer ends, and shows the block being written (see
/// [`WritingCode`]).
struct BlockWatch {
    turn: u32,
    answer: String,
    /// Blocks shown so far.
    shown: usize,
    writing: WritingCode,
}

impl BlockWatch {
    fn new(turn: u32) -> Self {
        Self {
            turn,
            answer: String::new(),
            shown: 0,
            writing: WritingCode::new(turn),
        }
    }

    /// Takes the next piece of the answer; the panels it completed or
    /// changed, in order.
    fn push(&mut self, text: &str) -> Vec<render::Shown> {
        self.answer.push_str(text);
        // A block completes, and a line of one being written shows, only
        // when a line ends.
        let Some(end) = self.answer.rfind('\n').filter(|_| text.contains('\n')) else {
            return Vec::new();
        };
        let finished = &self.answer[..=end];
        let mut panels = Vec::new();
        let complete = complete_code_blocks(finished);
        if complete.len() > self.shown {
            // The block written so far gives way to its code panel.
            panels.extend(self.writing.closed());
        }
        for (block, code) in complete.into_iter().enumerate().skip(self.shown) {
            panels.push(render::event(&AgentEvent::Code {
                turn: self.turn,
                block,
                code: code.code,
            }));
            self.shown += 1;
        }
        // Every block, the one still open at the end too.
        let mut blocks = code_blocks(finished);
        let open = (blocks.len() > self.shown).then(|| blocks.pop().map(|block| block.code));
        panels.extend(
            self.writing
                .update(open.flatten().as_deref(), Instant::now()),
        );
        panels
    }

    /// The answer ended: the panel of a block still being written is
    /// emptied (the graph shows what it runs).
    fn finish(mut self) -> Option<render::Shown> {
        self.writing.closed()
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
pub(super) fn failed_run(code: &str, error: &PythonException) -> Execution {
    Execution::not_run(code, error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_named_by_its_schema_else_by_whether_its_code_runs() {
        let judged = ChatRequest {
            schema: Some(crate::agent::schemas::verdict()),
            ..ChatRequest::default()
        };
        let free = ChatRequest::default();
        assert_eq!(call_purpose(&judged, Showing::Hidden), "verdict");
        assert_eq!(
            call_purpose(&free, Showing::ProseAndCode { turn: 1 }),
            "code"
        );
        assert_eq!(call_purpose(&free, Showing::Prose), "text");
        assert_eq!(call_purpose(&free, Showing::Hidden), "text");
    }

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
