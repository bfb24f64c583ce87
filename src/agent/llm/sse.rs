//! Incremental decoders for streamed responses: server-sent events (the
//! Anthropic and OpenAI APIs) and newline-delimited JSON (the `claude` CLI).
//!
//! Both take bytes in whatever chunks the transport delivers and yield whole
//! events. A chunk may end in the middle of a line or of a UTF-8 character;
//! bytes are kept until their line is complete, and only then decoded.

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; empty when the stream does not name events (OpenAI).
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// Splits a byte stream into lines, tolerating `\n`, `\r\n` and `\r` endings.
#[derive(Debug, Default)]
struct LineSplitter {
    pending: Vec<u8>,
    /// A `\r` ended the last chunk: a `\n` starting the next one belongs to it.
    after_cr: bool,
}

impl LineSplitter {
    fn push(&mut self, chunk: &[u8], mut on_line: impl FnMut(String)) {
        for &byte in chunk {
            if self.after_cr {
                self.after_cr = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\n' => on_line(self.take()),
                b'\r' => {
                    on_line(self.take());
                    self.after_cr = true;
                }
                _ => self.pending.push(byte),
            }
        }
    }

    fn take(&mut self) -> String {
        let line = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        line
    }

    fn finish(&mut self) -> Option<String> {
        (!self.pending.is_empty()).then(|| self.take())
    }
}

/// Server-sent events decoder.
#[derive(Debug, Default)]
pub struct SseDecoder {
    lines: LineSplitter,
    current: SseEvent,
    has_data: bool,
}

impl SseDecoder {
    /// Feeds a chunk; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        let mut lines = Vec::new();
        self.lines.push(chunk, |line| lines.push(line));
        for line in lines {
            if let Some(event) = self.line(&line) {
                events.push(event);
            }
        }
        events
    }

    /// Ends the stream; returns a last event not followed by a blank line.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let tail = self.lines.finish();
        let from_tail = tail.and_then(|line| self.line(&line));
        from_tail.or_else(|| self.dispatch())
    }

    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None; // comment / keep-alive
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.current.event = value.to_owned(),
            "data" => {
                if self.has_data {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(value);
                self.has_data = true;
            }
            _ => {} // id, retry and unknown fields do not matter here
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = std::mem::take(&mut self.current);
        let had_data = std::mem::take(&mut self.has_data);
        had_data.then_some(event)
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
        self.lines.push(chunk, |line| {
            if !line.trim().is_empty() {
                lines.push(line);
            }
        });
        lines
    }

    pub fn finish(&mut self) -> Option<String> {
        self.lines.finish().filter(|line| !line.trim().is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in_chunks(stream: &[u8], chunk: usize) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::default();
        let mut events: Vec<SseEvent> =
            stream.chunks(chunk).flat_map(|c| decoder.push(c)).collect();
        events.extend(decoder.finish());
        events
    }

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
    fn ndjson_lines() {
        let mut decoder = NdjsonDecoder::default();
        let mut lines = decoder.push(b"{\"a\":1}\n\n{\"b\":");
        lines.extend(decoder.push(b"2}\n{\"c\":3}"));
        lines.extend(decoder.finish());
        assert_eq!(lines, ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
    }
}
