//! Choosing the model provider for a `%%ask` cell from its options (already
//! merged with the kernel's defaults) and settings looked up by their
//! environment variable names (`MAHTAB_PROVIDER`, `MAHTAB_MODEL`,
//! `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, `OPENAI_BASE_URL`; the `claude` CLI
//! when asked for, `MAHTAB_CLAUDE_BIN` naming it), which the kernel answers
//! from the settings file and then the environment. With none, the user is
//! told how to configure one.

use super::options::AskOptions;
use crate::agent::llm::claude_cli::ClaudeCli;
use crate::agent::llm::http::{ApiKey, WireFormat};
use crate::agent::llm::local;

/// Which provider a cell uses.
#[derive(Debug, Clone)]
pub enum Choice {
    Http(ProviderChoice),
    ClaudeCli(ClaudeCli),
}

/// Where and how to reach a model over HTTP.
#[derive(Debug, Clone)]
pub struct ProviderChoice {
    pub format: WireFormat,
    pub base_url: String,
    pub model: String,
    pub key: ApiKey,
}

pub const DEFAULT_ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4o-mini";

/// Shown when no provider is configured.
pub const HOW_TO_CONFIGURE: &str = "No model provider is configured for %%ask. Set one of:\n\
  ANTHROPIC_API_KEY=...            (Anthropic; model with MAHTAB_MODEL or --model)\n\
  OPENAI_API_KEY=...               (OpenAI)\n\
  OPENAI_BASE_URL=http://host/v1   (any OpenAI-compatible server: Ollama, vLLM, llama.cpp, LM Studio)\n\
in the kernel's environment or in ~/.config/mahtab/config.toml ([anthropic] api_key = ..., \
[openai] base_url = ...), or choose with --provider anthropic|openai|claude on the %%ask line.";

/// Why no provider could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{HOW_TO_CONFIGURE}")]
    NoProvider,
    #[error("unknown provider {0:?}: use anthropic, openai or claude")]
    UnknownProvider(String),
    #[error("the anthropic provider needs ANTHROPIC_API_KEY in the kernel's environment")]
    MissingAnthropicKey,
    #[error("unknown local model {0:?}: use coder-1.5b, coder-0.5b, smollm2 or off")]
    UnknownLocalModel(String),
}

/// Whether the embedded local model may be started when no provider is
/// configured (`MAHTAB_LOCAL_MODEL=0` turns that off).
pub fn local_model_allowed(env: impl Fn(&str) -> Option<String>) -> bool {
    !matches!(local_model_choice(env), Ok(None))
}

/// The local model to start when no provider is configured:
/// `MAHTAB_LOCAL_MODEL` names one of [`local::MODELS`] (`coder-1.5b`, the
/// default, `coder-0.5b`, `smollm2`), or is `0`/`off` for none.
pub fn local_model_choice(
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<&'static local::ModelSpec>, ConfigError> {
    let setting = env("MAHTAB_LOCAL_MODEL");
    match setting.as_deref().map(str::trim) {
        None | Some("" | "1" | "on" | "true" | "yes") => Ok(Some(local::default_spec())),
        Some("0" | "off" | "false" | "no") => Ok(None),
        Some(name) => local::spec(name)
            .map(Some)
            .ok_or_else(|| ConfigError::UnknownLocalModel(name.to_owned())),
    }
}

/// How long the shared local model server may go unused before it stops:
/// `MAHTAB_LOCAL_MODEL_IDLE_MINUTES` (`local_model_idle_minutes` in the
/// settings file), 15 minutes when unset or not a positive number.
pub fn local_model_idle(env: impl Fn(&str) -> Option<String>) -> std::time::Duration {
    env("MAHTAB_LOCAL_MODEL_IDLE_MINUTES")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|minutes| minutes.is_finite() && *minutes > 0.0)
        .map_or(local::DEFAULT_IDLE, |minutes| {
            std::time::Duration::from_secs_f64(minutes * 60.0)
        })
}

