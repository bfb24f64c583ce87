//! The default graph (seeds 000 and 002):
//!
//! ```text
//! generate -> extract -> (no code: end) -> execute -> reflect
//!     ^                                                  |
//!     +---- not complete and turns left -----------------+--> end
//! ```
//!
//! The reflection's reasoning and next step go into the conversation, so the
//! next generate turn builds on them, and a final text-only answer stays in
//! the conversation for the next `%%ask`.
//!
//! Cheap checks come before a model judges (see [`super::checks`]): a first
//! answer with no code for a request that needs some is sent back once; a
//! failed block, or a variable or file the request names that is not there,
//! means not done without asking; and a turn that only repeats the one
//! before is told so once, then the run stops. The review sees the request,
//! the code and its report, not the whole conversation.

use super::budget;
use super::checks;
use super::extract::{closed_code_blocks, code_blocks};
use super::graph::{Graph, NodeFn, Route};
use super::llm::{AnswerSchema, ChatMessage, ChatRequest};
use super::reflect::parse_verdict;
use super::schemas;
use super::{
    AgentError, AgentEvent, AgentState, ChatOutcome, Effects, Execution, Outcome, Showing, prompts,
};

/// Settings the nodes need besides the state.
#[derive(Debug, Clone)]
pub struct Settings {
    pub model: String,
    pub max_tokens: u32,
    /// The model's context window: what is sent is kept within it.
    pub context_tokens: usize,
    /// With `false`, code is shown but never run (`--no-exec`).
    pub execute: bool,
    /// With `true`, one answer and its code, no review (`--once`).
    pub once: bool,
    /// How the model samples (temperature, seed).
    pub sampling: super::llm::Sampling,
}

/// A cap on nodes per run, well above what the turn limit allows, so a
/// routing mistake cannot loop forever.
fn step_cap(max_turns: u32) -> usize {
    (max_turns as usize) * 4 + 4
}

/// The default graph for a run with `max_turns`.
pub fn default_graph<E: Effects>(settings: Settings, max_turns: u32) -> Graph<AgentState, E> {
    let generate_settings = settings.clone();
    let reflect_settings = settings.clone();
    let execute_enabled = settings.execute;
    let once = settings.once;
    Graph::new("generate", step_cap(max_turns))
        .node(
            "generate",
            node(move |s, e| Box::pin(generate(s, e, generate_settings.clone()))),
        )
        .node(
            "extract",
            node(move |s, _e| Box::pin(async move { extract(s, once) })),
        )
        .node(
            "execute",
            node(move |s, e| Box::pin(execute(s, e, execute_enabled, once))),
        )
        .node(
            "reflect",
            node(move |s, e| Box::pin(reflect(s, e, reflect_settings.clone()))),
        )
        .edge("generate", Route::To("extract"))
        .conditional_edge(
            "extract",
            &[Route::To("execute"), Route::To("generate"), Route::End],
            move |s: &AgentState| {
                if !s.pending.is_empty() {
                    Route::To("execute")
                } else if s.outcome.is_none() {
                    Route::To("generate")
                } else {
                    Route::End
                }
            },
        )
        .conditional_edge(
            "execute",
            &[Route::To("reflect"), Route::End],
            move |_s: &AgentState| {
                if execute_enabled && !once {
                    Route::To("reflect")
                } else {
                    Route::End
                }
            },
        )
        .conditional_edge(
            "reflect",
            &[Route::To("generate"), Route::End],
            |s: &AgentState| match s.outcome {
                Some(_) => Route::End,
                None => Route::To("generate"),
            },
        )
}

/// Answers of judging steps (reflect, plan) are short JSON (a verdict's
/// closing answer included); reasoning models spend part of this on hidden
/// reasoning first.
const JUDGEMENT_TOKENS: u32 = 1024;

