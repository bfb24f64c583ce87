//! Other solutions of a turn's request, tried beside its own (see
//! `candidates.py`): the default graph's `others` node samples a few more
//! answers to the prompt its code came from and runs them on scratch copies
//! before its own code runs; its review compares the values the request
//! names. Another answer with as many solutions behind it means the turn
//! is not done, and the model is shown both values and the other's code;
//! otherwise the review is told how many agreed (agreement alone is never
//! "done": a small model's samples agree on wrong values too).

use super::steps::NodeSettings;
use crate::agent::llm::Role;
use crate::agent::parse::checks;
use crate::agent::parse::code::code_blocks;
use crate::agent::prompts;
use crate::agent::run::{
    AgentError, AgentState, Agreement, Consensus, Effects, OtherSolutions, TriedFrom, Verdict,
};

/// The values other solutions of the request would be compared on, when
/// they are worth trying beside the turn's `answer` (it has code that will
/// run): those the request names to store into, else the names the
/// request mentions that the answer's code assigns (`result = ...  # put
/// solution in this variable`).
pub(super) fn names_to_compare(
    state: &AgentState,
    settings: &NodeSettings,
    answer: &str,
) -> Option<Vec<String>> {
    if settings.candidates == 0 || !settings.execute || settings.once {
        return None;
    }
    let blocks = code_blocks(answer);
    if blocks.is_empty() {
        return None;
    }
    let named = checks::targets(&state.request).names;
    if !named.is_empty() {
        return Some(named);
    }
    let codes: Vec<&str> = blocks.iter().map(|b| b.code.as_str()).collect();
    let mentioned = compared_names(&state.request, &codes);
    (!mentioned.is_empty()).then_some(mentioned)
}

/// The names `request` mentions that `codes` assign, in order, once each:
/// what solutions of a request that names no value to store are compared
/// on (`result = ...  # put solution in this variable`).
pub(super) fn compared_names(request: &str, codes: &[&str]) -> Vec<String> {
    codes
        .iter()
        .flat_map(|code| assigned_names(code))
        .filter(|name| checks::mentions(request, name))
        .fold(Vec::new(), |mut names, name| {
            if !names.contains(&name) {
                names.push(name);
            }
            names
        })
}

/// The names `code` assigns at its top level (`name = ...`, not `==`).
fn assigned_names(code: &str) -> impl Iterator<Item = String> + '_ {
    code.lines().filter_map(|line| {
        let (name, rest) = line.split_once('=')?;
        let name = name.trim_end();
        let plain = !name.is_empty()
            && !name.starts_with(char::is_whitespace)
            && checks::is_identifier(name)
            && !name.starts_with('_');
        (plain && !rest.starts_with('=')).then(|| name.to_owned())
    })
}

/// Samples other answers to the prompt the turn's answer came from
/// (`system` and the conversation before that answer) and runs their code
/// on scratch copies, before the turn's own code runs.
pub(super) async fn try_other_solutions<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: &NodeSettings,
    system: String,
) -> Result<(), AgentError> {
    let Some(names) = names_to_compare(state, settings, &state.answer) else {
        return Ok(());
    };
    // Asked as the turn's answer was: without it.
    let answer = match state.conversation.last() {
        Some(last) if last.role == Role::Assistant => state.conversation.pop(),
        _ => None,
    };
    let codes = settings
        .other_solutions(state, effects, &system, settings.candidates)
        .await;
    state.conversation.extend(answer);
    let codes = codes?;
    let own: Vec<&str> = state.pending.iter().map(|b| b.code.as_str()).collect();
    let outcomes = if codes.is_empty() {
        Vec::new()
    } else {
        effects
            .try_candidates(&codes, &own.join("\n\n"), TriedFrom::TurnStart)
            .await?
    };
    tracing::debug!(
        "%%ask: {} other solutions, tried: {outcomes:?}",
        codes.len()
    );
    let tried = !outcomes.is_empty();
    state.other_solutions = Some(OtherSolutions {
        codes,
        names,
        tried,
    });
    Ok(())
}

/// The other solutions tried beside a turn's own, and how they compare.
pub(super) struct Solutions {
    pub agreement: Agreement,
    /// Each one's code (solution `i` is `codes[i - 1]`; 0 is the turn's).
    codes: Vec<String>,
}

/// How the turn's own solution compares with the other solutions tried
/// beside it, when any were (they are let go either way).
pub(super) async fn compare_solutions<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
) -> Option<Solutions> {
    let others = state.other_solutions.take().filter(|o| o.tried)?;
    let agreement = effects.compare_candidates(&others.names).await;
    tracing::debug!(
        "%%ask: solutions on {:?}: {:?}",
        others.names,
        agreement.groups
    );
    Some(Solutions {
        agreement,
        codes: others.codes,
    })
}

