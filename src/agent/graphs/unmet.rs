//! What a turn's outcome visibly lacks, found without asking a model:
//! pandas saying a change went to a copy, a variable the request asked to
//! change itself that was rebound instead (its original object goes back
//! under its name), a variable or file the request names that does not
//! exist or came out NaN or None, a figure it asks for that was not shown. Every graph that judges
//! its own work checks these first; a small model's review misses them. A
//! named variable missing after code that raised is told as that failure.

use super::steps::resent_cell;
use crate::agent::parse::{checks, errors, figure, in_place};
use crate::agent::prompts;
use crate::agent::run::{AgentState, Effects, Execution};

/// Why the turn is not done, and what to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmet {
    pub reasoning: String,
    pub next_action: String,
}

/// Whether `execution` is code that raised: a failure the model can fix,
/// not a block refused or a cell not run again.
pub fn raised(execution: &Execution) -> bool {
    execution.failed && !errors::refused(&execution.output) && !resent_cell(execution)
}

/// The first thing `executions` (the turn's blocks, none of which failed)
/// leave undone of `state.request`, if any; `failure`: the block of this
/// turn or pass that [`raised`], where the work ended so.
pub async fn unmet<E: Effects>(
    state: &AgentState,
    effects: &mut E,
    executions: &[Execution],
    failure: Option<&Execution>,
) -> Option<Unmet> {
    let found = |(reasoning, next_action): (String, String)| {
        Some(Unmet {
            reasoning,
            next_action,
        })
    };
    if let Some(copy) = executions
        .iter()
        .find(|e| in_place::changed_a_copy(&e.output))
    {
        let rewrite = in_place::copy_rewrite(&copy.code);
        return found(prompts::changed_a_copy(rewrite.as_deref()));
    }
    let rebound =
        in_place::rebound_though_asked_in_place(&state.request, executions, &state.namespace_names);
    if let Some(first) = rebound.first() {
        // The original objects go back under their names, so that the next
        // turn's change in place changes them (not the new objects).
        let names: Vec<String> = rebound.iter().map(|r| r.name.clone()).collect();
        let restored = effects.restore(&names).await;
        return found(prompts::rebound_not_in_place(
            &names,
            &restored,
            &first.name,
            first.rewrite.as_deref(),
        ));
    }
    let targets = checks::targets(&state.request);
    if !targets.is_empty() {
        let missing = effects.missing(&targets).await;
        if !missing.is_empty() {
            let mut absent: Vec<String> = missing.names.iter().map(|n| format!("`{n}`")).collect();
            absent.extend(missing.files.iter().cloned());
            let absent = absent.join(", ");
            // Told only "create it" after code that raised, a small model
            // sends the failing code again: the failure is why.
            if let Some(failure) = failure {
                let error = errors::error_line(&failure.output);
                let hint = errors::failure_hint(&failure.output);
                return found((
                    format!("{absent} does not exist yet: the code failed ({error})"),
                    prompts::fix_the_failure(hint.as_deref()),
                ));
            }
            // Work that changed one of the user's variables instead (a
            // column added to `df` where `result` is asked for): told only
            // that `result` is missing, a small model sends it again.
            let user_names =
                checks::summary_names(state.namespace_at_start.as_deref().unwrap_or(""));
            let turn: Vec<&Execution> = executions.iter().collect();
            let changed = checks::changed_user_values(&turn, &user_names);
            let instead = changed.iter().find(|other| !missing.names.contains(other));
            return found((
                format!("{absent} does not exist yet"),
                prompts::create_missing(missing.names.first().zip(instead)),
            ));
        }
        for name in &targets.names {
            match checks::empty_value(&state.executions, name) {
                Some("NaN") => {
                    return found((
                        format!("`{name}` is NaN"),
                        "compute it so that missing values are skipped (np.nanmean(a), \
                         np.nansum(a); a pandas Series' .mean() and .sum() skip them) or \
                         fill or drop them first"
                            .to_owned(),
                    ));
                }
                Some(_) => {
                    return found((
                        format!("`{name}` is None"),
                        "store the value itself: a method called with inplace=True, and \
                         list.sort() or list.append(), return None"
                            .to_owned(),
                    ));
                }
                None => {}
            }
        }
    }
    let figure_shown = state.executions.iter().any(|e| e.rich_outputs > 0);
    if figure::wants_figure(&state.request) && !figure_shown {
        return found((
            "no figure was shown yet".to_owned(),
            "draw it and show it (plt.show())".to_owned(),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_code_that_raised_is_a_failure_to_fix() {
        let ran = |output: &str, failed| Execution {
            failed,
            ..Execution::not_run("x = f()", output)
        };
        assert!(raised(&ran(
            "Traceback (most recent call last):\nValueError: bad",
            true
        )));
        assert!(!raised(&ran("3", false)));
        let refused = "Not run: the user chose not to run this code.";
        assert!(!raised(&Execution::not_run("x = f()", refused)));
        assert!(!raised(&Execution::not_run(
            "x = f()",
            prompts::RECENT_CELL_AGAIN
        )));
    }
}
