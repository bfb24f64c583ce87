//! The triage graph (seed 004), chosen with `%%ask --graph triage`: three
//! planning phases, each more costly than the last, decide who does the
//! work; the work is checked, repaired locally where it can be, and planned
//! again when it falls short:
//!
//! ```text
//! pre_plan (patterns, no model) -> classify (a quick model call) -> plan (a full one)
//!     each phase that decides: -> delegate | tool | respond
//! delegate (default, analyst or planner runs) -> [repair] -> review
//! tool (one toolbox call)                     -> [repair] -> review
//! review -> (not met, reviews left) -> pre_plan ... | end
//! ```
//!
//! The pre-plan resolves plain requests without a model call: "describe
//! df", "show df", "plot s", "read notes.txt", "explain the last error", a
//! greeting. The classification acts only when the model is confident. The
//! repair fixes two common failures without asking the model: a missing
//! import of a module the session already uses, and a misspelt column with
//! a single close match. Every call's messages are fitted to the model's
//! context window ([`super::budget`]), so long review loops stay within it.

use serde_json::Value;

use super::analyst::{self, analyst_graph};
use super::extract::CodeBlock;
use super::graph::{Graph, Route};
use super::llm::claude_cli;
use super::llm::{ChatMessage, Role};
use super::nodes::{Settings, close_with_answer, default_graph, node, run_pending};
use super::planner::{self, planner_graph, tool_call};
use super::reflect::{json_objects, parse_verdict};
use super::schemas;
use super::{AgentError, AgentEvent, AgentState, Effects, ModelChoice, Outcome, prompts};

/// Reviews of a run unless `--max-turns` says otherwise.
pub const DEFAULT_MAX_REVIEWS: u32 = 3;

/// However many reviews are asked for, no run loops more often than this.
pub const MAX_REVIEWS: u32 = 10;

/// The classification decides only at or above this confidence.
pub const CONFIDENT: f64 = 0.9;

/// The agents the triage hands work to: the other graphs, and the claude
/// CLI (the default graph with Claude Code's model) when it is installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    Default,
    Analyst,
    Planner,
    Claude,
}

impl Agent {
    pub const ALL: [Agent; 4] = [
        Agent::Default,
        Agent::Analyst,
        Agent::Planner,
        Agent::Claude,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Agent::Default => "default",
            Agent::Analyst => "analyst",
            Agent::Planner => "planner",
            Agent::Claude => "claude",
        }
    }

    /// What the agent is good at, as the planning prompts list it.
    fn strength(self) -> &'static str {
        match self {
            Agent::Default => {
                "writes and runs code, reviews the result, and repeats until done; \
                 for most requests that need code"
            }
            Agent::Analyst => {
                "plans, runs code, then explains the result in plain words; for questions \
                 about data that want an interpretation, and for conceptual questions"
            }
            Agent::Planner => {
                "takes one small action at a time (code or a tool such as describe, grep, \
                 read); for exploring data, logs or files step by step"
            }
            Agent::Claude => {
                "works like the default agent with a stronger model (Claude, through the \
                 claude CLI); for hard tasks, or ones other agents failed at"
            }
        }
    }

    /// Turns one delegation may use.
    fn turns(self) -> u32 {
        match self {
            Agent::Default | Agent::Claude => super::session::DEFAULT_MAX_TURNS,
            Agent::Analyst => analyst::MAX_ATTEMPTS,
            Agent::Planner => planner::DEFAULT_MAX_TURNS,
        }
    }
}

/// The agents a run can hand work to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Agents {
    /// The claude CLI is installed and is not the run's own provider.
    pub claude: bool,
}

impl Agents {
    fn available(self) -> impl Iterator<Item = Agent> {
        Agent::ALL
            .into_iter()
            .filter(move |agent| *agent != Agent::Claude || self.claude)
    }

    /// The available agent a model named, if any.
    fn parse(self, name: &str) -> Option<Agent> {
        let name = name
            .trim()
            .trim_start_matches("agent:")
            .to_ascii_lowercase();
        self.available().find(|agent| agent.name() == name)
    }

    /// The agents and what each is for, one per line, for the prompts.
    fn listed(self) -> String {
        self.available()
            .map(|agent| format!("- {}: {}", agent.name(), agent.strength()))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The agents' names.
    fn names(self) -> Vec<&'static str> {
        self.available().map(Agent::name).collect()
    }

    /// The agents' names as a JSON field's choices: `"default" or "analyst"`.
    fn choices(self) -> String {
        self.available()
            .map(|agent| format!("\"{}\"", agent.name()))
            .collect::<Vec<_>>()
            .join(" or ")
    }
}

/// What a planning phase decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Hand `task` to `agent`.
    Delegate { agent: Agent, task: String },
    /// Run this one toolbox call.
    Tool { code: String },
    /// Reply with this text; there is no work to do.
    Respond(String),
}

