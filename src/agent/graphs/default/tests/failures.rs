//! Failed blocks in the default graph: the error and its hint go back to
//! the model, a file or library nobody asked for, an answer cut off, a
//! review that finds the request impossible.

use super::*;

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
fn an_answer_cut_off_mid_block_runs_nothing_of_it_and_asks_again() {
    let mut script = Script::new(
        &[
            "```python\nrows = [1, 2,",
            "```python\nrows = [1, 2]\n```",
            DONE,
        ],
        ok,
    );
    script.truncate_at = Some(0);
    let mut state = AgentState::new("make rows", Vec::new(), 5);
    run(&mut script, &mut state, settings());
    assert_eq!(script.executed, ["rows = [1, 2]"]);
    assert!(latest(&script.requests[1]).starts_with(prompts::CUT_OFF));
}
