//! Data the namespace holds, typed into the code again: `df =
//! pd.DataFrame({'Date': ['1/1/18', ...], 'Val': [NaN, ...]})` written from
//! the table as the request printed it, or `a = np.array([1, 2, 3, 4])`
//! from the request's example, though `df` and `a` are defined. Neither is
//! the user's data (a printed table has a `NaN` that Python does not know,
//! rows left out as `...`, dates that became text; an example is one case
//! of what the user has), so such a block runs again without that line, on
//! the variable the user has, unless the request asks to set it. A single
//! value counts only where the request gives it to that name as an example
//! ("For example, say m = 4"): `m = 4` over the notebook's `m = 8` then
//! computes the example's case, while a counter's `n = 0` or a value the
//! request asks to use ("try it with m = 4") is the code's own.

use super::checks::{is_identifier, sentences, words};

/// A top-level statement that bound a namespace variable to typed-in data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retyped {
    /// The variable the statement bound.
    pub name: String,
    /// The block without the statement.
    pub code: String,
    /// The statement's first and last line in the block, counted from 1
    /// as a traceback does.
    pub lines: (usize, usize),
}

/// Names a value typed into code may use besides its literals: the
/// modules its constructor comes from, the constants a printed value
/// shows, and the types a `dtype=` names.
const CONSTANTS: [&str; 14] = [
    "pd", "np", "pandas", "numpy", "nan", "NaN", "None", "True", "False", "int", "float", "str",
    "bool", "object",
];

/// The first top-level statement of `code` that binds a variable of
/// `namespace_names` to data written out in the code (only literals,
/// `pd`/`np` constructors and keyword arguments), or to the single value
/// `request` gives it as an example, with the block without it.
pub fn retypes_a_variable(
    code: &str,
    namespace_names: &[String],
    request: &str,
) -> Option<Retyped> {
    let lines: Vec<&str> = code.lines().collect();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        let end = statement_end(&lines, index);
        let bound = line
            .split_once('=')
            .filter(|(target, value)| {
                !line.starts_with(char::is_whitespace)
                    && !value.starts_with('=')
                    && is_identifier(target.trim_end())
            })
            .map(|(target, value)| (target.trim_end(), value));
        if let Some((name, value)) = bound
            && namespace_names.iter().any(|n| n == name)
        {
            let rest = lines[index + 1..=end].join("\n");
            let example = end == index
                && example_values(request, name)
                    .contains(&scalar(value.split(" #").next().unwrap_or(value)));
            if example || typed_in(&format!("{value}\n{rest}")) {
                let kept: Vec<&str> = lines[..index]
                    .iter()
                    .chain(&lines[end + 1..])
                    .copied()
                    .collect();
                return Some(Retyped {
                    name: name.to_owned(),
                    code: kept.join("\n"),
                    lines: (index + 1, end + 1),
                });
            }
        }
        index = end + 1;
    }
    None
}

/// Words of a request that ask for a variable to be given a value, which
/// typing its data in then does.
const SETTING_WORDS: [&str; 14] = [
    "set",
    "assign",
    "replace",
    "redefine",
    "reset",
    "overwrite",
    "create",
    "make",
    "define",
    "change",
    "update",
    "initialize",
    "initialise",
    "rebuild",
];

/// Whether a sentence of `request` names `name` (as a word of its own) and
/// asks for something to be set: typing `name`'s data in may be the point.
pub fn asks_to_set(request: &str, name: &str) -> bool {
    sentences(request).any(|sentence| {
        let words: Vec<String> = words(sentence).map(str::to_lowercase).collect();
        words.iter().any(|word| word == name)
            && words.iter().any(|word| {
                SETTING_WORDS
                    .iter()
                    .any(|set| word == set || word.strip_suffix('s') == Some(set))
            })
    })
}

/// Words that make a sentence an example: what it gives a name is one case,
/// not the value to use.
const EXAMPLE_WORDS: [&str; 6] = ["example", "instance", "say", "suppose", "imagine", "eg"];

/// The single values (numbers, quoted text) the sentences of `request`
/// that give an example write for `name` (`name = 4`), as [`scalar`] reads
/// them.
fn example_values(request: &str, name: &str) -> Vec<String> {
    // "e.g. " would end a sentence.
    let request = request.replace("e.g.", "eg").replace("E.g.", "eg");
    sentences(&request)
        .filter(|sentence| {
            words(&sentence.to_lowercase()).any(|word| EXAMPLE_WORDS.contains(&word))
        })
        .flat_map(|sentence| {
            let mut found = Vec::new();
            let mut rest = sentence;
            while let Some(at) = rest.find(name) {
                let before = rest[..at].chars().next_back();
                let after = rest[at + name.len()..].trim_start();
                rest = &rest[at + name.len()..];
                let whole = !before.is_some_and(|c| c.is_alphanumeric() || c == '_');
                if let Some(value) = after
                    .strip_prefix('=')
                    .filter(|v| whole && !v.starts_with('='))
                {
                    let value = value.trim_start();
                    let end = value
                        .find(|c: char| c.is_whitespace() || c == ',' || c == ')')
                        .unwrap_or(value.len());
                    found.push(scalar(value[..end].trim_end_matches(['.', ':'])));
                }
            }
            found
        })
        .filter(|value| !value.is_empty())
        .collect()
}

