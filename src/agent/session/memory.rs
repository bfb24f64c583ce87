//! The conversation kept across kernel restarts: after each run the last
//! exchanges are saved in the Jupyter data directory, in a file named after
//! the notebook (or the working directory when the client does not say
//! which notebook), and the next session's first request continues them.
//! What is saved is bounded, written whole or not at all, readable only by
//! the user, and never holds a configured API key.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::agent::llm::{ChatMessage, Role};
use crate::agent::ports::Ports;
use crate::agent::scope_calls;

/// The most messages kept.
pub const MAX_MESSAGES: usize = 40;

/// The most text kept, all messages together.
pub const MAX_BYTES: usize = 200_000;

/// What stands in a saved message for a key.
const REDACTED: &str = "<redacted>";

#[derive(Serialize, Deserialize)]
struct Saved {
    /// The notebook (or directory) the conversation belongs to.
    key: String,
    /// When it was saved (RFC 3339).
    saved: String,
    messages: Vec<ChatMessage>,
}

/// The saved conversation of one notebook.
#[derive(Debug, Clone)]
pub struct Memory {
    path: PathBuf,
    key: String,
}

impl Memory {
    /// The memory of `key` (a notebook's path) under `dir`.
    pub fn new(dir: &Path, key: &str) -> Self {
        let digest = Sha256::digest(key.as_bytes());
        let name = format!("{}.json", hex::encode(&digest[..12]));
        Self {
            path: dir.join(name),
            key: key.to_owned(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The saved messages (none when there is no file or it is unreadable,
    /// which is logged).
    pub fn load(&self) -> Vec<ChatMessage> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            Err(e) => {
                tracing::warn!("%%ask memory {}: {e}", self.path.display());
                return Vec::new();
            }
        };
        match serde_json::from_str::<Saved>(&text) {
            Ok(saved) if saved.key == self.key => saved.messages,
            Ok(_) => Vec::new(),
            Err(e) => {
                tracing::warn!("%%ask memory {} is unreadable: {e}", self.path.display());
                Vec::new()
            }
        }
    }

    /// Saves the last exchanges of `messages`, with every one of `secrets`
    /// replaced.
    pub fn save(&self, messages: &[ChatMessage], secrets: &[String]) {
        let kept = bounded(messages)
            .into_iter()
            .map(|mut message| {
                for secret in secrets.iter().filter(|s| s.len() >= 8) {
                    message.content = message.content.replace(secret.as_str(), REDACTED);
                }
                message
            })
            .collect();
        let saved = Saved {
            key: self.key.clone(),
            saved: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            messages: kept,
        };
        if let Err(e) = self.write(&saved) {
            tracing::warn!("%%ask memory {} not saved: {e}", self.path.display());
        }
    }

    /// Forgets the saved conversation.
    pub fn forget(&self) {
        match std::fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("%%ask memory {} not removed: {e}", self.path.display()),
        }
    }

    fn write(&self, saved: &Saved) -> std::io::Result<()> {
        crate::private_files::write_whole(&self.path, &serde_json::to_vec(saved)?, 0o600)
    }
}

/// The newest messages within [`MAX_MESSAGES`] and [`MAX_BYTES`], starting
/// with a user message.
fn bounded(messages: &[ChatMessage]) -> Vec<ChatMessage> {
    let mut start = messages.len().saturating_sub(MAX_MESSAGES);
    let mut bytes: usize = messages[start..].iter().map(|m| m.content.len()).sum();
    while bytes > MAX_BYTES && start < messages.len() {
        bytes -= messages[start].content.len();
        start += 1;
    }
    while start < messages.len() && messages[start].role != Role::User {
        start += 1;
    }
    messages[start..].to_vec()
}

/// The conversation of a session: its messages, which each run continues,
/// and where they are kept across restarts, once known (the first request
/// asks Python which notebook this is).
#[derive(Default)]
pub(super) struct Conversation {
    pub(super) messages: Mutex<Vec<ChatMessage>>,
    pub(super) memory: Mutex<Option<Memory>>,
}

impl Conversation {
    /// The memory of this notebook's conversation; on the first request of
    /// the session its saved messages become the conversation.
    pub(super) async fn memory<P: Ports>(&self, ports: &P) -> Option<Memory> {
        if let Some(memory) = self
            .memory
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            return Some(memory);
        }
        let location = match scope_calls::call(ports, &scope_calls::MemoryLocation {}).await {
            Ok(location) => location,
            Err(e) => {
                tracing::warn!("%%ask: no memory: {e}");
                return None;
            }
        };
        let memory = Memory::new(std::path::Path::new(&location.dir), &location.key);
        let saved = memory.load();
        {
            let mut conversation = self.messages.lock().unwrap_or_else(PoisonError::into_inner);
            if conversation.is_empty() {
                *conversation = saved;
            }
        }
        *self.memory.lock().unwrap_or_else(PoisonError::into_inner) = Some(memory.clone());
        Some(memory)
    }
}

