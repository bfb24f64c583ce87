//! The agent's magics: the `%%ask` line (`%%ask [--model M] [--provider P]
//! [--max-turns N] [--graph NAME] [--informer] [--no-exec] [--confirm] [--new]`) and
//! where its prompt starts, `%ask_config`, which sets this kernel's
//! defaults for those options, and `%ask_graph [NAME]`, which draws a graph.

use std::str::FromStr;

use clap::Parser;
use clap::builder::NonEmptyStringValueParser;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

use crate::agent::failure::AskFailure;
use crate::agent::run::limits::GUARDED_KINDS;
use crate::exception::PythonException;

/// Which agent graph runs a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GraphKind {
    /// generate -> execute -> reflect, until done or out of turns.
    #[default]
    Default,
    /// plan -> code (with retries) -> evaluate -> explain.
    Analyst,
    /// planner -> tool -> planner, one action per step, until it finishes.
    Planner,
    /// pre-plan -> classify -> plan, hands the work on, reviews it.
    Triage,
}

impl GraphKind {
    pub const NAMES: &str = "default, analyst, planner, triage";

    pub fn name(self) -> &'static str {
        match self {
            GraphKind::Default => "default",
            GraphKind::Analyst => "analyst",
            GraphKind::Planner => "planner",
            GraphKind::Triage => "triage",
        }
    }
}

/// When agent code needs the user's approval before it runs (`--approve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Approval {
    /// Before every block (what `--confirm` asks for).
    Always,
    /// Only for what the guard flags (shell, files, network, installs),
    /// unless `--allow` names that kind.
    #[default]
    Risky,
    /// Never: every block runs (`--allow all`).
    Never,
}

impl Approval {
    pub fn name(self) -> &'static str {
        match self {
            Approval::Always => "always",
            Approval::Risky => "risky",
            Approval::Never => "never",
        }
    }
}

impl FromStr for Approval {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        match name.trim() {
            "always" => Ok(Approval::Always),
            "risky" => Ok(Approval::Risky),
            "never" => Ok(Approval::Never),
            other => Err(format!(
                "--approve takes always, risky or never, not {other:?}"
            )),
        }
    }
}

impl FromStr for GraphKind {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "default" => Ok(GraphKind::Default),
            "analyst" => Ok(GraphKind::Analyst),
            "planner" => Ok(GraphKind::Planner),
            "triage" => Ok(GraphKind::Triage),
            other => Err(format!(
                "unknown graph {other:?}; available: {}",
                Self::NAMES
            )),
        }
    }
}

