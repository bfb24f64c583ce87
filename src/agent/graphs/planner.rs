//! The planner graph (seed 001), chosen with `%%ask --graph planner`: a
//! planner that thinks and names one action per step, and a tool node that
//! performs it and reports what it saw:
//!
//! ```text
//! [informer ->] planner -> (finish: end) -> tool -> planner ...
//!                       -> (inform: informer -> planner)
//! ```
//!
//! An action is Python code to run, a call of one of the toolbox's
//! functions, or the final answer. With `--informer`, an informer first
//! describes the variables the request names (schema, size, missing values,
//! a few rows) for the planner's prompt, and again whenever the planner
//! asks it to. Every step counts as a turn; the run ends at `finish` or
//! after the last turn's action. A final answer after steps must pass
//! [`super::check`]; when it does not, the reasons are the next observation.
//! A final answer right after a step that failed is never done on its own
//! run; under the triage, whose repair and review follow, it is checked as
//! the steps before it ([`FailedStep`]).

use super::check::{Work, check};
use super::steps::{NodeSettings, node, run_pending};
use super::unmet::{raised, unmet};
use crate::agent::graph::{Activity, Graph, Route, nodes};
use crate::agent::llm::ChatMessage;
use crate::agent::parse::action::{parse_action, tool_call};
use crate::agent::parse::code::{code_blocks, ends_in_open_block, reads_as_python};
use crate::agent::parse::{checks, errors};
use crate::agent::prompts;
use crate::agent::run::limits::PLANNER_TOOLS;
use crate::agent::run::{
    Action, AgentError, AgentEvent, AgentState, CodeBlock, Effects, Execution, Outcome,
};

/// How many of the last steps the check before a final answer reviews.
const CHECKED_STEPS: usize = 3;

/// Where the model's step ends: at an observation it starts to write.
const OBSERVATION_STOP: &[&str] = &["\nObservation:"];

nodes! {
    /// The planner graph's nodes.
    pub enum Step {
        Planner = "planner", Some(Activity::PlanningTheNextStep);
        Tool = "tool", Some(Activity::RunningCode);
        Informer = "informer", Some(Activity::DescribingTheVariables);
    }
}

/// Who settles a final answer given right after a step that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailedStep {
    /// The planner's own check, as failed work: never done as it stands.
    Checked,
    /// The graph the task came from (the triage), which repairs the
    /// failure where a known fix applies and reviews what it hands back.
    LeftToCaller,
}

/// The planner graph; with `informer`, the informer runs first.
pub fn planner_graph<E: Effects>(
    settings: NodeSettings,
    max_turns: u32,
    informer: bool,
    failed_step: FailedStep,
) -> Graph<AgentState, E, Step> {
    let (plan_settings, execute) = (settings.clone(), settings.execute);
    // Each turn is a planner step, its action, and perhaps the informer.
    let step_cap = (max_turns as usize) * 3 + 3;
    let entry = if informer {
        Step::Informer
    } else {
        Step::Planner
    };
    let graph = Graph::new(entry, step_cap)
        .node(
            Step::Planner,
            node(move |s, e| {
                Box::pin(plan_step(
                    s,
                    e,
                    plan_settings.clone(),
                    informer,
                    failed_step,
                ))
            }),
        )
        .node(Step::Tool, node(move |s, e| Box::pin(act(s, e, execute))));
    let graph = if informer {
        graph
            .node(Step::Informer, node(|s, e| Box::pin(inform(s, e))))
            .edge(Step::Informer, Route::To(Step::Planner))
            .conditional_edge(
                Step::Planner,
                &[
                    Route::To(Step::Tool),
                    Route::To(Step::Informer),
                    Route::To(Step::Planner),
                    Route::End,
                ],
                |s: &AgentState| match (&s.outcome, &s.action) {
                    (Some(_), _) => Route::End,
                    (None, Some(Action::Inform(_))) => Route::To(Step::Informer),
                    (None, None) => Route::To(Step::Planner),
                    (None, _) => Route::To(Step::Tool),
                },
            )
    } else {
        graph.conditional_edge(
            Step::Planner,
            &[Route::To(Step::Tool), Route::To(Step::Planner), Route::End],
            |s: &AgentState| match (&s.outcome, &s.action) {
                (Some(_), _) => Route::End,
                (None, None) => Route::To(Step::Planner),
                (None, _) => Route::To(Step::Tool),
            },
        )
    };
    graph.conditional_edge(
        Step::Tool,
        &[Route::To(Step::Planner), Route::End],
        |s: &AgentState| match s.outcome {
            Some(_) => Route::End,
            None => Route::To(Step::Planner),
        },
    )
}

