//! The record of a notebook's `%%ask` runs, so the notebook reruns the same
//! way: for each cell, the code blocks its last run ran (in order, with what
//! each changed and whether it failed), the answer, and the provider, model
//! and graph. It lives in a JSON file beside the notebook (`analysis.ipynb`
//! -> `analysis.ask.json`, or `mahtab-ask.json` in the working directory
//! when no notebook is known), written whole, readable and diffable, with
//! no key in it. A cell is found by its prompt and the options its run
//! had from the notebook (its `%%ask` line over the `%ask_config` defaults
//! before it; not the machine's settings, so the notebook replays on
//! another machine), its id telling apart cells that ask the same.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::agent::config::options::{AskOptions, ask_line_options};

/// The version of the record's format this kernel writes; it reads this
/// one and older.
pub const VERSION: u32 = 1;

/// The most cells a record keeps (the oldest runs go first).
const MAX_CELLS: usize = 1000;

/// What stands in the record for a key.
const REDACTED: &str = "<redacted>";

/// A record file's contents.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The format's version (also what marks the file as a record).
    pub mahtab_ask_record: u32,
    #[serde(default)]
    pub cells: Vec<CellRun>,
}

/// The last run of one `%%ask` cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellRun {
    /// The frontend's id of the cell, when it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_id: Option<String>,
    /// The options the run had from the notebook, as `%%ask` line
    /// arguments (see [`AskOptions::as_recorded`]).
    #[serde(default)]
    pub options: String,
    pub prompt: String,
    /// When it ran (RFC 3339, UTC).
    pub recorded: String,
    pub provider: String,
    pub model: String,
    pub graph: String,
    /// How the run ended, as its summary said (`done · checked: ...`).
    pub ending: String,
    pub blocks: Vec<RecordedBlock>,
    /// The model's last answer, without its code.
    #[serde(default)]
    pub answer: String,
}

/// One code block a run ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedBlock {
    pub code: String,
    /// It raised (a replay skips it: the run went on from its failure).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,
    /// What it changed in the namespace, a line per name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<String>,
}

/// What makes two runs runs of the same cell: the prompt, and the options
/// the notebook gave (the cell's line over the `%ask_config` defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellKey {
    pub prompt: String,
    pub options: AskOptions,
}

impl CellKey {
    /// The key of a cell asking `prompt` with `options` (recorded ones are
    /// kept, see [`AskOptions::as_recorded`]).
    pub fn new(prompt: &str, options: &AskOptions) -> Self {
        Self {
            prompt: prompt.trim().to_owned(),
            options: options.as_recorded(),
        }
    }
}

impl CellRun {
    /// Whether this is a run of the cell `key` names.
    fn is_of(&self, key: &CellKey) -> bool {
        self.prompt.trim() == key.prompt
            && ask_line_options(&self.options)
                .is_ok_and(|options| options.as_recorded() == key.options)
    }

    /// The blocks a replay runs: those that did not fail.
    pub fn replayed_blocks(&self) -> impl Iterator<Item = &RecordedBlock> {
        self.blocks.iter().filter(|block| !block.failed)
    }

    /// The day it ran (`2026-11-26`).
    pub fn day(&self) -> &str {
        self.recorded.get(..10).unwrap_or(&self.recorded)
    }
}

/// Why a record cannot be used; nothing of it is run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error(
        "the %%ask record {path} was written by a newer mahtab (format {found}, this one reads \
         up to {VERSION}); nothing was replayed. Update mahtab, or run the cell with \
         `%%ask --fresh` to ask the model"
    )]
    Newer { path: String, found: u64 },
    #[error(
        "the %%ask record {path} is unreadable ({why}); nothing was replayed. Fix or remove the \
         file, or run the cell with `%%ask --fresh` to ask the model"
    )]
    Corrupt { path: String, why: String },
}

/// Where a notebook's record is: `notebook` is the notebook's path, when
/// known (else the record is `mahtab-ask.json` in `working_dir`).
pub fn location(notebook: Option<&Path>, working_dir: &Path) -> PathBuf {
    match notebook {
        Some(notebook) => {
            let stem = notebook
                .file_stem()
                .map_or_else(|| "notebook".into(), |s| s.to_string_lossy());
            let dir = notebook.parent().unwrap_or(working_dir);
            working_dir.join(dir).join(format!("{stem}.ask.json"))
        }
        None => working_dir.join("mahtab-ask.json"),
    }
}