/// A source of settings by variable name (the settings file, the
/// environment; tests pass a map).
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Picks the provider from `options` and `layers` of settings, highest rank
/// first. A setting comes from the first layer that has it; when no provider
/// is named, the first layer that configures one decides, so a server in the
/// settings file wins over a key that happens to be in the environment.
pub fn choose(options: &AskOptions, layers: &[Lookup]) -> Result<Choice, ConfigError> {
    let var = |name: &str| {
        layers
            .iter()
            .find_map(|layer| layer(name).filter(|v| !v.is_empty()))
    };
    let provider = options.provider.clone().or_else(|| var("MAHTAB_PROVIDER"));
    let model = options.model.clone().or_else(|| var("MAHTAB_MODEL"));
    let anthropic = || -> Result<ProviderChoice, ConfigError> {
        let key = var("ANTHROPIC_API_KEY").ok_or(ConfigError::MissingAnthropicKey)?;
        Ok(ProviderChoice {
            format: WireFormat::Anthropic,
            base_url: var("ANTHROPIC_BASE_URL")
                .unwrap_or_else(|| "https://api.anthropic.com".into()),
            model: model
                .clone()
                .unwrap_or_else(|| DEFAULT_ANTHROPIC_MODEL.into()),
            key: ApiKey::new(Some(key)),
        })
    };
    let openai = || ProviderChoice {
        format: WireFormat::OpenAi,
        base_url: var("OPENAI_BASE_URL").unwrap_or_else(|| "https://api.openai.com/v1".into()),
        model: model.clone().unwrap_or_else(|| DEFAULT_OPENAI_MODEL.into()),
        key: ApiKey::new(var("OPENAI_API_KEY")),
    };
    match provider.as_deref() {
        Some("anthropic") => anthropic().map(Choice::Http),
        Some("openai") => Ok(Choice::Http(openai())),
        Some("claude") => Ok(Choice::ClaudeCli(ClaudeCli {
            program: var("MAHTAB_CLAUDE_BIN")
                .unwrap_or_else(|| "claude".into())
                .into(),
            model,
        })),
        Some(other) => Err(ConfigError::UnknownProvider(other.to_owned())),
        None => match layers.iter().find_map(|layer| configured_format(*layer)) {
            Some(WireFormat::Anthropic) => anthropic().map(Choice::Http),
            Some(WireFormat::OpenAi) => Ok(Choice::Http(openai())),
            None => Err(ConfigError::NoProvider),
        },
    }
}

/// The provider one layer of settings configures without naming it: an
/// Anthropic key, else an OpenAI key or server.
fn configured_format(layer: Lookup) -> Option<WireFormat> {
    let has = |name: &str| layer(name).is_some_and(|v| !v.is_empty());
    if has("ANTHROPIC_API_KEY") {
        Some(WireFormat::Anthropic)
    } else if has("OPENAI_API_KEY") || has("OPENAI_BASE_URL") {
        Some(WireFormat::OpenAi)
    } else {
        None
    }
}

