//! One run of a job, in the order it happens: the settings and provider
//! chosen, the state prepared (the conversation so far, the request with
//! the skills it names, the cells run since the last request), the graph
//! run until it ends or the user stops it, this run's messages kept in the
//! conversation (and memory), and the run reported (what changed, the
//! summary line, the record of the cell, the trace).

use std::sync::PoisonError;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::effects::RunEffects;
use super::lookups::{interpolate, recent_cells, run_changes, skills};
use super::memory::answered_part;
use super::provider::{
    Provider, context_tokens, cross_checks, other_solutions, sampling, secrets, sees_images,
};
use super::replay::{RecordedCell, RunFacts};
use super::{AgentSession, INTERRUPTED, Job, MAX_TOKENS, SessionUsage};
use crate::agent::config::layers::Settings;
use crate::agent::config::options::{self, AskOptions, GraphKind, UsageError};
use crate::agent::failure::AskFailure;
use crate::agent::graph::RunEnd;
use crate::agent::graphs::{
    FailedStep, NodeSettings, analyst_graph, default_graph, planner_graph, rlm_graph, triage_graph,
};
use crate::agent::llm::ChatMessage;
use crate::agent::parse::prose::without_code;
use crate::agent::ports::Ports;
use crate::agent::prompts;
use crate::agent::render::{self, publish};
use crate::agent::run::limits::{
    ANALYST_MAX_TURNS, DEFAULT_MAX_TURNS, PLANNER_MAX_TURNS, RLM_MAX_TURNS,
    TRIAGE_DEFAULT_MAX_REVIEWS,
};
use crate::agent::run::{AgentError, AgentState, Agents, ModelChoice, Outcome, Verdict};
use crate::exception::PythonException;

/// What a run was asked to do and with what, once the settings are read.
struct Setup {
    settings: Settings,
    /// The settings over the cell's own options.
    options: AskOptions,
    kind: GraphKind,
    max_turns: u32,
}

impl AgentSession {
    /// One run of a graph. The result has the model's last answer without
    /// its code (`answer`) and, for a search, whether it ended with FINAL.
    /// The run of an `%%ask` cell (`recorded`) becomes its record.
    pub(super) async fn run<P: Ports>(
        &self,
        job: Job,
        cell_options: AskOptions,
        recorded: Option<RecordedCell<'_>>,
        ports: &P,
    ) -> Result<Value, PythonException> {
        let setup = self.setup(&job, &cell_options)?;
        let provider = tokio::select! {
            provider = self.providers.provider(&setup.settings, &setup.options, ports) => provider?,
            () = ports.cancelled() => return Err(PythonException::interrupted(INTERRUPTED)),
        };
        let started = Instant::now();
        let (mut state, history_len) = self
            .prepare(&job, &cell_options, setup.max_turns, ports)
            .await;
        let node_settings = self
            .node_settings(&setup, &cell_options, &provider, ports)
            .await;
        // The triage may hand work to the claude CLI, unless it is the
        // run's own provider already.
        let claude = match (&provider, &job, setup.kind) {
            (Provider::Cli(_), _, _) => None,
            (_, Job::Ask { .. }, GraphKind::Triage) => {
                setup.settings.claude_agent().map(Provider::Cli)
            }
            _ => None,
        };
        let mut effects = RunEffects {
            ports,
            provider: &provider,
            claude: claude.as_ref(),
            model: ModelChoice::Configured,
            block_rules: setup.options.block_rules(),
            prices: setup.settings.prices(),
            trace: Vec::new(),
            calls: Vec::new(),
            started: Vec::new(),
            status: None,
            last_error: None,
            forward_tokens: cell_options.forward_tokens,
        };
        let searching = matches!(job, Job::Search(_));
        let agents = Agents {
            claude: claude.is_some(),
        };
        let graph = run_graph(job, &setup, node_settings, agents, &mut state, &mut effects);
        let result = tokio::select! {
            result = graph => result,
            () = ports.cancelled() => Err(AgentError::Interrupted),
        };
        effects.clear_status();
        if !searching {
            self.keep_conversation(&state, history_len, result.is_ok(), &setup.settings);
        }
        let session = self.count_usage(&state);
        let end = match result {
            Ok(end) => end,
            Err(AgentError::Interrupted) => {
                return Err(PythonException::interrupted(INTERRUPTED));
            }
            Err(e) => return Err(AskFailure::Run.because(e.to_string())),
        };
        // A "done" the judge was unsure of stands as an answer, not as done.
        if state.outcome == Some(Outcome::Complete)
            && state.verdict.as_ref().is_some_and(Verdict::unconfirmed)
        {
            state.outcome = Some(Outcome::Unconfirmed);
        }
        let ran = Ran {
            state: &state,
            session,
            end,
            elapsed: started.elapsed(),
            effects: &effects,
            provider: &provider,
            searching,
        };
        Ok(self
            .report(ran, &setup, &cell_options, recorded, ports)
            .await)
    }