async fn plan_step<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: NodeSettings,
    informer: bool,
    failed_step: FailedStep,
) -> Result<(), AgentError> {
    let namespace = effects.namespace().await;
    state.namespace_names = checks::summary_names(&namespace);
    let system = prompts::planner(
        &state.pinned_namespace(&namespace),
        state.recent_cells_shown(),
        &state.skills,
        informer.then_some(state.key_information.as_slice()),
    );
    // The observation is the kernel's to write: a model that goes on to
    // write its own is stopped there (it would be cut when read anyway).
    let answer = settings
        .answer_until(state, effects, system, OBSERVATION_STOP)
        .await?;
    state.record_answer(answer.text);
    if answer.truncated && ends_in_open_block(&state.answer) {
        // A block cut off half-written (at the length limit, or stopped for
        // repeating itself) would fail: asked for shorter code instead.
        if state.turn < state.max_turns {
            state
                .conversation
                .push(ChatMessage::user(prompts::observation(prompts::CUT_OFF)));
            state.action = None;
        } else {
            state.outcome = Some(Outcome::MaxTurns);
        }
        return Ok(());
    }
    let mut action = parse_action(&state.answer);
    if let Action::Unclear(text) = &action {
        // Prose before anything ran, for a request that needs code: told
        // once how to answer; else taken as the final answer.
        let nudge = state.executions.is_empty()
            && !state.nudged_for_code
            && state.turn < state.max_turns
            && checks::needs_code(&state.request, &state.namespace_names);
        if nudge {
            state.nudged_for_code = true;
            state
                .conversation
                .push(ChatMessage::user(prompts::PLANNER_FORMAT.to_owned()));
            state.action = None;
            return Ok(());
        }
        action = Action::Finish(text.clone());
    }
    if let Action::Finish(_) = &action
        && !state.nudged_after_review
        && state.turn < state.max_turns
        && let Some(unmet) = unmet(
            state,
            effects,
            &last_step(state),
            state.executions.last().filter(|last| raised(last)),
        )
        .await
    {
        // A final answer while a variable, file or figure the request names
        // is missing, or the last step changed a copy: sent back once, with
        // why (mid-way steps are not checked: exploring first is the
        // planner's way). Also with no step at all: small models answer
        // "3" to "store the count in n" and stop.
        state.nudged_after_review = true;
        state
            .conversation
            .push(ChatMessage::user(prompts::observation(
                &prompts::not_done_yet(&unmet.reasoning, &unmet.next_action),
            )));
        state.action = None;
        return Ok(());
    }
    if let Action::Finish(text) = &action {
        if !state.executions.is_empty() {
            // Done only once the check passes: the last steps and the final
            // answer beside the values the request names.
            state.looked_at += 1;
            let failed = failed_step == FailedStep::Checked
                && state.executions.last().is_some_and(|last| last.failed);
            let work = Work {
                since: state.executions.len().saturating_sub(CHECKED_STEPS),
                failed,
                answer: Some(text.as_str()),
                agreed: None,
                sent_back: state.looked_at - 1,
            };
            let mut verdict = check(state, effects, &settings, work).await?;
            verdict.cannot_fix = false; // the turn limit bounds the retries
            effects.emit(AgentEvent::Verdict(verdict.clone()));
            let done = verdict.is_complete;
            let feedback = prompts::not_done_yet(&verdict.reasoning, &verdict.next_action);
            state.verdict = Some(verdict);
            if !done {
                if state.turn >= state.max_turns {
                    state.outcome = Some(Outcome::MaxTurns);
                } else {
                    state
                        .conversation
                        .push(ChatMessage::user(prompts::observation(&feedback)));
                    state.action = None;
                }
                return Ok(());
            }
        }
        state.answer = text.clone();
        state.outcome = Some(if state.executions.is_empty() {
            Outcome::Answered
        } else {
            Outcome::Complete
        });
    }
    state.action = Some(action);
    Ok(())
}

