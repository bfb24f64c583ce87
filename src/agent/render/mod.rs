//! How a run looks in the cell: the content of its `stream` messages and of
//! its `display_data` panels. Every panel has `text/plain` (all a console
//! shows) and `text/markdown` (what Lab and VS Code render), and says in its
//! metadata (`mahtab.kind`) what it is.

pub mod live;
#[cfg(test)]
mod snapshot_tests;
pub mod stream;
pub mod writing;

use std::time::Duration;

use serde_json::{Value, json};

use crate::agent::graph::RunEnd;
use crate::agent::llm::Usage;
use crate::agent::parse::prose::review_words;
use crate::agent::ports::Ports;
use crate::agent::run::{
    Activity, AgentEvent, AgentState, Confidence, CrossCheck, Execution, Outcome, Plan, RunChanges,
    Verdict,
};

pub use crate::agent::shown::{Display, Placement, Shown};

/// Publishes `shown` on IOPub through the kernel's ports.
pub fn publish<P: Ports>(ports: &P, shown: Shown) {
    ports.publish(shown);
}

/// Text in the cell's stdout.
pub fn stream(text: &str) -> Shown {
    Shown::Stream(text.to_owned())
}

/// A panel: plain text for consoles, Markdown for notebooks.
pub fn panel(plain: String, markdown: String, metadata: Value) -> Shown {
    Shown::display(Placement::New, plain, Some(markdown), metadata, None)
}

/// Where a panel updated in place goes: the first time a new panel under a
/// fresh display id (`mahtab-{kind}-…`), kept in `display_id`; then in
/// place of it.
pub fn in_place(display_id: &mut Option<String>, kind: &str) -> (Placement, String) {
    match display_id {
        Some(id) => (Placement::InPlace, id.clone()),
        None => {
            let id = format!("mahtab-{kind}-{}", uuid::Uuid::new_v4().simple());
            *display_id = Some(id.clone());
            (Placement::New, id)
        }
    }
}

/// The run's status line: `text` under the display id `id`, as a new
/// panel or in place of the last.
pub fn status(text: &str, id: &str, placement: Placement) -> Shown {
    let plain = if text.is_empty() {
        String::new()
    } else {
        format!("⋯ {text}")
    };
    Shown::display(
        placement,
        plain,
        None,
        json!({ "kind": "status" }),
        Some(id),
    )
}

/// What the status line says while a node does `activity` (`failed`: what
/// the last agent code raised).
pub fn status_text(activity: Activity, failed: Option<&str>) -> String {
    match (activity, failed) {
        (Activity::Answering | Activity::WritingCode, Some(error)) => {
            format!("retrying after {error}")
        }
        (Activity::Answering, None) => "answering".to_owned(),
        (Activity::WritingCode, None) => "writing code".to_owned(),
        (Activity::PlanningTheNextStep, Some(error)) => {
            format!("planning the next step after {error}")
        }
        (Activity::PlanningTheNextStep, None) => "planning the next step".to_owned(),
        (Activity::TryingOtherSolutions, _) => "trying other solutions".to_owned(),
        (Activity::RunningCode, _) => "running code".to_owned(),
        (Activity::Reviewing, _) => "reviewing".to_owned(),
        (Activity::Planning, _) => "planning".to_owned(),
        (Activity::Evaluating, _) => "evaluating the results".to_owned(),
        (Activity::WritingTheAnswer, _) => "writing the answer".to_owned(),
        (Activity::DescribingTheVariables, _) => "describing the variables".to_owned(),
        (Activity::Repairing, _) => "repairing".to_owned(),
    }
}

