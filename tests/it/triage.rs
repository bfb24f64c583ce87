//! `%%ask --graph triage` through the real kernel, against a scripted model
//! over real HTTP: the pattern fast path, a greeting, the last error, a
//! confident classification, a plan, a review loop with a local repair,
//! pruning to the context window, the claude CLI as an agent, and the
//! drawing.

use serde_json::json;

use crate::fake_claude;
use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{Kernel, TempDir, panel_texts, result_text, stream_text};

const DONE: &str = r#"{"is_complete": true, "reasoning": "met", "next_action": ""}"#;
const NOT_DONE: &str =
    r#"{"is_complete": false, "reasoning": "the total is missing", "next_action": "add them up"}"#;
const UNSURE: &str = r#"{"agent": "planner", "confidence": 0.3}"#;

fn answers(texts: &[&str]) -> Vec<Reply> {
    texts.iter().map(|t| Reply::Answer((*t).into())).collect()
}

fn request_count(llm: &FakeLlm) -> usize {
    llm.requests.lock().unwrap().len()
}

#[tokio::test(flavor = "multi_thread")]
async fn plain_requests_take_the_fast_path_and_greetings_need_no_model() {
    let llm = FakeLlm::start(answers(&[DONE])).await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute("prices = [1, 2, 3]").await;
    let (reply, iopub) = kernel
        .execute("%%ask --graph triage\ndescribe prices")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let streamed = stream_text(&iopub, "stdout");
    assert!(
        streamed.starts_with("triage: runs print(describe(prices)) (no model call)\n"),
        "{streamed}"
    );
    assert_eq!(
        panel_texts(&iopub, "code"),
        ["[code, turn 0]\nprint(describe(prices))"]
    );
    assert_eq!(
        panel_texts(&iopub, "output"),
        ["[output]\nlist, 3 items of int\n[1, 2, 3]"]
    );
    // Only the review asked the model, and it saw the tool's output.
    assert_eq!(request_count(&llm), 1);
    assert!(llm.last_prompt().contains("3 items of int"));
    assert!(panel_texts(&iopub, "summary")[0].starts_with("done · "));

    let (reply, iopub) = kernel.execute("%%ask --graph triage\nThanks!").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert!(stream_text(&iopub, "stdout").contains("You're welcome.\n"));
    assert_eq!(request_count(&llm), 1, "a greeting asks no model");
    assert!(panel_texts(&iopub, "summary")[0].starts_with("answered · "));
}