impl Settings {
    /// Asks the model, with `system` as the system prompt, about the
    /// conversation so far, for an answer the user watches stream in.
    pub(super) async fn answer<E: Effects>(
        &self,
        state: &mut AgentState,
        effects: &mut E,
        system: String,
    ) -> Result<ChatOutcome, AgentError> {
        ask_model(
            state,
            effects,
            self,
            system,
            self.max_tokens,
            Showing::Prose,
            None,
        )
        .await
    }

    /// Like [`Settings::answer`], for an answer whose code blocks will run:
    /// each shows as a panel as soon as it is complete, and the node's
    /// [`run_pending`] shows only the rest.
    pub(super) async fn write_code<E: Effects>(
        &self,
        state: &mut AgentState,
        effects: &mut E,
        system: String,
    ) -> Result<ChatOutcome, AgentError> {
        let showing = Showing::ProseAndCode {
            turn: state.turn + 1,
        };
        let answer =
            ask_model(state, effects, self, system, self.max_tokens, showing, None).await?;
        state.blocks_shown = answer.blocks_shown;
        Ok(answer)
    }

    /// A short judgement of `review` alone (the request, the code and its
    /// report), not the whole conversation: it is all a judge needs, and
    /// costs a fraction of the tokens. The answer has the shape of `schema`
    /// where the provider enforces it.
    pub(super) async fn judge_alone<E: Effects>(
        &self,
        state: &mut AgentState,
        effects: &mut E,
        system: String,
        review: String,
        schema: AnswerSchema,
    ) -> Result<ChatOutcome, AgentError> {
        let request = ChatRequest {
            model: self.model.clone(),
            system,
            messages: budget::fit(
                "",
                &[ChatMessage::user(review)],
                self.context_tokens,
                JUDGEMENT_TOKENS,
            ),
            max_tokens: JUDGEMENT_TOKENS,
            sampling: self.sampling,
            schema: Some(schema),
        };
        let answer = effects.chat(request, Showing::Hidden).await?;
        state.usage.add(answer.usage);
        Ok(answer)
    }

    /// Like [`Settings::answer`], for a short judgement (a verdict, a plan)
    /// that the kernel reads rather than shows, in the shape of `schema`
    /// where the provider enforces it.
    pub(super) async fn judge<E: Effects>(
        &self,
        state: &mut AgentState,
        effects: &mut E,
        system: String,
        schema: AnswerSchema,
    ) -> Result<ChatOutcome, AgentError> {
        ask_model(
            state,
            effects,
            self,
            system,
            JUDGEMENT_TOKENS,
            Showing::Hidden,
            Some(schema),
        )
        .await
    }
}

/// One model call over the conversation so far; its usage is counted.
async fn ask_model<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: &Settings,
    system: String,
    max_tokens: u32,
    showing: Showing,
    schema: Option<AnswerSchema>,
) -> Result<ChatOutcome, AgentError> {
    let messages = budget::fit(
        &system,
        &state.conversation,
        settings.context_tokens,
        max_tokens,
    );
    let request = ChatRequest {
        model: settings.model.clone(),
        system,
        messages,
        max_tokens,
        sampling: settings.sampling,
        schema,
    };
    let answer = effects.chat(request, showing).await?;
    state.usage.add(answer.usage);
    Ok(answer)
}

pub(super) fn node<E: Effects>(
    f: impl for<'a> Fn(&'a mut AgentState, &'a mut E) -> super::graph::NodeFuture<'a>
    + Send
    + Sync
    + 'static,
) -> NodeFn<AgentState, E> {
    Box::new(f)
}

async fn generate<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: Settings,
) -> Result<(), AgentError> {
    let namespace = effects.namespace().await;
    state.namespace_names = checks::summary_names(&namespace);
    let system = prompts::system(
        &state.pinned_namespace(&namespace),
        &state.recent_cells,
        &state.skills,
    );
    let answer = settings.write_code(state, effects, system).await?;
    state.truncated = answer.truncated;
    state.record_answer(answer.text);
    Ok(())
}

