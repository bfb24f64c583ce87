//! The analyst graph (seed 003), chosen with `%%ask --graph analyst`:
//!
//! ```text
//! plan --(needs code)--> code --(ran)--> [evaluate] --> [explain] --> end
//!   |                     ^  |
//!   |                     +--+ failed, attempts left (the error goes back
//!   |                        |  to the model with a request to fix it)
//!   |                        +--> error (every attempt failed) --> end
//!   +--(no code needed)---------------------------> explain
//! ```
//!
//! Unlike the default graph it decides up front whether the request needs
//! code at all and whether the results deserve a critical look, retries
//! failing code a bounded number of times (code that ran but visibly falls
//! short, see [`super::unmet`], or does not pass [`super::check`], counts as
//! failing), and ends with a plain-language answer, unless the plan said
//! none is needed (a value stored, a plot shown: what the code did is the
//! answer), or, when every attempt failed, with all of them shown.

use super::check::{Work, check};
use super::steps::{NodeSettings, close_with_answer, node, run_pending};
use super::unmet::{Unmet, unmet};
use crate::agent::graph::{Activity, Graph, Route, nodes};
use crate::agent::llm::ChatMessage;
use crate::agent::parse::code::code_blocks;
use crate::agent::parse::plan::parse_plan;
use crate::agent::parse::{checks, errors};
use crate::agent::run::{AgentError, AgentEvent, AgentState, Effects, Execution, Outcome};
use crate::agent::{prompts, schemas};

/// Where the analyst goes after an attempt: done (with --no-exec), another
/// attempt, giving up, evaluating the result, or explaining it.
const CODE_ROUTES: &[Route<Step>] = &[
    Route::End,
    Route::To(Step::Code),
    Route::To(Step::Error),
    Route::To(Step::Evaluate),
    Route::To(Step::Explain),
];

nodes! {
    /// The analyst graph's nodes.
    pub enum Step {
        Plan = "plan", Some(Activity::Planning);
        Code = "code", Some(Activity::WritingCode);
        Evaluate = "evaluate", Some(Activity::Evaluating);
        Explain = "explain", Some(Activity::WritingTheAnswer);
        Error = "error", None;
    }
}

/// The analyst graph, giving up after `max_attempts` failed attempts.
pub fn analyst_graph<E: Effects>(
    settings: NodeSettings,
    max_attempts: u32,
) -> Graph<AgentState, E, Step> {
    let (plan_settings, code_settings) = (settings.clone(), settings.clone());
    let (evaluate_settings, explain_settings) = (settings.clone(), settings);
    // plan, every attempt, evaluate and explain (or error), with room to spare.
    let step_cap = max_attempts as usize + 5;
    Graph::new(Step::Plan, step_cap)
        .node(
            Step::Plan,
            node(move |s, e| Box::pin(plan(s, e, plan_settings.clone()))),
        )
        .node(
            Step::Code,
            node(move |s, e| Box::pin(code(s, e, code_settings.clone()))),
        )
        .node(
            Step::Evaluate,
            node(move |s, e| Box::pin(evaluate(s, e, evaluate_settings.clone()))),
        )
        .node(
            Step::Explain,
            node(move |s, e| Box::pin(explain(s, e, explain_settings.clone()))),
        )
        .node(
            Step::Error,
            node(|s, e| Box::pin(async move { give_up(s, e) })),
        )
        .conditional_edge(
            Step::Plan,
            &[Route::To(Step::Code), Route::To(Step::Explain)],
            |s: &AgentState| {
                if s.plan.as_ref().is_none_or(|p| p.needs_code) {
                    Route::To(Step::Code)
                } else {
                    Route::To(Step::Explain)
                }
            },
        )
        .conditional_edge(Step::Code, CODE_ROUTES, |s: &AgentState| {
            if s.outcome.is_some() {
                // --no-exec (the code was shown, nothing ran), or nothing to
                // explain (the plan said so).
                Route::End
            } else if s.last_attempt_failed {
                if s.turn < s.max_turns {
                    Route::To(Step::Code)
                } else {
                    Route::To(Step::Error)
                }
            } else if s.plan.as_ref().is_some_and(|p| p.needs_evaluation) {
                Route::To(Step::Evaluate)
            } else {
                Route::To(Step::Explain)
            }
        })
        .edge(Step::Evaluate, Route::To(Step::Explain))
        .edge(Step::Explain, Route::End)
        .edge(Step::Error, Route::End)
}

