//! Code a block copied from cells the user already ran. A small model shown
//! the recent cells often sends one again, whole or inside its own code;
//! what that cell made is in the namespace, so running it again repeats it
//! (a file written once more, which the guard refuses) and does nothing the
//! request asks.

/// How many statements in a row a block must share with one of the user's
/// cells for them to count as copied from it inside other code: fewer is
/// as often the same import or load written afresh.
const COPIED_RUN: usize = 3;

/// The lines of `text` that run: trimmed, blank lines and comments aside,
/// with their line numbers.
fn statements(text: &str) -> Vec<(usize, &str)> {
    text.lines()
        .map(str::trim)
        .enumerate()
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
        .collect()
}

/// Whether `code` is one of the user's `recent_cells` sent again: every
/// line of it (two at least; blank lines and comments aside, which change
/// nothing that runs) is a line of the same cell. Code that changes any
/// line of a cell is new code.
pub fn copies_a_recent_cell(code: &str, recent_cells: &[String]) -> bool {
    let lines = statements(code);
    lines.len() >= 2
        && recent_cells.iter().any(|cell| {
            let cell: Vec<&str> = statements(cell).into_iter().map(|(_, l)| l).collect();
            lines.iter().all(|(_, line)| cell.contains(line))
        })
}

/// `code` without the longest run of statements (at least [`COPIED_RUN`])
/// it holds in the same order as one of the user's `recent_cells`, where
/// that run starts at the block's top level and the block's next statement
/// is there too (so what is left reads as it did). None when no run is that
/// long, or when nothing of the block's own would be left.
pub fn without_copied_lines(code: &str, recent_cells: &[String]) -> Option<String> {
    let lines: Vec<&str> = code.lines().collect();
    let block = statements(code);
    let mut longest: Option<(usize, usize)> = None;
    for cell in recent_cells {
        let cell = statements(cell);
        for start in 0..block.len() {
            for from in 0..cell.len() {
                let run = block[start..]
                    .iter()
                    .zip(&cell[from..])
                    .take_while(|((_, a), (_, b))| a == b)
                    .count();
                if run >= COPIED_RUN && longest.is_none_or(|(s, e)| run > e - s) {
                    longest = Some((start, start + run));
                }
            }
        }
    }
    let (start, end) = longest?;
    let top_level = |statement: usize| !lines[block[statement].0].starts_with([' ', '\t']);
    if !top_level(start) || (end < block.len() && !top_level(end)) {
        return None;
    }
    let (first, last) = (block[start].0, block[end - 1].0);
    let rest: Vec<&str> = lines[..first]
        .iter()
        .chain(&lines[last + 1..])
        .copied()
        .collect();
    let rest = rest.join("\n");
    (!statements(&rest).is_empty()).then(|| rest.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recent_cell_sent_again_is_known_and_a_changed_one_is_not() {
        let cells = ["import pandas as pd\n\ndf = pd.read_csv('a.csv')\ndf.head()".to_owned()];
        // Whole, or a part of it, indented or spaced otherwise.
        assert!(copies_a_recent_cell(
            "df = pd.read_csv('a.csv')\n\n    df.head()\n",
            &cells
        ));
        // One line changed or added is new code; one line alone is too little to tell.
        assert!(!copies_a_recent_cell(
            "df = pd.read_csv('b.csv')\ndf.head()",
            &cells
        ));
        assert!(!copies_a_recent_cell(
            "df = pd.read_csv('a.csv')\ndf.head()\nprint(df.shape)",
            &cells
        ));
        assert!(!copies_a_recent_cell("df.head()", &cells));
        assert!(!copies_a_recent_cell("df = 1\ndf.head()", &[]));
        // Comments change nothing that runs: with them added, still a copy.
        assert!(copies_a_recent_cell(
            "# Load the data\ndf = pd.read_csv('a.csv')\n# Look at it\ndf.head()",
            &cells
        ));
        assert!(!copies_a_recent_cell("# one\n# two\ndf.head()", &cells));
    }

    /// The demo's cell that writes a skill file.
    const SKILL_CELL: &str = "from pathlib import Path\nfrom mahtab.tools import skills\n\n\
        skill_dir = Path('.mahtab/skills')\nskill_dir.mkdir(parents=True, exist_ok=True)\n\
        (skill_dir / 'table-summary.md').write_text(\n    'Summarise a table.\\n'\n    \
        '1. Print its shape.\\n'\n)\nskills()";

    #[test]
    fn a_cell_copied_inside_new_code_leaves_it() {
        let cells = [SKILL_CELL.to_owned()];
        // As the local model wrote it: the cell (its first line left out)
        // under a comment, then its own lines.
        let code = "# Load the skill\nfrom mahtab.tools import skills\n\n\
            skill_dir = Path('.mahtab/skills')\nskill_dir.mkdir(parents=True, exist_ok=True)\n\
            (skill_dir / 'table-summary.md').write_text(\n    'Summarise a table.\\n'\n    \
            '1. Print its shape.\\n'\n)\nskills()\n\n# Follow it\nprint(skill('table-summary'))";
        assert_eq!(
            without_copied_lines(code, &cells).as_deref(),
            Some("# Load the skill\n\n# Follow it\nprint(skill('table-summary'))")
        );
    }

    #[test]
    fn short_runs_indented_runs_and_whole_copies_stay() {
        let cells = [SKILL_CELL.to_owned()];
        // Two statements in a row are as often written afresh.
        let two = "from pathlib import Path\nfrom mahtab.tools import skills\nprint(skill('x'))";
        assert_eq!(without_copied_lines(two, &cells), None);
        // Inside the block's own loop, or ending where the block's own
        // indented lines go on: taken out, what is left would not read.
        let inside = "for _ in range(2):\n    skill_dir = Path('.mahtab/skills')\n    \
            skill_dir.mkdir(parents=True, exist_ok=True)\n    skills()";
        assert_eq!(without_copied_lines(inside, &cells), None);
        let before = "skill_dir = Path('.mahtab/skills')\n\
            skill_dir.mkdir(parents=True, exist_ok=True)\nskills()\n    print(1)";
        assert_eq!(without_copied_lines(before, &cells), None);
        // Nothing of its own: a copy, which `copies_a_recent_cell` tells.
        assert_eq!(without_copied_lines(SKILL_CELL, &cells), None);
        assert_eq!(
            without_copied_lines("a = 1\nb = 2\nc = 3\nd = 4", &[]),
            None
        );
    }
}
