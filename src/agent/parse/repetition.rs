//! A model repeating itself. A small model decoding greedily can say the
//! same sentence again and again until its token limit, which on a CPU is
//! minutes of a cell. Watched while an answer streams, so the call can end
//! at the third saying, with the answer cut back to its first. Only prose
//! counts: code says the same line several times for good reasons
//! (`plt.figure(figsize=(10, 6))` before each of three plots).

use std::collections::HashMap;

/// Shorter lines (blank ones, fences, `}`, `plt.show()`) repeat for good
/// reasons.
const MIN_CHARS: usize = 20;
/// A line said this many times in one answer is a loop.
const SAYINGS: usize = 3;

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
    /// Where the answer stops making sense, once it loops: the second
    /// saying of the line it repeats.
    loop_start: Option<usize>,
}

impl RepeatWatch {
    /// Takes the next piece of the answer; true once it loops.
    pub fn push(&mut self, piece: &str) -> bool {
        if self.loop_start.is_some() {
            return true;
        }
        self.text.push_str(piece);
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

    /// The answer so far, without the loop: up to the second saying of the
    /// line it repeats (all of it when it does not loop).
    pub fn text(&self) -> &str {
        &self.text[..self.loop_start.unwrap_or(self.text.len())]
    }
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
}