/// The options of a run: the `%%ask` line's flags (also `%ask_config`'s)
/// and `ask()`'s keyword arguments, read into this one type by clap (after
/// shell-style splitting, so values may be quoted) and by serde.
#[derive(Debug, Clone, PartialEq, Eq, Default, Parser, Deserialize)]
#[command(
    no_binary_name = true,
    disable_help_flag = true,
    disable_version_flag = true
)]
#[serde(default, deny_unknown_fields)]
pub struct AskOptions {
    /// The model that answers (the provider's name for it).
    #[arg(long, value_parser = NonEmptyStringValueParser::new())]
    #[serde(deserialize_with = "non_empty")]
    pub model: Option<String>,
    /// Who answers: anthropic, openai (or any server of its format), claude
    /// (the CLI); unset, the first configured, else the local model.
    #[arg(long, value_parser = NonEmptyStringValueParser::new())]
    #[serde(deserialize_with = "non_empty")]
    pub provider: Option<String>,
    /// The model (of the same provider) for the judgements the kernel reads:
    /// reviews, plans, classifications; a cheaper one than `model` will do.
    #[arg(long, value_parser = NonEmptyStringValueParser::new())]
    #[serde(deserialize_with = "non_empty")]
    pub judge_model: Option<String>,
    /// The most turns a run takes (for the analyst graph, its code's
    /// turns; for the triage graph, reviews).
    #[arg(long, value_parser = positive)]
    #[serde(deserialize_with = "positive_number")]
    pub max_turns: Option<u32>,
    /// The agent graph: default, analyst, planner or triage.
    #[arg(long)]
    #[serde(deserialize_with = "parsed")]
    pub graph: Option<GraphKind>,
    /// The planner graph's informer describes the variables first.
    #[arg(long)]
    pub informer: bool,
    /// Show the code the model writes without running it.
    #[arg(long)]
    pub no_exec: bool,
    /// Answer once and run that answer's code once, with no review and no
    /// second turn: the single-shot baseline the evaluation compares with.
    #[arg(long)]
    pub once: bool,
    /// Ask the user before running each code block (`--approve always`).
    #[arg(long)]
    pub confirm: bool,
    /// When agent code asks the user first: always, risky (what the guard
    /// flags; the default) or never.
    #[arg(long)]
    #[serde(deserialize_with = "parsed")]
    pub approve: Option<Approval>,
    /// Start a new conversation (the model forgets the earlier requests).
    #[arg(long = "new")]
    #[serde(rename = "new")]
    pub new_conversation: bool,
    /// End the run with its trace: nodes visited, time per node.
    #[arg(long)]
    pub trace: bool,
    /// Ask the model even when the cell has a record of an earlier run with
    /// the same prompt and options, and record this run in its place.
    #[arg(long)]
    #[serde(skip)]
    pub fresh: bool,
    /// Whether a `%%ask` cell with a record replays it instead of asking
    /// (`%ask_config --replay off`; the settings file's `replay`).
    #[arg(long, value_parser = clap::builder::BoolishValueParser::new())]
    #[serde(skip)]
    pub replay: Option<bool>,
    /// How many seconds one block of agent code may run before it is
    /// stopped and the model told (a loop that never ends does not hold
    /// the cell); unset, [`BLOCK_SECONDS`].
    #[arg(long, value_parser = positive)]
    #[serde(deserialize_with = "positive_number")]
    pub block_seconds: Option<u32>,
    /// What agent code may do without asking, of what the guard flags:
    /// shell, files, network, install (comma-separated), all or none.
    #[arg(long, value_parser = parse_allow)]
    #[serde(deserialize_with = "allowed_kinds")]
    pub allow: Option<::std::vec::Vec<String>>,
    /// The answers' text also goes to the Python scope as it streams (an
    /// `ask()` caller passed `on_token`).
    #[arg(skip)]
    #[serde(rename = "on_token")]
    pub forward_tokens: bool,
}

/// How many seconds a block of agent code runs before it is stopped,
/// unless `--block-seconds` says otherwise: long enough for real work on a
/// notebook's data, short of an evaluation's or a user's patience with a
/// loop that never ends.
pub const BLOCK_SECONDS: u32 = 120;

/// What a block of agent code may do, and for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockRules {
    /// Ask the user before it runs (`--approve always`).
    pub confirm: bool,
    /// What it may do without asking (`--allow`).
    pub allow: Vec<String>,
    /// How many seconds it may run.
    pub seconds: u32,
}

/// The kinds named by `--allow`'s value (`shell,files`, `all`, `none`).
pub fn parse_allow(value: &str) -> Result<Vec<String>, String> {
    match value.trim() {
        "all" => return Ok(GUARDED_KINDS.iter().map(|k| (*k).to_owned()).collect()),
        "none" | "" => return Ok(Vec::new()),
        _ => {}
    }
    let mut kinds = Vec::new();
    for kind in value.split(',').map(str::trim).filter(|k| !k.is_empty()) {
        if !GUARDED_KINDS.contains(&kind) {
            return Err(format!(
                "--allow takes {}, all or none, not {kind:?}",
                GUARDED_KINDS.join(", ")
            ));
        }
        if !kinds.iter().any(|k| k == kind) {
            kinds.push(kind.to_owned());
        }
    }
    Ok(kinds)
}

impl AskOptions {
    /// These options, with what they leave unset taken from `defaults`
    /// (the settings that choose the model and the graph; the per-run
    /// switches are never defaults).
    pub fn or(mut self, defaults: &AskOptions) -> AskOptions {
        self.model = self.model.or_else(|| defaults.model.clone());
        self.provider = self.provider.or_else(|| defaults.provider.clone());
        self.judge_model = self.judge_model.or_else(|| defaults.judge_model.clone());
        self.max_turns = self.max_turns.or(defaults.max_turns);
        self.block_seconds = self.block_seconds.or(defaults.block_seconds);
        self.graph = self.graph.or(defaults.graph);
        self.informer |= defaults.informer;
        self.allow = self.allow.or_else(|| defaults.allow.clone());
        self.approve = self.approve.or(defaults.approve);
        self.replay = self.replay.or(defaults.replay);
        self
    }

