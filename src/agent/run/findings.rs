//! What each graph finds out during a run, as its own types: the review's
//! verdict (every graph), the analyst's plan, the planner's next action and
//! what its informer learned, the triage's decisions. The run state keeps
//! them; the parsers make them from model text; rendering shows them.

use serde::{Deserialize, Serialize};

use super::limits;

/// The reflection step's judgement of the last turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub is_complete: bool,
    /// Not done, and no further turn can do it (a file or package that is
    /// not there, data that does not hold the answer): `reasoning` says why.
    #[serde(default)]
    pub cannot_fix: bool,
    pub reasoning: String,
    pub next_action: String,
    /// When complete: a short answer to the request in plain words, which
    /// interprets what the output showed (empty when the judge gave none).
    #[serde(default)]
    pub answer: String,
    /// False when nothing in the answer could be read as a verdict.
    #[serde(skip)]
    pub parsed: bool,
    /// How sure the judge was of "done", where the provider gives its
    /// tokens' likeliest choices (see `graphs::check`); None where it does
    /// not, or when the verdict is not "done".
    #[serde(default, skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<Confidence>,
    /// The confidence, in percent, this "done" needs to be confirmed, set
    /// where it is weighed ([`Verdict::needed_after`]); None:
    /// [`Verdict::CONFIRMED`].
    #[serde(skip)]
    pub needed: Option<u8>,
    /// How the values of a judged "done" compared with solutions of the
    /// request written independently ([`CrossCheck`]), where any were.
    #[serde(skip)]
    pub cross_check: Option<CrossCheck>,
}

/// A judged "done" checked against solutions of the request written
/// independently, after the review (`graphs::cross_check`): counts include
/// the run's own. In a trace: `{"result": "agreed", "agree": 2, "of": 3}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum CrossCheck {
    /// `agree` of the `of` solutions that computed the values computed the
    /// run's.
    Agreed { agree: usize, of: usize },
    /// Every other solution that computed the values (`of - 1` of them)
    /// computed others: the "done" is not confirmed.
    Differed { of: usize },
}

impl CrossCheck {
    /// What solutions compared as `agreement` say of the run's own (index
    /// 0); None where no other computed the values.
    pub fn from_agreement(agreement: &Agreement) -> Option<Self> {
        match agreement.consensus() {
            Consensus::Alone => None,
            Consensus::Unanimous { of } => Some(CrossCheck::Agreed { agree: of, of }),
            Consensus::Majority { agree, of } => Some(CrossCheck::Agreed { agree, of }),
            Consensus::Disputed { agree: 1, of, .. } => Some(CrossCheck::Differed { of }),
            Consensus::Disputed { agree, of, .. } => Some(CrossCheck::Agreed { agree, of }),
        }
    }
}

/// How sure the judge was of a "done", weighed from the provider's token
/// odds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confidence {
    /// Read off the odds of its `true`, in percent.
    Percent(u8),
    /// The provider gives odds, but none could be read for the verdict:
    /// nothing weighed the "done", so it is not confirmed (taken as sure,
    /// it would pass the very claims the weighing is there to catch).
    Unreadable,
}

impl Confidence {
    /// From the likelihood of "done" read off the odds (None: unreadable).
    pub fn from_likelihood(likelihood: Option<f32>) -> Self {
        match likelihood {
            Some(p) => Confidence::Percent((p * 100.0).round().clamp(0.0, 100.0) as u8),
            None => Confidence::Unreadable,
        }
    }

    /// The percent, where it could be read.
    pub fn percent(self) -> Option<u8> {
        match self {
            Confidence::Percent(percent) => Some(percent),
            Confidence::Unreadable => None,
        }
    }
}

/// A number where it was read, else `"unreadable"`.
impl Serialize for Confidence {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Confidence::Percent(percent) => serializer.serialize_u8(*percent),
            Confidence::Unreadable => serializer.serialize_str("unreadable"),
        }
    }
}

impl Verdict {
    /// The least confidence, in percent, that confirms a "done": chosen on
    /// the development split of the evaluation (bench/README.md).
    pub const CONFIRMED: u8 = 80;

