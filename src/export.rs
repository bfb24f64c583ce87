//! `mahtab export`: a copy of a notebook that runs on any Python kernel
//! (ipykernel) with no agent. Each `%%ask` cell becomes its prompt, as a
//! Markdown cell, followed by the code its recorded run ran, as ordinary
//! code cells; the agent's own magics (`%ask_config`, `%ask_graph`,
//! `%ask_code`) go, since they change nothing outside the agent. The record
//! is the one the kernel keeps beside the notebook.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::agent::config::layers as settings;
use crate::agent::config::options::{AgentCell, AskOptions, parse_cell};
use crate::agent::session::record::{self, CellKey, Record};

/// What an export did, for the line it prints.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Exported {
    /// `%%ask` cells replaced by their recorded code.
    pub asks: usize,
    /// Code cells written for them.
    pub code_cells: usize,
    /// The first line of each `%%ask` cell that had no recorded run (kept
    /// as its prompt only).
    pub unrecorded: Vec<String>,
    /// Agent-only lines taken out.
    pub removed: usize,
}

impl std::fmt::Display for Exported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} %%ask cell{} as {} code cell{}",
            self.asks,
            if self.asks == 1 { "" } else { "s" },
            self.code_cells,
            if self.code_cells == 1 { "" } else { "s" },
        )?;
        if self.removed > 0 {
            write!(f, "; {} agent setting line(s) removed", self.removed)?;
        }
        for first in &self.unrecorded {
            write!(
                f,
                "\nno recorded run (kept as its prompt only): {first}\n  run the notebook \
                 with mahtab first to record it"
            )?;
        }
        Ok(())
    }
}

/// The record of `notebook`: `record` when given, else the one beside it
/// (`NOTEBOOK.ask.json`, or `mahtab-ask.json` when the notebook ran under a
/// client that did not say which notebook it was).
pub fn record_for(notebook: &Path, record: Option<PathBuf>) -> Result<Record> {
    let path = match record {
        Some(path) => path,
        None => {
            let dir = notebook.parent().unwrap_or(Path::new("."));
            let beside = record::location(Some(notebook), Path::new("."));
            let unnamed = record::location(None, dir);
            if beside.exists() || !unnamed.exists() {
                beside
            } else {
                unnamed
            }
        }
    };
    if !path.exists() {
        bail!("no %%ask record at {}", path.display());
    }
    Ok(Record::load(&path)?)
}

/// `notebook` (nbformat 4 JSON) with its `%%ask` cells replaced by what
/// `record` says they ran, and its kernel set to ipykernel's `python3`.
pub fn export(notebook: &Value, record: &Record) -> Result<(Value, Exported)> {
    let Some(cells) = notebook["cells"].as_array() else {
        bail!("not a notebook: it has no cells");
    };
    if notebook["nbformat"].as_u64() != Some(4) {
        bail!("only nbformat 4 notebooks can be exported");
    }
    let mut exported = Exported::default();
    let mut kept = Vec::with_capacity(cells.len());
    // The `%ask_config` defaults as the cells set them, in order: part of
    // what each `%%ask` cell's record is found by.
    let mut defaults = AskOptions::default();
    for cell in cells {
        let source = source_text(&cell["source"]);
        if cell["cell_type"] != "code" {
            kept.push(cell.clone());
            continue;
        }
        match parse_cell(&source) {
            None if source.trim_start().starts_with("%ask_undo") => {
                bail!(
                    "the notebook undoes an agent run (%ask_undo) in a cell: an export cannot \
                     reproduce that; remove the cell and run the notebook again"
                )
            }
            None => kept.push(cell.clone()),
            Some(Ok(AgentCell::Ask(asked))) => {
                exported.asks += 1;
                kept.push(markdown_cell(&prompt_markdown(&source)));
                let key = CellKey::new(&asked.prompt, &asked.options.or(&defaults));
                match record.find(cell["id"].as_str(), &key) {
                    Some(run) => {
                        for block in run.replayed_blocks() {
                            kept.push(code_cell(&block.code));
                            exported.code_cells += 1;
                        }
                    }
                    None => exported
                        .unrecorded
                        .push(asked.prompt.lines().next().unwrap_or_default().to_owned()),
                }
            }
            Some(Ok(AgentCell::Configure(change))) => {
                settings::apply(&mut defaults, change);
                exported.removed += 1;
            }
            Some(Ok(_)) => exported.removed += 1,
            Some(Err(usage)) => bail!("a cell's %%ask line cannot be read: {usage}"),
        }
    }
    let mut copy = notebook.clone();
    copy["cells"] = Value::Array(kept);
    copy["metadata"]["kernelspec"] = json!({
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    });
    Ok((copy, exported))
}

/// Exports the notebook at `input` into `output` (see [`export`]).
pub fn export_file(input: &Path, output: &Path, record: Option<PathBuf>) -> Result<Exported> {
    let text = std::fs::read_to_string(input)
        .with_context(|| format!("cannot read {}", input.display()))?;
    let notebook: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a notebook (JSON)", input.display()))?;
    let record = record_for(input, record)?;
    let (copy, exported) = export(&notebook, &record)?;
    let mut text = serde_json::to_string_pretty(&copy)?;
    text.push('\n');
    crate::private_files::write_whole(output, text.as_bytes(), 0o644)
        .with_context(|| format!("cannot write {}", output.display()))?;
    Ok(exported)
}

