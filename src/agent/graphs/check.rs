//! The check a run passes before any graph may call it done: the values
//! the request names are described as they are now; where the request
//! writes out the result it expects for the data the code read, each value
//! is compared with it by code (`mahtab/agent/shown_result.py`): another
//! value is not done, and every value matching is done without a review;
//! where it writes the result out for an example of other data, the run's
//! code is tried on that example (`request_example.py`), with the same
//! consequences. Otherwise the form each value must have (one value, several, a
//! table) is asked of the model before it sees them and compared by code
//! ([`crate::agent::parse::form`]), then a review judges the request beside
//! the code that ran, its output and those values, and how many other
//! solutions of the request computed the same when others were tried
//! (`Work::agreed`: told to the review, never standing in for it). What the check looked at is kept
//! (`AgentState::checked`) for the summary line, so the user sees why the
//! agent believes it. Where the provider gives its tokens' likeliest
//! choices, a "done" is weighed by how likely the judge held it, asked for
//! the verdict alone (`Verdict::confidence`); one it was unsure of ends the
//! run unconfirmed, not done. A "done" it is sure of is compared with
//! solutions of the request written independently
//! ([`super::cross_check`]), which can leave it unconfirmed too.

use super::cross_check::cross_check;
use super::steps::NodeSettings;
use crate::agent::llm::AnswerSchema;
use crate::agent::parse::change_line::{self, Change, ChangeLine};
use crate::agent::parse::{bindings, claims, comments, form, keys, pitfalls, reads};
use crate::agent::parse::{checks, verdict::parse_verdict};
use crate::agent::run::{
    AgentError, AgentState, AsWritten, CrossCheck, Effects, Execution, Expected, FormDispute,
    KeyInformation, Verdict, WrittenResult,
};
use crate::agent::{prompts, schemas};

/// How agent code's output tells of a figure it showed (`mahtab/agent/execution.py`).
const FIGURE_LINE: &str = "[displayed: figure: ";

/// How many of the values a request names have their form checked.
const FORM_CHECKS: usize = 3;

/// What the check is asked to look at besides the request.
pub struct Work<'a> {
    /// Where the code under review starts in `state.executions`.
    pub since: usize,
    /// Whether the last block failed (never done; the review says whether
    /// another attempt can fix it).
    pub failed: bool,
    /// The run's own closing answer, when it gave one (the planner's),
    /// shown to the review only when the request names no value.
    pub answer: Option<&'a str>,
    /// How many of the solutions written independently for the work's
    /// request computed the values it did, of how many computed any
    /// ([`crate::agent::run::Agreement`]), when others were tried.
    pub agreed: Option<(usize, usize)>,
    /// How many times this run's work was looked at before and sent back:
    /// a "done" after several needs surer odds ([`Verdict::needed_after`]).
    pub sent_back: u32,
}

