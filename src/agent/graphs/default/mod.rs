//! The default graph (seeds 000 and 002):
//!
//! ```text
//! generate -> extract -> (no code: end) -> [others] -> execute -> reflect
//!     ^                                                             |
//!     +---- not complete and turns left ----------------------------+--> end
//! ```
//!
//! The reflection's reasoning and next step go into the conversation, so the
//! next generate turn builds on them, and a final text-only answer stays in
//! the conversation for the next `%%ask`.
//!
//! Cheap checks come before a model judges (see [`crate::agent::parse::checks`]): a first
//! answer with no code for a request that needs some is sent back once; a
//! failed block, or a variable or file the request names that is not there,
//! means not done without asking (a block that failed on a key it spelled
//! otherwise than the data, `'wind_speed'` for `'wind speed'`, runs again
//! with the data's spelling of every key the error line names, no model
//! asked, as does one that called a Series method through an accessor,
//! `s.str.isin`, without it: [`crate::agent::parse::respell`];
//! one that failed reading a variable the namespace holds from a file that
//! is not here, or importing a package that is not installed and that
//! nothing in it uses, runs again without that line; a package that is not
//! installed goes back with what computes its calls without it:
//! [`crate::agent::parse::stand_ins`]);
//! a block that typed in data a variable held (from the request's example
//! or a printed table), failed or not, runs again on the variable, put
//! back first ([`crate::agent::parse::retyped`]); lines that printed as
//! fixed text a number nothing computed holds are left out of what the
//! check reads ([`crate::agent::parse::claims`]), the review told of them;
//! and a turn that only repeats an earlier one (the one before, or one
//! before that when the model alternates) is told so once, then the run
//! stops (where the check had compared its value with the result the
//! request writes out, a solution written afresh that computes another
//! runs first, once: [`super::fresh_solution`]). They may say "not done";
//! only the check says "done" ([`super::check`]: the form each value the
//! request names must have, compared by code, then a review of the request
//! beside the code, its report and those values as they are now).
//!
//! Where other solutions are tried ([`super::solutions`]: sampled beside
//! the turn's answer, run on scratch copies), their values weigh in first:
//! another answer with as many solutions behind it is not done, shown to
//! the model; otherwise the review is told how many agreed.

use super::check::{Work, check, doubt_cannot_fix};
use super::fresh_solution::fresh_solution;
use super::solutions::{compare_solutions, dispute, names_to_compare, try_other_solutions};
use super::steps::{NodeSettings, close_with_answer, code_prompt, node, resent_cell, run_pending};
use super::unmet::unmet;
use crate::agent::graph::{Activity, Graph, Route, nodes};
use crate::agent::llm::{ChatMessage, Role};
use crate::agent::parse::checks::Repeat;
use crate::agent::parse::code::{closed_code_blocks, code_blocks};
use crate::agent::parse::prose::review_words;
use crate::agent::parse::renamed::renamed_definition;
use crate::agent::parse::respell::{respell, without_accessor};
use crate::agent::parse::retyped::{asks_to_set, retypes_a_variable};
use crate::agent::parse::{checks, claims, errors, stand_ins};
use crate::agent::prompts;
use crate::agent::run::{
    AgentError, AgentEvent, AgentState, CodeBlock, Consensus, Effects, Execution, Outcome, Verdict,
};

/// A cap on nodes per run, well above what the turn limit allows (with the
/// two answers that use no turn, one without code and one copy of a cell,
/// and after any turn a run again on the user's data), so a routing
/// mistake cannot loop forever.
fn step_cap(max_turns: u32) -> usize {
    (max_turns as usize + 2) * 6 + 4
}

nodes! {
    /// The default graph's nodes.
    pub enum Step {
        Generate = "generate", Some(Activity::Answering);
        Extract = "extract", None;
        Others = "others", Some(Activity::TryingOtherSolutions);
        Execute = "execute", Some(Activity::RunningCode);
        Reflect = "reflect", Some(Activity::Reviewing);
    }
}