/// What an event of a run looks like, if anything.
pub fn event(event: &AgentEvent) -> Shown {
    match event {
        AgentEvent::Code { turn, block, code } => panel(
            format!("[code, turn {turn}]\n{code}"),
            format!("**code** · turn {turn}\n\n{}", fenced(code, "python")),
            json!({ "kind": "code", "turn": turn, "block": block }),
        ),
        AgentEvent::Executed {
            turn,
            block,
            execution,
        } => {
            let title = if execution.failed { "error" } else { "output" };
            let output = match execution.panel_text().trim_end() {
                "" => "(no output)".to_owned(),
                text => text.to_owned(),
            };
            panel(
                format!("[{title}]\n{output}"),
                format!("**{title}**\n\n{}", fenced(&output, "")),
                json!({ "kind": title, "turn": turn, "block": block }),
            )
        }
        AgentEvent::Verdict(verdict) if verdict.unconfirmed() => stream(&format!(
            "? {} (not confirmed: {})\n",
            match review_words(&verdict.reasoning) {
                words if words.is_empty() => "done".to_owned(),
                words => words,
            },
            why_unconfirmed(verdict)
        )),
        AgentEvent::Verdict(verdict) if verdict.is_complete => {
            let words = review_words(&verdict.reasoning);
            stream(&format!(
                "✓ {}\n",
                if words.is_empty() { "done" } else { &words }
            ))
        }
        AgentEvent::Verdict(verdict) if verdict.cannot_fix => stream(&format!(
            "✗ this cannot be done here: {}\n",
            review_words(&verdict.reasoning)
        )),
        AgentEvent::Verdict(verdict) => {
            let why = match review_words(&verdict.reasoning) {
                words if words.is_empty() => String::new(),
                words => format!(": {words}"),
            };
            let next = match review_words(&verdict.next_action) {
                words if words.is_empty() => String::new(),
                next => format!(" Next: {next}"),
            };
            stream(&format!("↻ not done yet{why}{next}\n"))
        }
        AgentEvent::Plan(plan) => stream(&format!("plan: {}\n", plan_line(plan))),
        AgentEvent::GaveUp { failed } => {
            let (plain, markdown) = failed_attempts(failed);
            panel(plain, markdown, json!({ "kind": "gave_up" }))
        }
        AgentEvent::Status(line) => stream(&format!("{line}\n")),
        AgentEvent::Answer(text) => stream(&format!("{}\n", text.trim_end())),
        AgentEvent::Informed(found) => {
            let names: Vec<_> = found.iter().map(|(name, _)| name.as_str()).collect();
            let text = match found.len() {
                0 => "(no variable of the request's was found)".to_owned(),
                _ => found
                    .iter()
                    .map(|(_, text)| text.trim_end())
                    .collect::<Vec<_>>()
                    .join("\n\n"),
            };
            let listed = names.join(", ");
            panel(
                format!("[key information] {listed}\n{text}"),
                format!("**key information** · {listed}\n\n{}", fenced(&text, "")),
                json!({ "kind": "key_information", "names": names }),
            )
        }
    }
}

fn plan_line(plan: &Plan) -> String {
    let steps = match (
        plan.needs_code,
        plan.needs_evaluation,
        plan.needs_explanation,
    ) {
        (false, _, _) => "answer without code",
        (true, false, false) => "run code",
        (true, false, true) => "run code, then explain",
        (true, true, _) => "run code, evaluate the results, then explain",
    };
    match plan.reasoning.trim() {
        "" => steps.to_owned(),
        reasoning => format!("{steps} ({reasoning})"),
    }
}

/// How much of what a review checked the summary line shows.
const CHECKED_SHOWN: usize = 160;

/// How sure the review was of a "done" it passed, said after "the review".
/// Why a "done" the review gave is not confirmed: the judge was unsure, or
/// solutions written independently computed other values.
fn why_unconfirmed(verdict: &Verdict) -> String {
    match verdict.cross_check {
        Some(CrossCheck::Differed { of }) if !verdict.judge_unsure() => {
            let others = of.saturating_sub(1);
            let solutions = if others == 1 { "solution" } else { "solutions" };
            format!("{others} other {solutions} written independently computed other values")
        }
        _ => format!("the review {}", how_sure(verdict.confidence)),
    }
}

fn how_sure(confidence: Option<Confidence>) -> String {
    match confidence {
        Some(Confidence::Percent(percent)) => format!("was {percent}% sure"),
        _ => "gave odds that could not be read".to_owned(),
    }
}

