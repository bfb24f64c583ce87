//! Steps every graph is made of: asking the model (for an answer the user
//! watches, for code, or for a judgement the kernel reads), running the
//! pending code blocks, and closing a run with an answer. The settings they
//! need besides the state travel with them.

use crate::agent::budget;
use crate::agent::graph::{NodeFn, NodeFuture};
use crate::agent::llm::{AnswerSchema, ChatMessage, ChatOutcome, ChatRequest, Role, Sampling};
use crate::agent::parse::code::{closed_code_blocks, ends_in_open_block};
use crate::agent::parse::verdict::likelihood_true;
use crate::agent::parse::{checks, copied, errors};
use crate::agent::prompts::ReportedCode;
use crate::agent::run::{
    AgentError, AgentEvent, AgentState, Confidence, Effects, Execution, Showing,
};
use crate::agent::{prompts, schemas};

/// What the nodes need to know besides the state: the model, its limits
/// and what the cell allows (not the settings file: [`crate::agent::config::layers::Settings`]).
#[derive(Debug, Clone)]
pub struct NodeSettings {
    pub model: String,
    /// The model for judgements the kernel reads (verdicts, plans,
    /// classifications), when not `model`.
    pub judge_model: Option<String>,
    pub max_tokens: u32,
    /// The model's context window: what is sent is kept within it.
    pub context_tokens: usize,
    /// With `false`, code is shown but never run (`--no-exec`).
    pub execute: bool,
    /// With `true`, one answer and its code, no review (`--once`).
    pub once: bool,
    /// How the model samples (temperature, seed).
    pub sampling: Sampling,
    /// The model sees images: the figures agent code shows go to it.
    pub vision: bool,
    /// How many other solutions of a turn's request are sampled and tried
    /// on scratch copies beside its own code (0: none).
    pub candidates: u32,
    /// How many solutions of the request alone are sampled and compared
    /// with a judged "done"'s values ([`super::cross_check`]; 0: none).
    pub cross_checks: u32,
    /// The provider gives its tokens' likeliest choices (the local model's
    /// server): a "done" is weighed by them.
    pub token_choices: bool,
    /// A turn's answer ends at the blank line after its first code block
    /// (the local model: what it writes there describes output it has not
    /// seen, at a few tokens a second). Never with `once`, whose one answer
    /// is all the code that runs.
    pub stop_after_block: bool,
    /// A step after the default graph's turns answers in words (the
    /// analyst's explanation): a "done" closes without the review's short
    /// answer, which would say it twice.
    pub answer_after: bool,
}

#[cfg(test)]
impl NodeSettings {
    /// The settings the graphs' unit tests start from: a named model,
    /// execution on, no other solutions.
    pub(crate) fn for_tests() -> Self {
        NodeSettings {
            model: "test-model".into(),
            judge_model: None,
            max_tokens: 1000,
            context_tokens: 100_000,
            execute: true,
            once: false,
            sampling: Default::default(),
            vision: false,
            candidates: 0,
            cross_checks: 0,
            token_choices: false,
            stop_after_block: false,
            answer_after: false,
        }
    }
}

/// The system prompt code is written under (the same from call to call of
/// a run: its namespace summary is the first prompt's).
pub(crate) async fn code_prompt<E: Effects>(state: &mut AgentState, effects: &mut E) -> String {
    let namespace = effects.namespace().await;
    state.namespace_names = checks::summary_names(&namespace);
    prompts::system(
        &state.pinned_namespace(&namespace),
        state.recent_cells_shown(),
        &state.skills,
    )
}

/// Where another solution's answer stops: the end of its code block.
const BLOCK_END: &[&str] = &["\n```\n"];

/// Where a turn's answer stops with [`NodeSettings::stop_after_block`]: a
/// closing fence and the blank line after it (an opening fence is followed
/// by code, not by a blank line).
pub(super) const AFTER_FIRST_BLOCK: &[&str] = &["\n```\n\n"];

/// How other solutions are sampled: varied enough to differ where the
/// model is unsure, not so much that they stop making sense.
const CANDIDATE_TEMPERATURE: f32 = 0.7;

/// Answers of judging steps (reflect, plan) are short JSON (a verdict's
/// closing answer included); reasoning models spend part of this on hidden
/// reasoning first.
const JUDGEMENT_TOKENS: u32 = 1024;

/// The answer a judgement call asks for: its shape, its length, and
/// whether its tokens' likeliest choices come with it.
struct Reply {
    schema: AnswerSchema,
    max_tokens: u32,
    token_choices: bool,
}