    /// The settings, the graph and its turn limit for `job`; a usage error
    /// for an empty request or options that do not go together.
    fn setup(&self, job: &Job, cell_options: &AskOptions) -> Result<Setup, PythonException> {
        let request = match job {
            Job::Ask { prompt } => prompt,
            Job::Search(search) => &search.query,
        };
        if request.trim().is_empty() {
            return Err(AskFailure::Usage.because(options::USAGE));
        }
        let settings = self.settings()?;
        let options = settings.options_for(cell_options);
        if cell_options.informer && options.graph != Some(GraphKind::Planner) {
            let usage = UsageError(
                "--informer goes with --graph planner".into(),
                options::USAGE,
            );
            return Err(usage.into());
        }
        let kind = options.graph.unwrap_or_default();
        let max_turns = options.max_turns.unwrap_or(match (job, kind) {
            (Job::Search(_), _) => RLM_MAX_TURNS,
            (Job::Ask { .. }, GraphKind::Default) => DEFAULT_MAX_TURNS,
            // For the analyst graph a turn is an attempt at the code.
            (Job::Ask { .. }, GraphKind::Analyst) => ANALYST_MAX_TURNS,
            (Job::Ask { .. }, GraphKind::Planner) => PLANNER_MAX_TURNS,
            // For the triage graph a turn is a review.
            (Job::Ask { .. }, GraphKind::Triage) => TRIAGE_DEFAULT_MAX_REVIEWS,
        });
        Ok(Setup {
            settings,
            options,
            kind,
            max_turns,
        })
    }

