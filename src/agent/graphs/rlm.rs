//! The recursive search behind `rlm(query, context)` (seed 002): a sub-agent
//! that sees only a description of a large value, explores it with code
//! (peek, grep, partition, and `rlm()` again on parts) in a namespace of its
//! own, and ends by calling `FINAL(answer)` (an answer in words after code
//! has looked is made that call):
//!
//! ```text
//! explore -> extract -> (no code, nothing looked yet: asked for code) -> explore
//!                    -> run -> (FINAL called: end) -> (turns left: explore | end)
//! ```

use super::steps::{NodeSettings, node, run_pending};
use crate::agent::graph::{Activity, Graph, Route, nodes};
use crate::agent::llm::ChatMessage;
use crate::agent::parse::code::{bare_call, closed_code_blocks, code_blocks};
use crate::agent::prompts;
use crate::agent::run::{AgentError, AgentState, CodeBlock, Effects, Outcome};

/// What the sub-agent is told it searches.
#[derive(Debug, Clone)]
pub struct Search {
    pub query: String,
    /// The type, size and first characters of `context`.
    pub description: String,
    /// How many more levels of `rlm()` its code may open.
    pub depth_left: u32,
}

const NEEDS_CODE: &str = "Reply with a ```python block that explores `context`, \
and call FINAL(answer) once you know the answer.";

const LAST_TURN: &str = "This is your last turn: call FINAL(answer) now, \
with the best answer the results so far support.";

nodes! {
    /// The search graph's nodes.
    pub enum Step {
        Explore = "explore", Some(Activity::WritingCode);
        Extract = "extract", None;
        Run = "run", Some(Activity::RunningCode);
    }
}

/// The search graph for `search`, ending after `max_turns` turns.
pub fn rlm_graph<E: Effects>(
    settings: NodeSettings,
    search: Search,
    max_turns: u32,
) -> Graph<AgentState, E, Step> {
    let explore_settings = settings.clone();
    let execute = settings.execute;
    Graph::new(Step::Explore, (max_turns as usize) * 3 + 3)
        .node(
            Step::Explore,
            node(move |s, e| Box::pin(explore(s, e, explore_settings.clone(), search.clone()))),
        )
        .node(
            Step::Extract,
            node(|s, _e| Box::pin(async move { extract(s) })),
        )
        .node(Step::Run, node(move |s, e| Box::pin(run(s, e, execute))))
        .edge(Step::Explore, Route::To(Step::Extract))
        .conditional_edge(
            Step::Extract,
            &[Route::End, Route::To(Step::Explore), Route::To(Step::Run)],
            |s: &AgentState| match (s.outcome, s.pending.is_empty()) {
                (Some(_), _) => Route::End,
                (None, true) => Route::To(Step::Explore),
                (None, false) => Route::To(Step::Run),
            },
        )
        .conditional_edge(
            Step::Run,
            &[Route::End, Route::To(Step::Explore)],
            |s: &AgentState| match s.outcome {
                Some(_) => Route::End,
                None => Route::To(Step::Explore),
            },
        )
}

async fn explore<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    settings: NodeSettings,
    search: Search,
) -> Result<(), AgentError> {
    let system = prompts::rlm(
        &search.query,
        &search.description,
        search.depth_left,
        state.max_turns,
    );
    let answer = settings.write_code(state, effects, system).await?;
    state.truncated = answer.truncated;
    state.record_answer(answer.text);
    Ok(())
}

fn extract(state: &mut AgentState) -> Result<(), AgentError> {
    // A block cut off half-written would fail: only closed ones run.
    state.pending = if state.truncated {
        closed_code_blocks(&state.answer)
    } else {
        code_blocks(&state.answer)
    };
    if state.pending.is_empty() && !state.truncated {
        // Every turn of a search is code: a lone call written without a
        // fence is run, not sent back.
        state.pending.extend(bare_call(&state.answer));
    }
    if !state.pending.is_empty() {
        return Ok(());
    }
    if state.truncated {
        // What was cut is no answer in words either.
        if state.turn < state.max_turns {
            state
                .conversation
                .push(ChatMessage::user(prompts::CUT_OFF.to_owned()));
        } else {
            state.outcome = Some(Outcome::MaxTurns);
        }
        return Ok(());
    }
    let looked = state.executions.iter().any(|e| !e.failed);
    let words = state.answer.trim();
    if looked && !words.is_empty() {
        // Words after code looked are what the search found (asked for
        // FINAL instead, the local model wrote the example back): returned
        // as FINAL returns it (a JSON string is a Python string literal).
        let literal = serde_json::Value::from(words).to_string();
        state.pending.push(CodeBlock {
            code: format!("FINAL({literal})"),
        });
    } else if state.turn < state.max_turns {
        state.conversation.push(ChatMessage::user(NEEDS_CODE));
    } else {
        state.outcome = Some(Outcome::MaxTurns);
    }
    Ok(())
}