async fn plan<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: NodeSettings,
) -> Result<(), AgentError> {
    // Asked under the code turns' system prompt, after the request: the
    // first code turn then finds all of its prompt cached.
    let system = code_prompt(state, effects).await;
    let answer = settings
        .judge_after(
            state,
            effects,
            system,
            prompts::PLAN.trim_end(),
            schemas::analyst_plan(),
        )
        .await?;
    let plan = parse_plan(&answer.text);
    effects.emit(AgentEvent::Plan(plan.clone()));
    state.plan = Some(plan);
    Ok(())
}

async fn code<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: NodeSettings,
) -> Result<(), AgentError> {
    let namespace = effects.namespace().await;
    state.namespace_names = checks::summary_names(&namespace);
    let system = code_system(state, &namespace);
    let answer = settings.write_code(state, effects, system).await?;
    state.pending = code_blocks(&answer.text);
    state.record_answer(answer.text);
    // Set again below where the attempt fails or falls short.
    state.last_attempt_failed = false;
    if state.pending.is_empty() {
        const NO_CODE: &str = "The answer had no ```python block to run.";
        state.failed_attempts.push(Execution::not_run("", NO_CODE));
        state.last_attempt_failed = true;
        state
            .conversation
            .push(ChatMessage::user(prompts::fix_request(NO_CODE, None)));
        return Ok(());
    }
    let before = state.executions.len();
    let ran = run_pending(state, effects, settings.execute).await?;
    let unmet = if settings.execute && !ran.failed {
        match unmet(state, effects, &state.executions[before..]).await {
            Some(unmet) => Some(unmet),
            None => not_checked(state, effects, &settings, before).await?,
        }
    } else {
        None
    };
    if let Some(unmet) = unmet {
        // Ran, but visibly short of the request: another attempt, told why.
        let mut attempt = state.executions.last().cloned().expect("a block ran");
        attempt.output = format!("{}\n{}", attempt.output.trim_end(), unmet.reasoning);
        state.failed_attempts.push(attempt);
        state.last_attempt_failed = true;
        state.conversation.push(ChatMessage::user(ran.report));
        state
            .conversation
            .push(ChatMessage::user(prompts::not_done_yet(
                &unmet.reasoning,
                &unmet.next_action,
            )));
    } else if !settings.execute {
        state.outcome = Some(Outcome::Answered);
    } else if !ran.failed
        && state
            .plan
            .as_ref()
            .is_some_and(|p| !p.needs_evaluation && !p.needs_explanation)
    {
        // Nothing to explain (a value stored, a plot shown): what the code
        // did is the answer, with no model call.
        state.conversation.push(ChatMessage::user(ran.report));
        let answer = outcome_in_brief(&state.executions[before..]);
        state.outcome = Some(Outcome::Complete);
        close_with_answer(state, effects, &answer);
    } else if ran.failed {
        let failure = state.executions.last().cloned().expect("a block failed");
        let hint = errors::failure_hint(&failure.output);
        state.failed_attempts.push(failure);
        state.last_attempt_failed = true;
        state
            .conversation
            .push(ChatMessage::user(prompts::fix_request(
                &ran.report,
                hint.as_deref(),
            )));
    } else {
        state.conversation.push(ChatMessage::user(ran.report));
    }
    Ok(())
}

