//! Cheap checks before a model judges a turn: what a request says must exist
//! when it is done (a variable it names to store into, a file to write),
//! whether it asks for something done rather than said, and whether a turn
//! only repeated the one before it. Pure functions of text, so a small model's
//! misjudgement (correct code called unfinished, an answer with no code
//! called finished) is caught without another call.

use super::change_line::{self, Change, ChangeLine};
use crate::agent::run::{Execution, Targets};

/// File kinds a notebook request writes.
const FILE_KINDS: [&str; 16] = [
    "csv", "tsv", "json", "jsonl", "txt", "md", "png", "jpg", "svg", "pdf", "html", "xlsx",
    "parquet", "pkl", "yaml", "yml",
];

/// Words that say where a result goes.
const STORE_WORDS: [&str; 7] = ["store", "save", "assign", "put", "keep", "write", "export"];

/// Words right before the name of a variable to store into.
const INTO_WORDS: [&str; 6] = ["in", "into", "as", "called", "named", "variable"];

/// Things a request names that live inside a value, not in the namespace
/// ("a new column called total", "a feature named score").
const PARTS_OF_A_VALUE: [&str; 8] = [
    "column",
    "columns",
    "feature",
    "features",
    "field",
    "key",
    "attribute",
    "level",
];

/// Words that ask for something gone rather than made.
const REMOVE_WORDS: [&str; 5] = ["delete", "remove", "drop", "del ", "unset"];

/// What a request writes as the value of an assignment left to fill in
/// (`result = ...`, `answer = ?`).
const PLACEHOLDERS: [&str; 4] = ["...", "?", "???", "___"];

/// The variables and files `request` says will exist when it is done: the
/// names of an assignment it leaves to fill in (`result = ...  # put the
/// solution here`), names in backticks that the sentence stores into
/// (`store it in \`n\``, `a variable called total`), and file names after a
/// word of writing (`save it to out.csv`). A sentence that deletes or drops
/// something names nothing.
pub fn targets(request: &str) -> Targets {
    let mut found = Targets::default();
    for name in request.lines().flat_map(placeholder_assignment) {
        push_once(&mut found.names, name);
    }
    for sentence in sentences(request) {
        let lowered = sentence.to_lowercase();
        // What a sentence that removes something names goes away.
        if REMOVE_WORDS.iter().any(|word| lowered.contains(word)) {
            continue;
        }
        let storing = STORE_WORDS.iter().any(|word| lowered.contains(word));
        let words: Vec<&str> = sentence.split_whitespace().collect();
        for (i, word) in words.iter().enumerate() {
            let token = word
                .trim_end_matches('.')
                .trim_matches(|c: char| "`'\"(),:!?*".contains(c));
            let lead = i
                .checked_sub(1)
                .map(|j| words[j].to_lowercase())
                .unwrap_or_default();
            // What was called so: a column's or a key's name is not a
            // variable the namespace will hold.
            let kind = i
                .checked_sub(2)
                .map(|j| words[j].trim_matches(|c: char| !c.is_alphanumeric()))
                .unwrap_or_default()
                .to_lowercase();
            let names_a_part =
                (lead == "called" || lead == "named") && PARTS_OF_A_VALUE.contains(&kind.as_str());
            if storing
                && let Some((_, kind)) = token.rsplit_once('.')
                && FILE_KINDS.contains(&kind.to_ascii_lowercase().as_str())
                && token.len() > kind.len() + 1
            {
                push_once(&mut found.files, token);
            } else if is_identifier(token)
                && !names_a_part
                && (lead == "called"
                    || lead == "named"
                    || storing && INTO_WORDS.contains(&lead.as_str()))
                && (word.contains('`') || lead == "called" || lead == "named")
            {
                // "store it in `n`", "a variable called total"
                push_once(&mut found.names, token);
            }
        }
    }
    found
}

