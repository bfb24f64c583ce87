//! Scripted effects for unit tests of the graphs: the model's answers come
//! from a list, code "runs" through a function, and everything the graph
//! asked for is recorded.

use std::collections::VecDeque;

use super::llm::{ChatOutcome, ChatRequest, TokenChoices, Usage};
use super::run::{
    Activity, AgentError, AgentEvent, Agreement, CandidateOutcome, Context, Effects, Execution,
    KeyInformation, ModelChoice, Observer, Repair, Showing, Targets, TriedFrom, WrittenResult,
};

/// Scripted effects: answers in order, executions by a closure.
pub struct Script {
    /// What `triage_context` reports as the user's last error.
    pub last_error: Option<String>,
    pub answers: VecDeque<&'static str>,
    pub requests: Vec<ChatRequest>,
    pub executed: Vec<String>,
    pub nodes: Vec<&'static str>,
    pub events: Vec<AgentEvent>,
    /// The names each `describe` call asked about.
    pub described: Vec<Vec<String>>,
    /// The names `restore` was asked to put back.
    pub restored: Vec<String>,
    /// Names the code rebound to the data they held (a list typed in
    /// again as its array): `restore_changed` leaves them.
    pub same_data: Vec<String>,
    /// The model each call went to, in order.
    pub models: Vec<ModelChoice>,
    model: ModelChoice,
    pub run: fn(&str) -> Execution,
    /// The answer to this request (counted from 0) comes back cut off at
    /// the length limit.
    pub truncate_at: Option<usize>,
    /// Variables and files that exist besides those the code assigns, for
    /// `missing`.
    pub existing: Vec<String>,
    /// The codes each `try_candidates` call was given.
    pub tried: Vec<Vec<String>>,
    /// Where each `try_candidates` call tried them.
    pub tried_from: Vec<TriedFrom>,
    /// How each `try_candidates` call says its codes went, in order (then
    /// all ran).
    pub outcomes: VecDeque<Vec<CandidateOutcome>>,
    /// What each `compare_candidates` call answers, in order (then no
    /// agreement).
    pub agreements: VecDeque<Agreement>,
    /// How likely the judge holds "done", for each call that asks for token
    /// choices, in order: answered `{"is_complete": true}` with `true` and
    /// `false` that likely.
    pub done_likelihoods: VecDeque<Option<f32>>,
    /// What each `written_results` call answers, in order (then nothing).
    pub written: VecDeque<Vec<WrittenResult>>,
}

impl Script {
    /// How `describe` describes `name`.
    fn description_of(&self, name: &str) -> String {
        let assign = format!("{name} = ");
        let value = self.executed.iter().rev().find_map(|code| {
            code.lines()
                .rev()
                .find_map(|line| line.strip_prefix(&assign))
        });
        match value.map(str::trim) {
            Some(number) if number.parse::<i64>().is_ok() => format!("{name}: int: {number}"),
            Some(list) if list.starts_with('[') => format!(
                "{name}: list, {} items of int\n{list}",
                list.matches(',').count() + 1
            ),
            Some(dict) if dict.starts_with('{') => {
                let keys: Vec<&str> = dict
                    .trim_matches(['{', '}'])
                    .split(',')
                    .filter_map(|item| Some(item.split_once(':')?.0.trim()))
                    .collect();
                format!(
                    "{name}: dict, {} keys: {}\n{dict}",
                    keys.len(),
                    keys.join(", ")
                )
            }
            _ => format!("{name}: list, 3 items of int"),
        }
    }

    pub fn new(answers: &[&'static str], run: fn(&str) -> Execution) -> Self {
        Self {
            last_error: None,
            answers: answers.iter().copied().collect(),
            requests: Vec::new(),
            executed: Vec::new(),
            nodes: Vec::new(),
            events: Vec::new(),
            described: Vec::new(),
            restored: Vec::new(),
            same_data: Vec::new(),
            models: Vec::new(),
            model: ModelChoice::Configured,
            run,
            existing: vec!["x".into()],
            truncate_at: None,
            tried: Vec::new(),
            tried_from: Vec::new(),
            outcomes: VecDeque::new(),
            agreements: VecDeque::new(),
            done_likelihoods: VecDeque::new(),
            written: VecDeque::new(),
        }
    }
}

/// A verdict alone whose `true` was `p` likely against `false`.
fn weighed_verdict(p: Option<f32>) -> ChatOutcome {
    let token = |text: &str, choices: Vec<(String, f32)>| TokenChoices {
        token: text.to_owned(),
        choices,
    };
    // None: the odds hold neither word (a server that sent none).
    let odds = p.map_or_else(Vec::new, |p| {
        vec![(" true".into(), p.ln()), (" false".into(), (1.0 - p).ln())]
    });
    ChatOutcome {
        text: "{\"is_complete\": true}".into(),
        token_choices: vec![
            token("{\"is_complete\":", Vec::new()),
            token(" true", odds),
            token("}", Vec::new()),
        ],
        ..ChatOutcome::default()
    }
}

impl Observer for Script {
    fn node_started(&mut self, node: &'static str, _activity: Option<Activity>) {
        self.nodes.push(node);
    }
    fn node_finished(&mut self, _node: &'static str) {}
}

impl Effects for Script {
    async fn chat(
        &mut self,
        request: ChatRequest,
        _showing: Showing,
    ) -> Result<ChatOutcome, AgentError> {
        let weighed = request.token_choices;
        self.requests.push(request);
        self.models.push(self.model);
        if weighed {
            let p = self
                .done_likelihoods
                .pop_front()
                .expect("the script has a likelihood left");
            return Ok(weighed_verdict(p));
        }
        let text = self
            .answers
            .pop_front()
            .expect("the script has an answer left");
        Ok(ChatOutcome {
            text: text.to_owned(),
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                cost_usd: None,
                ..Default::default()
            },
            blocks_shown: 0,
            truncated: self.truncate_at == Some(self.requests.len() - 1),
            token_choices: Vec::new(),
        })
    }

