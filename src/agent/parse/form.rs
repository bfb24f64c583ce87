//! The form a value must have for a request (one value, several, a table),
//! as the request states it next to the name or, where it does not, as the
//! model says it before it sees the value, and the form the value
//! has, read from its description: a check that can fail, made by code.
//! Only a plain contradiction counts (several values where one was asked
//! for, one where several were), so a right answer in another shape than
//! expected (a dict for per-group totals, a one-row Series) passes.

use super::checks::words;
use super::json::json_objects;
pub use crate::agent::run::{Expected, Form};

/// The names the prompt offers, as the model writes them, and their forms;
/// "cannot tell" (or anything else) is no form.
const FORMS: [(&str, Form); 5] = [
    ("one number", Form::One),
    ("text", Form::One),
    ("true or false", Form::One),
    ("several values", Form::Several),
    ("a table", Form::Table),
];

/// The names the schema allows (`prompts/expected_form.md`).
pub const FORM_NAMES: [&str; 6] = [
    "one number",
    "several values",
    "a table",
    "text",
    "true or false",
    "cannot tell",
];

/// What an answer to the expected-form question says the value must be:
/// the form it names, if any, and the shape it gives, kept only when
/// `request` writes that shape out (`(93, 13)`), so a shape the model
/// made up counts for nothing.
pub fn expected(answer: &str, request: &str) -> Expected {
    let object = json_objects(answer).find(|value| value.get("form").is_some());
    let said = object
        .as_ref()
        .and_then(|value| value.get("form")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| answer.trim().trim_matches('"').to_owned());
    let said = said.trim().to_ascii_lowercase();
    let form = FORMS
        .iter()
        .find(|(name, _)| said == *name)
        .map(|(_, form)| *form);
    let shape = object
        .as_ref()
        .and_then(|value| value.get("shape")?.as_array().cloned())
        .and_then(|dims| {
            dims.iter()
                .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
                .collect::<Option<Vec<usize>>>()
        })
        .filter(|shape| written_shapes(request).contains(shape));
    Expected { form, shape }
}

/// The shapes a text writes out: tuples of two or more whole numbers
/// (`(93,13)`, `(5, 2, 2)`).
fn written_shapes(text: &str) -> Vec<Vec<usize>> {
    text.split('(')
        .skip(1)
        .filter_map(|after| {
            let inside = after.split_once(')')?.0;
            let dims: Vec<usize> = inside
                .split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(|d| d.parse().ok())
                .collect::<Option<_>>()?;
            (dims.len() >= 2).then_some(dims)
        })
        .collect()
}

/// The shape a value's description gives (`shape (2, 3)`, `4 rows x 2
/// columns`), for arrays, Series and tables.
fn shape_held(description: &str) -> Option<Vec<usize>> {
    let line = description.lines().next()?;
    let rest = line.split_once(": ")?.1;
    if rest.starts_with("DataFrame") {
        let (rows, columns) = rest.split_once(" rows x ")?;
        let rows = rows.rsplit(' ').next()?.parse().ok()?;
        let columns = columns.split_whitespace().next()?.parse().ok()?;
        return Some(vec![rows, columns]);
    }
    let inside = rest.split_once("shape (")?.1.split_once(')')?.0;
    inside
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().ok())
        .collect()
}