/// A statement's value as a single number or quoted text, written one way
/// (`4`, `4.0` and `4.` alike), or empty when it is something else.
fn scalar(value: &str) -> String {
    let value = value.trim();
    if let Ok(number) = value.parse::<f64>() {
        return number.to_string();
    }
    let quoted = value.len() >= 2
        && ['\'', '"']
            .iter()
            .any(|&q| value.starts_with(q) && value.ends_with(q));
    if quoted {
        value[1..value.len() - 1].to_owned()
    } else {
        String::new()
    }
}

/// The index of the last line of the statement starting at `start`: where
/// its brackets close.
fn statement_end(lines: &[&str], start: usize) -> usize {
    let mut depth = 0i32;
    for (index, line) in lines.iter().enumerate().skip(start) {
        depth += outside_strings(line)
            .map(|c| match c {
                '(' | '[' | '{' => 1,
                ')' | ']' | '}' => -1,
                _ => 0,
            })
            .sum::<i32>();
        if depth <= 0 {
            return index;
        }
    }
    lines.len() - 1
}

/// The characters of `line` outside its string literals (and before a
/// comment).
pub(crate) fn outside_strings(line: &str) -> impl Iterator<Item = char> + '_ {
    outside_strings_at(line).map(|(_, c)| c)
}

/// [`outside_strings`] with each character's byte offset in `line`.
pub(crate) fn outside_strings_at(line: &str) -> impl Iterator<Item = (usize, char)> + '_ {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut comment = false;
    line.char_indices().filter(move |&(_, c)| {
        if comment {
            return false;
        }
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
                false
            }
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                false
            }
            None if c == '#' => {
                comment = true;
                false
            }
            None => true,
        }
    })
}