    async fn chat_side_by_side(
        &mut self,
        requests: Vec<ChatRequest>,
    ) -> Vec<Result<ChatOutcome, AgentError>> {
        let mut answers = Vec::new();
        for request in requests {
            answers.push(self.chat(request, Showing::Hidden).await);
        }
        answers
    }

    async fn execute(&mut self, code: &str) -> Result<Execution, AgentError> {
        self.executed.push(code.to_owned());
        Ok((self.run)(code))
    }

    async fn try_candidates(
        &mut self,
        codes: &[String],
        _own: &str,
        start: TriedFrom,
    ) -> Result<Vec<CandidateOutcome>, AgentError> {
        self.tried.push(codes.to_vec());
        self.tried_from.push(start);
        Ok(self
            .outcomes
            .pop_front()
            .unwrap_or_else(|| vec![CandidateOutcome::Ran; codes.len()]))
    }

    async fn compare_candidates(&mut self, _names: &[String]) -> Agreement {
        self.agreements.pop_front().unwrap_or_default()
    }

    /// `x`, and once code has run, how many blocks did.
    async fn namespace(&mut self) -> String {
        match self.executed.len() {
            0 => "x: int = 1".into(),
            n => format!("x: int = 1\nblocks_run: int = {n}"),
        }
    }

    /// `x` when no names are given, as if the request named it; a name the
    /// code ran so far assigned a literal to (`n = 3`, `n = [1, 2]`) is
    /// described as that value (an int, a list or a dict of them), as
    /// `mahtab.tools.describe` would, any other as a list of 3.
    async fn describe(&mut self, _request: &str, names: &[String]) -> Vec<KeyInformation> {
        self.described.push(names.to_vec());
        if names.is_empty() {
            return vec![("x".into(), "x: int = 1".into())];
        }
        names
            .iter()
            .map(|name| (name.clone(), self.description_of(name)))
            .collect()
    }

    /// The results `written` holds, in order (then none).
    async fn written_results(
        &mut self,
        _request: &str,
        _names: &[String],
        _codes: &[&str],
    ) -> Vec<WrittenResult> {
        self.written.pop_front().unwrap_or_default()
    }

    /// What `existing` names, and what the code run so far assigned
    /// (`name = ...` lines), exists.
    async fn missing(&mut self, targets: &Targets) -> Targets {
        let assigned: Vec<String> = self
            .executed
            .iter()
            .flat_map(|code| code.lines())
            .filter_map(|line| {
                line.split_once(" = ")
                    .map(|(name, _)| name.trim().to_owned())
            })
            .collect();
        let absent = |list: &[String]| {
            list.iter()
                .filter(|item| !self.existing.contains(item) && !assigned.contains(item))
                .cloned()
                .collect()
        };
        Targets {
            names: absent(&targets.names),
            files: absent(&targets.files),
        }
    }

    /// Every name asked for is put back, and remembered.
    async fn restore(&mut self, names: &[String]) -> Vec<String> {
        self.restored.extend(names.iter().cloned());
        names.to_vec()
    }

    /// Every name asked for but those in `same_data` is put back, and
    /// remembered.
    async fn restore_changed(&mut self, names: &[String]) -> Vec<String> {
        let changed: Vec<String> = names
            .iter()
            .filter(|name| !self.same_data.contains(name))
            .cloned()
            .collect();
        self.restored.extend(changed.iter().cloned());
        changed
    }

    /// `x` and `prices` exist.
    async fn triage_context(&mut self) -> Context {
        Context {
            variables: vec!["x".into(), "prices".into()],
            last_error: self.last_error.clone(),
        }
    }

    /// Knows one repair: the missing import of numpy as np.
    async fn repair(&mut self, code: &str, error: &str) -> Option<Repair> {
        error.contains("name 'np' is not defined").then(|| Repair {
            code: format!("import numpy as np\n{code}"),
            change: "added import numpy as np".into(),
        })
    }

    fn use_model(&mut self, model: ModelChoice) {
        self.model = model;
    }

    fn emit(&mut self, event: AgentEvent) {
        self.events.push(event);
    }
}

/// The latest message of `request`.
pub fn latest(request: &ChatRequest) -> &str {
    request
        .messages
        .last()
        .map_or("", |message| message.content.as_str())
}

pub fn ok(code: &str) -> Execution {
    Execution {
        code: code.into(),
        output: "42".into(),
        shown: None,
        failed: false,
        finished: false,
        changes: Vec::new(),
        rich_outputs: 0,
        images: Vec::new(),
    }
}

pub fn fails_once(code: &str) -> Execution {
    let failed = code.contains("1/0");
    let output = if failed {
        "ZeroDivisionError: division by zero"
    } else {
        "fixed"
    };
    Execution {
        code: code.into(),
        output: output.into(),
        shown: None,
        failed,
        finished: false,
        changes: Vec::new(),
        rich_outputs: 0,
        images: Vec::new(),
    }
}

/// Roles alternate in every request, and the user speaks last, as the
/// Anthropic API requires.
pub fn assert_roles_alternate(script: &Script) {
    for request in &script.requests {
        for pair in request.messages.windows(2) {
            assert_ne!(pair[0].role, pair[1].role, "{:?}", request.messages);
        }
        assert_eq!(
            request.messages.last().unwrap().role,
            super::llm::Role::User
        );
    }
}