/// The verdict on the work since `work.since`: complete only when every
/// value the request names is the result it writes out for this data, or
/// the form check and then the review pass. On
/// "complete", `state.checked` says what was looked at.
pub async fn check<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: &NodeSettings,
    work: Work<'_>,
) -> Result<Verdict, AgentError> {
    state.missed_written_result = false;
    // The values the request names, as they are now: what "done" must be
    // checked against (a named variable existing is not it).
    let targets = checks::targets(&state.request);
    let names = targets.names;
    let values = if work.failed || names.is_empty() {
        Vec::new()
    } else {
        effects.describe(&state.request, &names).await
    };
    let since = work.since.min(state.executions.len());
    // The work as it is checked: without the lines a graph left out as
    // typed in (`state.left_out`), which the review is told of (a copy
    // only then).
    let stripped = (!state.left_out.is_empty()).then(|| without_typed_in(&state.executions, since));
    let executions = stripped.as_deref().unwrap_or(&state.executions);
    if let Some(verdict) = uncomputed(&executions[since..]) {
        return Ok(verdict);
    }
    // The result the request writes out for this very data, compared by
    // code: it needs none of the knowledge a small judge lacks (nor the
    // form asked of the model, which a value that is that result has).
    let confirmed = if values.is_empty() {
        Vec::new()
    } else {
        match as_written(state, effects, &names).await {
            Ok(confirmed) => confirmed,
            Err(verdict) => {
                state.missed_written_result = true;
                return Ok(verdict);
            }
        }
    };
    // Every value the request names is the result it writes out for this
    // data, and it names no file to write: done, with nothing left for a
    // judge to weigh.
    if !confirmed.is_empty()
        && targets.files.is_empty()
        && names
            .iter()
            .all(|name| confirmed.iter().any(|c| &c.name == name))
    {
        state.checked = checked_lines(&confirmed, &state.executions[since..], &values);
        return Ok(Verdict::done_by_code(prompts::all_as_written(&confirmed)));
    }
    let mut kept = Vec::new();
    if let Some(why) = contradicted_form(state, effects, settings, &values, &mut kept).await? {
        return Ok(Verdict::not_done(why.reasoning, why.next_action));
    }
    // Other solutions agreeing is told to the review, never stands in for
    // it: measured, a small model's samples agree on the same wrong value
    // as often as on a right one.
    let user_names = checks::summary_names(state.namespace_at_start.as_deref().unwrap_or(""));
    // The judge reads the code without its comments: a small model's
    // comments restate the request ("# Pearson's skewness" above `.skew()`),
    // and a small judge takes them for what the code does.
    let executions = stripped.as_deref().unwrap_or(&state.executions);
    let reviewed: Vec<Execution> = with_what_it_builds_on(executions, since, &user_names)
        .into_iter()
        .map(|execution| Execution {
            code: comments::without_comments(&execution.code),
            ..execution.clone()
        })
        .collect();
    let reviewed: Vec<&Execution> = reviewed.iter().collect();
    let mut review = prompts::review_request(&state.request, &reviewed);
    // The closing answer is what is judged only where the request names no
    // value: beside the values, it is the model's claim about them, and a
    // small judge passes wrong values a confident answer vouches for.
    if let Some(answer) = work
        .answer
        .filter(|a| !a.trim().is_empty() && values.is_empty())
    {
        review.push_str(&prompts::answer_to_check(answer));
    }
    review.push_str(&prompts::values_to_check(&values));
    // A request that names no value ("add a column to sales") is judged on
    // the user's variables the code changed, as they are now: a change
    // line alone ("4x3 -> 4x4") shows no values, and the review sends right
    // work back to have them printed.
    if values.is_empty() && !work.failed {
        let mut changed = checks::changed_user_values(&reviewed, &user_names);
        changed.truncate(CHANGED_SHOWN);
        if !changed.is_empty() {
            let described = effects.describe(&state.request, &changed).await;
            review.push_str(&prompts::changed_values_to_check(&described));
        }
    }
    review.push_str(&prompts::left_out_as_typed_in(&state.left_out));
    for dispute in &kept {
        review.push_str(&prompts::kept_against_form_check(dispute));
    }
    if let Some((agree, of)) = work.agreed {
        review.push_str(&prompts::agreement_to_check(agree, of));
    }
    let system = prompts::reflect();
    let answer = settings
        .judge_alone(
            state,
            effects,
            system.clone(),
            review.clone(),
            schemas::verdict(),
        )
        .await?;
    let mut verdict = parse_verdict(&answer.text);
    verdict.is_complete &= !work.failed;
    if verdict.is_complete {
        // Weighed where the provider says how likely each token was: a
        // small model's review passes wrong work with a confident sentence,
        // but the verdict asked for alone is less sure of it.
        verdict.confidence = settings
            .likelihood_done(state, effects, system, review)
            .await?;
        verdict.needed = Some(Verdict::needed_after(work.sent_back));
        state.checked = checked_lines(&confirmed, &state.executions[since..], &values);
        if let Some((agree, of)) = work.agreed {
            state.checked.push(same_in(agree, of));
        }
        // A "done" the judge is sure of is compared with solutions written
        // independently: the review passes a plausible wrong value as
        // readily as a right one.
        if !verdict.unconfirmed() {
            verdict.cross_check = cross_check(state, effects, settings, &names).await?;
            if let Some(CrossCheck::Agreed { agree, of }) = verdict.cross_check {
                state.checked.push(same_in(agree, of));
            }
        }
    }
    Ok(verdict)
}

/// "Cannot be done" of work where nothing `failed` (a small model reads a
/// warning or its own doubt so) gets one more try before it is believed,
/// once a run: for the graphs that stop on it (the planner never does, and
/// leaves the one doubt to the triage that may have handed it the task; a
/// default graph the triage handed work may spend it, and then the triage's
/// review is believed at once).
pub fn doubt_cannot_fix(state: &mut AgentState, verdict: &mut Verdict, failed: bool) {
    if verdict.cannot_fix && !failed && !state.doubted_cannot_fix {
        state.doubted_cannot_fix = true;
        verdict.cannot_fix = false;
    }
}

