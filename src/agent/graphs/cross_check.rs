//! A judged "done" compared with solutions written independently: once the
//! review passes work on values the request names, a few more solutions of
//! the request are sampled from its first prompt (the request alone, not
//! the run's conversation: neither the run's mistakes nor what it was told
//! about them), run on copies of the namespace as it was before the run
//! (one that raises gets the known fixes, then one try at correcting its
//! error), and their values compared with the run's by code. Another
//! solution that computed the same values confirms the "done"; when every
//! other one that computed them computed others, the run ends "answered,
//! not confirmed".
//! One whose value has a form the run's check ruled out counts neither way.
//! Unlike the review, this check can fail on the value itself, without the
//! knowledge a small judge lacks.

use super::solutions::compared_names;
use super::steps::{NodeSettings, code_prompt};
use crate::agent::llm::ChatMessage;
use crate::agent::parse::form;
use crate::agent::run::{
    AgentError, AgentState, Agreement, CandidateOutcome, CrossCheck, Effects, Expected, TriedFrom,
};

/// How the values of the run's work (the request's `named` values, or
/// failing those the names it mentions that the code assigned) compare with
/// `settings.cross_checks` solutions of the request written independently;
/// None where nothing could be compared.
pub(super) async fn cross_check<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: &NodeSettings,
    named: &[String],
) -> Result<Option<CrossCheck>, AgentError> {
    if settings.cross_checks == 0 || !settings.execute || settings.once {
        return Ok(None);
    }
    let own = state.codes_that_ran();
    let names = if named.is_empty() {
        compared_names(&state.request, &own)
    } else {
        named.to_vec()
    };
    if own.is_empty() || names.is_empty() {
        return Ok(None);
    }
    let own = own.join("\n\n");
    let system = code_prompt(state, effects).await;
    let later = back_to_the_request(state);
    let tried = solutions_tried(state, effects, settings, &system, &own).await;
    state.conversation.extend(later);
    // The review's "done" stands as it was when the provider fails here.
    let outcomes = match tried {
        Ok(outcomes) => outcomes,
        Err(AgentError::Llm(e)) => {
            tracing::warn!("%%ask: no cross-check of the done: {e}");
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    if !outcomes.contains(&CandidateOutcome::Ran) {
        return Ok(None);
    }
    let agreement = effects.compare_candidates(&names).await;
    tracing::debug!(
        "%%ask: cross-check on {names:?}: {:?} of {:#?}",
        agreement.groups,
        agreement.values
    );
    let agreement = without_ruled_out(agreement, &state.expected_forms);
    Ok(CrossCheck::from_agreement(&agreement))
}

/// The conversation cut back to the request (as the run's first answer was
/// asked: neither the run's mistakes nor what it was told about them), and
/// what was cut, to put back after.
pub(super) fn back_to_the_request(state: &mut AgentState) -> Vec<ChatMessage> {
    let asked = (state.request_at + 1).min(state.conversation.len());
    state.conversation.split_off(asked)
}

/// `settings.cross_checks` solutions sampled for the conversation as it is
/// and tried on copies of the namespace as it was before the run (`own`:
/// the run's code), each that raised given one try at mending its error:
/// how each went, the mended ones in place of the first tries (nothing where
/// no answer had code). A small model's first try often fails on what one
/// look at its error mends (a file never loaded, a guessed column), which
/// would leave the run with nothing to compare.
async fn solutions_tried<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: &NodeSettings,
    system: &str,
    own: &str,
) -> Result<Vec<CandidateOutcome>, AgentError> {
    let mut codes = settings
        .other_solutions(state, effects, system, settings.cross_checks)
        .await?;
    if codes.is_empty() {
        return Ok(Vec::new());
    }
    let outcomes = effects
        .try_candidates(&codes, own, TriedFrom::RunStart)
        .await?;
    tracing::trace!("%%ask: the cross-check's solutions: {codes:#?}");
    tracing::debug!("%%ask: the cross-check's solutions tried: {outcomes:?}");
    // Each that raised, with its code as known fixes left it.
    let (failed, asked): (Vec<usize>, Vec<(&str, &str)>) = outcomes
        .iter()
        .enumerate()
        .filter_map(|(i, outcome)| match outcome {
            CandidateOutcome::Raised { error, code } => Some((i, (code.as_str(), error.as_str()))),
            _ => None,
        })
        .unzip();
    if failed.is_empty() {
        return Ok(outcomes);
    }
    let mended = settings
        .mended_solutions(state, effects, system, &asked)
        .await?;
    let mut any = false;
    for (i, code) in failed.into_iter().zip(mended) {
        if let Some(code) = code {
            codes[i] = code;
            any = true;
        }
    }
    if !any {
        return Ok(outcomes);
    }
    // All again, so what the comparison reads is from one try of each.
    let outcomes = effects
        .try_candidates(&codes, own, TriedFrom::RunStart)
        .await?;
    tracing::trace!("%%ask: the cross-check's solutions, mended: {codes:#?}");
    tracing::debug!("%%ask: the cross-check's solutions tried, mended: {outcomes:?}");
    Ok(outcomes)
}

/// The solutions compared, without the others whose values have a form the
/// run's own check has ruled out for the request (several values where it
/// wants one, say): the check would send them back, so they are no
/// evidence against the run's values (a small model's first try, which the
/// run was sent back from, is a likely sample).
pub(super) fn without_ruled_out(agreement: Agreement, forms: &[(String, Expected)]) -> Agreement {
    let described = agreement.described.clone();
    agreement.without(|i| {
        described.get(i).is_some_and(|values| {
            values.iter().any(|(name, description)| {
                forms
                    .iter()
                    .find(|(n, _)| n == name)
                    .is_some_and(|(_, expected)| {
                        form::contradiction(name, expected, description).is_some()
                    })
            })
        })
    })
}