    /// What confirms a "done" given after the work was sent back
    /// [`Verdict::SENT_BACK_OFTEN`] times or more: the more often a small
    /// model's work was found wanting, the less a "done" at the usual odds
    /// says (on the development split, every such "done" under 90% was
    /// wrong; bench/README.md).
    pub const CONFIRMED_AFTER_TRIES: u8 = 90;

    /// How often work may be sent back before its "done" needs
    /// [`Verdict::CONFIRMED_AFTER_TRIES`].
    pub const SENT_BACK_OFTEN: u32 = 2;

    /// The confidence a "done" needs after the work was sent back
    /// `sent_back` times.
    pub fn needed_after(sent_back: u32) -> u8 {
        if sent_back >= Self::SENT_BACK_OFTEN {
            Self::CONFIRMED_AFTER_TRIES
        } else {
            Self::CONFIRMED
        }
    }

    /// The confidence this "done" needs.
    pub fn needed(&self) -> u8 {
        self.needed.unwrap_or(Self::CONFIRMED)
    }

    /// "Done", but the judge was less sure of it than it needs
    /// ([`Verdict::needed`]) or how sure could not be read where it should
    /// have been, or solutions written independently computed otherwise.
    pub fn unconfirmed(&self) -> bool {
        self.is_complete && (self.judge_unsure() || self.differed())
    }

    /// The judge was less sure of this "done" than it needs, or how sure
    /// could not be read.
    pub fn judge_unsure(&self) -> bool {
        match self.confidence {
            Some(Confidence::Percent(percent)) => percent < self.needed(),
            Some(Confidence::Unreadable) => true,
            None => false,
        }
    }

    /// Solutions written independently computed other values than this
    /// "done"'s, none the same.
    pub fn differed(&self) -> bool {
        matches!(self.cross_check, Some(CrossCheck::Differed { .. }))
    }

    /// Done, for `reasoning`, found by code without a review.
    pub fn done_by_code(reasoning: impl Into<String>) -> Self {
        Verdict {
            is_complete: true,
            ..Verdict::not_done(reasoning, "")
        }
    }

    /// Not done, for `reasoning`, with `next_action` to do next: a
    /// judgement the kernel made itself (read as if parsed).
    pub fn not_done(reasoning: impl Into<String>, next_action: impl Into<String>) -> Self {
        Verdict {
            is_complete: false,
            cannot_fix: false,
            reasoning: reasoning.into(),
            next_action: next_action.into(),
            answer: String::new(),
            parsed: true,
            confidence: None,
            needed: None,
            cross_check: None,
        }
    }
}

/// How the turn's own solution compares with the other solutions of the
/// same request tried beside it on scratch copies (as the Python side
/// groups them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Agreement {
    /// The solutions (0: the turn's own, then each other one tried) in
    /// groups that computed the same values, largest first; one that
    /// failed or was not tried is in none.
    pub groups: Vec<Vec<usize>>,
    /// Each solution's values in brief (empty for one that failed).
    pub values: Vec<String>,
    /// Each solution's values as the check describes the run's own
    /// (`tools.describe`; none for one that failed).
    #[serde(default)]
    pub described: Vec<Vec<KeyInformation>>,
}

/// What the solutions' agreement says of the turn's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consensus {
    /// No other solution computed values: nothing to compare.
    Alone,
    /// Every solution that computed values computed the same (`of` of
    /// them, the turn's own included).
    Unanimous { of: usize },
    /// More solutions agree with the turn's own than with any other.
    Majority { agree: usize, of: usize },
    /// Another answer has at least as many solutions behind it:
    /// `rival` is the first solution of the largest such group.
    Disputed {
        rival: usize,
        agree: usize,
        of: usize,
    },
}

impl Agreement {
    /// Without the other solutions `ruled_out` says are no evidence: in no
    /// group.
    pub fn without(mut self, ruled_out: impl Fn(usize) -> bool) -> Self {
        for group in &mut self.groups {
            group.retain(|&i| i == 0 || !ruled_out(i));
        }
        self.groups.retain(|group| !group.is_empty());
        self
    }