    /// What of these options makes a run what it is, as its record keeps
    /// them: the model, the graph and its limits, and the switches that
    /// change what runs (`--no-exec`, `--once`); not how the run is shown,
    /// asked about or replayed.
    pub fn as_recorded(&self) -> AskOptions {
        AskOptions {
            model: self.model.clone(),
            provider: self.provider.clone(),
            judge_model: self.judge_model.clone(),
            max_turns: self.max_turns,
            graph: self.graph,
            informer: self.informer,
            no_exec: self.no_exec,
            once: self.once,
            ..AskOptions::default()
        }
    }

    /// What [`AskOptions::as_recorded`] keeps, as an `%%ask` line's
    /// arguments ([`ask_line_options`] reads them back).
    pub fn recorded_args(&self) -> String {
        let mut words: Vec<String> = Vec::new();
        let mut value = |name: &str, value: Option<String>| {
            if let Some(value) = value {
                words.extend([format!("--{name}"), value]);
            }
        };
        value("model", self.model.clone());
        value("provider", self.provider.clone());
        value("judge-model", self.judge_model.clone());
        value("max-turns", self.max_turns.map(|n| n.to_string()));
        value("graph", self.graph.map(|g| g.name().to_owned()));
        for (on, flag) in [
            (self.informer, "--informer"),
            (self.no_exec, "--no-exec"),
            (self.once, "--once"),
        ] {
            if on {
                words.push(flag.to_owned());
            }
        }
        shlex::try_join(words.iter().map(String::as_str)).unwrap_or_default()
    }

    /// When this run's code asks first: `--confirm` is `always`; unset is
    /// `risky`.
    pub fn approval(&self) -> Approval {
        if self.confirm {
            Approval::Always
        } else {
            self.approve.unwrap_or_default()
        }
    }

    /// What each block of the run's code may do, and for how long.
    pub fn block_rules(&self) -> BlockRules {
        BlockRules {
            confirm: self.approval() == Approval::Always,
            allow: self.allowed_kinds(),
            seconds: self.block_seconds.unwrap_or(BLOCK_SECONDS),
        }
    }

    /// What the run's code may do without asking: every kind the guard
    /// knows with `never`, else what `--allow` names.
    pub fn allowed_kinds(&self) -> Vec<String> {
        match self.approval() {
            Approval::Never => GUARDED_KINDS.iter().map(|k| (*k).to_owned()).collect(),
            Approval::Always | Approval::Risky => self.allow.clone().unwrap_or_default(),
        }
    }
}

impl AskOptions {
    /// Options given as keyword arguments of `ask()` (a JSON object whose
    /// keys are the options' names without dashes: `model`, `provider`,
    /// `max_turns`, `graph`, `informer`, `no_exec`, `confirm`, `new`,
    /// `trace`, `allow`, and `on_token`: whether the caller takes the text
    /// as it streams; null means unset).
    pub fn from_json(value: &serde_json::Value) -> Result<AskOptions, UsageError> {
        let usage = |reason: String| UsageError(reason, ASK_USAGE);
        let fields = match value {
            serde_json::Value::Null => return Ok(AskOptions::default()),
            serde_json::Value::Object(fields) => fields,
            _ => return Err(usage("options must be keyword arguments".into())),
        };
        // None, as Python passes for an argument left out, means unset.
        let given: serde_json::Map<_, _> = fields
            .iter()
            .filter(|(_, value)| !value.is_null())
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        AskOptions::deserialize(serde_json::Value::Object(given))
            .map_err(|e| usage(without_position(&e.to_string())))
    }
}

/// A magic line's options, split as a shell would (so `--model "a b"`
/// is one value).
fn parse_args(args: &str, usage: &'static str) -> Result<AskOptions, UsageError> {
    let words = shlex::split(args).ok_or_else(|| UsageError("unbalanced quotes".into(), usage))?;
    AskOptions::try_parse_from(words).map_err(|e| UsageError(clap_reason(&e), usage))
}