fn extract(state: &mut AgentState, once: bool) -> Result<(), AgentError> {
    // A block cut off at the length limit would fail half-written.
    state.pending = if state.truncated {
        closed_code_blocks(&state.answer)
    } else {
        code_blocks(&state.answer)
    };
    if !state.pending.is_empty() {
        return Ok(());
    }
    if state.truncated && !once && state.turn < state.max_turns {
        state
            .conversation
            .push(ChatMessage::user(prompts::CUT_OFF.to_owned()));
        return Ok(());
    }
    // An answer with no code after a turn the review found unfinished only
    // claims what no code did: asked once to do it.
    let unfinished = state
        .verdict
        .as_ref()
        .filter(|verdict| verdict.parsed && !verdict.is_complete && !verdict.cannot_fix);
    if let Some(verdict) = unfinished
        && !once
        && !state.nudged_after_review
        && state.turn < state.max_turns
    {
        state.nudged_after_review = true;
        let reason = super::render::review_words(&verdict.reasoning);
        state
            .conversation
            .push(ChatMessage::user(prompts::still_unfinished(&reason)));
        return Ok(());
    }
    // An answer with no code before any ran cannot have done a request
    // that needs code: asked once to do it (a small model often answers
    // "3" to "store the count in `n`").
    let nudge = !once
        && state.executions.is_empty()
        && !state.nudged_for_code
        && state.turn < state.max_turns
        && checks::needs_code(&state.request, &state.namespace_names);
    if nudge {
        state.nudged_for_code = true;
        state
            .conversation
            .push(ChatMessage::user(prompts::CODE_PLEASE.to_owned()));
    } else {
        state.outcome = Some(Outcome::Answered);
    }
    Ok(())
}

async fn execute<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    enabled: bool,
    once: bool,
) -> Result<(), AgentError> {
    let before = state.executions.len();
    let ran = run_pending(state, effects, enabled).await?;
    state.last_turn_blocks = state.executions.len() - before;
    if !enabled || once {
        state.outcome = Some(Outcome::Answered);
    } else {
        state.conversation.push(ChatMessage::user(ran.report));
    }
    Ok(())
}

/// The panel of a block shown while the answer streamed that never ran.
const NOT_RUN: &str = "(not run: a block before it failed)";

/// What running a turn's blocks gave.
pub(super) struct BlocksRun {
    /// What the model is told about the blocks that ran.
    pub report: String,
    /// Whether a block failed (the blocks after it were not run).
    pub failed: bool,
}

/// Shows each pending block and, when `enabled`, runs it in order, stopping
/// at the first failure.
pub(super) async fn run_pending<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    enabled: bool,
) -> Result<BlocksRun, AgentError> {
    let blocks = std::mem::take(&mut state.pending);
    let shown = std::mem::take(&mut state.blocks_shown);
    let mut reports = Vec::new();
    let mut failed = false;
    for (index, block) in blocks.into_iter().enumerate() {
        let (turn, code) = (state.turn, block.code);
        if index >= shown {
            effects.emit(AgentEvent::Code {
                turn,
                block: index,
                code: code.clone(),
            });
        }
        if !enabled {
            continue;
        }
        let execution = effects.execute(&code).await?;
        reports.push(prompts::execution_report(
            &code,
            &execution.output,
            execution.failed,
            &execution.changes,
        ));
        failed = execution.failed;
        effects.emit(AgentEvent::Executed {
            turn,
            block: index,
            execution: execution.clone(),
        });
        state.executions.push(execution);
        if failed {
            // Later blocks likely depend on this one. Those already shown
            // (as the answer streamed) say that they did not run.
            for later in index + 1..shown {
                effects.emit(AgentEvent::Executed {
                    turn,
                    block: later,
                    execution: Execution {
                        code: String::new(),
                        output: NOT_RUN.to_owned(),
                        shown: None,
                        failed: true,
                        finished: false,
                        changes: Vec::new(),
                        rich_outputs: 0,
                    },
                });
            }
            break;
        }
    }
    Ok(BlocksRun {
        report: reports.join("\n\n"),
        failed,
    })
}

