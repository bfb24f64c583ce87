//! Requests that ask for a value to change itself ("change people
//! itself"), and what a turn did instead: a name rebound to a new object,
//! or a pandas change that went to a copy. Where the model's own statement
//! allows it, the way to say it in place is written out for it, since a
//! small model given a general rule tends to send the same line again.

use super::change_line::{self, Change, ChangeLine};
use super::checks::words;
use crate::agent::run::Execution;

/// Words with which a request asks for a value to change itself, not for
/// a new value under its name.
const IN_PLACE_WORDS: [&str; 6] = [
    "in place",
    "in-place",
    "inplace",
    "itself",
    "same object",
    "the original",
];

/// Methods of pandas tables and series that take `inplace=True`.
const INPLACE_METHODS: [&str; 16] = [
    "fillna",
    "ffill",
    "bfill",
    "interpolate",
    "rename",
    "drop",
    "dropna",
    "drop_duplicates",
    "sort_values",
    "sort_index",
    "reset_index",
    "set_index",
    "replace",
    "where",
    "mask",
    "clip",
];

/// A variable the request asked to change itself that a turn rebound to a
/// new object instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rebound {
    pub name: String,
    /// The model's own statement said in place (`items[:] = ...`), when it
    /// can be rewritten mechanically.
    pub rewrite: Option<String>,
}

/// The variables a request asks to change in place ("fill the gaps in
/// people (change people itself)") that `executions` rebound to a new
/// object instead: by the reports' change lines ([`change_line::read`]). Only
/// names of the user's variables (`namespace_names`) count.
pub fn rebound_though_asked_in_place(
    request: &str,
    executions: &[Execution],
    namespace_names: &[String],
) -> Vec<Rebound> {
    let Some(named) = asked_in_place(request, namespace_names) else {
        return Vec::new();
    };
    let mut rebound: Vec<Rebound> = Vec::new();
    for execution in executions {
        for line in &execution.changes {
            let Some(ChangeLine {
                name,
                description,
                change,
            }) = change_line::read(line)
            else {
                continue;
            };
            let fresh = !rebound.iter().any(|known| known.name == name);
            if change == Change::Rebound && named.contains(&name) && fresh {
                let kind = description.split_whitespace().next().unwrap_or("");
                rebound.push(Rebound {
                    name: name.to_owned(),
                    rewrite: in_place_rewrite(name, kind, &execution.code),
                });
            }
        }
    }
    rebound
}

/// The user's variables (`namespace_names`) a request names, when it asks
/// for a value to change itself; None when it does not ask that.
fn asked_in_place<'a>(request: &'a str, namespace_names: &[String]) -> Option<Vec<&'a str>> {
    let lower = request.to_lowercase();
    IN_PLACE_WORDS
        .iter()
        .any(|words| lower.contains(words))
        .then(|| {
            words(request)
                .filter(|word| namespace_names.iter().any(|name| name == word))
                .collect()
        })
}

/// `code`'s one-line rebinding of `name` (of type `kind`, as the change
/// line says it) written as a change in place: `items = [...]` becomes
/// `items[:] = [...]` for a list; `table = table.fillna(0)` becomes
/// `table.fillna(0, inplace=True)` for a pandas method that takes it. None
/// when the statement is not one of those.
pub fn in_place_rewrite(name: &str, kind: &str, code: &str) -> Option<String> {
    let value = code
        .lines()
        .rev()
        .find_map(|line| assigned_value(line, name))
        // A value that goes on over more lines is not rewritten from one.
        .filter(|value| balanced(value))?;
    match kind {
        "list" => Some(format!("{name}[:] = {value}")),
        "DataFrame" | "Series" => {
            let call = value.strip_prefix(name)?.strip_prefix('.')?;
            let (method, rest) = call.split_once('(')?;
            let arguments = rest.strip_suffix(')')?;
            let single_call = INPLACE_METHODS.contains(&method)
                && balanced(arguments)
                && !arguments.contains("inplace");
            single_call.then(|| {
                let arguments = arguments.trim();
                let separator = if arguments.is_empty() { "" } else { ", " };
                format!("{name}.{method}({arguments}{separator}inplace=True)")
            })
        }
        _ => None,
    }
}

