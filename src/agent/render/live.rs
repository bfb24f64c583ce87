//! Agent code's output while the code runs. Once code has run for a moment
//! and written something, a panel shows the latest of what it wrote,
//! updated in place as more arrives, and emptied when the code ends (its
//! output panel follows, as for quick code). A console, which ignores
//! updates, shows the first view only and then the output panel, so
//! nothing is lost there either.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{Placement, Shown, fenced, in_place};

/// Quick code shows no live panel: its output panel comes soon enough.
pub const SHOW_AFTER: Duration = Duration::from_secs(1);

/// How often the panel may change.
pub const REFRESH: Duration = Duration::from_millis(250);

/// How much of the latest output the panel shows.
const TAIL_LINES: usize = 30;
const TAIL_CHARS: usize = 3_000;

/// The live view of one block's output.
pub struct LiveOutput {
    started: Instant,
    /// The latest output (older text is dropped as more arrives).
    text: String,
    /// Whether text was dropped from the front.
    cut: bool,
    /// Whether there is text the panel does not show yet.
    changed: bool,
    /// The panel's display id, once shown.
    display_id: Option<String>,
}

impl Default for LiveOutput {
    fn default() -> Self {
        Self::new()
    }
}

impl LiveOutput {
    /// A view of code that starts running now.
    pub fn new() -> Self {
        Self {
            started: Instant::now(),
            text: String::new(),
            cut: false,
            changed: false,
            display_id: None,
        }
    }

    /// Takes text the code wrote.
    pub fn push(&mut self, text: &str) {
        self.text.push_str(text);
        self.changed = true;
        // Keep a bounded buffer: a few screens more than is shown.
        if self.text.len() > TAIL_CHARS * 4 {
            let mut from = self.text.len() - TAIL_CHARS * 2;
            while !self.text.is_char_boundary(from) {
                from += 1;
            }
            self.text.drain(..from);
            self.cut = true;
        }
    }

    /// The message that shows or updates the panel, when it is time and
    /// there is something new.
    pub fn refresh(&mut self) -> Option<Shown> {
        let elapsed = self.started.elapsed();
        if !self.changed || elapsed < SHOW_AFTER || self.text.trim().is_empty() {
            return None;
        }
        self.changed = false;
        let (placement, id) = in_place(&mut self.display_id, "running");
        let (tail, cut) = tail(&self.text);
        let tail = if cut || self.cut {
            format!("(earlier lines not shown)\n{tail}")
        } else {
            tail
        };
        let seconds = elapsed.as_secs();
        Some(Shown::display(
            placement,
            format!("[running, {seconds} s]\n{tail}"),
            Some(format!(
                "**running** ({seconds} s)\n\n{}",
                fenced(&tail, "")
            )),
            json!({ "kind": "running" }),
            Some(&id),
        ))
    }

    /// The message that empties the panel, if it was shown.
    pub fn finish(self) -> Option<Shown> {
        let id = self.display_id?;
        Some(Shown::display(
            Placement::InPlace,
            String::new(),
            None,
            json!({ "kind": "running" }),
            Some(&id),
        ))
    }
}

/// The last lines of `text` as a terminal shows them (a carriage return
/// starts its line over, as progress bars use it), and whether any were
/// left out.
pub(super) fn tail(text: &str) -> (String, bool) {
    let lines: Vec<&str> = text
        .trim_end_matches('\n')
        .split('\n')
        .map(|line| {
            let line = line.trim_end_matches('\r');
            line.rsplit('\r').next().unwrap_or(line)
        })
        .collect();
    let from = lines.len().saturating_sub(TAIL_LINES);
    let mut shown = lines[from..].join("\n");
    let mut cut = from > 0;
    if shown.len() > TAIL_CHARS {
        let mut start = shown.len() - TAIL_CHARS;
        while !shown.is_char_boundary(start) {
            start += 1;
        }
        shown.drain(..start);
        cut = true;
    }
    (shown, cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(shown: &Shown) -> &str {
        shown.plain()
    }

    fn started_long_ago() -> LiveOutput {
        LiveOutput {
            started: Instant::now() - SHOW_AFTER * 3,
            ..LiveOutput::new()
        }
    }

    #[test]
    fn quick_or_silent_code_shows_nothing() {
        let mut quick = LiveOutput::new();
        quick.push("done\n");
        assert_eq!(quick.refresh(), None);
        assert_eq!(quick.finish(), None);
        let mut silent = started_long_ago();
        silent.push("\n");
        assert_eq!(silent.refresh(), None);
    }

    #[test]
    fn the_panel_shows_then_updates_in_place_then_empties() {
        let mut live = started_long_ago();
        live.push("step 1\n");
        let first = live.refresh().unwrap();
        assert_eq!(first.msg_type(), "display_data");
        assert_eq!(plain(&first), "[running, 3 s]\nstep 1");
        assert_eq!(first.content()["metadata"]["mahtab"]["kind"], "running");
        assert_eq!(live.refresh(), None, "nothing new, no message");
        live.push("step 2\n");
        let update = live.refresh().unwrap();
        assert_eq!(update.msg_type(), "update_display_data");
        assert_eq!(plain(&update), "[running, 3 s]\nstep 1\nstep 2");
        let id = &first.content()["transient"]["display_id"];
        assert_eq!(&update.content()["transient"]["display_id"], id);
        let emptied = live.finish().unwrap();
        assert_eq!(emptied.msg_type(), "update_display_data");
        assert_eq!(plain(&emptied), "");
        assert_eq!(&emptied.content()["transient"]["display_id"], id);
    }

    #[test]
    fn long_output_shows_its_latest_lines_as_a_terminal_would() {
        let (shown, cut) = tail(" 10%\r 50%\r100%\r\nnext\n");
        assert_eq!((shown.as_str(), cut), ("100%\nnext", false));
        let many: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let (shown, cut) = tail(&many);
        assert!(cut && shown.starts_with("line 70\n") && shown.ends_with("line 99"));
        let mut live = started_long_ago();
        for _ in 0..10_000 {
            live.push("ünïcode ");
        }
        let shown = live.refresh().unwrap();
        assert!(plain(&shown).contains("(earlier lines not shown)"));
        assert!(live.text.len() <= TAIL_CHARS * 4);
    }
}
