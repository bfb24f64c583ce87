//! The `%%ask` settings file: TOML at `$MAHTAB_CONFIG`, or else
//! `$XDG_CONFIG_HOME/mahtab/config.toml` (`~/.config/mahtab/config.toml`).
//!
//! Every key, with what it does: the example in `docs/src/settings.md`
//! (a unit test in `src/book_examples.rs` holds the two together).
//!
//! Its entries stand for the environment variables of the same meaning and
//! rank above them; options on the magic line and `%ask_config` rank above
//! the file. The file is read for every `%%ask`, so edits apply at once.
//! Errors name the file and line but never quote its values (keys live here).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::options::{Approval, AskOptions, GraphKind};
use crate::agent::llm::prices::{Price, Prices};

/// The settings file's contents.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    provider: Option<String>,
    model: Option<String>,
    judge_model: Option<String>,
    max_turns: Option<u32>,
    block_seconds: Option<u32>,
    graph: Option<String>,
    informer: Option<bool>,
    local_model: Option<LocalModelSetting>,
    local_model_idle_minutes: Option<f64>,
    context_tokens: Option<u64>,
    temperature: Option<f64>,
    seed: Option<u64>,
    candidates: Option<u32>,
    cross_checks: Option<u32>,
    vision: Option<bool>,
    approve: Option<String>,
    allow: Option<Vec<String>>,
    replay: Option<bool>,
    #[serde(default)]
    anthropic: Endpoint,
    #[serde(default)]
    openai: Endpoint,
    #[serde(default)]
    claude: Claude,
    #[serde(default)]
    prices: BTreeMap<String, Price>,
}

