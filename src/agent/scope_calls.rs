//! The calls a run makes into the Python scope it works in (the methods of
//! the runtime's agent scope), each a request type with its reply type. The
//! edge between the two languages is written once, here: a call serializes
//! to the method's arguments and its reply deserializes from what the method
//! returns, so nothing reads JSON by hand or names a method twice.

use std::collections::BTreeMap;

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};

use super::ports::{LiveText, Ports};
use super::run::{
    Agreement, CandidateOutcome, Context, KeyInformation, Repair, RunChanges, Targets,
    WrittenResult,
};
use crate::exception::PythonException;

/// A call into the agent scope: its arguments, the method that serves it,
/// and what that method returns.
pub trait ScopeCall: Serialize + Sync {
    const METHOD: &'static str;
    type Reply: DeserializeOwned;
}

/// Makes `call` through `ports`.
pub async fn call<P: Ports, C: ScopeCall>(
    ports: &P,
    call: &C,
) -> Result<C::Reply, PythonException> {
    let reply = ports.python(C::METHOD, arguments(call)?).await?;
    read_reply::<C>(reply)
}

/// Like [`call`], for code that writes text as it runs: that text goes to
/// `output` as it is written.
pub async fn call_with_output<P: Ports, C: ScopeCall>(
    ports: &P,
    call: &C,
    output: LiveText,
) -> Result<C::Reply, PythonException> {
    let reply = ports
        .python_with_output(C::METHOD, arguments(call)?, output)
        .await?;
    read_reply::<C>(reply)
}

fn arguments<C: ScopeCall>(call: &C) -> Result<serde_json::Value, PythonException> {
    serde_json::to_value(call).map_err(|e| PythonException::bad_reply(C::METHOD, &e))
}

fn read_reply<C: ScopeCall>(reply: serde_json::Value) -> Result<C::Reply, PythonException> {
    serde_json::from_value(reply).map_err(|e| PythonException::bad_reply(C::METHOD, &e))
}

/// Runs agent code in the user's namespace.
#[derive(Debug, Serialize)]
pub struct RunCode<'a> {
    pub code: &'a str,
    /// Ask the user before it runs.
    pub confirm: bool,
    /// What it may do without asking.
    pub allow: &'a [String],
    /// How many seconds it may run before it is stopped.
    pub seconds: u32,
}

/// What running agent code gave.
#[derive(Debug, Deserialize)]
pub struct CodeRun {
    /// For the model: stdout, stderr, the last value, a traceback, and the
    /// text form of each rich output.
    pub output: String,
    /// For the output panel: the same without the rich output's text.
    pub shown: String,
    /// How many rich outputs reached the user.
    pub rich_outputs: usize,
    /// The figures among them, as downscaled base64 PNGs.
    #[serde(default)]
    pub images: Vec<String>,
    pub failed: bool,
    /// The code called `FINAL(answer)`.
    #[serde(default)]
    pub finished: bool,
    /// What it did to the namespace, a line per name.
    #[serde(default)]
    pub changes: Vec<String>,
    /// The guard stopped it before it ran (the user said no, or no one
    /// could be asked).
    #[serde(default)]
    pub refused: bool,
}

impl ScopeCall for RunCode<'_> {
    const METHOD: &'static str = "run_code";
    type Reply = CodeRun;
}

/// A piece of a shown answer, for an `ask()` caller's `on_token`.
#[derive(Debug, Serialize)]
pub struct Token<'a> {
    pub text: &'a str,
}

impl ScopeCall for Token<'_> {
    const METHOD: &'static str = "token";
    type Reply = IgnoredAny;
}

/// A line the user answers (through the kernel's stdin channel).
#[derive(Debug, Serialize)]
pub struct Input<'a> {
    pub prompt: &'a str,
    pub password: bool,
}

#[derive(Debug, Deserialize)]
pub struct Typed {
    pub value: String,
}

impl ScopeCall for Input<'_> {
    const METHOD: &'static str = "input";
    type Reply = Typed;
}

/// A summary of the user's variables for the prompt.
#[derive(Debug, Serialize)]
pub struct NamespaceSummary {}

