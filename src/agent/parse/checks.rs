//! Cheap checks before a model judges a turn: what a request says must exist
//! when it is done (a variable it names to store into, a file to write),
//! whether it asks for something done rather than said, and whether a turn
//! only repeated the one before it. Pure functions of text, so a small model's
//! misjudgement (correct code called unfinished, an answer with no code
//! called finished) is caught without another call.

use crate::agent::run::{Execution, Targets};
use std::borrow::Cow;

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
    let line = executions
        .iter()
        .rev()
        .flat_map(|e| e.changes.iter().rev())
        .find(|line| line.split_once(": ").is_some_and(|(n, _)| n == name))?;
    let described = line
        .rsplit_once(" (")
        .map_or(line.as_str(), |(text, _)| text);
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
/// (`sales: DataFrame 4x4, columns ... (changed in place)`), the last
/// changed first.
pub fn changed_user_values(executions: &[&Execution], user_names: &[String]) -> Vec<String> {
    let mut changed: Vec<String> = Vec::new();
    for line in executions.iter().rev().flat_map(|e| e.changes.iter().rev()) {
        let Some((name, _)) = line.split_once(": ") else {
            continue;
        };
        let theirs = user_names.iter().any(|user| user == name);
        let rebound = line.ends_with("(changed)") || line.ends_with("(changed in place)");
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

/// The first line of an error's last line (`NameError: name 'x' is not
/// defined`), for telling the model what failed.
pub fn error_line(output: &str) -> &str {
    output
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("")
        .trim()
}

/// Like [`error_hint`], for a failed block's whole `output`: the traceback
/// can say more than the error (a column picked before `groupby` makes the
/// grouping column's KeyError, though the table has that column; a lookup
/// that fails inside a function a library called means the function was
/// given something else than the code assumed).
pub fn failure_hint(output: &str) -> Option<Cow<'static, str>> {
    let error = error_line(output);
    let lookup = ["KeyError", "IndexError", "AttributeError"]
        .iter()
        .any(|kind| error.starts_with(kind));
    if lookup && let Some((function, library)) = failing_callback(output) {
        let pandas = if library == "pandas" {
            " (pandas' agg, apply and transform pass one column, row or group at a time, not \
             the whole table)"
        } else {
            ""
        };
        return Some(Cow::Owned(format!(
            "the error is raised inside {function}, which {library} calls: it is given \
             something else than the code assumed{pandas}; print type() and a few values of \
             what it receives, or compute without it"
        )));
    }
    if let Some((function, library)) = called_otherwise(output, error) {
        let pandas = if library == "pandas" {
            " (pandas' agg, apply, transform and pivot_table's aggfunc pass one column, row or \
             group at a time; for a function per column, pass a dict such as \
             {'a': 'sum', 'b': 'mean'})"
        } else {
            ""
        };
        return Some(Cow::Owned(format!(
            "{library} calls {function} itself, with the arguments {library} passes, not \
             those the code meant{pandas}; write {function} to take what it is given, or \
             compute without it"
        )));
    }
    if let Some(key) = error
        .strip_prefix("KeyError: ")
        .map(|key| key.split(". Did you mean: ").next().unwrap_or(key))
        .map(|key| key.split(". Columns of ").next().unwrap_or(key))
        .map(|key| key.trim_matches(['\'', '"']))
        && ["'", "\""]
            .iter()
            .any(|quote| output.contains(&format!("].groupby({quote}{key}{quote}")))
    {
        return Some(Cow::Borrowed(
            "a column was picked before groupby, so the column to group by is not in it: \
             group the table and pick the column after (table.groupby('key')['value'].sum())",
        ));
    }
    if let Some(check) = own_check_raised(output) {
        return Some(Cow::Owned(format!(
            "the block's own check raised it (`{check}`): what it tests is so, and the \
             values it tests are what is wrong, not the check; print them and fix the step \
             that computes them"
        )));
    }
    if let Some(name) = filled_before_made(output, error) {
        return Some(Cow::Owned(format!(
            "the code puts items into {name}, but nothing made {name}: create it first, in \
             the same block ({name} = {{}} for a dict, {name} = [] for a list)"
        )));
    }
    error_hint(error).map(Cow::Borrowed)
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

/// The name a `NameError` line says is not defined.
pub fn undefined_name(error_line: &str) -> Option<&str> {
    Some(
        error_line
            .strip_prefix("NameError: name '")?
            .split_once('\'')?
            .0,
    )
}

/// The name a failed block put items into (`answers['mean'] = ...`,
/// `rows.append(...)`) before anything made it, from its `NameError`: a
/// small model told to store results in a dict often fills one it never
/// created, and "define the name" alone does not tell it how.
fn filled_before_made<'a>(output: &'a str, error: &'a str) -> Option<&'a str> {
    let name = undefined_name(error)?;
    let filled = |line: &str| {
        let Some(rest) = line.trim().strip_prefix(name) else {
            return false;
        };
        let item_set = rest.starts_with('[')
            && rest
                .split_once("] =")
                .is_some_and(|(_, value)| !value.starts_with('='));
        let added = [".append(", ".extend(", ".update(", ".add(", ".setdefault("]
            .iter()
            .any(|method| rest.starts_with(method));
        item_set || added
    };
    output.lines().any(filled).then_some(name)
}

/// The line of the agent's code, counted from 1, whose top-level statement
/// raised the error in `output`'s traceback (`File "<agent>", line 14, in
/// <module>`).
pub fn failed_line(output: &str) -> Option<usize> {
    output.lines().map(str::trim).find_map(|line| {
        let rest = line.strip_prefix("File \"<agent>\", line ")?;
        let (number, place) = rest.split_once(", in ")?;
        (place.trim() == "<module>").then(|| number.parse().ok())?
    })
}

/// The statement of the agent's code that raised the error in `output`'s
/// traceback, when it is a `raise` or `assert` of the block's top level:
/// a check the model wrote of its own values (`if result.shape != (93,
/// 13): raise ValueError(...)`). A small model told only to fix the error
/// moves or removes the check. (In a function, a `raise` may be what the
/// request asks the function to do.)
fn own_check_raised(output: &str) -> Option<&str> {
    let lines: Vec<&str> = output.lines().map(str::trim).collect();
    let frame = lines
        .iter()
        .rposition(|line| line.starts_with("File \"") || line.starts_with("... "))?;
    let place = lines[frame]
        .strip_prefix("File \"<agent>\", line ")?
        .split_once(", in ")?
        .1;
    let statement = *lines.get(frame + 1)?;
    (place == "<module>" && (statement.starts_with("raise ") || statement.starts_with("assert ")))
        .then_some(statement)
}

/// The agent's function a library called with other arguments than it
/// takes (`TypeError: custom_agg() missing 1 required positional argument`
/// raised where the traceback's last frames are the library's), and that
/// library.
fn called_otherwise<'a>(output: &'a str, error: &'a str) -> Option<(&'a str, &'a str)> {
    let (function, complaint) = error.strip_prefix("TypeError: ")?.split_once("() ")?;
    let arguments = ["missing ", "takes ", "got an unexpected keyword argument"]
        .iter()
        .any(|start| complaint.starts_with(start));
    if !arguments || !is_identifier(function) {
        return None;
    }
    // The innermost frame: the library's, right after the agent's call.
    let mut innermost = None;
    for line in output.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("... ") {
            innermost = rest.split_once(" in ").map(|(_, library)| library);
        } else if line.starts_with("File \"") {
            innermost = None;
        }
    }
    innermost.map(|library| (function, library))
}

