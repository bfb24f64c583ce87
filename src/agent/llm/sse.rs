//! Incremental decoders for streamed responses: server-sent events (the
//! Anthropic and OpenAI APIs) and newline-delimited JSON (the `claude` CLI).
//!
//! Both take bytes in whatever chunks the transport delivers and yield whole
//! events. A chunk may end in the middle of a line or of a UTF-8 character;
//! bytes are kept until their line is complete, and only then decoded.

/// One server-sent event. The decoder lends it to a callback and reuses its
/// buffers for the next event, so a stream of thousands of events allocates
/// almost nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; empty when the stream does not name events (OpenAI).
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// Splits a byte stream into lines, tolerating `\n`, `\r\n` and `\r` endings.
/// A line that lies whole within one chunk is handed out without copying.
#[derive(Debug, Default)]
struct LineSplitter {
    /// The start of a line whose end has not arrived yet.
    pending: Vec<u8>,
    /// A `\r` ended the last chunk: a `\n` starting the next one belongs to it.
    after_cr: bool,
}

impl LineSplitter {
    fn push<E>(
        &mut self,
        mut chunk: &[u8],
        mut on_line: impl FnMut(&str) -> Result<(), E>,
    ) -> Result<(), E> {
        if std::mem::take(&mut self.after_cr) && chunk.first() == Some(&b'\n') {
            chunk = &chunk[1..];
        }
        while let Some(end) = memchr::memchr2(b'\n', b'\r', chunk) {
            if self.pending.is_empty() {
                on_line(&decode(&chunk[..end]))?;
            } else {
                self.pending.extend_from_slice(&chunk[..end]);
                let line = std::mem::take(&mut self.pending);
                on_line(&decode(&line))?;
                // Keep the buffer's capacity for the next partial line.
                self.pending = line;
                self.pending.clear();
            }
            let ending = chunk[end];
            chunk = &chunk[end + 1..];
            if ending == b'\r' {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.pending.extend_from_slice(chunk);
        Ok(())
    }

    /// The last line, when the stream ended without a line break.
    fn finish(&mut self) -> Option<String> {
        let line = std::mem::take(&mut self.pending);
        (!line.is_empty()).then(|| decode(&line).into_owned())
    }
}

/// A line's text; bytes that are not UTF-8 become U+FFFD.
fn decode(line: &[u8]) -> std::borrow::Cow<'_, str> {
    // `from_utf8` is the fast check; the lossy conversion only for bad bytes.
    match std::str::from_utf8(line) {
        Ok(text) => text.into(),
        Err(_) => String::from_utf8_lossy(line),
    }
}

/// Server-sent events decoder.
#[derive(Debug, Default)]
pub struct SseDecoder {
    lines: LineSplitter,
    fields: EventFields,
}

/// The fields of the event being read.
#[derive(Debug, Default)]
struct EventFields {
    current: SseEvent,
    has_data: bool,
}

impl SseDecoder {
    /// Feeds a chunk; `on_event` gets each event it completes, in order. An
    /// error from `on_event` stops decoding and is returned.
    pub fn push<E>(
        &mut self,
        chunk: &[u8],
        mut on_event: impl FnMut(&SseEvent) -> Result<(), E>,
    ) -> Result<(), E> {
        let fields = &mut self.fields;
        self.lines
            .push(chunk, |line| fields.line(line, &mut on_event))
    }

    /// Ends the stream: a last event not followed by a blank line goes to
    /// `on_event` too.
    pub fn finish<E>(
        &mut self,
        mut on_event: impl FnMut(&SseEvent) -> Result<(), E>,
    ) -> Result<(), E> {
        if let Some(line) = self.lines.finish() {
            self.fields.line(&line, &mut on_event)?;
        }
        self.fields.dispatch(&mut on_event)
    }
}

impl EventFields {
    fn line<E>(
        &mut self,
        line: &str,
        on_event: &mut impl FnMut(&SseEvent) -> Result<(), E>,
    ) -> Result<(), E> {
        if line.is_empty() {
            return self.dispatch(on_event);
        }
        if line.starts_with(':') {
            return Ok(()); // comment / keep-alive
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => {
                self.current.event.clear();
                self.current.event.push_str(value);
            }
            "data" => {
                if self.has_data {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(value);
                self.has_data = true;
            }
            _ => {} // id, retry and unknown fields do not matter here
        }
        Ok(())
    }

    /// A blank line ends an event; one without data is not dispatched.
    fn dispatch<E>(
        &mut self,
        on_event: &mut impl FnMut(&SseEvent) -> Result<(), E>,
    ) -> Result<(), E> {
        let result = if std::mem::take(&mut self.has_data) {
            on_event(&self.current)
        } else {
            Ok(())
        };
        self.current.event.clear();
        self.current.data.clear();
        result
    }
}

/// Newline-delimited JSON decoder: yields each non-blank line.
#[derive(Debug, Default)]
pub struct NdjsonDecoder {
    lines: LineSplitter,
}

impl NdjsonDecoder {
    pub fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        let mut lines = Vec::new();
        let pushed = self.lines.push(chunk, |line| {
            if !line.trim().is_empty() {
                lines.push(line.to_owned());
            }
            Ok::<(), std::convert::Infallible>(())
        });
        let Ok(()) = pushed;
        lines
    }

