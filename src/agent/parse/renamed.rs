//! A function or class the code named after a variable that holds the
//! user's data: `def shift(...)` in a notebook whose `shift` is a list. The
//! runtime does not run such a block (`execution.py`'s `_name_in_use`
//! writes the error line read here: `NameInUse: `def shift(...)` would
//! replace `shift`, ...`; `tests/python/unit/test_names_in_use.py` holds
//! its wording). Told so, the local model says it will rename the function
//! and sends the same code again; the same code with the definition and its
//! calls named otherwise is what such a fix is, and the data's own uses of
//! the name (`shift(a, shift)`'s second) keep reading the data.

use super::retyped::outside_strings_at;

/// The failed code with its definition named otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renamed {
    /// The name the code gave its function or class, which the data has.
    pub name: String,
    /// The name it has now.
    pub new_name: String,
    /// The code with the definition and each call of it so named.
    pub code: String,
}

/// The code of a block refused with `error_line` (the error's last line)
/// for a `def` or `class` over a name holding data, with that definition
/// and its calls named otherwise: `<name>_function` or `<name>_class`, or
/// with a number after it where `taken` (the namespace's names) has that.
/// None for another error, or where the code never calls the name.
pub fn renamed_definition(code: &str, error_line: &str, taken: &[String]) -> Option<Renamed> {
    let rest = error_line.strip_prefix("NameInUse: `")?;
    let (kind, rest) = rest.split_once(' ')?;
    let suffix = match kind {
        "def" => "function",
        "class" => "class",
        _ => return None,
    };
    let name = rest.split(['(', '`']).next()?;
    if !is_identifier(name) {
        return None;
    }
    let new_name = (1..)
        .map(|n| match n {
            1 => format!("{name}_{suffix}"),
            n => format!("{name}_{suffix}{n}"),
        })
        .find(|candidate| !taken.contains(candidate) && !mentions(code, candidate))?;
    let mut renamed = 0;
    let lines: Vec<String> = code
        .lines()
        .map(|line| {
            let (line, count) = rename_in_line(line, name, &new_name);
            renamed += count;
            line
        })
        .collect();
    // The definition alone renamed would change nothing the code does.
    (renamed >= 2).then(|| Renamed {
        name: name.to_owned(),
        new_name,
        code: lines.join("\n"),
    })
}

fn is_identifier(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
}

/// Whether `code` has `word` as an identifier anywhere.
fn mentions(code: &str, word: &str) -> bool {
    code.lines()
        .any(|line| identifiers(line).any(|(_, found)| found == word))
}

/// The identifiers of `line` outside strings and comments, with their byte
/// offsets (a string that spans lines is read line by line, so a call
/// written inside one may be renamed there too).
fn identifiers(line: &str) -> impl Iterator<Item = (usize, &str)> {
    // A word is a run of word characters with nothing left out between
    // them (a string between two is not part of either).
    let mut words: Vec<(usize, usize)> = Vec::new();
    for (at, c) in outside_strings_at(line) {
        if !(c.is_alphanumeric() || c == '_') {
            continue;
        }
        match words.last_mut() {
            Some((_, end)) if *end == at => *end = at + c.len_utf8(),
            _ => words.push((at, at + c.len_utf8())),
        }
    }
    words
        .into_iter()
        .map(|(start, end)| (start, &line[start..end]))
        .filter(|(_, word)| word.starts_with(|c: char| c.is_alphabetic() || c == '_'))
}

/// `line` with `name` as `new_name` where it is defined (`def name`,
/// `class name`) or called (`name(`, not `table.name(`), and how many.
fn rename_in_line(line: &str, name: &str, new_name: &str) -> (String, usize) {
    let mut out = String::with_capacity(line.len());
    let mut copied = 0;
    let mut count = 0;
    for (at, word) in identifiers(line).filter(|(_, word)| *word == name) {
        let before = line[..at].trim_end();
        let after = line[at + word.len()..].trim_start();
        let defined = matches!(before.trim_start(), "def" | "async def" | "class");
        let called = after.starts_with('(') && !before.ends_with('.');
        if defined || called {
            out.push_str(&line[copied..at]);
            out.push_str(new_name);
            copied = at + word.len();
            count += 1;
        }
    }
    out.push_str(&line[copied..]);
    (out, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    // After what the 1.5B model wrote (DS-1000), in a notebook whose
    // `shift` is a list of shifts; the last lines pass the data in too.
    const SHIFTED: &str = "import numpy as np\n\ndef shift(arr, shifts):\n    \
        shifted_arr = np.zeros_like(arr)\n    for i, shift in enumerate(shifts):\n        \
        shifted_arr[i] = arr[i - shift] if shift >= 0 else arr[i + shift]\n    \
        return shifted_arr\n\nresult = shift(a, shift)  # shift(a) per row\nprint(result)";
    const REFUSED: &str = "NameInUse: `def shift(...)` would replace `shift`, which holds data \
        (list len 2 = [-2, 3]), so nothing ran: give what it defines another name";

    #[test]
    fn the_definition_and_its_calls_are_named_otherwise_and_the_data_keeps_its_name() {
        let renamed = renamed_definition(SHIFTED, REFUSED, &["a".into(), "shift".into()]).unwrap();
        assert_eq!(renamed.name, "shift");
        assert_eq!(renamed.new_name, "shift_function");
        assert!(renamed.code.contains("def shift_function(arr, shifts):"));
        // The loop's own `shift`, the data passed in and the comment stay.
        assert!(renamed.code.contains("for i, shift in enumerate(shifts):"));
        assert!(renamed.code.contains("arr[i - shift] if shift >= 0"));
        assert!(
            renamed
                .code
                .contains("result = shift_function(a, shift)  # shift(a) per row")
        );
    }

    #[test]
    fn a_method_of_the_same_name_or_a_string_is_left_alone() {
        let code = "def shift(df):\n    return df.shift(1)\n\nout = shift(df)\nprint('shift(x)')";
        let renamed = renamed_definition(code, REFUSED, &[]).unwrap();
        assert_eq!(
            renamed.code,
            "def shift_function(df):\n    return df.shift(1)\n\nout = shift_function(df)\n\
             print('shift(x)')"
        );
    }

    #[test]
    fn a_class_is_named_class_and_a_taken_name_gets_a_number() {
        let code = "class report:\n    pass\n\nr = report()";
        let refused = "NameInUse: `class report` would replace `report`, which holds data \
            (str len 3 = 'abc'), so nothing ran: give what it defines another name";
        let renamed = renamed_definition(code, refused, &["report_class".into()]).unwrap();
        assert_eq!(renamed.new_name, "report_class2");
        assert_eq!(
            renamed.code,
            "class report_class2:\n    pass\n\nr = report_class2()"
        );
    }

    #[test]
    fn other_errors_imports_and_definitions_never_called_are_left_to_the_model() {
        let code = "def shift(a):\n    return a\n";
        assert_eq!(renamed_definition(code, REFUSED, &[]), None);
        assert_eq!(
            renamed_definition(SHIFTED, "NameError: name 'x' is not defined", &[]),
            None
        );
        let imported = "NameInUse: `import math as m` would replace `m`, which holds data \
            (float = 1.0), so nothing ran: give what it defines another name";
        assert_eq!(
            renamed_definition("import math as m\nm.pi", imported, &[]),
            None
        );
    }
}