/// What the triage graph carries between its nodes.
#[derive(Debug, Clone, Default)]
pub struct Triage {
    pub decision: Option<Decision>,
    /// Reviews so far that found the request not met.
    pub reviews: u32,
    /// Executions before this pass, so its own can be told apart.
    pub pass_start: usize,
    /// How the delegated agent's own run ended.
    pub agent_outcome: Option<Outcome>,
}

/// What the pre-plan looks at besides the request.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub struct Context {
    /// The user's variables, by name.
    #[serde(default)]
    pub variables: Vec<String>,
    /// The traceback of the user's last failed cell, as text.
    #[serde(default)]
    pub last_error: Option<String>,
}

/// A fix the repair step made without the model.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct Repair {
    pub code: String,
    /// What was changed, in a few words.
    pub change: String,
}

/// The triage graph handing work to `agents`; `max_reviews` is capped at
/// [`MAX_REVIEWS`].
pub fn triage_graph<E: Effects>(
    settings: Settings,
    max_reviews: u32,
    agents: Agents,
) -> Graph<AgentState, E> {
    let reviews = max_reviews.clamp(1, MAX_REVIEWS);
    let (classify_settings, plan_settings) = (settings.clone(), settings.clone());
    let (delegate_settings, review_settings) = (settings.clone(), settings.clone());
    let execute = settings.execute;
    // A pass is at most six nodes; the sub-agents count their own steps.
    let step_cap = (reviews as usize + 1) * 6;
    const DECIDED: &[Route] = &[
        Route::To("delegate"),
        Route::To("tool"),
        Route::To("respond"),
    ];
    const WORKED: &[Route] = &[Route::To("repair"), Route::To("review"), Route::End];
    Graph::new("pre_plan", step_cap)
        .node("pre_plan", node(|s, e| Box::pin(pre_plan(s, e))))
        .node(
            "classify",
            node(move |s, e| Box::pin(classify(s, e, classify_settings.clone(), agents))),
        )
        .node(
            "plan",
            node(move |s, e| Box::pin(plan(s, e, plan_settings.clone(), agents))),
        )
        .node(
            "delegate",
            node(move |s, e| Box::pin(delegate(s, e, delegate_settings.clone(), reviews))),
        )
        .node("tool", node(move |s, e| Box::pin(tool(s, e, execute))))
        .node(
            "respond",
            node(|s, e| Box::pin(async move { respond(s, e) })),
        )
        .node("repair", node(|s, e| Box::pin(repair(s, e))))
        .node(
            "review",
            node(move |s, e| Box::pin(review(s, e, review_settings.clone(), reviews))),
        )
        .conditional_edge(
            "pre_plan",
            &[
                Route::To("delegate"),
                Route::To("tool"),
                Route::To("respond"),
                Route::To("classify"),
            ],
            |s: &AgentState| decided(s).unwrap_or(Route::To("classify")),
        )
        .conditional_edge(
            "classify",
            &[Route::To("delegate"), Route::To("plan")],
            |s: &AgentState| decided(s).unwrap_or(Route::To("plan")),
        )
        .conditional_edge("plan", DECIDED, |s: &AgentState| {
            decided(s).unwrap_or(Route::To("delegate"))
        })
        .conditional_edge("delegate", WORKED, after_work)
        .conditional_edge("tool", WORKED, after_work)
        .edge("respond", Route::End)
        .edge("repair", Route::To("review"))
        .conditional_edge(
            "review",
            &[Route::To("pre_plan"), Route::End],
            |s: &AgentState| match s.outcome {
                Some(_) => Route::End,
                None => Route::To("pre_plan"),
            },
        )
}

/// Where a phase's decision leads, if it decided.
fn decided(state: &AgentState) -> Option<Route> {
    Some(match state.triage.decision.as_ref()? {
        Decision::Delegate { .. } => Route::To("delegate"),
        Decision::Tool { .. } => Route::To("tool"),
        Decision::Respond(_) => Route::To("respond"),
    })
}

/// After the work: repair its failure if the pass's last run failed, else
/// review (or end, when the run already ended: `--no-exec`, or the agent
/// found the request cannot be done).
fn after_work(state: &AgentState) -> Route {
    if state.outcome.is_some() {
        Route::End
    } else if pass_failure(state).is_some() {
        Route::To("repair")
    } else {
        Route::To("review")
    }
}

/// The failed execution that ended this pass's work, if it ended so.
fn pass_failure(state: &AgentState) -> Option<&super::Execution> {
    state.executions[state.triage.pass_start.min(state.executions.len())..]
        .last()
        .filter(|execution| execution.failed)
}

async fn pre_plan<E: Effects>(state: &mut AgentState, effects: &mut E) -> Result<(), AgentError> {
    state.triage.decision = None;
    state.triage.agent_outcome = None;
    state.triage.pass_start = state.executions.len();
    // Patterns decide the first pass only: a pass that fell short needs a
    // plan that knows why, not the same shortcut again.
    if state.triage.reviews > 0 {
        return Ok(());
    }
    let context = effects.triage_context().await;
    if let Some(decision) = textual_plan(&state.request, &context) {
        effects.emit(AgentEvent::Status(format!(
            "triage: {} (no model call)",
            describe(&decision)
        )));
        state.triage.decision = Some(decision);
    }
    Ok(())
}