/// Whether `value` (a statement's right-hand side) is data written out: a
/// bracket or a `pd`/`np` call holding at least two literals, and no name
/// but constants, keyword arguments and attributes.
fn typed_in(value: &str) -> bool {
    let text = value.trim_start();
    let constructor = ["pd.", "np.", "pandas.", "numpy.", "{", "["]
        .iter()
        .any(|start| text.starts_with(start));
    if !constructor {
        return false;
    }
    let code: String = text
        .lines()
        .flat_map(|l| outside_strings(l).chain(['\n']))
        .collect();
    let literals = text.matches(['\'', '"']).count() / 2
        + code
            .split(|c: char| !c.is_alphanumeric() && c != '_' && c != '.')
            .filter(|w| w.starts_with(|c: char| c.is_ascii_digit()))
            .count();
    if literals < 2 {
        return false;
    }
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let before = chars[..start].iter().rev().find(|c| *c != &' ');
            let after: String = chars[i..].iter().filter(|c| **c != ' ').take(2).collect();
            let attribute = before == Some(&'.');
            let keyword = after.starts_with('=') && !after.starts_with("==");
            if !(attribute || keyword || CONSTANTS.contains(&word.as_str())) {
                return false;
            }
        } else if c.is_ascii_digit() {
            // A number's own letters (1e5, 0x1F, 2j) are not names.
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| (*n).to_owned()).collect()
    }

    // Recorded from the 1.5B coder model on a pandas problem whose `df`
    // was defined: the table typed in from its printed form.
    const RETYPED: &str = "import pandas as pd\n\
        df = pd.DataFrame({'Date': ['1/1/18', '1/1/18', '2/1/18'],\n\
        \x20                  'Val': ['A', 'B', NaN]})\n\
        df['Date'] = pd.to_datetime(df['Date'], format='%d/%m/%y')\n\
        result = df.groupby('Val').size()";

    #[test]
    fn a_namespace_table_typed_in_is_dropped_from_the_block() {
        let found = retypes_a_variable(RETYPED, &names(&["df"]), "").expect("retyped");
        assert_eq!(found.name, "df");
        assert_eq!(
            found.code,
            "import pandas as pd\n\
             df['Date'] = pd.to_datetime(df['Date'], format='%d/%m/%y')\n\
             result = df.groupby('Val').size()"
        );
        let array = "a = np.array([[1, 2], [3, 4]], dtype=float)\nprint(a.sum())";
        assert_eq!(
            retypes_a_variable(array, &names(&["a"]), "").map(|r| r.code),
            Some("print(a.sum())".to_owned())
        );
    }

    #[test]
    fn data_the_namespace_lacks_or_values_computed_from_names_stay() {
        // Not in the namespace: the model's own new data.
        assert_eq!(retypes_a_variable(RETYPED, &names(&["sales"]), ""), None);
        for code in [
            "df = pd.DataFrame(rows, columns=['a', 'b'])",
            "df = df[df['a'] > 1]",
            "df = pd.read_csv('data.csv')",
            "df = pd.concat([df, extra])",
            "df = [x * 2 for x in range(3)]",
            "    df = pd.DataFrame({'a': [1, 2]})",
            "df == pd.DataFrame({'a': [1, 2]})",
        ] {
            assert_eq!(
                retypes_a_variable(code, &names(&["df"]), ""),
                None,
                "{code}"
            );
        }
    }

    #[test]
    fn a_request_that_asks_to_set_the_variable_is_told_apart_from_one_that_shows_it() {
        for (request, name) in [
            ("Set `a` to np.array([1, 2, 3]) and sum it.", "a"),
            (
                "Replace df with a table of three rows. Then count them.",
                "df",
            ),
            ("Create x = [1, 2]; print its length", "x"),
            ("This resets m to 4", "m"),
        ] {
            assert!(asks_to_set(request, name), "{request}");
        }
        for (request, name) in [
            // An example of the data, and a request about it.
            ("For example, say m = 4. Convert each of a to m bits.", "m"),
            (
                "I have the following code:\na = np.ones((41,13))\nPad a to (93, 13).",
                "a",
            ),
            // A setting word in another sentence, or for another name.
            ("Sum a. Then set b to that.", "a"),
            ("Create a column of totals in sales.", "dataset"),
        ] {
            assert!(!asks_to_set(request, name), "{request}");
        }
    }

    // Recorded from the 1.5B coder model on a numpy problem whose notebook
    // held `a` and `m = 8`: the request's example value typed over `m`.
    const EXAMPLE_REQUEST: &str = "I have integers in the range 0..2**m - 1 and I would like \
        to convert them to binary numpy arrays of length m. For example, say m = 4. Now 15 = \
        1111 in binary and so the output should be (1,1,1,1).";

    #[test]
    fn a_single_value_the_request_gives_as_an_example_is_dropped_from_the_block() {
        let code = "m = 4\nresult = (((a[:, None] & (1 << np.arange(m))[::-1])) > 0).astype(int)";
        let found = retypes_a_variable(code, &names(&["a", "m"]), EXAMPLE_REQUEST);
        assert_eq!(
            found,
            Some(Retyped {
                name: "m".to_owned(),
                code: code.lines().nth(1).unwrap().to_owned(),
                lines: (1, 1),
            })
        );
        // Written another way in the code or the request, or quoted text.
        for (code, request) in [
            ("m = 4.0  # bits", EXAMPLE_REQUEST),
            ("m = 4", "Pad each row, e.g. m=4: ..."),
            ("m = 4", "Suppose m = 4."),
            ("unit = 'km'", "For instance unit = 'km' gives kilometres"),
        ] {
            let name = code.split(' ').next().unwrap();
            let found = retypes_a_variable(code, &names(&[name]), request);
            assert_eq!(
                found.map(|r| r.name),
                Some(name.to_owned()),
                "{code} / {request}"
            );
        }
    }

    #[test]
    fn a_single_value_the_request_asks_for_or_never_gives_stays() {
        for (code, request) in [
            // Asked for, not an example.
            ("m = 4", "Try it with m = 4."),
            ("m = 4", "For m = 4: convert each of a."),
            // Another value than the example's, or for another name.
            ("m = 5", EXAMPLE_REQUEST),
            ("n = 4", EXAMPLE_REQUEST),
            // A counter, a value computed, a value inside a block.
            ("count = 0", "For example, say m = 4."),
            ("m = len(a)", EXAMPLE_REQUEST),
            ("    m = 4", EXAMPLE_REQUEST),
            // A longer name that ends as the example's does.
            ("m = 4", "For example, say dim = 4."),
        ] {
            let found = retypes_a_variable(code, &names(&["m", "n", "count"]), request);
            assert_eq!(found, None, "{code} / {request}");
        }
    }

    #[test]
    fn brackets_and_hashes_in_strings_do_not_end_or_extend_a_statement() {
        let code = "df = pd.DataFrame({'a': ['(', '#'],\n 'b': [1e5, 2]})\nprint(df)";
        assert_eq!(
            retypes_a_variable(code, &names(&["df"]), "").map(|r| r.code),
            Some("print(df)".to_owned())
        );
    }
}