#[derive(Debug, Deserialize)]
pub struct Summary {
    pub summary: String,
}

impl ScopeCall for NamespaceSummary {
    const METHOD: &'static str = "namespace_summary";
    type Reply = Summary;
}

/// Variables described in detail: those in `names`, or with none, those
/// `request` mentions.
#[derive(Debug, Serialize)]
pub struct Describe<'a> {
    pub request: &'a str,
    pub names: &'a [String],
}

#[derive(Debug, Deserialize)]
pub struct Described {
    pub described: Vec<KeyInformation>,
}

impl ScopeCall for Describe<'_> {
    const METHOD: &'static str = "describe";
    type Reply = Described;
}

/// Each of `names` beside the result `request` writes out, where it writes
/// one out for the data `codes` (the run's code so far) read.
#[derive(Debug, Serialize)]
pub struct CompareWritten<'a> {
    pub request: &'a str,
    pub names: &'a [String],
    pub codes: &'a [&'a str],
}

#[derive(Debug, Deserialize)]
pub struct Compared {
    pub results: Vec<WrittenResult>,
}

impl ScopeCall for CompareWritten<'_> {
    const METHOD: &'static str = "written_results";
    type Reply = Compared;
}

/// Which of the variables and files a request names do not exist: the
/// reply is those of `names` and `files` that are missing.
#[derive(Debug, Serialize)]
pub struct Missing<'a> {
    pub names: &'a [String],
    pub files: &'a [String],
}

impl ScopeCall for Missing<'_> {
    const METHOD: &'static str = "missing";
    type Reply = Targets;
}

/// Puts back the objects the run's code rebound `names` away from (the
/// first binding each had in the run), with `if_changed` only those whose
/// name now holds other data; the reply names those put back.
#[derive(Debug, Serialize)]
pub struct Restore<'a> {
    pub names: &'a [String],
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub if_changed: bool,
}

/// The names [`Restore`] put back.
#[derive(Debug, Default, Deserialize)]
pub struct Restored {
    pub names: Vec<String>,
}

impl ScopeCall for Restore<'_> {
    const METHOD: &'static str = "restore";
    type Reply = Restored;
}

/// Runs each of `codes` (other solutions of the request) on a scratch
/// copy of the namespace, and keeps what each computed until
/// [`CompareCandidates`].
#[derive(Debug, Serialize)]
pub struct TryCandidates<'a> {
    pub codes: &'a [String],
    /// The code the run's own values come from.
    pub own: &'a str,
    /// Copies of the namespace as it was before the run (the run's code
    /// has run), not as it is (the turn's code is about to run).
    pub before_run: bool,
}

/// How trying each candidate went.
#[derive(Debug, Default, Deserialize)]
pub struct CandidatesTried {
    pub outcomes: Vec<CandidateOutcome>,
}

impl ScopeCall for TryCandidates<'_> {
    const METHOD: &'static str = "try_candidates";
    type Reply = CandidatesTried;
}

/// How the turn's own solution (the namespace as its code left it) and the
/// candidates tried compare on `names`; the candidates are let go.
#[derive(Debug, Serialize)]
pub struct CompareCandidates<'a> {
    pub names: &'a [String],
}

impl ScopeCall for CompareCandidates<'_> {
    const METHOD: &'static str = "compare_candidates";
    type Reply = Agreement;
}

/// What the run changed, for its "changed" panel; from this call on the
/// run can be undone (`%ask_undo`).
#[derive(Debug, Serialize)]
pub struct Changes {}

impl ScopeCall for Changes {
    const METHOD: &'static str = "changes";
    type Reply = RunChanges;
}

/// The user's variables and last error, for the triage's pre-plan.
#[derive(Debug, Serialize)]
pub struct TriageContext {}

impl ScopeCall for TriageContext {
    const METHOD: &'static str = "triage_context";
    type Reply = Context;
}

/// A fix for failed code made without the model, where one applies.
#[derive(Debug, Serialize)]
pub struct FindRepair<'a> {
    pub code: &'a str,
    pub error: &'a str,
}

#[derive(Debug, Deserialize)]
pub struct Repaired {
    pub repair: Option<Repair>,
}

