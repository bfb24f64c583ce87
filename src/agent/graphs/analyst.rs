//! The analyst graph (seed 003), chosen with `%%ask --graph analyst`:
//!
//! ```text
//! plan --(needs code)--> work --(done, to be examined)--> evaluate --> explain --> end
//!   |                     |---(done, to be said in words)-----------> explain
//!   |                     +---(done, nothing to say; or not done)---> end
//!   |                         (every block failed: gave up, all attempts shown)
//!   +--(no code needed)---------------------------------------------> explain
//! ```
//!
//! Unlike the default graph it decides up front whether the request needs
//! code at all, whether the results deserve a critical look and whether the
//! answer needs words, and ends with a plain-language answer unless the
//! plan said none is needed (a value stored, a plot shown: what the code did
//! is the answer). The code itself is written, run, mended and checked by
//! the default graph's turns ([`super::default`]), with the same check
//! before "done" (a loop of its own, weaker, left the analyst below
//! answering once) and under the same instructions (the analyst's own, one
//! block for the whole job, had the check pass wrong work far more often on
//! tasks it was not tuned on). When every block of those turns failed, the
//! run gives up with all of them shown.

use super::default::default_graph;
use super::steps::{NodeSettings, code_prompt, node};
use crate::agent::graph::{Activity, Graph, Route, RunEnd, nodes};
use crate::agent::llm::ChatMessage;
use crate::agent::parse::plan::parse_plan;
use crate::agent::prompts;
use crate::agent::run::{AgentError, AgentEvent, AgentState, Effects, Outcome};
use crate::agent::schemas;

nodes! {
    /// The analyst graph's nodes.
    pub enum Step {
        Plan = "plan", Some(Activity::Planning);
        Work = "work", Some(Activity::WritingCode);
        Evaluate = "evaluate", Some(Activity::Evaluating);
        Explain = "explain", Some(Activity::WritingTheAnswer);
    }
}