/// The names whose value is the result the request writes out for the data
/// the run's code read (or, tried on the request's example, for that), or
/// "not done" for the first that is another.
async fn as_written<E: Effects>(
    state: &AgentState,
    effects: &mut E,
    names: &[String],
) -> Result<Vec<AsWritten>, Verdict> {
    // (What failed would fail again tried on an example.)
    let codes = state.codes_that_ran();
    let mut confirmed = Vec::new();
    for result in effects.written_results(&state.request, names, &codes).await {
        match result {
            WrittenResult::Matches(found) => confirmed.push(found),
            WrittenResult::Differs(difference) => {
                let (reasoning, next_action) = prompts::not_as_written(&difference);
                return Err(Verdict::not_done(reasoning, next_action));
            }
        }
    }
    Ok(confirmed)
}

/// `executions` with the blocks from `since` on without their lines that
/// print as fixed text a number nothing computed holds.
fn without_typed_in(executions: &[Execution], since: usize) -> Vec<Execution> {
    let mut executions = executions.to_vec();
    for execution in &mut executions[since..] {
        if let Some(without) = claims::without_typed_in(&execution.code, &execution.output) {
            execution.code = without.code;
            execution.output = without.output;
        }
    }
    executions
}

/// How many blocks from before the work under review it is shown with at
/// most.
const EARLIER_BLOCKS: usize = 3;

/// The blocks since `since`, after the earlier blocks they build on: those
/// that ran and made a name (not one of `user_names`, the user's when the
/// run began) that a later one reads before binding it. A turn
/// that mends one line of the turn before (`revenue = revenue.sum()`,
/// a sentence printed again from the values the turn before computed) is
/// judged with the code that made what it reads, not as if it were the
/// whole answer; a turn that writes its code again in full reads nothing
/// of the turns before. (A user's variable an earlier block rebound may
/// have been put back since, so that block says nothing of it now.)
fn with_what_it_builds_on<'a>(
    executions: &'a [Execution],
    since: usize,
    user_names: &[String],
) -> Vec<&'a Execution> {
    let since = since.min(executions.len());
    let mut reviewed: Vec<&Execution> = executions[since..].iter().collect();
    let mut earlier_shown = 0;
    for earlier in executions[..since].iter().rev() {
        if earlier_shown == EARLIER_BLOCKS {
            break;
        }
        let mut made = earlier
            .changes
            .iter()
            .filter_map(|change| change.split_once(": ").map(|(name, _)| name))
            .filter(|name| !user_names.iter().any(|user| user == name));
        let read_later = !earlier.failed
            && made.any(|name| {
                reviewed
                    .iter()
                    .any(|later| reads::reads_before_binding(&later.code, name))
            });
        if read_later {
            reviewed.insert(0, earlier);
            earlier_shown += 1;
        }
    }
    reviewed
}

/// How many changed variables of the user's a review is shown.
const CHANGED_SHOWN: usize = 2;

/// Not done when the code made a table or array whose every value is
/// missing, counted a boolean mask with `len()`, or printed, as fixed text,
/// a number nothing it computed holds: a placeholder, a count of every row
/// or a guess of the result, which a review reading them beside the
/// request has passed.
fn uncomputed(executions: &[Execution]) -> Option<Verdict> {
    if let Some(name) = checks::hollow_values(executions).first() {
        let hollow =
            format!("every value in `{name}` is missing (None or NaN): it holds no result");
        // Told only that, a small model sends the same selection again.
        if let Some(empty) = checks::empty_selection(executions) {
            let (table, line) = (empty.table, empty.line);
            let values = match empty.column {
                Some(column) => format!("print({column}.unique())"),
                None => "print the values it compares against".to_owned(),
            };
            return Some(Verdict::not_done(
                format!("{hollow}; `{table}` has no rows: `{line}` matched nothing"),
                format!(
                    "{values} to see what is there, and select with values that are; if no \
                     rows is the right answer, say so"
                ),
            ));
        }
        return Some(Verdict::not_done(
            hollow,
            format!(
                "compute real values for `{name}`; a placeholder such as None returned where \
                 something failed is not a result"
            ),
        ));
    }
    if let Some(counted) = pitfalls::length_of_a_mask(executions) {
        let mask = &counted.mask;
        return Some(Verdict::not_done(
            format!(
                "len({mask}) counts every one of the {} values of the boolean mask {mask}, \
                 True or False",
                counted.rows
            ),
            format!("count the True values with {mask}.sum()"),
        ));
    }
    let number = executions
        .iter()
        .find_map(|e| claims::uncomputed_number(&e.code, &e.output))?;
    Some(Verdict::not_done(
        format!("the code printed {number} as fixed text, and nothing it computed is {number}"),
        "print the values the code computes (an f-string such as f\"... {value} ...\"), \
         not numbers written into the text",
    ))
}

