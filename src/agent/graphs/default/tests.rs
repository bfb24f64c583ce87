//! The default graph's routes, each driven by a scripted model and
//! executor: what is run, what the model is told, how the run ends.

use super::*;
use crate::agent::graph::RunEnd;
use crate::agent::llm::Role;
use crate::agent::run::{AsWritten, Difference, WrittenResult};
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
fn a_review_that_finds_the_request_impossible_ends_the_run() {
    let cannot = r#"{"is_complete": false, "cannot_fix": true, "reasoning": "sales.csv does not exist", "next_action": ""}"#;
    let mut script = Script::new(
        &[
            "```python
open('sales.csv')
```",
            cannot,
        ],
        |code| Execution {
            output: "FileNotFoundError: [Errno 2] No such file or directory: 'sales.csv'".into(),
            failed: true,
            ..ok(code)
        },
    );
    let mut state = AgentState::new("sum sales.csv", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    assert_eq!(state.outcome, Some(Outcome::CannotBeDone));
    assert_eq!(state.turn, 1);
    assert_eq!(
        nodes_run(&script),
        ["generate", "extract", "execute", "reflect"]
    );
}

#[test]
fn a_file_the_request_never_named_is_the_models_guess_and_goes_back_to_it() {
    let mut script = Script::new(
        &[
            "```python\ndf = pd.read_csv('inn.txt')\n```",
            "```python\nprint(df.shape)\n```",
            DONE,
        ],
        |code| match code.contains("inn.txt") {
            true => Execution {
                output: "FileNotFoundError: [Errno 2] No such file or directory: 'inn.txt'".into(),
                failed: true,
                ..ok(code)
            },
            false => ok(code),
        },
    );
    let mut state = AgentState::new("count the rows of df", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    // No review between: the next turn is told the data is in the namespace.
    let told = latest(&script.requests[1]);
    assert!(told.contains("no file \"inn.txt\" here"), "{told}");
    assert_eq!(
        script.executed,
        ["df = pd.read_csv('inn.txt')", "print(df.shape)"]
    );
    assert_eq!(state.outcome, Some(Outcome::Complete));
}

#[test]
fn a_library_that_is_not_installed_goes_back_with_what_computes_its_calls() {
    // As the local model wrote it: scipy's z-score, then the call without
    // the import, then pandas.
    let scipy = "from scipy import stats\nz = stats.zscore(df['charges'])";
    let dropped = "z = stats.zscore(df['charges'])";
    let pandas = "z = (df['charges'] - df['charges'].mean()) / df['charges'].std(ddof=0)";
    let mut script = Script::new(
        &[
            "```python\nfrom scipy import stats\nz = stats.zscore(df['charges'])\n```",
            "```python\nz = stats.zscore(df['charges'])\n```",
            "```python\nz = (df['charges'] - df['charges'].mean()) / df['charges'].std(ddof=0)\n```",
            ONE_VALUE,
            DONE,
        ],
        |code| {
            let error = if code.contains("import stats") {
                "ModuleNotFoundError: No module named 'scipy'"
            } else if code.contains("stats.") {
                "NameError: name 'stats' is not defined"
            } else {
                return ok(code);
            };
            Execution {
                output: format!("Traceback (most recent call last):\n{error}"),
                failed: true,
                ..ok(code)
            }
        },
    );
    let mut state = AgentState::new("the z-scores of df's charges, in z", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    let stand_in = "Without scipy: `zscore(x)` is `(x - x.mean()) / x.std(ddof=0)`";
    let told = latest(&script.requests[1]);
    assert!(told.contains("scipy is not installed here"), "{told}");
    assert!(told.contains(stand_in), "{told}");
    // The import dropped and the call kept: the name is scipy's.
    let told = latest(&script.requests[2]);
    assert!(told.contains("`stats` came from scipy"), "{told}");
    assert!(told.contains(stand_in), "{told}");
    assert_eq!(script.executed, [scipy, dropped, pandas]);
}

#[test]
fn an_import_of_a_missing_library_that_nothing_uses_is_left_out_without_asking() {
    const ANSWER: &str =
        "```python\nfrom scipy import stats\nz = (x - x.mean()) / x.std(ddof=0)\n```";
    let mut script = Script::new(&[ANSWER, DONE], |code| match code.contains("scipy") {
        true => Execution {
            output: "ModuleNotFoundError: No module named 'scipy'".into(),
            failed: true,
            ..ok(code)
        },
        false => ok(code),
    });
    let mut state = AgentState::new("the z-scores of x", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    assert_eq!(
        script.executed,
        [
            "from scipy import stats\nz = (x - x.mean()) / x.std(ddof=0)",
            "z = (x - x.mean()) / x.std(ddof=0)"
        ]
    );
    assert_eq!(script.requests.len(), 2, "no model call between the runs");
    assert_eq!(state.outcome, Some(Outcome::Complete));
}

#[test]
fn a_request_that_names_no_value_is_reviewed_on_the_users_variables_it_changed() {
    // `x` is the user's (the scripted namespace); the block changes it.
    let mut script = Script::new(
        &["```python\nx[:] = [v * 2 for v in x]\n```", DONE],
        |code| Execution {
            changes: vec![
                "doubled: int = 2 (new)".into(),
                "x: list len 3 = [2, 4, 6] (changed in place)".into(),
            ],
            ..ok(code)
        },
    );
    let mut state = AgentState::new("double x", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    assert_eq!(state.outcome, Some(Outcome::Complete));
    // Described as it is now, for the review; what the run made itself is not.
    assert_eq!(script.described, [vec!["x".to_owned()]]);
    let review = latest(script.requests.last().unwrap());
    assert!(
        review.contains("The variables the code changed, as they are now:\nx: list"),
        "{review}"
    );
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

/// What `print(m)` and each text print.
fn prints_a_mean(code: &str) -> Execution {
    let mut output = Vec::new();
    if code.contains("print(m)") {
        output.push("3.0");
    }
    if code.contains("'The mean is 12.5'") {
        output.push("The mean is 12.5");
    }
    if code.contains("{m}") {
        output.push("The mean is 3.0");
    }
    Execution {
        output: output.join("\n"),
        ..ok(code)
    }
}

#[test]
fn a_number_printed_as_fixed_text_and_never_computed_is_left_out_of_what_is_checked() {
    let typed_in = "m = data.mean()\nprint(m)\nprint('The mean is 12.5')";
    let answer = "```python\nm = data.mean()\nprint(m)\nprint('The mean is 12.5')\n```";
    let mut script = Script::new(&[answer, DONE], prints_a_mean);
    let mut state = AgentState::new("print the mean of the data", Vec::new(), 1);
    run(&mut script, &mut state, settings());
    // Not run again (the rest of a block may change data): the review
    // reads it without the guess.
    assert_eq!(script.executed, [typed_in]);
    assert_eq!(script.requests.len(), 2);
    let review = latest(&script.requests[1]);
    assert!(
        review.contains("```python\nm = data.mean()\nprint(m)\n```\nIt printed:\n3.0\n"),
        "{review}"
    );
    // Told of the left-out line and its number, not of its words.
    assert!(
        review.contains("numbers typed in, not computed (12.5). What they said is not done."),
        "{review}"
    );
    assert!(!review.contains("The mean is"), "{review}");
    assert_eq!(state.outcome, Some(Outcome::Complete));
}

#[test]
fn a_block_that_only_prints_a_typed_in_number_is_sent_back_without_a_review() {
    let mut script = Script::new(
        &[
            "```python\nprint('The mean is 12.5')\n```",
            "```python\nprint(f'The mean is {m}')\n```",
            DONE,
        ],
        prints_a_mean,
    );
    let mut state = AgentState::new("print the mean of the data", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    let told = latest(&script.requests[1]);
    assert!(told.contains("12.5 as fixed text"), "{told}");
    assert_eq!(script.requests.len(), 3);
    assert_eq!(state.outcome, Some(Outcome::Complete));
}

#[test]
fn a_table_of_missing_values_is_not_done_without_a_review() {
    fn made(code: &str) -> Execution {
        let hollow = if code.contains("None") {
            ", every value missing"
        } else {
            ""
        };
        Execution {
            changes: vec![format!("result: DataFrame 3x2, columns D, E{hollow} (new)")],
            ..ok(code)
        }
    }
    let mut script = Script::new(
        &[
            "```python\nresult = pivot(lambda v: (None, None))\n```",
            "```python\nresult = pivot(sum)\n```",
            DONE,
        ],
        made,
    );
    let mut state = AgentState::new("make the pivot table", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    let told = latest(&script.requests[1]);
    assert!(
        told.contains("every value in `result` is missing"),
        "{told}"
    );
    assert_eq!(script.requests.len(), 3);
    assert_eq!(state.outcome, Some(Outcome::Complete));
}

#[test]
fn cannot_be_done_with_nothing_failing_gets_one_more_turn() {
    let cannot = r#"{"is_complete": false, "cannot_fix": true, "reasoning": "a warning", "next_action": ""}"#;
    let mut script = Script::new(
        &[
            "```python\nprint(1)\n```",
            cannot,
            "```python\nprint(2)\n```",
            cannot,
        ],
        ok,
    );
    let mut state = AgentState::new("print a number", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    assert_eq!(state.outcome, Some(Outcome::CannotBeDone));
    assert_eq!(state.turn, 2);
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
fn error_recovery_the_failure_reaches_the_next_turn_without_a_review() {
    let mut script = Script::new(
        &[
            "```python\n1/0\n```\n```python\nprint('never')\n```",
            "```python\nprint('fixed')\n```",
            DONE,
        ],
        fails_once,
    );
    let mut state = AgentState::new("divide", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    // The block after the failing one was not run.
    assert_eq!(script.executed, ["1/0", "print('fixed')"]);
    // A failed block is not done: no model is asked, the next turn is
    // told the error.
    let next_turn = &script.requests[1];
    let told: Vec<&str> = next_turn
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert!(
        told.iter().any(|m| m.contains("ZeroDivisionError")),
        "{told:?}"
    );
    // The report names the block by its place in the answer just above it
    // instead of writing the code out a second time for the server to read.
    let written: Vec<_> = told.iter().filter(|m| m.contains("1/0")).collect();
    assert_eq!(written.len(), 1, "{told:?}");
    assert!(
        told.iter()
            .any(|m| m.starts_with("Your block 1 of 2 failed.")),
        "{told:?}"
    );
    assert!(
        matches!(&script.events[..], [_, _, AgentEvent::Verdict(v), ..] if v.reasoning.contains("ZeroDivisionError")),
        "{:?}",
        script.events
    );
    assert_eq!(state.outcome, Some(Outcome::Complete));
    assert_eq!(script.requests.len(), 3);
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
fn a_named_variable_that_exists_is_judged_by_its_value_never_by_existing() {
    let mut script = Script::new(
        &[
            "```python\nprint(3)\n```",
            "```python\ntotal = [1, 2, 3]\n```",
            ONE_VALUE,
            "```python\ntotal = 7\n```",
            NOT_DONE,
            "```python\ntotal = 6\n```",
            DONE,
        ],
        ok,
    );
    let mut state = AgentState::new("Store the sum in `total`.", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    // `total` missing after the first turn: told so, with no review call.
    let last = latest(&script.requests[1]);
    assert!(last.contains("`total` does not exist yet"), "{last}");
    // There after the second, as a list: the model said, before it saw
    // the value, that one value is asked for; code compared the two.
    let asked = latest(&script.requests[2]);
    assert_eq!(asked, "Request: Store the sum in `total`.\nVariable: total");
    assert_eq!(script.requests[2].system, prompts::EXPECTED_FORM);
    let told = latest(&script.requests[3]);
    assert!(
            told.contains("`total` must hold one value for this request, but it holds several (list, 3 items of int)"),
            "{told}"
        );
    // One value: the review sees it beside the request (the form is not
    // asked again), and may still find it wrong.
    let review = latest(&script.requests[4]);
    assert!(
        review.contains("The values the request names, as they are now:\ntotal: int: 7"),
        "{review}"
    );
    assert!(latest(&script.requests[5]).contains("no total yet"));
    // Done only once a review said so, having looked at the value.
    assert_eq!(script.requests.len(), 7);
    assert_eq!(state.outcome, Some(Outcome::Complete));
    assert_eq!(state.checked, ["total: int: 6"]);
    assert_eq!(script.described.len(), 3);
}

#[test]
fn a_value_kept_against_the_form_check_goes_to_the_review_told_of_both() {
    // The model holds to its list, first in the same code, then in other
    // code: not a repeat to stop, a second opinion for the review.
    for second in [
        "```python\ntotal = [1, 2, 3]\n```",
        "```python\nprint(0)\ntotal = [1, 2, 3]\n```",
    ] {
        let mut script = Script::new(
            &["```python\ntotal = [1, 2, 3]\n```", ONE_VALUE, second, DONE],
            ok,
        );
        let mut state = AgentState::new("Store the sums in `total`.", Vec::new(), 5);
        run(&mut script, &mut state, settings());
        assert!(latest(&script.requests[2]).contains("must hold one value"));
        // The form is not asked again; the review reads both sides.
        let review = latest(&script.requests[3]);
        assert!(
            review.contains(
                "A check that read only the request said: `total` must hold one value for this \
                 request, but it holds several (list, 3 items of int). The code kept `total` \
                 as it was."
            ),
            "{review}"
        );
        assert_eq!(script.requests.len(), 4, "{second}");
        assert_eq!(state.outcome, Some(Outcome::Complete));
    }
}

#[test]
fn a_value_changed_after_the_form_check_is_checked_again_and_a_repeat_after_a_review_stops() {
    let mut script = Script::new(
        &[
            "```python\ntotal = [1, 2, 3]\n```",
            ONE_VALUE,
            "```python\ntotal = [1, 2]\n```",
            "```python\ntotal = [1, 2]\n```",
            NOT_DONE,
            "```python\ntotal = [1, 2]\n```",
            "```python\ntotal = [1, 2]\n```",
        ],
        ok,
    );
    let mut state = AgentState::new("Store the sums in `total`.", Vec::new(), 6);
    run(&mut script, &mut state, settings());
    // Another list: the check's own finding again, no review.
    assert!(latest(&script.requests[3]).contains("holds several (list, 2 items"));
    // Kept against it: the review; repeated after the review: told once,
    // then the run stops.
    assert!(latest(&script.requests[4]).contains("The code kept `total` as it was"));
    assert!(latest(&script.requests[6]).contains("same code again"));
    assert_eq!(state.outcome, Some(Outcome::Repeating));
    assert_eq!(script.requests.len(), 7);
}

#[test]
fn a_kind_the_request_states_is_the_form_and_nothing_is_asked() {
    let request = "Find the mean and the spread. Store the answers in a dict named `answers`.";
    let mut script = Script::new(
        &[
            "```python\nanswers = 5\n```",
            "```python\nanswers = {'mean': 4.6, 'std': 1.5}\n```",
            DONE,
        ],
        ok,
    );
    let mut state = AgentState::new(request, Vec::new(), 5);
    run(&mut script, &mut state, settings());
    // One value where the request says a dict: told so without a question.
    let told = latest(&script.requests[1]);
    assert!(
        told.contains("`answers` must hold several values for this request"),
        "{told}"
    );
    // A dict: on to the review, and no call ever asked for the form.
    assert!(latest(&script.requests[2]).contains("The values the request names"));
    assert_eq!(script.requests.len(), 3);
    assert!(
        script
            .requests
            .iter()
            .all(|r| r.system != prompts::EXPECTED_FORM)
    );
    assert_eq!(state.outcome, Some(Outcome::Complete));
}

#[test]
fn a_named_value_missing_where_the_work_changed_a_users_variable_points_at_that() {
    // As the 1.5B coder model did: the column the request wants, added to
    // `df`, where the request asks for `result`.
    let mut script = Script::new(
        &[
            "```python\ndf['first'] = df.groupby('k')['v'].transform('idxmin')\n```",
            "```python\nresult = df.assign(first=df.groupby('k')['v'].transform('idxmin'))\n```",
            CANNOT_TELL,
            DONE,
        ],
        |code| Execution {
            changes: vec![if code.starts_with("df[") {
                "df: DataFrame 5x3, columns k, v, first (changed in place)".to_owned()
            } else {
                "result: DataFrame 5x3, columns k, v, first (new)".to_owned()
            }],
            ..ok(code)
        },
    );
    let mut state = AgentState::new(
        "Add the index of each key's first row to df as a column; store the table in `result`.",
        Vec::new(),
        5,
    );
    state.namespace_at_start = Some("df: DataFrame 5x2, columns k, v".to_owned());
    run(&mut script, &mut state, settings());
    let told = latest(&script.requests[1]);
    assert!(
        told.contains(
            "the code changed `df` instead; assign what the request asks for to `result`"
        ),
        "{told}"
    );
}

#[test]
fn a_done_without_named_values_says_what_the_review_looked_at() {
    let mut script = Script::new(&["```python\nprint(6 * 7)\n```", DONE], |code| Execution {
        output: "42\n".into(),
        ..ok(code)
    });
    let mut state = AgentState::new("What is six times seven?", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    assert_eq!(state.outcome, Some(Outcome::Complete));
    assert_eq!(state.checked, ["the printed output"]);
    assert!(script.described.is_empty(), "no value is named");
}

#[test]
fn a_common_error_goes_back_with_a_hint() {
    let mut script = Script::new(
        &[
            "```python\ntop = sales[sales['qty']]\n```",
            "```python\ntop = 1\n```",
            DONE,
        ],
        |code| Execution {
            output: if code.contains("sales") {
                r#"KeyError: "None of [Index([3, 1], dtype='int64')] are in the [columns]""#
                    .to_owned()
            } else {
                String::new()
            },
            failed: code.contains("sales"),
            ..ok(code)
        },
    );
    let mut state = AgentState::new("Find the top row of sales.", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    let told = latest(&script.requests[1]);
    assert!(told.contains("the code failed (KeyError"), "{told}");
    assert!(told.contains("boolean mask"), "{told}");
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
fn an_answer_cut_off_mid_block_runs_nothing_of_it_and_asks_again() {
    let mut script = Script::new(
        &[
            "```python\nrows = [1, 2,",
            "```python\nrows = [1, 2]\n```",
            DONE,
        ],
        ok,
    );
    script.truncate_first = true;
    let mut state = AgentState::new("make rows", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    assert_eq!(script.executed, ["rows = [1, 2]"]);
    assert!(latest(&script.requests[1]).starts_with(prompts::CUT_OFF));
}

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
fn a_named_result_that_came_out_nan_is_not_done_without_a_review() {
    let mut script = Script::new(
        &[
            "```python\nm = readings.mean()\n```",
            "```python\nm = np.nanmean(readings)\n```",
            CANNOT_TELL,
            DONE,
        ],
        |code| Execution {
            changes: vec![if code.contains("nanmean") {
                "m: float = 3.75 (changed)".to_owned()
            } else {
                "m: float = nan (new)".to_owned()
            }],
            ..ok(code)
        },
    );
    let mut state = AgentState::new("Store the mean of readings in `m`.", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    let told = latest(&script.requests[1]);
    assert!(told.contains("`m` is NaN"), "{told}");
    assert!(told.contains("np.nanmean(a)"), "{told}");
    // NaN is sent back with no review call; the number that follows goes
    // to the form question and the review, which says done.
    assert_eq!(script.requests.len(), 4);
    assert_eq!(state.outcome, Some(Outcome::Complete));
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
            0.46,
            46,
            true,
            "? answered (not confirmed: the review was 46% sure)\n",
        ),
        (0.93, 93, false, "✓ answered\n"),
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
    script.done_likelihoods.push_back(0.9);
    let mut state = AgentState::new("compute", Vec::new(), 5);
    run(&mut script, &mut state, weighing());
    assert_eq!(
        script.requests.iter().filter(|r| r.token_choices).count(),
        1
    );
    assert_eq!(state.verdict.unwrap().confidence, Some(90));
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

#[test]
fn a_value_other_than_the_result_the_request_writes_out_is_not_done_without_a_review() {
    let mut script = Script::new(
        &[
            "```python\ntotal = [1, 2, 4]\n```",
            "```python\ntotal = [1, 2, 3]\n```",
        ],
        ok,
    );
    script
        .written
        .push_back(vec![WrittenResult::Differs(Difference {
            name: "total".into(),
            written: "[1, 2, 3]".into(),
            value: "[1, 2, 4]".into(),
            differs_in: "Item 3 is the first that differs.".into(),
        })]);
    script
        .written
        .push_back(vec![WrittenResult::Matches(AsWritten {
            name: "total".into(),
            on_example: false,
        })]);
    let mut state = AgentState::new(
        "Store the running sums of a in `total`; they should be [1, 2, 3].",
        Vec::new(),
        5,
    );
    run(&mut script, &mut state, settings());
    // The comparison, before any question to the model: not done, where
    // they differ first, then both printed, and no review asked.
    let told = latest(&script.requests[1]);
    assert!(
        told.contains(
            "`total` is not the result the request writes out for this data. \
             Item 3 is the first that differs.\nNext step: the request shows"
        ) && told.contains(
            "the request shows the result it expects:\n[1, 2, 3]\n`total` holds:\n[1, 2, 4]"
        ),
        "{told}"
    );
    // The second turn's value is the written result: done, with no review
    // left to ask, and the summary line says what was compared.
    assert_eq!(script.requests.len(), 2);
    assert_eq!(state.outcome, Some(Outcome::Complete));
    assert_eq!(
        state.checked.first().map(String::as_str),
        Some("total is the result the request writes out")
    );
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