#[tokio::test(flavor = "multi_thread")]
async fn explaining_the_last_error_hands_its_traceback_to_an_agent() {
    let llm = FakeLlm::start(answers(&[
        "Your last cell divided by zero; check the divisor first.",
        DONE,
    ]))
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, _) = kernel.execute("count = 0\nratio = 10 / count").await;
    assert_eq!(reply.content["status"], "error");
    kernel
        .execute("print('an unrelated cell that works')")
        .await;
    let (reply, iopub) = kernel
        .execute("%%ask --graph triage\nWhy did that fail?")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert!(
        stream_text(&iopub, "stdout")
            .contains("triage: the default agent takes it (no model call)")
    );
    let asked = llm.last_message(0);
    assert!(
        asked.contains("Why did that fail?")
            && asked.contains("ratio = 10 / count")
            && asked.contains("ZeroDivisionError"),
        "{asked}"
    );
    assert!(!asked.contains("\u{1b}["), "no colour codes: {asked}");
    assert_eq!(request_count(&llm), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plan_delegates_a_failure_is_repaired_and_the_review_loops_to_a_confident_agent() {
    let llm = FakeLlm::start(answers(&[
        // Pass 1: unsure, so a plan; the planner's code lacks an import.
        UNSURE,
        r#"{"action": "delegate", "agent": "planner", "task": "print the prices as JSON", "reasoning": "a small step"}"#,
        "Action: python\nAction Input: print(json.dumps(prices))",
        "Final Answer: printed.",
        DONE, // the planner's check of its task
        NOT_DONE, // the triage's check of the request, after the repair
        // Pass 2: the classification is sure this time, and hands over the
        // request itself: the default graph's check of it stands.
        r#"{"agent": "default", "confidence": 0.96}"#,
        "```python\nprices_total = sum(prices)\nprint(prices_total)\n```",
        DONE,
    ]))
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute("prices = [1, 2, 3]").await;
    let (reply, iopub) = kernel
        .execute("%%ask --graph triage --trace\nshow the prices as JSON and their total")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let streamed = stream_text(&iopub, "stdout");
    for line in [
        "triage: planning\n",
        "triage: the planner agent takes it\n",
        "repair: added `import json`\n",
        "↻ not done yet: the total is missing Next: add them up\n",
        "triage: the default agent takes it (confidence 0.96)\n",
    ] {
        assert!(streamed.contains(line), "{line:?} missing from\n{streamed}");
    }
    let outputs = panel_texts(&iopub, "output");
    assert_eq!(
        outputs,
        ["[output]\n[1, 2, 3]", "[output]\n6"],
        "{outputs:?}"
    );
    assert_eq!(panel_texts(&iopub, "error").len(), 1);
    assert_eq!(request_count(&llm), 9);
    // Classifications, plans and verdicts were asked for in their schema's
    // shape; the agents' own answers are free text.
    let schemas: Vec<Option<String>> = llm
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| {
            r["response_format"]["json_schema"]["name"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    let named = |name: &str| Some(name.to_owned());
    assert_eq!(
        schemas,
        [
            named("classification"),
            named("triage_plan"),
            None,
            None,
            named("verdict"),
            named("verdict"),
            named("classification"),
            None,
            named("verdict"),
        ]
    );
    let classification =
        llm.requests.lock().unwrap()[0]["response_format"]["json_schema"]["schema"].clone();
    assert_eq!(
        classification["properties"]["agent"]["enum"],
        json!(["default", "analyst", "planner"]),
        "{classification}"
    );
    // The second pass's classification came after the review's reasons.
    assert!(llm.last_message(6).contains("the total is missing"));
    let summary = &panel_texts(&iopub, "summary")[0];
    assert!(summary.starts_with("done · "), "{summary}");
    let trace = &panel_texts(&iopub, "trace")[0];
    assert!(
        trace.contains("repair") && trace.contains("planner"),
        "{trace}"
    );
    let (_, iopub) = kernel.execute("prices_total").await;
    assert_eq!(result_text(&iopub), "6");
}

#[tokio::test(flavor = "multi_thread")]
async fn long_review_loops_are_pruned_to_the_context_window() {
    let peek = r#"{"action": "tool", "tool": "peek", "input": "log, 9000"}"#;
    let llm = FakeLlm::start(answers(&[
        UNSURE, peek, NOT_DONE, UNSURE, peek, NOT_DONE, UNSURE, peek, DONE,
    ]))
    .await;
    let mut env = llm.env();
    env.push(("MAHTAB_CONTEXT_TOKENS", "5000".into()));
    let mut kernel = Kernel::start_with_env(&env).await;
    kernel
        .execute("log = '\\n'.join(f'line {i:05d} of the log' for i in range(2000))")
        .await;
    let (reply, iopub) = kernel
        .execute("%%ask --graph triage --max-turns 5\nfind the odd line in log")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert_eq!(panel_texts(&iopub, "output").len(), 3);
    let requests = llm.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 9);
    for (n, request) in requests.iter().enumerate() {
        let chars: usize = request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"].as_str().unwrap().len())
            .sum();
        // Within the window as the kernel estimates it (three bytes a token),
        // the system prompt included.
        assert!(chars < 5000 * 3, "request {n} sent {chars} characters");
    }
    // The last plan was shortened in the middle: the request leads.
    let last = requests[requests.len() - 2]["messages"].as_array().unwrap();
    let text: Vec<_> = last
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    let text = text.join("\n");
    assert!(text.contains("characters left out"), "{text}");
    assert!(text.starts_with("find the odd line in log"), "{text}");
    // The review reads this pass's work alone, and whole.
    let review = requests.last().unwrap()["messages"][1]["content"]
        .as_str()
        .unwrap();
    assert!(
        review.starts_with("Request:\nfind the odd line in log")
            && review.contains("line 00299 of the log"),
        "{review}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_installed_claude_cli_is_an_agent_the_plan_can_hand_work_to() {
    let dir = TempDir::new("claude-agent");
    fake_claude::answering(
        &dir.0,
        &[
            "Squaring them.\n```python\nsquares = [p * p for p in prices]\nprint(squares)\n```",
            r#"{"is_complete": true, "reasoning": "printed the squares", "next_action": ""}"#,
        ],
    );
    let llm = FakeLlm::start(answers(&[
        r#"{"agent": "claude", "confidence": 0.5}"#,
        r#"{"action": "delegate", "agent": "claude", "task": "square the prices", "reasoning": "hard"}"#,
        DONE,
    ]))
    .await;
    let mut env = llm.env();
    env.push(("PATH", fake_claude::path_with(&dir.0)));
    let mut kernel = Kernel::start_with_env(&env).await;
    kernel.execute("prices = [1, 2, 3]").await;
    let (reply, iopub) = kernel
        .execute("%%ask --graph triage\nsquare each price")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let streamed = stream_text(&iopub, "stdout");
    assert!(
        streamed.contains("triage: the claude agent takes it\n")
            && streamed.contains("Squaring them."),
        "{streamed}"
    );
    assert_eq!(panel_texts(&iopub, "output"), ["[output]\n[1, 4, 9]"]);
    // The plan was offered the CLI; the CLI got the task, and the triage's
    // own review went back to the configured provider.
    assert!(
        llm.requests.lock().unwrap()[1]
            .to_string()
            .contains("- claude: ")
    );
    assert!(fake_claude::stdin_of(&dir.0, 1).contains("square the prices"));
    assert!(fake_claude::stdin_of(&dir.0, 2).contains("[1, 4, 9]"));
    assert_eq!(request_count(&llm), 3);
    assert!(llm.last_prompt().contains("[1, 4, 9]"));
    let (_, iopub) = kernel.execute("squares").await;
    assert_eq!(result_text(&iopub), "[1, 4, 9]");

    // Turned off in the settings, it is not offered, and a plan that names
    // it goes to the default agent.
    let llm = FakeLlm::start(answers(&[
        r#"{"agent": "claude", "confidence": 0.99}"#,
        r#"{"action": "delegate", "agent": "claude", "task": "cube the prices"}"#,
        "```python\ncubes = [p ** 3 for p in prices]\n```",
        DONE,
        DONE,
    ]))
    .await;
    let mut env = llm.env();
    env.push(("PATH", fake_claude::path_with(&dir.0)));
    env.push(("MAHTAB_CLAUDE_AGENT", "0".into()));
    let mut kernel = Kernel::start_with_env(&env).await;
    kernel.execute("prices = [1, 2, 3]").await;
    let (reply, iopub) = kernel
        .execute("%%ask --graph triage\ncube each price")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert!(stream_text(&iopub, "stdout").contains("triage: the default agent takes it\n"));
    assert!(
        !llm.requests.lock().unwrap()[0]
            .to_string()
            .contains("claude:")
    );
    assert_eq!(request_count(&llm), 5);
    assert_eq!(
        fake_claude::stdin_of(&dir.0, 3),
        "",
        "the CLI was not called"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_triage_graph_draws_with_its_review_loop() {
    let mut kernel = Kernel::start().await;
    let (_, iopub) = kernel.execute("%ask_graph triage").await;
    let drawn = panel_texts(&iopub, "graph");
    for edge in [
        "__start__ --> pre_plan",
        "pre_plan -.-> tool",
        "pre_plan -.-> classify",
        "classify -.-> plan",
        "plan -.-> delegate",
        "delegate -.-> repair",
        "repair --> review",
        "review -.-> pre_plan",
        "respond --> __end__",
    ] {
        assert!(drawn[0].contains(edge), "{edge} missing from {drawn:?}");
    }
}