/// The summary's line for how many solutions agreed.
fn same_in(agree: usize, of: usize) -> String {
    format!("the same in {agree} of {of} solutions written independently")
}

/// Why a value the request names plainly has another form than the request
/// asks for (several values where one was asked for, one where several
/// were, another shape than it writes out), if one does. The form is asked
/// of the model once a run, before it sees the value, and compared by code,
/// so a review that would talk itself into "done" never sees it. A value
/// the next turn left as it was when the check sent it back is the model's
/// answer against the check's: it goes to the review, told of both
/// (`kept`), since either may be the one that is wrong.
async fn contradicted_form<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: &NodeSettings,
    values: &[KeyInformation],
    kept: &mut Vec<FormDispute>,
) -> Result<Option<form::Contradiction>, AgentError> {
    for (name, description) in values.iter().take(FORM_CHECKS) {
        let insisted = state
            .form_disputes
            .iter()
            .find(|d| &d.name == name && &d.value == description);
        if let Some(dispute) = insisted {
            kept.push(dispute.clone());
            continue;
        }
        let expected = expected_form(state, effects, settings, name).await?;
        let why = match form::contradiction(name, &expected, description) {
            Some(why) => Some(why),
            None => missing_keys(state, effects, settings, name, description).await?,
        };
        if let Some(why) = why {
            state.form_disputes.push(FormDispute {
                name: name.clone(),
                value: description.clone(),
                reasoning: why.reasoning.clone(),
            });
            return Ok(Some(why));
        }
    }
    Ok(None)
}

/// What `name` must be for the request: as the request states it, or as
/// the model says, asked once a run.
async fn expected_form<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: &NodeSettings,
    name: &str,
) -> Result<Expected, AgentError> {
    if let Some((_, known)) = state.expected_forms.iter().find(|(n, _)| n == name) {
        return Ok(known.clone());
    }
    // Said in so many words ("a dict named `answers`"): nothing to ask.
    let expected = match form::stated_form(&state.request, name) {
        Some(stated) => Expected {
            form: Some(stated),
            shape: None,
        },
        None => {
            let answer = ask_about(
                state,
                effects,
                settings,
                name,
                prompts::EXPECTED_FORM,
                schemas::expected_form(),
            )
            .await?;
            form::expected(&answer, &state.request)
        }
    };
    state
        .expected_forms
        .push((name.to_owned(), expected.clone()));
    Ok(expected)
}

/// The model's answer to `system`'s question about the variable `name`
/// of the request, asked alone, with `schema`.
async fn ask_about<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: &NodeSettings,
    name: &str,
    system: &str,
    schema: AnswerSchema,
) -> Result<String, AgentError> {
    let question = prompts::named_value_question(&state.request, name);
    let answer = settings
        .question_alone(state, effects, system.to_owned(), question, schema)
        .await?;
    Ok(answer.text)
}

/// Why the dict `name` (described by `description`) holds none of the keys
/// the request writes out for it, if it does. The keys are asked of the
/// model once a run, only for a dict and only where the request writes out
/// something that may be a key, and kept only where it writes them as keys.
async fn missing_keys<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: &NodeSettings,
    name: &str,
    description: &str,
) -> Result<Option<form::Contradiction>, AgentError> {
    if !keys::is_dict(description) || !keys::any_written(&state.request, name) {
        return Ok(None);
    }
    let known = state.expected_keys.iter().find(|(n, _)| n == name);
    let expected = match known {
        Some((_, known)) => known.clone(),
        None => {
            let answer = ask_about(
                state,
                effects,
                settings,
                name,
                prompts::DICT_KEYS,
                schemas::dict_keys(),
            )
            .await?;
            let expected = keys::written(&answer, &state.request, name);
            state
                .expected_keys
                .push((name.to_owned(), expected.clone()));
            expected
        }
    };
    Ok(keys::contradiction(name, &expected, description))
}