/// The analyst graph, its code done in at most `max_turns` turns.
pub fn analyst_graph<E: Effects>(
    settings: NodeSettings,
    max_turns: u32,
) -> Graph<AgentState, E, Step> {
    let (plan_settings, work_settings) = (settings.clone(), settings.clone());
    let (evaluate_settings, explain_settings) = (settings.clone(), settings);
    // (plan, work, evaluate, explain: the longest way through.)
    Graph::new(Step::Plan, 4)
        .node(
            Step::Plan,
            node(move |s, e| Box::pin(plan(s, e, plan_settings.clone()))),
        )
        .node(
            Step::Work,
            node(move |s, e| Box::pin(work(s, e, work_settings.clone(), max_turns))),
        )
        .node(
            Step::Evaluate,
            node(move |s, e| Box::pin(evaluate(s, e, evaluate_settings.clone()))),
        )
        .node(
            Step::Explain,
            node(move |s, e| Box::pin(explain(s, e, explain_settings.clone()))),
        )
        .conditional_edge(
            Step::Plan,
            &[Route::To(Step::Work), Route::To(Step::Explain)],
            |s: &AgentState| {
                if s.plan.as_ref().is_none_or(|p| p.needs_code) {
                    Route::To(Step::Work)
                } else {
                    Route::To(Step::Explain)
                }
            },
        )
        .conditional_edge(
            Step::Work,
            &[
                Route::To(Step::Evaluate),
                Route::To(Step::Explain),
                Route::End,
            ],
            |s: &AgentState| {
                let plan = s
                    .plan
                    .as_ref()
                    .filter(|_| s.outcome == Some(Outcome::Complete));
                match plan {
                    Some(plan) if plan.needs_evaluation => Route::To(Step::Evaluate),
                    Some(plan) if plan.needs_explanation => Route::To(Step::Explain),
                    _ => Route::End,
                }
            },
        )
        .edge(Step::Evaluate, Route::To(Step::Explain))
        .edge(Step::Explain, Route::End)
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

/// The default graph's turns, within this run, until it ends; the blocks
/// that failed are kept, and where none of them worked and the turns ran
/// out, the run gives up with them all shown.
async fn work<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: NodeSettings,
    max_turns: u32,
) -> Result<(), AgentError> {
    let since = state.executions.len();
    // The explanation is the answer: the review's short one is not shown.
    let answer_after = state
        .plan
        .as_ref()
        .is_some_and(|p| p.needs_evaluation || p.needs_explanation);
    let settings = NodeSettings {
        answer_after,
        ..settings
    };
    let ended = default_graph::<E>(settings, max_turns)
        .run(state, effects)
        .await?;
    if matches!(ended, RunEnd::StepCap { .. }) && state.outcome.is_none() {
        state.outcome = Some(Outcome::MaxTurns);
    }
    let tried = &state.executions[since..];
    let all_failed = !tried.is_empty() && tried.iter().all(|e| e.failed);
    state.failed_attempts = tried.iter().filter(|e| e.failed).cloned().collect();
    if all_failed && matches!(state.outcome, Some(Outcome::MaxTurns | Outcome::Repeating)) {
        give_up(state, effects);
    }
    Ok(())
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

fn give_up<E: Effects>(state: &mut AgentState, effects: &mut E) {
    let failed = state.failed_attempts.clone();
    let last_error = failed.last().map_or("", |f| f.output.trim());
    // Kept in the conversation, so a follow-up `%%ask` knows what happened.
    let said = format!(
        "I could not get it done in {} attempts. The last problem was:\n{last_error}",
        failed.len()
    );
    // (After the last report, the model's side: ready for a follow-up.)
    state.conversation.push(ChatMessage::assistant(said));
    effects.emit(AgentEvent::GaveUp { failed });
    state.outcome = Some(Outcome::GaveUp);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::llm::{ChatRequest, Role};
    use crate::agent::run::Execution;
    use crate::agent::run::limits::ANALYST_MAX_TURNS;
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

    /// The analyst's own steps the run took (the default graph's turns
    /// run inside `work`).
    fn steps(script: &Script) -> Vec<&'static str> {
        let own = ["plan", "work", "evaluate", "explain"];
        script
            .nodes
            .iter()
            .copied()
            .filter(|n| own.contains(n))
            .collect()
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
    /// messages and answer are the start of its own. The code turn is
    /// asked under the default graph's instructions.
    fn assert_continues_the_code_turn(script: &Script, request: &ChatRequest) {
        let code = script
            .requests
            .iter()
            .find(|r| {
                r.system
                    .starts_with("You are an assistant working inside a Jupyter notebook")
                    && r.schema.is_none()
            })
            .expect("a code turn under the default graph's instructions");
        assert_eq!(request.system, code.system);
        let n = code.messages.len();
        assert_eq!(request.messages[..n], code.messages[..]);
        assert_eq!(request.messages[n].role, Role::Assistant);
        assert!(request.messages[n].content.contains("```python"));
    }

    fn answers(script: &Script) -> Vec<&str> {
        script
            .events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Answer(text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
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
        let mut state = AgentState::new("what is a DataFrame?", Vec::new(), ANALYST_MAX_TURNS);
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
        // The review's own short answer is not shown: the explanation is.
        let done =
            r#"{"is_complete": true, "reasoning": "printed", "next_action": "", "answer": "42"}"#;
        let mut script = Script::new(
            &[
                CODE_ONLY,
                "```python\nprint(6*7)\n```",
                done,
                "The total is 42.",
            ],
            ok,
        );
        let mut state = AgentState::new("total?", Vec::new(), ANALYST_MAX_TURNS);
        run(&mut script, &mut state, true);
        assert_eq!(steps(&script), ["plan", "work", "explain"]);
        assert_eq!(script.executed, ["print(6*7)"]);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        // (The explanation streams as it comes; the review's would be an
        // answer of its own.)
        assert!(answers(&script).is_empty(), "{:?}", answers(&script));
        assert_eq!(state.answer, "The total is 42.");
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
        let mut state = AgentState::new("is it high?", Vec::new(), ANALYST_MAX_TURNS);
        run(&mut script, &mut state, true);
        assert_eq!(steps(&script), ["plan", "work", "evaluate", "explain"]);
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
        let mut state = AgentState::new("divide", Vec::new(), ANALYST_MAX_TURNS);
        run(&mut script, &mut state, true);
        assert_eq!(steps(&script), ["plan", "work", "explain"]);
        assert_eq!(script.executed, ["1/0", "print('fixed')"]);
        assert_eq!(state.failed_attempts.len(), 1);
        // The retry was told the error and asked for a fix.
        let retry = &script.requests[2];
        let told = &retry.messages.last().unwrap().content;
        assert!(
            told.contains("ZeroDivisionError") && told.contains("corrected"),
            "{told}"
        );
        assert_eq!(state.turn, 2);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        assert_roles_alternate(&script);
    }

    #[test]
    fn code_that_ran_without_making_what_the_request_names_is_another_turn() {
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
            ANALYST_MAX_TURNS,
        );
        run(&mut script, &mut state, true);
        assert_eq!(steps(&script), ["plan", "work", "explain"]);
        let retry = &script.requests[2];
        let told = &retry.messages.last().unwrap().content;
        assert!(told.contains("`n` does not exist yet"), "{told}");
        assert_eq!(state.outcome, Some(Outcome::Complete));
        assert_eq!(state.checked, ["n: int: 3"]);
        assert_roles_alternate(&script);
    }

    #[test]
    fn a_plan_without_explanation_ends_with_the_check() {
        let plan = r#"{"needs_code": true, "needs_evaluation": false, "needs_explanation": false, "reasoning": "store it"}"#;
        let done = r#"{"is_complete": true, "reasoning": "stored", "next_action": "", "answer": "n is 3."}"#;
        let mut script = Script::new(&[plan, "```python\nn = 3\n```", ONE_VALUE, done], |code| {
            Execution {
                changes: vec!["n: int = 3 (new)".into()],
                ..ok(code)
            }
        });
        let mut state = AgentState::new("Store 3 in `n`.", Vec::new(), ANALYST_MAX_TURNS);
        run(&mut script, &mut state, true);
        assert_eq!(steps(&script), ["plan", "work"]);
        assert_eq!(script.requests.len(), 4);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        // With no explanation to come, the review's short answer is the answer.
        assert_eq!(answers(&script), ["n is 3."]);
        assert_eq!(state.checked, ["n: int: 3"]);
        assert_roles_alternate(&script);
    }

    #[test]
    fn code_that_ran_is_another_turn_until_the_check_passes() {
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
        let mut state =
            AgentState::new("Store the total in `total`.", Vec::new(), ANALYST_MAX_TURNS);
        run(&mut script, &mut state, true);
        assert_eq!(steps(&script), ["plan", "work", "explain"]);
        let told = |i: usize| script.requests[i].messages.last().unwrap().content.clone();
        assert!(told(3).contains("one value"), "{}", told(3));
        assert!(told(5).contains("that is the mean"), "{}", told(5));
        // The form was asked once; a first "cannot be done" with nothing
        // failing is one more turn.
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
    fn when_every_turns_code_failed_it_gives_up_and_shows_them_all() {
        let mut script = Script::new(
            &[
                CODE_ONLY,
                "```python\na\n```",
                "```python\nab\n```",
                "```python\nabc\n```",
            ],
            always_fails,
        );
        let mut state = AgentState::new("fail", Vec::new(), 3);
        let end = run(&mut script, &mut state, true);
        assert_eq!(steps(&script), ["plan", "work"]);
        assert_eq!(end, RunEnd::Finished { steps: 2 });
        assert_eq!(state.outcome, Some(Outcome::GaveUp));
        let Some(AgentEvent::GaveUp { failed }) = script.events.last() else {
            panic!("no GaveUp event: {:?}", script.events);
        };
        let outputs: Vec<_> = failed.iter().map(|f| f.output.as_str()).collect();
        assert_eq!(
            outputs,
            [
                "NameError: name 'x1' is not defined",
                "NameError: name 'x2' is not defined",
                "NameError: name 'x3' is not defined",
            ]
        );
        assert_eq!(state.failed_attempts.len(), 3);
        // The conversation ends with the model's side, ready for a follow-up.
        let last = state.conversation.last().unwrap();
        assert_eq!(last.role, Role::Assistant);
        assert!(last.content.contains("x3"));
        assert_roles_alternate(&script);
    }

    #[test]
    fn code_that_ran_but_was_not_done_is_out_of_turns_not_given_up() {
        let not_done = r#"{"is_complete": false, "reasoning": "not yet", "next_action": "go on"}"#;
        let mut script = Script::new(
            &[
                CODE_ONLY,
                "```python\nprint(1)\n```",
                not_done,
                "```python\nprint(2)\n```",
                not_done,
            ],
            ok,
        );
        let mut state = AgentState::new("more", Vec::new(), 2);
        run(&mut script, &mut state, true);
        assert_eq!(steps(&script), ["plan", "work"]);
        assert_eq!(state.outcome, Some(Outcome::MaxTurns));
        assert!(state.failed_attempts.is_empty());
    }

    #[test]
    fn turns_made_before_the_analyst_began_count_against_its_limit() {
        // A triage's earlier pass took two turns.
        let mut script = Script::new(
            &[CODE_ONLY, "```python\na\n```", "```python\nabc\n```"],
            always_fails,
        );
        let mut state = AgentState::new("fail", Vec::new(), 4);
        state.turn = 2;
        run(&mut script, &mut state, true);
        assert_eq!(script.executed, ["a", "abc"]);
        assert_eq!(state.outcome, Some(Outcome::GaveUp));
        assert_eq!(state.failed_attempts.len(), 2);
    }

    #[test]
    fn no_exec_shows_the_code_and_stops() {
        let mut script = Script::new(&[CODE_ONLY, "```python\nimport os\n```"], ok);
        let mut state = AgentState::new("show me", Vec::new(), ANALYST_MAX_TURNS);
        run(&mut script, &mut state, false);
        assert_eq!(steps(&script), ["plan", "work"]);
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
        let mut state = AgentState::new("value?", Vec::new(), ANALYST_MAX_TURNS);
        run(&mut script, &mut state, true);
        assert_eq!(steps(&script), ["plan", "work", "explain"]);
    }
}