impl Reply {
    /// A judgement in the shape of `schema`, text only.
    fn judgement(schema: AnswerSchema) -> Self {
        Reply {
            schema,
            max_tokens: JUDGEMENT_TOKENS,
            token_choices: false,
        }
    }
}

/// The cap on a verdict asked for alone: `{"is_complete": true}` and the
/// tokens a small model puts around it.
const VERDICT_ALONE_TOKENS: u32 = 16;

impl NodeSettings {
    /// Asks the model, with `system` as the system prompt, about the
    /// conversation so far, for an answer the user watches stream in.
    pub(crate) async fn answer<E: Effects>(
        &self,
        state: &mut AgentState,
        effects: &mut E,
        system: String,
    ) -> Result<ChatOutcome, AgentError> {
        self.answer_until(state, effects, system, &[]).await
    }

    /// Like [`NodeSettings::answer`], with the model stopping at any of `stop`.
    pub(crate) async fn answer_until<E: Effects>(
        &self,
        state: &mut AgentState,
        effects: &mut E,
        system: String,
        stop: &'static [&'static str],
    ) -> Result<ChatOutcome, AgentError> {
        ask_model(
            state,
            effects,
            self,
            system,
            Call {
                model: &self.model,
                max_tokens: self.max_tokens,
                showing: Showing::Prose,
                schema: None,
                stop,
            },
        )
        .await
    }

    /// Like [`NodeSettings::answer`], for an answer whose code blocks will run:
    /// each shows as a panel as soon as it is complete, and the node's
    /// [`run_pending`] shows only the rest.
    pub(crate) async fn write_code<E: Effects>(
        &self,
        state: &mut AgentState,
        effects: &mut E,
        system: String,
    ) -> Result<ChatOutcome, AgentError> {
        let showing = Showing::ProseAndCode {
            turn: state.turn + 1,
        };
        let stop = if self.stop_after_block && !self.once {
            AFTER_FIRST_BLOCK
        } else {
            &[]
        };
        let mut answer = ask_model(
            state,
            effects,
            self,
            system,
            Call {
                model: &self.model,
                max_tokens: self.max_tokens,
                showing,
                schema: None,
                stop,
            },
        )
        .await?;
        // The server leaves the stop text out: the block it closed is closed
        // again, so the conversation shows whole blocks.
        if !answer.truncated && ends_in_open_block(&answer.text) {
            answer.text.push_str("\n```");
        }
        state.blocks_shown = answer.blocks_shown;
        Ok(answer)
    }

    /// `count` other answers to the prompt an answer came from (`system`
    /// and the conversation as it is; cached by the provider, so each costs
    /// its own tokens), sampled side by side with varied seeds and not
    /// shown: the code of each that has any.
    pub(crate) async fn other_solutions<E: Effects>(
        &self,
        state: &mut AgentState,
        effects: &mut E,
        system: &str,
        count: u32,
    ) -> Result<Vec<String>, AgentError> {
        self.solutions_from_seed(state, effects, system, count, 1)
            .await
    }

    /// `count` solutions written afresh ([`super::fresh_solution`]): as
    /// [`Self::other_solutions`], with seeds past those of the other
    /// solutions and their mending, so that a cross-check of what one of
    /// them computes never samples it again and counts it as agreeing.
    pub(crate) async fn fresh_solutions<E: Effects>(
        &self,
        state: &mut AgentState,
        effects: &mut E,
        system: &str,
        count: u32,
    ) -> Result<Vec<String>, AgentError> {
        let first_seed = 1 + 2 * u64::from(self.cross_checks.max(self.candidates));
        self.solutions_from_seed(state, effects, system, count, first_seed)
            .await
    }

    /// `count` answers to the prompt as it is, sampled with seeds from
    /// `first_seed` up: the code of each that has any.
    async fn solutions_from_seed<E: Effects>(
        &self,
        state: &mut AgentState,
        effects: &mut E,
        system: &str,
        count: u32,
        first_seed: u64,
    ) -> Result<Vec<String>, AgentError> {
        let asked = (0..count).map(|_| Vec::new()).collect();
        let codes = self
            .sampled_codes(state, effects, system, asked, first_seed)
            .await?;
        Ok(codes.into_iter().flatten().collect())
    }

    /// One more try at each of `failed`, other solutions that raised (their
    /// code and what it raised): each asked as it was (`system` and the
    /// conversation as it is) with its code and error added, nothing of the
    /// run's, so it stays as independent of the run as it was. The mended
    /// code of each, where the answer has any.
    pub(crate) async fn mended_solutions<E: Effects>(
        &self,
        state: &mut AgentState,
        effects: &mut E,
        system: &str,
        failed: &[(&str, &str)],
    ) -> Result<Vec<Option<String>>, AgentError> {
        let asked = failed
            .iter()
            .map(|(code, error)| {
                // The code above the error, as a traceback shows it (a dict
                // filled before it was made is told by its line).
                let hint = errors::failure_hint(&format!("{code}\n{}", errors::error_line(error)));
                vec![ChatMessage::user(prompts::mend_solution(
                    code,
                    error,
                    hint.as_deref(),
                ))]
            })
            .collect();
        // Seeds past those of the first tries.
        let first_seed = 1 + u64::from(self.cross_checks.max(self.candidates));
        self.sampled_codes(state, effects, system, asked, first_seed)
            .await
    }

    /// One hidden answer for each of `asked` (messages after the
    /// conversation), sampled side by side, with seeds from `first_seed` up
    /// where the provider samples at all (one left at its own default
    /// samples already, and reasoning models refuse any other temperature:
    /// its settings stay): the code of each, if it has any.
    async fn sampled_codes<E: Effects>(
        &self,
        state: &mut AgentState,
        effects: &mut E,
        system: &str,
        asked: Vec<Vec<ChatMessage>>,
        first_seed: u64,
    ) -> Result<Vec<Option<String>>, AgentError> {
        let requests = asked
            .into_iter()
            .zip(0u64..)
            .map(|(after, n)| {
                let call = Call {
                    model: &self.model,
                    max_tokens: self.max_tokens,
                    showing: Showing::Hidden,
                    schema: None,
                    stop: &[],
                };
                let mut request = model_request(state, self, system.to_owned(), &call);
                request.messages.extend(after);
                if self.sampling.temperature.is_some() {
                    request.sampling = Sampling {
                        temperature: Some(CANDIDATE_TEMPERATURE),
                        seed: Some(self.sampling.seed.unwrap_or(0) + first_seed + n),
                    };
                }
                // Code only, ending with its block: the words around it
                // would cost as much again. Said at the end of the last
                // message, so all before it stays cached.
                if let Some(last) = request.messages.last_mut()
                    && last.role == Role::User
                {
                    last.content.push_str(prompts::CODE_ONLY);
                    request.stop = BLOCK_END;
                }
                request
            })
            .collect();
        let mut codes = Vec::new();
        for answer in effects.chat_side_by_side(requests).await {
            let answer = answer?;
            state.usage.add(answer.usage);
            // The stop sequence took the closing fence.
            let closed = format!("{}\n```", answer.text.trim_end());
            let code: Vec<String> = closed_code_blocks(&closed)
                .into_iter()
                .map(|b| b.code)
                .collect();
            codes.push((!code.is_empty()).then(|| code.join("\n\n")));
        }
        Ok(codes)
    }

    /// A short judgement of `review` alone (the request, the code and its
    /// report), not the whole conversation: it is all a judge needs, and
    /// costs a fraction of the tokens. The answer has the shape of `schema`
    /// where the provider enforces it.
    pub(crate) async fn judge_alone<E: Effects>(
        &self,
        state: &mut AgentState,
        effects: &mut E,
        system: String,
        review: String,
        schema: AnswerSchema,
    ) -> Result<ChatOutcome, AgentError> {
        let mut message = ChatMessage::user(review);
        if self.vision {
            // The judge sees the figures it judges; the next call that
            // writes code gets them with the conversation.
            message.images = state.new_figures();
            state.images_sent += message.images.len();
        }
        self.judge_messages(state, effects, system, &[message], Reply::judgement(schema))
            .await
    }

    /// A short question about the request alone (no figures), answered in
    /// the shape of `schema` by the model judgements go to.
    pub(crate) async fn question_alone<E: Effects>(
        &self,
        state: &mut AgentState,
        effects: &mut E,
        system: String,
        question: String,
        schema: AnswerSchema,
    ) -> Result<ChatOutcome, AgentError> {
        let message = ChatMessage::user(question);
        self.judge_messages(state, effects, system, &[message], Reply::judgement(schema))
            .await
    }

    /// A judgement of `messages` alone (fitted to the context window with
    /// `system`), by the model judgements go to.
    async fn judge_messages<E: Effects>(
        &self,
        state: &mut AgentState,
        effects: &mut E,
        system: String,
        messages: &[ChatMessage],
        reply: Reply,
    ) -> Result<ChatOutcome, AgentError> {
        let request = ChatRequest {
            model: self.judge_model().to_owned(),
            messages: budget::fit(&system, messages, self.context_tokens, reply.max_tokens),
            system,
            max_tokens: reply.max_tokens,
            sampling: self.sampling,
            schema: Some(reply.schema),
            stop: &[],
            token_choices: reply.token_choices,
        };
        let answer = effects.chat(request, Showing::Hidden).await?;
        state.usage.add(answer.usage);
        Ok(answer)
    }

    /// How likely the judge holds the request done: its verdict asked for
    /// alone, after the same `review` under the same `system` (a prompt
    /// cache holds all but the last line, so it costs a few tokens), and
    /// read from the likeliest choices of the token that says it
    /// (unreadable where they hold neither `true` nor `false` there). None
    /// where the provider gives no token choices.
    pub(crate) async fn likelihood_done<E: Effects>(
        &self,
        state: &mut AgentState,
        effects: &mut E,
        system: String,
        review: String,
    ) -> Result<Option<Confidence>, AgentError> {
        if !self.token_choices {
            return Ok(None);
        }
        let message = ChatMessage::user(format!("{review}{}", prompts::VERDICT_ALONE));
        let reply = Reply {
            schema: schemas::verdict_alone(),
            max_tokens: VERDICT_ALONE_TOKENS,
            token_choices: true,
        };
        let answer = self
            .judge_messages(state, effects, system, &[message], reply)
            .await?;
        let likelihood = likelihood_true(&answer.token_choices, schemas::DONE_FIELD);
        Ok(Some(Confidence::from_likelihood(likelihood)))
    }

    /// The model judgements go to.
    fn judge_model(&self) -> &str {
        self.judge_model.as_deref().unwrap_or(&self.model)
    }

    /// Like [`NodeSettings::answer`], for a short judgement (a verdict, a plan)
    /// that the kernel reads rather than shows, in the shape of `schema`
    /// where the provider enforces it.
    pub(crate) async fn judge<E: Effects>(
        &self,
        state: &mut AgentState,
        effects: &mut E,
        system: String,
        schema: AnswerSchema,
    ) -> Result<ChatOutcome, AgentError> {
        ask_model(
            state,
            effects,
            self,
            system,
            Call {
                model: self.judge_model(),
                max_tokens: JUDGEMENT_TOKENS,
                showing: Showing::Hidden,
                schema: Some(schema),
                stop: &[],
            },
        )
        .await
    }

    /// Like [`NodeSettings::judge`], with `question` asked after the
    /// conversation, which does not keep it. Asked under the system prompt
    /// of the turns that follow, it leaves them their prompt cached: a
    /// provider that caches prompts has all of it but the question.
    pub(crate) async fn judge_after<E: Effects>(
        &self,
        state: &mut AgentState,
        effects: &mut E,
        system: String,
        question: &str,
        schema: AnswerSchema,
    ) -> Result<ChatOutcome, AgentError> {
        let mut conversation = state.conversation.clone();
        // Merged into the user's last message, if the conversation ends so.
        conversation.push(ChatMessage::user(question));
        let reply = Reply::judgement(schema);
        self.judge_messages(state, effects, system, &conversation, reply)
            .await
    }
}