/// A decision for requests plain enough to need no model: a greeting, a
/// look at a variable, a file to read, the last error to explain.
pub fn textual_plan(request: &str, context: &Context) -> Option<Decision> {
    let text = request.trim().trim_end_matches(['?', '.', '!', ' ']);
    let text = match text.get(..7) {
        Some(please) if please.eq_ignore_ascii_case("please ") => &text[7..],
        _ => text,
    };
    let lower = text.to_ascii_lowercase();
    const GREETINGS: [&str; 6] = ["hi", "hello", "hey", "thanks", "thank you", "thx"];
    if GREETINGS.contains(&lower.as_str()) {
        let reply = if lower.starts_with("th") {
            "You're welcome."
        } else {
            "Hello! Ask me about your data or your code."
        };
        return Some(Decision::Respond(reply.to_owned()));
    }
    const ERRORS: [&str; 6] = [
        "last error",
        "that error",
        "this error",
        "why did that fail",
        "why did it fail",
        "what went wrong",
    ];
    if ERRORS.iter().any(|phrase| lower.contains(phrase))
        && let Some(error) = &context.last_error
    {
        let task = format!(
            "{request}\n\nThe error of my last failed cell:\n```\n{}\n```",
            error.trim_end()
        );
        return Some(Decision::Delegate {
            agent: Agent::Default,
            task,
        });
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    let [verb, target] = words.as_slice() else {
        return None;
    };
    let target = target.trim_matches(['`', '"', '\'']);
    let is_variable = context.variables.iter().any(|v| v == target);
    let code = match verb.to_ascii_lowercase().as_str() {
        "describe" | "summarize" | "summarise" | "inspect" if is_variable => {
            format!("print(describe({target}))")
        }
        "show" | "display" | "print" if is_variable => format!("display({target})"),
        "plot" | "chart" | "graph" if is_variable => format!(
            "import matplotlib.pyplot as plt\n\
             {target}.plot() if hasattr({target}, 'plot') else plt.plot({target})\n\
             plt.show()"
        ),
        "read" | "open" | "cat" | "show" if !is_variable && looks_like_path(target) => {
            format!(
                "print({})",
                tool_call("read", &Value::String(target.into()).to_string())
            )
        }
        _ => return None,
    };
    Some(Decision::Tool { code })
}

/// A file name or path: has an extension or a slash, and no spaces.
fn looks_like_path(text: &str) -> bool {
    (text.contains('/')
        || text.rsplit_once('.').is_some_and(|(stem, ext)| {
            !stem.is_empty() && !ext.is_empty() && ext.chars().all(char::is_alphanumeric)
        }))
        && !text.contains(char::is_whitespace)
}

fn describe(decision: &Decision) -> String {
    match decision {
        Decision::Delegate { agent, .. } => format!("the {} agent takes it", agent.name()),
        Decision::Tool { code } => format!("runs {}", code.lines().next().unwrap_or_default()),
        Decision::Respond(_) => "a reply, no work needed".to_owned(),
    }
}

async fn classify<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: Settings,
    agents: Agents,
) -> Result<(), AgentError> {
    let system = prompts::triage_classify(&state.request, &agents.listed(), &agents.choices());
    let schema = schemas::triage_classification(&agents.names());
    let answer = settings.judge(state, effects, system, schema).await?;
    let (agent, confidence) = parse_classification(&answer.text, agents).unzip();
    let confidence = confidence.unwrap_or(0.0);
    match agent {
        Some(agent) if confidence >= CONFIDENT => {
            effects.emit(AgentEvent::Status(format!(
                "triage: the {} agent takes it (confidence {confidence:.2})",
                agent.name()
            )));
            state.triage.decision = Some(Decision::Delegate {
                agent,
                task: state.request.clone(),
            });
        }
        _ => effects.emit(AgentEvent::Status("triage: planning".to_owned())),
    }
    Ok(())
}

/// The agent and confidence of a classification's JSON, if it has both
/// and the agent is one of `agents`.
pub fn parse_classification(text: &str, agents: Agents) -> Option<(Agent, f64)> {
    json_objects(text).find_map(|value| {
        let agent = agents.parse(value.get("agent")?.as_str()?)?;
        let confidence = match value.get("confidence")? {
            Value::Number(n) => n.as_f64()?,
            Value::String(s) => s.trim().trim_end_matches('%').parse().ok()?,
            _ => return None,
        };
        // "95" and "95%" mean a percentage.
        let confidence = if confidence > 1.0 {
            confidence / 100.0
        } else {
            confidence
        };
        Some((agent, confidence))
    })
}