/// The line that ends a run: how it ended (and for an answer, what was
/// checked before calling it done), the model, turns, tokens, cost and time.
pub fn summary(
    provider: &str,
    model: &str,
    state: &AgentState,
    end: RunEnd,
    elapsed: Duration,
    session: Option<&Usage>,
) -> Shown {
    let mut line = format!(
        "{} · {provider} {model} · {} turn{} · {}{:.1} s",
        ending(state, end),
        state.turn,
        if state.turn == 1 { "" } else { "s" },
        usage_text(&state.usage),
        elapsed.as_secs_f64(),
    );
    if let Some(session) = session {
        let total = usage_text(session);
        line.push_str(&format!(" · session: {}", total.trim_end_matches(" · ")));
    }
    panel(
        line.clone(),
        format!("*{line}*"),
        json!({ "kind": "summary" }),
    )
}

/// How a run ended, and for an answer what was checked before calling it
/// done (`done · checked: revenue: float: 44.2`) or that nothing was.
pub fn ending(state: &AgentState, end: RunEnd) -> String {
    let ending = match (state.outcome, end) {
        // "Done" only with what was checked to say so.
        (Some(Outcome::Complete), _) if state.checked.is_empty() => "answered",
        (Some(Outcome::Complete), _) => "done",
        (Some(Outcome::Unconfirmed), _) => "answered, not confirmed",
        (Some(Outcome::Answered), _) => "answered",
        (Some(Outcome::MaxTurns), _) => "stopped at the turn limit",
        (Some(Outcome::GaveUp), _) => "gave up: every attempt failed",
        (Some(Outcome::CannotBeDone), _) => "stopped: it cannot be done here",
        (Some(Outcome::Repeating), _) => "stopped: the same code kept giving the same result",
        (None, RunEnd::StepCap { .. }) => "stopped at the step limit",
        (None, RunEnd::Finished { .. }) => "finished",
    };
    // Why the run believes it is done, or that nothing was checked.
    let checked = match state.outcome {
        Some(Outcome::Complete) if !state.checked.is_empty() => {
            let all = state.checked.join("; ");
            let end = crate::text::floor_char_boundary(&all, CHECKED_SHOWN);
            let more = if end < all.len() { "…" } else { "" };
            format!(" · checked: {}{more}", &all[..end])
        }
        Some(Outcome::Unconfirmed) => match state.verdict.as_ref() {
            Some(verdict) if verdict.differed() && !verdict.judge_unsure() => {
                format!(" · the review passed it but {}", why_unconfirmed(verdict))
            }
            verdict => {
                let sure = verdict.and_then(|v| v.confidence);
                let needed = verdict.map_or(Verdict::CONFIRMED, Verdict::needed);
                let after = if needed > Verdict::CONFIRMED {
                    format!(
                        " once the work was sent back {} times",
                        Verdict::SENT_BACK_OFTEN
                    )
                } else {
                    String::new()
                };
                format!(
                    " · the review passed it but {} (confirmed from {needed}%{after})",
                    how_sure(sure),
                )
            }
        },
        Some(Outcome::Complete | Outcome::Answered) => " · not checked".to_owned(),
        _ => String::new(),
    };
    format!("{ending}{checked}")
}

/// The line that starts a replayed cell: what is replayed, from when, by
/// which model, and how to ask again.
pub fn replaying(blocks: usize, day: &str, model: &str) -> Shown {
    let line = format!(
        "replayed: {blocks} block{} from {day}, {model}; `%%ask --fresh` asks again",
        if blocks == 1 { "" } else { "s" },
    );
    panel(
        line.clone(),
        format!("*{line}*"),
        json!({ "kind": "replay" }),
    )
}

/// The line that ends a replayed cell: how the recorded run ended, with no
/// model call, and how long the replay took.
pub fn replayed(ending: &str, elapsed: Duration) -> Shown {
    let line = format!(
        "replayed · the recorded run: {ending} · no model call · {:.1} s",
        elapsed.as_secs_f64()
    );
    panel(
        line.clone(),
        format!("*{line}*"),
        json!({ "kind": "summary", "replayed": true }),
    )
}

/// Tokens and cost, as the summary says them (ends with " · ").
pub fn usage_text(usage: &Usage) -> String {
    let cost = usage
        .cost_usd
        .map(|c| format!(" · {}", dollars(c)))
        .unwrap_or_default();
    let cache = match (usage.cache_read_tokens, usage.cache_write_tokens) {
        (0, 0) => String::new(),
        (read, 0) => format!(" ({read} from cache)"),
        (0, written) => format!(" ({written} written to cache)"),
        (read, written) => format!(" ({read} from cache, {written} written to it)"),
    };
    format!(
        "{} in{cache} / {} out tokens{cost} · ",
        usage.input_tokens, usage.output_tokens
    )
}