    pub fn consensus(&self) -> Consensus {
        let of: usize = self.groups.iter().map(Vec::len).sum();
        let own = self.groups.iter().find(|g| g.contains(&0));
        let Some(own) = own.filter(|_| of > 1) else {
            return Consensus::Alone;
        };
        let rival = self
            .groups
            .iter()
            .filter(|g| !g.contains(&0))
            .max_by_key(|g| (g.len(), std::cmp::Reverse(g[0])));
        match rival {
            None => Consensus::Unanimous { of },
            Some(rival) if rival.len() >= own.len() => Consensus::Disputed {
                rival: rival[0],
                agree: own.len(),
                of,
            },
            Some(_) => Consensus::Majority {
                agree: own.len(),
                of,
            },
        }
    }
}

/// The planning step's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub needs_code: bool,
    pub needs_evaluation: bool,
    /// Whether the answer needs words after the code (not for a value
    /// stored or a plot shown, whose outcome says it all).
    pub needs_explanation: bool,
    pub reasoning: String,
    /// False when the answer could not be read and the defaults were used.
    #[serde(skip)]
    pub parsed: bool,
}

/// What the planner chose to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Run this code in the user's namespace.
    Python(String),
    /// Call a toolbox function; `input` is its arguments (Python or JSON).
    Tool { name: String, input: String },
    /// Ask the informer about these variables (names in free text).
    Inform(String),
    /// End the run with this answer.
    Finish(String),
    /// Prose with no action and no final answer in the expected form.
    Unclear(String),
}

/// A variable the informer described: its name and what it found.
pub type KeyInformation = (String, String);

/// A value the request names, beside the result the request writes out
/// for the data the run's code read (`mahtab/agent/shown_result.py`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "verdict", rename_all = "lowercase")]
pub enum WrittenResult {
    /// The value, printed, is one of the results the request writes out.
    Matches(AsWritten),
    /// The request writes out one result for this data (or for its
    /// example, which the run's code was tried on), and the value is not
    /// it.
    Differs(Difference),
}

/// A value the request names that is not the one result the request
/// writes out for this data.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Difference {
    pub name: String,
    /// The piece of the request that writes the result out.
    pub written: String,
    /// The value, printed.
    pub value: String,
    /// Where the two differ, said by code (a column one lacks, a count of
    /// rows, the first row that differs), or empty where the printouts
    /// show nothing certain.
    #[serde(default)]
    pub differs_in: String,
    /// The result is the one the request writes out for its example (other
    /// data than the notebook's), and `value` what the run's code made
    /// from that example.
    #[serde(default)]
    pub on_example: bool,
}

/// A value the request names that is the result it writes out.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AsWritten {
    pub name: String,
    /// Shown by the run's code tried on the request's example (other data
    /// than the notebook's, shown in the request) rather than by the value
    /// itself.
    #[serde(default)]
    pub on_example: bool,
}

/// How many values a request asks a variable to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// One number, name or yes/no.
    One,
    /// A list, an array, a Series or a dict: a value per item or group.
    Several,
    /// A DataFrame.
    Table,
}

/// What a value the request names must be once it is done, as the request
/// states it or the model says before it sees the value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expected {
    /// How many values (None: nobody could tell).
    pub form: Option<Form>,
    /// The shape the request writes out for the result (`(93, 13)`), if
    /// it gives one.
    pub shape: Option<Vec<usize>>,
}

/// A value the form check found other than expected, as it was then: the
/// next turn that leaves it so keeps it against the check, and the review
/// decides between them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormDispute {
    pub name: String,
    /// The value's description when it was disputed.
    pub value: String,
    /// What the check said was wrong with it.
    pub reasoning: String,
}

/// The agents the triage hands work to: the other graphs, and the claude
/// CLI (the default graph with Claude Code's model) when it is installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    Default,
    Analyst,
    Planner,
    Claude,
}