    /// The state a run starts from, and where its own messages start in
    /// its conversation.
    async fn prepare<P: Ports>(
        &self,
        job: &Job,
        cell_options: &AskOptions,
        max_turns: u32,
        ports: &P,
    ) -> (AgentState, usize) {
        let prompt = match job {
            Job::Ask { prompt } => prompt,
            Job::Search(search) => {
                return (
                    AgentState::new(search.query.clone(), Vec::new(), max_turns),
                    0,
                );
            }
        };
        let memory = self.conversation.memory(ports).await;
        let history = {
            let mut conversation = self
                .conversation
                .messages
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
        let history_len = history.len();
        let prompt = interpolate(ports, prompt.clone()).await;
        let (installed, named) = skills(ports, &prompt).await;
        // The instructions of a skill the request names go after it: a
        // small model asked to follow one otherwise guesses how to load
        // it, and the review holds the work to them.
        let request = named.iter().fold(prompt, |request, (name, text)| {
            request + &prompts::loaded_skill(name, text)
        });
        let mut state = AgentState::new(request, history, max_turns);
        state.recent_cells = recent_cells(ports).await;
        state.skills = installed;
        (state, history_len)
    }

    /// What the graph's nodes need to know of the model and the cell.
    async fn node_settings<P: Ports>(
        &self,
        setup: &Setup,
        cell_options: &AskOptions,
        provider: &Provider,
        ports: &P,
    ) -> NodeSettings {
        let settings = &setup.settings;
        // The small local model rambles; a tighter cap keeps its turns short.
        let local_spec = self.providers.local_spec(provider).await;
        let max_tokens = local_spec.map_or(MAX_TOKENS, |spec| spec.max_tokens);
        NodeSettings {
            model: provider.model().to_owned(),
            judge_model: setup.options.judge_model.clone(),
            max_tokens,
            context_tokens: match context_tokens(settings, provider, local_spec) {
                Some(tokens) => tokens,
                None => self.providers.served_window(provider, ports).await,
            },
            execute: !cell_options.no_exec,
            once: cell_options.once,
            sampling: sampling(settings, local_spec.is_some()),
            vision: match sees_images(settings, provider, local_spec.is_some()) {
                Some(said) => said,
                None => self.providers.served_vision(provider).await,
            },
            candidates: other_solutions(settings, setup.options.approval()),
            cross_checks: cross_checks(settings, setup.options.approval()),
            token_choices: local_spec.is_some(),
            stop_after_block: local_spec.is_some(),
            answer_after: false,
        }
    }

    /// Adds this run's messages to the session's conversation and saves it
    /// to memory. Kept even when the run did not finish (`finished`):
    /// what was said stays said. Only this run's messages are added: a run
    /// that ended meanwhile (an `ask()` in this run's code, a `%%ask` in a
    /// subshell) added its own, and they stay.
    fn keep_conversation(
        &self,
        state: &AgentState,
        history_len: usize,
        finished: bool,
        settings: &Settings,
    ) {
        let mut conversation = self
            .conversation
            .messages
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut own = state.conversation.get(history_len..).unwrap_or(&[]);
        if !finished {
            own = answered_part(own);
        }
        // Figures were for this run's calls; later runs get the words.
        conversation.extend(own.iter().map(|message| ChatMessage {
            images: Vec::new(),
            ..message.clone()
        }));
        let memory = self
            .conversation
            .memory
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // Saved under the conversation's lock, so saves keep its order.
        if let Some(memory) = memory {
            memory.save(&conversation, &secrets(settings));
        }
    }

    /// Adds what the run used to the session's count; the count after it.
    fn count_usage(&self, state: &AgentState) -> SessionUsage {
        let mut session = self.usage.lock().unwrap_or_else(PoisonError::into_inner);
        session.runs += 1;
        session.usage.add(state.usage);
        *session
    }

    /// Shows what a finished run changed and its summary line, records the
    /// cell's run, shows the trace when asked, and returns the result the
    /// Python side reads.
    async fn report<P: Ports>(
        &self,
        ran: Ran<'_, P>,
        setup: &Setup,
        cell_options: &AskOptions,
        recorded: Option<RecordedCell<'_>>,
        ports: &P,
    ) -> Value {
        let Ran {
            state,
            session,
            end,
            elapsed,
            effects,
            provider,
            searching,
        } = ran;
        if !searching && let Some(panel) = render::changes(&run_changes(ports).await) {
            publish(ports, panel);
        }
        let local_label = self.providers.local_label(provider).await;
        let (provider_name, model_name) = match &local_label {
            Some(label) => ("local model", label.as_str()),
            None => (provider.name(), provider.model()),
        };
        let summary = render::summary(
            provider_name,
            model_name,
            state,
            end,
            elapsed,
            (session.runs > 1).then_some(&session.usage),
        );
        publish(ports, summary);
        if let Some(recorded) = recorded {
            let facts = RunFacts {
                provider: provider_name,
                model: model_name,
                graph: setup.kind.name(),
                ending: render::ending(state, end),
                no_exec: cell_options.no_exec,
            };
            self.record(recorded, state, facts, &secrets(&setup.settings), ports)
                .await;
        }
        if cell_options.trace {
            publish(ports, render::trace(&effects.trace, state, elapsed));
        }
        let finished = state.executions.iter().any(|e| e.finished);
        json!({
            "answer": without_code(&state.answer),
            "finished": finished,
            "trace": render::trace_json(&effects.trace, &effects.calls, state, elapsed),
            "result": render::result_json(state),
        })
    }
}

/// A run that ended, for its report.
struct Ran<'a, P> {
    state: &'a AgentState,
    /// The session's usage, this run's included.
    session: SessionUsage,
    end: RunEnd,
    elapsed: Duration,
    effects: &'a RunEffects<'a, P>,
    provider: &'a Provider,
    searching: bool,
}

/// Runs the graph `setup` chose for `job` (each graph has nodes of its own
/// type, so each is built and run in its own arm).
async fn run_graph<P: Ports>(
    job: Job,
    setup: &Setup,
    node_settings: NodeSettings,
    agents: Agents,
    state: &mut AgentState,
    effects: &mut RunEffects<'_, P>,
) -> Result<RunEnd, AgentError> {
    let max_turns = setup.max_turns;
    match (job, setup.kind) {
        (Job::Search(search), _) => {
            rlm_graph(node_settings, search, max_turns)
                .run(state, effects)
                .await
        }
        (Job::Ask { .. }, GraphKind::Default) => {
            default_graph(node_settings, max_turns)
                .run(state, effects)
                .await
        }
        (Job::Ask { .. }, GraphKind::Analyst) => {
            analyst_graph(node_settings, max_turns)
                .run(state, effects)
                .await
        }
        (Job::Ask { .. }, GraphKind::Planner) => {
            planner_graph(
                node_settings,
                max_turns,
                setup.options.informer,
                FailedStep::Checked,
            )
            .run(state, effects)
            .await
        }
        (Job::Ask { .. }, GraphKind::Triage) => {
            triage_graph(node_settings, max_turns, agents)
                .run(state, effects)
                .await
        }
    }
}