/// A cost in dollars: four decimals, or two significant digits for less
/// than a hundredth of a cent (a small model's call).
fn dollars(cost: f64) -> String {
    if cost >= 0.0001 || cost <= 0.0 {
        format!("${cost:.4}")
    } else {
        let decimals = (-cost.log10()).ceil() as usize + 1;
        format!("${cost:.decimals$}")
    }
}

/// One node of a run, and how long it took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceStep {
    pub node: &'static str,
    pub took: Duration,
}

/// One model call of a run, for the trace: whether its text was shown (a
/// turn of the conversation) or hidden (a review, plan or classification),
/// what it was for (its answer schema's name, `code` for a shown turn,
/// `text` for other free text), how long its first text and the whole call
/// took, how much it wrote, and how much of its prompt the provider's cache
/// held (what tells whether the prompt's prefix stayed stable).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCall {
    pub shown: bool,
    pub purpose: &'static str,
    pub first_text: Option<Duration>,
    pub took: Duration,
    pub input_tokens: u64,
    pub cached_tokens: u64,
    pub output_tokens: u64,
    /// The answer's text when the length limit cut it off: kept because
    /// such an answer is the costliest call a run makes and leaves nothing
    /// to run, and how a stop for it should look is read from these.
    pub cut_off: Option<String>,
}

