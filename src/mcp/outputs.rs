//! What one execution showed, gathered from its IOPub messages into text a
//! model reads (streams, results, displays, the error's traceback without
//! colour codes) and pictures (PNG figures, made small). Displays that are
//! updated in place (an agent's panels, progress bars) keep their latest
//! form, and `clear_output` clears, as a notebook shows them.

use base64::Engine;
use serde_json::Value;

use super::images;
use crate::text::floor_char_boundary;

/// The most stream text kept of one execution (bytes); past it the rest is
/// counted, not kept.
const KEPT_CHARS: usize = 8 << 20;
/// The most pictures kept of one execution (the first ones).
const KEPT_IMAGES: usize = 4;
/// The most text kept of one display (a result's repr, a panel).
const DISPLAY_CHARS: usize = 64 << 10;

/// A PNG figure, base64, ready for an MCP image content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub base64: String,
}

#[derive(Debug)]
enum Part {
    Stream {
        name: String,
        text: String,
        /// The text ended with a carriage return: the line is overwritten
        /// if more text comes that does not start a new line.
        pending_return: bool,
    },
    Display {
        id: Option<String>,
        text: String,
        image: Option<Image>,
    },
}

/// The outputs of one execution so far.
#[derive(Debug, Default)]
pub struct Outputs {
    parts: Vec<Part>,
    /// `clear_output(wait=True)`: clear when the next output comes.
    clear_pending: bool,
    /// Bytes of stream text that did not fit [`KEPT_CHARS`].
    pub dropped_chars: usize,
    /// The exception's name and value, once the code raised.
    pub error: Option<String>,
    pub execution_count: Option<u64>,
    /// The kernel went idle for the request: nothing more will come.
    pub done: bool,
}

impl Outputs {
    /// The picture a display message carries, made small: the slow part of
    /// taking a message, done before [`Outputs::add`] (and its lock).
    pub fn image_of(msg_type: &str, content: &Value) -> Option<Image> {
        match msg_type {
            "execute_result" | "display_data" | "update_display_data" => {
                content["data"]["image/png"].as_str().and_then(small_png)
            }
            _ => None,
        }
    }

    /// Takes one IOPub message of the execution, with its picture from
    /// [`Outputs::image_of`]; returns a line worth telling a waiting client
    /// (the latest output line), if any.
    pub fn add(&mut self, msg_type: &str, content: &Value, image: Option<Image>) -> Option<String> {
        match msg_type {
            "stream" => {
                let name = content["name"].as_str().unwrap_or("stdout");
                let text = content["text"].as_str().unwrap_or_default();
                self.clear_if_pending();
                self.add_stream(name, text);
                last_line(text)
            }
            "execute_result" | "display_data" => {
                self.clear_if_pending();
                let id = content["transient"]["display_id"]
                    .as_str()
                    .map(str::to_owned);
                let image = image.filter(|_| self.image_count() < KEPT_IMAGES);
                let (text, image) = self.display(content, msg_type == "execute_result", image);
                let line = last_line(&text);
                self.parts.push(Part::Display { id, text, image });
                line
            }
            "update_display_data" => {
                let id = content["transient"]["display_id"].as_str()?;
                let (text, image) = self.display(content, false, image);
                let line = last_line(&text);
                for part in &mut self.parts {
                    if let Part::Display {
                        id: Some(shown),
                        text: old,
                        image: old_image,
                    } = part
                        && shown == id
                    {
                        *old = text.clone();
                        *old_image = image.clone();
                    }
                }
                line
            }
            "clear_output" => {
                if content["wait"].as_bool().unwrap_or(false) {
                    self.clear_pending = true;
                } else {
                    self.parts.clear();
                }
                None
            }
            "error" => {
                let name = content["ename"].as_str().unwrap_or("Error");
                let value = content["evalue"].as_str().unwrap_or_default();
                self.error = Some(format!("{name}: {value}"));
                let traceback: Vec<&str> = content["traceback"]
                    .as_array()
                    .map(|lines| lines.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let text = if traceback.is_empty() {
                    format!("{name}: {value}")
                } else {
                    strip_ansi(&traceback.join("\n"))
                };
                self.add_stream("error", &format!("{}\n", text.trim_end()));
                self.error.clone()
            }
            "execute_input" => {
                self.execution_count = content["execution_count"].as_u64();
                None
            }
            "status" => {
                self.done |= content["execution_state"] == "idle";
                None
            }
            _ => None,
        }
    }

    fn clear_if_pending(&mut self) {
        if std::mem::take(&mut self.clear_pending) {
            self.parts.clear();
        }
    }

    fn kept_chars(&self) -> usize {
        self.parts
            .iter()
            .map(|part| match part {
                Part::Stream { text, .. } | Part::Display { text, .. } => text.len(),
            })
            .sum()
    }

    fn add_stream(&mut self, name: &str, text: &str) {
        let room = KEPT_CHARS.saturating_sub(self.kept_chars());
        let text = if text.len() > room {
            self.dropped_chars += text.len() - room;
            &text[..floor_char_boundary(text, room)]
        } else {
            text
        };
        match self.parts.last_mut() {
            Some(Part::Stream {
                name: last,
                text: kept,
                pending_return,
            }) if last == name => {
                append_with_returns(kept, pending_return, text);
            }
            _ => {
                let (mut kept, mut pending_return) = (String::new(), false);
                append_with_returns(&mut kept, &mut pending_return, text);
                self.parts.push(Part::Stream {
                    name: name.to_owned(),
                    text: kept,
                    pending_return,
                });
            }
        }
    }

    /// A display's text (bounded) and picture.
    fn display(
        &self,
        content: &Value,
        result: bool,
        image: Option<Image>,
    ) -> (String, Option<Image>) {
        let data = &content["data"];
        let plain = data["text/plain"]
            .as_str()
            .or_else(|| data["text/markdown"].as_str())
            .unwrap_or_default();
        let mut text = if image.is_some() {
            // matplotlib's "<Figure size 640x480 with 1 Axes>" says what it is.
            format!("[image] {plain}")
        } else if plain.is_empty() {
            let kinds: Vec<&str> = data
                .as_object()
                .map(|data| data.keys().map(String::as_str).collect())
                .unwrap_or_default();
            format!("[display: {}]", kinds.join(", "))
        } else {
            plain.to_owned()
        };
        if text.len() > DISPLAY_CHARS {
            let cut = floor_char_boundary(&text, DISPLAY_CHARS);
            let left_out = text.len() - cut;
            text.truncate(cut);
            text.push_str(&format!(
                "\n[... {left_out} more bytes of this display not kept]"
            ));
        }
        if let Some(count) = content["execution_count"].as_u64().filter(|_| result) {
            text = format!("Out[{count}]: {text}");
        }
        text.push('\n');
        (text, image)
    }

    fn image_count(&self) -> usize {
        self.parts
            .iter()
            .filter(|part| matches!(part, Part::Display { image: Some(_), .. }))
            .count()
    }

    /// All the text, in the order it was shown.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Stream { text, .. } | Part::Display { text, .. } => out.push_str(text),
            }
        }
        out
    }

    /// The pictures, in the order they were shown.
    pub fn images(&self) -> Vec<Image> {
        self.parts
            .iter()
            .filter_map(|part| match part {
                Part::Display { image, .. } => image.clone(),
                Part::Stream { .. } => None,
            })
            .collect()
    }
}