/// The names a line of code assigns when its value is a placeholder
/// (`result = ...  # put solution in this variable`, `a, b = ?`): the
/// request leaves that assignment for the answer to make.
fn placeholder_assignment(line: &str) -> Vec<&str> {
    let code = line.split_once('#').map_or(line, |(code, _)| code).trim();
    let Some((left, value)) = code.split_once('=') else {
        return Vec::new();
    };
    if !PLACEHOLDERS.contains(&value.trim()) || left.ends_with(['!', '<', '>']) {
        return Vec::new();
    }
    let names: Vec<&str> = left
        .trim()
        .trim_matches(['(', ')'])
        .split(',')
        .map(str::trim)
        .collect();
    if names.iter().all(|name| is_identifier(name)) {
        names
    } else {
        Vec::new()
    }
}

fn push_once(list: &mut Vec<String>, item: &str) {
    if !list.iter().any(|known| known == item) {
        list.push(item.to_owned());
    }
}

/// The words of `text` as Python reads names: runs of letters, digits and
/// underscores (`wind_speed` is one word, `df['a']` two).
pub fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|word| !word.is_empty())
}

/// The sentences of a request: split at line ends, `;`, `?`, `!` and a dot
/// followed by a space (a file name's dot is not a sentence's end).
pub fn sentences(request: &str) -> impl Iterator<Item = &str> {
    request
        .split(['\n', ';', '?', '!'])
        .flat_map(|part| part.split(". "))
}

/// Whether `word` is a Python identifier (not a keyword people type in
/// prose, such as `True`).
pub fn is_identifier(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
        && !matches!(word, "True" | "False" | "None")
}

/// Verbs that ask for something done in the notebook, whatever else the
/// request says.
const ACTIONS: [&str; 30] = [
    "calculate",
    "chart",
    "compute",
    "create",
    "debug",
    "draw",
    "execute",
    "export",
    "fit",
    "fix",
    "histogram",
    "implement",
    "impute",
    "load",
    "merge",
    "modify",
    "normalize",
    "pivot",
    "plot",
    "rename",
    "repair",
    "resample",
    "run",
    "save",
    "store",
    "tabulate",
    "train",
    "update",
    "visualize",
    "visualise",
];

/// Verbs that ask for something done when the request is about data (`count
/// the rows`, not `count to five`).
const DATA_ACTIONS: [&str; 21] = [
    "add",
    "aggregate",
    "build",
    "change",
    "clean",
    "convert",
    "count",
    "define",
    "drop",
    "extract",
    "filter",
    "find",
    "group",
    "make",
    "parse",
    "read",
    "replace",
    "sort",
    "split",
    "sum",
    "transform",
];

/// Words that say a request is about data.
const DATA_WORDS: [&str; 22] = [
    "array",
    "column",
    "columns",
    "csv",
    "data",
    "dataframe",
    "dataset",
    "dict",
    "file",
    "files",
    "frame",
    "json",
    "list",
    "matrix",
    "notebook",
    "row",
    "rows",
    "series",
    "table",
    "values",
    "variable",
    "variables",
];

/// Whether an answer with no code cannot have done `request`: it names
/// something to make, asks for an action in the notebook, or is about a
/// variable of the namespace (whose values an answer without code can only
/// guess).
pub fn needs_code(request: &str, namespace_names: &[String]) -> bool {
    if !targets(request).is_empty() {
        return true;
    }
    // Asking why, or for an explanation, is answered in words.
    let opening = request.trim_start().to_lowercase();
    if opening.starts_with("why")
        || opening.starts_with("explain")
        || opening.contains("what went wrong")
    {
        return false;
    }
    let words: Vec<&str> = words(request).collect();
    let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
    let has = |list: &[&str]| lower.iter().any(|w| list.contains(&w.as_str()));
    has(&ACTIONS)
        || has(&DATA_ACTIONS) && has(&DATA_WORDS)
        || words
            .iter()
            .any(|w| namespace_names.iter().any(|name| name == w))
}