/// The first line of clap's message, without its `error: ` prefix.
fn clap_reason(error: &clap::Error) -> String {
    let text = error.to_string();
    let first = text.lines().next().unwrap_or_default();
    first.trim_start_matches("error: ").to_owned()
}

/// serde's message without the line and column of a JSON text it never had.
fn without_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

/// `--max-turns`' value: a positive whole number.
fn positive(text: &str) -> Result<u32, String> {
    text.parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("takes a positive number, not {text:?}"))
}

fn non_empty<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match String::deserialize(d)? {
        text if text.is_empty() => {
            Err(D::Error::custom("model and provider take a name, not \"\""))
        }
        text => Ok(Some(text)),
    }
}

fn positive_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    match u64::deserialize(d) {
        Ok(n) if n > 0 => u32::try_from(n).map(Some).map_err(D::Error::custom),
        _ => Err(D::Error::custom(
            "max_turns and block_seconds take a positive number",
        )),
    }
}

fn parsed<'de, D: Deserializer<'de>, T: FromStr>(d: D) -> Result<Option<T>, D::Error>
where
    T::Err: std::fmt::Display,
{
    String::deserialize(d)?
        .parse()
        .map(Some)
        .map_err(D::Error::custom)
}

/// `allow=` as a list of kinds or one comma-separated text.
fn allowed_kinds<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Kinds {
        List(Vec<String>),
        Text(String),
    }
    let text = match Kinds::deserialize(d)? {
        Kinds::List(kinds) => kinds.join(","),
        Kinds::Text(text) => text,
    };
    parse_allow(&text).map(Some).map_err(D::Error::custom)
}

/// A cell that goes to the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskCell {
    pub options: AskOptions,
    pub prompt: String,
}

/// The options of an `%%ask` line's arguments (`args` as written).
pub fn ask_line_options(args: &str) -> Result<AskOptions, UsageError> {
    parse_args(args, USAGE)
}

/// A cell the kernel answers itself instead of Python.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentCell {
    Ask(AskCell),
    Configure(ConfigChange),
    /// Draw this graph (`None`: list the graphs).
    ShowGraph(Option<DrawnGraph>),
    /// Put the code the last `%%ask` cell ran into a new cell (`%ask_code`).
    PromoteCode,
}

/// A graph `%ask_graph` can draw: those `--graph` chooses, and the search
/// that `rlm()` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrawnGraph {
    Ask(GraphKind),
    Search,
}

/// The graphs, with what each is for, as `%ask_graph` lists them.
pub const GRAPHS: &[(&str, &str)] = &[
    (
        "default",
        "writes code, runs it, reviews the result; again until done or out of turns",
    ),
    (
        "analyst",
        "plans first, retries failed code, evaluates and explains the result",
    ),
    (
        "planner",
        "thinks, then takes one action per step (code, a tool, or the answer); \
         --informer describes the variables first",
    ),
    (
        "triage",
        "decides who does the work (patterns, a quick classification, a plan), hands it to \
         another graph or a tool, repairs and reviews; plans again until the request is met",
    ),
    (
        "rlm",
        "the search rlm() runs: explores a value with code until FINAL(answer)",
    ),
];

pub const CODE_USAGE: &str =
    "usage: %ask_code\n(puts the code the last %%ask cell ran into a new cell below)";

pub const GRAPH_USAGE: &str =
    "usage: %ask_graph [default|analyst|planner|triage|rlm]\n(with no name: list the graphs)";

/// What an `%ask_config` line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigChange {
    /// Show the settings a `%%ask` cell would use, and where they come from.
    Show,
    /// Set these defaults for the `%%ask` cells of this kernel.
    Set(AskOptions),
    /// Forget the defaults set before.
    Reset,
}

pub const CONFIG_USAGE: &str = "usage: %ask_config [--model MODEL] [--provider anthropic|openai|claude] \
[--judge-model MODEL] [--max-turns N] [--block-seconds N] [--graph default|analyst|planner|triage] [--informer] [--approve always|risky|never] [--allow shell,files,network,install|all|none] [--replay on|off] | --reset\n(with no options: show the settings %%ask uses)";