/// What of a failed or interrupted run's messages stays in the
/// conversation: up to the model's last answer. A request (or an execution
/// report) the model never answered is dropped, so the next request is not
/// sent merged with it.
pub(super) fn answered_part(messages: &[ChatMessage]) -> &[ChatMessage] {
    let answered = messages
        .iter()
        .rposition(|m| m.role == Role::Assistant)
        .map_or(0, |last| last + 1);
    &messages[..answered]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("mahtab-memory-{tag}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_saved_conversation_loads_for_the_same_notebook_only() {
        let dir = dir("same");
        let memory = Memory::new(&dir, "/home/u/analysis.ipynb");
        assert!(memory.load().is_empty());
        let messages = vec![ChatMessage::user("q"), ChatMessage::assistant("a")];
        memory.save(&messages, &[]);
        assert_eq!(Memory::new(&dir, "/home/u/analysis.ipynb").load(), messages);
        assert!(Memory::new(&dir, "/home/u/other.ipynb").load().is_empty());
        let mode = std::fs::metadata(memory.path()).unwrap().permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
        memory.forget();
        assert!(memory.load().is_empty());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn what_is_saved_is_bounded_and_starts_with_the_user() {
        let dir = dir("bounded");
        let memory = Memory::new(&dir, "nb");
        let mut messages = Vec::new();
        for i in 0..100 {
            messages.push(ChatMessage::user(format!("q{i}")));
            messages.push(ChatMessage::assistant(format!("a{i}")));
        }
        memory.save(&messages, &[]);
        let loaded = memory.load();
        assert_eq!(loaded.len(), MAX_MESSAGES);
        assert_eq!(loaded[0].content, "q80");
        assert_eq!(loaded.last().unwrap().content, "a99");
        let big = vec![
            ChatMessage::user("x".repeat(MAX_BYTES)),
            ChatMessage::assistant("old answer"),
            ChatMessage::user("latest"),
            ChatMessage::assistant("y"),
        ];
        memory.save(&big, &[]);
        assert_eq!(memory.load(), big[2..]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn keys_never_reach_the_file() {
        let dir = dir("keys");
        let memory = Memory::new(&dir, "nb");
        let key = "sk-test-0123456789abcdef".to_owned();
        memory.save(
            &[ChatMessage::user(format!("my key is {key}"))],
            std::slice::from_ref(&key),
        );
        let text = std::fs::read_to_string(memory.path()).unwrap();
        assert!(!text.contains(&key), "{text}");
        assert_eq!(memory.load()[0].content, "my key is <redacted>");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_unreadable_file_is_an_empty_memory() {
        let dir = dir("bad");
        let memory = Memory::new(&dir, "nb");
        std::fs::write(memory.path(), "not json").unwrap();
        assert!(memory.load().is_empty());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
