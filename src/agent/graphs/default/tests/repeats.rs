//! Turns that repeat the one before or an earlier one: told once, with
//! the error, the review's reasons or what the earlier answer was told,
//! then the run stops.

use super::*;

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