pub const ASK_USAGE: &str = "usage: ask(prompt, model=None, provider=None, judge_model=None, max_turns=None, \
block_seconds=None, graph=None, informer=False, no_exec=False, once=False, confirm=False, approve=None, new=False, \
allow=None, trace=False, on_token=None, on_code_block=None, on_execution=None)";

pub const USAGE: &str = "usage: %%ask [--model MODEL] [--provider anthropic|openai|claude] \
[--judge-model MODEL] [--max-turns N] [--block-seconds N] [--graph default|analyst|planner|triage] [--informer] [--no-exec] [--once] [--approve always|risky|never] [--confirm] [--new] [--allow KINDS] [--trace] [--fresh]\n<your request on the following lines>";

/// Why a magic line could not be read: the reason, how to use it, and the
/// book's page with every option.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}\n{1}\n{MAGICS_PAGE}")]
pub struct UsageError(pub String, pub &'static str);

/// Where a usage error sends the user for every option.
pub const MAGICS_PAGE: &str = "every option: docs/src/magics-reference.md in mahtab's repository";

impl From<UsageError> for PythonException {
    fn from(error: UsageError) -> Self {
        AskFailure::Usage.because(error.to_string())
    }
}

/// The agent cell in `code`, if it is one: a `%%ask` cell (IPython's rule:
/// the first line, after leading blank lines, starts with the cell magic) or
/// an `%ask_config` line alone in its cell.
pub fn parse_cell(code: &str) -> Option<Result<AgentCell, UsageError>> {
    let code = code.trim_start_matches(['\n', '\r']);
    let (first, rest) = code.split_once('\n').unwrap_or((code, ""));
    let first = first.trim_end();
    if let Some(args) = magic_args(first, "%%ask") {
        return Some(parse_args(args, USAGE).map(|options| {
            AgentCell::Ask(AskCell {
                options,
                prompt: rest.trim().to_owned(),
            })
        }));
    }
    if let Some(args) = magic_args(first, "%ask_graph") {
        return Some(parse_graph(args, rest));
    }
    if let Some(args) = magic_args(first, "%ask_code") {
        if !args.trim().is_empty() || !rest.trim().is_empty() {
            return Some(Err(UsageError(
                "%ask_code takes no options and goes in a cell of its own".into(),
                CODE_USAGE,
            )));
        }
        return Some(Ok(AgentCell::PromoteCode));
    }
    let args = magic_args(first, "%ask_config")?;
    if !rest.trim().is_empty() {
        return Some(Err(UsageError(
            "%ask_config goes in a cell of its own".into(),
            CONFIG_USAGE,
        )));
    }
    Some(parse_config(args).map(AgentCell::Configure))
}

/// What follows `magic` on `line`, if the line calls that magic (and not
/// one whose name merely starts the same, like `%%asking`).
fn magic_args<'a>(line: &'a str, magic: &str) -> Option<&'a str> {
    let args = line.strip_prefix(magic)?;
    (args.is_empty() || args.starts_with(char::is_whitespace)).then_some(args)
}

fn parse_graph(args: &str, rest: &str) -> Result<AgentCell, UsageError> {
    let usage = |reason: String| UsageError(reason, GRAPH_USAGE);
    if !rest.trim().is_empty() {
        return Err(usage("%ask_graph goes in a cell of its own".into()));
    }
    match args.split_whitespace().collect::<Vec<_>>().as_slice() {
        [] => Ok(AgentCell::ShowGraph(None)),
        ["rlm"] => Ok(AgentCell::ShowGraph(Some(DrawnGraph::Search))),
        [name] => match name.parse::<GraphKind>() {
            Ok(kind) => Ok(AgentCell::ShowGraph(Some(DrawnGraph::Ask(kind)))),
            Err(_) => Err(usage(format!("unknown graph {name:?}"))),
        },
        _ => Err(usage("one graph at a time".into())),
    }
}

