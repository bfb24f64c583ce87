//! The state one `%%ask` run works on, and the results its nodes record.

use serde::{Deserialize, Serialize};

use super::findings::{
    Action, Expected, FormDispute, KeyInformation, Outcome, Plan, Triage, Verdict,
};
use super::limits;
use crate::agent::llm::{ChatMessage, Role, Usage};

/// A skill the model may load with `skill(name)`: its name and description.
pub type Skill = (String, String);

/// A code block found in a model's answer, in order of appearance.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CodeBlock {
    pub code: String,
}

/// One executed code block, as the model will be told about it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Execution {
    pub code: String,
    /// Captured stdout, stderr, the last value and any traceback, as text
    /// (long output keeps its head and tail).
    pub output: String,
    /// What the user's output panel shows, when it differs from `output`:
    /// rich output was shown as it came, so the panel leaves its text out.
    pub shown: Option<String>,
    pub failed: bool,
    /// The code called `FINAL(answer)` (an `rlm()` sub-agent's way to end).
    pub finished: bool,
    /// What the code changed in the namespace, a line per name
    /// (`n = 3 (int, new)`), for the model and the review.
    pub changes: Vec<String>,
    /// How many rich outputs (figures, tables) it showed the user.
    pub rich_outputs: usize,
    /// The figures it showed, as downscaled base64 PNGs (for a model that
    /// sees images).
    pub images: Vec<String>,
}

impl Execution {
    /// Code that did not run (refused, not reached, or the runtime failed
    /// before it could), with what is said instead of its output.
    pub fn not_run(code: impl Into<String>, output: impl Into<String>) -> Self {
        Execution {
            code: code.into(),
            output: output.into(),
            shown: None,
            failed: true,
            finished: false,
            changes: Vec::new(),
            rich_outputs: 0,
            images: Vec::new(),
        }
    }

    /// The text of the output panel.
    pub fn panel_text(&self) -> &str {
        self.shown.as_deref().unwrap_or(&self.output)
    }
}

/// Everything a run reads and writes.
#[derive(Debug, Clone, Serialize)]
pub struct AgentState {
    /// The user's request for this run.
    pub request: String,
    /// Where the request is in `conversation` (after the earlier runs'
    /// messages): what the run was asked, before any of its answers.
    pub request_at: usize,
    /// Code of the cells the user ran since the previous request.
    pub recent_cells: Vec<String>,
    /// How many blocks re-sent one of `recent_cells`: after the first the
    /// prompts leave them out (a small model that copied one keeps copying
    /// it while it sees it).
    pub recent_cells_copied: u32,
    /// The skills the model may load: name and description.
    pub skills: Vec<Skill>,
    /// The conversation so far, this run's request and turns included; it
    /// carries over between runs in the same kernel.
    pub conversation: Vec<ChatMessage>,
    pub turn: u32,
    pub max_turns: u32,
    /// The model's last answer.
    pub answer: String,
    /// Code blocks of the last answer, not yet run.
    pub pending: Vec<CodeBlock>,
    /// How many of them were shown while the answer streamed.
    pub blocks_shown: usize,
    /// Executions of this run, in order.
    pub executions: Vec<Execution>,
    pub verdict: Option<Verdict>,
    /// The analyst graph's plan for this run.
    pub plan: Option<Plan>,
    /// The blocks of an analyst run that failed, in order (listed when it
    /// gave up; `ask()` returns them either way).
    pub failed_attempts: Vec<Execution>,
    /// The planner graph's next action, not yet taken.
    #[serde(skip)]
    pub action: Option<Action>,
    /// What the planner graph's informer found, by variable.
    pub key_information: Vec<KeyInformation>,
    /// The triage graph's decisions and reviews.
    #[serde(skip)]
    pub triage: Triage,
    pub usage: Usage,
    pub outcome: Option<Outcome>,
    /// The user's variables, as of the last namespace summary.
    pub namespace_names: Vec<String>,
    /// The model was told once to answer with code (an answer without any
    /// cannot have done what the request asks).
    pub nudged_for_code: bool,
    /// The model was told once that a claim without code after an
    /// unfinished turn finishes nothing.
    pub nudged_after_review: bool,
    /// Turns that repeated the turn before (same code, same outcome).
    pub repeats: u32,
    /// The last check compared a value the request names with the result
    /// the request writes out, by code, and found another.
    pub missed_written_result: bool,
    /// A solution written afresh was run in place of a repeated turn
    /// (`graphs::fresh_solution`; once a run).
    pub ran_fresh_solution: bool,
    /// How many blocks the last turn ran.
    pub last_turn_blocks: usize,
    /// The last answer was cut off at the length limit.
    pub truncated: bool,
    /// A review said "cannot be done" though nothing failed, and was given
    /// one more turn (under the triage, one more pass).
    pub doubted_cannot_fix: bool,
    /// The namespace summary the run's prompts show: the one of its first
    /// prompt, so the system prompt stays the same from call to call.
    pub namespace_at_start: Option<String>,
    /// How many of `executions` have given their figures to the model
    /// already, and how many figures went (within a run's budget).
    pub images_from: usize,
    pub images_sent: usize,
    /// What the review that said "done" looked at, a line each (the values
    /// the request names, `revenue: float: 30.5`); empty when nothing was
    /// checked.
    pub checked: Vec<String>,
    /// How many times this run's work has been looked at before "done"
    /// (every visit of the default graph's reflect step, by code or by
    /// review; every check of a planner's or triage's answer), the look
    /// under way included.
    pub looked_at: u32,
    /// The form each value the request names must have, as the model said
    /// before it saw the value; asked once a run.
    #[serde(skip)]
    pub expected_forms: Vec<(String, Expected)>,
    /// The keys each dict the request names must have, as the model read
    /// them from the request (`parse::keys`); asked once a run.
    #[serde(skip)]
    pub expected_keys: Vec<(String, Vec<String>)>,
    /// Values the form check sent back, as they were then.
    #[serde(skip)]
    pub form_disputes: Vec<FormDispute>,
    /// The other solutions sampled for this turn's request, from its answer
    /// until its review compares them with the turn's own.
    pub other_solutions: Option<OtherSolutions>,
    /// The numbers typed in by lines of the turn's blocks left out of what
    /// is checked (fixed text printing a number nothing computed), for the
    /// review to know that what they said is not done.
    pub left_out: Vec<String>,
}

