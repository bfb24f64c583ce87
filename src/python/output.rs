//! Where Python's output goes: the [`OutputSink`] the kernel provides, and the
//! stream buffer that batches `print` output into few `stream` messages.
//!
//! Writes to `sys.stdout` / `sys.stderr` are appended to one buffer. It is
//! flushed to the sink (as one `stream` message) when the stream name changes
//! (so stdout and stderr keep their order), before any other output, at the
//! end of a cell, when it grows past [`MAX_BATCH_BYTES`], and by a background
//! thread [`FLUSH_INTERVAL`] after the first unflushed write, so output of a
//! long-running cell shows up while it runs.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long written text may wait before it is sent.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(50);

/// Past this much buffered text a write flushes at once, bounding message size.
pub const MAX_BATCH_BYTES: usize = 1 << 20;

/// The two output streams of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamName {
    Stdout,
    Stderr,
}

impl StreamName {
    pub fn as_str(self) -> &'static str {
        match self {
            StreamName::Stdout => "stdout",
            StreamName::Stderr => "stderr",
        }
    }
}

/// One piece of output from Python, in the order it happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    Stream {
        name: StreamName,
        text: String,
    },
    /// Any other IOPub message Python produces (`display_data`,
    /// `update_display_data`, `execute_result`, `clear_output`, `error`,
    /// `comm_*`), with content and metadata as built by the runtime.
    Message {
        msg_type: String,
        content: Value,
        metadata: Value,
        buffers: Vec<bytes::Bytes>,
    },
}

/// Receives Python's output. The kernel implements it by publishing on IOPub
/// with the current request as parent.
pub trait OutputSink: Send + Sync + 'static {
    fn emit(&self, output: Output);

    /// The header of the request that output currently belongs to (ipywidgets'
    /// Output widget captures by that request's msg_id).
    fn parent_header(&self) -> Value {
        Value::Object(serde_json::Map::new())
    }
}

#[derive(Default)]
struct Pending {
    name: Option<StreamName>,
    text: String,
    since: Option<Instant>,
    closed: bool,
}

/// Batches stream writes; shared by the interpreter thread and the flusher.
pub struct StreamBuffer {
    pending: Mutex<Pending>,
    wake: Condvar,
    sink: Arc<dyn OutputSink>,
}

impl StreamBuffer {
    /// A buffer emitting to `sink`, with its background flusher thread.
    pub fn start(sink: Arc<dyn OutputSink>) -> Arc<Self> {
        let buffer = Arc::new(Self {
            pending: Mutex::new(Pending::default()),
            wake: Condvar::new(),
            sink,
        });
        let flusher = buffer.clone();
        std::thread::Builder::new()
            .name("mahtab-stream-flush".into())
            .spawn(move || flusher.flush_periodically())
            .expect("spawn the stream flusher thread");
        buffer
    }

    pub fn sink(&self) -> &Arc<dyn OutputSink> {
        &self.sink
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        // A panic while holding the lock leaves plain data behind; keep going.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn write(&self, name: StreamName, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut pending = self.lock();
        if pending.name.is_some_and(|current| current != name) {
            self.emit_locked(&mut pending);
        }
        if pending.text.is_empty() {
            pending.since = Some(Instant::now());
            self.wake.notify_one();
        }
        pending.name = Some(name);
        pending.text.push_str(text);
        if pending.text.len() >= MAX_BATCH_BYTES {
            self.emit_locked(&mut pending);
        }
    }

    /// Sends buffered text now.
    pub fn flush(&self) {
        let mut pending = self.lock();
        self.emit_locked(&mut pending);
    }

    /// Flushes buffered text, then emits `output`, keeping their order.
    pub fn emit_after_flush(&self, output: Output) {
        let mut pending = self.lock();
        self.emit_locked(&mut pending);
        self.sink.emit(output);
    }

    /// Stops the flusher thread after a final flush.
    pub fn close(&self) {
        let mut pending = self.lock();
        self.emit_locked(&mut pending);
        pending.closed = true;
        self.wake.notify_one();
    }

    // Emitting while holding the lock keeps messages in write order even when
    // the flusher and the interpreter thread race.
    fn emit_locked(&self, pending: &mut Pending) {
        pending.since = None;
        if let Some(name) = pending.name.take()
            && !pending.text.is_empty()
        {
            let text = std::mem::take(&mut pending.text);
            self.sink.emit(Output::Stream { name, text });
        }
    }

    fn flush_periodically(&self) {
        let mut pending = self.lock();
        loop {
            if pending.closed {
                return;
            }
            match pending.since {
                None => {
                    pending = self
                        .wake
                        .wait(pending)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                Some(since) => {
                    let due = since + FLUSH_INTERVAL;
                    let now = Instant::now();
                    if now >= due {
                        self.emit_locked(&mut pending);
                    } else {
                        pending = self
                            .wake
                            .wait_timeout(pending, due - now)
                            .unwrap_or_else(PoisonError::into_inner)
                            .0;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    struct ChannelSink(Mutex<mpsc::Sender<Output>>);

    impl OutputSink for ChannelSink {
        fn emit(&self, output: Output) {
            let _ = self.0.lock().unwrap().send(output);
        }
    }

    fn buffer() -> (Arc<StreamBuffer>, mpsc::Receiver<Output>) {
        let (tx, rx) = mpsc::channel();
        (
            StreamBuffer::start(Arc::new(ChannelSink(Mutex::new(tx)))),
            rx,
        )
    }

    fn stream(name: StreamName, text: &str) -> Output {
        Output::Stream {
            name,
            text: text.into(),
        }
    }

    #[test]
    fn batches_writes_and_keeps_stream_order() {
        let (buffer, rx) = buffer();
        buffer.write(StreamName::Stdout, "a");
        buffer.write(StreamName::Stdout, "b");
        buffer.write(StreamName::Stderr, "c");
        buffer.flush();
        assert_eq!(rx.try_recv().unwrap(), stream(StreamName::Stdout, "ab"));
        assert_eq!(rx.try_recv().unwrap(), stream(StreamName::Stderr, "c"));
        assert!(rx.try_recv().is_err());
        buffer.close();
    }

    #[test]
    fn flushes_before_other_output() {
        let (buffer, rx) = buffer();
        buffer.write(StreamName::Stdout, "x");
        let display = Output::Message {
            msg_type: "display_data".into(),
            content: Value::Null,
            metadata: Value::Null,
            buffers: Vec::new(),
        };
        buffer.emit_after_flush(display.clone());
        assert_eq!(rx.try_recv().unwrap(), stream(StreamName::Stdout, "x"));
        assert_eq!(rx.try_recv().unwrap(), display);
        buffer.close();
    }

    #[test]
    fn flusher_sends_pending_text_without_an_explicit_flush() {
        let (buffer, rx) = buffer();
        buffer.write(StreamName::Stdout, "later");
        let got = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(got, stream(StreamName::Stdout, "later"));
        buffer.close();
    }
}
