//! The `%%ask` magic line: `%%ask [--model M] [--provider P] [--max-turns N]
//! [--graph NAME] [--no-exec] [--confirm] [--new]`, and where the cell's prompt starts.

/// Which agent graph runs a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GraphKind {
    /// generate -> execute -> reflect, until done or out of turns.
    #[default]
    Default,
    /// plan -> code (with retries) -> evaluate -> explain.
    Analyst,
}

impl GraphKind {
    pub const NAMES: &str = "default, analyst";

    pub fn name(self) -> &'static str {
        match self {
            GraphKind::Default => "default",
            GraphKind::Analyst => "analyst",
        }
    }
}

impl std::str::FromStr for GraphKind {
    type Err = UsageError;

    fn from_str(name: &str) -> Result<Self, UsageError> {
        match name {
            "default" => Ok(GraphKind::Default),
            "analyst" => Ok(GraphKind::Analyst),
            other => Err(UsageError(format!(
                "unknown graph {other:?}; available: {}",
                Self::NAMES
            ))),
        }
    }
}

/// What the magic line asked for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AskOptions {
    pub model: Option<String>,
    pub provider: Option<String>,
    pub max_turns: Option<u32>,
    pub graph: Option<GraphKind>,
    pub no_exec: bool,
    /// Ask the user before running each code block.
    pub confirm: bool,
    pub new_conversation: bool,
}

/// A cell that goes to the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskCell {
    pub options: AskOptions,
    pub prompt: String,
}

pub const USAGE: &str = "usage: %%ask [--model MODEL] [--provider anthropic|openai|claude] \
[--max-turns N] [--graph default|analyst] [--no-exec] [--confirm] [--new]\n<your request on the following lines>";

/// Why a magic line could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}\n{USAGE}")]
pub struct UsageError(pub String);

/// The `%%ask` cell in `code`, if it is one (IPython's rule: the first line,
/// after leading blank lines, starts with the cell magic).
pub fn parse_cell(code: &str) -> Option<Result<AskCell, UsageError>> {
    let code = code.trim_start_matches(['\n', '\r']);
    let (first, rest) = code.split_once('\n').unwrap_or((code, ""));
    let args = first.trim_end().strip_prefix("%%ask")?;
    if !(args.is_empty() || args.starts_with(char::is_whitespace)) {
        return None; // `%%asking` is some other magic
    }
    Some(parse_options(args).map(|options| AskCell {
        options,
        prompt: rest.trim().to_owned(),
    }))
}

fn parse_options(args: &str) -> Result<AskOptions, UsageError> {
    let mut options = AskOptions::default();
    let mut words = args.split_whitespace();
    while let Some(word) = words.next() {
        let (flag, inline) = match word.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_owned())),
            None => (word, None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| words.next().map(str::to_owned))
                .filter(|v| !v.is_empty())
                .ok_or_else(|| UsageError(format!("{name} needs a value")))
        };
        match flag {
            "--model" => options.model = Some(value("--model")?),
            "--provider" => options.provider = Some(value("--provider")?),
            "--graph" => options.graph = Some(value("--graph")?.parse()?),
            "--max-turns" => {
                let text = value("--max-turns")?;
                let turns: u32 = text.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                    UsageError(format!("--max-turns takes a positive number, not {text:?}"))
                })?;
                options.max_turns = Some(turns);
            }
            "--no-exec" => options.no_exec = true,
            "--confirm" => options.confirm = true,
            "--new" => options.new_conversation = true,
            other => return Err(UsageError(format!("unknown option {other:?}"))),
        }
    }
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_ask_cells_only() {
        assert!(parse_cell("print(1)").is_none());
        assert!(parse_cell("%%asking\nx").is_none());
        assert!(parse_cell("# %%ask\nx").is_none());
        let cell = parse_cell("\n%%ask\nplot the data\n").unwrap().unwrap();
        assert_eq!(cell.prompt, "plot the data");
        assert_eq!(cell.options, AskOptions::default());
    }

    #[test]
    fn reads_every_option() {
        let cell = parse_cell(
            "%%ask --model m1 --provider=openai --max-turns 3 --graph analyst --no-exec --confirm --new\nq",
        )
        .unwrap()
        .unwrap();
        let o = cell.options;
        assert_eq!(o.model.as_deref(), Some("m1"));
        assert_eq!(o.provider.as_deref(), Some("openai"));
        assert_eq!(o.max_turns, Some(3));
        assert_eq!(o.graph, Some(GraphKind::Analyst));
        assert!(o.no_exec && o.confirm && o.new_conversation);
    }

    #[test]
    fn bad_options_are_usage_errors() {
        for line in [
            "%%ask --bogus",
            "%%ask --max-turns",
            "%%ask --max-turns zero",
            "%%ask --max-turns 0",
            "%%ask --model",
            "%%ask --graph fancy",
        ] {
            let err = parse_cell(line).unwrap().unwrap_err();
            assert!(err.to_string().contains("usage: %%ask"), "{line}: {err}");
        }
    }
}