/// How a change line says a table, series or array holds only missing
/// values (`mahtab/agent/namespace.py` writes it).
pub const EVERY_VALUE_MISSING: &str = "every value missing";

/// The values the change lines of `executions` say hold only missing values
/// (`result: DataFrame 3x2, columns D, E, every value missing (new)`).
pub fn hollow_values(executions: &[Execution]) -> Vec<&str> {
    let marker = format!(", {EVERY_VALUE_MISSING} (");
    let mut names: Vec<&str> = executions
        .iter()
        .flat_map(|e| e.changes.iter())
        .filter(|line| line.contains(&marker))
        .filter_map(|line| line.split_once(": ").map(|(name, _)| name))
        .collect();
    names.dedup();
    names
}

/// A table the code made that has no rows, and the line that made it.
#[derive(Debug, PartialEq)]
pub struct EmptySelection<'a> {
    /// The table (or series) with no rows.
    pub table: &'a str,
    /// The statement that assigned it (`picked = df[df['Kind'] == 'x']`).
    pub line: &'a str,
    /// The first column that statement reads (`df['Kind']`), whose values
    /// are what a selection compares against.
    pub column: Option<&'a str>,
}

/// The first table or series, in the order the code assigns them, that the
/// change lines of `executions` say has no rows (`picked: DataFrame 0x8,
/// columns ... (new)`): most often a selection that matched nothing, which
/// leaves what is computed from it missing.
pub fn empty_selection(executions: &[Execution]) -> Option<EmptySelection<'_>> {
    let empty: Vec<&str> = executions
        .iter()
        .flat_map(|e| e.changes.iter())
        .filter_map(|line| line.split_once(": "))
        .filter(|(_, described)| {
            described.starts_with("DataFrame 0x") || described.starts_with("Series shape (0,)")
        })
        .map(|(name, _)| name)
        .collect();
    executions
        .iter()
        .flat_map(|e| e.code.lines())
        .find_map(|line| {
            let (target, value) = line.split_once('=')?;
            let table = empty.iter().find(|name| target.trim() == **name)?;
            Some(EmptySelection {
                table,
                line: line.trim(),
                column: first_column_read(value),
            })
        })
}

/// The first `name['column']` (or `"column"`) in `code`.
fn first_column_read(code: &str) -> Option<&str> {
    let part = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices('[').find_map(|(at, _)| {
        let name_start = code[..at]
            .char_indices()
            .rev()
            .find(|(_, c)| !part(*c))
            .map_or(0, |(i, c)| i + c.len_utf8());
        if name_start == at {
            return None;
        }
        let rest = &code[at + 1..];
        let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '"')?;
        let close = rest[1..].find(quote)? + 1;
        rest[close + 1..]
            .starts_with(']')
            .then(|| &code[name_start..at + 1 + close + 2])
    })
}

/// What `name` was last set to, when that is no result at all: `"NaN"`
/// (missing values not skipped) or `"None"` (the result of a method that
/// changes in place), read from the change lines (`n: float = nan (new)`).
pub fn empty_value(executions: &[Execution], name: &str) -> Option<&'static str> {
    let described = executions
        .iter()
        .rev()
        .flat_map(|e| e.changes.iter().rev())
        .filter_map(|line| change_line::read(line))
        .find(|line| line.name == name)?
        .description;
    let described = described
        .strip_suffix(EVERY_VALUE_MISSING)
        .map_or(described, |text| text.trim_end_matches(", "));
    match described.rsplit_once(" = ")?.1 {
        "nan" | "np.float64(nan)" | "np.float32(nan)" | "<NA>" => Some("NaN"),
        "None" => Some("None"),
        _ => None,
    }
}