impl ScopeCall for FindRepair<'_> {
    const METHOD: &'static str = "repair";
    type Reply = Repaired;
}

/// The cells the user ran since the last request.
#[derive(Debug, Serialize)]
pub struct RecentCells {}

#[derive(Debug, Deserialize)]
pub struct Cells {
    pub cells: Vec<String>,
}

impl ScopeCall for RecentCells {
    const METHOD: &'static str = "recent_cells";
    type Reply = Cells;
}

/// The skills installed for the model, and the text of those `request`
/// names.
#[derive(Debug, Serialize)]
pub struct Skills<'a> {
    pub request: &'a str,
}

#[derive(Debug, Deserialize)]
pub struct SkillList {
    /// Name and description, in name order.
    pub skills: BTreeMap<String, String>,
    /// Name and instructions of each skill the request names.
    #[serde(default)]
    pub named: Vec<(String, String)>,
}

impl ScopeCall for Skills<'_> {
    const METHOD: &'static str = "skills";
    type Reply = SkillList;
}

/// The prompt with `{name}` replaced by that variable's value.
#[derive(Debug, Serialize)]
pub struct Interpolate<'a> {
    pub prompt: &'a str,
}

#[derive(Debug, Deserialize)]
pub struct Interpolated {
    pub prompt: String,
}

impl ScopeCall for Interpolate<'_> {
    const METHOD: &'static str = "interpolate";
    type Reply = Interpolated;
}

/// Where this notebook's conversation is kept.
#[derive(Debug, Serialize)]
pub struct MemoryLocation {}

#[derive(Debug, Deserialize)]
pub struct Location {
    pub dir: String,
    pub key: String,
}

impl ScopeCall for MemoryLocation {
    const METHOD: &'static str = "memory";
    type Reply = Location;
}

/// Which notebook runs, for its `%%ask` record.
#[derive(Debug, Serialize)]
pub struct NotebookLocation {}

#[derive(Debug, Deserialize)]
pub struct Notebook {
    /// The notebook's path, when the client says which (absolute, or a
    /// name in `working_dir`).
    pub notebook: Option<String>,
    pub working_dir: String,
}

impl ScopeCall for NotebookLocation {
    const METHOD: &'static str = "notebook";
    type Reply = Notebook;
}

/// Whether the kernel's environment can serve the local model `file` (from
/// `package`, when one ships it), and where it looked.
#[derive(Debug, Serialize)]
pub struct FindLocalModel<'a> {
    pub file: &'a str,
    pub package: Option<&'a str>,
}

#[derive(Debug, Deserialize)]
pub struct LocalModelFound {
    /// The environment's Python, which runs the server.
    pub python: String,
    /// The llama.cpp server package is installed.
    pub server: bool,
    /// The model file, if found.
    pub model: Option<String>,
    /// The folders looked in.
    #[serde(default)]
    pub searched: Vec<String>,
    /// The environment has mahtab's wheel, whose `local` extra brings both.
    #[serde(default)]
    pub from_wheel: bool,
}

