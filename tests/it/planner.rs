//! `%%ask --graph planner` through the real kernel, against a scripted model
//! over real HTTP: each action (a tool, Python, the final answer), an
//! unknown action, the turn limit, and the informer.

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{Kernel, is_panel, panel_texts, result_text, stream_text, told_model};

fn answers(texts: &[&str]) -> Vec<Reply> {
    texts.iter().map(|t| Reply::Answer((*t).into())).collect()
}

/// The kinds of the run's panels, in order.
fn panel_kinds(iopub: &[mahtab::wire::Message]) -> Vec<String> {
    iopub
        .iter()
        .filter(|m| is_panel(m))
        .filter_map(|m| m.content["metadata"]["mahtab"]["kind"].as_str())
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_planner_calls_a_tool_runs_python_and_finishes_with_an_answer() {
    let llm = FakeLlm::start(answers(&[
        "Thought: first I look at prices.\nAction: describe\nAction Input: prices",
        "Thought: now the sum.\nAction: python\nAction Input:\n```python\ntotal = sum(prices)\nprint(total)\n```",
        "Thought: I know it.\nFinal Answer: The prices add up to 6.",
        r#"{"is_complete": true, "reasoning": "the sum is 6", "next_action": ""}"#,
    ]))
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute("prices = [1, 2, 3]").await;
    let (reply, iopub) = kernel
        .execute("%%ask --graph planner\nWhat do the prices add up to?")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert_eq!(
        panel_kinds(&iopub),
        ["code", "output", "code", "output", "changes", "summary"]
    );
    assert_eq!(
        panel_texts(&iopub, "code"),
        [
            "[code, turn 1]\nprint(describe(prices))",
            "[code, turn 2]\ntotal = sum(prices)\nprint(total)"
        ]
    );
    let outputs = panel_texts(&iopub, "output");
    assert!(
        outputs[0] == "[output]\nlist, 3 items of int\n[1, 2, 3]",
        "{outputs:?}"
    );
    assert_eq!(outputs[1], "[output]\n6");
    // Thoughts and actions stream; the code itself shows only in its panel.
    let streamed = stream_text(&iopub, "stdout");
    assert!(
        streamed.contains("Thought: first I look at prices.")
            && streamed.contains("Final Answer: The prices add up to 6."),
        "{streamed}"
    );
    assert!(!streamed.contains("total = sum"), "{streamed}");
    let summary = &panel_texts(&iopub, "summary")[0];
    assert!(
        summary.starts_with("done · ") && summary.contains("3 turns"),
        "{summary}"
    );

    // The planner was told each observation, and its prompt the actions.
    let observation = llm.last_message(1);
    assert!(
        observation.starts_with("Observation:") && observation.contains("3 items of int"),
        "{observation}"
    );
    assert!(llm.last_message(2).contains("6"));
    // The model stops where an observation would begin: it is the kernel's.
    assert_eq!(
        llm.requests.lock().unwrap()[0]["stop"],
        serde_json::json!(["\nObservation:"])
    );
    let system = llm.requests.lock().unwrap()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains("Action Input:") && system.contains("- describe(value)"),
        "{system}"
    );
    let (_, iopub) = kernel.execute("total").await;
    assert_eq!(result_text(&iopub), "6");
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_actions_and_failures_reach_the_planner_and_the_turn_limit_ends_the_run() {
    let llm = FakeLlm::start(answers(&[
        "Action: frobnicate\nAction Input: prices",
        "Action: python\nAction Input: undefined_name",
        "Action: grep\nAction Input: notes, \"b\"",
    ]))
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute("notes = 'a\\nb\\nc'").await;
    let (reply, iopub) = kernel
        .execute("%%ask --graph planner --max-turns 3\nfind b")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let actions = panel_texts(&iopub, "code");
    assert_eq!(
        actions,
        [
            "[code, turn 1]\nfrobnicate(prices)",
            "[code, turn 2]\nundefined_name",
            "[code, turn 3]\nprint(grep(notes, \"b\"))"
        ]
    );
    let errors = panel_texts(&iopub, "error");
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].contains("no action named \"frobnicate\""),
        "{errors:?}"
    );
    assert!(errors[1].contains("NameError"), "{errors:?}");
    assert!(llm.last_message(1).contains("frobnicate"));
    assert!(llm.last_message(2).contains("NameError"));
    // The third action ran, and then the turns were over.
    assert_eq!(panel_texts(&iopub, "output"), ["[output]\n2: b"]);
    assert_eq!(llm.requests.lock().unwrap().len(), 3);
    let summary = &panel_texts(&iopub, "summary")[0];
    assert!(
        summary.starts_with("stopped at the turn limit"),
        "{summary}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_informer_describes_the_named_variables_first_and_when_asked() {
    let llm = FakeLlm::start(answers(&[
        "Thought: I should see notes too.\nAction: inform\nAction Input: notes",
        "Final Answer: prices are floats and notes is text.",
    ]))
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel
        .execute("prices = [1.5, 2.5]\nnotes = 'first line\\nsecond line'\nother = {'k': 1}")
        .await;
    let (reply, iopub) = kernel
        .execute(
            "answer = ask('What are the prices like?', graph='planner', informer=True)\nanswer",
        )
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let informed = panel_texts(&iopub, "key_information");
    assert_eq!(informed.len(), 2, "{informed:?}");
    assert!(
        informed[0].starts_with("[key information] prices\n")
            && informed[0].contains("prices: list, 2 items of float"),
        "{informed:?}"
    );
    assert!(
        informed[1].starts_with("[key information] notes\n")
            && informed[1].contains("str, 22 characters, 2 lines"),
        "{informed:?}"
    );
    let requests = llm.requests.lock().unwrap().clone();
    let system = |n: usize| told_model(&requests[n]);
    let key_information = |n: usize| {
        let system = system(n);
        let section = system
            .split("## Key information\n")
            .nth(1)
            .unwrap_or_default();
        section
            .split("## Tools")
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        key_information(0).starts_with("prices: list, 2 items of float")
            && !key_information(0).contains("other"),
        "{}",
        system(0)
    );
    assert!(key_information(1).contains("notes: str"), "{}", system(1));
    assert!(llm.last_message(1).contains("described notes"));
    assert_eq!(
        result_text(&iopub),
        "'prices are floats and notes is text.'"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_informer_goes_with_the_planner_graph_and_the_graph_draws() {
    let mut kernel = Kernel::start().await;
    let (reply, _) = kernel.execute("%%ask --informer\nwhat is x?").await;
    assert_eq!(reply.content["status"], "error");
    let evalue = reply.content["evalue"].as_str().unwrap();
    assert!(
        evalue.contains("--informer goes with --graph planner"),
        "{evalue}"
    );

    let (_, iopub) = kernel.execute("%ask_graph planner").await;
    let drawn = panel_texts(&iopub, "graph");
    for edge in [
        "__start__ --> informer",
        "informer --> planner",
        "planner -.-> tool",
        "planner -.-> informer",
        "planner -.-> __end__",
        "tool -.-> planner",
    ] {
        assert!(drawn[0].contains(edge), "{edge} missing from {drawn:?}");
    }
}