/// The function of the agent's code that raised the error in `output`'s
/// traceback, and the library that called it: the innermost frame of agent
/// code (`File "<agent>", line 8, in total_of`) is a function's, right
/// after a line of library frames (`... 8 frames in pandas`).
fn failing_callback(output: &str) -> Option<(&str, &str)> {
    let mut caller = None;
    let mut last = None;
    for line in output.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("... ") {
            caller = rest.split_once(" in ").map(|(_, library)| library);
        } else if let Some(rest) = line.strip_prefix("File \"<agent>\", line ") {
            let function = rest.split_once(", in ").map(|(_, name)| name.trim());
            last = function.zip(caller);
            caller = None;
        }
    }
    let (function, library) = last?;
    (function != "<module>" && !function.starts_with('<')).then_some((function, library))
}

/// What a common error means and how it is usually fixed, for a small
/// model that reads the error and sends the same code again. `error_line`
/// is the error's last line (see [`error_line`]).
pub fn error_hint(error_line: &str) -> Option<&'static str> {
    const ROWS: &str = "table[values] looks the values up as column names; to pick rows use a \
                        boolean mask (table[table['a'] > 1]) or a row's label \
                        (table.loc[table['a'].idxmax()])";
    const PAST_THE_END: &str = "an index past the end: check the length first";
    // Each error's signs (all must be in the line), then the hint; the first
    // match wins, so the specific comes before the general.
    const HINTS: [(&[&str], &str); 18] = [
        (
            &["No module named 'mahtab."],
            "the toolbox's functions are already defined: call them directly, without \
             importing (skill('name') gives a skill's instructions)",
        ),
        (&["KeyError: \"None of [", "are in the [columns]"], ROWS),
        (
            &["KeyError: '[", "not in index"],
            "computed values were looked up as row labels: compute the values in a \
             variable first, then find the label (values.idxmax()) and look that up; \
             mind that a * b.idxmax() is a * (b.idxmax()), so write (a * b).idxmax()",
        ),
        (
            &["is ambiguous"],
            "combine conditions with & and | (each in parentheses), or reduce with \
             .any() or .all()",
        ),
        (
            &["could not convert string to float"],
            "the values are text: clean them first (strip symbols, \
             pd.to_numeric(values, errors='coerce'))",
        ),
        (
            &["unsupported operand type", "'str'"],
            "some values are text: convert them first to what they stand for \
             (pd.to_datetime for dates, pd.to_numeric for numbers, int() or float() \
             for one value)",
        ),
        (
            &["expected str instance, float found"],
            "a missing value (NaN) is a float, and join takes only text: join the values \
             that are there ('-'.join(row.dropna())), or turn each into text first",
        ),
        (
            &["Can only use .dt accessor"],
            "the values are not dates yet: convert them with pd.to_datetime first",
        ),
        (
            &["unsupported operand type"],
            "the values' types do not combine: convert them first (int(), float(), \
             str(), pd.to_numeric)",
        ),
        (
            &["object has no attribute"],
            "that attribute does not exist: a table's column is table['name']; check \
             the names with print(dir(value)) or print(table.columns)",
        ),
        (
            &["Unalignable boolean Series"],
            "the mask's labels are not the table's: print mask.index and table.index; a \
             mask over one level of the table's index is looked up by that level \
             (table[mask[table.index.get_level_values('a')].values])",
        ),
        (
            &["KeyError:", " is a value of ", "not one of its labels"],
            "that key is a value, not a label: loop over the labels (series.index) or the \
             pairs (for label, value in series.items())",
        ),
        (
            &["KeyError:", ". Did you mean: "],
            "that key is not there, but the error names a close one: use that name, \
             spelled exactly as the error quotes it",
        ),
        (
            &["KeyError:", ". Columns of "],
            "that column is not there: the error lists the columns the table has; use \
             one of them, or compute the missing value from them first",
        ),
        (
            &["KeyError:"],
            "that key or column is not there: print the keys or columns and use one \
             that exists",
        ),
        (
            &["NameError: name"],
            "define or import the name in the same block; the namespace above lists \
             what exists",
        ),
        (&["out of range"], PAST_THE_END),
        (&["out-of-bounds"], PAST_THE_END),
    ];
    HINTS
        .iter()
        .find(|(signs, _)| signs.iter().all(|sign| error_line.contains(sign)))
        .map(|(_, hint)| *hint)
}

