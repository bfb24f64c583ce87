//! An `%%ask` cell run again from its record: the recorded code blocks run
//! in the live namespace, in order, with no model call, shown as the run
//! showed them (code and output panels, what changed, the answer); the
//! guard and approvals apply as to new code. And the other way: a finished
//! run becomes its cell's record.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::{Value, json};

use super::lookups::run_changes;
use super::record::{CellKey, CellRun, Record, RecordedBlock};
use super::{INTERRUPTED, effects};
use crate::agent::config::options::BlockRules;
use crate::agent::failure::AskFailure;
use crate::agent::graphs::steps::resent_cell;
use crate::agent::parse::prose::without_code;
use crate::agent::ports::Ports;
use crate::agent::render::{self, publish};
use crate::agent::run::{AgentError, AgentEvent, AgentState, Execution, Outcome};
use crate::agent::scope_calls;
use crate::exception::PythonException;

/// The `%%ask` cell a run is for, as its record names it.
#[derive(Debug, Clone, Copy)]
pub(super) struct RecordedCell<'a> {
    pub key: &'a CellKey,
    /// The frontend's id of the cell, when it sent one.
    pub cell_id: Option<&'a str>,
}

/// How a run was made, for its record.
pub(super) struct RunFacts<'a> {
    pub provider: &'a str,
    pub model: &'a str,
    pub graph: &'a str,
    pub ending: String,
    /// Its code was shown, not run (`--no-exec`): the answer keeps it.
    pub no_exec: bool,
}

/// Where this notebook's record is (None, logged, when Python cannot say).
pub(super) async fn record_path<P: Ports>(ports: &P) -> Option<PathBuf> {
    match scope_calls::call(ports, &scope_calls::NotebookLocation {}).await {
        Ok(found) => {
            let notebook = found.notebook.as_deref().map(std::path::Path::new);
            Some(super::record::location(
                notebook,
                std::path::Path::new(&found.working_dir),
            ))
        }
        Err(e) => {
            tracing::warn!("%%ask: no record location: {e}");
            None
        }
    }
}

/// Runs `run`'s blocks again; the result is what a run's is. A block that
/// fails (or is declined) stops the replay with an error that says how to
/// ask afresh.
pub(super) async fn replay<P: Ports>(
    ports: &P,
    run: &CellRun,
    rules: &BlockRules,
) -> Result<Value, PythonException> {
    let started = Instant::now();
    let blocks: Vec<&RecordedBlock> = run.replayed_blocks().collect();
    publish(
        ports,
        render::replaying(blocks.len(), run.day(), &run.model),
    );
    for (index, block) in blocks.iter().enumerate() {
        let (turn, number) = (1, index + 1);
        let code = block.code.clone();
        publish(
            ports,
            render::event(&AgentEvent::Code {
                turn,
                block: number,
                code,
            }),
        );
        let execution = match effects::run_block(ports, &block.code, rules).await {
            Ok(execution) => execution,
            Err(AgentError::Interrupted) => {
                return Err(PythonException::interrupted(INTERRUPTED));
            }
            Err(e) => return Err(AskFailure::Run.because(e.to_string())),
        };
        let failed = execution.failed || execution.shown.is_none();
        let why = execution
            .output
            .lines()
            .last()
            .unwrap_or_default()
            .to_owned();
        publish(
            ports,
            render::event(&AgentEvent::Executed {
                turn,
                block: number,
                execution,
            }),
        );
        if failed {
            return Err(AskFailure::Run.because(format!(
                "the replay stopped at block {number} of {}: {why}\n`%%ask --fresh` asks \
                     the model again (and records the new run)",
                blocks.len()
            )));
        }
    }
    if let Some(panel) = render::changes(&run_changes(ports).await) {
        publish(ports, panel);
    }
    if !run.answer.trim().is_empty() {
        publish(
            ports,
            render::event(&AgentEvent::Answer(run.answer.clone())),
        );
    }
    publish(ports, render::replayed(&run.ending, started.elapsed()));
    Ok(json!({ "answer": run.answer, "finished": false, "replayed": true }))
}

/// Why a run is not its cell's record, if it is not: a record is a run that
/// finished (done, or answered) with every block it wrote run; a run the
/// user or the guard stopped code of, or that ended unfinished, asks again
/// next time.
pub(super) fn not_recorded(state: &AgentState) -> Option<&'static str> {
    if !matches!(state.outcome, Some(Outcome::Complete | Outcome::Answered)) {
        return Some("the run did not finish");
    }
    // Code that did not run (declined, refused by the guard) has no panel;
    // a cell the user ran, sent again and not run, did nothing to replay.
    let withheld = |e: &Execution| e.shown.is_none() && !resent_cell(e);
    if state.executions.iter().any(withheld) {
        return Some("some of its code was not run");
    }
    None
}

/// The record of a finished run of `cell`.
pub(super) fn cell_run(cell: RecordedCell<'_>, state: &AgentState, facts: RunFacts<'_>) -> CellRun {
    CellRun {
        cell_id: cell.cell_id.map(str::to_owned),
        options: cell.key.options.recorded_args(),
        prompt: cell.key.prompt.clone(),
        recorded: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        provider: facts.provider.to_owned(),
        model: facts.model.to_owned(),
        graph: facts.graph.to_owned(),
        ending: facts.ending,
        blocks: state
            .executions
            .iter()
            .map(|execution| RecordedBlock {
                code: execution.code.clone(),
                failed: execution.failed,
                changes: execution.changes.clone(),
            })
            .collect(),
        answer: if facts.no_exec {
            state.answer.trim().to_owned()
        } else {
            without_code(&state.answer)
        },
    }
}

/// Keeps `run` in the record at `path` as the record of `cell` (or, with
/// no run, forgets the cell's record); what went wrong, as a line for the
/// cell, when it could not.
pub(super) fn keep(
    path: &std::path::Path,
    cell: RecordedCell<'_>,
    run: Option<CellRun>,
    secrets: &[String],
) -> Result<(), String> {
    let mut record = Record::load(path).map_err(|e| format!("not recorded: {e}"))?;
    match run {
        Some(run) => record.keep(run, cell.key),
        None if record.find(cell.cell_id, cell.key).is_none() => return Ok(()),
        None => record.forget(cell.cell_id, cell.key),
    }
    record
        .save(path, secrets)
        .map_err(|e| format!("not recorded in {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::prompts;
    use crate::agent::script::ok;

    #[test]
    fn a_finished_run_is_recorded_unless_code_was_withheld_other_than_a_copied_cell() {
        let mut state = AgentState::new("sum it", Vec::new(), 2);
        state.outcome = Some(Outcome::Complete);
        let ran = Execution {
            shown: Some(String::new()),
            ..ok("total = 3")
        };
        state.executions = vec![Execution::not_run("x = 1", prompts::RECENT_CELL_AGAIN), ran];
        assert_eq!(not_recorded(&state), None);
        state
            .executions
            .push(Execution::not_run("rm()", "Not run: declined"));
        assert_eq!(not_recorded(&state), Some("some of its code was not run"));
        state.outcome = Some(Outcome::MaxTurns);
        assert_eq!(not_recorded(&state), Some("the run did not finish"));
    }
}