async fn run<E: Effects>(
    state: &mut AgentState,
    effects: &mut E,
    execute: bool,
) -> Result<(), AgentError> {
    let ran = run_pending(state, effects, execute).await?;
    if state.executions.iter().any(|e| e.finished) {
        // FINAL's answer is what the search found, in words: nothing has
        // checked it, so it is answered, not done.
        state.outcome = Some(Outcome::Answered);
    } else if !execute {
        state.outcome = Some(Outcome::Answered);
    } else if state.turn >= state.max_turns {
        state.outcome = Some(Outcome::MaxTurns);
    } else {
        let mut report = ran.report;
        if state.turn + 1 == state.max_turns {
            report = format!("{report}\n\n{LAST_TURN}");
        }
        state.conversation.push(ChatMessage::user(report));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::run::Execution;
    use crate::agent::script::{Script, ok};

    fn settings() -> NodeSettings {
        NodeSettings::for_tests()
    }

    fn search() -> Search {
        Search {
            query: "where does it fail?".into(),
            description: "str, 50000 characters; it begins: boot".into(),
            depth_left: 2,
        }
    }

    fn run_graph(script: &mut Script, max_turns: u32) -> AgentState {
        let mut state = AgentState::new(search().query, Vec::new(), max_turns);
        let graph = rlm_graph::<Script>(settings(), search(), max_turns);
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(graph.run(&mut state, script))
            .unwrap();
        state
    }

    fn final_called(code: &str) -> Execution {
        Execution {
            finished: code.contains("FINAL("),
            changes: Vec::new(),
            rich_outputs: 0,
            images: Vec::new(),
            ..ok(code)
        }
    }

    #[test]
    fn explores_until_final_is_called() {
        let mut script = Script::new(
            &[
                "```python\nprint(grep(context, 'ERROR'))\n```",
                "```python\nFINAL('line 7')\n```",
            ],
            final_called,
        );
        let state = run_graph(&mut script, 10);
        assert_eq!(state.outcome, Some(Outcome::Answered));
        assert_eq!(state.turn, 2);
        assert_eq!(
            script.executed,
            ["print(grep(context, 'ERROR'))", "FINAL('line 7')"]
        );
        // The prompt describes the data and the question, not the data itself.
        let system = &script.requests[0].system;
        assert!(system.contains("where does it fail?") && system.contains("50000 characters"));
        assert!(system.contains("2 more levels"), "{system}");
        // The second turn saw what the first printed.
        assert!(
            script.requests[1]
                .messages
                .last()
                .unwrap()
                .content
                .contains("42")
        );
    }

    #[test]
    fn an_answer_without_code_is_asked_for_code() {
        let mut script = Script::new(
            &["I think it is line 7.", "```python\nFINAL(7)\n```"],
            final_called,
        );
        let state = run_graph(&mut script, 10);
        assert_eq!(state.outcome, Some(Outcome::Answered));
        assert!(
            script.requests[1]
                .messages
                .last()
                .unwrap()
                .content
                .contains("FINAL(answer)")
        );
    }

    #[test]
    fn a_lone_call_written_without_a_fence_runs() {
        // As the local model answered the demo's search at first.
        let mut script = Script::new(&["grep('ERROR')", "```python\nFINAL(7)\n```"], final_called);
        let state = run_graph(&mut script, 10);
        assert_eq!(state.outcome, Some(Outcome::Answered));
        assert_eq!(script.executed, ["grep('ERROR')", "FINAL(7)"]);
    }

    #[test]
    fn words_after_code_looked_are_the_answer() {
        let mut script = Script::new(
            &["```python\ngrep('ERROR')\n```", "Line \"7\"."],
            final_called,
        );
        let state = run_graph(&mut script, 3);
        assert_eq!(
            script.executed,
            ["grep('ERROR')", "FINAL(\"Line \\\"7\\\".\")"]
        );
        assert_eq!(state.outcome, Some(Outcome::Answered));
        assert_eq!(state.turn, 2);
    }

    #[test]
    fn an_answer_cut_off_mid_block_runs_nothing_of_it_and_asks_again() {
        // After code has looked, words would be taken as the answer: the
        // cut answer's are not.
        let mut script = Script::new(
            &[
                "```python\ngrep('ERROR')\n```",
                "It fails at\n```python\nlines = [",
                "```python\nFINAL(7)\n```",
            ],
            final_called,
        );
        script.truncate_at = Some(1);
        let state = run_graph(&mut script, 5);
        assert_eq!(script.executed, ["grep('ERROR')", "FINAL(7)"]);
        let told = &script.requests[2].messages.last().unwrap().content;
        assert!(told.starts_with(prompts::CUT_OFF), "{told}");
        assert_eq!(state.outcome, Some(Outcome::Answered));
    }

    #[test]
    fn the_turn_limit_ends_a_search_without_final_and_warns_before() {
        let mut script = Script::new(
            &["```python\npeek(context)\n```", "```python\nprint(1)\n```"],
            final_called,
        );
        let state = run_graph(&mut script, 2);
        assert_eq!(state.outcome, Some(Outcome::MaxTurns));
        let last = &script.requests[1].messages.last().unwrap().content;
        assert!(last.contains("last turn"), "{last}");
    }
}