async fn plan<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: Settings,
    agents: Agents,
) -> Result<(), AgentError> {
    let namespace = effects.namespace().await;
    let system = prompts::triage_plan(
        &state.pinned_namespace(&namespace),
        &state.recent_cells,
        &state.skills,
        &agents.listed(),
        &agents.choices(),
    );
    let schema = schemas::triage_plan(&agents.names(), planner::TOOLS);
    let answer = settings.judge(state, effects, system, schema).await?;
    let decision = parse_plan(&answer.text, &state.request, agents);
    effects.emit(AgentEvent::Status(format!(
        "triage: {}",
        describe(&decision)
    )));
    state.triage.decision = Some(decision);
    Ok(())
}

/// The decision in a plan's JSON; anything unreadable (or an agent not
/// among `agents`) hands the request to the default agent, which can always
/// make progress.
pub fn parse_plan(text: &str, request: &str, agents: Agents) -> Decision {
    let fallback = || Decision::Delegate {
        agent: Agent::Default,
        task: request.to_owned(),
    };
    let Some(plan) = json_objects(text).find(|value| value.get("action").is_some()) else {
        return fallback();
    };
    let field = |key: &str| match plan.get(key) {
        Some(Value::String(text)) => text.trim().to_owned(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    match field("action").to_ascii_lowercase().as_str() {
        "tool" => {
            let name = field("tool");
            if planner::TOOLS.contains(&name.as_str()) {
                Decision::Tool {
                    code: format!("print({})", tool_call(&name, &field("input"))),
                }
            } else {
                fallback()
            }
        }
        "respond" if !field("response").is_empty() => Decision::Respond(field("response")),
        _ => {
            let agent = agents.parse(&field("agent")).unwrap_or(Agent::Default);
            let task = match field("task") {
                task if task.is_empty() => request.to_owned(),
                task => task,
            };
            Decision::Delegate { agent, task }
        }
    }
}

/// Runs the chosen agent's graph on the task, within this run: its turns,
/// panels and answer are this run's. It gets its own turn limit, or the
/// run's, if that is lower.
async fn delegate<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: Settings,
    max_turns: u32,
) -> Result<(), AgentError> {
    let Some(Decision::Delegate { agent, task }) = state.triage.decision.clone() else {
        return Err(AgentError::Graph("delegate without an agent".into()));
    };
    if task != state.request {
        // The task stands for the request when it is the last word; else it
        // follows (and is merged with the user's message before it when sent).
        match state.conversation.last_mut() {
            Some(last) if last.role == Role::User && last.content == state.request => {
                last.content = task.clone();
            }
            _ => state.conversation.push(ChatMessage::user(task.clone())),
        }
    }
    let request = std::mem::replace(&mut state.request, task);
    let turns = agent.turns().min(max_turns);
    let saved_max_turns = std::mem::replace(&mut state.max_turns, state.turn + turns);
    let execute = settings.execute;
    let ended = match agent {
        Agent::Default => {
            default_graph::<E>(settings, turns)
                .run(state, effects)
                .await
        }
        Agent::Analyst => {
            analyst_graph::<E>(settings, turns)
                .run(state, effects)
                .await
        }
        Agent::Planner => {
            planner_graph::<E>(settings, turns, false)
                .run(state, effects)
                .await
        }
        Agent::Claude => {
            // Its calls go to the CLI, whose model has a larger window.
            let settings = Settings {
                context_tokens: settings.context_tokens.max(claude_cli::CONTEXT_TOKENS),
                ..settings
            };
            effects.use_model(ModelChoice::ClaudeCli);
            let ended = default_graph::<E>(settings, turns)
                .run(state, effects)
                .await;
            effects.use_model(ModelChoice::Configured);
            ended
        }
    };
    state.request = request;
    state.max_turns = saved_max_turns;
    ended?;
    state.triage.agent_outcome = state.outcome.take();
    match state.triage.agent_outcome {
        // Its own review found it cannot be done; another pass would not help.
        Some(Outcome::CannotBeDone) => state.outcome = Some(Outcome::CannotBeDone),
        // --no-exec: the code was shown, nothing ran to review.
        Some(Outcome::Answered) if !execute => state.outcome = Some(Outcome::Answered),
        _ => {}
    }
    Ok(())
}

async fn tool<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    execute: bool,
) -> Result<(), AgentError> {
    let Some(Decision::Tool { code }) = state.triage.decision.clone() else {
        return Err(AgentError::Graph("tool without a call".into()));
    };
    state.pending = vec![CodeBlock { code }];
    let ran = run_pending(state, effects, execute).await?;
    if execute {
        state.conversation.push(ChatMessage::user(ran.report));
    } else {
        state.outcome = Some(Outcome::Answered);
    }
    Ok(())
}