/// A PNG given as base64, made small; `None` if it is not one.
fn small_png(base64_text: &str) -> Option<Image> {
    let engine = base64::engine::general_purpose::STANDARD;
    // Jupyter sends base64 with or without line breaks.
    let compact: String = base64_text.split_whitespace().collect();
    let bytes = engine.decode(&compact).ok()?;
    let base64 = match images::downscale_png(&bytes, images::MAX_SIDE).ok()? {
        Some(small) => engine.encode(small),
        None => compact,
    };
    Some(Image { base64 })
}

/// Appends `text` as a terminal shows it: a carriage return not followed by
/// a newline goes back to the start of the line (progress bars). One that
/// ends a message waits for the next (`pending_return`): the line stays
/// until text that does not start a new line overwrites it.
fn append_with_returns(kept: &mut String, pending_return: &mut bool, text: &str) {
    if text.is_empty() {
        return;
    }
    let back_to_line_start = |kept: &mut String| {
        let line_start = kept.rfind('\n').map_or(0, |at| at + 1);
        kept.truncate(line_start);
    };
    if std::mem::take(pending_return) && !text.starts_with('\n') {
        back_to_line_start(kept);
    }
    let mut pieces = text.split('\r').peekable();
    if let Some(first) = pieces.next() {
        kept.push_str(first);
    }
    while let Some(piece) = pieces.next() {
        if piece.is_empty() && pieces.peek().is_none() {
            *pending_return = true;
        } else if piece.starts_with('\n') {
            kept.push_str(piece);
        } else {
            back_to_line_start(kept);
            kept.push_str(piece);
        }
    }
}

/// The last non-empty line of `text`, shortened.
fn last_line(text: &str) -> Option<String> {
    let line = text.lines().rev().find(|line| !line.trim().is_empty())?;
    let cut = floor_char_boundary(line, 200);
    Some(line[..cut].to_owned())
}