/// The value in `name = value` on one line (not `==`, not `name[...] =`).
fn assigned_value<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let rest = line.trim().strip_prefix(name)?.trim_start();
    let value = rest.strip_prefix('=')?;
    (!value.starts_with('='))
        .then(|| value.trim())
        .filter(|v| !v.is_empty())
}

/// Whether brackets in `text` never close more than they opened and end
/// balanced (so `a).b(c` is not one call's arguments).
fn balanced(text: &str) -> bool {
    let mut depth = 0i32;
    for c in text.chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            _ => {}
        }
        if depth < 0 {
            return false;
        }
    }
    depth == 0
}

/// Whether pandas said a change went to a copy (`df[col].fillna(...,
/// inplace=True)` under copy-on-write), so the table did not change
/// although nothing failed.
pub fn changed_a_copy(output: &str) -> bool {
    output.contains("ChainedAssignmentError") || output.contains("SettingWithCopyWarning")
}

/// The line of `code` pandas warned about (`df['a'].fillna(0,
/// inplace=True)`) written so it changes the table: the column assigned
/// the method's result, without `inplace` (`df['a'] = df['a'].fillna(0)`).
/// None when no line has that form.
pub fn copy_rewrite(code: &str) -> Option<String> {
    code.lines().find_map(|line| {
        let line = line.trim();
        let without = remove_inplace(line)?;
        // Already `target = target.method(...)`: only the flag was wrong.
        if let Some((target, value)) = without.split_once(" = ")
            && value.starts_with(&format!("{target}."))
        {
            return Some(without);
        }
        let (target, call) = split_method_call(&without)?;
        target
            .contains('[')
            .then(|| format!("{target} = {target}.{call}"))
    })
}

/// `line` without its `inplace=True` argument, when it has one.
fn remove_inplace(line: &str) -> Option<String> {
    for form in [
        ", inplace=True",
        ",inplace=True",
        "inplace=True, ",
        "inplace=True",
    ] {
        if line.contains(form) {
            return Some(line.replacen(form, "", 1));
        }
    }
    None
}

/// `people['age'].fillna(0)` as (`people['age']`, `fillna(0)`): the object
/// and the one method called on it last, when the line is just that call.
fn split_method_call(line: &str) -> Option<(&str, &str)> {
    // A chain (`a.b().c()`) is more than one call: left to the model.
    if line.contains(").") {
        return None;
    }
    let open = line.find("].")?;
    let (target, call) = (&line[..=open], &line[open + 2..]);
    let (method, rest) = call.split_once('(')?;
    let arguments = rest.strip_suffix(')')?;
    (method.chars().all(|c| c.is_alphanumeric() || c == '_') && balanced(arguments))
        .then_some((target, call))
}