/// Why the attempt since `before` (which ran) is not done yet, when the
/// check says so; `None` when it passed.
async fn not_checked<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: &NodeSettings,
    before: usize,
) -> Result<Option<Unmet>, AgentError> {
    let work = Work {
        since: before,
        failed: false,
        answer: None,
        agreed: None,
    };
    let mut verdict = check(state, effects, settings, work).await?;
    // Another attempt is the analyst's answer to "cannot be done" too: its
    // attempts are bounded, and a small model's review says so too soon.
    verdict.cannot_fix = false;
    effects.emit(AgentEvent::Verdict(verdict.clone()));
    let found = (!verdict.is_complete).then(|| Unmet {
        reasoning: verdict.reasoning.clone(),
        next_action: verdict.next_action.clone(),
    });
    state.verdict = Some(verdict);
    Ok(found)
}

async fn evaluate<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: NodeSettings,
) -> Result<(), AgentError> {
    let system = code_prompt(state, effects).await;
    state
        .conversation
        .push(ChatMessage::user(prompts::EVALUATE.trim_end()));
    let answer = settings.answer(state, effects, system).await?;
    // The explanation reads it from the conversation.
    state.conversation.push(ChatMessage::assistant(answer.text));
    Ok(())
}

async fn explain<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: NodeSettings,
) -> Result<(), AgentError> {
    let system = if state.executions.is_empty() {
        // No code was needed: the request alone, with what the namespace holds.
        let namespace = effects.namespace().await;
        prompts::explain(&state.request, &namespace)
    } else {
        state
            .conversation
            .push(ChatMessage::user(prompts::EXPLAIN_RESULTS.trim_end()));
        code_prompt(state, effects).await
    };
    let answer = settings.answer(state, effects, system).await?;
    state
        .conversation
        .push(ChatMessage::assistant(answer.text.clone()));
    state.answer = answer.text;
    if state.executions.is_empty() {
        state.turn = state.turn.max(1); // a text-only answer is one turn
        state.outcome = Some(Outcome::Answered);
    } else {
        state.outcome = Some(Outcome::Complete);
    }
    Ok(())
}

/// The system prompt the code turns were asked under (the namespace in it
/// is the one pinned at the run's start), for a step that continues their
/// conversation: the provider has all of it cached but the last results and
/// the step's own question. (A prompt of its own, with the request and the
/// namespace in it, cost a small local model about ten seconds a step.)
async fn code_prompt<E: Effects>(state: &mut AgentState, effects: &mut E) -> String {
    let namespace = effects.namespace().await;
    code_system(state, &namespace)
}

/// The code turns' system prompt, with the namespace pinned at the run's
/// start (`fresh` the first time).
fn code_system(state: &mut AgentState, fresh: &str) -> String {
    prompts::analyst_code(
        &state.pinned_namespace(fresh),
        state.recent_cells_shown(),
        &state.skills,
    )
}

/// What `executions` did, in a few lines: the variables they changed, else
/// the end of what they printed.
fn outcome_in_brief(executions: &[Execution]) -> String {
    const LINES: usize = 12;
    let mut changes: Vec<&str> = Vec::new();
    for line in executions.iter().flat_map(|e| e.changes.iter()) {
        let line = line
            .rsplit_once(" (")
            .map_or(line.as_str(), |(text, _)| text);
        if !changes.contains(&line) {
            changes.push(line);
        }
    }
    if !changes.is_empty() {
        return changes.join("\n");
    }
    let printed = executions
        .last()
        .map_or("", |e| e.shown.as_deref().unwrap_or(&e.output))
        .trim();
    match printed.lines().count() {
        0 => "Done.".to_owned(),
        n if n <= LINES => printed.to_owned(),
        n => {
            let tail: Vec<&str> = printed.lines().skip(n - LINES).collect();
            format!("...\n{}", tail.join("\n"))
        }
    }
}

