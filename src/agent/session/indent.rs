//! How a run nested in another (an `rlm()` or `ask()` call from agent code)
//! shows in the cell: everything it publishes is indented one step per
//! level, its streamed text line by line and its panels as a bar in plain
//! text and a quote in Markdown, so each level reads apart from its parent.

use std::sync::{Mutex, PoisonError};

use serde_json::Value;

use crate::agent::ports::{LiveText, Ports};
use crate::agent::render::{Display, Shown};
use crate::exception::PythonException;

/// One step of indentation in plain text.
const STEP: &str = "│ ";

/// Ports that indent what a nested run publishes and pass the rest through.
pub struct Indented<'a, P> {
    inner: &'a P,
    prefix: String,
    quote: String,
    /// Whether the streamed text so far ends a line (or there is none).
    at_line_start: Mutex<bool>,
}

impl<'a, P: Ports> Indented<'a, P> {
    pub fn new(inner: &'a P, levels: usize) -> Self {
        Self {
            inner,
            prefix: STEP.repeat(levels),
            quote: "> ".repeat(levels),
            at_line_start: Mutex::new(true),
        }
    }

    /// `text` with the prefix at the start of each line, continuing the
    /// streamed text before it.
    fn indent_stream(&self, text: &str) -> String {
        let mut at_line_start = self
            .at_line_start
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut out = String::with_capacity(text.len() + self.prefix.len());
        for piece in text.split_inclusive('\n') {
            if *at_line_start {
                out.push_str(&self.prefix);
            }
            out.push_str(piece);
            *at_line_start = piece.ends_with('\n');
        }
        out
    }
}

/// Every line of `text` after `prefix`.
fn prefixed(text: &str, prefix: &str) -> String {
    text.split('\n')
        .map(|line| format!("{prefix}{line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl<P: Ports> Ports for Indented<'_, P> {
    fn publish(&self, shown: Shown) {
        let shown = match shown {
            Shown::Stream(text) => Shown::Stream(self.indent_stream(&text)),
            Shown::Display(display) => Shown::Display(Display {
                plain: prefixed(&display.plain, &self.prefix),
                markdown: display.markdown.map(|m| prefixed(&m, &self.quote)),
                ..display
            }),
        };
        self.inner.publish(shown);
    }

    async fn python(&self, method: &str, args: Value) -> Result<Value, PythonException> {
        self.inner.python(method, args).await
    }

    async fn python_with_output(
        &self,
        method: &str,
        args: Value,
        output: LiveText,
    ) -> Result<Value, PythonException> {
        self.inner.python_with_output(method, args, output).await
    }

    async fn cancelled(&self) {
        self.inner.cancelled().await;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::agent::render;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<Shown>>);

    impl Ports for Recorder {
        fn publish(&self, shown: Shown) {
            self.0.lock().unwrap().push(shown);
        }
        async fn python(&self, _method: &str, _args: Value) -> Result<Value, PythonException> {
            Ok(Value::Null)
        }
        async fn cancelled(&self) {}
    }

    #[test]
    fn streamed_lines_are_indented_across_pieces() {
        let recorder = Recorder::default();
        let indented = Indented::new(&recorder, 2);
        for piece in ["Look", "ing\nat it", "\n", "done\n"] {
            indented.publish(render::stream(piece));
        }
        let text: String = recorder
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|shown| shown.content()["text"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(text, "│ │ Looking\n│ │ at it\n│ │ done\n");
    }

    #[test]
    fn panels_are_barred_in_text_and_quoted_in_markdown() {
        let recorder = Recorder::default();
        let indented = Indented::new(&recorder, 1);
        indented.publish(render::panel(
            "[code]\nx = 1".into(),
            "**code**\n\nx".into(),
            json!({ "kind": "code" }),
        ));
        let published = recorder.0.lock().unwrap();
        let content = published[0].content();
        assert_eq!(published[0].msg_type(), "display_data");
        assert_eq!(content["data"]["text/plain"], "│ [code]\n│ x = 1");
        assert_eq!(content["data"]["text/markdown"], "> **code**\n> \n> x");
        assert_eq!(content["metadata"]["mahtab"]["kind"], "code");
    }
}