/// What the summary line says was checked: the values compared with the
/// result the request writes out first (the line shows its start), then
/// the rest.
fn checked_lines(
    confirmed: &[AsWritten],
    executions: &[Execution],
    values: &[KeyInformation],
) -> Vec<String> {
    let mut lines: Vec<String> = confirmed.iter().map(prompts::as_written).collect();
    lines.extend(checked(executions, values));
    lines
}

/// What a review that said "done" looked at, a line each: the values the
/// request names (`revenue: float: 30.5`), else the values the code made or
/// changed (not a loop's variable, a module, a function or a class), else
/// the figures it showed, else that it looked at the output only.
fn checked(executions: &[Execution], values: &[KeyInformation]) -> Vec<String> {
    let first_line = |text: &str| text.lines().next().unwrap_or_default().to_owned();
    if !values.is_empty() {
        return values.iter().map(|(_, about)| first_line(about)).collect();
    }
    let scaffolding: Vec<String> = executions
        .iter()
        .flat_map(|e| bindings::scaffolding_names(&e.code))
        .collect();
    let mut changed: Vec<String> = executions
        .iter()
        .flat_map(|e| e.changes.iter())
        .filter(|line| holds_a_result(line, &scaffolding))
        .map(|line| first_line(line))
        .collect();
    // What the code made comes first: the result is more often a new name
    // than an input it rebound along the way.
    changed.sort_by_key(|line| change_line::read(line).map(|l| l.change) != Some(Change::New));
    if !changed.is_empty() {
        return changed;
    }
    // A figure is named by what the review read of it (its description,
    // from the code's output), else counted.
    let described: Vec<String> = executions
        .iter()
        .flat_map(|e| e.output.lines())
        .filter_map(|line| line.strip_prefix(FIGURE_LINE))
        .map(|about| about.trim_end_matches(']').to_owned())
        .collect();
    if !described.is_empty() {
        return described;
    }
    let figures: usize = executions.iter().map(|e| e.rich_outputs).sum();
    if figures > 0 {
        return vec![format!("{figures} figure(s) or table(s) shown")];
    }
    vec!["the printed output".to_owned()]
}

