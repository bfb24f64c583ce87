//! The agent session of one kernel: what `%%ask` cells, `ask()` and
//! `%ask_config` share. It owns the `%ask_config` defaults, the conversation
//! that carries over between runs, and the embedded local model once
//! started; for each request it chooses the provider, runs the graph and
//! shows the run in the cell. It reaches the rest of the kernel only through
//! [`Ports`].

mod effects;
mod indent;
mod lookups;
pub mod memory;
pub mod provider;
pub mod record;
mod replay;
mod run;

use std::sync::{Mutex, PoisonError};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::agent::config::choice::{ConfigError, local_model_choice};
use crate::agent::config::layers::{self as settings, Settings};
use crate::agent::config::options::{self, AgentCell, AskOptions, DrawnGraph, GraphKind};
use crate::agent::failure::AskFailure;
use crate::agent::graphs::rlm::Search;
use crate::agent::graphs::{
    FailedStep, NodeSettings, analyst_graph, default_graph, planner_graph, rlm_graph, triage_graph,
};
use crate::agent::llm::Usage;
use crate::agent::llm::local::shared;
use crate::agent::ports::Ports;
use crate::agent::render::{self, publish};
use crate::agent::run::{AgentState, Agents};
use crate::exception::PythonException;

use effects::RunEffects;
use indent::Indented;
use memory::Conversation;
use provider::Providers;
use record::{CellKey, Record};
use replay::{RecordedCell, RunFacts};

/// What an interrupted run raises in Python.
pub(super) const INTERRUPTED: &str = "the %%ask run was interrupted";

/// Longest answer asked of a provider (the local models have their own).
const MAX_TOKENS: u32 = 4096;

