//! Where Python's output goes: the [`OutputSink`] the kernel provides, and the
//! stream buffer that batches `print` output into few `stream` messages.
//!
//! Writes to `sys.stdout` / `sys.stderr` are appended to one buffer. It is
//! flushed to the sink (as one `stream` message) when the stream name changes
//! (so stdout and stderr keep their order), before any other output, at the
//! end of a cell, when it grows past [`MAX_BATCH_BYTES`], and by a background
//! thread [`FLUSH_INTERVAL`] after the first unflushed write, so output of a
//! long-running cell shows up while it runs.
//!
//! Output whose writer names no request of its own (a print on the
//! interpreter thread, a C library writing to fd 1, a thread without a
//! parent) belongs to the request the main shell serves: the interpreter
//! thread tells the buffer which one when it starts serving it
//! ([`StreamBuffer::serve_main`]), after the text of the one before has left.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::commands::Parent;

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
/// as a child of `parent`, a request's header.
pub trait OutputSink: Send + Sync + 'static {
    fn emit(&self, output: Output, parent: &Arc<Value>);

    /// The header and ROUTER identities of the request last served on the
    /// control channel, which ipykernel's kernel object offers too
    /// (`get_parent("control")`, `_parent_ident`).
    fn last_control_request(&self) -> (Value, Vec<bytes::Bytes>) {
        (Value::Object(serde_json::Map::new()), Vec::new())
    }
}

struct Pending {
    name: Option<StreamName>,
    /// Whose output the text is (None: the main shell's request's).
    parent: Option<Arc<Value>>,
    text: String,
    since: Option<Instant>,
    closed: bool,
    /// The request the main shell serves.
    main: Parent,
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
            pending: Mutex::new(Pending {
                name: None,
                parent: None,
                text: String::new(),
                since: None,
                closed: false,
                main: Parent::none(),
            }),
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

    /// From now on, output that names no request belongs to `parent`, the
    /// main shell's new request; text written before goes out first, still
    /// as the previous one's.
    pub fn serve_main(&self, parent: Parent) {
        let mut pending = self.lock();
        self.emit_locked(&mut pending);
        pending.main = parent;
    }

    /// The request the main shell serves.
    pub fn main_request(&self) -> Parent {
        self.lock().main.clone()
    }

    /// Adds `text` to stream `name` of the main shell's request.
    pub fn write(&self, name: StreamName, text: &str) {
        self.write_for(name, text, None);
    }

    /// Adds `text` to stream `name` of `parent`'s request (None: the
    /// main shell's).
    pub fn write_for(&self, name: StreamName, text: &str, parent: Option<Arc<Value>>) {
        if text.is_empty() {
            return;
        }
        let mut pending = self.lock();
        if pending.name.is_some_and(|current| current != name) || pending.parent != parent {
            self.emit_locked(&mut pending);
        }
        if pending.text.is_empty() {
            pending.since = Some(Instant::now());
            self.wake.notify_one();
        }
        pending.name = Some(name);
        pending.parent = parent;
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

    /// Flushes buffered text, then emits `output` (as a child of `parent`,
    /// None: of the main shell's request), keeping their order.
    pub fn emit_after_flush(&self, output: Output, parent: Option<&Arc<Value>>) {
        let mut pending = self.lock();
        self.emit_locked(&mut pending);
        let parent = parent.unwrap_or(&pending.main.header);
        self.sink.emit(output, parent);
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
        let parent = pending.parent.take();
        if let Some(name) = pending.name.take()
            && !pending.text.is_empty()
        {
            let text = std::mem::take(&mut pending.text);
            let parent = parent.as_ref().unwrap_or(&pending.main.header);
            self.sink.emit(Output::Stream { name, text }, parent);
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

    struct ChannelSink(Mutex<mpsc::Sender<Output>>, Mutex<Vec<Value>>);

    impl OutputSink for ChannelSink {
        fn emit(&self, output: Output, parent: &Arc<Value>) {
            self.1.lock().unwrap().push(parent.as_ref().clone());
            let _ = self.0.lock().unwrap().send(output);
        }
    }

    fn buffer() -> (Arc<StreamBuffer>, mpsc::Receiver<Output>) {
        let (buffer, rx, _) = buffer_and_sink();
        (buffer, rx)
    }

    fn buffer_and_sink() -> (Arc<StreamBuffer>, mpsc::Receiver<Output>, Arc<ChannelSink>) {
        let (tx, rx) = mpsc::channel();
        let sink = Arc::new(ChannelSink(Mutex::new(tx), Mutex::new(Vec::new())));
        (StreamBuffer::start(sink.clone()), rx, sink)
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
        buffer.emit_after_flush(display.clone(), None);
        assert_eq!(rx.try_recv().unwrap(), stream(StreamName::Stdout, "x"));
        assert_eq!(rx.try_recv().unwrap(), display);
        buffer.close();
    }

    #[test]
    fn text_of_another_parent_goes_in_a_message_of_its_own() {
        let (buffer, rx, sink) = buffer_and_sink();
        let other = Arc::new(serde_json::json!({ "msg_id": "earlier" }));
        buffer.write(StreamName::Stdout, "a");
        buffer.write_for(StreamName::Stdout, "b", Some(other.clone()));
        buffer.write_for(StreamName::Stdout, "c", Some(other.clone()));
        buffer.write(StreamName::Stdout, "d");
        buffer.flush();
        let texts: Vec<Output> = rx.try_iter().collect();
        assert_eq!(
            texts,
            [
                stream(StreamName::Stdout, "a"),
                stream(StreamName::Stdout, "bc"),
                stream(StreamName::Stdout, "d"),
            ]
        );
        let main = Parent::none().header.as_ref().clone();
        assert_eq!(
            *sink.1.lock().unwrap(),
            [main.clone(), (*other).clone(), main]
        );
        buffer.close();
    }

    fn request(id: &str) -> Parent {
        Parent {
            header: Arc::new(serde_json::json!({ "msg_id": id })),
            ..Parent::none()
        }
    }

    #[test]
    fn text_of_the_main_shell_goes_to_the_request_it_was_written_under() {
        let (buffer, rx, sink) = buffer_and_sink();
        buffer.serve_main(request("first"));
        buffer.write(StreamName::Stdout, "a");
        buffer.serve_main(request("second"));
        buffer.write(StreamName::Stdout, "b");
        buffer.emit_after_flush(stream(StreamName::Stderr, "c"), None);
        let texts: Vec<Output> = rx.try_iter().collect();
        assert_eq!(
            texts,
            [
                stream(StreamName::Stdout, "a"),
                stream(StreamName::Stdout, "b"),
                stream(StreamName::Stderr, "c"),
            ]
        );
        let parents = sink.1.lock().unwrap().clone();
        let ids: Vec<&Value> = parents.iter().map(|parent| &parent["msg_id"]).collect();
        assert_eq!(ids, ["first", "second", "second"]);
        assert_eq!(buffer.main_request().header["msg_id"], "second");
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