/// What one model call asks for besides the system prompt and the
/// conversation.
struct Call<'a> {
    model: &'a str,
    max_tokens: u32,
    showing: Showing,
    schema: Option<AnswerSchema>,
    stop: &'static [&'static str],
}

/// One model call over the conversation so far; its usage is counted.
async fn ask_model<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: &NodeSettings,
    system: String,
    call: Call<'_>,
) -> Result<ChatOutcome, AgentError> {
    if settings.vision {
        state.attach_new_figures();
    }
    let request = model_request(state, settings, system, &call);
    let answer = effects.chat(request, call.showing).await?;
    state.usage.add(answer.usage);
    Ok(answer)
}

/// The request of one model call over the conversation so far, within the
/// context window.
fn model_request(
    state: &AgentState,
    settings: &NodeSettings,
    system: String,
    call: &Call<'_>,
) -> ChatRequest {
    let messages = budget::fit(
        &system,
        &state.conversation,
        settings.context_tokens,
        call.max_tokens,
    );
    ChatRequest {
        model: call.model.to_owned(),
        system,
        messages,
        max_tokens: call.max_tokens,
        sampling: settings.sampling,
        schema: call.schema.clone(),
        stop: call.stop,
        token_choices: false,
    }
}

pub(crate) fn node<E: Effects>(
    f: impl for<'a> Fn(&'a mut AgentState, &'a mut E) -> NodeFuture<'a> + Send + Sync + 'static,
) -> NodeFn<AgentState, E> {
    Box::new(f)
}
/// The panel of a block shown while the answer streamed that never ran.
const NOT_RUN: &str = "(not run: a block before it failed)";