/// The step before the final answer, when it ran without failing: what the
/// answer rests on, for the checks that read a step's code and output.
fn last_step(state: &AgentState) -> Vec<Execution> {
    state
        .executions
        .last()
        .filter(|last| !last.failed)
        .cloned()
        .into_iter()
        .collect()
}

/// The tool node: performs the planner's action and tells it what happened.
async fn act<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    execute: bool,
) -> Result<(), AgentError> {
    // The action as code, and why it cannot be taken, if it cannot.
    let (code, refusal) = match state.action.take() {
        Some(Action::Python(code)) => (code, None),
        // Printed, so text results read as text rather than as a repr.
        Some(Action::Tool { name, input }) if PLANNER_TOOLS.contains(&name.as_str()) => {
            (format!("print({})", tool_call(&name, &input)), None)
        }
        Some(Action::Tool { name, input }) => match statements(&input) {
            // An action named as no tool is, given Python to run (`Action:
            // define`, `Action Input: rows = [1, 2]`): the code the model
            // meant. Refused, a small model names it again every step.
            Some(code) => (code, None),
            None => {
                let refusal = format!(
                    "There is no action named {name:?}. The actions are python, {}, and finish.",
                    PLANNER_TOOLS.join(", ")
                );
                (tool_call(&name, &input), Some(refusal))
            }
        },
        Some(Action::Inform(input)) => {
            let refusal = "The informer is not part of this run; \
                 call describe(variable) to look at a variable.";
            (tool_call("inform", &input), Some(refusal.to_owned()))
        }
        Some(Action::Finish(_) | Action::Unclear(_)) | None => {
            return Err(AgentError::Graph("no action to take".into()));
        }
    };
    let observation = match refusal {
        None => {
            state.pending = vec![CodeBlock { code }];
            let ran = run_pending(state, effects, execute).await?;
            if !execute {
                state.outcome = Some(Outcome::Answered); // --no-exec: shown, not run
                return Ok(());
            }
            let mut report = ran.report;
            let last = state.executions.last().cloned().expect("the action ran");
            if last.failed
                && let Some(hint) = errors::failure_hint(&last.output)
            {
                report.push_str(&format!("\nHint: {hint}."));
            }
            // The same code with the same outcome as an earlier step will
            // not change: said once, and the second time the run stops.
            let earlier = &state.executions[..state.executions.len() - 1];
            if let Some(step) = earlier
                .iter()
                .position(|e| e.code.trim() == last.code.trim() && e.output == last.output)
            {
                state.repeats += 1;
                if state.repeats > 1 {
                    state.outcome = Some(Outcome::Repeating);
                    return Ok(());
                }
                report.push_str(&prompts::planner_repeated(step + 1));
            }
            report
        }
        Some(refusal) => {
            let turn = state.turn;
            effects.emit(AgentEvent::Code {
                turn,
                block: 0,
                code: code.clone(),
            });
            effects.emit(AgentEvent::Executed {
                turn,
                block: 0,
                execution: Execution::not_run(code, refusal.clone()),
            });
            refusal
        }
    };
    state
        .conversation
        .push(ChatMessage::user(prompts::observation(&observation)));
    if state.turn >= state.max_turns {
        state.outcome = Some(Outcome::MaxTurns);
    }
    Ok(())
}

/// The Python statements a tool's input is, if it is any: a fenced block,
/// or text that reads as Python (an assignment, a call, an import), not a
/// bare name or value.
fn statements(input: &str) -> Option<String> {
    let code = match code_blocks(input).into_iter().next() {
        Some(block) => block.code,
        None => input.trim().trim_matches('`').trim().to_owned(),
    };
    reads_as_python(&code).then_some(code)
}

