//! A model repeating itself. A small model decoding greedily can say the
//! same sentence again and again until its token limit, which on a CPU is
//! minutes of a cell. Watched while an answer streams, so the call can end
//! at the third saying, with the answer cut back to its first. Two kinds
//! count: a long line of prose said three times anywhere (code says the
//! same line several times for good reasons, `plt.figure(figsize=(10, 6))`
//! before each of three plots), and, in code or prose, an end that says
//! one piece over and over with nothing between (`0, 0, 0, …` on one line,
//! or the same lines again and again).

use std::collections::HashMap;

/// Shorter lines (blank ones, fences, `}`, `plt.show()`) repeat for good
/// reasons.
const MIN_CHARS: usize = 20;
/// A line said this many times in one answer is a loop.
const SAYINGS: usize = 3;
/// A run of one piece said again and again this long (and three times or
/// more) is a loop. Shorter runs are data a request may hold (a row of
/// zeros, a `# ====` rule).
const LOOP_CHARS: usize = 300;
/// The longest piece a run is looked for in: a few lines of code.
const LONGEST_PIECE: usize = 1000;
/// Runs are looked for again after this much more text.
const LOOK_EVERY: usize = 32;

/// Watches an answer as it arrives, line by line.
#[derive(Debug, Default)]
pub struct RepeatWatch {
    text: String,
    /// Where the next line to look at starts.
    next_line: usize,
    /// The lines looked at so far end inside a fenced code block.
    in_code: bool,
    /// Each long line: how often it was said, and where its second saying
    /// starts.
    said: HashMap<String, (usize, usize)>,
    /// How long the text was when runs were last looked for.
    looked_at: usize,
    /// Where the answer stops making sense, once it loops: the second
    /// saying of what it repeats.
    loop_start: Option<usize>,
}

impl RepeatWatch {
    /// Takes the next piece of the answer; true once it loops.
    pub fn push(&mut self, piece: &str) -> bool {
        if self.loop_start.is_some() {
            return true;
        }
        self.text.push_str(piece);
        if self.text.len() >= self.looked_at + LOOK_EVERY {
            self.looked_at = self.text.len();
            if let Some(second) = repeated_end(self.text.as_bytes()) {
                self.loop_start = Some(self.char_boundary_from(second));
                return true;
            }
        }
        while let Some(end) = self.text[self.next_line..].find('\n') {
            let start = self.next_line;
            self.next_line = start + end + 1;
            let line = self.text[start..start + end].trim();
            if line.starts_with("```") {
                self.in_code = !self.in_code;
                continue;
            }
            if self.in_code || line.chars().count() < MIN_CHARS {
                continue;
            }
            let (count, second) = self.said.entry(line.to_owned()).or_insert((0, 0));
            *count += 1;
            if *count == 2 {
                *second = start;
            }
            if *count >= SAYINGS {
                self.loop_start = Some(*second);
                return true;
            }
        }
        false
    }

    /// The answer so far, without the loop: up to the second saying of
    /// what it repeats (all of it when it does not loop).
    pub fn text(&self) -> &str {
        &self.text[..self.loop_start.unwrap_or(self.text.len())]
    }

    /// The first char boundary at or after byte `at` (a run compared byte
    /// by byte may begin inside a character).
    fn char_boundary_from(&self, mut at: usize) -> usize {
        while !self.text.is_char_boundary(at) {
            at += 1;
        }
        at
    }
}