/// What running a turn's blocks gave.
pub(crate) struct BlocksRun {
    /// What the model is told about the blocks that ran, the code written
    /// out.
    pub report: String,
    /// The same, each block named by its place in the answer the report
    /// follows (for a conversation whose last message is that answer).
    pub report_below_answer: String,
    /// Whether the block that failed was a recent cell sent again (not run).
    pub copied: bool,
}

/// Whether `execution` is a cell the user ran, sent again and not run.
pub(crate) fn resent_cell(execution: &Execution) -> bool {
    execution.output == prompts::RECENT_CELL_AGAIN
}

/// Shows each pending block and, when `enabled`, runs it in order, stopping
/// at the first failure.
pub(crate) async fn run_pending<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    enabled: bool,
) -> Result<BlocksRun, AgentError> {
    let blocks = std::mem::take(&mut state.pending);
    let shown = std::mem::take(&mut state.blocks_shown);
    let mut reports = Vec::new();
    let mut below_answer = Vec::new();
    let of = blocks.len();
    let mut copied = false;
    for (index, block) in blocks.into_iter().enumerate() {
        let (turn, mut code) = (state.turn, block.code);
        if index >= shown {
            effects.emit(AgentEvent::Code {
                turn,
                block: index,
                code: code.clone(),
            });
        }
        if !enabled {
            continue;
        }
        copied = copied::copies_a_recent_cell(&code, &state.recent_cells);
        let mut left_out_copy = false;
        let execution = if copied {
            // The user ran it already: running it again would repeat
            // what it did, and do nothing the request asks.
            state.recent_cells_copied += 1;
            Execution::not_run(code.clone(), prompts::RECENT_CELL_AGAIN)
        } else {
            let execution = effects.execute(&code).await?;
            // Refused for what it copied from a cell the user ran (a file
            // that cell wrote): the rest runs, on what that cell made.
            let rest = errors::refused(&execution.output)
                .then(|| copied::without_copied_lines(&code, &state.recent_cells))
                .flatten();
            match rest {
                Some(rest) => {
                    effects.emit(AgentEvent::Status(
                        prompts::COPIED_LINES_LEFT_OUT.to_owned(),
                    ));
                    left_out_copy = true;
                    code = rest;
                    effects.execute(&code).await?
                }
                None => execution,
            }
        };
        let report = |code| {
            let report = prompts::execution_report(
                code,
                &execution.output,
                execution.failed,
                &execution.changes,
            );
            if left_out_copy {
                format!("{}\n{report}", prompts::COPIED_LINES_LEFT_OUT)
            } else {
                report
            }
        };
        reports.push(report(ReportedCode::Written(&code)));
        below_answer.push(report(ReportedCode::Above { index, of }));
        let failed = execution.failed;
        effects.emit(AgentEvent::Executed {
            turn,
            block: index,
            execution: execution.clone(),
        });
        state.executions.push(execution);
        if failed {
            // Later blocks likely depend on this one. Those already shown
            // (as the answer streamed) say that they did not run.
            for later in index + 1..shown {
                effects.emit(AgentEvent::Executed {
                    turn,
                    block: later,
                    execution: Execution::not_run("", NOT_RUN),
                });
            }
            break;
        }
    }
    Ok(BlocksRun {
        report: reports.join("\n\n"),
        report_below_answer: below_answer.join("\n\n"),
        copied,
    })
}

/// Ends a finished run with the review's answer in plain words, when it
/// gave one: shown, kept in the conversation, and what `ask()` returns.
pub(crate) fn close_with_answer<E: Effects>(state: &mut AgentState, effects: &mut E, answer: &str) {
    let answer = answer.trim();
    if answer.is_empty() {
        return;
    }
    effects.emit(AgentEvent::Answer(answer.to_owned()));
    state
        .conversation
        .push(ChatMessage::assistant(answer.to_owned()));
    state.answer = answer.to_owned();
}
