//! The default graph's routes, each driven by a scripted model and
//! executor: what is run, what the model is told, how the run ends. The
//! run's course is here; the user's data, failed blocks, what is checked
//! of a result and repeated turns have files of their own.

mod cross_checks;
mod data;
mod failures;
mod repeats;
mod results;

use super::*;
use crate::agent::graph::RunEnd;
use crate::agent::llm::Role;
use crate::agent::run::{AsWritten, Confidence, Difference, WrittenResult};
use crate::agent::script::{Script, fails_once, latest, ok};

const DONE: &str = r#"{"is_complete": true, "reasoning": "answered", "next_action": ""}"#;
const NOT_DONE: &str =
    r#"{"is_complete": false, "reasoning": "no total yet", "next_action": "sum the column"}"#;
const ONE_VALUE: &str = r#"{"form": "one number"}"#;
const CANNOT_TELL: &str = r#"{"form": "cannot tell"}"#;

fn settings() -> NodeSettings {
    NodeSettings::for_tests()
}

fn run(script: &mut Script, state: &mut AgentState, settings: NodeSettings) -> RunEnd {
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
    assert!(matches!(script.events.last(), Some(AgentEvent::Answer(a)) if a == "The total is 42."));
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
fn an_answer_without_code_to_a_request_that_needs_some_is_sent_back_once_using_no_turn() {
    let mut script = Script::new(&["3", "```python\nn = 3\n```", ONE_VALUE, DONE], ok);
    let mut state = AgentState::new("Count the fruits and store it in `n`.", Vec::new(), 1);
    run(&mut script, &mut state, settings());
    assert_eq!(script.executed, ["n = 3"]);
    let second = &script.requests[1];
    assert!(latest(second).starts_with(prompts::CODE_PLEASE));
    assert_eq!(state.outcome, Some(Outcome::Complete));
    assert_eq!(state.turn, 1);

    // A question that needs no code is answered in words.
    let mut script = Script::new(&["A left join keeps every row of the left table."], ok);
    let mut state = AgentState::new("What does a left join do?", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    assert_eq!(state.outcome, Some(Outcome::Answered));
    assert_eq!(script.requests.len(), 1);
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
fn judgements_go_to_the_judge_model_and_the_work_to_the_model() {
    let mut script = Script::new(&["```python\nprint(x)\n```", DONE], ok);
    let mut state = AgentState::new("print x", Vec::new(), 5);
    let settings = NodeSettings {
        judge_model: Some("small-model".into()),
        ..settings()
    };
    run(&mut script, &mut state, settings);
    let models: Vec<&str> = script.requests.iter().map(|r| r.model.as_str()).collect();
    assert_eq!(models, ["test-model", "small-model"]);
}

#[test]
fn no_exec_shows_code_but_runs_nothing() {
    let mut script = Script::new(&["```python\nimport os\n```"], ok);
    let mut state = AgentState::new("show me", Vec::new(), 5);
    let settings = NodeSettings {
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

#[test]
fn a_done_is_weighed_where_the_provider_gives_token_choices() {
    let weighing = || NodeSettings {
        token_choices: true,
        ..settings()
    };
    for (likelihood, confidence, unconfirmed, shown) in [
        (
            Some(0.46),
            Confidence::Percent(46),
            true,
            "? answered (not confirmed: the review was 46% sure)\n",
        ),
        (Some(0.93), Confidence::Percent(93), false, "✓ answered\n"),
        // Odds that should be there and cannot be read confirm nothing.
        (
            None,
            Confidence::Unreadable,
            true,
            "? answered (not confirmed: the review gave odds that could not be read)\n",
        ),
    ] {
        let mut script = Script::new(&["```python\nprint(6*7)\n```", DONE], ok);
        script.done_likelihoods.push_back(likelihood);
        let mut state = AgentState::new("compute", Vec::new(), 5);
        run(&mut script, &mut state, weighing());
        // Done either way in the graph; the run's ending reads the verdict.
        assert_eq!(state.outcome, Some(Outcome::Complete));
        let verdict = state.verdict.clone().unwrap();
        assert_eq!(
            (verdict.confidence, verdict.unconfirmed()),
            (Some(confidence), unconfirmed)
        );
        let line = script.events.iter().find_map(|e| match e {
            AgentEvent::Verdict(_) => {
                Some(crate::agent::render::event(e).content()["text"].clone())
            }
            _ => None,
        });
        assert_eq!(line.unwrap(), shown);
        // Asked after the very review it weighs, with its prompt and message.
        let [.., review, alone] = script.requests.as_slice() else {
            panic!("two calls at least");
        };
        assert!(alone.token_choices && !review.token_choices);
        assert_eq!(alone.system, review.system);
        let asked = &alone.messages[0].content;
        assert_eq!(
            asked.strip_suffix(prompts::VERDICT_ALONE),
            Some(review.messages[0].content.as_str())
        );
    }
    // A "not done" is not weighed: nothing to confirm.
    let mut script = Script::new(
        &[
            "```python\nprint(6*7)\n```",
            NOT_DONE,
            "```python\nprint(42)\n```",
            DONE,
        ],
        ok,
    );
    script.done_likelihoods.push_back(Some(0.9));
    let mut state = AgentState::new("compute", Vec::new(), 5);
    run(&mut script, &mut state, weighing());
    assert_eq!(
        script.requests.iter().filter(|r| r.token_choices).count(),
        1
    );
    assert_eq!(
        state.verdict.unwrap().confidence,
        Some(Confidence::Percent(90))
    );
}

#[test]
fn a_done_after_work_sent_back_twice_needs_surer_odds() {
    let weighing = || NodeSettings {
        token_choices: true,
        ..settings()
    };
    // The same 85% "done": after one sending back it is confirmed, after
    // two it is not.
    for (sent_back, needed, unconfirmed) in [(1, 80, false), (2, 90, true)] {
        let mut answers = vec!["```python\nprint(6*7)\n```"];
        for turn in 0..sent_back {
            answers.push(NOT_DONE);
            answers.push(["```python\nprint(42)\n```", "```python\nprint(40+2)\n```"][turn]);
        }
        answers.push(DONE);
        let mut script = Script::new(&answers, ok);
        script.done_likelihoods.push_back(Some(0.85));
        let mut state = AgentState::new("compute", Vec::new(), 5);
        run(&mut script, &mut state, weighing());
        assert_eq!(state.looked_at, sent_back as u32 + 1);
        let verdict = state.verdict.clone().unwrap();
        assert_eq!(verdict.confidence, Some(Confidence::Percent(85)));
        assert_eq!(
            (verdict.needed(), verdict.unconfirmed()),
            (needed, unconfirmed)
        );
    }
}

#[test]
fn a_turn_stops_after_its_first_block_where_the_settings_say_so() {
    // The server leaves the stop text (the closing fence) out of the answer.
    let cut = "Printing it.\n```python\nprint(6*7)";
    for (stop_after_block, once, stopped) in [
        (true, false, true),
        (true, true, false),
        (false, false, false),
    ] {
        let settings = NodeSettings {
            stop_after_block,
            once,
            ..settings()
        };
        let mut script = Script::new(&[cut, DONE], ok);
        let mut state = AgentState::new("compute", Vec::new(), 5);
        run(&mut script, &mut state, settings);
        assert_eq!(
            !script.requests[0].stop.is_empty(),
            stopped,
            "{stop_after_block} {once}"
        );
        // The block ran, and the conversation shows it closed.
        assert_eq!(state.executions[0].code.trim(), "print(6*7)");
        let answer = state
            .conversation
            .iter()
            .find(|m| m.role == Role::Assistant)
            .unwrap();
        assert!(
            answer.content.ends_with("print(6*7)\n```"),
            "{}",
            answer.content
        );
    }
    // The stop text ends a closed block followed by a blank line only: it is
    // not in an opening fence, bare or tagged, nor in code.
    let stop = super::super::steps::AFTER_FIRST_BLOCK[0];
    let answer = "Here:\n```\nimport math\n\nx = 1\n```\n\nIt prints 1.";
    assert_eq!(answer.find(stop), Some(answer.find("\n```\n\nIt").unwrap()));
}