/// The informer node: describes the variables the planner asked about (at
/// the start, those the request names) for the planner's prompt.
async fn inform<E: Effects>(state: &mut AgentState, effects: &mut E) -> Result<(), AgentError> {
    let asked = match state.action.take() {
        Some(Action::Inform(names)) => Some(identifiers(&names)),
        _ => None,
    };
    let described = effects
        .describe(&state.request, asked.as_deref().unwrap_or_default())
        .await;
    effects.emit(AgentEvent::Informed(described.clone()));
    let names: Vec<_> = described.iter().map(|(name, _)| name.clone()).collect();
    for (name, text) in described {
        match state.key_information.iter_mut().find(|(n, _)| *n == name) {
            Some(known) => known.1 = text,
            None => state.key_information.push((name, text)),
        }
    }
    if asked.is_some() {
        // The planner spoke last; it is told where to look.
        let told = if names.is_empty() {
            "The informer found no such variables.".to_owned()
        } else {
            format!(
                "The informer described {} under Key information.",
                names.join(", ")
            )
        };
        state
            .conversation
            .push(ChatMessage::user(prompts::observation(&told)));
    }
    Ok(())
}

/// The Python identifiers in `text`, in order, once each.
fn identifiers(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        let starts_well = word.starts_with(|c: char| c.is_alphabetic() || c == '_');
        if starts_well && !names.iter().any(|n| n == word) {
            names.push(word.to_owned());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::graph::RunEnd;
    use crate::agent::script::{Script, assert_roles_alternate, fails_once, latest, ok};

    const DONE: &str = r#"{"is_complete": true, "reasoning": "answered", "next_action": ""}"#;
    const ONE_VALUE: &str = r#"{"form": "one number"}"#;

    fn settings(execute: bool) -> NodeSettings {
        NodeSettings {
            execute,
            ..NodeSettings::for_tests()
        }
    }

    fn run(script: &mut Script, state: &mut AgentState, informer: bool, execute: bool) -> RunEnd {
        let graph = planner_graph::<Script>(
            settings(execute),
            state.max_turns,
            informer,
            FailedStep::Checked,
        );
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(graph.run(state, script))
            .unwrap()
    }

    #[test]
    fn the_planner_loops_through_tools_until_it_finishes() {
        let mut script = Script::new(
            &[
                "Thought: look\nAction: describe\nAction Input: x",
                "Thought: compute\nAction: python\nAction Input:\n```python\nprint(x * 42)\n```",
                "Thought: I know it\nFinal Answer: It is 42.",
                DONE,
            ],
            ok,
        );
        let mut state = AgentState::new("what is x times 42?", Vec::new(), 5);
        let end = run(&mut script, &mut state, false, true);
        assert_eq!(
            script.nodes,
            ["planner", "tool", "planner", "tool", "planner"]
        );
        assert_eq!(end, RunEnd::Finished { steps: 5 });
        assert_eq!(script.executed, ["print(describe(x))", "print(x * 42)"]);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        assert_eq!(state.answer, "It is 42.");
        assert_eq!(state.turn, 3);
        // Each observation reached the next planner step.
        let second = latest(&script.requests[1]);
        assert!(
            second.starts_with("Observation:") && second.contains("describe(x)"),
            "{second}"
        );
        // The planner's prompt lists the tools and how to answer.
        let system = &script.requests[0].system;
        assert!(system.contains("Action Input:") && system.contains("describe("));
        assert!(!system.contains("inform"), "{system}");
        assert_roles_alternate(&script);
    }

    #[test]
    fn a_final_answer_before_the_named_variable_exists_is_sent_back_once() {
        let mut script = Script::new(
            &[
                "Action: python\nAction Input:\n```python\nprint(len(x))\n```",
                "Final Answer: 3",
                "Action: python\nAction Input:\n```python\nn = 3\n```",
                "Final Answer: stored",
                ONE_VALUE,
                DONE,
            ],
            ok,
        );
        let mut state = AgentState::new("Count them; store it in `n`.", Vec::new(), 6);
        run(&mut script, &mut state, false, true);
        let told = latest(&script.requests[2]);
        assert!(told.starts_with("Observation:"), "{told}");
        assert!(told.contains("`n` does not exist yet"), "{told}");
        assert_eq!(script.executed, ["print(len(x))", "n = 3"]);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        assert_eq!(state.answer, "stored");
        assert_roles_alternate(&script);
    }

    #[test]
    fn a_final_answer_after_the_step_that_failed_to_make_the_variable_is_told_the_failure() {
        let mut script = Script::new(
            &[
                "Action: python\nAction Input:\n```python\nprint(1/0)\n```",
                "Final Answer: 3",
                "Action: python\nAction Input:\n```python\nn = 3\n```",
                "Final Answer: stored",
                ONE_VALUE,
                DONE,
            ],
            fails_once,
        );
        let mut state = AgentState::new("Count them; store it in `n`.", Vec::new(), 6);
        run(&mut script, &mut state, false, true);
        // Told only "create it", a small model sends the failing code again.
        let told = latest(&script.requests[2]);
        assert!(
            told.contains("`n` does not exist yet: the code failed (ZeroDivisionError")
                && told.contains("fix the cause of the error"),
            "{told}"
        );
        assert_eq!(script.executed, ["print(1/0)", "n = 3"]);
        assert_eq!(state.outcome, Some(Outcome::Complete));
    }

    #[test]
    fn a_final_answer_with_no_step_while_the_named_variable_is_missing_is_sent_back_once() {
        let mut script = Script::new(
            &[
                "Final Answer: 3",
                "Action: python\nAction Input:\n```python\nn = 3\n```",
                "Final Answer: stored",
                ONE_VALUE,
                DONE,
            ],
            ok,
        );
        let mut state = AgentState::new("Count them; store it in `n`.", Vec::new(), 6);
        run(&mut script, &mut state, false, true);
        let told = latest(&script.requests[1]);
        assert!(told.contains("`n` does not exist yet"), "{told}");
        assert_eq!(script.executed, ["n = 3"]);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        assert_roles_alternate(&script);
    }

    #[test]
    fn a_final_answer_after_a_step_that_changed_a_copy_is_sent_back_with_the_fix() {
        let mut script = Script::new(
            &[
                "Action: python\nAction Input:\n```python\npeople[\"age\"].fillna(38.0, inplace=True)\n```",
                "Final Answer: filled",
                "Action: python\nAction Input:\n```python\npeople[\"age\"] = people[\"age\"].fillna(38.0)\n```",
                "Final Answer: filled now",
                DONE,
            ],
            |code| Execution {
                output: if code.contains("inplace") {
                    "<agent>:1: ChainedAssignmentError: A value is being set on a copy".into()
                } else {
                    String::new()
                },
                ..ok(code)
            },
        );
        let mut state = AgentState::new("Fill the missing ages in people.", Vec::new(), 6);
        run(&mut script, &mut state, false, true);
        let told = latest(&script.requests[2]);
        assert!(
            told.starts_with("Observation:")
                && told.contains("people[\"age\"] = people[\"age\"].fillna(38.0)"),
            "{told}"
        );
        assert_eq!(script.executed.len(), 2);
        assert_eq!(state.answer, "filled now");
        assert_eq!(state.outcome, Some(Outcome::Complete));
    }

    #[test]
    fn a_final_answer_the_check_finds_short_is_another_step() {
        let not_done = r#"{"is_complete": false, "reasoning": "only the first row was summed", "next_action": "sum every row"}"#;
        let mut script = Script::new(
            &[
                "Action: python\nAction Input:\n```python\ntotal = [1, 2]\n```",
                "Final Answer: stored",
                ONE_VALUE,
                "Action: python\nAction Input:\n```python\ntotal = 1\n```",
                "Final Answer: stored",
                not_done,
                "Action: python\nAction Input:\n```python\ntotal = 3\n```",
                "Final Answer: The total is 3.",
                DONE,
            ],
            ok,
        );
        let mut state = AgentState::new("Store the total in `total`.", Vec::new(), 6);
        run(&mut script, &mut state, false, true);
        let told = |i: usize| latest(&script.requests[i]);
        assert!(
            told(3).starts_with("Observation:") && told(3).contains("one value"),
            "{}",
            told(3)
        );
        assert!(told(6).contains("only the first row"), "{}", told(6));
        // The review saw the value, not the final answer's claim about it.
        let review = latest(script.requests.last().unwrap());
        assert!(
            !review.contains("The total is 3.") && review.contains("total: int: 3"),
            "{review}"
        );
        assert_eq!(state.outcome, Some(Outcome::Complete));
        assert_eq!(state.answer, "The total is 3.");
        assert_eq!(state.checked, ["total: int: 3"]);
        assert_roles_alternate(&script);
        // At the last turn, a final answer the check finds short ends the run unfinished.
        let mut script = Script::new(
            &[
                "Action: python\nAction Input:\n```python\ntotal = 1\n```",
                "Final Answer: stored",
                ONE_VALUE,
                not_done,
            ],
            ok,
        );
        let mut state = AgentState::new("Store the total in `total`.", Vec::new(), 2);
        run(&mut script, &mut state, false, true);
        assert_eq!(state.outcome, Some(Outcome::MaxTurns));
        assert!(state.checked.is_empty());
    }

    #[test]
    fn a_step_that_repeats_an_earlier_one_is_told_so_then_the_run_stops() {
        let query = "Action: python\nAction Input:\n```python\nquery(x)\n```";
        let import = "Action: python\nAction Input:\n```python\nimport pandas as pd\n```";
        let mut script = Script::new(&[query, import, query, import], |code| {
            let failed = code.contains("query");
            Execution {
                output: if failed {
                    "NameError: name 'query' is not defined".into()
                } else {
                    String::new()
                },
                failed,
                ..ok(code)
            }
        });
        let mut state = AgentState::new("filter x", Vec::new(), 8);
        run(&mut script, &mut state, false, true);
        // The first failure comes with a hint; the third step, a repeat of
        // the first, is told so; the fourth repeats too, and the run stops.
        let first = latest(&script.requests[1]);
        assert!(first.contains("Hint: define or import the name"), "{first}");
        let third = latest(&script.requests[3]);
        assert!(third.contains("code of step 1 again"), "{third}");
        assert_eq!(state.outcome, Some(Outcome::Repeating));
        assert_eq!(script.requests.len(), 4);
    }

    #[test]
    fn a_failure_and_an_unknown_tool_are_observations_the_planner_sees() {
        let mut script = Script::new(
            &[
                "Action: python\nAction Input: 1/0",
                "Action: frobnicate\nAction Input: x",
                "Final Answer: could not",
                DONE,
            ],
            fails_once,
        );
        let mut state = AgentState::new("divide", Vec::new(), 3);
        run(&mut script, &mut state, false, true);
        assert_eq!(script.executed, ["1/0"]);
        // The final answer rests on a step that failed: never done, whatever
        // the review says, and at the last turn the run ends unfinished.
        assert!(state.verdict.as_ref().is_some_and(|v| !v.is_complete));
        assert_eq!(state.outcome, Some(Outcome::MaxTurns));
        let told = |n: usize| script.requests[n].messages.last().unwrap().content.clone();
        assert!(told(1).contains("ZeroDivisionError"), "{}", told(1));
        assert!(
            told(2).contains("no action named \"frobnicate\"") && told(2).contains("grep"),
            "{}",
            told(2)
        );
        let refused = script.events.iter().any(|e| {
            matches!(e, AgentEvent::Executed { execution, .. }
                if execution.failed && execution.output.contains("frobnicate"))
        });
        assert!(refused, "{:?}", script.events);
        assert_roles_alternate(&script);
    }

    #[test]
    fn an_unknown_action_given_python_runs_it() {
        // As the 1.5B coder model wrote it on a development task (shortened),
        // and again for five steps when refused.
        let define = "Thought: I need to define the name.\nAction: define\nAction Input: inn = \"str\\nAa\\n\"\n```";
        let fenced = "Action: compute\nAction Input:\n```python\nn = len(inn)\n```";
        let mut script = Script::new(
            &[
                define,
                fenced,
                "Action: tabulate\nAction Input: inn",
                "Final Answer: 6",
                DONE,
            ],
            ok,
        );
        let mut state = AgentState::new("count", Vec::new(), 4);
        run(&mut script, &mut state, false, true);
        assert_eq!(script.executed, ["inn = \"str\\nAa\\n\"", "n = len(inn)"]);
        // A bare value is no code: that action is still refused.
        let told = latest(&script.requests[3]);
        assert!(told.contains("no action named \"tabulate\""), "{told}");
    }

    #[test]
    fn an_action_cut_off_mid_block_runs_nothing_of_it_and_asks_again() {
        let mut script = Script::new(
            &[
                "Action: python\nAction Input:\n```python\nrows = [1, 2,",
                "Action: python\nAction Input:\n```python\nrows = [1, 2]\n```",
                "Final Answer: rows made",
                DONE,
            ],
            ok,
        );
        script.truncate_at = Some(0);
        let mut state = AgentState::new("make rows", Vec::new(), 5);
        run(&mut script, &mut state, false, true);
        assert_eq!(script.executed, ["rows = [1, 2]"]);
        let told = latest(&script.requests[1]);
        assert!(
            told.starts_with("Observation:") && told.contains(prompts::CUT_OFF),
            "{told}"
        );
        assert_eq!(state.outcome, Some(Outcome::Complete));
        assert_roles_alternate(&script);
    }

    #[test]
    fn the_last_turns_action_runs_and_then_the_run_stops() {
        let mut script = Script::new(
            &[
                "Action: python\nAction Input: a = 1",
                "Action: python\nAction Input: b = 2",
            ],
            ok,
        );
        let mut state = AgentState::new("never done", Vec::new(), 2);
        run(&mut script, &mut state, false, true);
        assert_eq!(script.executed, ["a = 1", "b = 2"]);
        assert_eq!(state.outcome, Some(Outcome::MaxTurns));
        assert_eq!(state.turn, 2);
    }

    #[test]
    fn where_the_request_names_no_value_the_review_checks_the_final_answer() {
        let mut script = Script::new(
            &[
                "Action: python\nAction Input:\n```python\nprint(max([3, 9, 4]))\n```",
                "Final Answer: The largest is 9.",
                DONE,
            ],
            ok,
        );
        let mut state = AgentState::new("Which of 3, 9 and 4 is the largest?", Vec::new(), 4);
        run(&mut script, &mut state, false, true);
        let review = latest(script.requests.last().unwrap());
        assert!(review.contains("The largest is 9."), "{review}");
        assert_eq!(state.outcome, Some(Outcome::Complete));
    }

    #[test]
    fn a_plain_answer_ends_the_run_at_once() {
        let mut script = Script::new(&["Lists keep their order."], ok);
        let mut state = AgentState::new("what is a list?", Vec::new(), 5);
        run(&mut script, &mut state, false, true);
        assert_eq!(script.nodes, ["planner"]);
        assert_eq!(state.outcome, Some(Outcome::Answered));
        assert_eq!(state.answer, "Lists keep their order.");
    }

    #[test]
    fn no_exec_shows_the_first_action_and_stops() {
        let mut script = Script::new(&["Action: python\nAction Input: import os"], ok);
        let mut state = AgentState::new("show me", Vec::new(), 5);
        run(&mut script, &mut state, false, false);
        assert!(script.executed.is_empty());
        assert_eq!(script.nodes, ["planner", "tool"]);
        assert!(
            script
                .events
                .iter()
                .any(|e| matches!(e, AgentEvent::Code { code, .. } if code == "import os"))
        );
        assert_eq!(state.outcome, Some(Outcome::Answered));
    }

    #[test]
    fn the_informer_runs_first_and_again_when_the_planner_asks() {
        let mut script = Script::new(
            &[
                "Thought: I need prices too\nAction: inform\nAction Input: prices",
                "Final Answer: x is 1.",
            ],
            ok,
        );
        let mut state = AgentState::new("what is x?", Vec::new(), 5);
        run(&mut script, &mut state, true, true);
        assert_eq!(script.nodes, ["informer", "planner", "informer", "planner"]);
        assert_eq!(script.described, [vec![], vec!["prices".to_owned()]]);
        // The first planner prompt had what the informer found at the start,
        // the second what it found next: the system prompt changes with it.
        let first = &script.requests[0];
        let system = &first.system;
        assert!(system.contains("Key information") && system.contains("x: int = 1"));
        assert!(system.contains("inform"), "{system}");
        let second = &script.requests[1];
        assert!(
            second.system.contains("prices: list, 3 items of int"),
            "{}",
            second.system
        );
        let told = &second.messages.last().unwrap().content;
        assert!(told.contains("described prices"), "{told}");
        let informed = script
            .events
            .iter()
            .filter(|e| matches!(e, AgentEvent::Informed(_)))
            .count();
        assert_eq!(informed, 2);
        assert_eq!(state.outcome, Some(Outcome::Answered));
        assert_roles_alternate(&script);
    }

    #[test]
    fn without_the_informer_asking_for_it_is_refused() {
        let mut script = Script::new(&["Action: inform\nAction Input: x", "Final Answer: ok"], ok);
        let mut state = AgentState::new("what is x?", Vec::new(), 5);
        run(&mut script, &mut state, false, true);
        assert_eq!(script.nodes, ["planner", "tool", "planner"]);
        assert!(script.described.is_empty());
        let told = &script.requests[1].messages.last().unwrap().content;
        assert!(told.contains("describe(variable)"), "{told}");
    }

    #[test]
    fn odd_answers_never_panic_and_always_give_an_action() {
        for answer in [
            "",
            "Action:",
            "Action:\n",
            "action input: x",
            "Final Answer:",
            "```",
            "```python",
            "Action: ```\nAction Input: ```",
            "Action: grep(",
            "Action: )(",
            "Thought: ü\nAction: pëek\nAction Input: «x», 3",
            "**Action:** **",
            "Observation: first\nAction: python",
            "{\"action\": 3}",
            "{\"action\": \"python\", \"input\": {\"code\": 1}}",
            "Action: 日本\nAction Input: 語",
        ] {
            let action = parse_action(answer);
            if let Action::Tool { name, input } = &action {
                let _ = tool_call(name, input);
            }
        }
        for input in ["", "`", "```", "```\n", "\"", "[", "{", "日本", "a b (c"] {
            let _ = tool_call("grep", input);
        }
    }

    #[test]
    fn identifiers_are_found_once_each() {
        assert_eq!(
            identifiers("df, prices and df; 3x _y"),
            ["df", "prices", "and", "_y"]
        );
    }

    #[test]
    fn the_tools_are_the_toolboxs_functions() {
        let toolbox = prompts::toolbox(&[]);
        let listed: Vec<_> = toolbox
            .lines()
            .filter_map(|line| line.strip_prefix("- ")?.split_once('(').map(|(n, _)| n))
            .collect();
        // The same names (the prompt orders them for the model).
        let mut listed = listed;
        let mut tools = PLANNER_TOOLS.clone();
        listed.sort_unstable();
        tools.sort_unstable();
        assert_eq!(listed, tools);
    }

    #[test]
    fn prose_before_any_action_is_sent_back_once_for_a_request_that_needs_code() {
        let mut script = Script::new(
            &[
                "The mean is probably 2.",
                "Thought: compute it\nAction: python\nAction Input: print(sum(x) / len(x))",
                "Final Answer: 42",
                DONE,
            ],
            ok,
        );
        let mut state = AgentState::new("Compute the mean of x", Vec::new(), 5);
        run(&mut script, &mut state, false, true);
        assert_eq!(script.executed, ["print(sum(x) / len(x))"]);
        assert!(latest(&script.requests[1]).starts_with(prompts::PLANNER_FORMAT));
        assert_eq!(state.outcome, Some(Outcome::Complete));
        // A question that needs no code is answered in prose.
        let mut script = Script::new(&["A list keeps its order."], ok);
        let mut state = AgentState::new("What is a list?", Vec::new(), 5);
        run(&mut script, &mut state, false, true);
        assert_eq!(state.outcome, Some(Outcome::Answered));
        assert_eq!(script.requests.len(), 1);
    }
}
