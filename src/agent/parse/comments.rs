//! A block with its comments taken out: what the review reads of the code.
//! A small model's comments restate the request ("# skewness by Pearson's
//! first coefficient" above `.skew()`), and a small judge reads them as
//! what the code does; without them it weighs the calls themselves.

/// `code` without its `#` comments (strings, triple-quoted ones too, kept
/// whole), without the lines that held only a comment, and with no more
/// than one blank line in a row.
pub fn without_comments(code: &str) -> String {
    let mut kept = String::with_capacity(code.len());
    let mut scanner = Scanner::default();
    for line in code.split_inclusive('\n') {
        // A line that begins inside a triple-quoted string is the string's
        // text: kept as written, blank or not, up to any comment after it.
        let in_string = scanner.open_triple.is_some();
        let (code_part, had_comment) = scanner.line(line);
        if in_string {
            let text = match had_comment {
                true => code_part.trim_end(),
                false => code_part.strip_suffix('\n').unwrap_or(code_part),
            };
            kept.push_str(text);
            kept.push('\n');
            continue;
        }
        let text = code_part.trim_end();
        let blank_before = kept.is_empty() || kept.ends_with("\n\n");
        if text.trim().is_empty() {
            // A line that held only a comment goes; a blank line stays once.
            if !had_comment && !blank_before {
                kept.push('\n');
            }
            continue;
        }
        kept.push_str(text);
        kept.push('\n');
    }
    kept.trim_end().to_owned()
}

/// Where a scan stands between lines: inside a triple-quoted string or not.
#[derive(Default)]
struct Scanner {
    /// The quote of a triple-quoted string left open at a line's end.
    open_triple: Option<char>,
}

impl Scanner {
    /// The part of `line` before its comment (the whole line when a string
    /// holds the `#`), and whether it had a comment.
    fn line<'a>(&mut self, line: &'a str) -> (&'a str, bool) {
        // Bytes, not chars: every byte that matters is ASCII, and an ASCII
        // byte is never part of another character.
        let bytes = line.as_bytes();
        let mut i = 0;
        let mut quote = self.open_triple.map(|q| (q, true));
        while i < bytes.len() {
            let c = bytes[i] as char;
            match quote {
                Some((q, triple)) => {
                    if c == '\\' {
                        i += 2;
                        continue;
                    }
                    if c == q {
                        if !triple {
                            quote = None;
                        } else if bytes[i..].starts_with(&[q as u8; 3]) {
                            quote = None;
                            i += 3;
                            continue;
                        }
                    }
                }
                None if c == '\'' || c == '"' => {
                    let triple = bytes[i..].starts_with(&[c as u8; 3]);
                    quote = Some((c, triple));
                    i += if triple { 3 } else { 1 };
                    continue;
                }
                None if c == '#' => {
                    self.open_triple = None;
                    return (&line[..i], true);
                }
                None => {}
            }
            i += 1;
        }
        // A one-quote string ends with its line (Python would not run it
        // otherwise); a triple-quoted one goes on.
        self.open_triple = match quote {
            Some((q, true)) => Some(q),
            _ => None,
        };
        (line, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_go_and_code_stays() {
        // Recorded from the local model (a DABench answer).
        let code = "import pandas as pd\n\n# Load the weather dataset\nweather_data = pd.read_csv('weather_train.csv')\n\n# Calculate the skewness using Pearson's First Coefficient of Skewness\nskewness_value = weather_data['wind speed'].skew()  # Pearson\n";
        assert_eq!(
            without_comments(code),
            "import pandas as pd\n\nweather_data = pd.read_csv('weather_train.csv')\n\nskewness_value = weather_data['wind speed'].skew()"
        );
    }

    #[test]
    fn a_hash_inside_a_string_is_not_a_comment() {
        let code = "s = 'a # b'  # note\nt = \"#x\"\nu = f\"{s}#\" # f\n";
        assert_eq!(
            without_comments(code),
            "s = 'a # b'\nt = \"#x\"\nu = f\"{s}#\""
        );
    }

    #[test]
    fn triple_quoted_strings_keep_their_lines() {
        let code =
            "doc = \"\"\"first\n# not a comment\nlast\"\"\"  # a comment\nx = '''one # two'''\n";
        assert_eq!(
            without_comments(code),
            "doc = \"\"\"first\n# not a comment\nlast\"\"\"\nx = '''one # two'''"
        );
    }

    #[test]
    fn a_triple_quoted_strings_blank_lines_stay_as_written() {
        let code = "doc = '''a\n\n\n# b  \n'''  # gone\nx = 1\n";
        assert_eq!(without_comments(code), "doc = '''a\n\n\n# b  \n'''\nx = 1");
    }

    #[test]
    fn escaped_quotes_do_not_end_a_string() {
        let code = "s = 'it\\'s # here'  # gone\n";
        assert_eq!(without_comments(code), "s = 'it\\'s # here'");
        // Text beyond ASCII, escaped or not, is read through.
        let code = "s = 'caf\\é # ü'  # ö\nt = 'ß' # x";
        assert_eq!(without_comments(code), "s = 'caf\\é # ü'\nt = 'ß'");
    }

    #[test]
    fn blank_lines_stay_single_and_code_without_comments_is_unchanged() {
        let code = "a = 1\n\n\n# only a comment\n\nb = 2\n";
        assert_eq!(without_comments(code), "a = 1\n\nb = 2");
        assert_eq!(without_comments("x = 1\ny = x + 1"), "x = 1\ny = x + 1");
        assert_eq!(without_comments("# nothing but a comment\n"), "");
    }
}
