//! Where a run's settings come from, and the `%ask_config` magic that sets
//! this kernel's defaults and shows what a cell would use.
//!
//! Highest first: the run's own options, `%ask_config`, the settings file
//! (see [`super::file`]), the kernel's environment, and last
//! the embedded local model.

use std::path::{Path, PathBuf};

use super::choice::{self as config, Choice};
use super::file::{self as config_file, ConfigFile, ConfigFileError};
use super::options::{Approval, AskOptions, ConfigChange, GraphKind};
use crate::agent::llm::claude_cli::ClaudeCli;
use crate::agent::llm::http::WireFormat;
use crate::agent::llm::prices::Prices;
use crate::agent::run::limits::{
    ANALYST_MAX_TURNS, DEFAULT_MAX_TURNS, PLANNER_MAX_TURNS, TRIAGE_DEFAULT_MAX_REVIEWS,
};

/// Every source of settings, read once for a run.
pub(crate) struct Settings {
    session: AskOptions,
    file: ConfigFile,
}

impl Settings {
    /// The settings as they are now, with `session` the `%ask_config`
    /// defaults (the file is read afresh).
    pub(crate) fn now(session: AskOptions) -> Result<Self, ConfigFileError> {
        Ok(Self {
            session,
            file: ConfigFile::load(env)?,
        })
    }

    /// A cell's options with the defaults filled in.
    pub(crate) fn options_for(&self, cell: &AskOptions) -> AskOptions {
        cell.clone().or(&self.session).or(&self.file.options())
    }

    /// What calls cost: the list prices and the settings file's own.
    pub(crate) fn prices(&self) -> Prices {
        self.file.prices()
    }

    /// A setting that has an environment variable: the file's value, else
    /// the environment's.
    pub(crate) fn var(&self, name: &str) -> Option<String> {
        self.file.var(name).or_else(|| env(name))
    }

    /// Whether a cell with these (defaulted) options replays its record:
    /// as `%ask_config` or the settings file says, else unless
    /// `MAHTAB_REPLAY` is off.
    pub(crate) fn replays(&self, options: &AskOptions) -> bool {
        options.replay.unwrap_or_else(|| {
            !env("MAHTAB_REPLAY").is_some_and(|v| matches!(v.trim(), "0" | "false" | "no" | "off"))
        })
    }

    /// The provider for a cell with these (defaulted) options: the settings
    /// file ranks above the environment.
    pub(crate) fn choose_provider(
        &self,
        options: &AskOptions,
    ) -> Result<config::Choice, config::ConfigError> {
        let file = |name: &str| self.file.var(name);
        config::choose(options, &[&file, &env])
    }

    /// The claude CLI the triage graph may hand work to: `MAHTAB_CLAUDE_BIN`
    /// or `claude` on the PATH, unless `MAHTAB_CLAUDE_AGENT` (the settings
    /// file's `[claude] agent`) is off.
    pub(crate) fn claude_agent(&self) -> Option<ClaudeCli> {
        if self
            .var("MAHTAB_CLAUDE_AGENT")
            .is_some_and(|v| matches!(v.trim(), "0" | "false" | "no" | "off"))
        {
            return None;
        }
        let program = match self.var("MAHTAB_CLAUDE_BIN") {
            Some(bin) => PathBuf::from(bin),
            None => std::env::split_paths(&env("PATH")?)
                .map(|dir| dir.join("claude"))
                .find(|path| is_executable(path))?,
        };
        is_executable(&program).then_some(ClaudeCli {
            program,
            model: None,
        })
    }

