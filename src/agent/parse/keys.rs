//! The keys a request writes out for a dict (`'low'`, `` `rows` ``,
//! `@mean_fare[...]`) and the keys a dict holds, read from its description:
//! a dict that holds none of them (the value stored as its own key,
//! `{-0.868: -0.868}`) is not what was asked for, whatever its values. The
//! keys are asked of the model, but one counts only where the request writes
//! it as code writes a key (quoted, in backticks, after an `@`, or a name
//! with an underscore or a digit), so a plain word the model takes for a key
//! ("a dict of each city's total": `city`) counts for nothing. A dict that
//! holds some of them is let be: the model also names as keys other things
//! the request quotes (a column it makes), and a right dict would go back.

use super::checks::words;
use super::form::Contradiction;
use super::json::json_objects;

/// At most this many keys are kept from an answer.
const KEYS_KEPT: usize = 12;

/// How many keys a dict's description lists (`mahtab.tools.describe`);
/// past them it ends in " ...".
const KEYS_LISTED: usize = 10;

/// Whether `request` writes anything out as a key could be written, other
/// than `name` itself: without one, no key the model says can count, and
/// the question need not be asked for keys.
pub fn any_written(request: &str, name: &str) -> bool {
    words(request).any(|word| !word.eq_ignore_ascii_case(name) && marked(request, word))
}

/// The keys the model's answer (`{"keys": [...]}`, `prompts/dict_keys.md`)
/// names that `request` writes out as keys, `name` aside, each once.
pub fn written(answer: &str, request: &str, name: &str) -> Vec<String> {
    let said: Vec<String> = json_objects(answer)
        .find_map(|value| value.get("keys")?.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|key| key.as_str().map(str::to_owned))
        .collect();
    let mut kept: Vec<String> = Vec::new();
    for key in &said {
        let key = key.trim().trim_matches(['\'', '"', '`']);
        let new = !kept.iter().any(|k| k == key);
        if new && !key.is_empty() && !key.eq_ignore_ascii_case(name) && marked(request, key) {
            kept.push(key.to_owned());
        }
    }
    kept.truncate(KEYS_KEPT);
    kept
}

/// Whether `request` writes `key` as code writes a key: in quotes or
/// backticks, after an `@`, or, for a name with an underscore or a digit
/// beside its letters, anywhere as a whole word.
fn marked(request: &str, key: &str) -> bool {
    let quoted = ["'", "\"", "`"]
        .iter()
        .any(|q| request.contains(&format!("{q}{key}{q}")));
    let code_like = key.chars().any(char::is_alphabetic)
        && key.chars().any(|c| c == '_' || c.is_ascii_digit())
        && words(request).any(|word| word == key);
    quoted || request.contains(&format!("@{key}")) || code_like
}

/// Whether `description` describes a dict (`answers: dict, 2 keys: ...`).
pub fn is_dict(description: &str) -> bool {
    listed(description).is_some()
}

/// How many keys the dict `description` describes holds, and its keys'
/// text as the description lists them.
fn listed(description: &str) -> Option<(usize, &str)> {
    let line = description.lines().next()?;
    let rest = line.split_once(": ")?.1.strip_prefix("dict, ")?;
    let (count, keys) = rest.split_once(" keys: ")?;
    Some((count.trim().parse().ok()?, keys))
}

/// Why the dict `description` describes is not what `name` must be: it
/// holds none of the `expected` keys, though it lists all it holds. Keys
/// are alike when one holds the other, case aside (`mean_fare` and
/// `@mean_fare[value]`): a key is the answer's name however it is decorated.
pub fn contradiction(name: &str, expected: &[String], description: &str) -> Option<Contradiction> {
    let (count, keys) = listed(description)?;
    let held: Vec<String> = words(keys).map(str::to_ascii_lowercase).collect();
    let holds = |key: &String| held.iter().any(|word| alike(&name_of(key), word));
    // Past the keys listed, one of them may be there.
    if expected.is_empty() || count > KEYS_LISTED || expected.iter().any(holds) {
        return None;
    }
    let quoted = expected
        .iter()
        .map(|k| format!("'{k}'"))
        .collect::<Vec<_>>()
        .join(", ");
    Some(Contradiction {
        reasoning: format!(
            "`{name}` holds none of the keys the request writes out ({quoted}); its keys are: \
             {keys}"
        ),
        next_action: format!(
            "use the names the request writes out as the keys of `{name}` ({quoted}), each \
             mapping to its value"
        ),
    })
}

/// A key's name: `@mean_fare[value]` is `mean_fare`, lower case.
fn name_of(key: &str) -> String {
    let key = key.trim().trim_start_matches('@');
    key.split('[').next().unwrap_or(key).to_ascii_lowercase()
}

