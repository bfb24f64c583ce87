//! The Jupyter wire format: ZeroMQ multipart frames <-> messages.
//!
//! A message on the wire is
//! `[identity..., "<IDS|MSG>", signature, header, parent_header, metadata, content, buffer...]`.
//! This module splits and joins those frames, checks the signature and rejects
//! replays (see [`DigestHistory`]), and parses the JSON frames tolerantly:
//! only the header's `msg_id` and `msg_type` are required, because without
//! them a message cannot be answered at all. Everything else about kernels
//! lives elsewhere; this module knows frames, JSON and HMAC, nothing more.
//!
//! Every check happens before anything is indexed, so no input can panic.

mod history;
mod signing;

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Map, Value};

pub use history::DigestHistory;
pub use signing::{Signer, SigningError, VerifyError};

/// The frame that separates routing identities from the message proper.
pub const DELIMITER: &[u8] = b"<IDS|MSG>";

/// The largest message the kernel accepts, all frames together. Anything
/// bigger is dropped and logged. Jupyter has no limit of its own; this one is
/// far above what notebooks send (large widget buffers are a few MiB) and
/// keeps a runaway client from making the kernel parse gigabytes of JSON.
pub const MAX_MESSAGE_BYTES: usize = 256 << 20;

/// The protocol version the kernel speaks, in headers and in kernel_info.
pub const PROTOCOL_VERSION: &str = "5.5";

/// Why an incoming multipart message was dropped.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("message of {size} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit")]
    TooLarge { size: usize },
    #[error("no <IDS|MSG> delimiter frame")]
    MissingDelimiter,
    #[error("only {found} frames after the delimiter (need a signature and 4 JSON frames)")]
    TooFewFrames { found: usize },
    #[error("bad signature: {0}")]
    Signature(#[from] VerifyError),
    #[error("replayed message (signature seen before)")]
    Replayed,
    #[error("{frame} frame is not valid JSON: {source}")]
    BadJson {
        frame: &'static str,
        source: serde_json::Error,
    },
    #[error("header lacks a string msg_id or msg_type")]
    BadHeader,
}

/// The header fields the kernel reads. The full header is kept as JSON in
/// [`Message::raw_header`], since replies must echo it verbatim as their parent.
#[derive(Debug, Clone, Deserialize)]
pub struct Header {
    pub msg_id: String,
    pub msg_type: String,
    #[serde(default)]
    pub session: String,
    #[serde(default)]
    pub username: String,
}

/// A decoded, authenticated incoming message.
#[derive(Debug, Clone)]
pub struct Message {
    /// ROUTER identities, used to address the reply.
    pub identities: Vec<Bytes>,
    pub header: Header,
    /// The header exactly as received; the `parent_header` of every reply.
    pub raw_header: Arc<Value>,
    /// The sender's parent header (an empty object for requests).
    pub parent_header: Value,
    pub metadata: Value,
    /// The content as received. Not guaranteed to be an object: the kernel
    /// checks its shape per request type so that it can answer with an error.
    pub content: Value,
    pub buffers: Vec<Bytes>,
}

/// A message to send: everything but the header, which [`Codec::encode`] makes.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub msg_type: String,
    pub content: Value,
    /// The request's header, or `Value::Object` empty for messages with no parent.
    pub parent_header: Arc<Value>,
    pub metadata: Value,
    /// ROUTER identities to address, or the topic frame on IOPub.
    pub identities: Vec<Bytes>,
    /// Binary buffers after the JSON frames (not signed).
    pub buffers: Vec<Bytes>,
}

impl Outgoing {
    /// A message with the given parent header (or none) and empty metadata.
    pub fn new(msg_type: impl Into<String>, content: Value, parent_header: Arc<Value>) -> Self {
        Self {
            msg_type: msg_type.into(),
            content,
            parent_header,
            metadata: Value::Object(Map::new()),
            identities: Vec::new(),
            buffers: Vec::new(),
        }
    }