/// The user's variables (`user_names`: theirs when the run began) that the
/// `executions` rebound or changed in place, as their change lines say
/// ([`change_line::read`]), the last
/// changed first.
pub fn changed_user_values(executions: &[&Execution], user_names: &[String]) -> Vec<String> {
    let mut changed: Vec<String> = Vec::new();
    for line in executions.iter().rev().flat_map(|e| e.changes.iter().rev()) {
        let Some(ChangeLine { name, change, .. }) = change_line::read(line) else {
            continue;
        };
        let theirs = user_names.iter().any(|user| user == name);
        let rebound = matches!(change, Change::Rebound | Change::InPlace);
        if theirs && rebound && !changed.iter().any(|c| c == name) {
            changed.push(name.to_owned());
        }
    }
    changed
}

/// The variable names in a namespace summary (a line per variable, `name:`
/// first).
pub fn summary_names(summary: &str) -> Vec<String> {
    summary
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(name, _)| name.trim())
        .filter(|name| is_identifier(name))
        .map(str::to_owned)
        .collect()
}

/// Where the last turn (its `last_turn_blocks` blocks) ran code that ran
/// before with the very same outcome: [`Repeat::OfTheTurnBefore`] when the
/// blocks just before it are the same, [`Repeat::OfAnEarlierTurn`] when
/// other blocks came between (a small model that alternates between two
/// answers, each sent back, resends the first), else `None`.
pub fn repeated(executions: &[Execution], last_turn_blocks: usize) -> Option<Repeat> {
    let n = last_turn_blocks;
    if n == 0 || executions.len() < 2 * n {
        return None;
    }
    let (earlier, last) = executions.split_at(executions.len() - n);
    let same = |window: &[Execution]| {
        window.iter().zip(last).all(|(a, b)| {
            a.code.trim() == b.code.trim() && a.output == b.output && a.failed == b.failed
        })
    };
    let windows: Vec<&[Execution]> = earlier.windows(n).collect();
    let (just_before, before_that) = windows.split_last()?;
    if same(just_before) {
        Some(Repeat::OfTheTurnBefore)
    } else if before_that.iter().any(|window| same(window)) {
        Some(Repeat::OfAnEarlierTurn)
    } else {
        None
    }
}

/// Which turn a repeated turn repeats (see [`repeated`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    OfTheTurnBefore,
    OfAnEarlierTurn,
}

