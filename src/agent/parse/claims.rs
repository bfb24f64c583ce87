//! Values a block states rather than computes: a `print("...")` of fixed
//! text holding a decimal number that nothing else the block printed
//! holds (`print("The largest price is 12.5")` beside a computed `3.0`).
//! A small model writes its guess of the result into the text; the review,
//! reading both, passes it. Only decimals count: a whole number in fixed
//! text is as often a label (`"Step 2"`, `"Top 10 rows"`) as a claim.

/// The first decimal number `code` prints as fixed text that its `output`
/// does not otherwise hold (as printed, or rounded to the digits written).
pub fn uncomputed_number(code: &str, output: &str) -> Option<String> {
    typed_in(code, output)
        .into_iter()
        .next()
        .map(|(_, number)| number)
}

/// Each fixed text `code` prints that holds a decimal its `output` does not
/// otherwise hold, with the first such decimal.
fn typed_in<'a>(code: &'a str, output: &str) -> Vec<(&'a str, String)> {
    let claims: Vec<&str> = code.lines().filter_map(printed_literal).collect();
    if claims.is_empty() {
        return Vec::new();
    }
    // What the block printed besides those texts.
    let computed: Vec<f64> = output
        .lines()
        .filter(|line| !claims.iter().any(|claim| line.trim() == claim.trim()))
        .flat_map(numbers)
        .filter_map(|number| number.parse().ok())
        .collect();
    claims
        .into_iter()
        .filter_map(|claim| {
            numbers(claim)
                .into_iter()
                .filter(|number| number.contains('.'))
                .find(|number| !computed.iter().any(|value| rounds_to(*value, number)))
                .map(|number| (claim, number.to_owned()))
        })
        .collect()
}

/// A block without the lines that print fixed text holding a decimal
/// nothing else it printed holds.
#[derive(Debug, PartialEq, Eq)]
pub struct WithoutTypedIn {
    /// The code without those lines.
    pub code: String,
    /// Its output without what they printed.
    pub output: String,
    /// The number each left-out line typed in.
    pub typed_in: Vec<String>,
}

/// `code` and `output` without the lines that print fixed text holding a
/// decimal nothing else it printed holds (None when no line does so).
pub fn without_typed_in(code: &str, output: &str) -> Option<WithoutTypedIn> {
    let (typed, numbers): (Vec<&str>, Vec<String>) = typed_in(code, output).into_iter().unzip();
    if typed.is_empty() {
        return None;
    }
    let is_typed = |line: &str| printed_literal(line).is_some_and(|claim| typed.contains(&claim));
    let kept_code = code.lines().filter(|line| !is_typed(line));
    let kept_output = output
        .lines()
        .filter(|line| !typed.iter().any(|claim| line.trim() == claim.trim()));
    Some(WithoutTypedIn {
        code: kept_code.collect::<Vec<_>>().join("\n"),
        output: kept_output.collect::<Vec<_>>().join("\n"),
        typed_in: numbers,
    })
}

/// The text of `print("...")` or `print('...')` when that is the whole line
/// and the text is fixed (no formatting, no concatenation). An f-string
/// with no placeholder is fixed text too: told to print what it computes,
/// a small model puts an `f` before the same sentence.
fn printed_literal(line: &str) -> Option<&str> {
    let inner = line
        .trim()
        .strip_prefix("print(")?
        .strip_suffix(')')?
        .trim();
    let (inner, formatted) = match inner.strip_prefix(['f', 'F']) {
        Some(rest) => (rest, true),
        None => (inner, false),
    };
    let quote = inner.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let text = inner.strip_prefix(quote)?.strip_suffix(quote)?;
    let placeholder = formatted && text.contains('{');
    let formatting = text.contains(quote) || text.contains('\\') || text.contains('%');
    (!placeholder && !formatting).then_some(text)
}