impl Record {
    /// The record at `path`: empty when there is none.
    pub fn load(path: &Path) -> Result<Record, RecordError> {
        let corrupt = |why: String| RecordError::Corrupt {
            path: path.display().to_string(),
            why,
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Record::default()),
            Err(e) => return Err(corrupt(e.to_string())),
        };
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
        let Some(version) = value["mahtab_ask_record"].as_u64() else {
            return Err(corrupt("no mahtab_ask_record version".into()));
        };
        if version > u64::from(VERSION) {
            return Err(RecordError::Newer {
                path: path.display().to_string(),
                found: version,
            });
        }
        serde_json::from_value(value).map_err(|e| corrupt(e.to_string()))
    }

    /// The recorded run of the cell `key` names, whose frontend id is
    /// `cell_id`: the run of that cell, else the newest run asking the same
    /// from a client that named no cell (nbclient, papermill); a cell with
    /// no id takes the newest run asking the same. Another cell's run is
    /// not this one's.
    pub fn find(&self, cell_id: Option<&str>, key: &CellKey) -> Option<&CellRun> {
        let same = |run: &&CellRun| run.is_of(key);
        match cell_id {
            Some(id) => self
                .cells
                .iter()
                .filter(same)
                .find(|run| run.cell_id.as_deref() == Some(id))
                .or_else(|| {
                    self.cells
                        .iter()
                        .rev()
                        .filter(same)
                        .find(|run| run.cell_id.is_none())
                }),
            None => self.cells.iter().rev().find(same),
        }
    }

    /// Keeps `run` (of the cell `key` names) as its cell's record, in place
    /// of the one before: the cell's own (same id), or one without an id
    /// asking the same.
    pub fn keep(&mut self, run: CellRun, key: &CellKey) {
        self.forget(run.cell_id.as_deref(), key);
        self.cells.push(run);
        let excess = self.cells.len().saturating_sub(MAX_CELLS);
        self.cells.drain(..excess);
        self.mahtab_ask_record = VERSION;
    }

    /// Drops the record of a cell: the one of id `cell_id`, and one without
    /// an id asking what `key` asks.
    pub fn forget(&mut self, cell_id: Option<&str>, key: &CellKey) {
        self.cells
            .retain(|old| match (old.cell_id.as_deref(), cell_id) {
                (Some(old_id), Some(id)) => old_id != id,
                (None, _) => !old.is_of(key),
                (Some(_), None) => true,
            });
    }

    /// Writes the record to `path` whole, with every one of `secrets`
    /// replaced.
    pub fn save(&self, path: &Path, secrets: &[String]) -> std::io::Result<()> {
        let mut text = serde_json::to_string_pretty(self)?;
        for secret in secrets.iter().filter(|s| s.len() >= 8) {
            text = text.replace(secret.as_str(), REDACTED);
        }
        text.push('\n');
        crate::private_files::write_whole(path, text.as_bytes(), 0o644)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::config::options::{AgentCell, parse_cell};

    fn cell(code: &str) -> CellKey {
        match parse_cell(code) {
            Some(Ok(AgentCell::Ask(cell))) => CellKey::new(&cell.prompt, &cell.options),
            other => panic!("not an %%ask cell: {other:?}"),
        }
    }

    fn run(cell: &CellKey, id: Option<&str>, code: &str) -> CellRun {
        CellRun {
            cell_id: id.map(str::to_owned),
            options: cell.options.recorded_args(),
            prompt: cell.prompt.clone(),
            recorded: "2026-11-26T10:00:00Z".into(),
            provider: "local model".into(),
            model: "Qwen2.5-Coder-1.5B".into(),
            graph: "default".into(),
            ending: "done".into(),
            blocks: vec![
                RecordedBlock {
                    code: "1/0".into(),
                    failed: true,
                    changes: Vec::new(),
                },
                RecordedBlock {
                    code: code.into(),
                    failed: false,
                    changes: vec!["n = 3 (int, new)".into()],
                },
            ],
            answer: "n is 3.".into(),
        }
    }

    fn scratch(tag: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("mahtab-record-{tag}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_cell_is_found_by_prompt_and_options_and_told_apart_by_its_id() {
        let asked = cell("%%ask --graph analyst --max-turns 2\nset n to 3");
        let mut record = Record::default();
        record.keep(run(&asked, Some("a"), "n = 3"), &asked);
        record.keep(run(&asked, Some("b"), "n = 1 + 2"), &asked);
        let code = |run: &CellRun| run.replayed_blocks().next().unwrap().code.clone();
        assert_eq!(code(record.find(Some("a"), &asked).unwrap()), "n = 3");
        assert_eq!(code(record.find(Some("b"), &asked).unwrap()), "n = 1 + 2");
        // A client that names no cell gets the newest asking the same; a
        // cell of another id has no run of its own yet.
        assert_eq!(code(record.find(None, &asked).unwrap()), "n = 1 + 2");
        assert!(record.find(Some("c"), &asked).is_none());
        // A run recorded with no id (nbclient) is found by a cell with one
        // (the notebook opened in Lab afterwards).
        record.keep(run(&asked, None, "n = 3 * 1"), &asked);
        assert_eq!(code(record.find(Some("c"), &asked).unwrap()), "n = 3 * 1");
        assert_eq!(code(record.find(Some("a"), &asked).unwrap()), "n = 3");
        // The same options written another way, and --fresh or --trace, are
        // the same cell.
        let reworded = cell("%%ask --max-turns 2 --fresh --trace --graph analyst\n  set n to 3\n");
        assert!(record.find(Some("a"), &reworded).is_some());
        for changed in [
            "%%ask --graph analyst --max-turns 2\nset n to 4",
            "%%ask --graph analyst --max-turns 3\nset n to 3",
            "%%ask\nset n to 3",
        ] {
            assert!(
                record.find(Some("a"), &cell(changed)).is_none(),
                "{changed}"
            );
        }
    }

    #[test]
    fn a_new_run_replaces_its_cells_record_only() {
        let first = cell("%%ask\nset n to 3");
        let other = cell("%%ask\nset m to 4");
        let mut record = Record::default();
        record.keep(run(&first, None, "n = 3"), &first);
        record.keep(run(&other, None, "m = 4"), &other);
        record.keep(run(&first, None, "n = 2 + 1"), &first);
        assert_eq!(record.cells.len(), 2);
        // A run with an id replaces that cell's run, and one without an id
        // asking the same; a changed prompt under the same id replaces it too.
        record.keep(run(&first, Some("x"), "n = 3"), &first);
        assert_eq!(record.cells.len(), 2);
        let changed = cell("%%ask\nset n to 30");
        record.keep(run(&changed, Some("x"), "n = 30"), &changed);
        assert_eq!(record.cells.len(), 2);
        assert!(record.find(Some("x"), &first).is_none());
        assert_eq!(record.mahtab_ask_record, VERSION);
        record.forget(Some("x"), &changed);
        assert_eq!(record.cells.len(), 1);
    }

    #[test]
    fn a_record_is_saved_whole_without_keys_and_loads_back() {
        let dir = scratch("save");
        let path = location(Some(Path::new("sub/analysis.ipynb")), &dir);
        assert_eq!(path, dir.join("sub").join("analysis.ask.json"));
        assert!(Record::load(&path).unwrap().cells.is_empty());
        let asked = cell("%%ask\nuse key sk-test-0123456789abcdef");
        let mut record = Record::default();
        record.keep(run(&asked, Some("a"), "n = 3"), &asked);
        let key = "sk-test-0123456789abcdef".to_owned();
        record.save(&path, std::slice::from_ref(&key)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&key), "{text}");
        assert!(
            text.contains("\n  \"cells\": ["),
            "pretty, diffable: {text}"
        );
        let loaded = Record::load(&path).unwrap();
        assert_eq!(loaded.cells[0].prompt, "use key <redacted>");
        assert_eq!(loaded.cells[0].blocks, record.cells[0].blocks);
        assert_eq!(loaded.cells[0].day(), "2026-11-26");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_newer_or_corrupt_record_is_refused_with_the_way_out() {
        let dir = scratch("bad");
        let path = dir.join("mahtab-ask.json");
        std::fs::write(&path, r#"{"mahtab_ask_record": 2, "cells": []}"#).unwrap();
        let newer = Record::load(&path).unwrap_err();
        assert!(matches!(newer, RecordError::Newer { found: 2, .. }));
        assert!(newer.to_string().contains("--fresh"), "{newer}");
        for bad in [
            "not json",
            "{\"cells\": []}",
            r#"{"mahtab_ask_record": 1, "cells": [1]}"#,
        ] {
            std::fs::write(&path, bad).unwrap();
            let corrupt = Record::load(&path).unwrap_err();
            assert!(matches!(corrupt, RecordError::Corrupt { .. }), "{bad}");
        }
        assert_eq!(
            location(None, &dir),
            dir.join("mahtab-ask.json"),
            "no notebook: the working directory"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
