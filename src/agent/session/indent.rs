//! How a run nested in another (an `rlm()` or `ask()` call from agent code)
//! shows in the cell: everything it publishes is indented one step per
//! level, its streamed text line by line and its panels as a bar in plain
//! text and a quote in Markdown, so each level reads apart from its parent.

use std::sync::{Mutex, PoisonError};

use serde_json::Value;

use crate::agent::ports::{Output, Ports};
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
    fn publish(&self, msg_type: &str, mut content: Value) {
        if msg_type == "stream" {
            if let Some(text) = content["text"].as_str() {
                content["text"] = Value::String(self.indent_stream(text));
            }
        } else if let Some(data) = content.get_mut("data").and_then(Value::as_object_mut) {
            if let Some(plain) = data.get("text/plain").and_then(Value::as_str) {
                let plain = prefixed(plain, &self.prefix);
                data.insert("text/plain".into(), Value::String(plain));
            }
            if let Some(markdown) = data.get("text/markdown").and_then(Value::as_str) {
                let markdown = prefixed(markdown, &self.quote);
                data.insert("text/markdown".into(), Value::String(markdown));
            }
        }
        self.inner.publish(msg_type, content);
    }

    async fn python(&self, method: &str, args: Value) -> Result<Value, PythonException> {
        self.inner.python(method, args).await
    }

    async fn python_with_output(
        &self,
        method: &str,
        args: Value,
        output: Output,
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

    #[derive(Default)]
    struct Recorder(Mutex<Vec<(String, Value)>>);

    impl Ports for Recorder {
        fn publish(&self, msg_type: &str, content: Value) {
            self.0.lock().unwrap().push((msg_type.to_owned(), content));
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
            indented.publish("stream", json!({ "name": "stdout", "text": piece }));
        }
        let text: String = recorder
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|(_, c)| c["text"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(text, "│ │ Looking\n│ │ at it\n│ │ done\n");
    }

    #[test]
    fn panels_are_barred_in_text_and_quoted_in_markdown() {
        let recorder = Recorder::default();
        let indented = Indented::new(&recorder, 1);
        indented.publish(
            "display_data",
            json!({
                "data": { "text/plain": "[code]\nx = 1", "text/markdown": "**code**\n\nx" },
                "metadata": { "mahtab": { "kind": "code" } },
            }),
        );
        let published = recorder.0.lock().unwrap();
        let (msg_type, content) = &published[0];
        assert_eq!(msg_type, "display_data");
        assert_eq!(content["data"]["text/plain"], "│ [code]\n│ x = 1");
        assert_eq!(content["data"]["text/markdown"], "> **code**\n> \n> x");
        assert_eq!(content["metadata"]["mahtab"]["kind"], "code");
    }
}