/// The numbers written in `text` (`12.5`, `3`, `-0.25`), as written.
fn numbers(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let starts = bytes[i].is_ascii_digit()
            && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || b"_.".contains(&bytes[i - 1])));
        if !starts {
            i += 1;
            continue;
        }
        let begin = if i > 0 && bytes[i - 1] == b'-' {
            i - 1
        } else {
            i
        };
        let mut end = i;
        while end < bytes.len() && bytes[end].is_ascii_digit() {
            end += 1;
        }
        if end + 1 < bytes.len() && bytes[end] == b'.' && bytes[end + 1].is_ascii_digit() {
            end += 1;
            while end < bytes.len() && bytes[end].is_ascii_digit() {
                end += 1;
            }
        }
        found.push(&text[begin..end]);
        i = end;
    }
    found
}

/// Whether `value` written to as many decimals as `written` has is `written`.
fn rounds_to(value: f64, written: &str) -> bool {
    let Ok(number) = written.parse::<f64>() else {
        return false;
    };
    let decimals = written.split_once('.').map_or(0, |(_, d)| d.len()) as i32;
    (value - number).abs() <= 0.5 * 10f64.powi(-decimals) + 1e-9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decimal_in_fixed_text_that_nothing_computed_is_found() {
        // As the local model followed the demo's table-summary skill.
        let code =
            "print(sales['price'].max())\nprint(\"The largest price is 12.5, the largest qty 4.\")";
        let output = "3.0\nThe largest price is 12.5, the largest qty 4.";
        assert_eq!(uncomputed_number(code, output).as_deref(), Some("12.5"));
    }

    #[test]
    fn computed_values_labels_and_formatted_text_are_not_claims() {
        // The same value computed (rounded as written).
        let code = "print(total)\nprint('The total is 44.2')";
        assert_eq!(
            uncomputed_number(code, "44.2000001\nThe total is 44.2"),
            None
        );
        // Whole numbers in fixed text are labels as often as claims.
        assert_eq!(
            uncomputed_number("print('Step 2: top 10')", "Step 2: top 10"),
            None
        );
        // Formatted text is computed.
        let code = "print(f'The mean is {m:.2f}')";
        assert_eq!(uncomputed_number(code, "The mean is 0.25"), None);
        assert_eq!(uncomputed_number("print('%.1f' % x)", "2.5"), None);
        assert_eq!(uncomputed_number("x = 'rate 0.5'", ""), None);
    }

    #[test]
    fn an_f_string_without_a_placeholder_is_fixed_text() {
        // The demo's skill cell, after being told to print computed values.
        let code = "print(f\"The largest value of the price column is 12.5.\")";
        let output = "The largest value of the price column is 12.5.";
        assert_eq!(uncomputed_number(code, output).as_deref(), Some("12.5"));
        let code = "print(F'rate 0.75')";
        assert_eq!(
            uncomputed_number(code, "rate 0.75").as_deref(),
            Some("0.75")
        );
        // With a placeholder it is computed.
        let code = "print(f\"The largest is {top}, against 12.5 last year\")";
        assert_eq!(
            uncomputed_number(code, "The largest is 3.0, against 12.5 last year"),
            None
        );
    }

    #[test]
    fn the_typed_in_lines_leave_the_code_and_the_output() {
        let code = "top = sales.max(numeric_only=True)\nprint(top)\nprint('Step 2')\n\
                    print(\"The largest price is 12.5.\")";
        let output = "price 3.0\nqty 25.0\nStep 2\nThe largest price is 12.5.";
        let without = without_typed_in(code, output).unwrap();
        assert_eq!(
            without.code,
            "top = sales.max(numeric_only=True)\nprint(top)\nprint('Step 2')"
        );
        assert_eq!(without.output, "price 3.0\nqty 25.0\nStep 2");
        assert_eq!(without.typed_in, ["12.5"]);
        // Nothing typed in: nothing to leave out.
        assert_eq!(without_typed_in("print(f'{m}')", "3.0"), None);
        assert_eq!(
            without_typed_in("print('The mean is 3.0')\nprint(m)", "The mean is 3.0\n3.0"),
            None
        );
    }

    #[test]
    fn numbers_are_read_as_written() {
        assert_eq!(numbers("a 12.5, b -3 and x2 (4.0)."), ["12.5", "-3", "4.0"]);
        assert_eq!(numbers("v1.2 1.x"), ["1"]);
    }
}