/// The variables the request asked to change in place that the turn
/// changed in place and did not rebind: by the change lines, as in
/// [`rebound_though_asked_in_place`].
pub fn changed_in_place_as_asked(
    request: &str,
    executions: &[Execution],
    namespace_names: &[String],
) -> Vec<String> {
    let Some(named) = asked_in_place(request, namespace_names) else {
        return Vec::new();
    };
    let mut changed: Vec<String> = Vec::new();
    for line in executions.iter().flat_map(|e| e.changes.iter()) {
        let Some(ChangeLine { name, change, .. }) = change_line::read(line) else {
            continue;
        };
        if !named.contains(&name) {
            continue;
        }
        if change == Change::Rebound {
            return Vec::new();
        }
        if change == Change::InPlace && !changed.iter().any(|n| n == name) {
            changed.push(name.to_owned());
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::script::ok;

    fn ran(code: &str, changes: &[&str]) -> Execution {
        Execution {
            output: String::new(),
            changes: changes.iter().map(|c| (*c).to_owned()).collect(),
            ..ok(code)
        }
    }

    #[test]
    fn a_rebound_name_the_request_wants_changed_in_place_is_found() {
        let names = vec!["people".to_owned(), "sales".to_owned()];
        let code = "people = people.fillna(people['age'].mean())";
        let rebound = [ran(code, &["people: DataFrame 4x2 (changed)"])];
        let in_place = [ran(code, &["people: DataFrame 4x2 (changed in place)"])];
        let request = "Fill the missing ages in people with the mean age (change people itself).";
        assert_eq!(
            rebound_though_asked_in_place(request, &rebound, &names),
            [Rebound {
                name: "people".into(),
                rewrite: Some("people.fillna(people['age'].mean(), inplace=True)".into()),
            }]
        );
        assert!(rebound_though_asked_in_place(request, &in_place, &names).is_empty());
        // Without words asking for the object itself, a new object is fine.
        let plain = "Fill the missing ages in people with the mean age.";
        assert!(rebound_though_asked_in_place(plain, &rebound, &names).is_empty());
        // A name the request does not mention is not its business.
        let other = [ran("", &["sales: DataFrame 3x2 (changed)"])];
        assert!(rebound_though_asked_in_place(request, &other, &names).is_empty());
    }

    #[test]
    fn a_list_rebinding_becomes_a_slice_assignment() {
        let code = "emails = [e.strip().lower() for e in emails]\nprint(emails)";
        assert_eq!(
            in_place_rewrite("emails", "list", code).as_deref(),
            Some("emails[:] = [e.strip().lower() for e in emails]")
        );
    }

    #[test]
    fn only_a_single_pandas_call_that_takes_inplace_is_rewritten() {
        let rewrite = |code| in_place_rewrite("df", "DataFrame", code);
        assert_eq!(
            rewrite("df = df.rename(columns={'a': 'b'})").as_deref(),
            Some("df.rename(columns={'a': 'b'}, inplace=True)")
        );
        assert_eq!(
            rewrite("df = df.dropna()").as_deref(),
            Some("df.dropna(inplace=True)")
        );
        // Chained, not a method that takes inplace, or not a rebinding.
        assert_eq!(rewrite("df = df.dropna().reset_index(drop=True)"), None);
        assert_eq!(rewrite("df = df.assign(c=1)"), None);
        assert_eq!(rewrite("df == df.dropna()"), None);
        assert_eq!(rewrite("df['a'] = df['a'].fillna(0)"), None);
        // Other types are left to the general advice.
        assert_eq!(in_place_rewrite("d", "dict", "d = {}"), None);
        // So is a value written over several lines.
        assert_eq!(
            in_place_rewrite("xs", "list", "xs = [\n    x * 2 for x in xs\n]"),
            None
        );
    }

    #[test]
    fn a_change_to_a_copy_is_rewritten_as_an_assignment_to_the_column() {
        assert_eq!(
            copy_rewrite("people['age'].fillna(people['age'].mean(), inplace=True)").as_deref(),
            Some("people['age'] = people['age'].fillna(people['age'].mean())")
        );
        assert_eq!(
            copy_rewrite("x = 1\npeople['age'] = people['age'].fillna(0, inplace=True)").as_deref(),
            Some("people['age'] = people['age'].fillna(0)")
        );
        assert_eq!(
            copy_rewrite("df.loc[:, 'a'].replace(1, 2, inplace=True)").as_deref(),
            Some("df.loc[:, 'a'] = df.loc[:, 'a'].replace(1, 2)")
        );
        // A whole table's method in place is fine, and chains are left alone.
        assert_eq!(copy_rewrite("df.fillna(0, inplace=True)"), None);
        assert_eq!(copy_rewrite("print(df)"), None);
    }

    #[test]
    fn a_name_changed_in_place_as_asked_is_found_unless_it_was_also_rebound() {
        let names = vec!["emails".to_owned()];
        let request = "Clean up emails (change the list itself).";
        let in_place = ran("", &["emails: list len 2 = ['a'] (changed in place)"]);
        let rebound = ran("", &["emails: list len 2 = ['a'] (changed)"]);
        assert_eq!(
            changed_in_place_as_asked(request, std::slice::from_ref(&in_place), &names),
            ["emails"]
        );
        assert!(
            changed_in_place_as_asked(request, &[rebound, in_place.clone()], &names).is_empty()
        );
        assert!(changed_in_place_as_asked("Clean up emails.", &[in_place], &names).is_empty());
    }

    #[test]
    fn pandas_warnings_about_a_copy_are_recognised() {
        assert!(changed_a_copy(
            "<agent>:1: ChainedAssignmentError: A value is being set on a copy"
        ));
        assert!(changed_a_copy(
            "SettingWithCopyWarning: A value is trying to be set"
        ));
        assert!(!changed_a_copy("FutureWarning: something else"));
    }
}