/// The default graph for a run with `max_turns`.
pub fn default_graph<E: Effects>(
    settings: NodeSettings,
    max_turns: u32,
) -> Graph<AgentState, E, Step> {
    let generate_settings = settings.clone();
    let reflect_settings = settings.clone();
    let others_settings = settings.clone();
    let route_settings = settings.clone();
    let execute_enabled = settings.execute;
    let once = settings.once;
    Graph::new(Step::Generate, step_cap(max_turns))
        .node(
            Step::Generate,
            node(move |s, e| Box::pin(generate(s, e, generate_settings.clone()))),
        )
        .node(
            Step::Extract,
            node(move |s, _e| Box::pin(async move { extract(s, once) })),
        )
        .node(
            Step::Others,
            node(move |s, e| Box::pin(others(s, e, others_settings.clone()))),
        )
        .node(
            Step::Execute,
            node(move |s, e| Box::pin(execute(s, e, execute_enabled, once))),
        )
        .node(
            Step::Reflect,
            node(move |s, e| Box::pin(reflect(s, e, reflect_settings.clone()))),
        )
        .edge(Step::Generate, Route::To(Step::Extract))
        .conditional_edge(
            Step::Extract,
            &[
                Route::To(Step::Others),
                Route::To(Step::Execute),
                Route::To(Step::Generate),
                Route::End,
            ],
            move |s: &AgentState| {
                if !s.pending.is_empty()
                    && names_to_compare(s, &route_settings, &s.answer).is_some()
                {
                    Route::To(Step::Others)
                } else if !s.pending.is_empty() {
                    Route::To(Step::Execute)
                } else if s.outcome.is_none() {
                    Route::To(Step::Generate)
                } else {
                    Route::End
                }
            },
        )
        .edge(Step::Others, Route::To(Step::Execute))
        .conditional_edge(
            Step::Execute,
            &[Route::To(Step::Reflect), Route::End],
            move |_s: &AgentState| {
                if execute_enabled && !once {
                    Route::To(Step::Reflect)
                } else {
                    Route::End
                }
            },
        )
        .conditional_edge(
            Step::Reflect,
            &[
                Route::To(Step::Generate),
                Route::To(Step::Execute),
                Route::End,
            ],
            |s: &AgentState| match s.outcome {
                Some(_) => Route::End,
                // A respelled block runs without asking the model.
                None if !s.pending.is_empty() => Route::To(Step::Execute),
                None => Route::To(Step::Generate),
            },
        )
}

async fn generate<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: NodeSettings,
) -> Result<(), AgentError> {
    state.left_out.clear();
    let system = code_prompt(state, effects).await;
    let answer = settings.write_code(state, effects, system).await?;
    state.truncated = answer.truncated;
    state.record_answer(answer.text);
    Ok(())
}

/// Samples other solutions of the turn's request and tries them on
/// scratch copies, before the turn's own code runs.
async fn others<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: NodeSettings,
) -> Result<(), AgentError> {
    let system = code_prompt(state, effects).await;
    try_other_solutions(state, effects, &settings, system).await
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
        let reason = review_words(&verdict.reasoning);
        state
            .conversation
            .push(ChatMessage::user(prompts::still_unfinished(&reason)));
        return Ok(());
    }
    // An answer with no code before any ran cannot have done a request
    // that needs code: asked once to do it (a small model often answers
    // "3" to "store the count in `n`"). Nothing ran, so the answer uses
    // no turn.
    let nudge = !once
        && state.executions.is_empty()
        && !state.nudged_for_code
        && checks::needs_code(&state.request, &state.namespace_names);
    if nudge {
        state.nudged_for_code = true;
        state.turn -= 1;
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
    } else if ran.copied {
        // The copy leaves the conversation, and the recent cells the
        // prompt: shown either, a small model sends the cell once more.
        state.conversation.pop();
    } else {
        // The answer with the code is the message just before.
        state
            .conversation
            .push(ChatMessage::user(ran.report_below_answer));
    }
    Ok(())
}