/// Where `text`'s end begins to say one piece over and over, when it does
/// (the piece said three times or more, the run [`LOOP_CHARS`] long): the
/// start of the piece's second saying, at a line's start where the piece
/// holds one (the run, compared byte by byte, may start a little before the
/// line the model repeats, where the text before ends as the piece does).
/// The shortest such piece is taken.
fn repeated_end(text: &[u8]) -> Option<usize> {
    let len = text.len();
    (1..=LONGEST_PIECE.min(len / 3)).find_map(|piece| {
        // How far back from the end each byte equals the one a piece before.
        let same = (piece..len)
            .rev()
            .take_while(|&at| text[at] == text[at - piece])
            .count();
        if same < 2 * piece || same < LOOP_CHARS {
            return None;
        }
        let second = len - same;
        let line_start = (second..second + piece).find(|&at| text[at - 1] == b'\n');
        Some(line_start.unwrap_or(second))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Qwen2.5-Coder-1.5B (Q4_K_M, temperature 0) wrote when asked to
    /// explain a table of bin counts, as it streamed (its third line and on
    /// repeat until the token limit).
    const RECORDED_LOOP: &str = "The output shows the bin counts for each user in the DataFrame. \
The values in the `views` column are grouped into bins based on the `bins` list.\n\
The values in the `views` column are grouped into bins based on the `bins` list. The `counts` \
column shows the number of views in each bin for each user.\n\
The values in the `views` column are grouped into bins based on the `bins` list. The `counts` \
column shows the number of views in each bin for each user.\n\
The values in the `views` column are grouped into bins based on the `bins` list. The `counts` \
column shows the number of views in each bin for each user.\n\
The values in the `views` column are grouped into bins based on the `bins` list. The `counts` \
column shows the number of views in each bin for each user.\n";

    fn streamed(text: &str, piece: usize) -> (RepeatWatch, Option<usize>) {
        let mut watch = RepeatWatch::default();
        let chars: Vec<char> = text.chars().collect();
        for (n, chunk) in chars.chunks(piece).enumerate() {
            if watch.push(&chunk.iter().collect::<String>()) {
                return (watch, Some(n));
            }
        }
        (watch, None)
    }

    #[test]
    fn a_recorded_loop_is_caught_at_its_third_saying_and_cut_back_to_the_first() {
        for piece in [1, 7, 4096] {
            let (watch, stopped) = streamed(RECORDED_LOOP, piece);
            assert!(stopped.is_some(), "piece {piece}");
            let kept = watch.text();
            assert_eq!(
                kept.matches("The `counts` column shows").count(),
                1,
                "{kept}"
            );
            assert!(kept.starts_with("The output shows the bin counts"));
            assert!(kept.ends_with("for each user.\n"));
        }
        // Caught before the fourth saying arrives, in small pieces.
        let (_, stopped) = streamed(RECORDED_LOOP, 5);
        let third_end = RECORDED_LOOP.match_indices('\n').nth(3).unwrap().0;
        assert!(stopped.unwrap() * 5 <= third_end + 5);
    }

    #[test]
    fn answers_that_do_not_loop_are_left_alone() {
        let answers = [
            // Short lines repeat in any answer.
            "```python\nplt.show()\n```\n\n```python\nplt.show()\n```\n\n```python\nplt.show()\n```\n",
            // Code repeats lines.
            "Three plots:\n```python\nplt.figure(figsize=(10, 6))\ndf.a.plot()\n\
plt.figure(figsize=(10, 6))\ndf.b.plot()\nplt.figure(figsize=(10, 6))\ndf.c.plot()\n```\n",
            // A long line said twice is a summary, not a loop.
            "The mean of price is 12.5 over 40 rows.\nIt is computed from every row.\n\
The mean of price is 12.5 over 40 rows.\n",
            // Lines that differ in a value are not the same line.
            "Class 1 males are 41.28 years old on average.\nClass 2 males are 30.74 years old on average.\nClass 3 males are 25.96 years old on average.\n",
        ];
        for answer in answers {
            let (watch, stopped) = streamed(answer, 3);
            assert_eq!(stopped, None, "{answer}");
            assert_eq!(watch.text(), answer);
        }
        // Prose after a block loops like any other.
        let line = "The plot shows the monthly totals of the sales table.\n";
        let answer = format!("```python\n{line}{line}{line}```\n{line}{line}{line}");
        let (watch, stopped) = streamed(&answer, 9);
        assert!(stopped.is_some());
        assert_eq!(
            watch.text(),
            format!("```python\n{line}{line}{line}```\n{line}")
        );
        // A loop whose last line has not ended is not judged yet.
        let mut watch = RepeatWatch::default();
        let line = "The total revenue of the sales table is 44.2 in all.";
        assert!(!watch.push(&format!("{line}\n{line}\n{line}")));
        assert!(watch.push("\n"));
    }

    #[test]
    fn code_that_says_one_piece_over_and_over_is_caught_and_cut_back_to_the_first() {
        // One line that never ends: the same tuple again and again.
        let start = "Here is the code:\n```python\nvalue_vars = [";
        let answer = format!("{start}{}", "('A', 'B', 'E'), ".repeat(80));
        let (watch, stopped) = streamed(&answer, 4);
        assert!(stopped.unwrap() * 4 < start.len() + LOOP_CHARS + 2 * LOOK_EVERY);
        assert_eq!(watch.text(), format!("{start}('A', 'B', 'E'), "));
        // The same lines again and again.
        let start = "```python\ndf = pd.read_csv('sales.csv')\n";
        let lines = "df['total'] = df['price'] * df['qty']\nprint(df.groupby('region').sum())\n";
        let answer = format!("{start}{}", lines.repeat(8));
        let (watch, stopped) = streamed(&answer, 5);
        assert!(stopped.is_some());
        assert_eq!(watch.text(), format!("{start}{lines}"));
        // The run may start inside a character: the text is cut where the
        // next one starts ('Ʃ' and '©' share their last byte).
        let (watch, stopped) = streamed(&format!("Ʃ{}", "©".repeat(200)), 1);
        assert!(stopped.is_some());
        assert_eq!(watch.text(), "Ʃ©");
    }

    /// How Qwen2.5-Coder-1.5B (Q4_K_M, temperature 0) began a code answer
    /// to a DS-1000 request on the development split: after a few lines of
    /// its own, the same four lines came again and again until its
    /// 2048-token limit.
    const RECORDED_CODE_START: &str = "```python\nimport pandas as pd\ndf = _eval_input\n\n\
# Check the names of the columns\nprint(dir(df))\n\n# Select the column A\nA = df['A']\n\n\
# Check the names of the columns in A\nprint(dir(A))\n\n";
    const RECORDED_CODE_LOOP: &str = "# Check the type of A\nprint(type(A))\n\n# Check the first few rows of A\nprint(A.head())\n\n";

    #[test]
    fn a_recorded_code_loop_is_caught_within_five_sayings() {
        let answer = format!("{RECORDED_CODE_START}{}", RECORDED_CODE_LOOP.repeat(20));
        let (watch, stopped) = streamed(&answer, 4);
        let fifth_end = RECORDED_CODE_START.len() + 5 * RECORDED_CODE_LOOP.len();
        assert!(stopped.unwrap() * 4 < fifth_end);
        assert_eq!(
            watch.text(),
            format!(
                "{RECORDED_CODE_START}{}",
                RECORDED_CODE_LOOP.trim_end_matches('\n')
            ) + "\n"
        );
    }

    #[test]
    fn short_runs_in_code_are_data_not_a_loop() {
        let answers = [
            format!(
                "```python\n# {}\nzeros = [{}]\n```\n",
                "=".repeat(78),
                "0, ".repeat(60)
            ),
            format!(
                "```python\nlabels = [{}]\n```\n",
                "'low', 'high', ".repeat(12)
            ),
        ];
        for answer in answers {
            let (watch, stopped) = streamed(&answer, 3);
            assert_eq!(stopped, None, "{answer}");
            assert_eq!(watch.text(), answer);
        }
    }
}