async fn reflect<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: Settings,
) -> Result<(), AgentError> {
    let verdict = match precheck(state, effects).await {
        Precheck::Judge { failed } => {
            let system = prompts::reflect(&state.request);
            let review = prompts::review_request(&state.request, this_turns_executions(state));
            let answer = settings
                .judge_alone(state, effects, system, review, schemas::verdict())
                .await?;
            let mut verdict = parse_verdict(&answer.text);
            // A failed block is never done; the review says whether another
            // turn can fix it.
            verdict.is_complete &= !failed;
            // "Cannot be done" with nothing failing (a small model reads a
            // warning so) gets one more turn before it is believed.
            if verdict.cannot_fix && !failed && !state.doubted_cannot_fix {
                state.doubted_cannot_fix = true;
                verdict.cannot_fix = false;
            }
            verdict
        }
        Precheck::NotDone(verdict) | Precheck::Done(verdict) => verdict,
        Precheck::Repeated => {
            if state.repeats > 1 || state.turn >= state.max_turns {
                state.outcome = Some(Outcome::Repeating);
            } else {
                state
                    .conversation
                    .push(ChatMessage::user(prompts::REPEATED.to_owned()));
            }
            return Ok(());
        }
    };
    effects.emit(AgentEvent::Verdict(verdict.clone()));
    if verdict.is_complete {
        state.outcome = Some(Outcome::Complete);
        close_with_answer(state, effects, &verdict.answer);
    } else if verdict.cannot_fix {
        // Said once, with the reason, instead of spending every turn left.
        state.outcome = Some(Outcome::CannotBeDone);
    } else if state.turn >= state.max_turns {
        state.outcome = Some(Outcome::MaxTurns);
    } else {
        let feedback = prompts::not_done_yet(&verdict.reasoning, &verdict.next_action);
        state.conversation.push(ChatMessage::user(feedback));
    }
    state.verdict = Some(verdict);
    Ok(())
}

/// What the checks before the review found.
enum Precheck {
    /// Nothing settles it: the model judges (`failed`: whether the last
    /// block failed, in a way only a review can tell fixable or not).
    Judge { failed: bool },
    /// Not done, and why, without asking.
    NotDone(super::reflect::Verdict),
    /// Done, without asking: what the request names exists, no block
    /// failed, and a figure it asks for was shown.
    Done(super::reflect::Verdict),
    /// The turn ran the code of the turn before with the same outcome.
    Repeated,
}

async fn precheck<E: Effects>(state: &mut AgentState, effects: &mut E) -> Precheck {
    let blocks = state.last_turn_blocks;
    if checks::repeated(&state.executions, blocks) {
        state.repeats += 1;
        return Precheck::Repeated;
    }
    let not_done = |reasoning: String, next_action: &str| {
        Precheck::NotDone(super::reflect::Verdict {
            is_complete: false,
            cannot_fix: false,
            reasoning,
            next_action: next_action.to_owned(),
            answer: String::new(),
            parsed: true,
        })
    };
    // (A block the guard or the user did not allow is not an error to fix:
    // the review decides what it means for the request.)
    let last = state.executions.last();
    if let Some(failed) = last.filter(|e| e.failed && !checks::refused(&e.output)) {
        let error = checks::error_line(&failed.output).to_owned();
        if checks::may_be_unfixable(&error) {
            return Precheck::Judge { failed: true };
        }
        return not_done(
            format!("the code failed ({error})"),
            "fix the cause of the error and run the corrected code",
        );
    }
    let targets = checks::targets(&state.request);
    if !targets.is_empty() {
        let missing = effects.missing(&targets).await;
        if !missing.is_empty() {
            let mut absent: Vec<String> = missing.names.iter().map(|n| format!("`{n}`")).collect();
            absent.extend(missing.files.iter().cloned());
            return not_done(
                format!("{} does not exist yet", absent.join(", ")),
                "run code that creates it as the request says",
            );
        }
    }
    let figure_shown = state.executions.iter().any(|e| e.rich_outputs > 0);
    let wants_figure = checks::wants_figure(&state.request);
    if wants_figure && !figure_shown {
        return not_done(
            "no figure was shown yet".to_owned(),
            "draw it and show it (plt.show())",
        );
    }
    // What the request names to make is there (and the figure it wants):
    // done, with no judgement to get wrong. Anything else is for the review.
    if !targets.is_empty() || wants_figure {
        let made = made_lines(state, &targets);
        return Precheck::Done(super::reflect::Verdict {
            is_complete: true,
            cannot_fix: false,
            reasoning: String::new(),
            next_action: String::new(),
            answer: made,
            parsed: true,
        });
    }
    Precheck::Judge { failed: false }
}

