//! What a failed block's output says: its error line, the line of the
//! code that raised it, and a hint for the next turn where the error or its
//! traceback points at a known mistake (a column picked before `groupby`, a
//! function a library calls given other arguments, a check the block raised
//! itself, a file or module nobody asked for). Pure functions of text.

use crate::agent::parse::checks::is_identifier;
use std::borrow::Cow;

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
    const ROWS: &str = "table[values] looks the values up as column names: to pick columns, \
                        list their names (table[['a', 'b']], not the columns themselves as \
                        in table[[table.a, table.b]]); to pick rows use a boolean mask \
                        (table[table['a'] > 1]) or a row's label \
                        (table.loc[table['a'].idxmax()])";
    const PAST_THE_END: &str = "an index past the end: check the length first";
    const TEXT_NOT_NUMBERS: &str = "the values are text, and the error quotes one that fails: \
                                    clean them to the number each stands for (strip symbols \
                                    such as '$' and ','; where more than a number is written, \
                                    take the number out with \
                                    values.str.extract(r'(-?\\d+(?:\\.\\d+)?)')[0]); \
                                    pd.to_numeric(values, errors='coerce') makes what is left \
                                    NaN";
    const LENGTHS: &str = "the values given for the table differ in length from each other \
                           or from its rows: print len() of each; a column needs one value \
                           per row (one single value is repeated by itself), and every pair \
                           of two lists' items is pd.MultiIndex.from_product([a, b], \
                           names=['a', 'b']).to_frame(index=False)";
    const SOME_TEXT: &str = "some values are text: convert them first to what they stand for \
                             (pd.to_datetime for dates, pd.to_numeric for numbers, int() or \
                             float() for one value)";
    const CALL_IT: &str = "a function or method was used where its value was meant: call it \
                           (values.count(), not values.count); a def named like a variable \
                           replaces that variable, so give the function a name of its own";
    const NUMBER_METHODS: &str = "a plain Python number has no such method: use Python's own \
                                  functions on it (round(x, 2), abs(x)), or keep the values in \
                                  a Series to use its methods";
    const NONE_VALUE: &str = "a value is None: a call that changes a table in place \
                              (inplace=True, a def without return) gives nothing back, or a \
                              lookup found nothing: print it, and use the value the code \
                              means (the table itself, a return in the def)";
    // Each error's signs (all must be in the line), then the hint; the first
    // match wins, so the specific comes before the general.
    const HINTS: [(&[&str], &str); 35] = [
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
        (&["could not convert string to float"], TEXT_NOT_NUMBERS),
        (&["invalid literal for int()"], TEXT_NOT_NUMBERS),
        (
            &["No group keys passed"],
            "nothing to group by reached pandas: name the key columns (table.groupby('a')); \
             pivot_table takes them as index= and columns= (rows= and cols= are an old \
             pandas' names, no longer read)",
        ),
        (&["All arrays must be of the same length"], LENGTHS),
        // pd.DataFrame(data, columns=names) with a name more or fewer.
        (
            &["columns passed, passed data had"],
            "the column names given are more or fewer than the data's columns: print \
             the data's shape and give one name per column",
        ),
        // pd.DataFrame(columns, index=labels) with fewer labels than values.
        (&["array length", "does not match index length"], LENGTHS),
        // table['new'] = values, with more or fewer values than rows.
        (
            &["Length of values", "does not match length of index"],
            LENGTHS,
        ),
        (&["'NoneType'"], NONE_VALUE),
        (
            &["not supported between instances of", "'function'"],
            CALL_IT,
        ),
        (&["not supported between instances of", "method'"], CALL_IT),
        (&["unsupported operand type", "'function'"], CALL_IT),
        (&["unsupported operand type", "method'"], CALL_IT),
        (&["unsupported operand type", "'str'"], SOME_TEXT),
        // A mean or sum over a column of text (pandas 2).
        (&["Cannot perform reduction"], SOME_TEXT),
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
            &["NAType"],
            "a value is missing (pd.NA) and plain Python fails on it: use the \
             Series' own methods (values.round(2), values.fillna(0)), or drop the \
             missing values first (values.dropna())",
        ),
        (
            &["no field of name"],
            "the structured array has no field of that name: print array.dtype.names \
             for the ones it has",
        ),
        (&["'float' object has no attribute"], NUMBER_METHODS),
        (&["'int' object has no attribute"], NUMBER_METHODS),
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
        // table.drop(labels) with labels the rows no longer (or never) had.
        (
            &["not found in axis"],
            "drop() looks the labels up in the table's index (its rows) unless given \
             columns=[...], and these are not there (dropped already, or positions \
             rather than labels): print the index; drop every row once \
             (table.drop(index=a.union(b))) or keep rows by a mask (table[~mask])",
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
        let mixed = "TypeError: unsupported operand type(s) for +: 'int' and 'list'";
        assert!(error_hint(mixed).unwrap().contains("do not combine"));
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
        // The columns themselves in a list (`df[[df.a, df.b]]`), recorded
        // from the 1.5B model: their values show as tuples of the rows.
        let columns = "KeyError: \"None of [Index([('a', nan, 'c'), ('d', 'e', nan)],\n      dtype='object')] are in the [columns]\". Columns of df: 'users', 'keywords_0'";
        assert!(
            error_hint(columns)
                .unwrap()
                .contains("list their names (table[['a', 'b']]")
        );
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
        // As pandas words it for a column of text cast to int (a DABench
        // table's counts written with their range): the number is taken
        // out, not its symbols stripped (which made '298110510').
        let cast = "ValueError: invalid literal for int() with base 10: '298[110-510]'";
        let hint = error_hint(cast).unwrap();
        assert!(
            hint.contains(r"str.extract(r'(-?\d+(?:\.\d+)?)')[0]"),
            "{hint}"
        );
        // pivot_table(..., rows=['B']), recorded from the 1.5B model.
        let keys = "ValueError: No group keys passed!";
        assert!(error_hint(keys).unwrap().contains("index= and columns="));
        let lengths = "ValueError: All arrays must be of the same length";
        assert!(error_hint(lengths).unwrap().contains("print len() of each"));
        // The same mistake with an index given (ds1000_58, the 1.5B model),
        // and a column assigned with too few values.
        let labelled = "ValueError: array length 6 does not match index length 4";
        assert_eq!(error_hint(labelled), error_hint(lengths));
        let assigned = "ValueError: Length of values (3) does not match length of index (5)";
        assert_eq!(error_hint(assigned), error_hint(lengths));
        // Recorded from the 1.5B model (DABench, DS-1000): a mean over text,
        // a float's missing .round(), a function compared as if called.
        let reduction = "TypeError: Cannot perform reduction 'mean' with string dtype";
        assert!(error_hint(reduction).unwrap().contains("pd.to_numeric"));
        let rounded = "AttributeError: 'float' object has no attribute 'round'";
        assert!(error_hint(rounded).unwrap().contains("round(x, 2)"));
        // (ds1000_306: `def shift(arr, shift)` had replaced the variable shift.)
        let uncalled = "TypeError: '>' not supported between instances of 'function' and 'int'";
        assert!(
            error_hint(uncalled)
                .unwrap()
                .contains("a def named like a variable")
        );
        let method = "TypeError: unsupported operand type(s) for +: 'method' and 'str'";
        assert!(error_hint(method).unwrap().contains("call it"));
        let builtin = "TypeError: '<' not supported between instances of 'builtin_function_or_method' and 'int'";
        assert!(error_hint(builtin).unwrap().contains("call it"));
        // Recorded from the 1.5B model on DS-1000 development tasks: rows
        // dropped twice, one column name too many, round() over pd.NA, a
        // structured array's field, a value that was None.
        let dropped = "KeyError: '[0, 2, 4] not found in axis'. Columns of df: 'A', 'B', 'C', 'D'";
        assert!(error_hint(dropped).unwrap().contains("drop every row once"));
        let names = "AssertionError: 5 columns passed, passed data had 4 columns";
        assert!(error_hint(names).unwrap().contains("one name per column"));
        let missing = "TypeError: type NAType doesn't define __round__ method";
        assert!(error_hint(missing).unwrap().contains("values.round(2)"));
        let field = "ValueError: no field of name a";
        assert!(error_hint(field).unwrap().contains("dtype.names"));
        for none in [
            "TypeError: unsupported operand type(s) for +: 'int' and 'NoneType'",
            "TypeError: int() argument must be a string, a bytes-like object or a real number, not 'NoneType'",
            "AttributeError: 'NoneType' object has no attribute 'head'",
        ] {
            assert!(
                error_hint(none).unwrap().contains("a value is None"),
                "{none}"
            );
        }
        // A table's attribute keeps the general hint.
        let attribute = "AttributeError: 'DataFrame' object has no attribute 'Sales'";
        assert!(error_hint(attribute).unwrap().contains("table['name']"));
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
}
