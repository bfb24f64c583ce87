//! A judged "done" compared with solutions written independently: once the
//! review passes work on values the request names, a few more solutions of
//! the request are sampled from its first prompt (the request alone, not
//! the run's conversation: neither the run's mistakes nor what it was told
//! about them), run on copies of the namespace as it was before the run,
//! and their values compared with the run's by code. Another solution that
//! computed the same values confirms the "done"; when every other one that
//! computed them computed others, the run ends "answered, not confirmed".
//! One whose value has a form the run's check ruled out counts neither way.
//! Unlike the review, this check can fail on the value itself, without the
//! knowledge a small judge lacks.

use super::solutions::compared_names;
use super::steps::{NodeSettings, code_prompt};
use crate::agent::parse::form;
use crate::agent::run::{
    AgentError, AgentState, Agreement, CrossCheck, Effects, Expected, TriedFrom,
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
    let system = code_prompt(state, effects, settings.code_instructions).await;
    // Asked as the run's first answer was: the request alone.
    let asked = (state.request_at + 1).min(state.conversation.len());
    let later = state.conversation.split_off(asked);
    let codes = settings
        .other_solutions(state, effects, &system, settings.cross_checks)
        .await;
    state.conversation.extend(later);
    // The review's "done" stands as it was when the provider fails here.
    let codes = match codes {
        Ok(codes) if !codes.is_empty() => codes,
        Ok(_) => return Ok(None),
        Err(AgentError::Llm(e)) => {
            tracing::warn!("%%ask: no cross-check of the done: {e}");
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let notes = effects
        .try_candidates(&codes, &own, TriedFrom::RunStart)
        .await?;
    tracing::debug!(
        "%%ask: {} solutions for the cross-check: {notes:?}",
        codes.len()
    );
    tracing::trace!("%%ask: the cross-check's solutions: {codes:#?}");
    if notes.is_empty() {
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

/// The solutions compared, without the others whose values have a form the
/// run's own check has ruled out for the request (several values where it
/// wants one, say): the check would send them back, so they are no
/// evidence against the run's values (a small model's first try, which the
/// run was sent back from, is a likely sample).
fn without_ruled_out(agreement: Agreement, forms: &[(String, Expected)]) -> Agreement {
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