    pub fn finish(&mut self) -> Option<String> {
        self.lines.finish().filter(|line| !line.trim().is_empty())
    }
}

/// Every event in `stream`, fed in chunks of `chunk` bytes (for tests here
/// and in the translators).
#[cfg(test)]
pub(crate) fn decode_in_chunks(stream: &[u8], chunk: usize) -> Vec<SseEvent> {
    let mut decoder = SseDecoder::default();
    let mut events = Vec::new();
    let mut collect = |event: &SseEvent| {
        events.push(event.clone());
        Ok::<(), std::convert::Infallible>(())
    };
    for piece in stream.chunks(chunk) {
        let Ok(()) = decoder.push(piece, &mut collect);
    }
    let Ok(()) = decoder.finish(&mut collect);
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_style_named_events() {
        let stream = b"event: ping\ndata: {\"type\":\"ping\"}\n\nevent: content_block_delta\ndata: {\"text\":\"Hi\"}\n\n";
        let events = decode_in_chunks(stream, 1000);
        assert_eq!(events.len(), 2);
        assert_eq!(events[1].event, "content_block_delta");
        assert_eq!(events[1].data, "{\"text\":\"Hi\"}");
    }

    #[test]
    fn every_chunking_gives_the_same_events_even_mid_utf8() {
        let stream = "data: {\"t\":\"héllo wörld 😀\"}\r\n\r\n: keep-alive\n\ndata: a\ndata: b\n\ndata: [DONE]\n\n".as_bytes();
        let whole = decode_in_chunks(stream, stream.len());
        assert_eq!(whole.len(), 3);
        assert_eq!(whole[0].data, "{\"t\":\"héllo wörld 😀\"}");
        assert_eq!(whole[1].data, "a\nb");
        assert_eq!(whole[2].data, "[DONE]");
        for size in 1..8 {
            assert_eq!(
                decode_in_chunks(stream, size),
                whole,
                "chunks of {size} bytes"
            );
        }
    }

    #[test]
    fn cr_only_line_endings_and_a_missing_final_blank_line() {
        let events = decode_in_chunks(b"data: one\r\rdata: two", 3);
        assert_eq!(
            events.iter().map(|e| e.data.as_str()).collect::<Vec<_>>(),
            ["one", "two"]
        );
    }

    #[test]
    fn bytes_that_are_not_utf8_become_replacement_characters() {
        let events = decode_in_chunks(b"data: a\xffb\n\n", 4);
        assert_eq!(events[0].data, "a\u{fffd}b");
    }

    #[test]
    fn an_error_from_the_callback_stops_decoding() {
        let mut decoder = SseDecoder::default();
        let mut seen = Vec::new();
        let result = decoder.push(b"data: 1\n\ndata: 2\n\ndata: 3\n\n", |event| {
            seen.push(event.data.clone());
            if event.data == "2" {
                Err("stop")
            } else {
                Ok(())
            }
        });
        assert_eq!(result, Err("stop"));
        assert_eq!(seen, ["1", "2"]);
    }

    #[test]
    fn ndjson_lines() {
        let mut decoder = NdjsonDecoder::default();
        let mut lines = decoder.push(b"{\"a\":1}\n\n{\"b\":");
        lines.extend(decoder.push(b"2}\n{\"c\":3}"));
        lines.extend(decoder.finish());
        assert_eq!(lines, ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
    }
}
