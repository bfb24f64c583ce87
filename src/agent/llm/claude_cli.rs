//! The `claude` CLI as a provider, so people with Claude Code need no API
//! key: each call runs `claude -p --output-format stream-json --verbose
//! --include-partial-messages` and reads its newline-delimited JSON. The
//! conversation, flattened, goes to its standard input (an argument is
//! limited to 128 KiB, which a long session passes) and the system prompt
//! to a private temporary file (`--system-prompt-file`); Claude Code's own
//! tools are disallowed so the model answers with Python for the notebook.
//! Dropping the call's future kills the process.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use super::{ChatEvent, ChatOutcome, ChatRequest, LlmError, Role, Usage};

const PROVIDER: &str = "claude CLI";

/// The context window of the models the CLI runs.
pub const CONTEXT_TOKENS: usize = 200_000;

/// Claude Code tools the model must not use: it answers with code instead.
const BLOCKED_TOOLS: &str =
    "Bash Read Write Edit MultiEdit Glob Grep Task WebFetch WebSearch NotebookEdit TodoWrite";

#[derive(Debug, Clone)]
pub struct ClaudeCli {
    /// The executable (`claude` on PATH unless configured).
    pub program: PathBuf,
    pub model: Option<String>,
}

impl ClaudeCli {
    /// The flattened conversation, the CLI's prompt on its standard input.
    pub fn prompt(request: &ChatRequest) -> String {
        let mut prompt = String::from("<conversation>\n");
        for message in &request.messages {
            let tag = match message.role {
                Role::User => "human",
                Role::Assistant => "assistant",
            };
            prompt.push_str(&format!("<{tag}>{}</{tag}>\n", message.content));
        }
        prompt.push_str("</conversation>");
        prompt
    }

