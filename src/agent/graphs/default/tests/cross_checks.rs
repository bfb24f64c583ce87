//! A judged "done" compared with solutions of the request written
//! independently: sampled from the request alone, tried on the namespace as
//! it was before the run, and confirming or not by what they computed.

use super::*;
use crate::agent::run::{Agreement, CandidateOutcome, CrossCheck, TriedFrom};

const REQUEST: &str = "Store the number of rows in `n`.";

fn cross_checking() -> NodeSettings {
    NodeSettings {
        cross_checks: 2,
        ..settings()
    }
}

fn agreement(groups: &[&[usize]]) -> Agreement {
    Agreement {
        groups: groups.iter().map(|g| g.to_vec()).collect(),
        values: Vec::new(),
        described: Vec::new(),
    }
}

/// A run sent back once, then passed, then two other solutions written and
/// compared as `groups` say.
fn passed_then_compared(groups: &[&[usize]]) -> (Script, AgentState) {
    let mut script = Script::new(
        &[
            "```python\nn = 2\n```",
            ONE_VALUE,
            NOT_DONE,
            "```python\nn = 3\n```",
            DONE,
            "```python\nn = 1 + 2\n```",
            "Counting:\n```python\nn = len(rows)\n```",
        ],
        ok,
    );
    script.agreements.push_back(agreement(groups));
    let mut state = AgentState::new(REQUEST, Vec::new(), 5);
    run(&mut script, &mut state, cross_checking());
    (script, state)
}