fn give_up<E: Effects>(state: &mut AgentState, effects: &mut E) -> Result<(), AgentError> {
    let failed = state.failed_attempts.clone();
    let last_error = failed.last().map_or("", |f| f.output.trim());
    // Kept in the conversation, so a follow-up `%%ask` knows what happened.
    state.conversation.push(ChatMessage::assistant(format!(
        "I could not get it done in {} attempts. The last problem was:\n{last_error}",
        failed.len()
    )));
    effects.emit(AgentEvent::GaveUp { failed });
    state.outcome = Some(Outcome::GaveUp);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::graph::RunEnd;
    use crate::agent::llm::{ChatRequest, Role};
    use crate::agent::run::limits::ANALYST_MAX_ATTEMPTS;
    use crate::agent::script::{Script, assert_roles_alternate, fails_once, ok};

    /// A plan Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, llama.cpp server,
    /// temperature 0) wrote with the plan schema and `prompts/plan.md`.
    const RECORDED_LOCAL_PLAN: &str = r#"{"needs_code": true, "needs_evaluation": true, "reasoning": "The user wants to know if there are any unusual sales in March, which requires running the code to analyze the data."}"#;

    #[test]
    fn a_plan_recorded_from_the_local_model_with_the_schema() {
        let plan = parse_plan(RECORDED_LOCAL_PLAN);
        assert!(plan.parsed && plan.needs_code && plan.needs_evaluation);
        assert!(plan.reasoning.starts_with("The user wants to know"));
    }

    const CODE_AND_EVALUATE: &str =
        r#"{"needs_code": true, "needs_evaluation": true, "reasoning": "needs data"}"#;
    const CODE_ONLY: &str =
        r#"{"needs_code": true, "needs_evaluation": false, "reasoning": "a sum"}"#;
    const NO_CODE: &str =
        r#"{"needs_code": false, "needs_evaluation": false, "reasoning": "concept"}"#;
    const DONE: &str = r#"{"is_complete": true, "reasoning": "answered", "next_action": ""}"#;
    const ONE_VALUE: &str = r#"{"form": "one number"}"#;

    fn settings(execute: bool) -> NodeSettings {
        NodeSettings {
            execute,
            ..NodeSettings::for_tests()
        }
    }

    fn run(script: &mut Script, state: &mut AgentState, execute: bool) -> RunEnd {
        let graph = analyst_graph::<Script>(settings(execute), state.max_turns);
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(graph.run(state, script))
            .unwrap()
    }

    fn always_fails(code: &str) -> Execution {
        Execution {
            code: code.into(),
            output: format!("NameError: name 'x{}' is not defined", code.len()),
            shown: None,
            failed: true,
            finished: false,
            changes: Vec::new(),
            rich_outputs: 0,
            images: Vec::new(),
        }
    }

    /// `request` has the code turn's system prompt, and the code turn's
    /// messages and answer are the start of its own.
    fn assert_continues_the_code_turn(script: &Script, request: &ChatRequest) {
        let code = script
            .requests
            .iter()
            .find(|r| r.system.starts_with("You write Python") && r.schema.is_none())
            .expect("a code turn");
        assert_eq!(request.system, code.system);
        let n = code.messages.len();
        assert_eq!(request.messages[..n], code.messages[..]);
        assert_eq!(request.messages[n].role, Role::Assistant);
        assert!(request.messages[n].content.contains("```python"));
    }

    #[test]
    fn plans_are_read_from_json_prose_or_lines_and_default_to_code() {
        let plan = parse_plan(&format!("Sure!\n```json\n{CODE_AND_EVALUATE}\n```"));
        assert!(plan.needs_code && plan.needs_evaluation && plan.parsed);
        assert_eq!(plan.reasoning, "needs data");
        let plan = parse_plan(r#"{"needs_code": "no"}"#);
        assert!(!plan.needs_code && !plan.needs_evaluation);
        let plan = parse_plan("needs_code: false\nneeds_evaluation: true");
        assert!(!plan.needs_code && plan.needs_evaluation && plan.parsed);
        let plan = parse_plan("**needs_code** = True");
        assert!(plan.needs_code && plan.parsed);
        let plan = parse_plan("I would look at the data first.");
        assert!(plan.needs_code && !plan.needs_evaluation && !plan.parsed);
    }

    #[test]
    fn a_conceptual_question_goes_straight_to_the_explanation() {
        let mut script = Script::new(&[NO_CODE, "A DataFrame is a table."], ok);
        let mut state = AgentState::new("what is a DataFrame?", Vec::new(), ANALYST_MAX_ATTEMPTS);
        run(&mut script, &mut state, true);
        assert_eq!(script.nodes, ["plan", "explain"]);
        assert!(script.executed.is_empty());
        assert_eq!(state.outcome, Some(Outcome::Answered));
        assert_eq!(state.turn, 1);
        assert_eq!(
            state.conversation.last().unwrap().content,
            "A DataFrame is a table."
        );
        assert!(
            script
                .events
                .iter()
                .any(|e| matches!(e, AgentEvent::Plan(p) if !p.needs_code))
        );
        assert_roles_alternate(&script);
    }

    #[test]
    fn code_that_runs_is_explained_without_evaluation_when_the_plan_says_so() {
        let mut script = Script::new(
            &[
                CODE_ONLY,
                "```python\nprint(6*7)\n```",
                DONE,
                "The total is 42.",
            ],
            ok,
        );
        let mut state = AgentState::new("total?", Vec::new(), ANALYST_MAX_ATTEMPTS);
        run(&mut script, &mut state, true);
        assert_eq!(script.nodes, ["plan", "code", "explain"]);
        assert_eq!(script.executed, ["print(6*7)"]);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        // The explanation saw the output, asked as the next turn of the code's
        // conversation under its system prompt: all but the output and the
        // question is a prefix the provider has cached.
        let explain = script.requests.last().unwrap();
        let last = &explain.messages.last().unwrap().content;
        assert!(last.contains("42") && last.ends_with(prompts::EXPLAIN_RESULTS.trim_end()));
        assert_continues_the_code_turn(&script, explain);
        // The plan was asked under the same prompt, after the request, and
        // the code turn was not told of the question.
        let (plan, code) = (&script.requests[0], &script.requests[1]);
        assert_eq!(plan.system, code.system);
        let question = &plan.messages.last().unwrap().content;
        assert!(question.starts_with("total?") && question.ends_with(prompts::PLAN.trim_end()));
        assert_eq!(code.messages.last().unwrap().content, "total?");
        assert_roles_alternate(&script);
    }

    #[test]
    fn evaluation_runs_between_code_and_explanation_when_planned() {
        let mut script = Script::new(
            &[
                CODE_AND_EVALUATE,
                "```python\nprint(6*7)\n```",
                DONE,
                "42 is high for this data.",
                "Yes, it is unusually high.",
            ],
            ok,
        );
        let mut state = AgentState::new("is it high?", Vec::new(), ANALYST_MAX_ATTEMPTS);
        run(&mut script, &mut state, true);
        assert_eq!(script.nodes, ["plan", "code", "evaluate", "explain"]);
        // The evaluation stays in the conversation, before the answer.
        let n = state.conversation.len();
        assert_eq!(
            state.conversation[n - 3].content,
            "42 is high for this data."
        );
        // The explanation was asked for after the evaluation and saw it.
        let explain = script.requests.last().unwrap();
        let n = explain.messages.len();
        assert_eq!(explain.messages[n - 2].content, "42 is high for this data.");
        assert_eq!(
            explain.messages[n - 1].content,
            prompts::EXPLAIN_RESULTS.trim_end()
        );
        assert_continues_the_code_turn(&script, explain);
        // So did the evaluation, told the output.
        let evaluate = &script.requests[script.requests.len() - 2];
        let last = &evaluate.messages.last().unwrap().content;
        assert!(last.contains("42") && last.ends_with(prompts::EVALUATE.trim_end()));
        assert_continues_the_code_turn(&script, evaluate);
        assert_eq!(state.usage.input_tokens, 50);
        assert_roles_alternate(&script);
    }

    #[test]
    fn failing_code_is_retried_with_the_error_until_it_runs() {
        let mut script = Script::new(
            &[
                CODE_ONLY,
                "```python\n1/0\n```",
                "```python\nprint('fixed')\n```",
                DONE,
                "Fixed it.",
            ],
            fails_once,
        );
        let mut state = AgentState::new("divide", Vec::new(), ANALYST_MAX_ATTEMPTS);
        run(&mut script, &mut state, true);
        assert_eq!(script.nodes, ["plan", "code", "code", "explain"]);
        assert_eq!(script.executed, ["1/0", "print('fixed')"]);
        // The retry was told the error and asked for a fix.
        let retry = &script.requests[2];
        let told = &retry.messages.last().unwrap().content;
        assert!(told.contains("ZeroDivisionError") && told.contains("corrected"));
        assert_eq!(state.turn, 2);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        assert_roles_alternate(&script);
    }

    #[test]
    fn code_that_ran_without_making_what_the_request_names_is_another_attempt() {
        let mut script = Script::new(
            &[
                CODE_ONLY,
                "```python\nprint(len(x))\n```",
                "```python\nn = 3\n```",
                ONE_VALUE,
                DONE,
                "There are 3.",
            ],
            ok,
        );
        let mut state = AgentState::new(
            "Count them; store it in `n`.",
            Vec::new(),
            ANALYST_MAX_ATTEMPTS,
        );
        run(&mut script, &mut state, true);
        assert_eq!(script.nodes, ["plan", "code", "code", "explain"]);
        let retry = &script.requests[2];
        let told = &retry.messages.last().unwrap().content;
        assert!(told.contains("`n` does not exist yet"), "{told}");
        assert_eq!(state.outcome, Some(Outcome::Complete));
        assert_eq!(state.checked, ["n: int: 3"]);
        assert_roles_alternate(&script);
    }

    #[test]
    fn a_plan_without_explanation_ends_with_what_the_code_did() {
        let plan = r#"{"needs_code": true, "needs_evaluation": false, "needs_explanation": false, "reasoning": "store it"}"#;
        let mut script = Script::new(&[plan, "```python\nn = 3\n```", ONE_VALUE, DONE], |code| {
            Execution {
                changes: vec!["n: int = 3 (new)".into()],
                ..ok(code)
            }
        });
        let mut state = AgentState::new("Store 3 in `n`.", Vec::new(), ANALYST_MAX_ATTEMPTS);
        run(&mut script, &mut state, true);
        assert_eq!(script.nodes, ["plan", "code"]);
        assert_eq!(script.requests.len(), 4);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        assert_eq!(state.answer, "n: int = 3");
        assert_roles_alternate(&script);
    }

    #[test]
    fn code_that_ran_is_another_attempt_until_the_check_passes() {
        // One number asked for, a list made: the form check sends it back
        // without a review; then the review itself says not done once.
        let not_done = r#"{"is_complete": false, "reasoning": "that is the mean, not the total", "next_action": "sum it", "cannot_fix": true}"#;
        let mut script = Script::new(
            &[
                CODE_ONLY,
                "```python\ntotal = [1, 2]\n```",
                ONE_VALUE,
                "```python\ntotal = 1\n```",
                not_done,
                "```python\ntotal = 3\n```",
                DONE,
                "The total is 3.",
            ],
            ok,
        );
        let mut state = AgentState::new(
            "Store the total in `total`.",
            Vec::new(),
            ANALYST_MAX_ATTEMPTS,
        );
        run(&mut script, &mut state, true);
        assert_eq!(script.nodes, ["plan", "code", "code", "code", "explain"]);
        let told = |i: usize| script.requests[i].messages.last().unwrap().content.clone();
        assert!(told(3).contains("one value"), "{}", told(3));
        assert!(told(5).contains("that is the mean"), "{}", told(5));
        // The form was asked once; a "cannot be done" is one more attempt.
        assert_eq!(state.expected_forms.len(), 1);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        assert_eq!(state.checked, ["total: int: 3"]);
        assert_roles_alternate(&script);
    }

    #[test]
    fn the_plan_reads_whether_an_explanation_is_needed_and_defaults_to_yes() {
        let plan = parse_plan(r#"{"needs_code": true, "needs_explanation": false}"#);
        assert!(plan.parsed && !plan.needs_explanation);
        assert!(parse_plan(CODE_ONLY).needs_explanation);
        assert!(!parse_plan("needs_code: yes\nneeds_explanation: no").needs_explanation);
    }

    #[test]
    fn after_the_last_failed_attempt_the_error_node_shows_them_all() {
        let mut script = Script::new(
            &[
                CODE_ONLY,
                "```python\na\n```",
                "no code this time",
                "```python\nabc\n```",
            ],
            always_fails,
        );
        let mut state = AgentState::new("fail", Vec::new(), ANALYST_MAX_ATTEMPTS);
        let end = run(&mut script, &mut state, true);
        assert_eq!(script.nodes, ["plan", "code", "code", "code", "error"]);
        assert_eq!(end, RunEnd::Finished { steps: 5 });
        assert_eq!(state.outcome, Some(Outcome::GaveUp));
        let Some(AgentEvent::GaveUp { failed }) = script.events.last() else {
            panic!("no GaveUp event: {:?}", script.events);
        };
        let outputs: Vec<_> = failed.iter().map(|f| f.output.as_str()).collect();
        assert_eq!(
            outputs,
            [
                "NameError: name 'x1' is not defined",
                "The answer had no ```python block to run.",
                "NameError: name 'x3' is not defined",
            ]
        );
        // The conversation ends with the model's side, ready for a follow-up.
        let last = state.conversation.last().unwrap();
        assert_eq!(last.role, Role::Assistant);
        assert!(last.content.contains("x3"));
        assert_roles_alternate(&script);
    }

    #[test]
    fn attempts_made_before_the_analyst_began_do_not_hide_its_failures() {
        // A triage's earlier pass took two turns and failed nothing.
        let mut script = Script::new(
            &[CODE_ONLY, "```python\na\n```", "```python\nabc\n```"],
            always_fails,
        );
        let mut state = AgentState::new("fail", Vec::new(), 4);
        state.turn = 2;
        run(&mut script, &mut state, true);
        assert_eq!(script.nodes, ["plan", "code", "code", "error"]);
        assert_eq!(state.outcome, Some(Outcome::GaveUp));
    }

    #[test]
    fn max_turns_bounds_the_attempts() {
        let mut script = Script::new(&[CODE_ONLY, "```python\na\n```"], always_fails);
        let mut state = AgentState::new("fail", Vec::new(), 1);
        run(&mut script, &mut state, true);
        assert_eq!(script.nodes, ["plan", "code", "error"]);
    }

    #[test]
    fn no_exec_shows_the_code_and_stops() {
        let mut script = Script::new(&[CODE_ONLY, "```python\nimport os\n```"], ok);
        let mut state = AgentState::new("show me", Vec::new(), ANALYST_MAX_ATTEMPTS);
        run(&mut script, &mut state, false);
        assert_eq!(script.nodes, ["plan", "code"]);
        assert!(script.executed.is_empty());
        assert!(
            script
                .events
                .iter()
                .any(|e| matches!(e, AgentEvent::Code { .. }))
        );
        assert_eq!(state.outcome, Some(Outcome::Answered));
    }

    #[test]
    fn an_unreadable_plan_still_computes() {
        let mut script = Script::new(
            &["let me think", "```python\nprint(1)\n```", DONE, "It is 1."],
            ok,
        );
        let mut state = AgentState::new("value?", Vec::new(), ANALYST_MAX_ATTEMPTS);
        run(&mut script, &mut state, true);
        assert_eq!(script.nodes, ["plan", "code", "explain"]);
    }
}
