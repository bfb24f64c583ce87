//! A solution written afresh for a run that repeats itself against a
//! result checked by code: where the check found a value the request names
//! is not the result the request writes out (for this data or for its
//! example), and the model then sends the same code back, a small model
//! told so writes it once more nearly every time. Solutions of the request
//! are sampled instead from the request alone (as the cross-check's are,
//! with seeds of their own), tried on copies of the namespace as it was
//! before the run, and the first of the largest group that computed other
//! values than the run's runs as the next turn, on the user's variables as
//! the run found them, for the same check to judge. Only there: a
//! comparison by code cannot take a plausible wrong value for the written
//! one, as a review can. Once a run.

use super::cross_check::{back_to_the_request, without_ruled_out};
use super::steps::{NodeSettings, code_prompt};
use crate::agent::parse::checks;
use crate::agent::run::{AgentError, AgentState, CandidateOutcome, Effects, TriedFrom};

/// How many solutions are written afresh when the settings ask for no
/// cross-check to size it by.
const AT_LEAST: u32 = 2;

/// The code of a solution written afresh that computes other values than
/// the run's, where the run's last check missed the written result and no
/// solution was written afresh before; None otherwise (and where none
/// computed other values, or the provider failed).
pub(super) async fn fresh_solution<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: &NodeSettings,
) -> Result<Option<String>, AgentError> {
    if !state.missed_written_result
        || state.ran_fresh_solution
        || !settings.execute
        || settings.once
    {
        return Ok(None);
    }
    state.ran_fresh_solution = true;
    let names = checks::targets(&state.request).names;
    let own = state.codes_that_ran();
    if names.is_empty() || own.is_empty() {
        return Ok(None);
    }
    let own = own.join("\n\n");
    let system = code_prompt(state, effects).await;
    let later = back_to_the_request(state);
    let count = settings.cross_checks.max(AT_LEAST);
    let written = settings
        .fresh_solutions(state, effects, &system, count)
        .await;
    state.conversation.extend(later);
    let codes = match written {
        Ok(codes) => codes,
        Err(AgentError::Llm(e)) => {
            tracing::warn!("%%ask: no solution written afresh: {e}");
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    if codes.is_empty() {
        return Ok(None);
    }
    let outcomes = effects
        .try_candidates(&codes, &own, TriedFrom::RunStart)
        .await?;
    if !outcomes.contains(&CandidateOutcome::Ran) {
        return Ok(None);
    }
    let agreement = effects.compare_candidates(&names).await;
    tracing::debug!(
        "%%ask: solutions written afresh on {names:?}: {:?}",
        agreement.groups
    );
    // One of a form the check ruled out would only be sent back.
    let agreement = without_ruled_out(agreement, &state.expected_forms);
    let other = agreement
        .groups
        .iter()
        .filter(|group| !group.contains(&0))
        .max_by_key(|group| (group.len(), std::cmp::Reverse(group[0])))
        .and_then(|group| codes.get(group[0].checked_sub(1)?).cloned());
    if other.is_some() {
        // It computed its value from the data as the run found it: the
        // user's variables the run rebound are put back first (a change
        // in place stays; the comparison then judges what it makes).
        let user_names = checks::summary_names(state.namespace_at_start.as_deref().unwrap_or(""));
        effects.restore(&user_names).await;
    }
    Ok(other)
}