    /// A message whose content is one of jupyter-protocol's types, which
    /// also names the message type. (Not for `execute_reply` or
    /// `execute_result`: that crate writes their optional fields as null.)
    pub fn typed(
        content: impl Into<jupyter_protocol::JupyterMessageContent>,
        parent_header: Arc<Value>,
    ) -> Self {
        let content = content.into();
        let msg_type = content.message_type().to_owned();
        // Serialising these plain structs cannot fail; an empty object
        // would still make a well-formed message.
        let content = serde_json::to_value(&content).unwrap_or_else(|e| {
            tracing::error!("cannot serialise {msg_type}: {e}");
            Value::Object(Map::new())
        });
        Self::new(msg_type, content, parent_header)
    }

    /// A reply to `request`, addressed to its sender.
    pub fn reply_to(request: &Message, msg_type: impl Into<String>, content: Value) -> Self {
        let mut out = Self::new(msg_type, content, request.raw_header.clone());
        out.identities = request.identities.clone();
        out
    }
}

/// An empty parent header, for messages not caused by a request.
pub fn no_parent() -> Arc<Value> {
    Arc::new(Value::Object(Map::new()))
}

/// Signs, verifies and (de)serialises messages for one kernel session.
/// Shared by all sockets, so a message replayed on another channel is caught.
#[derive(Debug)]
pub struct Codec {
    signer: Signer,
    history: Mutex<DigestHistory>,
    session: String,
}

impl Codec {
    pub fn new(signer: Signer, session: impl Into<String>) -> Self {
        Self {
            signer,
            history: Mutex::new(DigestHistory::default()),
            session: session.into(),
        }
    }

    /// Decodes one multipart message. On error the message must be dropped
    /// without a reply: it is either not authentic or cannot be answered.
    pub fn decode(&self, frames: Vec<Bytes>) -> Result<Message, DecodeError> {
        let size: usize = frames.iter().map(Bytes::len).sum();
        if size > MAX_MESSAGE_BYTES {
            return Err(DecodeError::TooLarge { size });
        }
        let delimiter = frames
            .iter()
            .position(|frame| frame.as_ref() == DELIMITER)
            .ok_or(DecodeError::MissingDelimiter)?;
        let mut frames = frames;
        let rest = frames.split_off(delimiter + 1);
        frames.pop(); // the delimiter itself
        let identities = frames;
        if rest.len() < 5 {
            return Err(DecodeError::TooFewFrames { found: rest.len() });
        }
        let signature = &rest[0];
        let json: [&[u8]; 4] = [&rest[1], &rest[2], &rest[3], &rest[4]];
        let tag = self.signer.verify(signature, &json)?;
        let fresh = || {
            let mut history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
            history.insert(Bytes::from(tag))
        };
        if self.signer.is_signed() && !fresh() {
            return Err(DecodeError::Replayed);
        }

        let raw_header = parse_json("header", json[0])?;
        let header: Header =
            Header::deserialize(&raw_header).map_err(|_| DecodeError::BadHeader)?;
        let parse_or_empty = |frame, bytes: &[u8]| -> Result<Value, DecodeError> {
            if bytes.is_empty() {
                Ok(Value::Object(Map::new()))
            } else {
                parse_json(frame, bytes)
            }
        };
        let parent_header = parse_or_empty("parent_header", json[1])?;
        let metadata = parse_or_empty("metadata", json[2])?;
        let content = parse_or_empty("content", json[3])?;
        Ok(Message {
            identities,
            header,
            raw_header: Arc::new(raw_header),
            parent_header,
            metadata,
            content,
            buffers: rest.into_iter().skip(5).collect(),
        })
    }

    /// Encodes `out` with a fresh header from this session.
    pub fn encode(&self, out: &Outgoing) -> Vec<Bytes> {
        self.encode_with_id(out, &uuid::Uuid::new_v4().to_string())
    }