    /// Where a setting comes from, for the overview.
    fn source(&self, field: impl Fn(&AskOptions) -> bool, variable: Option<&str>) -> &'static str {
        if field(&self.session) {
            "%ask_config"
        } else if field(&self.file.options()) {
            "settings file"
        } else if variable.is_some_and(|name| env(name).is_some()) {
            "environment"
        } else {
            "default"
        }
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Applies an `%ask_config` change to the session's `defaults`.
pub(crate) fn apply(defaults: &mut AskOptions, change: ConfigChange) {
    match change {
        ConfigChange::Show => {}
        ConfigChange::Reset => *defaults = AskOptions::default(),
        ConfigChange::Set(options) => *defaults = options.or(defaults),
    }
}

/// What a `%%ask` cell without options would use, and why. Keys are only
/// ever said to be set.
pub(crate) fn overview(settings: &Settings) -> String {
    let options = settings.options_for(&AskOptions::default());
    let provider_source = match settings.source(|o| o.provider.is_some(), Some("MAHTAB_PROVIDER")) {
        // Not named anywhere: the first key or URL found chose it.
        "default" => {
            let implied = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"];
            if implied.iter().any(|name| settings.file.var(name).is_some()) {
                "settings file"
            } else if implied.iter().any(|name| env(name).is_some()) {
                "environment"
            } else {
                "default"
            }
        }
        explicit => explicit,
    };
    let provider = match settings.choose_provider(&options) {
        Ok(Choice::Http(choice)) => {
            let (name, key_var) = match choice.format {
                WireFormat::Anthropic => ("anthropic", "ANTHROPIC_API_KEY"),
                WireFormat::OpenAi => ("openai", "OPENAI_API_KEY"),
            };
            let key = if settings.var(key_var).is_some() {
                "key set"
            } else {
                "no key"
            };
            format!("{name} at {} ({key})", choice.base_url)
        }
        Ok(Choice::ClaudeCli(cli)) => format!("claude CLI ({})", cli.program.display()),
        Err(config::ConfigError::NoProvider) => {
            match config::local_model_choice(|name| settings.var(name)) {
                Ok(Some(spec)) => format!(
                    "none configured: the local model {} (local_model = \"{}\"), when installed",
                    spec.name, spec.key
                ),
                Ok(None) => format!("not usable: {}", config::ConfigError::NoProvider),
                Err(e) => format!("not usable: {e}"),
            }
        }
        Err(e) => format!("not usable: {e}"),
    };
    let model = options
        .model
        .clone()
        .unwrap_or_else(|| "provider's default".into());
    let graph = options.graph.unwrap_or_default();
    let max_turns = options.max_turns.map_or_else(
        || match graph {
            GraphKind::Default => format!("{DEFAULT_MAX_TURNS}"),
            GraphKind::Analyst => format!("{ANALYST_MAX_TURNS}"),
            GraphKind::Planner => format!("{} steps", PLANNER_MAX_TURNS),
            GraphKind::Triage => format!("{} reviews", TRIAGE_DEFAULT_MAX_REVIEWS),
        },
        |n| n.to_string(),
    );
    let file = match config_file::location(env) {
        Some(path) if path.exists() => path.display().to_string(),
        Some(path) => format!("{} (none there)", path.display()),
        None => "(no location: HOME is not set)".into(),
    };
    let rows = [
        ("provider", provider, provider_source),
        (
            "model",
            model,
            settings.source(|o| o.model.is_some(), Some("MAHTAB_MODEL")),
        ),
        (
            "judge model",
            options
                .judge_model
                .clone()
                .unwrap_or_else(|| "the model".into()),
            settings.source(|o| o.judge_model.is_some(), None),
        ),
        (
            "graph",
            match (graph, options.informer) {
                (GraphKind::Planner, true) => "planner, with the informer".to_owned(),
                (graph, _) => graph.name().to_owned(),
            },
            settings.source(|o| o.graph.is_some() || o.informer, None),
        ),
        (
            "max turns",
            max_turns,
            settings.source(|o| o.max_turns.is_some(), None),
        ),
        (
            "block limit",
            format!(
                "{} s: a block of agent code running longer is stopped",
                options.block_rules().seconds
            ),
            settings.source(|o| o.block_seconds.is_some(), None),
        ),
        (
            "approve",
            match options.approval() {
                Approval::Always => "always: agent code asks before every block".to_owned(),
                Approval::Risky => "risky: agent code asks before what the guard flags".to_owned(),
                Approval::Never => "never: agent code runs without asking".to_owned(),
            },
            settings.source(|o| o.approve.is_some(), None),
        ),
        (
            "allowed",
            match options.allowed_kinds().as_slice() {
                [] => "nothing: agent code asks before shell, files, network, install".to_owned(),
                kinds => kinds.join(", "),
            },
            settings.source(|o| o.allow.is_some() || o.approve.is_some(), None),
        ),
        (
            "replay",
            if settings.replays(&options) {
                "on: a cell with a record of its run replays it (--fresh asks again)".to_owned()
            } else {
                "off: every %%ask cell asks the model".to_owned()
            },
            settings.source(|o| o.replay.is_some(), Some("MAHTAB_REPLAY")),
        ),
    ];
    let mut text = String::from("%%ask settings (options on the %%ask line override them):\n");
    for (name, value, source) in rows {
        text.push_str(&format!("  {name:<10} {value}  [{source}]\n"));
    }
    text.push_str(&format!("  {:<10} {file}\n", "file"));
    text
}