/// Shapes as Python writes them: `(93, 13)`, `(4,)`.
fn shape_text(shape: &[usize]) -> String {
    match shape {
        [one] => format!("({one},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Words that say what kind of value a variable is, as a request writes
/// them next to its name ("a dict named `answers`", "`df2` as a DataFrame").
const KIND_WORDS: [(&str, Form); 19] = [
    ("dict", Form::Several),
    ("dictionary", Form::Several),
    ("mapping", Form::Several),
    ("list", Form::Several),
    ("tuple", Form::Several),
    ("array", Form::Several),
    ("ndarray", Form::Several),
    ("series", Form::Several),
    ("dataframe", Form::Table),
    ("frame", Form::Table),
    ("table", Form::Table),
    ("number", Form::One),
    ("integer", Form::One),
    ("int", Form::One),
    ("float", Form::One),
    ("scalar", Form::One),
    ("string", Form::One),
    ("str", Form::One),
    ("boolean", Form::One),
];

/// How many words may stand between a kind and the name it gives in
/// "a <kind> of <what> named <name>".
const OF_WORDS: usize = 5;

/// Words that end the "<what>" of "a <kind> of <what> named <name>": after
/// them the name is another thing's ("a list of prices in the data named
/// d" names the data).
const PHRASE_ENDS: [&str; 12] = [
    "in", "from", "for", "with", "by", "on", "at", "to", "into", "per", "and", "or",
];

/// The form the request itself gives `name`, when it says in so many words
/// what kind of value that is: the kind right before the name (`a dict
/// answers`, `a list named x`, `a DataFrame called out`), before what it
/// holds (`a pivot table of shop named table`, `the number of rows named
/// n`) or right after it (`x as a list`). A kind word further off ("the
/// total of the table in `n`") describes something else, and two kinds for
/// one name say nothing.
pub fn stated_form(request: &str, name: &str) -> Option<Form> {
    let words: Vec<String> = words(request).map(str::to_ascii_lowercase).collect();
    let kind = |word: &str| {
        KIND_WORDS
            .iter()
            .find(|(kind, _)| *kind == word)
            .map(|(_, form)| *form)
    };
    let word = |i: usize| words.get(i).map(String::as_str).unwrap_or_default();
    let name = name.to_ascii_lowercase();
    let mut stated = None;
    for (i, _) in words.iter().enumerate().filter(|(_, w)| **w == name) {
        let before = match i.checked_sub(1).map(word) {
            Some("named" | "called") => i
                .checked_sub(2)
                .map(word)
                .filter(|w| kind(w).is_some())
                .or_else(|| kind_of_what(&words, i - 1)),
            other => other,
        };
        let after = match (word(i + 1), word(i + 2)) {
            ("as", "a" | "an") => Some(word(i + 3)),
            ("as", other) => Some(other),
            _ => None,
        };
        for form in [before.and_then(kind), after.and_then(kind)]
            .into_iter()
            .flatten()
        {
            match stated {
                Some(known) if known != form => return None,
                _ => stated = Some(form),
            }
        }
    }
    stated
}

/// The kind in "<kind> of <what> named", where `named` is the index of
/// "named" (or "called") in `words`: the word before the nearest "of", up
/// to [`OF_WORDS`] words back, with no word that ends the phrase between.
fn kind_of_what(words: &[String], named: usize) -> Option<&str> {
    let start = named.saturating_sub(OF_WORDS + 1);
    for at in (start..named).rev() {
        match words[at].as_str() {
            "of" => return at.checked_sub(1).map(|k| words[k].as_str()),
            w if PHRASE_ENDS.contains(&w) => return None,
            _ => {}
        }
    }
    None
}

/// What a value holds, from the first line of its description
/// (`revenue: Series, shape (4,), dtype float64, ...`, `n: int: 3`,
/// `names: list, 3 items of str`): its form and how many values it holds,
/// when the description says.
pub fn held(description: &str) -> Option<(Form, Option<usize>)> {
    let line = description.lines().next()?;
    let (_, rest) = line.split_once(": ")?;
    let kind = rest
        .split([',', ':', ' '])
        .next()
        .unwrap_or_default()
        .trim();
    let items = |text: &str| -> Option<usize> {
        let after = text.split_once(", ")?.1;
        after.split_whitespace().next()?.parse().ok()
    };
    match kind {
        "DataFrame" => {
            // "DataFrame, 4 rows x 2 columns"
            let rows: Option<usize> = items(rest);
            let columns = rest
                .split(" x ")
                .nth(1)
                .and_then(|c| c.split_whitespace().next()?.parse::<usize>().ok());
            Some((Form::Table, rows.zip(columns).map(|(r, c)| r * c)))
        }
        "Series" | "ndarray" | "Index" => {
            let dims = shape_held(description)?;
            let count = dims.iter().product();
            let form = if dims.len() > 1 && kind == "ndarray" {
                Form::Table
            } else {
                Form::Several
            };
            Some((form, Some(count)))
        }
        "list" | "tuple" | "set" | "frozenset" | "dict" => Some((Form::Several, items(rest))),
        "int" | "float" | "complex" | "bool" | "str" | "Decimal" | "Fraction" | "Timestamp"
        | "Timedelta" | "datetime" | "date" | "float64" | "float32" | "int64" | "int32"
        | "bool_" | "str_" => Some((Form::One, Some(1))),
        _ => None,
    }
}

/// A value's form that plainly contradicts the request's: why, and what to
/// do instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contradiction {
    pub reasoning: String,
    pub next_action: String,
}

/// Why `description` plainly contradicts `expected` (the value holds many
/// where one was asked for, or one where many were, or has another shape
/// than the request writes out), if it does.
pub fn contradiction(name: &str, expected: &Expected, description: &str) -> Option<Contradiction> {
    let by_form = expected
        .form
        .and_then(|form| form_contradiction(name, form, description));
    by_form.or_else(|| {
        let shape = expected.shape.as_deref()?;
        let held = shape_held(description)?;
        (held != shape).then(|| Contradiction {
            reasoning: format!(
                "`{name}` must have the shape {} the request gives, but it has the shape {}",
                shape_text(shape),
                shape_text(&held)
            ),
            next_action: format!(
                "make `{name}` the shape {} as the request says (check which rows or columns \
                 each step adds or removes)",
                shape_text(shape)
            ),
        })
    })
}

/// The contradiction of `expected`'s number of values, if any.
fn form_contradiction(name: &str, expected: Form, description: &str) -> Option<Contradiction> {
    let (form, count) = held(description)?;
    let what = description
        .lines()
        .next()
        .and_then(|line| line.split_once(": "))
        .map_or("", |(_, rest)| rest);
    match (expected, form) {
        (Form::One, Form::Several | Form::Table) if count.is_some_and(|n| n > 1) => {
            Some(Contradiction {
                reasoning: format!(
                    "`{name}` must hold one value for this request, but it holds several ({what})"
                ),
                next_action: format!(
                    "reduce those values to the one the request asks for (a total is their sum; \
                     a mean, a count or a maximum likewise) and store that single value in `{name}`"
                ),
            })
        }
        (Form::Several | Form::Table, Form::One) => Some(Contradiction {
            reasoning: format!(
                "`{name}` must hold several values for this request, but it holds one ({what})"
            ),
            next_action: format!(
                "store in `{name}` one value per item or group, as the request asks (a list, a \
                 Series, a dict or a table), not a single value"
            ),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(form: Form) -> Expected {
        Expected {
            form: Some(form),
            shape: None,
        }
    }

    #[test]
    fn answers_recorded_from_the_local_model_name_a_form() {
        // Qwen2.5-Coder-1.5B at temperature 0, with the schema.
        assert_eq!(
            expected(r#"{"form": "one number"}"#, "").form,
            Some(Form::One)
        );
        assert_eq!(
            expected(r#"{"form": "several values"}"#, "").form,
            Some(Form::Several)
        );
        assert_eq!(
            expected(r#"{"form": "a table"}"#, "").form,
            Some(Form::Table)
        );
        assert_eq!(
            expected(r#"{"form": "true or false"}"#, "").form,
            Some(Form::One)
        );
        assert_eq!(expected("text", "").form, Some(Form::One));
        assert_eq!(expected(r#"{"form": "cannot tell"}"#, "").form, None);
        assert_eq!(expected("a number, I think", "").form, None);
    }

    #[test]
    fn a_kind_written_next_to_the_name_is_its_form() {
        let dabench = "Compute the mean and standard deviation.\nStore the answers in a dict \
                       named `answers`, from each answer's name to its value";
        assert_eq!(stated_form(dabench, "answers"), Some(Form::Several));
        assert_eq!(
            stated_form("Put the per-city counts in a Series `counts`.", "counts"),
            Some(Form::Several)
        );
        assert_eq!(
            stated_form("Keep the rows, as a pandas DataFrame called out.", "out"),
            Some(Form::Table)
        );
        assert_eq!(
            stated_form("Return `pairs` as a list of tuples.", "pairs"),
            Some(Form::Several)
        );
        assert_eq!(
            stated_form("Store the count as an integer named n.", "n"),
            Some(Form::One)
        );
        // A kind before what it holds gives it to the name.
        let pivot = "Make a pivot table of shop named `table`: a row per region, a column per \
                     fruit, the summed qty as values.";
        assert_eq!(stated_form(pivot, "table"), Some(Form::Table));
        assert_eq!(
            stated_form("Store the number of rows named n.", "n"),
            Some(Form::One)
        );
        assert_eq!(
            stated_form(
                "Keep a dict of each region's total called totals.",
                "totals"
            ),
            Some(Form::Several)
        );
        // ... but not where the name belongs to a thing further on, or the
        // word before "of" is no kind, or "of" is far off.
        assert_eq!(
            stated_form("Make a list of prices in the data named d.", "d"),
            None
        );
        assert_eq!(
            stated_form("Compute the mean of the column named price.", "price"),
            None
        );
        assert_eq!(
            stated_form(
                "Find a list of all the rows that hold a price named p.",
                "p"
            ),
            None
        );
        // A kind word further off describes something else.
        let revenue = "Compute the total revenue (price times qty) of the sales table and \
                       store it in a variable named revenue.";
        assert_eq!(stated_form(revenue, "revenue"), None);
        assert_eq!(
            stated_form("Sum the table's column into total.", "total"),
            None
        );
        // Two kinds for one name say nothing.
        assert_eq!(
            stated_form("Make a list named x, then turn x into a DataFrame x.", "x"),
            None
        );
        assert_eq!(
            stated_form("result = ... # put solution in this variable", "result"),
            None
        );
    }

    #[test]
    fn descriptions_say_what_a_value_holds() {
        // As mahtab.tools.describe writes them.
        let series =
            "revenue: Series, shape (4,), dtype float64, min 7.7, max 12.5\nfirst items:\n0 12.0";
        assert_eq!(held(series), Some((Form::Several, Some(4))));
        assert_eq!(held("revenue: float: 30.5"), Some((Form::One, Some(1))));
        assert_eq!(
            held("revenue: float64: np.float64(30.5)"),
            Some((Form::One, Some(1)))
        );
        assert_eq!(
            held("top: str, 3 characters, 1 lines; it begins:\nfig"),
            Some((Form::One, Some(1)))
        );
        assert_eq!(
            held("d: dict, 3 keys: 'a', 'b', 'c'"),
            Some((Form::Several, Some(3)))
        );
        assert_eq!(
            held("names: list, 2 items of str"),
            Some((Form::Several, Some(2)))
        );
        assert_eq!(
            held("df: DataFrame, 4 rows x 2 columns, 196 bytes in memory"),
            Some((Form::Table, Some(8)))
        );
        assert_eq!(
            held("a: ndarray, shape (2, 3), dtype float64"),
            Some((Form::Table, Some(6)))
        );
        assert_eq!(held("f: function"), None);
    }

    #[test]
    fn only_a_plain_contradiction_counts() {
        let series = "revenue: Series, shape (4,), dtype float64, min 7.7, max 12.5";
        let why = contradiction("revenue", &of(Form::One), series).unwrap();
        assert!(
            why.reasoning.contains("must hold one value")
                && why.reasoning.contains("Series, shape (4,)"),
            "{why:?}"
        );
        assert!(
            why.next_action.contains("single value in `revenue`"),
            "{why:?}"
        );
        assert!(contradiction("total", &of(Form::Several), "total: int: 3").is_some());
        // Right answers in other shapes than expected pass.
        assert_eq!(
            contradiction(
                "revenue",
                &of(Form::One),
                "revenue: Series, shape (1,), dtype float64"
            ),
            None
        );
        assert_eq!(
            contradiction(
                "per",
                &of(Form::Several),
                "per: DataFrame, 3 rows x 1 columns"
            ),
            None
        );
        assert_eq!(
            contradiction(
                "per",
                &of(Form::Table),
                "per: Series, shape (3,), dtype int64"
            ),
            None
        );
        assert_eq!(
            contradiction("top", &of(Form::One), "top: str, 3 characters, 1 lines"),
            None
        );
        assert_eq!(
            contradiction("x", &of(Form::One), "x: Widget: <Widget>"),
            None
        );
    }

    #[test]
    fn a_shape_counts_only_where_the_request_writes_it_out() {
        // Qwen2.5-Coder-1.5B at temperature 0, asked for a form and a shape.
        let pad = "I have a file with arrays of different shapes. I want to zero pad all \
                   of them to match the largest shape, (93,13). For example a = \
                   np.ones((41,13)): how can I pad it to the right and bottom?";
        let said = r#"{"form": "several values", "shape": [93, 13]}"#;
        assert_eq!(
            expected(said, pad),
            Expected {
                form: Some(Form::Several),
                shape: Some(vec![93, 13])
            }
        );
        // A shape the request does not write (the model's guess) is none.
        let guess = r#"{"form": "several values", "shape": [3, 3]}"#;
        assert_eq!(expected(guess, "Reshape a (4,5) array.").shape, None);
        assert_eq!(
            expected(r#"{"form": "one number", "shape": []}"#, pad).shape,
            None
        );
        assert_eq!(expected(r#"{"form": "one number"}"#, pad).shape, None);
        assert_eq!(
            written_shapes("sliced to (5,2,2), from (5, 5, 5); rows (0,1,2,4), f(x)"),
            [vec![5, 2, 2], vec![5, 5, 5], vec![0, 1, 2, 4]]
        );
    }

    #[test]
    fn a_value_of_another_shape_than_the_request_writes_contradicts_it() {
        let padded = Expected {
            form: Some(Form::Several),
            shape: Some(vec![93, 13]),
        };
        let wide = "result: ndarray, shape (93, 93), dtype float64, min 0.0, max 1.0";
        let why = contradiction("result", &padded, wide).unwrap();
        assert!(
            why.reasoning.contains("shape (93, 13)") && why.reasoning.contains("shape (93, 93)"),
            "{why:?}"
        );
        let right = "result: ndarray, shape (93, 13), dtype float64, min 0.0, max 1.0";
        assert_eq!(contradiction("result", &padded, right), None);
        let table = "out: DataFrame, 93 rows x 13 columns, 9 kB in memory";
        assert_eq!(contradiction("out", &padded, table), None);
        let short = "out: DataFrame, 41 rows x 13 columns, 4 kB in memory";
        assert!(contradiction("out", &padded, short).is_some());
        // A value with no shape (a number, a dict) is the form check's to judge.
        assert_eq!(
            contradiction("n", &padded, "n: dict, 2 keys: 'a', 'b'"),
            None
        );
        assert_eq!(
            shape_held("s: Series, shape (4,), dtype int64"),
            Some(vec![4])
        );
        assert_eq!(shape_text(&[4]), "(4,)");
    }
}