/// Whether a key's name and a word of a dict's keys are one: the same, or
/// one holds the other where the held one is not a mere letter or two.
fn alike(name: &str, word: &str) -> bool {
    name == word
        || (word.len() >= 3 && name.contains(word))
        || (name.len() >= 3 && word.contains(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_counts_only_where_the_request_writes_it_as_a_key() {
        // Answers recorded from Qwen2.5-Coder-1.5B at temperature 0.
        let stats = "Make a dict named stats with keys 'low' and 'high': the smallest and \
                     largest price in df.";
        assert_eq!(
            written(r#"{"keys": ["low", "high"]}"#, stats, "stats"),
            ["low", "high"]
        );
        let size = "Store the number of rows and columns of df in a dict named size with keys \
                    `rows` and `cols`.";
        assert_eq!(
            written(r#"{"keys": ["rows", "cols"]}"#, size, "size"),
            ["rows", "cols"]
        );
        let dabench = "Store the answers in a dict named `answers`, from each answer's name to \
                       its value; their names and forms: @mean_wage[mean_value] \
                       @std_wage[std_value] where \"mean_value\" is a number.";
        let said = r#"{"keys": ["mean_wage", "std_wage", "answers", "mean_wage"]}"#;
        assert_eq!(written(said, dabench, "answers"), ["mean_wage", "std_wage"]);
        // The model's keys for dicts whose keys come from the data: plain
        // words, so none.
        let totals = "Store in a dict `totals` each city's total sales from the sales table.";
        assert!(written(r#"{"keys": ["city", "sales"]}"#, totals, "totals").is_empty());
        assert!(!any_written(totals, "totals"));
        let best = "Put the per-region maximum of revenue in a dict named best, from region \
                    to maximum.";
        assert!(written(r#"{"keys": ["region", "max_revenue"]}"#, best, "best").is_empty());
        // Unquoted plain words are not keys either, even where they are.
        let summary = "Keep the mean and the median in a dict named summary, under the keys \
                       mean and median.";
        assert!(written(r#"{"keys": ["mean", "median"]}"#, summary, "summary").is_empty());
        // A name with an underscore or a digit is written as code writes it.
        let classes = "Give mean_fare_class1 and mean_fare_class2 in a dict named fares.";
        let said = r#"{"keys": ["mean_fare_class1", "mean_fare_class9"]}"#;
        assert_eq!(written(said, classes, "fares"), ["mean_fare_class1"]);
        assert!(any_written(classes, "fares"));
        assert!(any_written(dabench, "answers"));
        assert!(written("no keys here", dabench, "answers").is_empty());
    }

    #[test]
    fn a_dict_with_none_of_the_keys_the_request_writes_is_contradicted() {
        let expected = ["mean_wage".to_owned(), "std_wage".to_owned()];
        // As `mahtab.tools.describe` writes a dict.
        let own_value_as_key = "answers: dict, 1 keys: -0.868\n{-0.868: -0.868}";
        let why = contradiction("answers", &expected, own_value_as_key).unwrap();
        assert!(
            why.reasoning
                .contains("holds none of the keys the request writes out ('mean_wage', 'std_wage'); its keys are: -0.868"),
            "{why:?}"
        );
        assert!(why.next_action.contains("keys of `answers`"), "{why:?}");
        assert!(is_dict(own_value_as_key));
        assert!(!is_dict("answers: float: 3.1"));
        // One of them is enough: the model names other quoted things as
        // keys too (dabench_69: a column the request makes).
        let one = "answers: dict, 1 keys: 'mean_wage'\n{'mean_wage': 3.1}";
        assert_eq!(contradiction("answers", &expected, one), None);
        // Decorated either way, a key is its name.
        let noted = "answers: dict, 1 keys: '@STD_WAGE[std_value]'\n{...}";
        assert_eq!(contradiction("answers", &expected, noted), None);
        let noted_expected = ["@std_wage[std_value]".to_owned()];
        let plain = "answers: dict, 1 keys: 'std_wage'\n{...}";
        assert_eq!(contradiction("answers", &noted_expected, plain), None);
        // No dict, or no key asked: nothing to say.
        assert_eq!(
            contradiction("answers", &expected, "answers: float: 3.1"),
            None
        );
        assert_eq!(contradiction("answers", &[], own_value_as_key), None);
        // Past the keys listed, one of them may be there.
        let many = "d: dict, 12 keys: 'a0', 'a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7', 'a8', \
                    'a9' ...";
        assert_eq!(contradiction("d", &expected, many), None);
    }
}