async fn reflect<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: NodeSettings,
) -> Result<(), AgentError> {
    state.looked_at += 1;
    let solutions = compare_solutions(state, effects).await;
    let mut precheck = precheck(state, effects).await;
    // Another answer with as many solutions behind it settles "not done"
    // before any review, and the model is told both.
    let mut feedback = None;
    if let (Precheck::Judge { failed: false }, Some(solutions)) = (&precheck, &solutions)
        && let Some((verdict, told)) = dispute(solutions)
    {
        precheck = Precheck::NotDone(verdict);
        feedback = Some(told);
    }
    let verdict = match precheck {
        Precheck::Judge { failed } => {
            let since = state.executions.len() - this_turns_executions(state).len();
            let consensus = solutions.as_ref().map(|s| s.agreement.consensus());
            let agreed = match consensus {
                Some(Consensus::Unanimous { of }) => Some((of, of)),
                Some(Consensus::Majority { agree, of }) => Some((agree, of)),
                _ => None,
            };
            let work = Work {
                since,
                failed,
                answer: None,
                agreed,
                sent_back: state.looked_at - 1,
            };
            let mut verdict = check(state, effects, &settings, work).await?;
            doubt_cannot_fix(state, &mut verdict, failed);
            verdict
        }
        Precheck::NotDone(verdict) => verdict,
        Precheck::Rerun { note, code } => {
            run_again(state, effects, note, code);
            return Ok(());
        }
        Precheck::OnUsersData { note, code } => {
            run_again(state, effects, note, code);
            state.turn -= 1;
            return Ok(());
        }
        Precheck::CopiedCell => {
            if state.recent_cells_copied == 1 {
                // Nothing ran: the first copy does not use up a turn, so
                // the answer without the cells in view gets the one it took.
                state.turn -= 1;
            } else if state.turn >= state.max_turns {
                state.outcome = Some(Outcome::MaxTurns);
            }
            return Ok(());
        }
        Precheck::Repeated { error, repeat } => {
            // Against a result compared by code, one solution written
            // afresh runs instead of asking the model once more (as a turn).
            if state.turn < state.max_turns
                && let Some(code) = fresh_solution(state, effects, &settings).await?
            {
                run_again(state, effects, prompts::FRESH_SOLUTION.to_owned(), code);
                return Ok(());
            }
            if state.repeats > 1 || state.turn >= state.max_turns {
                state.outcome = Some(Outcome::Repeating);
            } else {
                // (The last review's reasons are about the turn before,
                // not about an earlier one this turn resent.)
                let unfinished = state
                    .verdict
                    .as_ref()
                    .filter(|v| v.parsed && !v.is_complete && !v.reasoning.is_empty())
                    .filter(|_| repeat == Repeat::OfTheTurnBefore);
                let feedback = match (error, unfinished) {
                    (Some(error), _) => {
                        let output = state.executions.last().map(|e| e.output.as_str());
                        let hint = errors::failure_hint(output.unwrap_or(&error));
                        prompts::repeated_failure(&error, hint.as_deref())
                    }
                    (None, Some(verdict)) => {
                        prompts::repeated_unfinished(&verdict.reasoning, &verdict.next_action)
                    }
                    (None, None) => state
                        .executions
                        .last()
                        .and_then(|last| told_after(&state.conversation, &last.code))
                        .map(prompts::repeated_earlier)
                        .unwrap_or_else(|| prompts::REPEATED.to_owned()),
                };
                state.conversation.push(ChatMessage::user(feedback));
            }
            return Ok(());
        }
    };
    effects.emit(AgentEvent::Verdict(verdict.clone()));
    if verdict.is_complete {
        state.outcome = Some(Outcome::Complete);
        if !settings.answer_after {
            close_with_answer(state, effects, &verdict.answer);
        }
    } else if verdict.cannot_fix {
        // Said once, with the reason, instead of spending every turn left.
        state.outcome = Some(Outcome::CannotBeDone);
    } else if state.turn >= state.max_turns {
        state.outcome = Some(Outcome::MaxTurns);
    } else {
        let feedback = feedback
            .unwrap_or_else(|| prompts::not_done_yet(&verdict.reasoning, &verdict.next_action));
        state.conversation.push(ChatMessage::user(feedback));
    }
    state.verdict = Some(verdict);
    Ok(())
}