/// Whether a block's output says it was not run (the guard's refusal, the
/// user's no), which the kernel words so.
pub fn refused(output: &str) -> bool {
    output.starts_with("Not run:")
}

/// The last quoted text of an error line (`'data.csv'` of `No such file or
/// directory: 'data.csv'`).
fn last_quoted(text: &str) -> Option<&str> {
    let end = text.rfind(['\'', '"'])?;
    let start = text[..end].rfind(['\'', '"'])? + 1;
    Some(&text[start..end])
}

/// For a file or a module the code reached for that is not there, when
/// nothing the user wrote (`asked`: the request and the cells they ran)
/// names it: the model's own guess, which another attempt can do without.
/// The hint that says so; None for anything else.
pub fn not_asked_for(error_line: &str, asked: &str) -> Option<String> {
    let named = |name: &str| !name.is_empty() && asked.contains(name);
    if let Some(rest) = error_line.strip_prefix("FileNotFoundError:") {
        let path = last_quoted(rest)?;
        let file = path.rsplit('/').next().unwrap_or(path);
        return (!named(file)).then(|| {
            format!(
                "there is no file {file:?} here, and the request names none: the data is in \
                 the variables of the namespace above; work on them instead of reading a file"
            )
        });
    }
    if error_line.starts_with("ModuleNotFoundError:") {
        let module = last_quoted(error_line)?;
        let package = module.split('.').next().unwrap_or(module);
        return (!named(package)).then(|| {
            format!(
                "{package} is not installed here, and the request does not ask for it: do \
                 it with what is (pandas, numpy, the standard library)"
            )
        });
    }
    None
}