/// Each node visited, in order of first visit, with its visits and time.
fn per_node(steps: &[TraceStep]) -> Vec<(&'static str, usize, Duration)> {
    let mut nodes: Vec<(&'static str, usize, Duration)> = Vec::new();
    for step in steps {
        match nodes.iter_mut().find(|(node, _, _)| *node == step.node) {
            Some((_, visits, took)) => {
                *visits += 1;
                *took += step.took;
            }
            None => nodes.push((step.node, 1, step.took)),
        }
    }
    nodes
}

/// The run's trace (`--trace`): the path through the graph, then time per node.
pub fn trace(steps: &[TraceStep], state: &AgentState, elapsed: Duration) -> Shown {
    let head = format!(
        "{} turn{} · {}{:.1} s",
        state.turn,
        if state.turn == 1 { "" } else { "s" },
        usage_text(&state.usage),
        elapsed.as_secs_f64()
    );
    let path = steps.iter().map(|s| s.node).collect::<Vec<_>>().join(" → ");
    let mut plain = format!("[trace] {head}\n{path}");
    let mut markdown =
        format!("**trace** · {head}\n\n{path}\n\n| node | visits | time |\n|---|---|---|");
    for (node, visits, took) in per_node(steps) {
        let seconds = took.as_secs_f64();
        plain.push_str(&format!("\n  {node:<10} ×{visits}  {seconds:.2} s"));
        markdown.push_str(&format!("\n| {node} | {visits} | {seconds:.2} s |"));
    }
    panel(plain, markdown, json!({ "kind": "trace" }))
}

/// What the run did, as `ask()` returns it beside the answer: how it
/// ended, the plan (the analyst's), each block of code that ran, the output
/// of the last one that worked, how many figures and other rich outputs
/// were shown, the variables changed, and the attempts that failed.
pub fn result_json(state: &AgentState) -> Value {
    let worked: Vec<_> = state.executions.iter().filter(|e| !e.failed).collect();
    let output = worked.last().map(|e| {
        e.shown
            .as_deref()
            .unwrap_or(&e.output)
            .trim_end()
            .to_owned()
    });
    let mut changes: Vec<&str> = Vec::new();
    for line in state.executions.iter().flat_map(|e| e.changes.iter()) {
        if !changes.contains(&line.as_str()) {
            changes.push(line);
        }
    }
    json!({
        "outcome": state.outcome,
        "plan": state.plan,
        "code": state.executions.iter().map(|e| e.code.as_str()).collect::<Vec<_>>(),
        "output": output,
        "figures": state.executions.iter().map(|e| e.rich_outputs).sum::<usize>(),
        "changes": changes,
        "failed_attempts": state
            .executions
            .iter()
            .filter(|e| e.failed)
            .map(|e| json!({ "code": e.code, "error": e.output.trim_end() }))
            .collect::<Vec<_>>(),
    })
}

/// The trace as `ask()` returns it.
pub fn trace_json(
    steps: &[TraceStep],
    calls: &[ModelCall],
    state: &AgentState,
    elapsed: Duration,
) -> Value {
    json!({
        "first_text_seconds": calls
            .iter()
            .filter_map(|call| call.first_text.map(|first| first.as_secs_f64()))
            .collect::<Vec<_>>(),
        "calls": calls
            .iter()
            .map(|call| json!({
                "shown": call.shown,
                "purpose": call.purpose,
                "first_text_seconds": call.first_text.map(|first| first.as_secs_f64()),
                "seconds": call.took.as_secs_f64(),
                "input_tokens": call.input_tokens,
                "cached_tokens": call.cached_tokens,
                "output_tokens": call.output_tokens,
                "cut_off_text": call.cut_off,
            }))
            .collect::<Vec<_>>(),
        "steps": steps
            .iter()
            .map(|s| json!({ "node": s.node, "seconds": s.took.as_secs_f64() }))
            .collect::<Vec<_>>(),
        "turns": state.turn,
        // How sure the judge was of its last "done" (percent), where the
        // provider says: what the evaluation weighs claims by.
        "confidence": state.verdict.as_ref().and_then(|v| v.confidence?.percent()),
        // What solutions written independently said of it, where compared.
        "cross_check": state.verdict.as_ref().and_then(|v| v.cross_check),
        "input_tokens": state.usage.input_tokens,
        "output_tokens": state.usage.output_tokens,
        "seconds": elapsed.as_secs_f64(),
    })
}

/// A graph drawn as a Mermaid flowchart (`%ask_graph NAME`).
pub fn graph(name: &str, mermaid: &str) -> Shown {
    panel(
        format!("[graph {name}]\n{mermaid}"),
        format!("**graph** · {name}\n\n{}", fenced(mermaid, "mermaid")),
        json!({ "kind": "graph", "graph": name }),
    )
}

/// The graphs and what each is for (`%ask_graph`).
pub fn graph_list(graphs: &[(&str, &str)]) -> Shown {
    let mut text = String::from("graphs (%%ask --graph NAME; %ask_graph NAME draws one):\n");
    for (name, what) in graphs {
        text.push_str(&format!("  {name:<8} {what}\n"));
    }
    stream(&text)
}

/// The "changed" panel: the names the run added, changed and removed and
/// the files it wrote, and how to undo them; None when it changed nothing.
pub fn changes(changes: &RunChanges) -> Option<Shown> {
    let groups = [
        ("added", &changes.added),
        ("changed", &changes.changed),
        ("removed", &changes.removed),
        ("files", &changes.files),
    ];
    if groups.iter().all(|(_, lines)| lines.is_empty()) {
        return None;
    }
    let mut plain = String::from("[changed]");
    let mut markdown = String::from("**changed**");
    for (title, lines) in groups {
        for line in lines {
            plain.push_str(&format!("\n  {title:<8} {line}"));
            markdown.push_str(&format!("\n- {title}: `{}`", line.replace('`', "'")));
        }
    }
    let undo = if changes.not_restorable.is_empty() {
        "%ask_undo puts it back".to_owned()
    } else {
        format!(
            "%ask_undo puts it back, except {}",
            changes.not_restorable.join(", ")
        )
    };
    plain.push_str(&format!("\n  ({undo})"));
    markdown.push_str(&format!("\n\n*{undo}*"));
    Some(panel(plain, markdown, json!({ "kind": "changes" })))
}

/// How to set up a provider, when none is configured.
pub fn setup(how: &str) -> Shown {
    panel(how.to_owned(), fenced(how, ""), json!({ "kind": "setup" }))
}

/// The panel that lists every failed attempt: plain text and Markdown.
pub fn failed_attempts(failed: &[Execution]) -> (String, String) {
    let title = format!("gave up after {} failed attempts", failed.len());
    let mut plain = format!("[{title}]");
    let mut markdown = format!("**{title}**");
    for (number, attempt) in failed.iter().enumerate() {
        let number = number + 1;
        let error = attempt.output.trim_end();
        plain.push_str(&format!("\n--- attempt {number}\n"));
        markdown.push_str(&format!("\n\nattempt {number}\n\n"));
        if !attempt.code.is_empty() {
            plain.push_str(&format!("{}\n", attempt.code.trim_end()));
            markdown.push_str(&format!(
                "{}\n\n",
                fenced(attempt.code.trim_end(), "python")
            ));
        }
        plain.push_str(&format!("-> {error}"));
        markdown.push_str(&fenced(error, ""));
    }
    (plain, markdown)
}

/// `text` in a Markdown code fence longer than any backtick run inside it.
pub fn fenced(text: &str, language: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}{language}\n{text}\n{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::run::{Confidence, Verdict};

    #[test]
    fn costs_read_in_dollars_down_to_small_calls() {
        assert_eq!(dollars(0.0540), "$0.0540");
        assert_eq!(dollars(1.23456), "$1.2346");
        assert_eq!(dollars(0.0000117), "$0.000012");
        assert_eq!(dollars(0.0), "$0.0000");
    }

    fn plain(shown: &Shown) -> &str {
        shown.plain()
    }

    #[test]
    fn the_status_line_names_the_work_and_a_retry_its_cause() {
        assert_eq!(status_text(Activity::Answering, None), "answering");
        assert_eq!(
            status_text(Activity::WritingCode, Some("NameError")),
            "retrying after NameError"
        );
        assert_eq!(
            status_text(Activity::Reviewing, Some("KeyError")),
            "reviewing"
        );
        let line = status("running code", "id-1", Placement::InPlace);
        assert_eq!(line.msg_type(), "update_display_data");
        assert_eq!(line.content()["data"]["text/plain"], "⋯ running code");
        assert_eq!(line.content()["transient"]["display_id"], "id-1");
        assert_eq!(
            status("", "id-1", Placement::InPlace).content()["data"]["text/plain"],
            ""
        );
    }

    #[test]
    fn fences_are_longer_than_any_backticks_inside() {
        assert_eq!(fenced("x = 1", "python"), "```python\nx = 1\n```");
        assert_eq!(fenced("s = '```'", ""), "````\ns = '```'\n````");
    }

    #[test]
    fn code_and_output_panels_say_what_they_are() {
        let code = event(&AgentEvent::Code {
            turn: 2,
            block: 0,
            code: "print(1)".into(),
        });
        assert_eq!(code.msg_type(), "display_data");
        assert_eq!(plain(&code), "[code, turn 2]\nprint(1)");
        assert_eq!(code.content()["metadata"]["mahtab"]["kind"], "code");
        assert!(
            code.content()["data"]["text/markdown"]
                .as_str()
                .unwrap()
                .contains("```python\nprint(1)\n```")
        );
        let execution = Execution {
            code: "1/0".into(),
            output: "ZeroDivisionError".into(),
            shown: None,
            failed: true,
            finished: false,
            changes: Vec::new(),
            rich_outputs: 0,
            images: Vec::new(),
        };
        let error = event(&AgentEvent::Executed {
            turn: 1,
            block: 3,
            execution,
        });
        assert_eq!(plain(&error), "[error]\nZeroDivisionError");
        assert_eq!(error.content()["metadata"]["mahtab"]["block"], 3);
        let silent = Execution {
            code: "x = 1".into(),
            output: String::new(),
            shown: Some("  ".into()),
            failed: false,
            finished: false,
            changes: Vec::new(),
            rich_outputs: 0,
            images: Vec::new(),
        };
        let output = event(&AgentEvent::Executed {
            turn: 1,
            block: 0,
            execution: silent,
        });
        assert_eq!(plain(&output), "[output]\n(no output)");
    }

    #[test]
    fn verdicts_stream_a_line() {
        let done = event(&AgentEvent::Verdict(Verdict {
            answer: String::new(),
            is_complete: true,
            cannot_fix: false,
            reasoning: " total shown ".into(),
            next_action: String::new(),
            parsed: true,
            confidence: None,
            needed: None,
            cross_check: None,
        }));
        assert_eq!(done.content()["text"], "✓ total shown\n");
        let not_yet = event(&AgentEvent::Verdict(Verdict {
            answer: String::new(),
            is_complete: false,
            cannot_fix: false,
            reasoning: "no plot".into(),
            next_action: "plot it".into(),
            parsed: true,
            confidence: None,
            needed: None,
            cross_check: None,
        }));
        assert_eq!(
            not_yet.content()["text"],
            "↻ not done yet: no plot Next: plot it\n"
        );
        // Code in a review is for the model, not the user's line.
        let code = event(&AgentEvent::Verdict(Verdict {
            answer: String::new(),
            is_complete: false,
            cannot_fix: false,
            reasoning: "```python\nn_fruits = sales['fruit'].nunique()\n```".into(),
            next_action: "n_fruits = sales['fruit'].nunique()".into(),
            parsed: true,
            confidence: None,
            needed: None,
            cross_check: None,
        }));
        assert_eq!(code.content()["text"], "↻ not done yet\n");
        let impossible = event(&AgentEvent::Verdict(Verdict {
            answer: String::new(),
            is_complete: false,
            cannot_fix: true,
            reasoning: "sales.csv does not exist".into(),
            next_action: String::new(),
            parsed: true,
            confidence: None,
            needed: None,
            cross_check: None,
        }));
        assert_eq!(
            impossible.content()["text"],
            "✗ this cannot be done here: sales.csv does not exist\n"
        );
    }

    #[test]
    fn the_trace_shows_the_path_and_time_per_node() {
        let mut state = AgentState::new("q", Vec::new(), 3);
        state.turn = 2;
        state.usage = Usage {
            input_tokens: 7,
            output_tokens: 3,
            cost_usd: None,
            ..Default::default()
        };
        let step = |node, ms| TraceStep {
            node,
            took: Duration::from_millis(ms),
        };
        let steps = [
            step("generate", 1000),
            step("reflect", 250),
            step("generate", 500),
        ];
        let shown = trace(&steps, &state, Duration::from_millis(1750));
        assert_eq!(
            plain(&shown),
            "[trace] 2 turns · 7 in / 3 out tokens · 1.8 s\ngenerate → reflect → generate\n  \
             generate   ×2  1.50 s\n  reflect    ×1  0.25 s"
        );
        assert_eq!(shown.content()["metadata"]["mahtab"]["kind"], "trace");
        let call = |shown, first_ms: Option<u64>, cached_tokens| ModelCall {
            shown,
            purpose: if shown { "code" } else { "verdict" },
            first_text: first_ms.map(Duration::from_millis),
            took: Duration::from_millis(1500),
            input_tokens: 900,
            cached_tokens,
            output_tokens: 40,
            cut_off: None,
        };
        let cut_off = ModelCall {
            cut_off: Some("```python\nx = [1,".into()),
            ..call(true, Some(100), 0)
        };
        let calls = [
            call(true, Some(400), 0),
            call(false, None, 0),
            call(true, Some(100), 800),
            cut_off,
        ];
        let json = trace_json(&steps, &calls, &state, Duration::from_millis(1750));
        assert_eq!(json["steps"][1]["node"], "reflect");
        assert_eq!(json["turns"], 2);
        assert_eq!(json["confidence"], Value::Null);
        assert_eq!(json["cross_check"], Value::Null);
        state.verdict = Some(Verdict {
            confidence: Some(Confidence::Percent(87)),
            cross_check: Some(CrossCheck::Differed { of: 3 }),
            ..Verdict::not_done("", "")
        });
        let json = trace_json(&steps, &calls, &state, Duration::from_millis(1750));
        assert_eq!(json["confidence"], 87);
        assert_eq!(
            json["cross_check"],
            serde_json::json!({"result": "differed", "of": 3})
        );
        assert_eq!(
            json["first_text_seconds"],
            serde_json::json!([0.4, 0.1, 0.1])
        );
        assert_eq!(
            json["calls"][2],
            serde_json::json!({"shown": true, "purpose": "code", "first_text_seconds": 0.1,
                "seconds": 1.5, "input_tokens": 900, "cached_tokens": 800, "output_tokens": 40,
                "cut_off_text": null})
        );
        assert_eq!(json["calls"][3]["cut_off_text"], "```python\nx = [1,");
        assert_eq!(json["calls"][1]["first_text_seconds"], Value::Null);
    }

    #[test]
    fn the_result_package_holds_the_code_output_changes_and_failures() {
        let mut state = AgentState::new("q", Vec::new(), 3);
        let ran = |code: &str, output: &str, failed: bool, changes: &[&str]| Execution {
            code: code.into(),
            output: output.into(),
            shown: None,
            failed,
            finished: false,
            changes: changes.iter().map(|c| (*c).to_owned()).collect(),
            rich_outputs: usize::from(code.contains("plot")),
            images: Vec::new(),
        };
        state.executions = vec![
            ran(
                "n = total(x)",
                "NameError: name 'total' is not defined",
                true,
                &[],
            ),
            ran("n = sum(x)\nplot(x)", "6\n", false, &["n: int = 6 (new)"]),
        ];
        state.outcome = Some(Outcome::Complete);
        let json = result_json(&state);
        assert_eq!(json["outcome"], "Complete");
        assert_eq!(json["plan"], Value::Null);
        assert_eq!(json["code"], json!(["n = total(x)", "n = sum(x)\nplot(x)"]));
        assert_eq!(json["output"], "6");
        assert_eq!(json["figures"], 1);
        assert_eq!(json["changes"], json!(["n: int = 6 (new)"]));
        assert_eq!(
            json["failed_attempts"],
            json!([{"code": "n = total(x)", "error": "NameError: name 'total' is not defined"}])
        );
    }

    #[test]
    fn the_summary_counts_turns_tokens_and_cost() {
        let mut state = AgentState::new("q", Vec::new(), 3);
        state.turn = 1;
        state.outcome = Some(Outcome::Complete);
        state.usage = Usage {
            input_tokens: 12,
            output_tokens: 5,
            cost_usd: Some(0.5),
            ..Default::default()
        };
        let shown = summary(
            "openai",
            "m",
            &state,
            RunEnd::Finished { steps: 4 },
            Duration::from_millis(1500),
            None,
        );
        assert_eq!(
            plain(&shown),
            "answered · not checked · openai m · 1 turn · 12 in / 5 out tokens · $0.5000 · 1.5 s"
        );
        // What a review looked at before it said "done", clipped.
        let line = |state: &AgentState| {
            let shown = summary(
                "openai",
                "m",
                state,
                RunEnd::Finished { steps: 4 },
                Duration::ZERO,
                None,
            );
            plain(&shown).to_owned()
        };
        state.checked = vec!["n: int: 3".into(), "df: DataFrame, 4 rows".into()];
        let checked = line(&state);
        assert!(
            checked.starts_with("done · checked: n: int: 3; df: DataFrame, 4 rows · openai m"),
            "{checked}"
        );
        state.checked = vec!["é".repeat(200)];
        let clipped = line(&state);
        assert!(clipped.contains("é… · openai m"), "{clipped}");
        state.checked.clear();
        let session = Usage {
            input_tokens: 40,
            output_tokens: 9,
            cost_usd: None,
            ..Default::default()
        };
        let shown = summary(
            "openai",
            "m",
            &state,
            RunEnd::Finished { steps: 4 },
            Duration::from_millis(1500),
            Some(&session),
        );
        assert!(
            plain(&shown).ends_with("1.5 s · session: 40 in / 9 out tokens"),
            "{}",
            plain(&shown)
        );
    }

    #[test]
    fn failed_attempts_list_code_and_error_of_each() {
        let attempt = |code: &str, error: &str| Execution {
            code: code.into(),
            output: error.into(),
            shown: None,
            failed: true,
            finished: false,
            changes: Vec::new(),
            rich_outputs: 0,
            images: Vec::new(),
        };
        let (plain, markdown) = failed_attempts(&[attempt("a", "E1"), attempt("", "E2")]);
        assert_eq!(
            plain,
            "[gave up after 2 failed attempts]\n--- attempt 1\na\n-> E1\n--- attempt 2\n-> E2"
        );
        assert!(markdown.contains("attempt 2") && markdown.contains("E2"));
    }
}