    /// Encodes `out` with the given `msg_id`, for senders that track replies.
    pub fn encode_with_id(&self, out: &Outgoing, msg_id: &str) -> Vec<Bytes> {
        self.encode_request(out, msg_id, None)
    }

    /// Encodes a request as a client sends it: with the given `msg_id` and,
    /// for a subshell's request, its `subshell_id` in the header (JEP 91).
    pub fn encode_request(
        &self,
        out: &Outgoing,
        msg_id: &str,
        subshell_id: Option<&str>,
    ) -> Vec<Bytes> {
        let mut header = serde_json::json!({
            "msg_id": msg_id,
            "msg_type": out.msg_type,
            "session": self.session,
            "username": "mahtab",
            "date": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "version": PROTOCOL_VERSION,
        });
        if let Some(id) = subshell_id {
            header["subshell_id"] = Value::String(id.to_owned());
        }
        let json = [
            to_bytes(&header),
            to_bytes(&out.parent_header),
            to_bytes(&out.metadata),
            to_bytes(&out.content),
        ];
        let signature = self.signer.sign(&[&json[0], &json[1], &json[2], &json[3]]);
        let mut frames = Vec::with_capacity(out.identities.len() + 6 + out.buffers.len());
        frames.extend(out.identities.iter().cloned());
        frames.push(Bytes::from_static(DELIMITER));
        frames.push(Bytes::from(signature));
        frames.extend(json.into_iter().map(Bytes::from));
        frames.extend(out.buffers.iter().cloned());
        frames
    }
}

fn parse_json(frame: &'static str, bytes: &[u8]) -> Result<Value, DecodeError> {
    serde_json::from_slice(bytes).map_err(|source| DecodeError::BadJson { frame, source })
}

