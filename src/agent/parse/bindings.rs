//! Names a block binds only as scaffolding: the target of a `for` loop or
//! of a `with ... as`. Python leaves them in the namespace after the block,
//! so they show among what it changed, but they are never the result a
//! request asked for: what the summary says was checked leaves them out.

/// The names `code` binds as a `for` loop's or a `with`'s target and never
/// assigns with `=` (`for col in cols:` gives `col`; `for i, (k, v) in`
/// gives `i`, `k`, `v`).
pub fn scaffolding_names(code: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in code.lines().map(str::trim_start) {
        let line = line.strip_prefix("async ").unwrap_or(line);
        if let Some(rest) = line.strip_prefix("for ") {
            if let Some((target, _)) = rest.split_once(" in ") {
                targets.extend(identifiers(target));
            }
        } else if line.starts_with("with ") {
            // The name after each `as` (`with a as f, b as g:`).
            for after in line.split(" as ").skip(1) {
                targets.extend(identifiers(after).into_iter().take(1));
            }
        }
    }
    targets.sort();
    targets.dedup();
    targets.retain(|name| !assigned(code, name));
    targets
}

/// The identifiers of an assignment target (`i, (k, v)`).
fn identifiers(target: &str) -> Vec<String> {
    target
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|word| {
            word.chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
        })
        .map(str::to_owned)
        .collect()
}

/// Whether a line of `code` assigns `name` with `=` (or `+=` and the like)
/// at its start: then it may hold a result after all.
fn assigned(code: &str, name: &str) -> bool {
    code.lines().any(|line| {
        let Some(rest) = line.trim_start().strip_prefix(name) else {
            return false;
        };
        let rest = rest.trim_start();
        let rest = rest
            .strip_prefix(|c: char| "+-*/%|&^@".contains(c))
            .unwrap_or(rest);
        rest.starts_with('=') && !rest.starts_with("==")
            || rest.starts_with(':') && rest.contains('=')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loop_and_with_targets_are_scaffolding() {
        let code = "totals = {}\nfor col in ['price', 'qty']:\n    totals[col] = df[col].sum()\n\
                    for i, (k, v) in enumerate(totals.items()):\n    print(i, k, v)\n\
                    with open('out.txt', 'w') as f:\n    f.write('x')\n";
        assert_eq!(scaffolding_names(code), ["col", "f", "i", "k", "v"]);
    }

    #[test]
    fn a_target_assigned_too_may_be_the_result() {
        let code = "best = None\nfor best in candidates:\n    pass\ntotal = 0\nfor x in xs:\n    total += x\n";
        assert_eq!(scaffolding_names(code), ["x"]);
        assert_eq!(
            scaffolding_names("for n in range(3):\n    n += 1\n"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn comprehensions_and_comparisons_bind_nothing() {
        let code = "squares = [x * x for x in range(4)]\nif squares == [0]:\n    pass\n";
        assert!(scaffolding_names(code).is_empty());
        assert_eq!(scaffolding_names("for x in xs:\n    x == 1\n"), ["x"]);
    }
}