/// Other solutions of a turn's request, sampled beside its answer.
#[derive(Debug, Clone, Default, Serialize)]
pub struct OtherSolutions {
    /// Each one's code (solution `i` is `codes[i - 1]`; 0 is the turn's).
    pub codes: Vec<String>,
    /// The values they are compared on.
    pub names: Vec<String>,
    /// Whether they ran (on scratch copies, before the turn's own code).
    pub tried: bool,
}

impl AgentState {
    /// For a model that sees images: the figures of the executions since
    /// the last call, within the run's budget, attached to the latest user
    /// message (the report about them, or what followed it).
    pub fn attach_new_figures(&mut self) {
        let images = self.new_figures();
        self.images_from = self.executions.len();
        if images.is_empty() {
            return;
        }
        if let Some(last) = self
            .conversation
            .iter_mut()
            .rev()
            .find(|m| m.role == Role::User)
        {
            self.images_sent += images.len();
            last.images.extend(images);
        }
    }

    /// The figures of the executions since the last call that took them,
    /// as many as the run's budget has left (counted once sent).
    pub fn new_figures(&self) -> Vec<String> {
        let left = limits::MAX_IMAGES_PER_RUN.saturating_sub(self.images_sent);
        self.executions[self.images_from.min(self.executions.len())..]
            .iter()
            .flat_map(|execution| execution.images.iter().cloned())
            .take(left)
            .collect()
    }

    /// The namespace summary for a prompt: `fresh` for the run's first,
    /// the first one's after that. What the code changed reaches the model
    /// in each execution report; a system prompt that stays the same is
    /// reused by a prompt cache with every message after it.
    pub fn pinned_namespace(&mut self, fresh: &str) -> String {
        self.namespace_at_start
            .get_or_insert_with(|| fresh.to_owned())
            .clone()
    }

    /// The cells the user ran since the last request, as the prompts show
    /// them: none once a block re-sent one.
    pub fn recent_cells_shown(&self) -> &[String] {
        if self.recent_cells_copied > 0 {
            &[]
        } else {
            &self.recent_cells
        }
    }

    /// The code of the run's blocks that ran through (what failed made
    /// nothing to compare).
    pub fn codes_that_ran(&self) -> Vec<&str> {
        self.executions
            .iter()
            .filter(|e| !e.failed)
            .map(|e| e.code.as_str())
            .collect()
    }

    /// Records the model's answer to a turn: counted, kept in the
    /// conversation, and the one the next node reads.
    pub fn record_answer(&mut self, text: String) {
        self.turn += 1;
        self.conversation.push(ChatMessage::assistant(text.clone()));
        self.answer = text;
    }

    /// A new run of `request`, continuing `conversation`.
    pub fn new(request: impl Into<String>, conversation: Vec<ChatMessage>, max_turns: u32) -> Self {
        let request = request.into();
        let mut conversation = conversation;
        let request_at = conversation.len();
        conversation.push(ChatMessage::user(request.clone()));
        Self {
            request,
            request_at,
            recent_cells: Vec::new(),
            recent_cells_copied: 0,
            skills: Vec::new(),
            conversation,
            turn: 0,
            max_turns: max_turns.max(1),
            answer: String::new(),
            pending: Vec::new(),
            blocks_shown: 0,
            executions: Vec::new(),
            verdict: None,
            plan: None,
            failed_attempts: Vec::new(),
            action: None,
            key_information: Vec::new(),
            triage: Triage::default(),
            usage: Usage::default(),
            outcome: None,
            namespace_names: Vec::new(),
            images_from: 0,
            images_sent: 0,
            checked: Vec::new(),
            looked_at: 0,
            expected_forms: Vec::new(),
            expected_keys: Vec::new(),
            form_disputes: Vec::new(),
            other_solutions: None,
            left_out: Vec::new(),
            nudged_for_code: false,
            nudged_after_review: false,
            repeats: 0,
            missed_written_result: false,
            ran_fresh_solution: false,
            last_turn_blocks: 0,
            truncated: false,
            doubted_cannot_fix: false,
            namespace_at_start: None,
        }
    }
}

/// What a run changed, as the Python scope reports it at the end: lines of
/// text for each kind of change; all empty when nothing changed
/// (or nothing is kept, as in an `rlm()` search's own namespace).
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
pub struct RunChanges {
    #[serde(default)]
    pub added: Vec<String>,
    #[serde(default)]
    pub changed: Vec<String>,
    #[serde(default)]
    pub removed: Vec<String>,
    #[serde(default)]
    pub files: Vec<String>,
    /// What `%ask_undo` could not put back, and why.
    #[serde(default)]
    pub not_restorable: Vec<String>,
}