/// When another answer has at least as many solutions behind it as the
/// turn's own: not done, and what the model is told (both values and the
/// other's code).
pub(super) fn dispute(solutions: &Solutions) -> Option<(Verdict, String)> {
    let Solutions { agreement, codes } = solutions;
    let Consensus::Disputed { rival, agree, of } = agreement.consensus() else {
        return None;
    };
    let rival_code = codes.get(rival.checked_sub(1)?)?;
    let rivals = agreement
        .groups
        .iter()
        .find(|g| g.contains(&rival))
        .map_or(1, Vec::len);
    let value = |i: usize| agreement.values.get(i).map_or("", String::as_str);
    let verdict = Verdict::not_done(
        format!(
            "{} of {of} solutions written independently computed other values than this one ({agree} did the same)",
            of - agree
        ),
        "find out which values are right",
    );
    Some((
        verdict,
        prompts::disputed(value(0), rival_code, value(rival), rivals),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::graphs::default_graph;
    use crate::agent::llm::Sampling;
    use crate::agent::run::Outcome;
    use crate::agent::script::{Script, latest, ok};

    const ONE_VALUE: &str = r#"{"form": "one number"}"#;
    const DONE: &str = r#"{"is_complete": true, "reasoning": "answered", "next_action": ""}"#;
    const REQUEST: &str = "Store the number of rows in `n`.";

    /// As the local model answers: the likeliest answer, repeatably.
    const LIKELIEST: Sampling = Sampling {
        temperature: Some(0.0),
        seed: Some(0),
    };

    fn settings() -> NodeSettings {
        NodeSettings {
            candidates: 2,
            sampling: LIKELIEST,
            ..NodeSettings::for_tests()
        }
    }

    /// A turn's answer `n = 3` and two others (the last written `third`),
    /// all computing 3, then the form and the review passing.
    fn three_agreeing(third: &'static str) -> Script {
        let mut script = Script::new(
            &[
                "```python\nn = 3\n```",
                "```python\nn = 1 + 2\n```",
                third,
                ONE_VALUE,
                DONE,
            ],
            ok,
        );
        script
            .agreements
            .push_back(agreement(&[&[0, 1, 2]], &["n: int = 3"; 3]));
        script
    }

    fn run(script: &mut Script, state: &mut AgentState) {
        run_with(settings(), script, state);
    }

    fn run_with(settings: NodeSettings, script: &mut Script, state: &mut AgentState) {
        let graph = default_graph::<Script>(settings, state.max_turns);
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(graph.run(state, script))
            .unwrap();
    }

    fn agreement(groups: &[&[usize]], values: &[&str]) -> Agreement {
        Agreement {
            groups: groups.iter().map(|g| g.to_vec()).collect(),
            values: values.iter().map(|v| (*v).to_owned()).collect(),
            described: Vec::new(),
        }
    }

    #[test]
    fn consensus_weighs_the_turns_own_group_against_the_largest_other() {
        let of = |groups: &[&[usize]]| agreement(groups, &[]).consensus();
        assert_eq!(of(&[&[0]]), Consensus::Alone);
        assert_eq!(of(&[]), Consensus::Alone);
        assert_eq!(of(&[&[1, 2]]), Consensus::Alone, "its own computed nothing");
        assert_eq!(of(&[&[0, 1, 2]]), Consensus::Unanimous { of: 3 });
        assert_eq!(
            of(&[&[0, 2], &[1]]),
            Consensus::Majority { agree: 2, of: 3 }
        );
        let disputed = Consensus::Disputed {
            rival: 1,
            agree: 1,
            of: 3,
        };
        assert_eq!(of(&[&[1, 2], &[0]]), disputed);
        assert_eq!(
            of(&[&[0], &[2]]),
            Consensus::Disputed {
                rival: 2,
                agree: 1,
                of: 2
            }
        );
    }

    #[test]
    fn every_solution_agreeing_still_goes_to_the_review() {
        let mut script = three_agreeing("Counting:\n```python\nn = 3\n```");
        let mut state = AgentState::new(REQUEST, Vec::new(), 5);
        run(&mut script, &mut state);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        // The others were sampled hidden from the same prompt, at another
        // temperature and seed each, and tried before the turn's own ran.
        assert_eq!(script.tried, [vec!["n = 1 + 2", "n = 3"]]);
        assert_eq!(
            script.requests.len(),
            5,
            "answer, two others, the form, the review"
        );
        let review = latest(&script.requests[4]);
        assert!(review.contains("3 computed these same values"), "{review}");
        // The same messages, the last one asking for the code alone.
        let (own, other) = (&script.requests[0].messages, &script.requests[1].messages);
        assert_eq!(own.len(), other.len());
        assert_eq!(own[..own.len() - 1], other[..other.len() - 1]);
        let asked = &other.last().unwrap().content;
        assert_eq!(asked, &format!("{REQUEST}{}", prompts::CODE_ONLY));
        assert_eq!(script.requests[1].stop, ["\n```\n"]);
        let seeds: Vec<_> = script.requests[..3].iter().map(|r| r.sampling).collect();
        assert!(seeds[1] != seeds[0] && seeds[2] != seeds[1], "{seeds:?}");
        assert!(seeds[1].temperature > LIKELIEST.temperature, "{seeds:?}");
        assert_eq!(script.executed, ["n = 3"]);
        assert!(
            state
                .checked
                .contains(&"the same in 3 of 3 solutions written independently".to_owned()),
            "{:?}",
            state.checked
        );
    }

    #[test]
    fn another_answer_with_more_solutions_behind_it_is_not_done_and_shown() {
        let mut script = Script::new(
            &[
                "```python\nn = 4 - 2\n```",
                "```python\nn = 3\n```",
                "```python\nn = 1 + 2\n```",
                "```python\nn = 3\n```",
                "```python\nn = 3\n```",
                "```python\nn = 2 + 1\n```",
                ONE_VALUE,
                DONE,
            ],
            ok,
        );
        script.agreements.push_back(agreement(
            &[&[1, 2], &[0]],
            &["n: int = 2", "n: int = 3", "n: int = 3"],
        ));
        script
            .agreements
            .push_back(agreement(&[&[0, 1, 2]], &["n: int = 3"; 3]));
        let mut state = AgentState::new(REQUEST, Vec::new(), 5);
        run(&mut script, &mut state);
        // No review and no form question on the first turn: the dispute
        // settles it; the model sees both values and the other code.
        let told = latest(&script.requests[3]);
        assert!(told.contains("2 other solutions"), "{told}");
        assert!(told.contains("n: int = 2"), "{told}");
        assert!(told.contains("```python\nn = 3\n```"), "{told}");
        assert!(told.contains("n: int = 3"), "{told}");
        assert_eq!(state.outcome, Some(Outcome::Complete));
        assert_eq!(script.executed, ["n = 4 - 2", "n = 3"]);
        assert_eq!(script.tried.len(), 2);
    }

    #[test]
    fn a_provider_left_at_its_own_sampling_keeps_it_for_other_solutions() {
        let mut script = three_agreeing("```python\nn = 3\n```");
        let mut state = AgentState::new(REQUEST, Vec::new(), 5);
        let own_default = NodeSettings {
            sampling: Sampling::default(),
            ..settings()
        };
        run_with(own_default, &mut script, &mut state);
        // Reasoning models refuse any temperature but their own.
        assert_eq!(script.tried.len(), 1);
        assert!(
            script
                .requests
                .iter()
                .all(|r| r.sampling == Sampling::default())
        );
    }

    #[test]
    fn a_majority_for_the_turns_own_goes_to_the_review_with_the_count() {
        let mut script = Script::new(
            &[
                "```python\nn = 3\n```",
                "```python\nn = 3\n```",
                "```python\nn = 4\n```",
                ONE_VALUE,
                DONE,
            ],
            ok,
        );
        script
            .agreements
            .push_back(agreement(&[&[0, 1], &[2]], &["n = 3", "n = 3", "n = 4"]));
        let mut state = AgentState::new(REQUEST, Vec::new(), 5);
        run(&mut script, &mut state);
        assert_eq!(state.outcome, Some(Outcome::Complete));
        let review = latest(&script.requests[4]);
        assert!(
            review.contains("Of 3 solutions of this request written independently, 2 computed"),
            "{review}"
        );
    }

    #[test]
    fn a_dispute_on_the_last_turn_is_not_done() {
        let mut script = Script::new(
            &[
                "```python\nn = 2\n```",
                "```python\nn = 3\n```",
                "```python\nn = 4\n```",
            ],
            ok,
        );
        script
            .agreements
            .push_back(agreement(&[&[0], &[1], &[2]], &["n = 2", "n = 3", "n = 4"]));
        let mut state = AgentState::new(REQUEST, Vec::new(), 1);
        run(&mut script, &mut state);
        assert_eq!(state.outcome, Some(Outcome::MaxTurns));
    }

    #[test]
    fn values_are_compared_by_the_names_the_request_gives_them() {
        let state = |request: &str| AgentState::new(request, Vec::new(), 5);
        let answer = "```python\ndef g(df):\n    total = 1\n    return df\n\nresult = g(df.copy())\nok == 1\ndf['a'] = 2\n```";
        let placeholder = "Drop the empty rows.\n\nresult = ... # put solution in this variable";
        let names = |request: &str, settings: &NodeSettings| {
            names_to_compare(&state(request), settings, answer)
        };
        assert_eq!(
            names(placeholder, &settings()),
            Some(vec!["result".to_owned()])
        );
        assert_eq!(
            names("Store the cleaned table in `clean`.", &settings()),
            Some(vec!["clean".to_owned()])
        );
        // "result" as part of a longer word is no mention; neither is a
        // request with no code to run, nor one answered --once.
        assert_eq!(names("Show the results of df.", &settings()), None);
        let once = NodeSettings {
            once: true,
            ..settings()
        };
        assert_eq!(names(placeholder, &once), None);
        assert_eq!(
            names_to_compare(&state(placeholder), &settings(), "No code."),
            None
        );
    }

    #[test]
    fn no_other_solutions_for_a_request_that_names_no_value() {
        let mut script = Script::new(&["```python\nprint(len(df))\n```", DONE], ok);
        let mut state = AgentState::new("How many rows does df have?", Vec::new(), 5);
        run(&mut script, &mut state);
        assert!(script.tried.is_empty());
        assert_eq!(script.requests.len(), 2);
    }
}