/// A block that failed reading a file that is not there into a variable
/// the namespace already holds (`df = pd.read_csv('data.csv')` beside a
/// loaded `df`, the request quoting how it was made), without that line.
#[derive(Debug, PartialEq)]
pub struct Reload {
    /// The variable the line assigned.
    pub name: String,
    /// The file it read.
    pub file: String,
    /// The block without the line.
    pub code: String,
}

/// The [`Reload`] of `code`, whose block failed with `error_line`, when the
/// line that read the missing file is one whole top-level statement
/// assigning a variable in `namespace_names`.
pub fn reloads_a_variable(
    code: &str,
    error_line: &str,
    namespace_names: &[String],
) -> Option<Reload> {
    let path = last_quoted(error_line.strip_prefix("FileNotFoundError:")?)?;
    let file = path.rsplit('/').next().filter(|file| !file.is_empty())?;
    let lines: Vec<&str> = code.lines().collect();
    let (index, name) = lines.iter().enumerate().find_map(|(index, line)| {
        let (target, value) = line.split_once('=')?;
        let name = target.trim_end();
        let whole = !line.starts_with(char::is_whitespace)
            && value.contains(file)
            && value.matches('(').count() == value.matches(')').count()
            && !value.trim_end().ends_with(['\\', ',']);
        let loaded = is_identifier(name) && namespace_names.iter().any(|n| n == name);
        (whole && loaded).then(|| (index, name.to_owned()))
    })?;
    let rest: Vec<&str> = lines
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != index)
        .map(|(_, line)| *line)
        .collect();
    Some(Reload {
        name,
        file: file.to_owned(),
        code: rest.join("\n"),
    })
}