/// The variables the request named, as the last code that changed them
/// left them (`n_fruits: int = 3`), one per line.
fn made_lines(state: &AgentState, targets: &checks::Targets) -> String {
    let mut lines = Vec::new();
    for name in &targets.names {
        let line = state
            .executions
            .iter()
            .rev()
            .flat_map(|e| e.changes.iter())
            .find(|line| line.split_once(':').is_some_and(|(n, _)| n == name));
        if let Some(line) = line {
            let line = line
                .rsplit_once(" (")
                .map_or(line.as_str(), |(text, _)| text);
            lines.push(line.to_owned());
        }
    }
    for file in &targets.files {
        lines.push(format!("{file} written"));
    }
    lines.join("\n")
}

/// The code the last turn ran, for the review.
fn this_turns_executions(state: &AgentState) -> &[Execution] {
    let start = state.executions.len() - state.last_turn_blocks.min(state.executions.len());
    &state.executions[start..]
}

/// Ends a finished run with the review's answer in plain words, when it
/// gave one: shown, kept in the conversation, and what `ask()` returns.
pub(super) fn close_with_answer<E: Effects>(state: &mut AgentState, effects: &mut E, answer: &str) {
    let answer = answer.trim();
    if answer.is_empty() {
        return;
    }
    effects.emit(AgentEvent::Answer(answer.to_owned()));
    state
        .conversation
        .push(ChatMessage::assistant(answer.to_owned()));
    state.answer = answer.to_owned();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::graph::RunEnd;
    use crate::agent::llm::Role;
    use crate::agent::script::{Script, fails_once, latest, ok};

    const DONE: &str = r#"{"is_complete": true, "reasoning": "answered", "next_action": ""}"#;
    const NOT_DONE: &str =
        r#"{"is_complete": false, "reasoning": "no total yet", "next_action": "sum the column"}"#;

    fn settings() -> Settings {
        Settings {
            model: "test-model".into(),
            max_tokens: 1000,
            context_tokens: 100_000,
            execute: true,
            once: false,
            sampling: Default::default(),
        }
    }

    fn run(script: &mut Script, state: &mut AgentState, settings: Settings) -> RunEnd {
        let graph = default_graph::<Script>(settings, state.max_turns);
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(graph.run(state, script))
            .unwrap()
    }

    fn nodes_run(script: &Script) -> Vec<&'static str> {
        script.nodes.clone()
    }

    #[test]
    fn text_only_answer_ends_after_one_call_and_stays_in_the_conversation() {
        let mut script = Script::new(&["Python lists are ordered."], ok);
        let mut state = AgentState::new("what is a list?", Vec::new(), 5);
        run(&mut script, &mut state, settings());
        assert_eq!(nodes_run(&script), ["generate", "extract"]);
        assert_eq!(state.outcome, Some(Outcome::Answered));
        assert_eq!(state.conversation.last().unwrap().role, Role::Assistant);
        assert!(script.executed.is_empty());
        // The namespace summary is in the system prompt; the message is the request.
        let request = &script.requests[0];
        assert!(request.system.contains("x: int = 1"), "{}", request.system);
        assert_eq!(latest(request), "what is a list?");
    }

    #[test]
    fn code_then_done() {
        let mut script = Script::new(&["```python\nprint(6*7)\n```", DONE], ok);
        let mut state = AgentState::new("compute", Vec::new(), 5);
        run(&mut script, &mut state, settings());
        assert_eq!(
            nodes_run(&script),
            ["generate", "extract", "execute", "reflect"]
        );
        assert_eq!(script.executed, ["print(6*7)"]);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        assert_eq!(state.usage.input_tokens, 20);
        // The model was shown the execution output before reflecting.
        let last = script.requests.last().unwrap();
        assert!(last.messages.last().unwrap().content.contains("42"));
        assert!(
            script
                .events
                .iter()
                .any(|e| matches!(e, AgentEvent::Code { code, .. } if code == "print(6*7)"))
        );
    }

    #[test]
    fn a_finished_run_ends_with_the_reviews_answer() {
        let done = r#"{"is_complete": true, "reasoning": "shown", "next_action": "", "answer": "The total is 42."}"#;
        let mut script = Script::new(&["```python\nprint(6*7)\n```", done], ok);
        let mut state = AgentState::new("total?", Vec::new(), 5);
        run(&mut script, &mut state, settings());
        assert_eq!(state.answer, "The total is 42.");
        let last = state.conversation.last().unwrap();
        assert_eq!(
            (last.role, last.content.as_str()),
            (Role::Assistant, "The total is 42.")
        );
        assert!(
            matches!(script.events.last(), Some(AgentEvent::Answer(a)) if a == "The total is 42.")
        );
        // Without an answer, the run ends as before.
        let mut script = Script::new(&["```python\nprint(6*7)\n```", DONE], ok);
        let mut state = AgentState::new("total?", Vec::new(), 5);
        run(&mut script, &mut state, settings());
        assert_eq!(state.conversation.last().unwrap().role, Role::User);
        assert!(
            !script
                .events
                .iter()
                .any(|e| matches!(e, AgentEvent::Answer(_)))
        );
    }

    #[test]
    fn multi_turn_through_reflection_feeds_reasoning_back() {
        let mut script = Script::new(
            &[
                "```python\nx = 1\n```",
                NOT_DONE,
                "```python\nprint(x + 1)\n```",
                DONE,
            ],
            ok,
        );
        let mut state = AgentState::new("sum it", Vec::new(), 5);
        run(&mut script, &mut state, settings());
        assert_eq!(state.turn, 2);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        // The second generate call saw the reviewer's reasoning and next step.
        let second_generate = &script.requests[2];
        let feedback = &second_generate.messages.last().unwrap().content;
        assert!(feedback.contains("no total yet") && feedback.contains("sum the column"));
        // Its system prompt was the first one's, though the namespace had
        // changed: a prompt cache reuses it, and the report said what changed.
        assert_eq!(second_generate.system, script.requests[0].system);
        assert!(!second_generate.system.contains("blocks_run"));
    }

    #[test]
    fn a_review_that_finds_the_request_impossible_ends_the_run() {
        let cannot = r#"{"is_complete": false, "cannot_fix": true, "reasoning": "sales.csv does not exist", "next_action": ""}"#;
        let mut script = Script::new(
            &[
                "```python
open('sales.csv')
```",
                cannot,
            ],
            |code| Execution {
                output: "FileNotFoundError: [Errno 2] No such file or directory: 'sales.csv'"
                    .into(),
                failed: true,
                ..ok(code)
            },
        );
        let mut state = AgentState::new("sum sales.csv", Vec::new(), 5);
        run(&mut script, &mut state, settings());
        assert_eq!(state.outcome, Some(Outcome::CannotBeDone));
        assert_eq!(state.turn, 1);
        assert_eq!(
            nodes_run(&script),
            ["generate", "extract", "execute", "reflect"]
        );
    }

    #[test]
    fn a_claim_without_code_after_an_unfinished_turn_is_sent_back_once() {
        let mut script = Script::new(
            &[
                "```python\n1/0\n```",
                "It is done now.",
                "```python\nprint('fixed')\n```",
                DONE,
            ],
            fails_once,
        );
        let mut state = AgentState::new("divide", Vec::new(), 5);
        run(&mut script, &mut state, settings());
        assert_eq!(script.executed, ["1/0", "print('fixed')"]);
        let told = latest(&script.requests[2]);
        assert!(told.starts_with("The request is not finished"), "{told}");
        assert!(told.contains("ZeroDivisionError"), "{told}");
        assert_eq!(state.outcome, Some(Outcome::Complete));
    }

    #[test]
    fn cannot_be_done_with_nothing_failing_gets_one_more_turn() {
        let cannot = r#"{"is_complete": false, "cannot_fix": true, "reasoning": "a warning", "next_action": ""}"#;
        let mut script = Script::new(
            &[
                "```python\nprint(1)\n```",
                cannot,
                "```python\nprint(2)\n```",
                cannot,
            ],
            ok,
        );
        let mut state = AgentState::new("print a number", Vec::new(), 5);
        run(&mut script, &mut state, settings());
        assert_eq!(state.outcome, Some(Outcome::CannotBeDone));
        assert_eq!(state.turn, 2);
    }

    #[test]
    fn max_turns_reached() {
        let mut script = Script::new(
            &[
                "```python\na = 1\n```",
                NOT_DONE,
                "```python\nb = 2\n```",
                NOT_DONE,
            ],
            ok,
        );
        let mut state = AgentState::new("never done", Vec::new(), 2);
        let end = run(&mut script, &mut state, settings());
        assert_eq!(state.outcome, Some(Outcome::MaxTurns));
        assert_eq!(state.turn, 2);
        assert!(matches!(end, RunEnd::Finished { steps: 8 }));
    }

    #[test]
    fn error_recovery_the_failure_reaches_the_next_turn_without_a_review() {
        let mut script = Script::new(
            &[
                "```python\n1/0\n```\n```python\nprint('never')\n```",
                "```python\nprint('fixed')\n```",
                DONE,
            ],
            fails_once,
        );
        let mut state = AgentState::new("divide", Vec::new(), 5);
        run(&mut script, &mut state, settings());
        // The block after the failing one was not run.
        assert_eq!(script.executed, ["1/0", "print('fixed')"]);
        // A failed block is not done: no model is asked, the next turn is
        // told the error.
        let next_turn = &script.requests[1];
        let told: Vec<&str> = next_turn
            .messages
            .iter()
            .map(|m| m.content.as_str())
            .collect();
        assert!(
            told.iter().any(|m| m.contains("ZeroDivisionError")),
            "{told:?}"
        );
        assert!(
            matches!(&script.events[..], [_, _, AgentEvent::Verdict(v), ..] if v.reasoning.contains("ZeroDivisionError")),
            "{:?}",
            script.events
        );
        assert_eq!(state.outcome, Some(Outcome::Complete));
        assert_eq!(script.requests.len(), 3);
    }

    #[test]
    fn an_answer_without_code_to_a_request_that_needs_some_is_sent_back_once() {
        let mut script = Script::new(&["3", "```python\nn = 3\n```", DONE], ok);
        let mut state = AgentState::new("Count the fruits and store it in `n`.", Vec::new(), 5);
        run(&mut script, &mut state, settings());
        assert_eq!(script.executed, ["n = 3"]);
        let second = &script.requests[1];
        assert!(latest(second).starts_with(prompts::CODE_PLEASE));
        assert_eq!(state.outcome, Some(Outcome::Complete));

        // A question that needs no code is answered in words.
        let mut script = Script::new(&["A left join keeps every row of the left table."], ok);
        let mut state = AgentState::new("What does a left join do?", Vec::new(), 5);
        run(&mut script, &mut state, settings());
        assert_eq!(state.outcome, Some(Outcome::Answered));
        assert_eq!(script.requests.len(), 1);
    }

    #[test]
    fn a_named_variable_decides_without_a_review_whether_the_request_is_done() {
        let mut script = Script::new(
            &["```python\nprint(3)\n```", "```python\ntotal = 3\n```"],
            |code| Execution {
                changes: code
                    .strip_prefix("total = ")
                    .map(|v| vec![format!("total: int = {v} (new)")])
                    .unwrap_or_default(),
                ..ok(code)
            },
        );
        let mut state = AgentState::new("Store the sum in `total`.", Vec::new(), 5);
        run(&mut script, &mut state, settings());
        // `total` was missing after the first turn: told so, no review call;
        // there after the second: done, no review call either.
        let second = &script.requests[1];
        let last = &second.messages.last().unwrap().content;
        assert!(last.contains("`total` does not exist yet"), "{last}");
        assert_eq!(script.requests.len(), 2);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        assert_eq!(state.answer, "total: int = 3");
    }

    #[test]
    fn the_review_reads_the_request_and_the_turns_facts_only() {
        let mut script = Script::new(&["Let me look.\n```python\nprint(x)\n```", DONE], ok);
        let history = vec![
            ChatMessage::user("an older request"),
            ChatMessage::assistant("an older answer"),
        ];
        let mut state = AgentState::new("What is x?", history, 5);
        run(&mut script, &mut state, settings());
        let review = &script.requests[1];
        assert_eq!(review.messages.len(), 1);
        let told = &review.messages[0].content;
        assert!(told.starts_with("Request:\nWhat is x?\n"), "{told}");
        assert!(
            told.contains("```python\nprint(x)\n```\nIt printed:\n42\n"),
            "{told}"
        );
        assert!(!told.contains("older"), "{told}");
        assert_eq!(state.outcome, Some(Outcome::Complete));
    }

    #[test]
    fn an_answer_cut_off_mid_block_runs_nothing_of_it_and_asks_again() {
        let mut script = Script::new(
            &[
                "```python\nrows = [1, 2,",
                "```python\nrows = [1, 2]\n```",
                DONE,
            ],
            ok,
        );
        script.truncate_first = true;
        let mut state = AgentState::new("make rows", Vec::new(), 5);
        run(&mut script, &mut state, settings());
        assert_eq!(script.executed, ["rows = [1, 2]"]);
        assert!(latest(&script.requests[1]).starts_with(prompts::CUT_OFF));
    }

    #[test]
    fn the_same_code_with_the_same_result_is_told_once_then_the_run_stops() {
        let mut script = Script::new(
            &[
                "```python\nprint(1)\n```",
                NOT_DONE,
                "```python\nprint(1)\n```",
                "```python\nprint(1)\n```",
            ],
            ok,
        );
        let mut state = AgentState::new("print one", Vec::new(), 5);
        run(&mut script, &mut state, settings());
        assert_eq!(state.outcome, Some(Outcome::Repeating));
        let third_turn = &script.requests[3];
        let told = &third_turn.messages.last().unwrap().content;
        assert!(told.contains(prompts::REPEATED), "{told}");
        assert_eq!(script.requests.len(), 4);
    }

    #[test]
    fn no_exec_shows_code_but_runs_nothing() {
        let mut script = Script::new(&["```python\nimport os\n```"], ok);
        let mut state = AgentState::new("show me", Vec::new(), 5);
        let settings = Settings {
            execute: false,
            ..settings()
        };
        run(&mut script, &mut state, settings);
        assert!(script.executed.is_empty());
        assert!(
            script
                .events
                .iter()
                .any(|e| matches!(e, AgentEvent::Code { .. }))
        );
        assert_eq!(nodes_run(&script), ["generate", "extract", "execute"]);
    }

    #[test]
    fn unparseable_reflection_counts_as_not_done() {
        let mut script = Script::new(
            &[
                "```python\nx = 1\n```",
                "hmm, looks fine to me",
                "All done: x is 1.",
            ],
            ok,
        );
        let mut state = AgentState::new("set x", Vec::new(), 5);
        run(&mut script, &mut state, settings());
        assert_eq!(state.outcome, Some(Outcome::Answered));
        let feedback = &script.requests[2].messages.last().unwrap().content;
        assert!(feedback.contains("hmm, looks fine to me"));
    }
}