    /// The command-line arguments for a call whose system prompt is in the
    /// file `system` (its conversation goes to standard input).
    pub fn args(&self, system: Option<&Path>) -> Vec<String> {
        let mut args: Vec<String> = [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
            "--setting-sources",
            "",
            "--disallowedTools",
            BLOCKED_TOOLS,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(system) = system {
            args.extend(["--system-prompt-file".into(), system.display().to_string()]);
        }
        if let Some(model) = &self.model {
            args.extend(["--model".into(), model.clone()]);
        }
        args
    }

    /// Runs one call, streaming text to `on_text`.
    pub async fn chat(
        &self,
        request: ChatRequest,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ChatOutcome, LlmError> {
        let failed = |message: String| LlmError::Failed {
            provider: PROVIDER,
            message,
        };
        let system =
            if request.system.is_empty() {
                None
            } else {
                Some(PrivateFile::write(&request.system).map_err(|e| {
                    failed(format!("cannot write the system prompt to a file: {e}"))
                })?)
            };
        let mut child = tokio::process::Command::new(&self.program)
            .args(self.args(system.as_ref().map(|file| file.0.as_path())))
            .current_dir(std::env::temp_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Its own process group, so an interrupt (SIGINT to the kernel's
            // group) reaches it only as the kernel's own cancellation.
            .process_group(0)
            .spawn()
            .map_err(|e| LlmError::Connect {
                provider: PROVIDER,
                message: format!("cannot run {}: {e}", self.program.display()),
            })?;
        // Written while the output is read, so neither side waits on a full
        // pipe; a write cut short by a dead process shows as its exit status.
        if let Some(mut stdin) = child.stdin.take() {
            let prompt = Self::prompt(&request);
            tokio::spawn(async move {
                let _ = stdin.write_all(prompt.as_bytes()).await;
            });
        }
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| failed("no stdout".into()))?;
        let mut stderr = child
            .stderr
            .take()
            .ok_or_else(|| failed("no stderr".into()))?;
        let mut lines = BufReader::new(stdout).lines();
        let mut outcome = ChatOutcome::default();
        let mut streamed = false;
        while let Some(line) = lines.next_line().await.map_err(|e| failed(e.to_string()))? {
            for event in parse_line(&line, streamed) {
                match event {
                    ChatEvent::Text(text) => {
                        streamed = true;
                        on_text(&text);
                        outcome.text.push_str(&text);
                    }
                    ChatEvent::Usage(usage) => outcome.usage = usage,
                    ChatEvent::Finished
                    | ChatEvent::Truncated
                    | ChatEvent::Done
                    | ChatEvent::TokenChoices(_) => {}
                    ChatEvent::Error(e) => return Err(e),
                }
            }
        }
        let status = child.wait().await.map_err(|e| failed(e.to_string()))?;
        if !status.success() {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text).await;
            let tail: String = text
                .trim()
                .chars()
                .rev()
                .take(500)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            return Err(failed(format!("exited with {status}: {tail}")));
        }
        Ok(outcome)
    }
}

/// A file only this user may read, removed when dropped (also when a call
/// is cancelled).
struct PrivateFile(PathBuf);

impl PrivateFile {
    fn write(text: &str) -> std::io::Result<Self> {
        let path = std::env::temp_dir().join(format!("mahtab-system-{}.txt", uuid::Uuid::new_v4()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        let file_guard = Self(path);
        file.write_all(text.as_bytes())?;
        Ok(file_guard)
    }
}

impl Drop for PrivateFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Translates one line of `stream-json` output. `streamed` says whether text
/// already arrived in partial messages (then the final result's text is not
/// repeated).
pub fn parse_line(line: &str, streamed: bool) -> Vec<ChatEvent> {
    let Ok(value) = serde_json::from_str::<Value>(line) else {
        return Vec::new(); // the CLI may print non-JSON notices; they are not the answer
    };
    match value["type"].as_str() {
        Some("stream_event") => {
            let event = &value["event"];
            match (
                event["type"].as_str(),
                event["delta"]["type"].as_str(),
                event["delta"]["text"].as_str(),
            ) {
                (Some("content_block_delta"), Some("text_delta"), Some(text))
                    if !text.is_empty() =>
                {
                    vec![ChatEvent::Text(text.to_owned())]
                }
                _ => Vec::new(),
            }
        }
        Some("result") => {
            let mut events = Vec::new();
            if value["is_error"] == true {
                let message = value["result"]
                    .as_str()
                    .unwrap_or("the CLI reported an error");
                return vec![ChatEvent::Error(LlmError::Failed {
                    provider: PROVIDER,
                    message: message.to_owned(),
                })];
            }
            if !streamed && let Some(text) = value["result"].as_str() {
                events.push(ChatEvent::Text(text.to_owned()));
            }
            let usage = &value["usage"];
            let cache_read_tokens = usage["cache_read_input_tokens"].as_u64().unwrap_or(0);
            let cache_write_tokens = usage["cache_creation_input_tokens"].as_u64().unwrap_or(0);
            events.push(ChatEvent::Usage(Usage {
                input_tokens: usage["input_tokens"].as_u64().unwrap_or(0)
                    + cache_read_tokens
                    + cache_write_tokens,
                output_tokens: usage["output_tokens"].as_u64().unwrap_or(0),
                cache_read_tokens,
                cache_write_tokens,
                cost_usd: value["total_cost_usd"].as_f64(),
            }));
            events.push(ChatEvent::Done);
            events
        }
        _ => Vec::new(), // system/init, assistant, user, rate_limit_event, future types
    }
}

#[cfg(test)]
mod tests {
    use super::super::ChatMessage;
    use super::*;

    #[test]
    fn flattens_the_conversation_and_blocks_tools() {
        let request = ChatRequest {
            model: String::new(),
            system: "sys".into(),
            messages: vec![ChatMessage::user("hi"), ChatMessage::assistant("hello")],
            max_tokens: 10,
            sampling: Default::default(),
            schema: None,
            stop: &[],
            token_choices: false,
        };
        let cli = ClaudeCli {
            program: "claude".into(),
            model: Some("opus".into()),
        };
        assert_eq!(
            ClaudeCli::prompt(&request),
            "<conversation>\n<human>hi</human>\n<assistant>hello</assistant>\n</conversation>"
        );
        let args = cli.args(Some(Path::new("/tmp/system.txt")));
        assert!(
            args.windows(2)
                .any(|w| w[0] == "--disallowedTools" && w[1].contains("Bash"))
        );
        assert!(
            args.windows(2)
                .any(|w| w == ["--system-prompt-file", "/tmp/system.txt"])
        );
        assert!(args.windows(2).any(|w| w == ["--model", "opus"]));
    }

    #[test]
    fn reads_partial_text_and_the_result_line() {
        let delta = r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}},"session_id":"s"}"#;
        assert_eq!(parse_line(delta, false), vec![ChatEvent::Text("Hi".into())]);
        let result = r#"{"type":"result","subtype":"success","is_error":false,"result":"Hi","total_cost_usd":0.01,"usage":{"input_tokens":5,"output_tokens":2}}"#;
        let events = parse_line(result, true);
        assert_eq!(
            events[0],
            ChatEvent::Usage(Usage {
                input_tokens: 5,
                output_tokens: 2,
                cost_usd: Some(0.01),
                ..Default::default()
            })
        );
        assert_eq!(events[1], ChatEvent::Done);
        // Without partial messages, the result's text is the answer.
        assert_eq!(parse_line(result, false)[0], ChatEvent::Text("Hi".into()));
        assert!(parse_line(r#"{"type":"system","subtype":"init"}"#, false).is_empty());
        assert!(parse_line("not json", false).is_empty());
        let error = r#"{"type":"result","is_error":true,"result":"API Error: 529"}"#;
        assert!(matches!(
            &parse_line(error, false)[..],
            [ChatEvent::Error(_)]
        ));
    }
}