fn verdict_line(script: &Script) -> String {
    let line = script.events.iter().find_map(|e| match e {
        AgentEvent::Verdict(v) if v.is_complete => {
            Some(crate::agent::render::event(e).content()["text"].clone())
        }
        _ => None,
    });
    line.and_then(|l| l.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[test]
fn another_solution_computing_the_same_confirms_the_done() {
    let (script, state) = passed_then_compared(&[&[0, 1], &[2]]);
    assert_eq!(state.outcome, Some(Outcome::Complete));
    let verdict = state.verdict.clone().unwrap();
    assert_eq!(
        verdict.cross_check,
        Some(CrossCheck::Agreed { agree: 2, of: 3 })
    );
    assert!(!verdict.unconfirmed());
    assert!(
        state
            .checked
            .contains(&"the same in 2 of 3 solutions written independently".to_owned()),
        "{:?}",
        state.checked
    );
    assert_eq!(script.tried, [vec!["n = 1 + 2", "n = len(rows)"]]);
    assert_eq!(script.tried_from, [TriedFrom::RunStart]);
    // Asked as the first answer was, the request alone (not the turn sent
    // back, nor what the model was told), hidden, at another temperature.
    let first = &script.requests[0];
    for other in &script.requests[5..7] {
        assert_eq!(other.system, first.system);
        assert_eq!(other.messages.len(), 1, "{:?}", other.messages);
        assert_eq!(latest(other), format!("{REQUEST}{}", prompts::CODE_ONLY));
    }
    assert_eq!(script.requests.len(), 7);
    assert_eq!(
        script.executed,
        ["n = 2", "n = 3"],
        "only the run's own ran"
    );
    // The conversation the next request continues is the run's, whole.
    assert_eq!(state.conversation[0].content, REQUEST);
    assert!(
        state
            .conversation
            .iter()
            .any(|m| m.content.contains("n = 3"))
    );
}

#[test]
fn every_other_solution_computing_otherwise_leaves_the_done_unconfirmed() {
    let (script, mut state) = passed_then_compared(&[&[1, 2], &[0]]);
    assert_eq!(state.outcome, Some(Outcome::Complete));
    let verdict = state.verdict.clone().unwrap();
    assert_eq!(verdict.cross_check, Some(CrossCheck::Differed { of: 3 }));
    assert!(verdict.unconfirmed() && !verdict.judge_unsure());
    assert_eq!(
        verdict_line(&script),
        "? answered (not confirmed: 2 other solutions written independently computed other values)\n"
    );
    // As the session ends it.
    state.outcome = Some(Outcome::Unconfirmed);
    let ending = crate::agent::render::ending(&state, RunEnd::Finished { steps: 9 });
    assert_eq!(
        ending,
        "answered, not confirmed · the review passed it but 2 other solutions written independently computed other values"
    );
}

#[test]
fn nothing_to_compare_leaves_the_done_as_the_review_gave_it() {
    // Neither other solution computed `n`.
    let (_, state) = passed_then_compared(&[&[0]]);
    let verdict = state.verdict.unwrap();
    assert_eq!(verdict.cross_check, None);
    assert!(!verdict.unconfirmed());
    assert!(!state.checked.iter().any(|c| c.contains("independently")));
}

#[test]
fn no_cross_check_where_the_review_is_unsure_or_nothing_is_named() {
    // The judge unsure: not confirmed already, nothing sampled.
    let mut script = Script::new(&["```python\nn = 3\n```", ONE_VALUE, DONE], ok);
    script.done_likelihoods.push_back(Some(0.5));
    let mut state = AgentState::new(REQUEST, Vec::new(), 5);
    let unsure = NodeSettings {
        token_choices: true,
        ..cross_checking()
    };
    run(&mut script, &mut state, unsure);
    assert!(state.verdict.unwrap().judge_unsure());
    assert!(script.tried.is_empty());
    assert_eq!(
        script.requests.len(),
        4,
        "answer, form, review, verdict alone"
    );
    // A request that names no value, code that stores nothing it mentions.
    let mut script = Script::new(&["```python\nprint(len(df))\n```", DONE], ok);
    let mut state = AgentState::new("How many rows does df have?", Vec::new(), 5);
    run(&mut script, &mut state, cross_checking());
    assert_eq!(state.outcome, Some(Outcome::Complete));
    assert!(script.tried.is_empty());
    assert_eq!(script.requests.len(), 2);
}

/// (A placeholder is a value the request names, as one it asks to store.)
#[test]
fn a_placeholder_the_request_ends_with_is_compared() {
    let request = "Drop the empty rows of df.\n\nresult = ... # put solution in this variable";
    let mut script = Script::new(
        &[
            "```python\nresult = df.dropna()\n```",
            CANNOT_TELL,
            DONE,
            "```python\nresult = df.dropna(how='all')\n```",
            "```python\nresult = df[df.notna().all(axis=1)]\n```",
        ],
        ok,
    );
    script.agreements.push_back(agreement(&[&[0, 2], &[1]]));
    let mut state = AgentState::new(request, Vec::new(), 5);
    run(&mut script, &mut state, cross_checking());
    assert_eq!(script.tried.len(), 1);
    assert_eq!(
        state.verdict.unwrap().cross_check,
        Some(CrossCheck::Agreed { agree: 2, of: 3 })
    );
}

#[test]
fn other_solutions_of_a_form_the_check_ruled_out_count_neither_way() {
    // The run's total passed the form check (one value); both other
    // solutions made a per-row Series, as a first try often does.
    let series = "revenue: Series, shape (4,), dtype float64, min 1.5, max 4.0";
    let total = "revenue: int: 10";
    let request = "Store the total revenue of sales in `revenue`.";
    let compared = |others: [&str; 2], groups: &[&[usize]]| {
        let mut script = Script::new(
            &[
                "```python\nrevenue = 10\n```",
                ONE_VALUE,
                DONE,
                "```python\nrevenue = sales.price * sales.qty\n```",
                "```python\nrevenue = (sales.price * sales.qty).sum()\n```",
            ],
            ok,
        );
        let mut agreement = agreement(groups);
        agreement.described = [total, others[0], others[1]]
            .iter()
            .map(|d| vec![("revenue".to_owned(), (*d).to_owned())])
            .collect();
        script.agreements.push_back(agreement);
        let mut state = AgentState::new(request, Vec::new(), 5);
        run(&mut script, &mut state, cross_checking());
        state.verdict.unwrap().cross_check
    };
    assert_eq!(compared([series, series], &[&[1, 2], &[0]]), None);
    // One of a form the request allows still counts.
    let other_total = "revenue: float64: np.float64(12.0)";
    assert_eq!(
        compared([series, other_total], &[&[0], &[1], &[2]]),
        Some(CrossCheck::Differed { of: 2 })
    );
    assert_eq!(
        compared([series, total], &[&[0, 2], &[1]]),
        Some(CrossCheck::Agreed { agree: 2, of: 2 })
    );
}

#[test]
fn another_solution_that_raised_has_one_try_at_mending_its_error() {
    let raised = "line 1: `n = len(rows)`\nNameError: name 'rows' is not defined";
    let mut script = Script::new(
        &[
            "```python\nn = 3\n```",
            ONE_VALUE,
            DONE,
            "```python\nn = 1 + 2\n```",
            "```python\nn = len(rows)\n```",
            "```python\nrows = load()\nn = len(rows)\n```",
        ],
        ok,
    );
    script.outcomes.push_back(vec![
        CandidateOutcome::Ran,
        CandidateOutcome::Raised {
            error: raised.to_owned(),
            code: "n = len(rows)".to_owned(),
        },
    ]);
    script.agreements.push_back(agreement(&[&[0, 1, 2]]));
    let mut state = AgentState::new(REQUEST, Vec::new(), 5);
    run(&mut script, &mut state, cross_checking());
    assert_eq!(
        state.verdict.unwrap().cross_check,
        Some(CrossCheck::Agreed { agree: 3, of: 3 })
    );
    // Tried again, all of them, the mended one in place of its first try.
    assert_eq!(
        script.tried,
        [
            vec!["n = 1 + 2", "n = len(rows)"],
            vec!["n = 1 + 2", "rows = load()\nn = len(rows)"],
        ]
    );
    // Asked as it was, with its own code and error only: not the run's.
    let mend = &script.requests[5];
    assert_eq!(mend.system, script.requests[0].system);
    let said: Vec<&str> = mend.messages.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(said.len(), 2, "{said:?}");
    assert_eq!(said[0], REQUEST);
    assert_eq!(
        said[1],
        format!(
            "{}{}",
            prompts::mend_solution(
                "n = len(rows)",
                raised,
                Some(
                    "define or import the name in the same block; the namespace above lists what exists"
                )
            ),
            prompts::CODE_ONLY
        )
    );
    assert_eq!(script.requests.len(), 6);
    assert_eq!(script.executed, ["n = 3"], "only the run's own ran");
}

#[test]
fn no_mending_where_no_other_solution_raised_and_nothing_compared_where_none_ran() {
    // One not tried (it writes files), one ran: nothing to mend.
    let mut script = Script::new(
        &[
            "```python\nn = 3\n```",
            ONE_VALUE,
            DONE,
            "```python\nn = 3\n```",
            "```python\nrows.to_csv('r.csv')\nn = 3\n```",
        ],
        ok,
    );
    script.outcomes.push_back(vec![
        CandidateOutcome::Ran,
        CandidateOutcome::NotTried("it writes files".to_owned()),
    ]);
    script.agreements.push_back(agreement(&[&[0, 1]]));
    let mut state = AgentState::new(REQUEST, Vec::new(), 5);
    run(&mut script, &mut state, cross_checking());
    assert_eq!(script.tried.len(), 1);
    assert_eq!(script.requests.len(), 5);
    assert_eq!(
        state.verdict.unwrap().cross_check,
        Some(CrossCheck::Agreed { agree: 2, of: 2 })
    );
    // Both raised, and the mended ones raised again: nothing compared, the
    // review's "done" stands as it was.
    let raised = |code: &str| CandidateOutcome::Raised {
        error: "ZeroDivisionError: division by zero".to_owned(),
        code: code.to_owned(),
    };
    let mut script = Script::new(
        &[
            "```python\nn = 3\n```",
            ONE_VALUE,
            DONE,
            "```python\nn = 1 / 0\n```",
            "```python\nn = 2 / 0\n```",
            "```python\nn = 1 / 0 + 2\n```",
            "No code this time.",
        ],
        ok,
    );
    script
        .outcomes
        .push_back(vec![raised("n = 1 / 0"), raised("n = 2 / 0")]);
    script
        .outcomes
        .push_back(vec![raised("n = 1 / 0 + 2"), raised("n = 2 / 0")]);
    script.agreements.push_back(agreement(&[&[0, 1]]));
    let mut state = AgentState::new(REQUEST, Vec::new(), 5);
    run(&mut script, &mut state, cross_checking());
    assert_eq!(
        script.tried,
        [
            vec!["n = 1 / 0", "n = 2 / 0"],
            vec!["n = 1 / 0 + 2", "n = 2 / 0"],
        ]
    );
    let verdict = state.verdict.unwrap();
    assert_eq!(verdict.cross_check, None);
    assert_eq!(state.outcome, Some(Outcome::Complete));
    assert_eq!(script.agreements.len(), 1, "not compared");
}

#[test]
fn a_mend_is_told_what_its_error_usually_means() {
    // A dict filled before anything made it: the error alone says only
    // that the name is not defined.
    let raised = "line 1: `answers['n'] = 3`\nNameError: name 'answers' is not defined";
    let mut script = Script::new(
        &[
            "```python\nn = 3\n```",
            ONE_VALUE,
            DONE,
            "```python\nanswers['n'] = 3\nn = answers['n']\n```",
            "```python\nn = 3\n```",
            "```python\nanswers = {'n': 3}\nn = answers['n']\n```",
        ],
        ok,
    );
    // As a known fix left it (`answers` filled before it was made).
    script.outcomes.push_back(vec![
        CandidateOutcome::Raised {
            error: raised.to_owned(),
            code: "import math\nanswers['n'] = 3".to_owned(),
        },
        CandidateOutcome::Ran,
    ]);
    let mut state = AgentState::new(REQUEST, Vec::new(), 5);
    run(&mut script, &mut state, cross_checking());
    let told = latest(&script.requests[5]);
    assert!(told.contains(raised), "{told}");
    assert!(told.contains("import math\nanswers['n'] = 3"), "{told}");
    assert!(
        told.contains("Hint: the code puts items into answers, but nothing made answers"),
        "{told}"
    );
}