/// Whether a line of what a block changed (`name: description (new)`)
/// names a value that may be a result: not a deletion, a loop's or a
/// `with`'s variable (`scaffolding`), an imported module, a function or a
/// class.
fn holds_a_result(change: &str, scaffolding: &[String]) -> bool {
    let Some(ChangeLine {
        name,
        description: about,
        change: Change::New | Change::Rebound | Change::InPlace,
    }) = change_line::read(change)
    else {
        return false;
    };
    let tool = about.starts_with("module ") || about == "function" || about == "class";
    !tool && !scaffolding.iter().any(|s| s == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran(output: &str, changes: &[&str], rich_outputs: usize) -> Execution {
        Execution {
            code: "plot()".into(),
            output: output.into(),
            shown: None,
            failed: false,
            finished: true,
            changes: changes.iter().map(|c| (*c).to_owned()).collect(),
            rich_outputs,
            images: Vec::new(),
        }
    }

    #[test]
    fn a_turn_that_mends_a_line_is_reviewed_with_the_code_that_made_what_it_reads() {
        let block = |code: &str, failed: bool, changes: &[&str]| Execution {
            code: code.into(),
            failed,
            ..ran("", changes, 0)
        };
        let executions = [
            block("unrelated = 1", false, &["unrelated: int = 1 (new)"]),
            block(
                "revenue = sales['price'] * sales['qty']",
                false,
                &["revenue: Series shape (4,) (new)"],
            ),
            block("revenue = revenue.sum(", true, &[]),
            block(
                "revenue = revenue.sum()",
                false,
                &["revenue: float64 = 44.2 (changed)"],
            ),
        ];
        let codes = |reviewed: Vec<&Execution>| -> Vec<String> {
            reviewed.iter().map(|e| e.code.clone()).collect()
        };
        assert_eq!(
            codes(with_what_it_builds_on(&executions, 3, &[])),
            [
                "revenue = sales['price'] * sales['qty']",
                "revenue = revenue.sum()"
            ]
        );
        // Code written again in full reads nothing of the turns before.
        let again = [
            executions[1].clone(),
            block(
                "revenue = (sales['price'] * sales['qty']).sum()",
                false,
                &["revenue: float64 = 44.2 (changed)"],
            ),
        ];
        assert_eq!(codes(with_what_it_builds_on(&again, 1, &[])).len(), 1);
        assert_eq!(codes(with_what_it_builds_on(&executions, 0, &[])).len(), 4);
        // A variable the user had is the user's, whatever a block before
        // did to it (a rebinding may have been put back since).
        let users = ["revenue".to_owned()];
        assert_eq!(
            codes(with_what_it_builds_on(&executions, 3, &users)).len(),
            1
        );
    }

    #[test]
    fn a_missing_result_of_a_selection_that_matched_nothing_says_so() {
        // The change lines of a recorded development run: a category the
        // data does not hold, so quartiles of no rows.
        let lines = [
            "Q1: float64 shape () dtype float64 = np.float64(nan), every value missing (new)",
            "assault_df: DataFrame 0x8, columns Date, Offense, Age, Category (new)",
            "df: DataFrame 8638x8, columns Date, Offense, Age, Category (new)",
        ];
        let selected = Execution {
            code: "assault_df = df[df['Category'] == 'Assault']\n\
                   Q1 = assault_df['Age'].quantile(0.25)"
                .into(),
            ..ran("", &lines, 0)
        };
        let verdict = uncomputed(&[selected]).unwrap();
        assert!(!verdict.is_complete);
        assert!(
            verdict.reasoning.contains(
                "`assault_df` has no rows: `assault_df = df[df['Category'] == 'Assault']` matched \
                 nothing"
            ),
            "{}",
            verdict.reasoning
        );
        assert!(
            verdict.next_action.contains(".unique()"),
            "{}",
            verdict.next_action
        );
        // With rows everywhere, the placeholder is what is said.
        let verdict = uncomputed(&[ran("", &[lines[0], lines[2]], 0)]).unwrap();
        assert!(
            !verdict.reasoning.contains("no rows"),
            "{}",
            verdict.reasoning
        );
        assert!(verdict.next_action.contains("placeholder"));
    }

    #[test]
    fn what_was_checked_names_values_then_changes_then_figures_then_output() {
        let values = vec![("total".to_owned(), "total: int: 6\n6".to_owned())];
        let figure = "[displayed: figure: figure 640x480 px, 1 axes; axes 1: title 'Sales']\n";
        let executions = [ran(figure, &["s: Series (new)"], 1)];
        assert_eq!(checked(&executions, &values), ["total: int: 6"]);
        assert_eq!(checked(&executions, &[]), ["s: Series (new)"]);
        assert_eq!(
            checked(&[ran(figure, &[], 1)], &[]),
            ["figure 640x480 px, 1 axes; axes 1: title 'Sales'"]
        );
        assert_eq!(
            checked(&[ran("[displayed: <table>]\n", &[], 1)], &[]),
            ["1 figure(s) or table(s) shown"]
        );
        assert_eq!(checked(&[ran("6\n", &[], 0)], &[]), ["the printed output"]);
    }

    #[test]
    fn what_the_code_changed_counts_its_results_not_its_loop_variables_or_tools() {
        let mut block = ran(
            "",
            &[
                "pd: module pandas (new)",
                "helper: function (new)",
                "totals: dict, 2 items (new)",
                "col: str = 'qty' (new)",
                "old (deleted)",
            ],
            0,
        );
        block.code = "import pandas as pd\ndef helper(x):\n    return x\ntotals = {}\n\
                      for col in ['price', 'qty']:\n    totals[col] = helper(col)\n"
            .into();
        assert_eq!(
            checked(std::slice::from_ref(&block), &[]),
            ["totals: dict, 2 items (new)"]
        );
        let mut inputs_first = block.clone();
        inputs_first.changes = vec![
            "bins: list len 5 = [1, 10, 25, 50, 100] (changed)".into(),
            "result: DataFrame 2x1, columns 1 (new)".into(),
        ];
        assert_eq!(
            checked(&[inputs_first], &[]),
            [
                "result: DataFrame 2x1, columns 1 (new)",
                "bins: list len 5 = [1, 10, 25, 50, 100] (changed)"
            ]
        );
        block.changes = vec!["col: str = 'qty' (new)".into()];
        assert_eq!(checked(&[block], &[]), ["the printed output"]);
    }
}