/// `text` without terminal colour codes (IPython colours its tracebacks).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            // Parameters and intermediates, then one final byte in @..~.
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn add(outputs: &mut Outputs, msg_type: &str, content: &Value) -> Option<String> {
        outputs.add(msg_type, content, Outputs::image_of(msg_type, content))
    }

    #[test]
    fn streams_results_and_errors_read_in_order() {
        let mut outputs = Outputs::default();
        add(
            &mut outputs,
            "execute_input",
            &json!({"execution_count": 3}),
        );
        add(
            &mut outputs,
            "stream",
            &json!({"name": "stdout", "text": "a\n"}),
        );
        add(
            &mut outputs,
            "stream",
            &json!({"name": "stdout", "text": "b\n"}),
        );
        add(
            &mut outputs,
            "execute_result",
            &json!({"execution_count": 3, "data": {"text/plain": "42"}}),
        );
        let line = add(
            &mut outputs,
            "error",
            &json!({"ename": "ValueError", "evalue": "bad",
                    "traceback": ["\u{1b}[0;31mValueError\u{1b}[0m: bad"]}),
        );
        add(&mut outputs, "status", &json!({"execution_state": "idle"}));
        assert_eq!(outputs.text(), "a\nb\nOut[3]: 42\nValueError: bad\n");
        assert_eq!(line.as_deref(), Some("ValueError: bad"));
        assert_eq!(outputs.error.as_deref(), Some("ValueError: bad"));
        assert_eq!(outputs.execution_count, Some(3));
        assert!(outputs.done);
    }

    #[test]
    fn carriage_returns_overwrite_the_line_as_a_terminal_does() {
        let mut outputs = Outputs::default();
        add(
            &mut outputs,
            "stream",
            &json!({"name": "stderr", "text": "start\n 10%"}),
        );
        add(
            &mut outputs,
            "stream",
            &json!({"name": "stderr", "text": "\r 50%\r100%\r\ndone\n"}),
        );
        assert_eq!(outputs.text(), "start\n100%\ndone\n");
        // A return that ends a message waits: the line stays until text
        // that is not a newline comes.
        let mut outputs = Outputs::default();
        add(
            &mut outputs,
            "stream",
            &json!({"name": "stdout", "text": "1/3\r"}),
        );
        assert_eq!(outputs.text(), "1/3");
        add(
            &mut outputs,
            "stream",
            &json!({"name": "stdout", "text": "2/3\r"}),
        );
        assert_eq!(outputs.text(), "2/3");
        add(
            &mut outputs,
            "stream",
            &json!({"name": "stdout", "text": "\ndone\n"}),
        );
        assert_eq!(outputs.text(), "2/3\ndone\n");
    }

    #[test]
    fn updated_displays_keep_their_latest_form_and_clear_output_clears() {
        let mut outputs = Outputs::default();
        let shown =
            |text: &str| json!({"data": {"text/plain": text}, "transient": {"display_id": "p"}});
        add(&mut outputs, "display_data", &shown("thinking"));
        add(
            &mut outputs,
            "stream",
            &json!({"name": "stdout", "text": "x\n"}),
        );
        add(&mut outputs, "update_display_data", &shown("answer: 4"));
        assert_eq!(outputs.text(), "answer: 4\nx\n");
        add(&mut outputs, "clear_output", &json!({"wait": true}));
        assert_eq!(outputs.text(), "answer: 4\nx\n");
        add(
            &mut outputs,
            "stream",
            &json!({"name": "stdout", "text": "y\n"}),
        );
        assert_eq!(outputs.text(), "y\n");
    }

    #[test]
    fn a_figure_becomes_an_image_and_a_line_of_text() {
        let mut png_bytes = Vec::new();
        let mut encoder = png::Encoder::new(&mut png_bytes, 1, 1);
        encoder.set_color(png::ColorType::Rgb);
        let mut writer = encoder.write_header().unwrap();
        writer.write_image_data(&[1, 2, 3]).unwrap();
        writer.finish().unwrap();
        let png_base64 = base64::engine::general_purpose::STANDARD.encode(&png_bytes);
        let mut outputs = Outputs::default();
        let figure = json!({"data": {"image/png": png_base64, "text/plain": "<Figure size 640x480 with 1 Axes>"}});
        add(&mut outputs, "display_data", &figure);
        add(
            &mut outputs,
            "display_data",
            &json!({"data": {"image/png": "not base64!"}}),
        );
        assert_eq!(outputs.images().len(), 1);
        assert_eq!(
            outputs.text(),
            "[image] <Figure size 640x480 with 1 Axes>\n[display: image/png]\n"
        );
    }

    #[test]
    fn a_huge_display_is_cut() {
        let mut outputs = Outputs::default();
        let big = "x".repeat(DISPLAY_CHARS * 2);
        add(
            &mut outputs,
            "execute_result",
            &json!({"data": {"text/plain": big}}),
        );
        let text = outputs.text();
        assert!(text.len() < DISPLAY_CHARS + 100);
        assert!(text.contains(&format!(
            "[... {DISPLAY_CHARS} more bytes of this display not kept]"
        )));
    }

    #[test]
    fn text_past_the_limit_is_counted_not_kept() {
        let mut outputs = Outputs::default();
        let big = "é".repeat(KEPT_CHARS);
        add(
            &mut outputs,
            "stream",
            &json!({"name": "stdout", "text": big}),
        );
        assert!(outputs.text().len() <= KEPT_CHARS);
        assert!(outputs.dropped_chars >= KEPT_CHARS / 2);
    }
}