/// A cell's source, which nbformat stores as one text or a list of lines.
fn source_text(source: &Value) -> String {
    match source {
        Value::String(text) => text.clone(),
        Value::Array(lines) => lines.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

/// An `%%ask` cell as Markdown: its magic line as code, its prompt quoted.
fn prompt_markdown(source: &str) -> String {
    let source = source.trim_start_matches(['\n', '\r']);
    let (line, prompt) = source.split_once('\n').unwrap_or((source, ""));
    let quoted: Vec<String> = prompt
        .trim()
        .lines()
        .map(|line| format!("> {line}").trim_end().to_owned())
        .collect();
    format!("`{}`\n\n{}", line.trim(), quoted.join("\n"))
}

fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_owned()
}

fn markdown_cell(text: &str) -> Value {
    json!({ "cell_type": "markdown", "id": new_id(), "metadata": {}, "source": text })
}

fn code_cell(code: &str) -> Value {
    json!({
        "cell_type": "code",
        "id": new_id(),
        "metadata": {},
        "source": code,
        "outputs": [],
        "execution_count": null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::session::record::{CellRun, RecordedBlock};

    fn run(prompt: &str, options: &str, cell_id: Option<&str>, codes: &[(&str, bool)]) -> CellRun {
        CellRun {
            cell_id: cell_id.map(str::to_owned),
            options: options.into(),
            prompt: prompt.into(),
            recorded: "2026-11-26T10:00:00Z".into(),
            provider: "openai".into(),
            model: "m".into(),
            graph: "default".into(),
            ending: "done".into(),
            blocks: codes
                .iter()
                .map(|(code, failed)| RecordedBlock {
                    code: (*code).into(),
                    failed: *failed,
                    changes: Vec::new(),
                })
                .collect(),
            answer: String::new(),
        }
    }

    fn notebook(cells: Value) -> Value {
        json!({
            "nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "mahtab", "display_name": "Mahtab", "language": "python"}},
            "cells": cells,
        })
    }

    #[test]
    fn ask_cells_become_their_prompt_and_recorded_code() {
        let record = Record {
            mahtab_ask_record: record::VERSION,
            cells: vec![
                run(
                    "set n",
                    "--once",
                    Some("c1"),
                    &[("n = 1/0", true), ("n = 3", false)],
                ),
                // Found with the defaults the %ask_config cell before it set.
                run("double n", "--graph analyst", None, &[("n = n * 2", false)]),
            ],
        };
        let nb = notebook(json!([
            {"cell_type": "markdown", "id": "m", "metadata": {}, "source": "# Title"},
            {"cell_type": "code", "id": "c1", "metadata": {}, "source": ["%%ask --once\n", "set n"], "outputs": [], "execution_count": 1},
            {"cell_type": "code", "id": "c2", "metadata": {}, "source": "%ask_config --graph analyst", "outputs": [], "execution_count": 2},
            {"cell_type": "code", "id": "c3", "metadata": {}, "source": "%%ask\ndouble n", "outputs": [], "execution_count": 3},
            {"cell_type": "code", "id": "c4", "metadata": {}, "source": "%%ask\nnever ran", "outputs": [], "execution_count": null},
            {"cell_type": "code", "id": "c5", "metadata": {}, "source": "print(n)", "outputs": [], "execution_count": 4},
        ]));
        let (copy, exported) = export(&nb, &record).unwrap();
        let cells = copy["cells"].as_array().unwrap();
        let kinds: Vec<(&str, String)> = cells
            .iter()
            .map(|c| (c["cell_type"].as_str().unwrap(), source_text(&c["source"])))
            .collect();
        assert_eq!(
            kinds,
            [
                ("markdown", "# Title".to_owned()),
                ("markdown", "`%%ask --once`\n\n> set n".to_owned()),
                ("code", "n = 3".to_owned()),
                ("markdown", "`%%ask`\n\n> double n".to_owned()),
                ("code", "n = n * 2".to_owned()),
                ("markdown", "`%%ask`\n\n> never ran".to_owned()),
                ("code", "print(n)".to_owned()),
            ]
        );
        assert_eq!(copy["metadata"]["kernelspec"]["name"], "python3");
        assert_eq!(
            exported,
            Exported {
                asks: 3,
                code_cells: 2,
                unrecorded: vec!["never ran".into()],
                removed: 1,
            }
        );
        let ids: std::collections::HashSet<_> = cells.iter().map(|c| c["id"].clone()).collect();
        assert_eq!(ids.len(), cells.len(), "every cell has its own id");
    }

    #[test]
    fn what_cannot_be_exported_is_refused() {
        let record = Record::default();
        let undo = notebook(json!([
            {"cell_type": "code", "id": "u", "metadata": {}, "source": "%ask_undo", "outputs": [], "execution_count": null},
        ]));
        assert!(
            export(&undo, &record)
                .unwrap_err()
                .to_string()
                .contains("%ask_undo")
        );
        assert!(export(&json!({"nbformat": 4}), &record).is_err());
        let old = json!({"nbformat": 3, "cells": []});
        assert!(export(&old, &record).is_err());
    }
}