/// What the model was told after the earlier answer that ran `code` (the
/// last message before its next answer, past the report of what ran,
/// which comes first), for a turn that sends that code again: why it was
/// sent back then holds now. None where the kernel ran other code next
/// without telling the model anything (a rerun).
fn told_after<'a>(conversation: &'a [ChatMessage], code: &str) -> Option<&'a str> {
    let code = code.trim();
    let answers: Vec<usize> = (0..conversation.len())
        .filter(|&at| conversation[at].role == Role::Assistant)
        .collect();
    // (The last answer is the turn that repeated.)
    let (_, earlier) = answers.split_last()?;
    let at = *earlier
        .iter()
        .rev()
        .find(|&&at| !code.is_empty() && conversation[at].content.contains(code))?;
    conversation[at + 1..]
        .iter()
        .take_while(|message| message.role == Role::User)
        .skip(1)
        .last()
        .map(|message| message.content.as_str())
}

/// What the checks before the review found.
enum Precheck {
    /// Nothing settles it: the model judges (`failed`: whether the last
    /// block failed, in a way only a review can tell fixable or not).
    Judge { failed: bool },
    /// Not done, and why, without asking.
    NotDone(Verdict),
    /// The block failed on a mistake the kernel can mend without asking
    /// (a key spelled otherwise than the data does, a loaded variable read
    /// again from a file that is not here): `code`, so mended, runs next,
    /// and `note` says how.
    Rerun { note: String, code: String },
    /// The turn's blocks typed in data over variables the user had: `code`
    /// runs next without those statements, on the user's values, and
    /// `note` says so. Unlike `Rerun` it uses no turn, so the last turn's
    /// work is judged on the user's data too, and no run ends with the
    /// example left in the user's variable.
    OnUsersData { note: String, code: String },
    /// The turn's answer was a cell the user ran since the last request,
    /// not run: the model answers again without that cell in view.
    CopiedCell,
    /// The turn ran the code of an earlier turn with the same outcome
    /// (`error`: the error line, when that outcome was a failure).
    Repeated {
        error: Option<String>,
        repeat: Repeat,
    },
}

