//! Code the model is still writing. A block's code panel comes when the
//! block closes; a slow model takes 10 to 30 s over a long block, so once a
//! block has been open for a moment a panel shows its lines so far, updated
//! in place as more arrive, and emptied when the block closes (its code
//! panel follows) or the answer ends. A console, which ignores updates,
//! shows the first view only and then the code panel.

use std::time::Instant;

use serde_json::json;

use super::live::{REFRESH, SHOW_AFTER, tail};
use super::{Placement, Shown, fenced, in_place};

/// The live view of the block being written in one turn's answer.
pub struct WritingCode {
    turn: u32,
    /// When the block now open was opened.
    opened: Option<Instant>,
    /// When the panel last changed.
    refreshed: Option<Instant>,
    /// The panel's display id, once shown.
    display_id: Option<String>,
}

impl WritingCode {
    /// A view for the answer of turn `turn`.
    pub fn new(turn: u32) -> Self {
        Self {
            turn,
            opened: None,
            refreshed: None,
            display_id: None,
        }
    }

    /// The open block's code so far (`None`: no block is open), at `now`:
    /// the message that shows or updates the panel when it is time.
    pub fn update(&mut self, open: Option<&str>, now: Instant) -> Option<Shown> {
        let Some(code) = open else {
            return self.closed();
        };
        let opened = *self.opened.get_or_insert(now);
        let due = self.refreshed.is_none_or(|at| now - at >= REFRESH);
        if now - opened < SHOW_AFTER || !due || code.trim().is_empty() {
            return None;
        }
        self.refreshed = Some(now);
        let (placement, id) = in_place(&mut self.display_id, "writing");
        let (shown, cut) = tail(code);
        let shown = if cut {
            format!("# (earlier lines not shown)\n{shown}")
        } else {
            shown
        };
        let turn = self.turn;
        Some(Shown::display(
            placement,
            format!("[writing code, turn {turn}]\n{shown}"),
            Some(format!(
                "**writing code** · turn {turn}\n\n{}",
                fenced(&shown, "python")
            )),
            json!({ "kind": "writing", "turn": turn }),
            Some(&id),
        ))
    }

    /// The block closed or the answer ended: the message that empties the
    /// panel, if it was shown. A block opened later gets a panel of its
    /// own, below the code panel of this one.
    pub fn closed(&mut self) -> Option<Shown> {
        self.opened = None;
        self.refreshed = None;
        let id = self.display_id.take()?;
        Some(Shown::display(
            Placement::InPlace,
            String::new(),
            None,
            json!({ "kind": "writing", "turn": self.turn }),
            Some(&id),
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_quick_block_shows_no_panel() {
        let mut writing = WritingCode::new(1);
        let start = Instant::now();
        assert_eq!(writing.update(Some("x = 1"), start), None);
        let soon = start + SHOW_AFTER / 2;
        assert_eq!(writing.update(Some("x = 1\ny = 2"), soon), None);
        assert_eq!(writing.update(None, soon), None, "nothing to empty");
    }

    #[test]
    fn a_slow_block_shows_then_updates_in_place_then_empties() {
        let mut writing = WritingCode::new(2);
        let start = Instant::now();
        writing.update(Some("import time"), start);
        let later = start + SHOW_AFTER;
        let first = writing.update(Some("import time\nx = 1"), later).unwrap();
        assert_eq!(first.msg_type(), "display_data");
        assert_eq!(first.plain(), "[writing code, turn 2]\nimport time\nx = 1");
        assert_eq!(first.content()["metadata"]["mahtab"]["kind"], "writing");
        let content = first.content();
        let markdown = content["data"]["text/markdown"].as_str().unwrap();
        assert!(
            markdown.contains("```python\nimport time\nx = 1\n```"),
            "{markdown}"
        );
        // Not more often than the refresh allows.
        let soon = later + REFRESH / 2;
        assert_eq!(writing.update(Some("import time\nx = 1\ny"), soon), None);
        let update = writing
            .update(Some("import time\nx = 1\ny = 2"), later + REFRESH)
            .unwrap();
        assert_eq!(update.msg_type(), "update_display_data");
        assert!(update.plain().ends_with("y = 2"), "{}", update.plain());
        let id = &first.content()["transient"]["display_id"];
        assert_eq!(&update.content()["transient"]["display_id"], id);
        let emptied = writing.update(None, later + REFRESH * 2).unwrap();
        assert_eq!(emptied.msg_type(), "update_display_data");
        assert_eq!(emptied.plain(), "");
        assert_eq!(&emptied.content()["transient"]["display_id"], id);
        // The next block starts over: a moment's wait, then a new panel.
        let next = later + REFRESH * 3;
        assert_eq!(writing.update(Some("print(x)"), next), None);
        let second = writing
            .update(Some("print(x)\nprint(y)"), next + SHOW_AFTER)
            .unwrap();
        assert_eq!(second.msg_type(), "display_data");
        assert_ne!(&second.content()["transient"]["display_id"], id);
    }

    #[test]
    fn a_long_block_shows_its_latest_lines() {
        let mut writing = WritingCode::new(1);
        let start = Instant::now();
        let code: String = (0..100).map(|i| format!("x{i} = {i}\n")).collect();
        writing.update(Some(&code), start);
        let shown = writing
            .update(Some(&code), start + Duration::from_secs(2))
            .unwrap();
        let plain = shown.plain();
        assert!(
            plain.contains("# (earlier lines not shown)\nx70 = 70\n"),
            "{plain}"
        );
        assert!(plain.ends_with("x99 = 99"), "{plain}");
    }
}