/// `local_model = true | false | "coder-0.5b"`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum LocalModelSetting {
    On(bool),
    Named(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Endpoint {
    api_key: Option<String>,
    base_url: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Claude {
    bin: Option<String>,
    /// Whether the triage graph may hand work to the CLI.
    agent: Option<bool>,
}

/// Why the settings file could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("%%ask settings file {path}: {message}")]
pub struct ConfigFileError {
    pub path: String,
    pub message: String,
}

/// Where the settings file is looked for (`env` looks a variable up).
pub fn location(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let var = |name: &str| env(name).filter(|v| !v.is_empty());
    if let Some(path) = var("MAHTAB_CONFIG") {
        return Some(path.into());
    }
    let base = var("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|home| Path::new(&home).join(".config")))?;
    Some(base.join("mahtab").join("config.toml"))
}

impl ConfigFile {
    /// Reads the settings file, if there is one. A file named by
    /// `MAHTAB_CONFIG` must exist; the default location may be empty.
    pub fn load(env: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigFileError> {
        let explicit = env("MAHTAB_CONFIG").is_some_and(|v| !v.is_empty());
        let Some(path) = location(env) else {
            return Ok(Self::default());
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::parse(&text).map_err(|message| ConfigFileError {
                path: path.display().to_string(),
                message,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => Ok(Self::default()),
            Err(e) => Err(ConfigFileError {
                path: path.display().to_string(),
                message: e.to_string(),
            }),
        }
    }

    /// Parses the file's text; the error says where, without its values.
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: Self = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|span| text[..span.start.min(text.len())].lines().count().max(1));
            let message = without_values(e.message());
            match line {
                Some(line) => format!("line {line}: {message}"),
                None => message,
            }
        })?;
        if let Some(graph) = &file.graph {
            graph.parse::<GraphKind>()?;
        }
        if let Some(allow) = &file.allow {
            super::options::parse_allow(&allow.join(",")).map_err(|e| format!("allow: {e}"))?;
        }
        if let Some(approve) = &file.approve {
            approve
                .parse::<Approval>()
                .map_err(|e| format!("approve: {e}"))?;
        }
        Ok(file)
    }

    /// The defaults the file sets for the magic line's options.
    pub fn options(&self) -> AskOptions {
        AskOptions {
            provider: self.provider.clone(),
            model: self.model.clone(),
            judge_model: self.judge_model.clone(),
            max_turns: self.max_turns.filter(|n| *n > 0),
            block_seconds: self.block_seconds.filter(|n| *n > 0),
            graph: self.graph.as_deref().and_then(|g| g.parse().ok()),
            informer: self.informer.unwrap_or(false),
            approve: self.approve.as_deref().and_then(|a| a.parse().ok()),
            allow: self
                .allow
                .as_ref()
                .and_then(|kinds| super::options::parse_allow(&kinds.join(",")).ok()),
            replay: self.replay,
            ..AskOptions::default()
        }
    }

    /// The price list, with the file's own prices over the list prices.
    pub fn prices(&self) -> Prices {
        Prices::new(self.prices.clone())
    }

    /// The file's value for the environment variable `name`, if it sets one.
    pub fn var(&self, name: &str) -> Option<String> {
        let value = match name {
            "MAHTAB_PROVIDER" => self.provider.clone(),
            "MAHTAB_MODEL" => self.model.clone(),
            "ANTHROPIC_API_KEY" => self.anthropic.api_key.clone(),
            "ANTHROPIC_BASE_URL" => self.anthropic.base_url.clone(),
            "OPENAI_API_KEY" => self.openai.api_key.clone(),
            "OPENAI_BASE_URL" => self.openai.base_url.clone(),
            "MAHTAB_CLAUDE_BIN" => self.claude.bin.clone(),
            "MAHTAB_CLAUDE_AGENT" => self
                .claude
                .agent
                .map(|on| if on { "1" } else { "0" }.into()),
            "MAHTAB_LOCAL_MODEL" => self.local_model.as_ref().map(|setting| match setting {
                LocalModelSetting::On(true) => "1".into(),
                LocalModelSetting::On(false) => "0".into(),
                LocalModelSetting::Named(name) => name.clone(),
            }),
            "MAHTAB_LOCAL_MODEL_IDLE_MINUTES" => {
                self.local_model_idle_minutes.map(|m| m.to_string())
            }
            "MAHTAB_CONTEXT_TOKENS" => self.context_tokens.map(|n| n.to_string()),
            "MAHTAB_TEMPERATURE" => self.temperature.map(|t| t.to_string()),
            "MAHTAB_SEED" => self.seed.map(|n| n.to_string()),
            "MAHTAB_CANDIDATES" => self.candidates.map(|n| n.to_string()),
            "MAHTAB_CROSS_CHECKS" => self.cross_checks.map(|n| n.to_string()),
            "MAHTAB_VISION" => self.vision.map(|b| b.to_string()),
            _ => None,
        };
        value.filter(|v| !v.is_empty())
    }
}

/// A parser message with quoted values blanked out: a key typed into the
/// wrong field must not end up in the cell's output.
fn without_values(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut quote: Option<char> = None;
    for c in message.chars() {
        match quote {
            Some(q) if c == q => {
                out.push('…');
                out.push(c);
                quote = None;
            }
            Some(_) => {}
            None => {
                out.push(c);
                // Field names are quoted with backticks and stay readable.
                if c == '"' {
                    quote = Some(c);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::config::choice::env;

    #[test]
    fn entries_stand_for_their_environment_variables() {
        let file = ConfigFile::parse(
            "provider = \"openai\"\nmodel = \"m\"\njudge_model = \"j\"\nmax_turns = 2\ngraph = \"analyst\"\nlocal_model = false\n\
             [openai]\nbase_url = \"http://h/v1\"\napi_key = \"sk-1\"\n[claude]\nbin = \"/c\"\n",
        )
        .unwrap();
        assert_eq!(file.var("OPENAI_BASE_URL").as_deref(), Some("http://h/v1"));
        assert_eq!(file.var("OPENAI_API_KEY").as_deref(), Some("sk-1"));
        assert_eq!(file.var("MAHTAB_CLAUDE_BIN").as_deref(), Some("/c"));
        assert_eq!(file.var("MAHTAB_LOCAL_MODEL").as_deref(), Some("0"));
        assert_eq!(file.var("ANTHROPIC_API_KEY"), None);
        let tried = ConfigFile::parse("candidates = 3\n").unwrap();
        assert_eq!(tried.var("MAHTAB_CANDIDATES").as_deref(), Some("3"));
        let crossed = ConfigFile::parse("cross_checks = 0\n").unwrap();
        assert_eq!(crossed.var("MAHTAB_CROSS_CHECKS").as_deref(), Some("0"));
        let idle = ConfigFile::parse("local_model_idle_minutes = 0.5\n").unwrap();
        assert_eq!(
            idle.var("MAHTAB_LOCAL_MODEL_IDLE_MINUTES").as_deref(),
            Some("0.5")
        );
        let named = ConfigFile::parse("local_model = \"coder-0.5b\"\n").unwrap();
        assert_eq!(
            named.var("MAHTAB_LOCAL_MODEL").as_deref(),
            Some("coder-0.5b")
        );
        let options = file.options();
        assert_eq!(options.max_turns, Some(2));
        assert_eq!(options.judge_model.as_deref(), Some("j"));
        assert_eq!(options.graph, Some(GraphKind::Analyst));
        assert_eq!(options.provider.as_deref(), Some("openai"));
        assert!(!options.informer);
        let file = ConfigFile::parse("graph = \"planner\"\ninformer = true\n").unwrap();
        assert_eq!(file.options().graph, Some(GraphKind::Planner));
        assert!(file.options().informer);
    }

    #[test]
    fn errors_give_the_line_but_not_the_values() {
        let err = ConfigFile::parse("model = \"m\"\nmax_turns = \"sk-secret\"\n").unwrap_err();
        assert!(err.starts_with("line 2:"), "{err}");
        assert!(!err.contains("sk-secret"), "{err}");
        let err = ConfigFile::parse("[openai]\napi_kee = \"sk-secret\"\n").unwrap_err();
        assert!(err.contains("unknown field `api_kee`"), "{err}");
        assert!(!err.contains("sk-secret"), "{err}");
        let err = ConfigFile::parse("graph = \"fancy\"").unwrap_err();
        assert!(err.contains("available: default, analyst"), "{err}");
        assert!(ConfigFile::parse("model = ").is_err());
    }

    #[test]
    fn the_file_is_found_by_variable_then_xdg_then_home() {
        assert_eq!(
            location(env(&[("MAHTAB_CONFIG", "/a.toml"), ("HOME", "/h")])),
            Some("/a.toml".into())
        );
        assert_eq!(
            location(env(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")])),
            Some("/x/mahtab/config.toml".into())
        );
        assert_eq!(
            location(env(&[("HOME", "/h")])),
            Some("/h/.config/mahtab/config.toml".into())
        );
        assert_eq!(location(env(&[])), None);
    }

    #[test]
    fn a_missing_default_file_is_empty_but_a_named_one_is_an_error() {
        let dir = std::env::temp_dir().join(format!("mahtab-config-{}", std::process::id()));
        let missing = dir.join("nope.toml");
        let file = ConfigFile::load(env(&[("XDG_CONFIG_HOME", dir.to_str().unwrap())])).unwrap();
        assert_eq!(file.var("MAHTAB_PROVIDER"), None);
        let err = ConfigFile::load(env(&[("MAHTAB_CONFIG", missing.to_str().unwrap())]));
        assert!(err.unwrap_err().to_string().contains("nope.toml"));
    }
}