fn parse_config(args: &str) -> Result<ConfigChange, UsageError> {
    let usage = |reason: String| UsageError(reason, CONFIG_USAGE);
    match args.split_whitespace().collect::<Vec<_>>().as_slice() {
        [] => return Ok(ConfigChange::Show),
        ["--reset"] => return Ok(ConfigChange::Reset),
        _ => {}
    }
    let options = parse_args(args, CONFIG_USAGE)?;
    let switches = AskOptions {
        no_exec: options.no_exec,
        once: options.once,
        confirm: options.confirm,
        new_conversation: options.new_conversation,
        trace: options.trace,
        fresh: options.fresh,
        ..AskOptions::default()
    };
    if switches != AskOptions::default() {
        return Err(usage(
            "--no-exec, --once, --confirm, --new, --trace and --fresh apply to one %%ask cell, not \
             as defaults"
                .into(),
        ));
    }
    Ok(ConfigChange::Set(options))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(code: &str) -> AskCell {
        match parse_cell(code).unwrap().unwrap() {
            AgentCell::Ask(cell) => cell,
            other => panic!("not an %%ask cell: {other:?}"),
        }
    }

    fn config(code: &str) -> Result<ConfigChange, UsageError> {
        match parse_cell(code).unwrap()? {
            AgentCell::Configure(change) => Ok(change),
            other => panic!("not an %ask_config cell: {other:?}"),
        }
    }

    #[test]
    fn recognises_ask_cells_only() {
        assert!(parse_cell("print(1)").is_none());
        assert!(parse_cell("%%asking\nx").is_none());
        assert!(parse_cell("# %%ask\nx").is_none());
        assert!(parse_cell("%ask_configure").is_none());
        let cell = ask("\n%%ask\nplot the data\n");
        assert_eq!(cell.prompt, "plot the data");
        assert_eq!(cell.options, AskOptions::default());
    }

    #[test]
    fn reads_every_option() {
        let cell = ask(
            "%%ask --model m1 --provider=openai --judge-model j1 --max-turns 3 --graph analyst --no-exec --confirm --new\nq",
        );
        let o = cell.options;
        assert_eq!(o.model.as_deref(), Some("m1"));
        assert_eq!(o.judge_model.as_deref(), Some("j1"));
        assert_eq!(o.provider.as_deref(), Some("openai"));
        assert_eq!(o.max_turns, Some(3));
        assert_eq!(o.graph, Some(GraphKind::Analyst));
        assert!(o.no_exec && o.confirm && o.new_conversation);
    }

    #[test]
    fn values_may_be_quoted_as_in_a_shell() {
        let cell =
            ask("%%ask --model \"qwen coder 7b\" --provider='openai' --allow shell,files\nq");
        assert_eq!(cell.options.model.as_deref(), Some("qwen coder 7b"));
        assert_eq!(cell.options.provider.as_deref(), Some("openai"));
        assert_eq!(
            cell.options.allow,
            Some(vec!["shell".to_owned(), "files".to_owned()])
        );
        let err = parse_cell("%%ask --model 'qwen\nq").unwrap().unwrap_err();
        assert!(
            err.to_string()
                .starts_with("unbalanced quotes\nusage: %%ask"),
            "{err}"
        );
        let err = parse_cell("%ask_config --model \"a").unwrap().unwrap_err();
        assert!(err.to_string().contains("usage: %ask_config"), "{err}");
    }

    #[test]
    fn errors_name_the_option_and_what_it_takes() {
        let reason = |line: &str| parse_cell(line).unwrap().unwrap_err().0;
        assert!(reason("%%ask --bogus").contains("'--bogus'"));
        assert!(reason("%%ask --max-turns 0").contains("takes a positive number"));
        assert!(reason("%%ask --graph fancy").contains("available: default, analyst"));
        assert!(reason("%%ask --model=").contains("'--model <MODEL>'"));
        let reason = |value: serde_json::Value| AskOptions::from_json(&value).unwrap_err().0;
        assert!(reason(serde_json::json!({ "bogus": 1 })).contains("unknown field `bogus`"));
        assert!(reason(serde_json::json!({ "model": "" })).contains("take a name"));
        assert!(reason(serde_json::json!({ "allow": ["shell", "root"] })).contains("\"root\""));
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
            assert!(err.to_string().ends_with(MAGICS_PAGE), "{line}: {err}");
        }
    }

    #[test]
    fn trace_is_a_switch_of_one_cell_and_of_ask() {
        let Some(Ok(AgentCell::Ask(cell))) = parse_cell("%%ask --trace\nq") else {
            panic!("an %%ask cell");
        };
        assert!(cell.options.trace);
        let options = AskOptions::from_json(&serde_json::json!({ "trace": true })).unwrap();
        assert!(options.trace);
        let err = parse_cell("%ask_config --trace").unwrap().unwrap_err();
        assert!(
            err.to_string()
                .contains("--trace and --fresh apply to one %%ask cell"),
            "{err}"
        );
    }

    #[test]
    fn fresh_is_a_switch_of_one_cell_and_replay_a_default() {
        let cell =
            ask("%%ask --graph analyst --fresh --trace --model 'a b' --max-turns 3 --once\nq");
        assert!(cell.options.fresh);
        let recorded = cell.options.as_recorded();
        assert_eq!(
            recorded.recorded_args(),
            "--model 'a b' --max-turns 3 --graph analyst --once"
        );
        let again = ask_line_options(&recorded.recorded_args()).unwrap();
        assert_eq!(again, recorded);
        assert_ne!(again, cell.options);
        assert!(parse_cell("%ask_config --fresh").unwrap().is_err());
        let Some(Ok(AgentCell::Configure(ConfigChange::Set(set)))) =
            parse_cell("%ask_config --replay off")
        else {
            panic!("a setting");
        };
        assert_eq!(set.replay, Some(false));
        assert!(AskOptions::from_json(&serde_json::json!({ "fresh": true })).is_err());
    }

    #[test]
    fn ask_graph_names_one_graph_or_lists_them() {
        let graph = |code: &str| parse_cell(code).expect("an agent cell");
        assert_eq!(graph("%ask_graph"), Ok(AgentCell::ShowGraph(None)));
        assert_eq!(
            graph("%ask_graph analyst\n"),
            Ok(AgentCell::ShowGraph(Some(DrawnGraph::Ask(
                GraphKind::Analyst
            ))))
        );
        assert_eq!(
            graph("%ask_graph rlm"),
            Ok(AgentCell::ShowGraph(Some(DrawnGraph::Search)))
        );
        for wrong in [
            "%ask_graph nope",
            "%ask_graph default analyst",
            "%ask_graph\nprint(1)",
        ] {
            let err = graph(wrong).unwrap_err();
            assert!(
                err.to_string().contains("usage: %ask_graph"),
                "{wrong}: {err}"
            );
        }
        assert!(parse_cell("%ask_graphs").is_none());
    }

    #[test]
    fn ask_config_shows_sets_and_resets_defaults() {
        assert_eq!(config("%ask_config"), Ok(ConfigChange::Show));
        assert_eq!(config("%ask_config --reset\n\n"), Ok(ConfigChange::Reset));
        let Ok(ConfigChange::Set(set)) = config("%ask_config --model m --graph analyst") else {
            panic!("expected settings");
        };
        assert_eq!(set.model.as_deref(), Some("m"));
        assert_eq!(set.graph, Some(GraphKind::Analyst));
        for bad in [
            "%ask_config --new",
            "%ask_config --reset --model m",
            "%ask_config --graph x",
            "%ask_config\nprint(1)",
        ] {
            let err = config(bad).unwrap_err();
            assert!(
                err.to_string().contains("usage: %ask_config"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn ask_keyword_arguments_become_options() {
        let options = AskOptions::from_json(&serde_json::json!({
            "model": "m", "graph": "analyst", "max_turns": 2, "no_exec": true,
            "new": true, "provider": null,
        }))
        .unwrap();
        assert_eq!(options.model.as_deref(), Some("m"));
        assert_eq!(options.graph, Some(GraphKind::Analyst));
        assert_eq!(options.max_turns, Some(2));
        assert!(options.no_exec && options.new_conversation && !options.confirm);
        assert_eq!(options.provider, None);
        for bad in [
            serde_json::json!({ "max_turns": 0 }),
            serde_json::json!({ "max_turns": "3" }),
            serde_json::json!({ "graph": "fancy" }),
            serde_json::json!({ "bogus": 1 }),
            serde_json::json!({ "no_exec": "yes" }),
            serde_json::json!([1]),
        ] {
            let err = AskOptions::from_json(&bad).unwrap_err();
            assert!(err.to_string().contains("usage: ask("), "{bad}: {err}");
        }
    }

    #[test]
    fn block_seconds_limits_each_block_and_has_a_default() {
        assert_eq!(ask("%%ask\nq").options.block_rules().seconds, BLOCK_SECONDS);
        let cell = ask("%%ask --block-seconds 30 --approve always\nq");
        let rules = cell.options.block_rules();
        assert_eq!((rules.seconds, rules.confirm), (30, true));
        let Ok(ConfigChange::Set(set)) = config("%ask_config --block-seconds 600") else {
            panic!("expected settings");
        };
        let unset = ask("%%ask\nq").options.or(&set);
        assert_eq!(unset.block_rules().seconds, 600);
        let given = ask("%%ask --block-seconds 5\nq").options.or(&set);
        assert_eq!(given.block_rules().seconds, 5);
        for bad in ["0", "-1", "soon"] {
            assert!(
                parse_cell(&format!("%%ask --block-seconds {bad}\nq"))
                    .unwrap()
                    .is_err()
            );
        }
        let options = AskOptions::from_json(&serde_json::json!({"block_seconds": 9})).unwrap();
        assert_eq!(options.block_seconds, Some(9));
        assert!(AskOptions::from_json(&serde_json::json!({"block_seconds": 0})).is_err());
    }

    #[test]
    fn allow_names_kinds_of_action() {
        assert_eq!(
            parse_allow("shell, network,shell"),
            Ok(vec!["shell".into(), "network".into()])
        );
        assert_eq!(parse_allow("all").unwrap().len(), 4);
        assert_eq!(parse_allow("none"), Ok(Vec::new()));
        assert!(parse_allow("shell,root").unwrap_err().contains("\"root\""));
        let Ok(ConfigChange::Set(set)) = config("%ask_config --allow files") else {
            panic!("expected settings");
        };
        assert_eq!(set.allow, Some(vec!["files".to_owned()]));
        assert!(parse_cell("%%ask --allow everything\nq").unwrap().is_err());
    }

    #[test]
    fn approve_says_when_code_asks_first_and_confirm_is_always() {
        let cell = ask("%%ask --approve never\nq");
        assert_eq!(cell.options.approval(), Approval::Never);
        assert_eq!(cell.options.allowed_kinds().len(), GUARDED_KINDS.len());
        let cell = ask("%%ask --allow shell\nq");
        assert_eq!(cell.options.approval(), Approval::Risky);
        assert_eq!(cell.options.allowed_kinds(), ["shell"]);
        // --confirm is --approve always, whatever a default says.
        let defaults = AskOptions {
            approve: Some(Approval::Never),
            ..AskOptions::default()
        };
        let cell = ask("%%ask --confirm\nq");
        assert_eq!(cell.options.or(&defaults).approval(), Approval::Always);
        assert_eq!(
            ask("%%ask\nq").options.or(&defaults).approval(),
            Approval::Never
        );
        let Ok(ConfigChange::Set(set)) = config("%ask_config --approve always") else {
            panic!("expected settings");
        };
        assert_eq!(set.approve, Some(Approval::Always));
        let err = parse_cell("%%ask --approve sometimes\nq")
            .unwrap()
            .unwrap_err();
        assert!(err.to_string().contains("always, risky or never"), "{err}");
        let from_ask = AskOptions::from_json(&serde_json::json!({"approve": "risky"})).unwrap();
        assert_eq!(from_ask.approve, Some(Approval::Risky));
        assert!(AskOptions::from_json(&serde_json::json!({"approve": "yes"})).is_err());
    }

    #[test]
    fn options_fall_back_to_defaults_field_by_field() {
        let defaults = AskOptions {
            model: Some("d".into()),
            max_turns: Some(2),
            no_exec: true,
            ..AskOptions::default()
        };
        let cell = AskOptions {
            model: Some("c".into()),
            ..AskOptions::default()
        };
        let merged = cell.or(&defaults);
        assert_eq!(merged.model.as_deref(), Some("c"));
        assert_eq!(merged.max_turns, Some(2));
        assert!(!merged.no_exec);
    }
}