async fn precheck<E: Effects>(state: &mut AgentState, effects: &mut E) -> Precheck {
    let last = state.executions.last();
    if last.is_some_and(resent_cell) {
        return Precheck::CopiedCell;
    }
    // Data typed in over a user's variable goes before anything else is
    // weighed, a repeat included: a run that stops on the repeat then
    // leaves the user's data, not the example's.
    let last_failed = last.is_some_and(|e| e.failed && !errors::refused(&e.output));
    if let Some(rerun) = without_retyped_data(state, effects, last_failed).await {
        return rerun;
    }
    let blocks = state.last_turn_blocks;
    // Code sent again after a form check sent its value back holds to that
    // value: the review settles it (see `check`), not the repeat.
    let form_disputed = state.verdict.as_ref().is_some_and(|verdict| {
        state
            .form_disputes
            .iter()
            .any(|d| d.reasoning == verdict.reasoning)
    });
    if !form_disputed && let Some(repeat) = checks::repeated(&state.executions, blocks) {
        state.repeats += 1;
        let error = state
            .executions
            .last()
            .filter(|e| e.failed && !errors::refused(&e.output))
            .map(|e| errors::error_line(&e.output).to_owned());
        return Precheck::Repeated { error, repeat };
    }
    let not_done = |reasoning: String, next_action: &str| {
        Precheck::NotDone(Verdict::not_done(reasoning, next_action))
    };
    // (A block the guard or the user did not allow is not an error to fix:
    // the review decides what it means for the request.)
    let last = state.executions.last();
    if let Some(failed) = last.filter(|e| e.failed && !errors::refused(&e.output)) {
        let error = errors::error_line(&failed.output).to_owned();
        if state.turn < state.max_turns
            && let Some(respelling) = respell(&failed.code, &error)
        {
            let note = prompts::respelled(&respelling.keys);
            return Precheck::Rerun {
                note,
                code: respelling.code,
            };
        }
        if state.turn < state.max_turns
            && let Some(renamed) = renamed_definition(&failed.code, &error, &state.namespace_names)
        {
            return Precheck::Rerun {
                note: prompts::renamed_definition(&renamed.name, &renamed.new_name),
                code: renamed.code,
            };
        }
        if state.turn < state.max_turns
            && let Some((accessor, method, code)) = without_accessor(&failed.code, &error)
        {
            return Precheck::Rerun {
                note: prompts::accessor_left_out(&accessor, &method),
                code,
            };
        }
        // Data the namespace holds, read again from a file that is not
        // here (told so, the local model kept reading it): the block runs
        // again without that line.
        if state.turn < state.max_turns
            && let Some(reload) =
                errors::reloads_a_variable(&failed.code, &error, &state.namespace_names)
        {
            return Precheck::Rerun {
                note: prompts::not_reloaded(&reload.name, &reload.file),
                code: reload.code,
            };
        }
        // An import of a library that is not installed, which nothing in
        // the block uses (put back over code that no longer calls it): the
        // block runs again without it.
        if state.turn < state.max_turns
            && let Some((code, import)) = stand_ins::without_unused_import(&failed.code, &error)
        {
            return Precheck::Rerun {
                note: prompts::unused_import_left_out(&import),
                code,
            };
        }
        // A file or module nobody asked for was the model's guess: not a
        // sign that the request cannot be done.
        // Told only that, a small model drops the import and keeps the call:
        // shown what computes each call with what is installed.
        let earlier = state.executions[..state.executions.len() - 1]
            .iter()
            .rev()
            .map(|e| e.output.as_str());
        let instead = stand_ins::written_instead(&failed.code, &error, earlier);
        let asked = format!("{}\n{}", state.request, state.recent_cells.join("\n"));
        if let Some(hint) = errors::not_asked_for(&error, &asked) {
            let next = match &instead {
                Some(instead) => prompts::without_library(&hint, &instead.package, &instead.calls),
                None => prompts::fix_the_failure(Some(&*hint)),
            };
            return not_done(format!("the code failed ({error})"), &next);
        }
        if let Some(instead) = &instead
            && let Some(name) = errors::undefined_name(&error)
        {
            let hint = prompts::name_from_missing_library(name, &instead.package);
            let next = prompts::without_library(&hint, &instead.package, &instead.calls);
            return not_done(format!("the code failed ({error})"), &next);
        }
        if errors::may_be_unfixable(&error) {
            return Precheck::Judge { failed: true };
        }
        let next = prompts::fix_the_failure(errors::failure_hint(&failed.output).as_deref());
        return not_done(format!("the code failed ({error})"), &next);
    }
    // Lines that printed a guess as fixed text are left out of what is
    // checked (not run again: the rest of the block may change data).
    if let Some(left_out) = typed_in_numbers(state) {
        effects.emit(AgentEvent::Status(prompts::typed_in_left_out(&left_out[0])));
        state.left_out = left_out;
    }
    // (A block that raised was answered above.)
    if let Some(unmet) = unmet(state, effects, this_turns_executions(state), None).await {
        return not_done(unmet.reasoning, &unmet.next_action);
    }
    Precheck::Judge { failed: false }
}