/// Errors about the world outside the code (a file, a package, a
/// connection, a permission), which another attempt may not be able to fix:
/// for those a review decides whether the request can be done at all.
pub fn may_be_unfixable(error_line: &str) -> bool {
    // A module of this kernel's own that is not there is a guess at where
    // the toolbox lives, which another attempt can fix.
    if error_line.contains("No module named 'mahtab") {
        return false;
    }
    [
        "FileNotFoundError",
        "ModuleNotFoundError",
        "ImportError",
        "PermissionError",
        "ConnectionError",
        "ConnectionRefusedError",
        "TimeoutError",
        "URLError",
        "HTTPError",
        "IsADirectoryError",
    ]
    .iter()
    .any(|kind| error_line.starts_with(kind) || error_line.contains(&format!(".{kind}")))
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
    fn a_check_the_block_raised_itself_is_told_apart() {
        // Recorded from the 1.5B coder model padding an array.
        let output = "Traceback (most recent call last):\n  File \"<agent>\", line 15, in <module>\n    \
                      raise ValueError(\"The result array does not have the shape (93, 13)\")\n\
                      ValueError: The result array does not have the shape (93, 13)";
        let hint = failure_hint(output).unwrap();
        assert!(
            hint.starts_with("the block's own check raised it (`raise ValueError(\"The result"),
            "{hint}"
        );
        let asserted =
            "  File \"<agent>\", line 3, in <module>\n    assert total > 0\nAssertionError";
        assert!(
            failure_hint(asserted)
                .unwrap()
                .contains("`assert total > 0`")
        );
        // A raise in a function (maybe what was asked), or one a library
        // made after the block's line: not the block's own check.
        let in_function = "  File \"<agent>\", line 9, in <module>\n    check(-1)\n  \
                           File \"<agent>\", line 3, in check\n    raise ValueError(\"negative\")\n\
                           ValueError: negative";
        assert_eq!(own_check_raised(in_function), None);
        let library = "  File \"<agent>\", line 2, in <module>\n    raise_for(x)\n  \
                       ... 3 frames in pandas\nValueError: bad";
        assert_eq!(own_check_raised(library), None);
    }

    #[test]
    fn the_failed_line_is_the_top_level_statements() {
        let output = "Traceback (most recent call last):\n  File \"<agent>\", line 13, in \
                      <module>\n    result = f(df)\n  File \"<agent>\", line 8, in f\n    \
                      return 1/0\nZeroDivisionError: division by zero";
        assert_eq!(failed_line(output), Some(13));
        assert_eq!(failed_line("NameError: name 'NaN' is not defined"), None);
    }

    #[test]
    fn a_missing_file_read_into_a_loaded_variable_is_left_out() {
        let names = ["df".to_owned()];
        let error = "FileNotFoundError: [Errno 2] No such file or directory: 'inn.txt'";
        let code = "import pandas as pd\ndf = pd.read_csv('inn.txt', sep='\\t')\nprint(df)";
        let reload = reloads_a_variable(code, error, &names).unwrap();
        assert_eq!(
            (reload.name.as_str(), reload.file.as_str()),
            ("df", "inn.txt")
        );
        assert_eq!(reload.code, "import pandas as pd\nprint(df)");
        // A variable not loaded, another file, another error: none.
        assert_eq!(reloads_a_variable(code, error, &["x".to_owned()]), None);
        let other = "FileNotFoundError: [Errno 2] No such file or directory: 'b.csv'";
        assert_eq!(reloads_a_variable(code, other, &names), None);
        assert_eq!(
            reloads_a_variable(code, "KeyError: 'inn.txt'", &names),
            None
        );
        // Not one whole top-level statement: left as it is.
        let compared = "if df == pd.read_csv('inn.txt'):\n    pass";
        assert_eq!(reloads_a_variable(compared, error, &names), None);
        let nested = "try:\n    df = pd.read_csv('inn.txt')\nexcept OSError:\n    pass";
        assert_eq!(reloads_a_variable(nested, error, &names), None);
        let continued = "df = pd.read_csv('inn.txt',\n    sep=',')";
        assert_eq!(reloads_a_variable(continued, error, &names), None);
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

    #[test]
    fn a_file_or_module_nobody_asked_for_is_the_models_guess() {
        let missing_file = "FileNotFoundError: [Errno 2] No such file or directory: 'data/inn.txt'";
        let hint = not_asked_for(missing_file, "count the special characters of df['str']");
        assert!(hint.unwrap().contains("no file \"inn.txt\" here"));
        // A file the request or the user's cells name may really be missing.
        assert_eq!(not_asked_for(missing_file, "read inn.txt and count"), None);
        let module = "ModuleNotFoundError: No module named 'scipy.stats'";
        let hint = not_asked_for(module, "flag outliers by z-score").unwrap();
        assert!(hint.starts_with("scipy is not installed here"), "{hint}");
        assert_eq!(not_asked_for(module, "use scipy to flag outliers"), None);
        assert_eq!(not_asked_for("PermissionError: [Errno 13] 'x'", ""), None);
        assert_eq!(not_asked_for("KeyError: 'a'", ""), None);
    }

    #[test]
    fn a_guessed_module_of_the_toolbox_is_fixable_and_says_how() {
        let guessed = "ModuleNotFoundError: No module named 'mahtab.skills'";
        assert!(!may_be_unfixable(guessed));
        assert!(error_hint(guessed).unwrap().contains("skill('name')"));
        assert!(may_be_unfixable(
            "ModuleNotFoundError: No module named 'polars'"
        ));
    }

    #[test]
    fn text_that_does_not_combine_is_converted_to_what_it_stands_for() {
        let text = "TypeError: unsupported operand type(s) for -: 'str' and 'str'";
        assert!(
            error_hint(text)
                .unwrap()
                .contains("pd.to_datetime for dates")
        );
        let none = "TypeError: unsupported operand type(s) for +: 'int' and 'NoneType'";
        assert!(error_hint(none).unwrap().contains("do not combine"));
        let joined = "TypeError: sequence item 2: expected str instance, float found";
        assert!(error_hint(joined).unwrap().contains("row.dropna()"));
        let dates = "AttributeError: Can only use .dt accessor with datetimelike values";
        assert!(error_hint(dates).unwrap().contains("pd.to_datetime"));
    }

    #[test]
    fn common_errors_come_with_a_hint_and_the_specific_one_wins() {
        let rows =
            r#"KeyError: "None of [Index([6.0, 2.0], dtype='float64')] are in the [columns]""#;
        assert!(error_hint(rows).unwrap().contains("boolean mask"));
        assert!(
            error_hint("KeyError: 'plums'")
                .unwrap()
                .contains("print the keys")
        );
        assert!(
            error_hint("ValueError: The truth value of a Series is ambiguous.")
                .unwrap()
                .contains("&")
        );
        assert!(
            error_hint("IndexError: single positional indexer is out-of-bounds")
                .unwrap()
                .contains("past the end")
        );
        assert!(
            error_hint("KeyError: '[9, 6, 15] not in index'")
                .unwrap()
                .contains("(a * b).idxmax()")
        );
        assert_eq!(error_hint("ZeroDivisionError: division by zero"), None);
        // Recorded from the 1.5B coder model (a mask over one level of a
        // MultiIndex), and as close_names.py words a key that is a value.
        let unaligned = "pandas.errors.IndexingError: Unalignable boolean Series provided as \
                         indexer (index of the boolean Series and of the indexed object do not \
                         match).";
        assert!(error_hint(unaligned).unwrap().contains("get_level_values"));
        let value = "KeyError: nan. nan is a value of row, not one of its labels: `for x in row` \
                     gives its values; row.index gives the labels, row.items() both";
        assert!(error_hint(value).unwrap().contains("series.items()"));
        // Recorded from the 1.5B coder model: the traceback's line says why.
        let grouped = "Traceback (most recent call last):\n  File \"<agent>\", line 4, in <module>\n    sales['qty'].groupby('fruit').sum().plot(kind='bar')\n  ... 4 frames in pandas\nKeyError: 'fruit'";
        assert!(failure_hint(grouped).unwrap().contains("group the table"));
        assert!(
            failure_hint("KeyError: 'plums'")
                .unwrap()
                .contains("print the keys")
        );
        // Recorded from the 1.5B coder model: a lookup failing inside the
        // block's own function, which pandas called with one column.
        let callback = "Traceback (most recent call last):\n  File \"<agent>\", line 13, in <module>\n    result = pd.pivot_table(df, values=['D', 'E'], index=['A'], aggfunc=custom_aggfunc)\n  ... 8 frames in pandas\n  File \"<agent>\", line 8, in custom_aggfunc\n    'sum_D': values['D'].sum(),\n             ~~~~~~^^^^^\n  ... 3 frames in pandas\nKeyError: 'D'";
        let hint = failure_hint(callback).unwrap();
        assert!(
            hint.contains("inside custom_aggfunc, which pandas calls"),
            "{hint}"
        );
        assert!(hint.contains("one column, row or group at a time"));
        // Called by the block itself, a function's KeyError is a missing key.
        let own = callback.replace("  ... 8 frames in pandas\n", "");
        assert!(failure_hint(&own).unwrap().contains("print the keys"));
        // Another error inside a callback keeps its own hint.
        let text = callback.replace(
            "KeyError: 'D'",
            "ValueError: could not convert string to float: 'x'",
        );
        assert!(failure_hint(&text).unwrap().contains("the values are text"));
        // A key close to one that exists (close_names.py): use that one.
        let close = "KeyError: 'wind_speed'. Did you mean: 'wind speed' (a column of weather)?";
        assert!(error_hint(close).unwrap().contains("spelled exactly"));
        let suggested = grouped.replace(
            "KeyError: 'fruit'",
            "KeyError: 'fruit'. Did you mean: 'Fruit' (a column of sales)?",
        );
        assert!(
            failure_hint(&suggested)
                .unwrap()
                .contains("group the table")
        );
        // No close key: the error lists the table's columns (close_names.py).
        let listed =
            "KeyError: \"Label(s) ['Count_d'] do not exist\". Columns of df: 'Date', 'Val'";
        assert!(error_hint(listed).unwrap().contains("lists the columns"));
        let grouped_listed = grouped.replace(
            "KeyError: 'fruit'",
            "KeyError: 'fruit'. Columns of sales: 'qty', 'fruit'",
        );
        assert!(
            failure_hint(&grouped_listed)
                .unwrap()
                .contains("group the table")
        );
    }

    #[test]
    fn a_function_a_library_called_with_other_arguments_is_told_what_it_is_given() {
        // Recorded from the 1.5B coder model, sent four times unchanged.
        let called = "Traceback (most recent call last):\n  File \"<agent>\", line 9, in <module>\n    result = pd.pivot_table(df, values=['D', 'E'], index=['B'], aggfunc=custom_agg)\n             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n  ... 8 frames in pandas\nTypeError: custom_agg() missing 1 required positional argument: 'E'";
        let hint = failure_hint(called).unwrap();
        assert!(hint.contains("pandas calls custom_agg itself"), "{hint}");
        assert!(hint.contains("{'a': 'sum', 'b': 'mean'}"), "{hint}");
        // Called by the agent's own code, the arguments are the code's to fix.
        let own = called.replace("  ... 8 frames in pandas\n", "");
        assert_eq!(failure_hint(&own), None);
        // Another library says nothing of pandas' ways.
        let numpy = called.replace("in pandas", "in numpy");
        let hint = failure_hint(&numpy).unwrap();
        assert!(hint.contains("numpy calls custom_agg") && !hint.contains("pandas"));
        // Another TypeError raised in the library is not about arguments.
        let other = called.replace(
            "custom_agg() missing 1 required positional argument: 'E'",
            "unsupported operand type(s) for +: 'int' and 'str'",
        );
        assert!(!failure_hint(&other).unwrap().contains("calls"));
    }

    #[test]
    fn a_name_filled_before_anything_made_it_is_told_to_be_created_first() {
        // Recorded from the 1.5B coder model, sent three times unchanged
        // under "define or import the name".
        let filled = "Traceback (most recent call last):\n  File \"<agent>\", line 13, in <module>\n    answers['@correlation_coefficient[correlation_coefficient]'] = correlation_coefficient\n     ^^^^^^^\nNameError: name 'answers' is not defined";
        let hint = failure_hint(filled).unwrap();
        assert!(hint.contains("answers = {} for a dict"), "{hint}");
        let appended = filled.replace(
            "answers['@correlation_coefficient[correlation_coefficient]'] = correlation_coefficient",
            "rows.append(row)",
        );
        let appended = appended.replace("'answers'", "'rows'");
        assert!(failure_hint(&appended).unwrap().contains("rows = []"));
        // Read, compared or called, the name is a plain undefined name.
        for line in [
            "total = answers['mean']",
            "answers['mean'] == 1",
            "answers(1)",
        ] {
            let read = filled.replace(
                "answers['@correlation_coefficient[correlation_coefficient]'] = correlation_coefficient",
                line,
            );
            let hint = failure_hint(&read).unwrap();
            assert!(hint.contains("define or import"), "{line}: {hint}");
        }
        // Another name's items set on the line say nothing of this one.
        let other = filled.replace("'answers'", "'correlation_coefficient'");
        assert!(failure_hint(&other).unwrap().contains("define or import"));
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