impl Agent {
    pub const ALL: [Agent; 4] = [
        Agent::Default,
        Agent::Analyst,
        Agent::Planner,
        Agent::Claude,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Agent::Default => "default",
            Agent::Analyst => "analyst",
            Agent::Planner => "planner",
            Agent::Claude => "claude",
        }
    }

    /// What the agent is good at, as the planning prompts list it.
    pub fn strength(self) -> &'static str {
        match self {
            Agent::Default => {
                "writes and runs code, reviews the result, and repeats until done; \
                 for most requests that need code"
            }
            Agent::Analyst => {
                "plans, runs code, then explains the result in plain words; for questions \
                 about data that want an interpretation, and for conceptual questions"
            }
            Agent::Planner => {
                "takes one small action at a time (code or a tool such as describe, grep, \
                 read); for exploring data, logs or files step by step"
            }
            Agent::Claude => {
                "works like the default agent with a stronger model (Claude, through the \
                 claude CLI); for hard tasks, or ones other agents failed at"
            }
        }
    }

    /// Turns one delegation may use.
    pub fn turns(self) -> u32 {
        match self {
            Agent::Default | Agent::Claude => limits::DEFAULT_MAX_TURNS,
            Agent::Analyst => limits::ANALYST_MAX_TURNS,
            Agent::Planner => limits::PLANNER_MAX_TURNS,
        }
    }
}

/// The agents a run can hand work to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Agents {
    /// The claude CLI is installed and is not the run's own provider.
    pub claude: bool,
}

impl Agents {
    pub fn available(self) -> impl Iterator<Item = Agent> {
        Agent::ALL
            .into_iter()
            .filter(move |agent| *agent != Agent::Claude || self.claude)
    }

    /// The available agent a model named, if any.
    pub fn parse(self, name: &str) -> Option<Agent> {
        let name = name
            .trim()
            .trim_start_matches("agent:")
            .to_ascii_lowercase();
        self.available().find(|agent| agent.name() == name)
    }

    /// The agents and what each is for, one per line, for the prompts.
    pub fn listed(self) -> String {
        self.available()
            .map(|agent| format!("- {}: {}", agent.name(), agent.strength()))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The agents' names.
    pub fn names(self) -> Vec<&'static str> {
        self.available().map(Agent::name).collect()
    }

    /// The agents' names as a JSON field's choices: `"default" or "analyst"`.
    pub fn choices(self) -> String {
        self.available()
            .map(|agent| format!("\"{}\"", agent.name()))
            .collect::<Vec<_>>()
            .join(" or ")
    }
}

/// What a planning phase decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Hand `task` to `agent`.
    Delegate { agent: Agent, task: String },
    /// Run these toolbox calls (one line each).
    Tool { code: String },
    /// Reply with this text; there is no work to do.
    Respond(String),
    /// The work done already meets the request: end, with this answer.
    Done(String),
}

/// What the triage graph carries between its nodes.
#[derive(Debug, Clone, Default)]
pub struct Triage {
    pub decision: Option<Decision>,
    /// Reviews so far that found the request not met.
    pub reviews: u32,
    /// Executions before this pass, so its own can be told apart.
    pub pass_start: usize,
    /// How the delegated agent's own run ended.
    pub agent_outcome: Option<Outcome>,
}

/// What the pre-plan looks at besides the request.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub struct Context {
    /// The user's variables, by name.
    #[serde(default)]
    pub variables: Vec<String>,
    /// The traceback of the user's last failed cell, as text.
    #[serde(default)]
    pub last_error: Option<String>,
}

/// A fix the repair step made without the model.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct Repair {
    pub code: String,
    /// What was changed, in a few words.
    pub change: String,
}

/// What a request says will exist when it is done.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
pub struct Targets {
    /// Variables it names to store a result in.
    pub names: Vec<String>,
    /// Files it names to write.
    pub files: Vec<String>,
}

impl Targets {
    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.files.is_empty()
    }
}

/// How a run ended, for the summary shown to the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Outcome {
    /// The model answered without code.
    Answered,
    /// The reflection step judged the request done.
    Complete,
    /// The review judged it done, but was unsure of it: the answer stands,
    /// not confirmed ([`Verdict::unconfirmed`]).
    Unconfirmed,
    /// The turn limit was reached first.
    MaxTurns,
    /// Every block of the analyst graph's turns failed, until they ran out or repeated.
    GaveUp,
    /// The review judged that the request cannot be done here.
    CannotBeDone,
    /// The model kept sending the same code with the same result.
    Repeating,
}
