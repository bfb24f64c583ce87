//! What the session asks of the Python side around a run: the request
//! with its `{name}`s filled in, the cells the user ran since the last
//! request, the skills (and the instructions of those the request names),
//! and afterwards what the run changed. A look-up that fails is logged and
//! the run goes on without it.

use crate::agent::ports::Ports;
use crate::agent::run::{RunChanges, Skill};
use crate::agent::scope_calls;

/// Replaces `{name}` in the prompt with that variable's value (`{{` and `}}`
/// stand for braces), as jupyter-ai does.
pub(super) async fn interpolate<P: Ports>(ports: &P, prompt: String) -> String {
    if !prompt.contains('{') {
        return prompt;
    }
    match scope_calls::call(ports, &scope_calls::Interpolate { prompt: &prompt }).await {
        Ok(reply) => reply.prompt,
        Err(e) => {
            tracing::warn!("%%ask: prompt not interpolated: {e}");
            prompt
        }
    }
}

/// The cells the user ran since the last request.
pub(super) async fn recent_cells<P: Ports>(ports: &P) -> Vec<String> {
    match scope_calls::call(ports, &scope_calls::RecentCells {}).await {
        Ok(reply) => reply.cells,
        Err(e) => {
            tracing::warn!("%%ask: no recent cells: {e}");
            Vec::new()
        }
    }
}

/// What the run changed in the namespace and in files.
pub(super) async fn run_changes<P: Ports>(ports: &P) -> RunChanges {
    scope_calls::call(ports, &scope_calls::Changes {})
        .await
        .unwrap_or_else(|e| {
            tracing::warn!("%%ask: no changes: {e}");
            RunChanges::default()
        })
}

/// The skills installed for the model, by name, and the instructions of
/// those `request` names.
pub(super) async fn skills<P: Ports>(
    ports: &P,
    request: &str,
) -> (Vec<Skill>, Vec<(String, String)>) {
    match scope_calls::call(ports, &scope_calls::Skills { request }).await {
        Ok(reply) => (reply.skills.into_iter().collect(), reply.named),
        Err(e) => {
            tracing::warn!("%%ask: no skills: {e}");
            (Vec::new(), Vec::new())
        }
    }
}