fn respond<E: Effects>(state: &mut AgentState, effects: &mut E) -> Result<(), AgentError> {
    let Some(Decision::Respond(text)) = state.triage.decision.clone() else {
        return Err(AgentError::Graph("respond without a reply".into()));
    };
    effects.emit(AgentEvent::Answer(text.clone()));
    state
        .conversation
        .push(ChatMessage::assistant(text.clone()));
    state.answer = text;
    state.outcome = Some(Outcome::Answered);
    Ok(())
}

/// Fixes the pass's failed code without the model when a known repair
/// applies, and runs the fix.
async fn repair<E: Effects>(state: &mut AgentState, effects: &mut E) -> Result<(), AgentError> {
    let Some(failed) = pass_failure(state).cloned() else {
        return Ok(());
    };
    let Some(fix) = effects.repair(&failed.code, &failed.output).await else {
        return Ok(());
    };
    effects.emit(AgentEvent::Status(format!("repair: {}", fix.change)));
    state.pending = vec![CodeBlock { code: fix.code }];
    let ran = run_pending(state, effects, true).await?;
    let report = format!(
        "The failed code was repaired ({}).\n{}",
        fix.change, ran.report
    );
    state.conversation.push(ChatMessage::user(report));
    Ok(())
}

async fn review<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: Settings,
    max_reviews: u32,
) -> Result<(), AgentError> {
    // The judge answers a user message; after an agent's answer, one asks.
    let asked = state
        .conversation
        .last()
        .is_some_and(|m| m.role == Role::Assistant);
    if asked {
        state
            .conversation
            .push(ChatMessage::user(prompts::REVIEW_NOW.to_owned()));
    }
    let system = prompts::reflect(&state.request);
    let answer = settings
        .judge(state, effects, system, schemas::verdict())
        .await;
    if asked {
        state.conversation.pop();
    }
    let verdict = parse_verdict(&answer?.text);
    effects.emit(AgentEvent::Verdict(verdict.clone()));
    if verdict.is_complete {
        state.outcome = Some(match state.triage.agent_outcome {
            Some(Outcome::Answered) if state.executions.is_empty() => Outcome::Answered,
            _ => Outcome::Complete,
        });
        if !asked {
            // Unless the agent's own last word was the answer already.
            close_with_answer(state, effects, &verdict.answer);
        }
    } else if verdict.cannot_fix {
        state.outcome = Some(Outcome::CannotBeDone);
    } else {
        state.triage.reviews += 1;
        if state.triage.reviews >= max_reviews {
            state.outcome = Some(Outcome::MaxTurns);
        } else {
            let feedback = prompts::not_done_yet(&verdict.reasoning, &verdict.next_action);
            state.conversation.push(ChatMessage::user(feedback));
        }
    }
    state.verdict = Some(verdict);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Execution;
    use crate::agent::graph::RunEnd;
    use crate::agent::script::{Script, latest, ok};

    const DONE: &str = r#"{"is_complete": true, "reasoning": "met", "next_action": ""}"#;
    const NOT_DONE: &str =
        r#"{"is_complete": false, "reasoning": "no chart yet", "next_action": "plot it"}"#;
    const UNSURE: &str = r#"{"agent": "planner", "confidence": 0.4}"#;

    /// Answers Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, llama.cpp server,
    /// temperature 0) wrote with the classification and plan schemas.
    const RECORDED_LOCAL_CLASSIFICATION: &str =
        "{\n  \"agent\": \"default\",\n  \"confidence\": 0.9\n}";
    const RECORDED_LOCAL_RESPOND: &str = "{\n  \"action\": \"respond\",\n  \"reasoning\": \"Hello! How can I assist you today? Is there something specific you'd like to know or discuss? I'm here to help with any questions or tasks you might have. Let me know how I can assist you.\",\n  \"response\": \"Hello! How can I assist you today? Is there something specific you'd like to know or discuss? I'm here to help with any questions or tasks you might have. Let me know how I can assist you.\"\n}";
    const RECORDED_LOCAL_TOOL: &str = "{\n  \"action\": \"tool\",\n  \"reasoning\": \"To load data from a CSV file and plot the price column, you can use Python's pandas library for data manipulation and matplotlib for plotting. Here's a step-by-step guide on how to do it:\",\n  \"tool\": \"peek\",\n  \"input\": \"data.csv\"\n}";

    #[test]
    fn answers_recorded_from_the_local_model_with_the_schemas() {
        assert_eq!(
            parse_classification(RECORDED_LOCAL_CLASSIFICATION, WITHOUT_CLAUDE),
            Some((Agent::Default, 0.9))
        );
        match parse_plan(RECORDED_LOCAL_RESPOND, "hello there!", WITHOUT_CLAUDE) {
            Decision::Respond(text) => assert!(text.starts_with("Hello! How can I assist you")),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            parse_plan(RECORDED_LOCAL_TOOL, "plot data.csv", WITHOUT_CLAUDE),
            Decision::Tool {
                code: format!("print({})", tool_call("peek", "data.csv")),
            }
        );
    }

    fn settings(execute: bool) -> Settings {
        Settings {
            model: "test-model".into(),
            max_tokens: 1000,
            context_tokens: 100_000,
            execute,
            once: false,
            sampling: Default::default(),
        }
    }

    const WITHOUT_CLAUDE: Agents = Agents { claude: false };
    const WITH_CLAUDE: Agents = Agents { claude: true };

    fn run(script: &mut Script, request: &str, reviews: u32, execute: bool) -> AgentState {
        run_with(script, request, reviews, execute, WITHOUT_CLAUDE)
    }

    fn run_with(
        script: &mut Script,
        request: &str,
        reviews: u32,
        execute: bool,
        agents: Agents,
    ) -> AgentState {
        let mut state = AgentState::new(request, Vec::new(), reviews);
        let graph = triage_graph::<Script>(settings(execute), reviews, agents);
        let end = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(graph.run(&mut state, script))
            .unwrap();
        assert!(matches!(end, RunEnd::Finished { .. }), "{end:?}");
        state
    }

    fn context() -> Context {
        Context {
            variables: vec!["df".into(), "s".into()],
            last_error: Some("1/0\n\nZeroDivisionError: division by zero".into()),
        }
    }

    fn statuses(script: &Script) -> Vec<String> {
        script
            .events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Status(line) => Some(line.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn plain_requests_are_planned_from_their_words() {
        let tool = |request: &str| match textual_plan(request, &context()) {
            Some(Decision::Tool { code }) => code,
            other => panic!("{request}: {other:?}"),
        };
        assert_eq!(tool("describe df"), "print(describe(df))");
        assert_eq!(tool("Please show `df`."), "display(df)");
        assert!(tool("plot s").contains("s.plot() if hasattr(s, 'plot') else plt.plot(s)"));
        assert_eq!(
            tool("read data/notes.txt"),
            r#"print(read("data/notes.txt"))"#
        );
        assert_eq!(tool("open notes.txt"), r#"print(read("notes.txt"))"#);
        assert!(matches!(
            textual_plan("Thanks!", &context()),
            Some(Decision::Respond(reply)) if reply == "You're welcome."
        ));
        let Some(Decision::Delegate { agent, task }) =
            textual_plan("Explain the last error", &context())
        else {
            panic!("the last error goes to an agent");
        };
        assert_eq!(agent, Agent::Default);
        assert!(task.starts_with("Explain the last error\n") && task.contains("ZeroDivisionError"));
        for unplanned in [
            "describe nothing_here",
            "show me the data",
            "plot the prices by month",
            "read",
            "what is a list?",
        ] {
            assert_eq!(textual_plan(unplanned, &context()), None, "{unplanned}");
        }
        // Without a failed cell there is no error to explain.
        let clean = Context::default();
        assert_eq!(textual_plan("explain the last error", &clean), None);
    }

    #[test]
    fn odd_requests_and_answers_never_panic() {
        for text in [
            "",
            " ",
            "please",
            "Please ",
            "please show",
            "show",
            "show ✓",
            "read .",
            "read /",
            "plot 日本",
            "?!.",
            "explain the last error",
            "hi!!!",
            "describe `",
            "open a.b.c",
        ] {
            let _ = textual_plan(text, &context());
            let _ = parse_plan(text, "req", WITHOUT_CLAUDE);
            let _ = parse_classification(text, WITHOUT_CLAUDE);
        }
        for answer in [
            r#"{"action": "tool", "tool": "peek", "input": {"text": "x"}}"#,
            r#"{"action": null}"#,
            r#"{"agent": "default", "confidence": "high"}"#,
            r#"{"agent": "default", "confidence": -1e308}"#,
        ] {
            let _ = parse_plan(answer, "req", WITHOUT_CLAUDE);
            let _ = parse_classification(answer, WITHOUT_CLAUDE);
        }
    }

    #[test]
    fn classifications_and_plans_are_read_leniently() {
        assert_eq!(
            parse_classification(
                r#"Sure: {"agent": "analyst", "confidence": 0.93}"#,
                WITHOUT_CLAUDE
            ),
            Some((Agent::Analyst, 0.93))
        );
        assert_eq!(
            parse_classification(
                r#"{"agent": "agent:planner", "confidence": "95%"}"#,
                WITHOUT_CLAUDE
            ),
            Some((Agent::Planner, 0.95))
        );
        assert_eq!(
            parse_classification(r#"{"agent": "planner"}"#, WITHOUT_CLAUDE),
            None
        );
        assert_eq!(
            parse_classification(r#"{"agent": "nobody", "confidence": 1}"#, WITHOUT_CLAUDE),
            None
        );

        let plan = r#"{"action": "delegate", "agent": "analyst", "task": "explain the trend"}"#;
        assert_eq!(
            parse_plan(plan, "req", WITHOUT_CLAUDE),
            Decision::Delegate {
                agent: Agent::Analyst,
                task: "explain the trend".into()
            }
        );
        let plan = r#"```json
{"action": "tool", "tool": "describe", "input": "df"}
```"#;
        assert_eq!(
            parse_plan(plan, "req", WITHOUT_CLAUDE),
            Decision::Tool {
                code: "print(describe(df))".into()
            }
        );
        assert_eq!(
            parse_plan(
                r#"{"action": "respond", "response": "Hi!"}"#,
                "req",
                WITHOUT_CLAUDE
            ),
            Decision::Respond("Hi!".into())
        );
        let fallback = Decision::Delegate {
            agent: Agent::Default,
            task: "req".into(),
        };
        for unreadable in [
            "no idea",
            r#"{"action": "tool", "tool": "rm_rf", "input": "/"}"#,
            r#"{"action": "respond", "response": ""}"#,
            r#"{"action": "delegate", "agent": "nobody"}"#,
        ] {
            assert_eq!(
                parse_plan(unreadable, "req", WITHOUT_CLAUDE),
                fallback,
                "{unreadable}"
            );
        }
    }

    #[test]
    fn the_claude_agent_is_chosen_only_when_installed() {
        let classification = r#"{"agent": "claude", "confidence": 0.95}"#;
        assert_eq!(parse_classification(classification, WITHOUT_CLAUDE), None);
        assert_eq!(
            parse_classification(classification, WITH_CLAUDE),
            Some((Agent::Claude, 0.95))
        );
        let plan = r#"{"action": "delegate", "agent": "claude", "task": "fit a model"}"#;
        let to = |agents| match parse_plan(plan, "req", agents) {
            Decision::Delegate { agent, .. } => agent,
            other => panic!("{other:?}"),
        };
        assert_eq!(to(WITHOUT_CLAUDE), Agent::Default);
        assert_eq!(to(WITH_CLAUDE), Agent::Claude);
        assert!(!WITHOUT_CLAUDE.listed().contains("claude"));
        assert!(WITH_CLAUDE.listed().contains("- claude: "));
        assert_eq!(
            WITH_CLAUDE.choices(),
            r#""default" or "analyst" or "planner" or "claude""#
        );
    }

    #[test]
    fn work_handed_to_claude_goes_to_the_cli_and_the_review_does_not() {
        let mut script = Script::new(
            &[
                r#"{"agent": "claude", "confidence": 0.95}"#,
                "```python\nprint(6*7)\n```",
                DONE, // the default graph's own reflection, by the CLI
                DONE, // the triage review, by the run's provider
            ],
            ok,
        );
        let state = run_with(&mut script, "fit a model", 3, true, WITH_CLAUDE);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        assert_eq!(script.executed, ["print(6*7)"]);
        use ModelChoice::{ClaudeCli, Configured};
        assert_eq!(
            script.models,
            [Configured, ClaudeCli, ClaudeCli, Configured]
        );
        assert!(
            statuses(&script)
                .contains(&"triage: the claude agent takes it (confidence 0.95)".to_owned())
        );
        assert!(script.requests[0].system.contains("- claude: "));
    }

    #[test]
    fn a_plain_request_runs_its_tool_without_planning_and_is_reviewed() {
        let mut script = Script::new(&[DONE], ok);
        let state = run(&mut script, "describe x", 3, true);
        assert_eq!(script.nodes, ["pre_plan", "tool", "review"]);
        assert_eq!(script.executed, ["print(describe(x))"]);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        assert_eq!(
            statuses(&script),
            ["triage: runs print(describe(x)) (no model call)"]
        );
        // The review saw what the tool printed.
        let review = &script.requests[0];
        assert!(review.messages.last().unwrap().content.contains("42"));
    }

    #[test]
    fn a_greeting_is_answered_without_any_model_call() {
        let mut script = Script::new(&[], ok);
        let state = run(&mut script, "hello", 3, true);
        assert_eq!(script.nodes, ["pre_plan", "respond"]);
        assert!(script.requests.is_empty());
        assert_eq!(state.outcome, Some(Outcome::Answered));
        assert!(state.answer.starts_with("Hello!"));
    }

    #[test]
    fn a_confident_classification_hands_the_work_to_that_agent() {
        let mut script = Script::new(
            &[
                r#"{"agent": "default", "confidence": 0.97}"#,
                "```python\nprint(6*7)\n```",
                DONE, // the default graph's own reflection
                DONE, // the triage review
            ],
            ok,
        );
        let state = run(&mut script, "compute six times seven", 3, true);
        assert_eq!(
            script.nodes,
            [
                "pre_plan", "classify", "delegate", "generate", "extract", "execute", "reflect",
                "review"
            ]
        );
        assert_eq!(script.executed, ["print(6*7)"]);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        assert_eq!(state.turn, 1);
        assert_eq!(state.max_turns, 3, "the run's own limit is restored");
        // The classification saw the request and the agents.
        let classify = &script.requests[0].system;
        assert!(classify.contains("compute six times seven") && classify.contains("- planner:"));
    }

    #[test]
    fn an_unsure_classification_leads_to_a_plan_and_a_short_review_loop() {
        let mut script = Script::new(
            &[
                UNSURE,
                r#"{"action": "tool", "tool": "describe", "input": "x"}"#,
                NOT_DONE,
                UNSURE,
                r#"{"action": "delegate", "agent": "planner", "task": "plot x"}"#,
                "Final Answer: plotted.",
                DONE,
            ],
            ok,
        );
        let state = run(&mut script, "chart x over time", 3, true);
        assert_eq!(
            script.nodes,
            [
                "pre_plan", "classify", "plan", "tool", "review", "pre_plan", "classify", "plan",
                "delegate", "planner", "review"
            ]
        );
        assert_eq!(state.triage.reviews, 1);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        // The second plan was told why the first pass fell short.
        let second_plan = &script.requests[4];
        let told = latest(second_plan);
        assert!(
            told.contains("no chart yet") && told.contains("plot it"),
            "{told}"
        );
        // The planner was given the plan's task, and the request is restored.
        let planner = &script.requests[5];
        assert!(
            latest(planner).starts_with(&format!("{told}\n\nplot x")),
            "{}\n---\n{told}",
            latest(planner)
        );
        assert_eq!(
            planner
                .messages
                .first()
                .unwrap()
                .content
                .matches("chart x")
                .count(),
            1
        );
        assert_eq!(state.request, "chart x over time");
        assert_eq!(state.answer, "plotted.");
    }

    #[test]
    fn reviews_stop_at_the_limit_and_at_cannot_fix() {
        let plan = r#"{"action": "tool", "tool": "describe", "input": "x"}"#;
        let mut script = Script::new(&[UNSURE, plan, NOT_DONE, UNSURE, plan, NOT_DONE], ok);
        let state = run(&mut script, "draw x over time", 2, true);
        assert_eq!(state.outcome, Some(Outcome::MaxTurns));
        assert_eq!(state.triage.reviews, 2);

        let cannot = r#"{"is_complete": false, "cannot_fix": true, "reasoning": "no such file", "next_action": ""}"#;
        let mut script = Script::new(&[UNSURE, plan, cannot], ok);
        let state = run(&mut script, "draw x over time", 5, true);
        assert_eq!(state.outcome, Some(Outcome::CannotBeDone));
        assert_eq!(script.nodes.last(), Some(&"review"));
    }

    fn fails_without_numpy(code: &str) -> Execution {
        let failed = !code.starts_with("import numpy");
        Execution {
            code: code.into(),
            output: if failed {
                "NameError: name 'np' is not defined".into()
            } else {
                "[1. 2.]".into()
            },
            shown: None,
            failed,
            finished: false,
            changes: Vec::new(),
            rich_outputs: 0,
        }
    }

    #[test]
    fn a_known_failure_is_repaired_without_the_model_then_reviewed() {
        let plan = r#"{"action": "tool", "tool": "peek", "input": "np.ones(2)"}"#;
        let mut script = Script::new(&[UNSURE, plan, DONE], fails_without_numpy);
        let state = run(&mut script, "ones", 3, true);
        assert_eq!(
            script.nodes,
            ["pre_plan", "classify", "plan", "tool", "repair", "review"]
        );
        assert_eq!(
            script.executed,
            [
                "print(peek(np.ones(2)))",
                "import numpy as np\nprint(peek(np.ones(2)))"
            ]
        );
        assert!(statuses(&script).contains(&"repair: added import numpy as np".to_owned()));
        let review = &script.requests[2].messages.last().unwrap().content;
        assert!(
            review.contains("repaired (added import numpy as np)") && review.contains("[1. 2.]")
        );
        assert_eq!(state.outcome, Some(Outcome::Complete));
    }

    #[test]
    fn the_review_after_an_agents_answer_is_asked_for_and_not_kept() {
        let mut script = Script::new(
            &[
                r#"{"agent": "analyst", "confidence": 0.99}"#,
                r#"{"needs_code": false, "needs_evaluation": false}"#,
                "A list is ordered.",
                DONE,
            ],
            ok,
        );
        let state = run(&mut script, "what is a list?", 3, true);
        let review = script.requests.last().unwrap();
        assert!(
            review
                .messages
                .last()
                .unwrap()
                .content
                .starts_with(prompts::REVIEW_NOW)
        );
        assert_eq!(
            state.conversation.last().unwrap().content,
            "A list is ordered."
        );
        assert_eq!(state.outcome, Some(Outcome::Answered));
    }

    #[test]
    fn no_exec_shows_the_tool_call_and_stops() {
        let mut script = Script::new(&[], ok);
        let state = run(&mut script, "describe x", 3, false);
        assert_eq!(script.nodes, ["pre_plan", "tool"]);
        assert!(script.executed.is_empty());
        assert_eq!(state.outcome, Some(Outcome::Answered));
    }
}
