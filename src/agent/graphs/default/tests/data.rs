//! The user's data in the default graph: data typed in again over a
//! variable, a key spelled otherwise, a file read again, a cell the user
//! ran sent back, a variable rebound or a copy changed where the request
//! asked for a change in place.

use super::*;

#[test]
fn a_loaded_variable_read_again_from_a_missing_file_runs_again_without_that_line() {
    // `x` is in the scripted namespace (x: int = 1).
    let mut script = Script::new(
        &["```python\nx = pd.read_csv('inn.txt')\nprint(x)\n```", DONE],
        |code| match code.contains("inn.txt") {
            true => Execution {
                output: "FileNotFoundError: [Errno 2] No such file or directory: 'inn.txt'".into(),
                failed: true,
                ..ok(code)
            },
            false => ok(code),
        },
    );
    let mut state = AgentState::new("print x", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    assert_eq!(
        script.executed,
        ["x = pd.read_csv('inn.txt')\nprint(x)", "print(x)"]
    );
    assert_eq!(script.requests.len(), 2);
    assert_eq!(state.outcome, Some(Outcome::Complete));
    assert!(script.events.iter().any(|e| matches!(
        e,
        AgentEvent::Status(s) if s.contains("`x` is loaded already")
    )));
}

#[test]
fn data_a_variable_holds_typed_in_again_runs_again_on_the_variable() {
    // `x` is in the scripted namespace; the block typed it in from how a
    // request printed it, with a `NaN` Python does not know.
    const TYPED: &str =
        "x = pd.DataFrame({'a': [1, NaN],\n                  'b': [3, 4]})\nprint(x.sum())";
    const ANSWER: &str = concat!(
        "```python\n",
        "x = pd.DataFrame({'a': [1, NaN],\n                  'b': [3, 4]})\nprint(x.sum())",
        "\n```"
    );
    let mut script = Script::new(&[ANSWER, DONE], |code| match code.contains("NaN") {
        true => Execution {
            output: "NameError: name 'NaN' is not defined".into(),
            failed: true,
            ..ok(code)
        },
        false => ok(code),
    });
    let mut state = AgentState::new("sum each column of x", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    assert_eq!(script.executed, [TYPED, "print(x.sum())"]);
    assert_eq!(
        script.requests.len(),
        2,
        "no model call between the two runs"
    );
    assert_eq!(state.outcome, Some(Outcome::Complete));
    assert!(script.events.iter().any(|e| matches!(
        e,
        AgentEvent::Status(s) if s.contains("`x` is defined already with the data")
    )));
    // Whatever the failed block bound goes back before the run on `x`.
    assert_eq!(script.restored, ["x"]);
}

#[test]
fn the_requests_example_typed_over_a_variable_runs_again_on_the_users_data() {
    // The block ran: its total is the example's, not the user's `x`.
    const ANSWER: &str = "```python\nx = np.array([1, 2, 3, 4])\ntotal = x.sum()\n```";
    let mut script = Script::new(&[ANSWER, CANNOT_TELL, DONE], ok);
    let request = "I have an array x, for example x = np.array([1, 2, 3, 4]). \
                   Put its total in `total`.";
    let mut state = AgentState::new(request, Vec::new(), 5);
    run(&mut script, &mut state, settings());
    assert_eq!(
        script.executed,
        [
            "x = np.array([1, 2, 3, 4])\ntotal = x.sum()",
            "total = x.sum()"
        ]
    );
    assert_eq!(script.restored, ["x"]);
    // No model call between the runs; the form, then the review of the run
    // on the user's data.
    assert_eq!(script.requests.len(), 3);
    let review = latest(&script.requests[2]);
    assert!(
        review.contains("```python\ntotal = x.sum()\n```"),
        "{review}"
    );
    assert_eq!(state.outcome, Some(Outcome::Complete));
}

#[test]
fn the_example_typed_in_on_the_last_turn_or_in_a_repeat_still_leaves_the_users_data() {
    const ANSWER: &str = "```python\nx = np.array([1, 2, 3, 4])\ntotal = x.sum()\n```";
    let request = "I have an array x, for example x = np.array([1, 2, 3, 4]). \
                   Put its total in `total`.";
    // The last turn: the run on the user's data asks the model nothing.
    let mut script = Script::new(&[ANSWER, CANNOT_TELL, DONE], ok);
    let mut state = AgentState::new(request, Vec::new(), 1);
    run(&mut script, &mut state, settings());
    assert_eq!(script.executed.last().unwrap(), "total = x.sum()");
    assert_eq!(script.restored, ["x"]);
    assert_eq!(state.outcome, Some(Outcome::Complete));
    // The same block sent again after a review sent it back: it runs on
    // the user's data before the repeat ends the run, which leaves `x` as
    // the user had it.
    let mut script = Script::new(&[ANSWER, CANNOT_TELL, NOT_DONE, ANSWER], ok);
    let mut state = AgentState::new(request, Vec::new(), 2);
    run(&mut script, &mut state, settings());
    assert_eq!(
        script.executed,
        [
            "x = np.array([1, 2, 3, 4])\ntotal = x.sum()",
            "total = x.sum()",
            "x = np.array([1, 2, 3, 4])\ntotal = x.sum()",
            "total = x.sum()"
        ]
    );
    assert_eq!(script.restored, ["x", "x"]);
    assert_eq!(state.outcome, Some(Outcome::Repeating));
}

#[test]
fn the_users_own_data_typed_in_again_stays_and_other_data_beside_it_goes() {
    // `x` typed in with the data it held (as the array of a list, say):
    // a conversion, and the block stands.
    let answer = "```python\nx = np.array([1, 2])\ntotal = x.sum()\n```";
    let mut script = Script::new(&[answer, CANNOT_TELL, DONE], ok);
    script.same_data = vec!["x".into()];
    let mut state = AgentState::new("Put the total of x in `total`.", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    assert_eq!(script.executed, ["x = np.array([1, 2])\ntotal = x.sum()"]);
    assert!(script.restored.is_empty());
    assert_eq!(state.outcome, Some(Outcome::Complete));
}

#[test]
fn a_failure_the_typed_in_data_had_no_part_in_goes_back_as_a_failure() {
    // `x` typed in, then a later line fails: with the user's own data, or
    // raised before the statement, the same code on `x` would fail the same.
    const FIXED: &str = "```python\ntotal = 3\n```";
    fn fails_at(code: &str) -> Execution {
        let Some(line) = code.lines().position(|l| l.contains("1/0")).map(|l| l + 1) else {
            return ok(code);
        };
        Execution {
            output: format!(
                "Traceback (most recent call last):\n  File \"<agent>\", line {line}, in \
                 <module>\n    y = 1/0\nZeroDivisionError: division by zero"
            ),
            failed: true,
            ..ok(code)
        }
    }
    for (answer, same_data) in [
        ("```python\nx = np.array([1, 2])\ny = 1/0\n```", true),
        ("```python\ny = 1/0\nx = np.array([1, 2])\n```", false),
    ] {
        let mut script = Script::new(&[answer, FIXED, ONE_VALUE, DONE], fails_at);
        if same_data {
            script.same_data = vec!["x".into()];
        }
        let mut state = AgentState::new("Put the total of x in `total`.", Vec::new(), 5);
        run(&mut script, &mut state, settings());
        assert_eq!(script.executed.len(), 2, "{answer}");
        assert!(script.restored.is_empty(), "{answer}");
        let told = latest(&script.requests[1]);
        assert!(told.contains("ZeroDivisionError"), "{told}");
    }
    // The data other than the user's, and the failure after it: the block
    // runs again on `x`, as for a block that ran.
    let answer = "```python\nx = np.array([1, 2])\ny = 1/0\n```";
    let mut script = Script::new(&[answer, FIXED, ONE_VALUE, DONE], fails_at);
    let mut state = AgentState::new("Put the total of x in `total`.", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    assert_eq!(script.executed[1], "y = 1/0");
    assert_eq!(script.restored, ["x"]);
}

#[test]
fn data_typed_in_stays_when_the_request_sets_it_or_the_run_made_the_variable() {
    // Asked to set `x`: typing it in is the work.
    let answer = "```python\nx = [5, 6, 7]\n```";
    let mut script = Script::new(&[answer, DONE], ok);
    let mut state = AgentState::new("Set x to the list 5, 6, 7.", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    assert_eq!(script.executed, ["x = [5, 6, 7]"]);
    assert!(script.restored.is_empty());
    // `bins` is the run's own (not in the namespace when it began): typed
    // in again in a later turn, it is a fix.
    let mut script = Script::new(
        &[
            "```python\nbins = [0, 10]\n```",
            NOT_DONE,
            "```python\nbins = [0, 5, 10]\n```",
            DONE,
        ],
        ok,
    );
    let mut state = AgentState::new("count x by bins", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    assert_eq!(script.executed, ["bins = [0, 10]", "bins = [0, 5, 10]"]);
    assert!(script.restored.is_empty());
}

#[test]
fn a_key_spelled_otherwise_than_the_data_runs_again_respelled_without_asking() {
    const WRITTEN: &str = "m = weather['wind_speed'].mean()";
    let mut script = Script::new(
        &["```python\nm = weather['wind_speed'].mean()\n```", DONE],
        |code| match code.contains("'wind_speed'") {
            true => Execution {
                output: "KeyError: 'wind_speed'. Did you mean: 'wind speed' (a column of weather)?"
                    .into(),
                failed: true,
                ..ok(code)
            },
            false => ok(code),
        },
    );
    let mut state = AgentState::new("the mean wind speed of weather", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    assert_eq!(
        script.executed,
        [WRITTEN, "m = weather['wind speed'].mean()"]
    );
    assert_eq!(
        nodes_run(&script),
        [
            "generate", "extract", "execute", "reflect", "execute", "reflect"
        ]
    );
    // One answer and one review: the respelling asked no model.
    assert_eq!(script.requests.len(), 2);
    assert_eq!(state.outcome, Some(Outcome::Complete));
    assert!(script.events.iter().any(|e| matches!(
        e,
        AgentEvent::Status(s) if s.contains("spells 'wind_speed' as 'wind speed'")
    )));
    // The conversation says what ran, as if written so.
    assert!(
        state
            .conversation
            .iter()
            .any(|m| m.role == Role::Assistant && m.content.contains("weather['wind speed']"))
    );
}

#[test]
fn a_function_named_after_the_users_data_runs_again_named_otherwise_without_asking() {
    // The runtime refuses the block (its error line, as execution.py
    // writes it); the local model, told so, sent the same code again.
    const ANSWER: &str =
        "```python\ndef shift(a, n):\n    return a[n:]\nmoved = shift(x, shift[0])\n```";
    let mut script = Script::new(&[ANSWER, DONE], |code| match code.contains("def shift(") {
        true => Execution {
            output: "NameInUse: `def shift(...)` would replace `shift`, which holds data \
                         (list len 2 = [1, 2]), so nothing ran: give what it defines another name"
                .into(),
            failed: true,
            ..ok(code)
        },
        false => ok(code),
    });
    let mut state = AgentState::new("Shift x by the first of shift into `moved`.", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    assert_eq!(
        script.executed[1],
        "def shift_function(a, n):\n    return a[n:]\nmoved = shift_function(x, shift[0])"
    );
    // One answer and one review: the rename asked no model.
    assert_eq!(script.requests.len(), 2);
    assert!(script.events.iter().any(|e| matches!(
        e,
        AgentEvent::Status(s) if s.contains("definition named `shift_function`")
    )));
}

#[test]
fn a_cell_the_user_ran_sent_again_is_not_run_and_leaves_the_prompt() {
    let cell = "from pathlib import Path\nPath('notes.md').write_text('hi')\nprint('saved')";
    let mut script = Script::new(
        &[
            "```python\nPath('notes.md').write_text('hi')\nprint('saved')\n```",
            "```python\nprint(len('hi'))\n```",
            DONE,
        ],
        ok,
    );
    let mut state = AgentState::new("count the characters of the note", Vec::new(), 5);
    state.recent_cells = vec![cell.to_owned()];
    run(&mut script, &mut state, settings());
    assert_eq!(script.executed, ["print(len('hi'))"]);
    // Asked again as at first, but with neither the cell nor the copy
    // in view.
    let (first, again) = (&script.requests[0], &script.requests[1]);
    assert!(
        first.system.contains("write_text('hi')"),
        "{}",
        first.system
    );
    assert!(
        !again.system.contains("write_text('hi')"),
        "{}",
        again.system
    );
    assert_eq!(again.messages.len(), first.messages.len());
    assert_eq!(latest(again), "count the characters of the note");
    assert_eq!(state.outcome, Some(Outcome::Complete));
}

#[test]
fn a_refused_block_runs_again_without_what_it_copied_from_a_cell_the_user_ran() {
    // The guard refuses writing the note again; the rest runs on what the
    // user's cell made.
    fn guarded(code: &str) -> Execution {
        if code.contains("write_text") {
            Execution {
                output: "Not run: this code would delete or overwrite files".into(),
                ..ok(code)
            }
        } else {
            ok(code)
        }
    }
    let cell = "from pathlib import Path\nnote = Path('notes.md')\nnote.write_text('hi')\n\
                print('saved')";
    let answer = "```python\nnote = Path('notes.md')\nnote.write_text('hi')\nprint('saved')\n\
                  print(len(note.read_text()))\n```";
    let mut script = Script::new(&[answer, DONE], guarded);
    let mut state = AgentState::new("count the characters of the note", Vec::new(), 5);
    state.recent_cells = vec![cell.to_owned()];
    run(&mut script, &mut state, settings());
    let whole = "note = Path('notes.md')\nnote.write_text('hi')\nprint('saved')\n\
                 print(len(note.read_text()))";
    assert_eq!(script.executed, [whole, "print(len(note.read_text()))"]);
    // The review reads what ran; the user and the model are told why.
    let review = latest(&script.requests[1]);
    assert!(
        review.contains("```python\nprint(len(note.read_text()))\n```"),
        "{review}"
    );
    assert!(!review.contains("write_text"), "{review}");
    assert!(
        script
            .events
            .iter()
            .any(|e| matches!(e, AgentEvent::Status(s) if s == prompts::COPIED_LINES_LEFT_OUT))
    );
    let told = state
        .conversation
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .unwrap();
    assert!(
        told.content.starts_with(prompts::COPIED_LINES_LEFT_OUT),
        "{}",
        told.content
    );
    assert_eq!(state.outcome, Some(Outcome::Complete));
}

#[test]
fn a_first_copy_uses_no_turn_and_a_second_ends_the_run_at_the_turn_limit() {
    let cell = "x = 1\nprint(x)";
    let copy = "```python\nx = 1\nprint(x)\n```";
    let mut script = Script::new(&[copy, "```python\n# x\nx = 1\nprint(x)\n```"], ok);
    let mut state = AgentState::new("show x", Vec::new(), 1);
    state.recent_cells = vec![cell.to_owned()];
    run(&mut script, &mut state, settings());
    assert!(script.executed.is_empty());
    assert_eq!(script.requests.len(), 2);
    assert_eq!(state.outcome, Some(Outcome::MaxTurns));
}

#[test]
fn a_variable_asked_to_change_itself_and_rebound_instead_is_not_done() {
    let mut script = Script::new(
        &[
            "```python\nx = [v * 2 for v in x]\n```",
            "```python\nx[:] = [v * 2 for v in x]\n```",
            DONE,
        ],
        |code| Execution {
            changes: vec![if code.starts_with("x = ") {
                "x: list len 3 (changed)".to_owned()
            } else {
                "x: list len 3 (changed in place)".to_owned()
            }],
            ..ok(code)
        },
    );
    let mut state = AgentState::new("Double the numbers in x (change x itself).", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    // The rebinding was sent back without a review, with the model's own
    // line said in place; the change in place went to the review.
    let second = &script.requests[1];
    let last = &second.messages.last().unwrap().content;
    assert!(last.contains("`x` was assigned a new object"), "{last}");
    // Its original object went back under the name first.
    assert!(
        last.contains("`x` names the original object again"),
        "{last}"
    );
    assert_eq!(script.restored, ["x"]);
    assert!(last.contains("write `x[:] = [v * 2 for v in x]`"), "{last}");
    assert_eq!(script.requests.len(), 3);
    let review = latest(&script.requests[2]);
    assert!(
        review.contains("x: list len 3 (changed in place)"),
        "{review}"
    );
    assert_eq!(state.outcome, Some(Outcome::Complete));
    assert_eq!(state.checked, ["x: list len 3 (changed in place)"]);
}

#[test]
fn a_change_pandas_says_went_to_a_copy_is_not_done_without_a_review() {
    let mut script = Script::new(
        &[
            "```python\ndf['a'].fillna(0, inplace=True)\n```",
            "```python\ndf['a'] = df['a'].fillna(0)\n```",
            DONE,
        ],
        |code| Execution {
            output: if code.contains("inplace=True") {
                "<agent>:1: ChainedAssignmentError: A value is being set on a copy".into()
            } else {
                String::new()
            },
            ..ok(code)
        },
    );
    let mut state = AgentState::new("Fill the gaps in df's column a with 0.", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    let told = latest(&script.requests[1]);
    assert!(told.contains("went to a copy"), "{told}");
    assert!(
        told.contains("write `df['a'] = df['a'].fillna(0)`"),
        "{told}"
    );
    assert_eq!(script.requests.len(), 3);
    assert_eq!(state.outcome, Some(Outcome::Complete));
}