/// Whether `text` mentions `name` as a word of its own (not inside a
/// longer name).
pub fn mentions(text: &str, name: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_table_is_named_with_the_line_and_column_that_selected_it() {
        let block = |code: &str, changes: &[&str]| Execution {
            code: code.into(),
            output: String::new(),
            shown: None,
            failed: false,
            finished: true,
            changes: changes.iter().map(|c| (*c).to_owned()).collect(),
            rich_outputs: 0,
            images: Vec::new(),
        };
        // Recorded: the change lines list names in the namespace's order,
        // the code assigns the selection first.
        let code = "assault_df = df[df['Category'] == 'Assault']\n\
                    q1 = assault_df['Age'].quantile(0.25)\n\
                    outliers = assault_df[assault_df[\"Age\"] < q1]";
        let changes = [
            "outliers: DataFrame 0x8, columns Date, Age, Category (new)",
            "assault_df: DataFrame 0x8, columns Date, Age, Category (new)",
            "df: DataFrame 8638x8, columns Date, Age, Category (new)",
        ];
        let ran = [block(code, &changes)];
        let found = empty_selection(&ran).unwrap();
        assert_eq!(found.table, "assault_df");
        assert_eq!(found.line, "assault_df = df[df['Category'] == 'Assault']");
        assert_eq!(found.column, Some("df['Category']"));
        assert_eq!(first_column_read(" x[x[\"Age\"] < 3]"), Some("x[\"Age\"]"));
        assert_eq!(first_column_read(" x[0]"), None);
        assert_eq!(first_column_read("→x['é']"), Some("x['é']"));
        // Tables with rows: none.
        assert_eq!(empty_selection(&[block(code, &changes[2..])]), None);
    }

    #[test]
    fn values_that_hold_only_missing_values_are_named_once() {
        let ran = |changes: &[&str]| Execution {
            changes: changes.iter().map(|c| (*c).to_owned()).collect(),
            ..crate::agent::script::ok("")
        };
        let turns = [
            ran(&[
                "result: DataFrame 3x2, columns D, E, every value missing (new)",
                "f: function (new)",
            ]),
            ran(&["result: DataFrame 3x2, columns D, E, every value missing (changed)"]),
            ran(&["s: Series shape (2,) dtype float64 = 0 1.0 1 NaN (new)"]),
        ];
        assert_eq!(hollow_values(&turns), ["result"]);
        assert!(hollow_values(&turns[2..]).is_empty());
        // The Python side writes the words the check reads.
        let namespace_py = include_str!("../../python/mahtab/agent/namespace.py");
        let declared = format!("EVERY_VALUE_MISSING = \"{EVERY_VALUE_MISSING}\"");
        assert!(namespace_py.contains(&declared));
    }

    #[test]
    fn a_named_value_that_is_nan_or_none_is_found_from_the_latest_change() {
        let ran = |changes: &[&str]| Execution {
            changes: changes.iter().map(|c| (*c).to_owned()).collect(),
            ..crate::agent::script::ok("")
        };
        let nan = [ran(&[
            "m: float64 shape () dtype float64 = np.float64(nan) (new)",
        ])];
        assert_eq!(empty_value(&nan, "m"), Some("NaN"));
        let marked = [ran(&[
            "m: float64 shape () dtype float64 = np.float64(nan), every value missing (new)",
        ])];
        assert_eq!(empty_value(&marked, "m"), Some("NaN"));
        let none = [ran(&["df: NoneType = None (changed)"])];
        assert_eq!(empty_value(&none, "df"), Some("None"));
        // The latest change counts; other names and real values do not.
        let fixed = [nan[0].clone(), ran(&["m: float = 3.75 (changed)"])];
        assert_eq!(empty_value(&fixed, "m"), None);
        assert_eq!(empty_value(&nan, "other"), None);
    }

    fn names(request: &str) -> Vec<String> {
        targets(request).names
    }

    #[test]
    fn a_variable_to_store_into_is_a_target() {
        assert_eq!(
            names("How many distinct fruits are in sales? Store the number in `n_fruits`."),
            ["n_fruits"]
        );
        assert_eq!(
            names("Compute the mean price and keep it as `mean_price`"),
            ["mean_price"]
        );
        assert_eq!(
            names("Make a variable called totals with the sums"),
            ["totals"]
        );
        // Backticks that only mention a variable in use store nothing.
        assert!(names("What is the mean of `prices`?").is_empty());
    }

    #[test]
    fn a_column_or_key_called_something_is_not_a_variable_to_make() {
        // Recorded on a DABench question: the column was made, and the run
        // was sent back for a variable of that name until it stopped.
        let feature = "Perform feature engineering by creating a new feature called \
                       \"experience_score\" that is calculated by multiplying the exper column \
                       with the looks column.";
        assert!(names(feature).is_empty());
        assert!(names("Add a column named `total` to sales").is_empty());
        assert!(names("Give each row a key called id").is_empty());
        // What is called so is a variable where the sentence says so.
        assert_eq!(
            names("Store the new table in a DataFrame named `summary`"),
            ["summary"]
        );
        assert_eq!(
            names("Add a column called total, then store the table as a variable called out"),
            ["out"]
        );
    }

    #[test]
    fn a_file_to_write_is_a_target() {
        let found = targets("Save the cleaned table to clean.csv and the plot as plot.png.");
        assert_eq!(found.files, ["clean.csv", "plot.png"]);
        assert!(targets("Read data.csv and show its columns").is_empty());
        // Backticked names that are not where a result goes.
        assert!(
            targets("Rename column `a` to `b` and store the frame in df2")
                .names
                .is_empty()
        );
    }

    #[test]
    fn a_sentence_that_removes_names_nothing() {
        assert!(targets("Delete the variable `tmp` and save the rest to out.csv").is_empty());
        assert!(targets("Drop the variable called scratch").is_empty());
        // Another sentence of the request still names where results go.
        assert_eq!(
            names(
                "Drop the rows with missing values, then take the mean.\n\
                 Store the answers in a dict named `answers`."
            ),
            ["answers"]
        );
    }

    #[test]
    fn an_assignment_left_to_fill_in_names_its_variables() {
        let template = "How do I drop the rows whose value is 0?\n\
                        df = pd.DataFrame({'a': [0, 1]})\n\
                        result = ... # put solution in this variable";
        assert_eq!(names(template), ["result"]);
        assert_eq!(names("Find the bounds.\nlow, high = ?"), ["low", "high"]);
        assert_eq!(names("(a, b) = ...  # both"), ["a", "b"]);
        // A value written out, a comparison, an attribute or a call is not
        // a placeholder to fill.
        assert!(names("x = 3\ny = x + 1").is_empty());
        assert!(names("if x == ...:").is_empty());
        assert!(names("df.a = ...").is_empty());
        assert!(names("f(x=...)").is_empty());
        assert!(names("print('a = ...')").is_empty());
    }

    #[test]
    fn requests_for_an_action_or_about_the_data_need_code() {
        let namespace = vec!["sales".to_owned()];
        assert!(needs_code("Plot the revenue per month", &[]));
        assert!(needs_code("How many rows has sales?", &namespace));
        assert!(needs_code("Store 3 in `n`", &[]));
        assert!(!needs_code("What does a left join do?", &namespace));
        assert!(!needs_code("Hello!", &[]));
        assert!(!needs_code("count to five", &[]));
        assert!(!needs_code(
            "Why did that fail? ratio = 10 / count",
            &["count".to_owned()]
        ));
        assert!(needs_code("Count the rows of the table", &[]));
        assert!(needs_code(
            "label(3) fails with a TypeError. Fix label so that label(3) returns 'item 3'.",
            &[]
        ));
    }

    #[test]
    fn names_come_from_the_namespace_summary() {
        let summary = "sales: DataFrame (4, 3); columns ...\nn: int = 3\n(and 2 functions, classes or modules)";
        assert_eq!(summary_names(summary), ["sales", "n"]);
    }

    fn run(code: &str, output: &str) -> Execution {
        Execution {
            code: code.into(),
            output: output.into(),
            shown: None,
            failed: false,
            finished: false,
            changes: Vec::new(),
            rich_outputs: 0,
            images: Vec::new(),
        }
    }

    #[test]
    fn the_same_code_with_the_same_outcome_is_a_repeat() {
        let same = [run("x = 1", ""), run("x = 1\n", "")];
        assert_eq!(repeated(&same, 1), Some(Repeat::OfTheTurnBefore));
        let other_output = [run("print(x)", "1"), run("print(x)", "2")];
        assert_eq!(repeated(&other_output, 1), None);
        assert_eq!(repeated(&same[..1], 1), None);
        assert_eq!(repeated(&same, 0), None);
    }

    #[test]
    fn a_turn_that_resends_the_code_of_an_earlier_turn_is_a_repeat_of_it() {
        let turns = [run("a = 1", ""), run("b = 2", ""), run("a = 1", "")];
        assert_eq!(repeated(&turns, 1), Some(Repeat::OfAnEarlierTurn));
        // Two blocks a turn: the same two blocks, in order, ran before.
        let pairs = [
            run("a = 1", ""),
            run("print(a)", "1"),
            run("c = 3", ""),
            run("a = 1", ""),
            run("print(a)", "1"),
        ];
        assert_eq!(repeated(&pairs, 2), Some(Repeat::OfAnEarlierTurn));
        // Code that ran before with another outcome is no repeat.
        let other = [run("print(x)", "1"), run("x = 2", ""), run("print(x)", "2")];
        assert_eq!(repeated(&other, 1), None);
    }
}
