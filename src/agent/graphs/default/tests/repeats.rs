//! Turns that repeat the one before or an earlier one: told once, with
//! the error, the review's reasons or what the earlier answer was told,
//! then the run stops.

use super::*;
use crate::agent::llm::Sampling;
use crate::agent::run::{Agreement, TriedFrom};

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
    assert!(
        told.contains("same code again and got the same result"),
        "{told}"
    );
    assert_eq!(script.requests.len(), 4);
}

#[test]
fn the_same_failing_code_is_told_it_cannot_work_with_the_error_and_a_hint() {
    let mut script = Script::new(
        &[
            "```python\nx = 1/0\n```",
            "```python\nx = 1/0\n```",
            "```python\nx = 1\n```",
            DONE,
        ],
        fails_once,
    );
    let mut state = AgentState::new("set x", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    // After the second identical failure: no review call, the model is
    // told the block cannot work, then its different block is judged.
    let told = latest(&script.requests[2]);
    assert!(told.contains("failed with the same error"), "{told}");
    assert!(
        told.contains("ZeroDivisionError: division by zero"),
        "{told}"
    );
    assert!(!told.contains(prompts::REPEATED), "{told}");
    assert_eq!(script.executed.last().unwrap(), "x = 1");
    assert_eq!(state.outcome, Some(Outcome::Complete));
}

#[test]
fn the_same_failing_code_is_told_what_its_traceback_shows() {
    fn fills_a_dict_it_never_made(code: &str) -> Execution {
        let failed = !code.contains("answers = {}");
        let output = if failed {
            "Traceback (most recent call last):\n  File \"<agent>\", line 2, in <module>\n    \
             answers['mean'] = m\nNameError: name 'answers' is not defined"
        } else {
            ""
        };
        Execution {
            failed,
            output: output.into(),
            ..ok(code)
        }
    }
    let filled = "```python\nm = 2\nanswers['mean'] = m\n```";
    let made = "```python\nanswers = {}\nanswers['mean'] = 2\n```";
    let mut script = Script::new(&[filled, filled, made, DONE], fills_a_dict_it_never_made);
    let mut state = AgentState::new("store the mean in a dict", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    // Both times, the hint read from the traceback, not the error line's.
    for told in [latest(&script.requests[1]), latest(&script.requests[2])] {
        assert!(told.contains("answers = {} for a dict"), "{told}");
    }
    assert_eq!(state.outcome, Some(Outcome::Complete));
}

#[test]
fn the_same_unfinished_code_again_is_told_why_it_was_not_enough() {
    let mut script = Script::new(
        &[
            "```python\nprint(1)\n```",
            NOT_DONE,
            "```python\nprint(1)\n```",
            "```python\nprint(sum(x))\n```",
            DONE,
        ],
        ok,
    );
    let mut state = AgentState::new("print the total", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    let told = latest(&script.requests[3]);
    assert!(told.contains("same code again"), "{told}");
    assert!(told.contains("no total yet"), "{told}");
    assert!(told.contains("Next: sum the column."), "{told}");
    assert_eq!(state.outcome, Some(Outcome::Complete));
}

#[test]
fn a_turn_that_resends_an_earlier_turns_failing_code_is_told_so_then_the_run_stops() {
    // As the 1.5B coder model does: two answers, each failing, sent in turn.
    const FIRST: &str = "```python\ntotal = x.sum(axis=2)\n```";
    const SECOND: &str = "```python\ntotal = x.total()\n```";
    let mut script = Script::new(&[FIRST, SECOND, FIRST, SECOND], |code| Execution {
        output: if code.contains("axis") {
            "ValueError: No axis named 2 for object type DataFrame".into()
        } else {
            "AttributeError: 'DataFrame' object has no attribute 'total'".into()
        },
        failed: true,
        ..ok(code)
    });
    let mut state = AgentState::new(
        "Store the sum of each column of x in `total`.",
        Vec::new(),
        6,
    );
    run(&mut script, &mut state, settings());
    let told = latest(&script.requests[3]);
    assert!(
        told.contains("same code again and it failed with the same error: ValueError: No axis"),
        "{told}"
    );
    assert_eq!(state.outcome, Some(Outcome::Repeating));
    assert_eq!(script.requests.len(), 4);
}

#[test]
fn a_turn_that_resends_an_earlier_unfinished_answer_is_told_again_why_it_was_sent_back() {
    const FIRST: &str = "```python\ntotal = x.sum()\n```";
    const SECOND: &str = "```python\ntotal = x.mean()\n```";
    let first_review = r#"{"is_complete": false, "reasoning": "total sums the rows of every column", "next_action": "sum only the column a"}"#;
    let second_review = r#"{"is_complete": false, "reasoning": "a mean is no sum", "next_action": "sum the column"}"#;
    let mut script = Script::new(
        &[
            FIRST,
            CANNOT_TELL,
            first_review,
            SECOND,
            second_review,
            FIRST,
            SECOND,
        ],
        ok,
    );
    let mut state = AgentState::new("Store the sum of x's column a in `total`.", Vec::new(), 6);
    run(&mut script, &mut state, settings());
    // The third answer is the first again: told what the first was told,
    // not the second's review.
    let told = latest(&script.requests[6]);
    assert!(told.contains("You sent code you had sent before"), "{told}");
    assert!(told.contains("sum only the column a"), "{told}");
    assert!(!told.contains("a mean is no sum"), "{told}");
    // Then the second again: the run stops.
    assert_eq!(state.outcome, Some(Outcome::Repeating));
    assert_eq!(script.requests.len(), 7);
}

#[test]
fn what_an_answer_was_told_is_the_message_after_its_report_and_none_after_a_rerun() {
    let conversation = [
        ChatMessage::user("sum x"),
        ChatMessage::assistant("```python\ntotal = x.sum()\n```"),
        ChatMessage::user("Your code ran."),
        ChatMessage::user("not finished: sum one column"),
        ChatMessage::assistant("```python\nt = x.a.sum()\ntotal = t\n```"),
        ChatMessage::user("Your code ran."),
        ChatMessage::assistant("(the kernel's rerun)\n```python\ntotal = t\n```"),
        ChatMessage::user("Your code ran."),
        ChatMessage::assistant("```python\ntotal = x.sum()\n```"),
    ];
    assert_eq!(
        super::told_after(&conversation, "total = x.sum()\n"),
        Some("not finished: sum one column")
    );
    // Followed by the report alone: nothing was said of it.
    assert_eq!(
        super::told_after(&conversation, "t = x.a.sum()\ntotal = t"),
        None
    );
    // The last answer is the repeat itself, not an earlier one.
    assert_eq!(
        super::told_after(&conversation[..3], "total = x.sum()"),
        None
    );
}

/// A run whose first value is not the result the request writes out, and
/// whose second turn sends the same code back.
fn repeated_against_the_written_result(
    afresh: [&'static str; 2],
    groups: &[&[usize]],
) -> (Script, AgentState) {
    let same = "```python\nresult = df.sum()\n```";
    let mut answers = vec![same, same];
    answers.extend(afresh);
    answers.extend([same, same]);
    let mut script = Script::new(&answers, ok);
    script
        .written
        .push_back(vec![WrittenResult::Differs(Difference {
            name: "result".into(),
            written: "a    1\nb    0".into(),
            value: "a    1\nb    2".into(),
            differs_in: String::new(),
            on_example: false,
        })]);
    script
        .written
        .push_back(vec![WrittenResult::Matches(AsWritten {
            name: "result".into(),
            on_example: false,
        })]);
    script.agreements.push_back(Agreement {
        groups: groups.iter().map(|g| g.to_vec()).collect(),
        ..Agreement::default()
    });
    let mut state = AgentState::new(
        "My frame gives this... The end result should be\na    1\nb    0\nresult = ... # put solution in this variable",
        Vec::new(),
        5,
    );
    let settings = NodeSettings {
        cross_checks: 2,
        sampling: Sampling {
            temperature: Some(0.0),
            seed: Some(0),
        },
        ..settings()
    };
    run(&mut script, &mut state, settings);
    (script, state)
}

#[test]
fn a_repeat_against_the_written_result_runs_a_solution_written_afresh_that_computes_otherwise() {
    let (script, state) = repeated_against_the_written_result(
        [
            "```python\nresult = df.sum()\n```",
            "```python\nresult = df.sum(min_count=1)\n```",
        ],
        &[&[0, 1], &[2]],
    );
    // The two solutions were asked of the request alone, code only, with
    // seeds past those a cross-check and its mending would use, and tried
    // on the namespace as it was before the run.
    for (asked, seed) in script.requests[2..4].iter().zip([5, 6]) {
        assert_eq!(asked.messages.len(), 1);
        assert!(latest(asked).ends_with(prompts::CODE_ONLY));
        assert_eq!(asked.sampling.seed, Some(seed));
    }
    assert_eq!(script.tried_from, [TriedFrom::RunStart]);
    // The one that computed another result ran as the next turn, on the
    // user's variables put back as the run found them (`x`), and the
    // comparison with the written result made it done, no review asked.
    assert_eq!(
        script.executed,
        [
            "result = df.sum()",
            "result = df.sum()",
            "result = df.sum(min_count=1)"
        ]
    );
    assert_eq!(script.requests.len(), 4);
    assert_eq!(state.outcome, Some(Outcome::Complete));
    assert!(state.answer.starts_with(prompts::FRESH_SOLUTION));
    assert_eq!(state.turn, 3);
    assert_eq!(script.restored, ["x"]);
}

#[test]
fn solutions_written_afresh_that_compute_the_same_leave_the_repeat_told_as_before() {
    let (script, state) = repeated_against_the_written_result(
        [
            "```python\nresult = df.sum()\n```",
            "```python\nresult = df.sum(axis=0)\n```",
        ],
        &[&[0, 1, 2]],
    );
    // Nothing else computed: the model is told of the repeat, sends the
    // same code once more, and the run stops, with no second writing afresh.
    let told = latest(&script.requests[4]);
    assert!(
        told.contains("same code again and got the same result"),
        "{told}"
    );
    assert_eq!(script.executed.len(), 3);
    assert_eq!(script.tried.len(), 1);
    assert!(script.restored.is_empty());
    assert_eq!(state.outcome, Some(Outcome::Repeating));
}

#[test]
fn a_repeat_after_a_review_s_not_done_writes_nothing_afresh() {
    let mut script = Script::new(
        &[
            "```python\nresult = 1\n```",
            ONE_VALUE,
            NOT_DONE,
            "```python\nresult = 1\n```",
            "```python\nresult = 1\n```",
        ],
        ok,
    );
    let mut state = AgentState::new("Store the total in `result`.", Vec::new(), 5);
    run(
        &mut script,
        &mut state,
        NodeSettings {
            cross_checks: 2,
            ..settings()
        },
    );
    // A review can pass a plausible wrong value: nothing else runs on its
    // word.
    assert!(script.tried.is_empty());
    assert_eq!(state.outcome, Some(Outcome::Repeating));
}