/// A variable lookup over fixed pairs, standing in for the environment in
/// tests.
#[cfg(test)]
pub(crate) fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: std::collections::HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(choice: Choice) -> ProviderChoice {
        match choice {
            Choice::Http(choice) => choice,
            Choice::ClaudeCli(cli) => panic!("expected an HTTP provider, got {cli:?}"),
        }
    }

    #[test]
    fn options_beat_the_environment() {
        let options = AskOptions {
            provider: Some("openai".into()),
            model: Some("m".into()),
            ..Default::default()
        };
        let choice = http(
            choose(
                &options,
                &[&env(&[
                    ("ANTHROPIC_API_KEY", "k"),
                    ("OPENAI_BASE_URL", "http://x/v1"),
                ])],
            )
            .unwrap(),
        );
        assert_eq!(choice.format, WireFormat::OpenAi);
        assert_eq!(
            (choice.base_url.as_str(), choice.model.as_str()),
            ("http://x/v1", "m")
        );
    }

    #[test]
    fn the_environment_picks_anthropic_then_openai() {
        let choice = http(
            choose(
                &AskOptions::default(),
                &[&env(&[("ANTHROPIC_API_KEY", "k")])],
            )
            .unwrap(),
        );
        assert_eq!(choice.format, WireFormat::Anthropic);
        assert_eq!(choice.model, DEFAULT_ANTHROPIC_MODEL);
        let choice = http(
            choose(
                &AskOptions::default(),
                &[&env(&[
                    ("OPENAI_BASE_URL", "http://l/v1"),
                    ("MAHTAB_MODEL", "local"),
                ])],
            )
            .unwrap(),
        );
        assert_eq!(
            (choice.format, choice.model.as_str()),
            (WireFormat::OpenAi, "local")
        );
    }

    #[test]
    fn a_provider_in_a_higher_layer_beats_a_key_in_a_lower_one() {
        // The settings file names an OpenAI-compatible server; the
        // environment happens to hold an Anthropic key and an OpenAI key.
        let file = env(&[("OPENAI_BASE_URL", "http://file/v1")]);
        let environment = env(&[
            ("ANTHROPIC_API_KEY", "k"),
            ("OPENAI_API_KEY", "sk-env"),
            ("OPENAI_BASE_URL", "http://env/v1"),
        ]);
        let choice = http(choose(&AskOptions::default(), &[&file, &environment]).unwrap());
        assert_eq!(choice.format, WireFormat::OpenAi);
        assert_eq!(choice.base_url, "http://file/v1");
        // A setting the file leaves out still comes from the environment.
        assert_eq!(format!("{:?}", choice.key), "ApiKey(<set>)");
        // With nothing in the file, the environment decides.
        let choice = http(choose(&AskOptions::default(), &[&env(&[]), &environment]).unwrap());
        assert_eq!(choice.format, WireFormat::Anthropic);
    }

    #[test]
    fn the_claude_cli_is_chosen_by_name() {
        let options = AskOptions {
            provider: Some("claude".into()),
            ..Default::default()
        };
        match choose(&options, &[&env(&[("MAHTAB_CLAUDE_BIN", "/opt/claude")])]).unwrap() {
            Choice::ClaudeCli(cli) => {
                assert_eq!(cli.program, std::path::PathBuf::from("/opt/claude"))
            }
            Choice::Http(other) => panic!("expected the CLI, got {other:?}"),
        }
    }

    #[test]
    fn nothing_configured_explains_how_and_keys_are_never_shown() {
        let err = choose(&AskOptions::default(), &[&env(&[])]).unwrap_err();
        assert!(err.to_string().contains("ANTHROPIC_API_KEY"));
        let choice = choose(
            &AskOptions::default(),
            &[&env(&[("ANTHROPIC_API_KEY", "sk-secret")])],
        )
        .unwrap();
        assert!(!format!("{choice:?}").contains("sk-secret"));
        let bad = AskOptions {
            provider: Some("bard".into()),
            ..Default::default()
        };
        assert!(matches!(
            choose(&bad, &[&env(&[])]),
            Err(ConfigError::UnknownProvider(_))
        ));
        assert!(!local_model_allowed(env(&[("MAHTAB_LOCAL_MODEL", "0")])));
        assert_eq!(local_model_idle(env(&[])), local::DEFAULT_IDLE);
        let idle = |v| local_model_idle(env(&[("MAHTAB_LOCAL_MODEL_IDLE_MINUTES", v)]));
        assert_eq!(idle("0.5"), std::time::Duration::from_secs(30));
        assert_eq!(idle("-1"), local::DEFAULT_IDLE);
        assert_eq!(idle("soon"), local::DEFAULT_IDLE);
        assert!(local_model_allowed(env(&[])));
        assert_eq!(
            local_model_choice(env(&[])).unwrap().map(|m| m.key),
            Some("coder-1.5b")
        );
        assert_eq!(
            local_model_choice(env(&[("MAHTAB_LOCAL_MODEL", "coder-0.5b")]))
                .unwrap()
                .map(|m| m.key),
            Some("coder-0.5b")
        );
        assert_eq!(
            local_model_choice(env(&[("MAHTAB_LOCAL_MODEL", "huge")])),
            Err(ConfigError::UnknownLocalModel("huge".into()))
        );
    }
}