/// The turn's blocks again without the statements that typed in data
/// variables held when the run began (unless the request asks to set
/// them), from the first block with one, after the variables' own objects
/// are put back, so the rest runs on the user's data. For a block that ran,
/// or failed after the statement, only where the typed-in data is other
/// than the user's: a list typed in again as the array of it is a
/// conversion, and stays. None for a failure raised before the statement.
/// On the last turn too: the run on the user's data uses no turn, and
/// without it the run would end on the example's result, with the user's
/// variable left holding the example.
async fn without_retyped_data<E: Effects>(
    state: &AgentState,
    effects: &mut E,
    failed: bool,
) -> Option<Precheck> {
    // Names the run made itself may be typed in afresh: a fix, not a copy.
    let user_names: Vec<String> =
        checks::summary_names(state.namespace_at_start.as_deref().unwrap_or(""))
            .into_iter()
            .filter(|name| !asks_to_set(&state.request, name))
            .collect();
    let turn = this_turns_executions(state);
    let (first, retyped) = turn.iter().enumerate().find_map(|(index, execution)| {
        retypes_a_variable(&execution.code, &user_names, &state.request)
            .map(|retyped| (index, retyped))
    })?;
    // Where a failed block's error rose, against the statement: before it,
    // the typed-in data had no part in it; in it, the statement itself
    // failed (a `NaN` Python does not know), so there is nothing to compare
    // and the block cannot stand as it is; after it, the data is compared
    // as for a block that ran.
    let compared = match errors::failed_line(&turn[turn.len() - 1].output) {
        Some(line) if failed && first == turn.len() - 1 => {
            if line < retyped.lines.0 {
                return None;
            }
            line > retyped.lines.1
        }
        _ => true,
    };
    let mut code = turn[first].code.clone();
    let mut names = Vec::new();
    while let Some(retyped) = retypes_a_variable(&code, &user_names, &state.request) {
        names.push(retyped.name);
        code = retyped.code;
    }
    if !compared {
        effects.restore(&names).await;
    } else if effects.restore_changed(&names).await.is_empty() {
        // (Those with the user's data keep it; the rest runs on them.)
        return None;
    }
    let note = prompts::not_retyped(&names);
    let code = std::iter::once(code)
        .chain(turn[first + 1..].iter().map(|e| e.code.clone()))
        .collect::<Vec<_>>()
        .join("\n\n");
    Some(Precheck::OnUsersData { note, code })
}

/// Queues `code` to run next, as an answer the kernel wrote (`note` says
/// why), and tells the user.
fn run_again<E: Effects>(state: &mut AgentState, effects: &mut E, note: String, code: String) {
    effects.emit(AgentEvent::Status(note.clone()));
    state.record_answer(format!("{note}\n\n```python\n{code}\n```"));
    state.pending = vec![CodeBlock { code }];
    state.blocks_shown = 0;
}

/// The numbers the turn's blocks typed into printed text: lines that print
/// as fixed text a number nothing they computed holds (a guess of the
/// result written into a sentence before any output existed), one number a
/// line, in order. The review judges the blocks without those lines, told
/// of them and of these numbers (`state.left_out`), not of what else they
/// said, which it would repeat: sent back instead, a small model keeps the
/// sentence and its guessed claims (an `f` before it, or the computed number
/// put in with "the highest of all columns" left beside it), which the
/// review then passes. None when there are none, or when a block is nothing
/// but such lines (the check sends it back: nothing was computed).
fn typed_in_numbers(state: &AgentState) -> Option<Vec<String>> {
    let mut numbers = Vec::new();
    for execution in this_turns_executions(state) {
        if let Some(without) = claims::without_typed_in(&execution.code, &execution.output) {
            if without.code.trim().is_empty() {
                return None;
            }
            numbers.extend(without.typed_in);
        }
    }
    (!numbers.is_empty()).then_some(numbers)
}

/// The code the last turn ran, for the review.
fn this_turns_executions(state: &AgentState) -> &[Execution] {
    let start = state.executions.len() - state.last_turn_blocks.min(state.executions.len());
    &state.executions[start..]
}

#[cfg(test)]
mod tests;