/// What the Python side asks of the session (the runtime's JSON; its
/// `indent` says how many agent runs the request is nested in).
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Request {
    /// An `%%ask` or `%ask_config` cell, whole, and the frontend's id of
    /// the cell, when it sent one.
    Cell {
        code: String,
        #[serde(default)]
        cell_id: Option<String>,
    },
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

/// The agent state of one kernel.
#[derive(Default)]
pub struct AgentSession {
    /// `%ask_config` defaults.
    defaults: Mutex<AskOptions>,
    /// The conversation that carries over between runs, and where it is
    /// kept across restarts.
    conversation: Conversation,
    /// What the runs of this session used.
    usage: Mutex<SessionUsage>,
    /// The embedded local model and what servers said of their models.
    providers: Providers,
    /// The code the last `%%ask` cell ran (or replayed), for `%ask_code`.
    last_code: Mutex<Option<LastCode>>,
}

/// The code an `%%ask` cell ran, and what it asked.
#[derive(Debug, Clone)]
struct LastCode {
    prompt: String,
    blocks: Vec<String>,
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
                self.respond(request, &ports).await
            }
            Ok(request) => self.respond(request, ports).await,
            Err(e) => Err(AskFailure::Run.because(format!("bad agent request: {e}"))),
        };
        result.unwrap_or_else(
            |failure| json!({ "error": { "ename": failure.ename, "evalue": failure.evalue } }),
        )
    }

    async fn respond<P: Ports>(
        &self,
        request: Request,
        ports: &P,
    ) -> Result<Value, PythonException> {
        match request {
            Request::Cell { code, cell_id } => self.cell(&code, cell_id.as_deref(), ports).await,
            Request::Ask { prompt, options } => {
                let options = AskOptions::from_json(&options)?;
                self.run(Job::Ask { prompt }, options, None, ports).await
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
                self.run(Job::Search(search), options, None, ports).await
            }
        }
    }

    async fn cell<P: Ports>(
        &self,
        code: &str,
        cell_id: Option<&str>,
        ports: &P,
    ) -> Result<Value, PythonException> {
        match options::parse_cell(code) {
            Some(Ok(AgentCell::Ask(cell))) => {
                let key = CellKey::new(&cell.prompt, &cell.options.clone().or(&self.defaults()));
                let recorded = RecordedCell { key: &key, cell_id };
                if let Some(replayed) = self.replay(recorded, &cell.options, ports).await? {
                    return Ok(replayed);
                }
                let job = Job::Ask {
                    prompt: cell.prompt.clone(),
                };
                self.run(job, cell.options, Some(recorded), ports).await
            }
            Some(Ok(AgentCell::PromoteCode)) => {
                let last = self
                    .last_code
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                match last {
                    Some(last) => Ok(json!({ "next_input": promoted(&last) })),
                    None => {
                        Err(AskFailure::Run
                            .because("no %%ask cell has run code in this kernel yet"))
                    }
                }
            }
            Some(Ok(AgentCell::Configure(change))) => {
                let defaults = {
                    let mut defaults = self.defaults.lock().unwrap_or_else(PoisonError::into_inner);
                    settings::apply(&mut defaults, change);
                    defaults.clone()
                };
                let settings = Settings::now(defaults)
                    .map_err(|e| AskFailure::Config.because(e.to_string()))?;
                let overview = settings::overview(&settings) + &self.overview_of_state(&settings);
                publish(ports, render::stream(&overview));
                Ok(json!({}))
            }
            Some(Ok(AgentCell::ShowGraph(graph))) => {
                publish(ports, show_graph::<P>(graph));
                Ok(json!({}))
            }
            Some(Err(usage)) => Err(usage.into()),
            None => Err(AskFailure::Run.because("not an %%ask or %ask_config cell")),
        }
    }

    /// The `%ask_config` defaults of this kernel.
    fn defaults(&self) -> AskOptions {
        self.defaults
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The settings a run uses now: the settings file and environment under
    /// this kernel's `%ask_config` defaults.
    fn settings(&self) -> Result<Settings, PythonException> {
        Settings::now(self.defaults()).map_err(|e| AskFailure::Config.because(e.to_string()))
    }

    /// The replay of `recorded` (whose `%%ask` line says `cell_options`)
    /// from its record, when replay is on, the cell does not ask afresh, and
    /// the record has a run of it. A record that cannot be read stops the
    /// cell: nothing runs.
    async fn replay<P: Ports>(
        &self,
        recorded: RecordedCell<'_>,
        cell_options: &AskOptions,
        ports: &P,
    ) -> Result<Option<Value>, PythonException> {
        let settings = self.settings()?;
        let options = settings.options_for(cell_options);
        if cell_options.fresh || !settings.replays(&options) {
            return Ok(None);
        }
        let Some(path) = replay::record_path(ports).await else {
            return Ok(None);
        };
        let record = Record::load(&path).map_err(|e| AskFailure::Run.because(e.to_string()))?;
        let Some(run) = record.find(recorded.cell_id, recorded.key) else {
            return Ok(None);
        };
        let result = replay::replay(ports, run, &options.block_rules()).await;
        if result.is_ok() {
            self.remember_code(&run.prompt, run.replayed_blocks().map(|b| b.code.clone()));
        }
        result.map(Some)
    }

    /// Makes a finished run of an `%%ask` cell its record (or says why it is
    /// not), and keeps its code for `%ask_code`.
    async fn record<P: Ports>(
        &self,
        recorded: RecordedCell<'_>,
        state: &AgentState,
        facts: RunFacts<'_>,
        secrets: &[String],
        ports: &P,
    ) {
        let run = replay::cell_run(recorded, state, facts);
        self.remember_code(&run.prompt, run.replayed_blocks().map(|b| b.code.clone()));
        let why_not = replay::not_recorded(state);
        let run = why_not.is_none().then_some(run);
        if let Some(path) = replay::record_path(ports).await
            && let Err(why) = replay::keep(&path, recorded, run, secrets)
        {
            publish(ports, render::stream(&format!("{why}\n")));
        }
        if let Some(why) = why_not {
            let line =
                format!("not recorded ({why}): this cell asks the model again when it runs\n");
            publish(ports, render::stream(&line));
        }
    }

    /// Keeps what an `%%ask` cell ran, for `%ask_code`.
    fn remember_code(&self, prompt: &str, blocks: impl Iterator<Item = String>) {
        let blocks: Vec<String> = blocks.collect();
        if blocks.is_empty() {
            return;
        }
        *self
            .last_code
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(LastCode {
            prompt: prompt.to_owned(),
            blocks,
        });
    }

    /// What the session has kept and used, for `%ask_config`.
    fn overview_of_state(&self, settings: &Settings) -> String {
        let messages = self
            .conversation
            .messages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        let memory = match &*self
            .conversation
            .memory
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            Some(memory) => format!("{messages} messages, kept in {}", memory.path().display()),
            None => format!("{messages} messages (kept once %%ask runs)"),
        };
        let session = *self.usage.lock().unwrap_or_else(PoisonError::into_inner);
        let usage = render::usage_text(&session.usage);
        let usage = usage.trim_end_matches(" · ");
        let mut overview = format!(
            "  {:<10} {memory}\n  {:<10} {} run{}, {usage}\n",
            "memory",
            "used",
            session.runs,
            if session.runs == 1 { "" } else { "s" },
        );
        if let Some(local) = local_model_overview(settings) {
            overview.push_str(&format!("  {:<10} {local}\n", "local"));
        }
        overview
    }
}

/// The shared local model server's state, for `%ask_config`, when the
/// local model is what `%%ask` uses.
fn local_model_overview(settings: &Settings) -> Option<String> {
    let no_provider = matches!(
        settings.choose_provider(&settings.options_for(&AskOptions::default())),
        Err(ConfigError::NoProvider)
    );
    if !no_provider || settings.var("MAHTAB_LOCAL_MODEL_URL").is_some() {
        return None;
    }
    let spec = local_model_choice(|name| settings.var(name)).ok()??;
    Some(shared::describe(spec))
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
        judge_model: None,
        max_tokens: 0,
        context_tokens: 0,
        execute: true,
        once: false,
        sampling: Default::default(),
        vision: false,
        candidates: 0,
        cross_checks: 0,
        token_choices: false,
        stop_after_block: false,
        answer_after: false,
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
            planner_graph::<RunEffects<P>>(settings, turns, true, FailedStep::Checked).mermaid(),
        ),
        DrawnGraph::Ask(GraphKind::Triage) => (
            "triage",
            triage_graph::<RunEffects<P>>(settings, turns, Agents::default()).mermaid(),
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

/// The cell `%ask_code` puts below: the request as a comment, then the
/// code its run ran, block after block.
fn promoted(last: &LastCode) -> String {
    let request: String = last
        .prompt
        .lines()
        .map(|line| format!("# {line}").trim_end().to_owned() + "\n")
        .collect();
    format!(
        "# %%ask, as code:\n{request}\n{}\n",
        last.blocks.join("\n\n").trim_end()
    )
}
