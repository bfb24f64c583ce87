//! What one execution showed, gathered from its IOPub messages into text a
//! model reads (streams, results, displays, the error's traceback without
//! colour codes) and pictures (PNG figures, made small). Displays that are
//! updated in place (an agent's panels, progress bars) keep their latest
//! form, and `clear_output` clears, as a notebook shows them.

use base64::Engine;
use serde_json::Value;

use super::images;

/// The most text kept of one execution; past it the rest is counted, not kept.
const KEPT_CHARS: usize = 8 << 20;
/// The most pictures kept of one execution (the first ones).
const KEPT_IMAGES: usize = 4;

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
    /// Characters that did not fit [`KEPT_CHARS`].
    pub dropped_chars: usize,
    /// The exception's name and value, once the code raised.
    pub error: Option<String>,
    pub execution_count: Option<u64>,
    /// The kernel went idle for the request: nothing more will come.
    pub done: bool,
}

impl Outputs {
    /// Takes one IOPub message of the execution; returns a line worth
    /// telling a waiting client (the latest output line), if any.
    pub fn add(&mut self, msg_type: &str, content: &Value) -> Option<String> {
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
                let (text, image) = self.display(content, msg_type == "execute_result");
                let line = last_line(&text);
                self.parts.push(Part::Display { id, text, image });
                line
            }
            "update_display_data" => {
                let id = content["transient"]["display_id"].as_str()?;
                let (text, image) = self.display(content, false);
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
            }) if last == name => {
                append_with_returns(kept, text);
            }
            _ => {
                let mut kept = String::new();
                append_with_returns(&mut kept, text);
                self.parts.push(Part::Stream {
                    name: name.to_owned(),
                    text: kept,
                });
            }
        }
    }

    /// A display's text and picture.
    fn display(&self, content: &Value, result: bool) -> (String, Option<Image>) {
        let data = &content["data"];
        let image = data["image/png"]
            .as_str()
            .filter(|_| self.image_count() < KEPT_IMAGES)
            .and_then(small_png);
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
    let bytes = engine.decode(compact).ok()?;
    let small = images::downscale_png(&bytes, images::MAX_SIDE).ok()?;
    Some(Image {
        base64: engine.encode(small),
    })
}

/// Appends `text` as a terminal shows it: a carriage return not followed by
/// a newline goes back to the start of the line (progress bars).
fn append_with_returns(kept: &mut String, text: &str) {
    let mut pieces = text.split('\r');
    if let Some(first) = pieces.next() {
        kept.push_str(first);
    }
    for piece in pieces {
        if piece.starts_with('\n') {
            kept.push_str(piece);
        } else {
            let line_start = kept.rfind('\n').map_or(0, |at| at + 1);
            kept.truncate(line_start);
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

/// The largest char boundary at or below `at`.
pub fn floor_char_boundary(text: &str, at: usize) -> usize {
    if at >= text.len() {
        return text.len();
    }
    (0..=at)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
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

    #[test]
    fn streams_results_and_errors_read_in_order() {
        let mut outputs = Outputs::default();
        outputs.add("execute_input", &json!({"execution_count": 3}));
        outputs.add("stream", &json!({"name": "stdout", "text": "a\n"}));
        outputs.add("stream", &json!({"name": "stdout", "text": "b\n"}));
        outputs.add(
            "execute_result",
            &json!({"execution_count": 3, "data": {"text/plain": "42"}}),
        );
        let line = outputs.add(
            "error",
            &json!({"ename": "ValueError", "evalue": "bad",
                    "traceback": ["\u{1b}[0;31mValueError\u{1b}[0m: bad"]}),
        );
        outputs.add("status", &json!({"execution_state": "idle"}));
        assert_eq!(outputs.text(), "a\nb\nOut[3]: 42\nValueError: bad\n");
        assert_eq!(line.as_deref(), Some("ValueError: bad"));
        assert_eq!(outputs.error.as_deref(), Some("ValueError: bad"));
        assert_eq!(outputs.execution_count, Some(3));
        assert!(outputs.done);
    }

    #[test]
    fn carriage_returns_overwrite_the_line_as_a_terminal_does() {
        let mut outputs = Outputs::default();
        outputs.add("stream", &json!({"name": "stderr", "text": "start\n 10%"}));
        outputs.add(
            "stream",
            &json!({"name": "stderr", "text": "\r 50%\r100%\r\ndone\n"}),
        );
        assert_eq!(outputs.text(), "start\n100%\ndone\n");
    }

    #[test]
    fn updated_displays_keep_their_latest_form_and_clear_output_clears() {
        let mut outputs = Outputs::default();
        let shown =
            |text: &str| json!({"data": {"text/plain": text}, "transient": {"display_id": "p"}});
        outputs.add("display_data", &shown("thinking"));
        outputs.add("stream", &json!({"name": "stdout", "text": "x\n"}));
        outputs.add("update_display_data", &shown("answer: 4"));
        assert_eq!(outputs.text(), "answer: 4\nx\n");
        outputs.add("clear_output", &json!({"wait": true}));
        assert_eq!(outputs.text(), "answer: 4\nx\n");
        outputs.add("stream", &json!({"name": "stdout", "text": "y\n"}));
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
        outputs.add(
            "display_data",
            &json!({"data": {"image/png": png_base64, "text/plain": "<Figure size 640x480 with 1 Axes>"}}),
        );
        outputs.add(
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
    fn text_past_the_limit_is_counted_not_kept() {
        let mut outputs = Outputs::default();
        let big = "é".repeat(KEPT_CHARS);
        outputs.add("stream", &json!({"name": "stdout", "text": big}));
        assert!(outputs.text().len() <= KEPT_CHARS);
        assert!(outputs.dropped_chars >= KEPT_CHARS / 2);
    }
}
