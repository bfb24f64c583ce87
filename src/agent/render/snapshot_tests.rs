//! Every kind of panel and line a run shows, as the exact IOPub content it
//! becomes, against snapshots kept in `snapshots/`: a change to how a run
//! looks shows up as a diff of those files, reviewed like code.

use std::time::Duration;

use super::*;
use crate::agent::graph::RunEnd;
use crate::agent::run::{KeyInformation, Verdict};

/// The message type and content, as a reviewer reads them.
fn shown(items: &[(&str, Shown)]) -> String {
    items
        .iter()
        .map(|(what, shown)| {
            let content = serde_json::to_string_pretty(&shown.content()).unwrap();
            format!("--- {what}: {}\n{content}", shown.msg_type())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn execution(output: &str, failed: bool) -> Execution {
    Execution {
        code: "total = prices.sum()\nprint(total)".into(),
        output: output.into(),
        shown: None,
        failed,
        finished: false,
        changes: vec!["total = 6 (int, new)".into()],
        rich_outputs: 0,
        images: Vec::new(),
    }
}

fn verdict(is_complete: bool, cannot_fix: bool, reasoning: &str, answer: &str) -> Verdict {
    Verdict {
        is_complete,
        cannot_fix,
        reasoning: reasoning.into(),
        next_action: if is_complete { "" } else { "print the total" }.into(),
        answer: answer.into(),
        parsed: true,
        confidence: None,
        needed: None,
        cross_check: None,
    }
}

#[test]
fn code_and_its_outcome() {
    let panels = shown(&[
        (
            "code",
            event(&AgentEvent::Code {
                turn: 1,
                block: 0,
                code: "total = prices.sum()\nprint(total)".into(),
            }),
        ),
        (
            "output",
            event(&AgentEvent::Executed {
                turn: 1,
                block: 0,
                execution: execution("6\n", false),
            }),
        ),
        (
            "error",
            event(&AgentEvent::Executed {
                turn: 2,
                block: 1,
                execution: execution(
                    "Traceback (most recent call last):\nNameError: name 'prices' is not defined",
                    true,
                ),
            }),
        ),
        (
            "rich output shown as it came",
            event(&AgentEvent::Executed {
                turn: 1,
                block: 0,
                execution: Execution {
                    shown: Some("[a figure was shown above]".into()),
                    rich_outputs: 1,
                    images: Vec::new(),
                    ..execution("<Figure size 640x480 with 1 Axes>", false)
                },
            }),
        ),
    ]);
    insta::assert_snapshot!(panels);
}

#[test]
fn reviews_plans_and_answers() {
    let key_information: Vec<KeyInformation> = vec![(
        "sales".into(),
        "DataFrame 3 rows × 2 columns: fruit (object), price (int64)".into(),
    )];
    let panels = shown(&[
        (
            "done",
            event(&AgentEvent::Verdict(verdict(
                true,
                false,
                "the total was printed",
                "The total is 6.",
            ))),
        ),
        (
            "not done",
            event(&AgentEvent::Verdict(verdict(
                false,
                false,
                "nothing was printed",
                "",
            ))),
        ),
        (
            "cannot be done",
            event(&AgentEvent::Verdict(verdict(
                false,
                true,
                "sales.csv does not exist here",
                "",
            ))),
        ),
        (
            "plan",
            event(&AgentEvent::Plan(Plan {
                needs_code: true,
                needs_evaluation: true,
                needs_explanation: true,
                reasoning: "the data must be summed".into(),
                parsed: true,
            })),
        ),
        (
            "gave up",
            event(&AgentEvent::GaveUp {
                failed: vec![execution("NameError: name 'prices' is not defined", true)],
            }),
        ),
        ("informed", event(&AgentEvent::Informed(key_information))),
        (
            "status",
            event(&AgentEvent::Status("triage: delegate to analyst".into())),
        ),
        (
            "answer",
            event(&AgentEvent::Answer("The total is 6.\n".into())),
        ),
    ]);
    insta::assert_snapshot!(panels);
}

#[test]
fn the_run_around_the_work() {
    let mut state = AgentState::new("sum the prices", Vec::new(), 5);
    state.turn = 2;
    state.outcome = Some(Outcome::Complete);
    state.checked = vec!["total: int: 6".into()];
    state.usage = Usage {
        input_tokens: 1200,
        output_tokens: 80,
        cache_read_tokens: 800,
        cost_usd: Some(0.0042),
        ..Default::default()
    };
    let steps = [
        TraceStep {
            node: "generate",
            took: Duration::from_millis(1500),
        },
        TraceStep {
            node: "execute",
            took: Duration::from_millis(20),
        },
        TraceStep {
            node: "reflect",
            took: Duration::from_millis(700),
        },
        TraceStep {
            node: "generate",
            took: Duration::from_millis(900),
        },
    ];
    let session = Usage {
        input_tokens: 5000,
        output_tokens: 300,
        cost_usd: None,
        ..Default::default()
    };
    let panels = shown(&[
        (
            "summary",
            summary(
                "openai",
                "qwen2.5-coder",
                &state,
                RunEnd::Finished { steps: 4 },
                Duration::from_millis(3200),
                Some(&session),
            ),
        ),
        ("trace", trace(&steps, &state, Duration::from_millis(3200))),
        (
            "status line",
            status("running code", "run-1", Placement::New),
        ),
        ("status cleared", status("", "run-1", Placement::InPlace)),
        (
            "setup",
            setup("Set OPENAI_API_KEY, or install the local model."),
        ),
        (
            "graph",
            graph("default", "flowchart TD\n    generate --> execute"),
        ),
        (
            "graph list",
            graph_list(&[("default", "the loop"), ("rlm", "the search")]),
        ),
        (
            "changed",
            changes(&RunChanges {
                added: vec!["total: int = 6".into()],
                changed: vec!["sales: DataFrame 3x2 -> DataFrame 3x3".into()],
                removed: vec!["tmp (was list len 2 = [1, 2])".into()],
                files: vec!["report.csv (created)".into()],
                not_restorable: vec!["model (a Model cannot be copied)".into()],
            })
            .expect("a panel"),
        ),
    ]);
    insta::assert_snapshot!(panels);
    assert!(changes(&RunChanges::default()).is_none());
}