fn to_bytes(value: &Value) -> Vec<u8> {
    // Serialising a `Value` cannot fail: its map keys are always strings.
    serde_json::to_vec(value).expect("JSON values serialise")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn typed_content_names_its_message_type_and_writes_the_spec_fields() {
        use jupyter_protocol::{ExecuteInput, ExecutionCount, Status, StreamContent};
        let status = Outgoing::typed(Status::busy(), no_parent());
        assert_eq!(status.msg_type, "status");
        assert_eq!(status.content, json!({ "execution_state": "busy" }));
        let stream = Outgoing::typed(StreamContent::stderr("oops"), no_parent());
        assert_eq!(stream.msg_type, "stream");
        assert_eq!(stream.content, json!({ "name": "stderr", "text": "oops" }));
        let input = ExecuteInput {
            code: "1 + 1".into(),
            execution_count: ExecutionCount::new(3),
        };
        let input = Outgoing::typed(input, no_parent());
        assert_eq!(input.msg_type, "execute_input");
        assert_eq!(
            input.content,
            json!({ "code": "1 + 1", "execution_count": 3 })
        );
    }

    fn request_frames(signer: &Signer, header: &Value, content: &[u8]) -> Vec<Bytes> {
        let header = serde_json::to_vec(header).unwrap();
        let parts: [&[u8]; 4] = [&header, b"{}", b"{}", content];
        let mut frames = vec![
            Bytes::from_static(b"client-id"),
            Bytes::from_static(DELIMITER),
        ];
        frames.push(Bytes::from(signer.sign(&parts)));
        frames.extend(parts.iter().map(|p| Bytes::copy_from_slice(p)));
        frames
    }

    fn header(id: &str) -> Value {
        json!({"msg_id": id, "msg_type": "kernel_info_request", "session": "s", "username": "u",
               "date": "", "version": "5.3"})
    }

    fn codec() -> Codec {
        Codec::new(
            Signer::new("hmac-sha256", b"key").unwrap(),
            "kernel-session",
        )
    }

    #[test]
    fn decodes_a_signed_message_and_keeps_identities() {
        let codec = codec();
        let signer = Signer::new("hmac-sha256", b"key").unwrap();
        let msg = codec
            .decode(request_frames(&signer, &header("1"), b"{\"a\":1}"))
            .unwrap();
        assert_eq!(msg.identities, vec![Bytes::from_static(b"client-id")]);
        assert_eq!(msg.header.msg_type, "kernel_info_request");
        assert_eq!(msg.content, json!({"a": 1}));
        assert_eq!(msg.raw_header.as_ref(), &header("1"));
    }

    #[test]
    fn rejects_replays_wrong_keys_and_unsigned() {
        let codec = codec();
        let signer = Signer::new("hmac-sha256", b"key").unwrap();
        let frames = request_frames(&signer, &header("1"), b"{}");
        codec.decode(frames.clone()).unwrap();
        assert!(matches!(
            codec.decode(frames.clone()),
            Err(DecodeError::Replayed)
        ));
        // The same tag spelt in upper-case hex is the same message.
        let mut shouted = frames;
        let delimiter = shouted
            .iter()
            .position(|f| f.as_ref() == DELIMITER)
            .unwrap();
        let upper = shouted[delimiter + 1].to_ascii_uppercase();
        shouted[delimiter + 1] = Bytes::from(upper);
        assert!(matches!(codec.decode(shouted), Err(DecodeError::Replayed)));

        let wrong = Signer::new("hmac-sha256", b"other").unwrap();
        assert!(matches!(
            codec.decode(request_frames(&wrong, &header("2"), b"{}")),
            Err(DecodeError::Signature(VerifyError::Mismatch))
        ));
        assert!(matches!(
            codec.decode(request_frames(&Signer::unsigned(), &header("3"), b"{}")),
            Err(DecodeError::Signature(VerifyError::Unsigned))
        ));
    }

    #[test]
    fn rejects_malformed_frames_without_panicking() {
        let codec = Codec::new(Signer::unsigned(), "s");
        let unsigned = Signer::unsigned();
        assert!(matches!(
            codec.decode(vec![]),
            Err(DecodeError::MissingDelimiter)
        ));
        assert!(matches!(
            codec.decode(vec![
                Bytes::from_static(DELIMITER),
                Bytes::new(),
                Bytes::new()
            ]),
            Err(DecodeError::TooFewFrames { found: 2 })
        ));
        let mut bad_json = request_frames(&unsigned, &header("1"), b"{}");
        bad_json[6] = Bytes::from_static(b"{not json");
        assert!(matches!(
            codec.decode(bad_json),
            Err(DecodeError::BadJson {
                frame: "content",
                ..
            })
        ));
        let no_type = request_frames(&unsigned, &json!({"msg_id": "x"}), b"{}");
        assert!(matches!(codec.decode(no_type), Err(DecodeError::BadHeader)));
        let huge = vec![Bytes::from(vec![b' '; MAX_MESSAGE_BYTES + 1])];
        assert!(matches!(
            codec.decode(huge),
            Err(DecodeError::TooLarge { .. })
        ));
    }

    #[test]
    fn content_that_is_not_an_object_still_decodes() {
        let codec = Codec::new(Signer::unsigned(), "s");
        let msg = codec
            .decode(request_frames(&Signer::unsigned(), &header("1"), b"[1,2]"))
            .unwrap();
        assert_eq!(msg.content, json!([1, 2]));
    }

    #[test]
    fn encode_round_trips_through_decode() {
        let sender = codec();
        let receiver = codec();
        let mut out = Outgoing::new("status", json!({"execution_state": "idle"}), no_parent());
        out.identities = vec![Bytes::from_static(b"peer")];
        let msg = receiver.decode(sender.encode(&out)).unwrap();
        assert_eq!(msg.header.msg_type, "status");
        assert_eq!(msg.header.session, "kernel-session");
        assert_eq!(msg.raw_header["version"], PROTOCOL_VERSION);
        assert_eq!(msg.identities, vec![Bytes::from_static(b"peer")]);
        assert_eq!(msg.content["execution_state"], "idle");
    }
}
