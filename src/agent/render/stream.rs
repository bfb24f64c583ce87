//! A model's text on its way into the cell: code that will run is filtered
//! out (it shows as its own panel), and the rest is coalesced into few
//! `stream` messages, so a fast model does not flood the frontend.

use crate::agent::parse::prose::ProseFilter;

/// Coalesces streamed text into few messages, at most one per coalescing
/// tick: held text goes out when the tick comes round, and the first text
/// after a quiet tick (at the start, or after the model paused) goes out at
/// once and uses up the next tick's turn. No clock is read per piece of
/// text; the caller drives [`Coalescer::tick`].
pub struct Coalescer<'a> {
    out: &'a (dyn Fn(&str) + Sync),
    /// Text not yet published.
    pub pending: String,
    /// A tick passed with nothing to publish: new text may go out at once.
    due: bool,
    /// Text went out between ticks: the next tick publishes nothing.
    sent_early: bool,
    /// Whether the published text so far ends a line (or there is none).
    published_line_end: bool,
}

impl<'a> Coalescer<'a> {
    /// A coalescer that publishes through `out`.
    pub fn new(out: &'a (dyn Fn(&str) + Sync)) -> Self {
        Self {
            out,
            pending: String::new(),
            due: true,
            sent_early: false,
            published_line_end: true,
        }
    }

    /// Text was added to `pending`: it goes out now if it is due.
    pub fn added(&mut self) {
        if self.due && !self.pending.is_empty() {
            self.flush();
            self.due = false;
            self.sent_early = true;
        }
    }

    /// Publishes what is held.
    pub fn flush(&mut self) {
        if !self.pending.is_empty() {
            self.published_line_end = self.pending.ends_with('\n');
            (self.out)(&std::mem::take(&mut self.pending));
        }
    }

    /// The coalescing tick.
    pub fn tick(&mut self) {
        if std::mem::take(&mut self.sent_early) {
            return;
        }
        if self.pending.is_empty() {
            self.due = true;
        } else {
            self.flush();
        }
    }

    /// Publishes `text` at once, after what is held (a notice between
    /// pieces of the answer).
    pub fn interject(&mut self, text: &str) {
        self.flush();
        (self.out)(text);
        self.published_line_end = text.ends_with('\n');
    }

    /// Whether all text so far, published or not, ends a line.
    pub fn at_line_start(&self) -> bool {
        if self.pending.is_empty() {
            self.published_line_end
        } else {
            self.pending.ends_with('\n')
        }
    }
}

/// One model call's text as the user sees it: with `show`, prose goes
/// through the filter into the coalescer; without, nothing is shown.
pub struct ShownText<'a> {
    pub coalescer: Coalescer<'a>,
    prose: ProseFilter,
    show: bool,
}

impl<'a> ShownText<'a> {
    pub fn new(out: &'a (dyn Fn(&str) + Sync), show: bool) -> Self {
        Self {
            coalescer: Coalescer::new(out),
            prose: ProseFilter::default(),
            show,
        }
    }

    /// A piece of the model's answer.
    pub fn push(&mut self, text: &str) {
        if self.show {
            self.prose.push(text, &mut self.coalescer.pending);
            self.coalescer.added();
        }
    }

    /// The answer is complete: what the filter held goes out, and the
    /// answer's line is ended so that what follows starts on its own.
    pub fn finish(mut self) {
        if self.show {
            let rest = self.prose.finish();
            self.coalescer.pending.push_str(&rest);
            if !self.coalescer.at_line_start() {
                self.coalescer.pending.push('\n');
            }
        }
        self.coalescer.flush();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn published(run: impl FnOnce(&(dyn Fn(&str) + Sync))) -> Vec<String> {
        let sent = Mutex::new(Vec::new());
        let out = |text: &str| sent.lock().unwrap().push(text.to_owned());
        run(&out);
        sent.into_inner().unwrap()
    }

    #[test]
    fn the_first_text_goes_out_at_once_and_the_rest_waits_for_the_tick() {
        let sent = published(|out| {
            let mut c = Coalescer::new(out);
            c.pending.push_str("Hel");
            c.added();
            c.pending.push_str("lo ");
            c.added();
            c.pending.push_str("world");
            c.added();
            // The early send used up this tick's turn.
            c.tick();
            c.tick();
            c.pending.push('!');
            c.added();
            c.flush();
        });
        assert_eq!(sent, ["Hel", "lo world", "!"]);
    }

    #[test]
    fn after_a_quiet_tick_new_text_is_due_at_once() {
        let sent = published(|out| {
            let mut c = Coalescer::new(out);
            c.pending.push('a');
            c.added();
            c.tick(); // uses up the early send
            c.tick(); // nothing held: due again
            c.pending.push('b');
            c.added();
        });
        assert_eq!(sent, ["a", "b"]);
    }

    #[test]
    fn shown_text_hides_code_and_ends_its_line() {
        let sent = published(|out| {
            let mut shown = ShownText::new(out, true);
            for piece in ["Here:\n```py", "thon\nx = 1\n```\n", "done"] {
                shown.push(piece);
                shown.coalescer.tick();
            }
            shown.finish();
        });
        let text = sent.concat();
        assert!(!text.contains("x = 1"), "{text:?}");
        assert!(
            text.starts_with("Here:") && text.ends_with("done\n"),
            "{text:?}"
        );
    }

    #[test]
    fn hidden_text_publishes_nothing() {
        let sent = published(|out| {
            let mut shown = ShownText::new(out, false);
            shown.push("a verdict");
            shown.finish();
        });
        assert!(sent.is_empty());
    }

    #[test]
    fn an_interjection_comes_after_held_text() {
        let sent = published(|out| {
            let mut c = Coalescer::new(out);
            c.pending.push('a');
            c.added();
            c.pending.push('b');
            c.added();
            c.interject("(retrying)\n");
            assert!(c.at_line_start());
        });
        assert_eq!(sent, ["a", "b", "(retrying)\n"]);
    }
}