impl ScopeCall for FindLocalModel<'_> {
    const METHOD: &'static str = "local_model";
    type Reply = LocalModelFound;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::run::AsWritten;
    use serde_json::{Value, json};

    const AGENT_SCOPE: &str = include_str!("../python/mahtab/agent/scope.py");

    /// Every call a run makes, as its method and the arguments it sends.
    fn every_call() -> Vec<(&'static str, Value)> {
        fn sent<C: ScopeCall>(call: C) -> (&'static str, Value) {
            (C::METHOD, serde_json::to_value(&call).unwrap())
        }
        let some = ["x".to_owned()];
        vec![
            sent(RunCode {
                code: "",
                confirm: false,
                allow: &some,
                seconds: 1,
            }),
            sent(Token { text: "" }),
            sent(Input {
                prompt: "",
                password: false,
            }),
            sent(NamespaceSummary {}),
            sent(Describe {
                request: "",
                names: &some,
            }),
            sent(Missing {
                names: &some,
                files: &some,
            }),
            sent(CompareWritten {
                request: "",
                names: &some,
                codes: &[""],
            }),
            sent(Restore {
                names: &some,
                if_changed: true,
            }),
            sent(TryCandidates {
                codes: &some,
                own: "",
                before_run: true,
            }),
            sent(CompareCandidates { names: &some }),
            sent(Changes {}),
            sent(TriageContext {}),
            sent(FindRepair {
                code: "",
                error: "",
            }),
            sent(RecentCells {}),
            sent(Skills { request: "" }),
            sent(Interpolate { prompt: "" }),
            sent(MemoryLocation {}),
            sent(NotebookLocation {}),
            sent(FindLocalModel {
                file: "",
                package: None,
            }),
        ]
    }

    /// The methods of the Python scope that take a call's arguments, each
    /// with its body.
    fn python_methods() -> Vec<(String, String)> {
        let class = &AGENT_SCOPE[AGENT_SCOPE.find("\nclass AgentScope").unwrap()..];
        let class = &class[..class[1..]
            .find("\nclass ")
            .map_or(class.len(), |end| end + 1)];
        class
            .split("\n    def ")
            .skip(1)
            .filter_map(|method| {
                let (name, rest) = method.split_once('(')?;
                let takes_args = rest.starts_with("self, args");
                takes_args.then(|| (name.to_owned(), rest.to_owned()))
            })
            .collect()
    }

    #[test]
    fn every_call_is_a_python_method_that_reads_the_arguments_sent() {
        let methods = python_methods();
        for (method, arguments) in every_call() {
            let Some((_, body)) = methods.iter().find(|(name, _)| name == method) else {
                panic!("AgentScope has no method {method}(self, args)");
            };
            for key in arguments.as_object().unwrap().keys() {
                assert!(
                    body.contains(&format!("\"{key}\"")),
                    "AgentScope.{method} does not read {key:?}, which the run sends"
                );
            }
        }
        // And no method the run never calls.
        let called: Vec<&str> = every_call().iter().map(|(method, _)| *method).collect();
        for (name, _) in &methods {
            assert!(
                called.contains(&name.as_str()),
                "no call of AgentScope.{name}"
            );
        }
    }

    #[test]
    fn calls_are_the_arguments_their_methods_read() {
        let allow = vec!["shell".to_owned()];
        let run = RunCode {
            code: "x = 1",
            confirm: true,
            allow: &allow,
            seconds: 120,
        };
        assert_eq!(
            serde_json::to_value(&run).unwrap(),
            json!({ "code": "x = 1", "confirm": true, "allow": ["shell"], "seconds": 120 })
        );
        assert_eq!(
            serde_json::to_value(NamespaceSummary {}).unwrap(),
            json!({})
        );
        let find = FindLocalModel {
            file: "m.gguf",
            package: None,
        };
        assert_eq!(
            serde_json::to_value(&find).unwrap(),
            json!({ "file": "m.gguf", "package": null })
        );
    }

    #[test]
    fn replies_are_read_whole_or_not_at_all() {
        let run: CodeRun = serde_json::from_value(json!({
            "output": "1\n", "shown": "1\n", "rich_outputs": 0, "failed": false,
        }))
        .unwrap();
        assert!(!run.finished && run.changes.is_empty());
        assert!(read_reply::<NamespaceSummary>(json!({ "summary": 3 })).is_err());
        let missing = read_reply::<Missing>(json!({ "names": ["n"], "files": [] })).unwrap();
        assert_eq!(missing.names, ["n"]);
        let compared = read_reply::<CompareWritten>(json!({ "results": [
            { "verdict": "matches", "name": "a", "on_example": true },
            { "verdict": "matches", "name": "b" },
            { "verdict": "differs", "name": "c", "written": "[1]", "value": "[2]" },
        ] }))
        .unwrap();
        let found = |name: &str, on_example| {
            WrittenResult::Matches(AsWritten {
                name: name.into(),
                on_example,
            })
        };
        assert_eq!(compared.results[..2], [found("a", true), found("b", false)]);
        assert!(
            matches!(&compared.results[2], WrittenResult::Differs(found) if found.written == "[1]" && found.differs_in.is_empty())
        );
        let error = read_reply::<Interpolate>(json!({})).unwrap_err();
        assert!(error.to_string().contains("interpolate"), "{error}");
    }
}
