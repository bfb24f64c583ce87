//! `%%ask` cells through the real kernel, against a real HTTP server that
//! speaks the OpenAI streaming format with scripted answers.

use std::time::Duration;

use serde_json::json;

use mahtab::wire::Message;

use crate::fake_llm::{Event, FakeLlm, Reply, Step, repeating};
use crate::support::{
    Channel, Kernel, is_panel, is_status, panel_texts, result_text, stream_text, told_model, types,
};

pub(crate) const DONE: &str =
    r#"{"is_complete": true, "reasoning": "the answer is 42", "next_action": ""}"#;

#[tokio::test(flavor = "multi_thread")]
async fn ask_streams_text_runs_code_in_the_namespace_and_shows_panels() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("Let me compute it.\n```python\nanswer = 6 * 7\nprint(answer)\n```".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute("base = 6").await;
    let (reply, iopub) = kernel
        .execute("%%ask\nWhat is {base} times seven? {{no interpolation}} {missing}")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let text = stream_text(&iopub, "stdout");
    assert!(text.starts_with("Let me compute it.\n"), "{text}");
    // The code shows once: in its panel, not in the streamed text.
    assert!(!text.contains("answer = 6 * 7"), "{text}");
    let panels: Vec<_> = iopub.iter().filter(|m| is_panel(m)).collect();
    let kinds: Vec<_> = panels
        .iter()
        .map(|m| m.content["metadata"]["mahtab"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["code", "output", "changes", "summary"]);
    assert!(
        panels[0].content["data"]["text/plain"]
            .as_str()
            .unwrap()
            .contains("answer = 6 * 7")
    );
    assert!(
        panels[0].content["data"]["text/markdown"]
            .as_str()
            .unwrap()
            .contains("```python")
    );
    assert!(
        panels[1].content["data"]["text/plain"]
            .as_str()
            .unwrap()
            .contains("42")
    );
    let changed = panels[2].content["data"]["text/plain"].as_str().unwrap();
    assert!(changed.contains("added    answer: int = 42"), "{changed}");
    let summary = panels[3].content["data"]["text/plain"].as_str().unwrap();
    assert!(
        summary.contains("fake-model") && summary.contains("1 turn"),
        "{summary}"
    );
    // Streamed text arrives coalesced, not one message per chunk.
    let streams = iopub
        .iter()
        .filter(|m| m.header.msg_type == "stream")
        .count();
    assert!(streams < 12, "{streams} stream messages");

    // What the agent defined, the next cell sees.
    let (_, iopub) = kernel.execute("answer").await;
    let result = result_text(&iopub);
    assert_eq!(result, "42");

    // The model was told about the namespace and saw the execution output.
    let requests = llm.requests.lock().unwrap().clone();
    let told = told_model(&requests[0]);
    assert!(told.contains("base: int = 6"), "{told}");
    // The cells run since the last request, and the prompt with {name} filled in.
    assert!(
        told.contains(
            "```python
base = 6
```"
        ),
        "{told}"
    );
    let asked = requests[0]["messages"][1]["content"].as_str().unwrap();
    assert_eq!(asked, "What is 6 times seven? {no interpolation} {missing}");
    let reflect = requests[1]["messages"].as_array().unwrap();
    assert!(
        reflect.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .contains("42")
    );
    assert_eq!(requests[0]["stream"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn ask_without_a_provider_explains_how_to_configure_one() {
    let mut kernel = Kernel::start_with_env(&[("MAHTAB_LOCAL_MODEL", "0".into())]).await;
    let (reply, iopub) = kernel.execute("%%ask\nhello").await;
    assert_eq!(reply.content["status"], "error");
    assert_eq!(reply.content["ename"], "AskConfigError");
    assert_eq!(
        types(&iopub),
        ["status", "execute_input", "display_data", "error", "status"]
    );
    // The panel says how; the error only points at it.
    let how = &panel_texts(&iopub, "setup")[0];
    for setting in [
        "ANTHROPIC_API_KEY",
        "OPENAI_BASE_URL",
        "config.toml",
        "--provider",
    ] {
        assert!(how.contains(setting), "{how}");
    }
    assert!(iopub[2].content["data"]["text/markdown"].is_string());
    assert!(
        reply.content["evalue"]
            .as_str()
            .unwrap()
            .contains("panel above")
    );
    let (reply, _) = kernel.execute("1 + 1").await;
    assert_eq!(reply.content["status"], "ok");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_ask_options_are_a_usage_error() {
    let mut kernel = Kernel::start().await;
    let (reply, _) = kernel.execute("%%ask --frobnicate\nhello").await;
    assert_eq!(reply.content["ename"], "UsageError");
    assert!(
        reply.content["evalue"]
            .as_str()
            .unwrap()
            .contains("usage: %%ask")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn provider_errors_become_a_readable_error_and_the_kernel_lives_on() {
    let llm = FakeLlm::start(vec![Reply::Status(
        401,
        r#"{"error":{"message":"invalid api key"}}"#.into(),
    )])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute("kept = 1").await;
    let (reply, _) = kernel.execute("%%ask\nhello").await;
    assert_eq!(reply.content["status"], "error");
    assert!(
        reply.content["evalue"]
            .as_str()
            .unwrap()
            .contains("HTTP 401: invalid api key")
    );
    let (reply, _) = kernel.execute("kept").await;
    assert_eq!(reply.content["status"], "ok");
}

#[tokio::test(flavor = "multi_thread")]
async fn interrupt_stops_a_stream_at_once() {
    let llm = FakeLlm::start(vec![Reply::Stall(
        "Thinking".into(),
        Duration::from_secs(600),
    )])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (_, first) = kernel
        .execute_until("%%ask\ntake your time", "stream")
        .await;
    assert!(first.content["text"].as_str().unwrap().contains("Thinking"));
    kernel
        .request(Channel::Control, "interrupt_request", json!({}))
        .await;
    let reply = tokio::time::timeout(Duration::from_secs(5), kernel.reply(Channel::Shell))
        .await
        .expect("the interrupted run ends promptly");
    assert_eq!(reply.content["ename"], "KeyboardInterrupt");
    let (reply, _) = kernel.execute("1 + 1").await;
    assert_eq!(reply.content["status"], "ok");
}

#[tokio::test(flavor = "multi_thread")]
async fn no_exec_shows_code_without_running_it_and_provider_picks_the_wire_format() {
    let llm = FakeLlm::start(vec![Reply::Answer(
        "Here it is.\n```python\nnever_run = 1\n```".into(),
    )])
    .await;
    // Both an Anthropic key and an OpenAI server are configured; the cell
    // names the one to use.
    let mut env = llm.env();
    env.push(("ANTHROPIC_API_KEY", "sk-ant-unused".into()));
    let mut kernel = Kernel::start_with_env(&env).await;
    let (reply, iopub) = kernel
        .execute("%%ask --provider openai --no-exec\nwrite it, do not run it")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert_eq!(llm.heads.lock().unwrap()[0].path, "/v1/chat/completions");
    assert_eq!(panel_texts(&iopub, "code").len(), 1);
    assert!(panel_texts(&iopub, "output").is_empty());
    // One model call: nothing ran, so there is nothing to reflect on.
    assert_eq!(llm.requests.lock().unwrap().len(), 1);
    let (_, iopub) = kernel.execute("'never_run' in globals()").await;
    assert_eq!(result_text(&iopub), "False");
}

#[tokio::test(flavor = "multi_thread")]
async fn ask_graph_draws_each_graph_and_lists_them() {
    // No provider is needed: drawing a graph calls no model.
    let mut kernel = Kernel::start().await;
    let (reply, iopub) = kernel.execute("%ask_graph").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let listed = stream_text(&iopub, "stdout");
    for name in ["default", "analyst", "planner", "triage", "rlm"] {
        assert!(listed.contains(&format!("  {name} ")), "{listed}");
    }

    let (reply, iopub) = kernel.execute("%ask_graph default").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let panel = iopub
        .iter()
        .find(|m| m.content["metadata"]["mahtab"]["kind"] == "graph")
        .expect("a graph panel");
    let markdown = panel.content["data"]["text/markdown"].as_str().unwrap();
    assert!(
        markdown.contains("```mermaid\nflowchart TD\n"),
        "{markdown}"
    );
    for edge in [
        "__start__ --> generate",
        "generate --> extract",
        "extract -.-> execute",
        "extract -.-> __end__",
        "execute -.-> reflect",
        "reflect -.-> generate",
    ] {
        assert!(markdown.contains(edge), "{edge} missing from\n{markdown}");
    }
    for (name, edge) in [
        ("analyst", "work -.-> evaluate"),
        ("rlm", "extract -.-> run"),
    ] {
        let (_, iopub) = kernel.execute(&format!("%ask_graph {name}")).await;
        let shown = panel_texts(&iopub, "graph");
        assert!(
            shown.len() == 1
                && shown[0].starts_with(&format!("[graph {name}]"))
                && shown[0].contains(edge),
            "{shown:?}"
        );
    }

    let (reply, _) = kernel.execute("%ask_graph nowhere").await;
    assert_eq!(reply.content["status"], "error");
    let evalue = reply.content["evalue"].as_str().unwrap();
    assert!(evalue.contains("usage: %ask_graph"), "{evalue}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_review_that_finds_the_request_impossible_says_why_and_stops() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nopen('sales.csv')\n```".into()),
        Reply::Answer(
            r#"{"is_complete": false, "cannot_fix": true, "reasoning": "sales.csv does not exist here", "next_action": ""}"#.into(),
        ),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, iopub) = kernel.execute("%%ask --max-turns 5\nsum sales.csv").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let streamed = stream_text(&iopub, "stdout");
    assert!(
        streamed.contains("✗ this cannot be done here: sales.csv does not exist here\n"),
        "{streamed}"
    );
    let summary = panel_texts(&iopub, "summary");
    assert!(
        summary.len() == 1 && summary[0].starts_with("stopped: it cannot be done here · "),
        "{summary:?}"
    );
    // No turn was spent after the verdict: one answer and one review.
    assert_eq!(llm.requests.lock().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_finished_run_ends_with_a_plain_answer_that_ask_returns() {
    let done = r#"{"is_complete": true, "reasoning": "the sum is shown", "next_action": "", "answer": "The prices add up to 6."}"#;
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nprint(sum(prices))\n```".into()),
        Reply::Answer(done.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute("prices = [1, 2, 3]").await;
    let (reply, iopub) = kernel
        .execute("answer = ask('What do the prices add up to?')\nanswer")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let streamed = stream_text(&iopub, "stdout");
    assert!(
        streamed.ends_with("✓ the sum is shown\nThe prices add up to 6.\n"),
        "{streamed}"
    );
    assert_eq!(result_text(&iopub), "'The prices add up to 6.'");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_code_block_shows_as_soon_as_it_is_complete_while_the_answer_goes_on() {
    use crate::fake_llm::{Step, anthropic};
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    let steps = vec![
        Step::text(
            anthropic::start()
                + &anthropic::delta("First:\n```python\nx = 1\n")
                + &anthropic::delta("```\nThen "),
        ),
        Step::Gate(gate.clone()),
        Step::text(
            anthropic::delta("the second:\n```python\nprint(x + 1)\n```") + &anthropic::end(),
        ),
    ];
    let llm = FakeLlm::start(vec![Reply::Steps(steps), Reply::Answer(DONE.into())]).await;
    let mut kernel = Kernel::start_with_env(&llm.anthropic_env("sk-ant-test")).await;
    let (msg_id, mut panel) = kernel
        .execute_until("%%ask\ncount up", "display_data")
        .await;
    while !is_panel(&panel) {
        panel = kernel.next_for(&msg_id).await; // past the status line
    }
    // The first block's panel came while the model was still held mid-answer.
    assert_eq!(
        panel.content["data"]["text/plain"], "[code, turn 1]\nx = 1",
        "{}",
        panel.content
    );
    gate.notify_one();
    let reply = kernel.reply(Channel::Shell).await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let iopub = kernel.iopub_for(&msg_id).await;
    let kinds: Vec<_> = iopub
        .iter()
        .filter(|m| is_panel(m))
        .map(|m| m.content["metadata"]["mahtab"]["kind"].as_str().unwrap())
        .collect();
    // Each block once: the first shown early (above), the second when the
    // answer ended; both ran after it.
    assert_eq!(kinds, ["output", "code", "output", "changes", "summary"]);
    assert_eq!(
        panel_texts(&iopub, "code"),
        ["[code, turn 1]\nprint(x + 1)"]
    );
    assert_eq!(
        panel_texts(&iopub, "output"),
        ["[output]\n(no output)", "[output]\n2"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_block_the_model_is_slow_to_write_shows_its_lines_as_they_come() {
    use crate::fake_llm::{Step, anthropic};
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    let steps = vec![
        Step::text(anthropic::start() + &anthropic::delta("Counting:\n```python\ntotal = 0\n")),
        // Past the moment a block is written in before its lines show.
        Step::Pause(std::time::Duration::from_millis(1200)),
        Step::text(anthropic::delta("for i in range(3):\n")),
        Step::Gate(gate.clone()),
        Step::text(anthropic::delta("    total += i\nprint(total)\n```") + &anthropic::end()),
    ];
    let llm = FakeLlm::start(vec![Reply::Steps(steps), Reply::Answer(DONE.into())]).await;
    let mut kernel = Kernel::start_with_env(&llm.anthropic_env("sk-ant-test")).await;
    let (msg_id, mut panel) = kernel
        .execute_until("%%ask\ncount up", "display_data")
        .await;
    while !is_panel(&panel) {
        panel = kernel.next_for(&msg_id).await; // past the status line
    }
    // The lines so far show while the model is held mid-block.
    assert_eq!(
        panel.content["data"]["text/plain"],
        "[writing code, turn 1]\ntotal = 0\nfor i in range(3):",
        "{}",
        panel.content
    );
    assert_eq!(panel.content["metadata"]["mahtab"]["kind"], "writing");
    let id = panel.content["transient"]["display_id"].clone();
    gate.notify_one();
    let reply = kernel.reply(Channel::Shell).await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let iopub = kernel.iopub_for(&msg_id).await;
    // Emptied in place when the block closed, and the code panel follows.
    let emptied = iopub
        .iter()
        .position(|m| {
            m.header.msg_type == "update_display_data"
                && m.content["transient"]["display_id"] == id
                && m.content["data"]["text/plain"] == ""
        })
        .expect("the panel emptied");
    let code = iopub
        .iter()
        .position(|m| m.content["metadata"]["mahtab"]["kind"] == "code")
        .expect("a code panel");
    assert!(emptied < code, "{emptied} {code}");
    assert_eq!(
        panel_texts(&iopub, "code"),
        ["[code, turn 1]\ntotal = 0\nfor i in range(3):\n    total += i\nprint(total)"]
    );
    assert_eq!(panel_texts(&iopub, "output"), ["[output]\n3"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_status_line_says_what_the_run_does_and_is_emptied_at_the_end() {
    // A failed block needs no review: the next turn retries at once.
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nundefined_name\n```".into()),
        Reply::Answer("```python\nprint(1)\n```".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, iopub) = kernel.execute("%%ask\nprint one").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let lines: Vec<_> = iopub
        .iter()
        .filter(|m| is_status(m))
        .map(|m| {
            (
                m.header.msg_type.as_str(),
                m.content["data"]["text/plain"].as_str().unwrap(),
                m.content["transient"]["display_id"].as_str().unwrap(),
            )
        })
        .collect();
    let said: Vec<_> = lines.iter().map(|(kind, text, _)| (*kind, *text)).collect();
    assert_eq!(
        said,
        [
            ("display_data", "⋯ answering"),
            ("update_display_data", "⋯ running code"),
            ("update_display_data", "⋯ reviewing"),
            ("update_display_data", "⋯ retrying after NameError"),
            ("update_display_data", "⋯ running code"),
            ("update_display_data", "⋯ reviewing"),
            ("update_display_data", ""),
        ]
    );
    assert!(lines.iter().all(|(_, _, id)| *id == lines[0].2));
    // The status line comes before anything else of the run.
    let first_shown = iopub
        .iter()
        .position(|m| m.header.msg_type == "display_data" || m.header.msg_type == "stream")
        .unwrap();
    assert!(is_status(&iopub[first_shown]));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_block_shown_early_that_never_ran_says_so() {
    let llm = FakeLlm::start(vec![
        Reply::Answer(
            "```python\nundefined_name\n```\n```python\nprint(2)\n```\nThat is all.".into(),
        ),
        // The failure goes straight to the next turn, which gives up.
        Reply::Answer("I cannot tell what was meant.".into()),
        Reply::Answer("Still nothing to run.".into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, iopub) = kernel.execute("%%ask --max-turns 3\ntry both").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let code = panel_texts(&iopub, "code");
    assert_eq!(code.len(), 2, "{code:?}");
    let errors = panel_texts(&iopub, "error");
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("NameError"), "{errors:?}");
    assert_eq!(errors[1], "[error]\n(not run: a block before it failed)");
    assert!(panel_texts(&iopub, "output").is_empty());
}

/// The verdict asked for alone, as llama.cpp's server streams it when asked
/// for each token's likeliest choices (every chunk carries its token's):
/// `odds`, the choices of the token that says `true`.
fn verdict_alone_stream(odds: Vec<(&str, f32)>) -> String {
    let chunk = |text: &str, choices: Vec<(&str, f32)>, finish: Option<&str>| {
        let top: Vec<_> = choices
            .iter()
            .map(|(token, p)| json!({ "id": 1, "token": token, "bytes": [32], "logprob": p.ln() }))
            .collect();
        let choice = json!({
            "index": 0,
            "delta": { "content": text },
            "finish_reason": finish,
            "logprobs": { "content": [{
                "id": 1, "token": text, "bytes": [32], "logprob": choices[0].1.ln(), "top_logprobs": top,
            }]},
        });
        format!(
            "data: {}\n\n",
            json!({ "object": "chat.completion.chunk", "choices": [choice] })
        )
    };
    [
        chunk("{\"is_complete\":", vec![("{\"is_complete\":", 0.99)], None),
        chunk(" true", odds, None),
        chunk("}", vec![("}", 0.99)], Some("stop")),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_done_the_local_models_judge_is_unsure_of_ends_not_confirmed() {
    let review = r#"{"reasoning": "42 is printed", "is_complete": true, "cannot_fix": false, "next_action": "", "answer": "It is 42."}"#;
    for (odds, ending, mark) in [
        (
            vec![(" true", 0.46), (" false", 0.54)],
            "answered, not confirmed · the review passed it but was 46% sure",
            "? 42 is printed (not confirmed: the review was 46% sure)",
        ),
        (
            vec![(" true", 0.95), (" false", 0.05)],
            "done · checked: ",
            "✓ 42 is printed",
        ),
        // Odds that hold neither word weigh nothing: not confirmed.
        (
            vec![(" True", 0.7), (" yes", 0.3)],
            "answered, not confirmed · the review passed it but gave odds that could not be read",
            "? 42 is printed (not confirmed: the review gave odds that could not be read)",
        ),
    ] {
        let llm = FakeLlm::start(vec![
            // As llama.cpp ends an answer at the stop text: without it.
            Reply::Answer("```python\nprint(6 * 7)".into()),
            Reply::Answer(review.into()),
            Reply::Steps(vec![Step::text(verdict_alone_stream(odds))]),
        ])
        .await;
        let mut kernel = kernel_on_local_model(&llm).await;
        let (reply, iopub) = kernel.execute("%%ask\nprint six times seven").await;
        assert_eq!(reply.content["status"], "ok", "{}", reply.content);
        let streamed = stream_text(&iopub, "stdout");
        assert!(
            streamed.contains(mark),
            "{streamed} {:?}",
            panel_texts(&iopub, "summary")
        );
        let summary = panel_texts(&iopub, "summary");
        assert!(summary[0].starts_with(ending), "{summary:?}");
        // The verdict was asked for alone after the very same review, for
        // the token choices, and nothing else was asked.
        let requests = llm.requests.lock().unwrap().clone();
        assert_eq!(requests.len(), 3);
        // The local model's answer stops after its first block.
        assert_eq!(requests[0]["stop"], json!(["\n```\n\n"]));
        let (judged, weighed) = (&requests[1], &requests[2]);
        assert_eq!(
            (weighed["logprobs"].clone(), judged.get("logprobs")),
            (json!(true), None)
        );
        assert_eq!(weighed["messages"][0], judged["messages"][0]);
        let (review_text, alone) = (
            judged["messages"][1]["content"].as_str().unwrap(),
            weighed["messages"][1]["content"].as_str().unwrap(),
        );
        assert!(
            alone.starts_with(review_text) && alone.ends_with("{\"is_complete\": true or false}"),
            "{alone}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_done_after_work_sent_back_twice_needs_surer_odds_of_the_local_judge() {
    let not_yet = r#"{"reasoning": "the product is not shown", "is_complete": false, "cannot_fix": false, "next_action": "print the product", "answer": ""}"#;
    let review = r#"{"reasoning": "42 is printed", "is_complete": true, "cannot_fix": false, "next_action": "", "answer": "It is 42."}"#;
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nprint(6 * 7)".into()),
        Reply::Answer(not_yet.into()),
        Reply::Answer("```python\nprint(7 * 6)".into()),
        Reply::Answer(not_yet.into()),
        Reply::Answer("```python\nprint(42 * 1)".into()),
        Reply::Answer(review.into()),
        Reply::Steps(vec![Step::text(verdict_alone_stream(vec![
            (" true", 0.85),
            (" false", 0.15),
        ]))]),
    ])
    .await;
    let mut kernel = kernel_on_local_model(&llm).await;
    let (reply, iopub) = kernel.execute("%%ask\nprint six times seven").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert_eq!(llm.request_count(), 7);
    // 85% confirms a first or second try's "done"; after two sendings back
    // it does not, and the summary says why.
    let summary = panel_texts(&iopub, "summary");
    assert!(
        summary[0].starts_with(
            "answered, not confirmed · the review passed it but was 85% sure (confirmed from \
             90% once the work was sent back 2 times)"
        ),
        "{summary:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn prose_that_repeats_after_a_block_is_stopped_and_the_block_still_runs() {
    let line = "This prints a greeting for the user of the notebook.\n";
    let llm = FakeLlm::start(vec![
        repeating("```python\nprint('hello')\n```\n", line),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, iopub) = kernel.execute("%%ask\nprint a greeting").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert_stopped_repeating(&llm, 0, &iopub).await;
    let outputs = panel_texts(&iopub, "output");
    assert!(outputs.iter().any(|p| p.contains("hello")), "{outputs:?}");
    // The block ran and was reviewed: the stop is no cut-off answer that
    // would be sent back to be finished.
    assert_eq!(llm.requests.lock().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn code_that_repeats_itself_is_stopped_unrun_and_asked_for_again() {
    // One line of code that never ends: the same tuple again and again.
    let llm = FakeLlm::start(vec![
        repeating("```python\npairs = [", &"('A', 'B', 'E'), ".repeat(10)),
        Reply::Answer("```python\npairs = [('A', 'B', 'E')]\nprint(pairs)\n```".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, iopub) = kernel.execute("%%ask\nprint one pair of labels").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert_stopped_repeating(&llm, 0, &iopub).await;
    // The half-written block never ran: the model was told and wrote it
    // again, and only that ran.
    assert!(
        llm.last_message(1)
            .starts_with("Your answer was cut off before the code was complete"),
        "{}",
        llm.last_message(1)
    );
    let code = panel_texts(&iopub, "code");
    assert_eq!(code.len(), 1, "{code:?}");
    assert!(
        code[0].starts_with("[code, turn 2]\npairs = [('A', 'B', 'E')]\n"),
        "{code:?}"
    );
    assert_eq!(llm.request_count(), 3);
}

/// Request `n`'s answer was stopped for repeating itself: its connection
/// closed, and the cell said why.
pub(crate) async fn assert_stopped_repeating(llm: &FakeLlm, n: usize, iopub: &[Message]) {
    llm.wait_for(Event::Closed(n), Duration::from_secs(5))
        .await
        .expect("the looping answer's connection is closed");
    let text = stream_text(iopub, "stdout");
    assert!(
        text.contains("(stopped here: the model was repeating itself)"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_that_mends_one_line_is_reviewed_with_the_code_it_builds_on() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nrevenue = [price * qty for price, qty in sales]\n```".into()),
        Reply::Answer(r#"{"form": "one number"}"#.into()),
        Reply::Answer("```python\nrevenue = sum(revenue)\n```".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute("sales = [(1.5, 2), (2.0, 3)]").await;
    let (reply, iopub) = kernel
        .execute("%%ask\nStore the total revenue (price times qty) of sales in `revenue`.")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let status = stream_text(&iopub, "stdout");
    assert!(status.contains("must hold one value"), "{status}");
    assert_eq!(llm.request_count(), 4);
    // The second turn only sums what the first made: the review reads the
    // first turn's code too, then the second's.
    let review = llm.last_prompt();
    let first = review.find("revenue = [price * qty for price, qty in sales]");
    let second = review.find("revenue = sum(revenue)");
    assert!(first.is_some() && first < second, "{review}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_review_reads_the_code_without_its_comments() {
    let llm = FakeLlm::start(vec![
        Reply::Answer(
            "```python\n# The total of the prices, as the request asks\ntotal = sum(prices)  # '#' stays in strings\nlabel = 'a # b'\n```"
                .into(),
        ),
        Reply::Answer(r#"{"form": "one number"}"#.into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute("prices = [10, 20, 30]").await;
    let (reply, _) = kernel
        .execute("%%ask\nPut the total of prices in `total`.")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let (_, iopub) = kernel.execute("total").await;
    assert_eq!(result_text(&iopub), "60");
    assert_eq!(llm.request_count(), 3);
    // The comments restate the request: the judge reads the calls alone.
    let review = llm.last_prompt();
    assert!(
        review.contains("```python\ntotal = sum(prices)\nlabel = 'a # b'\n```"),
        "{review}"
    );
    assert!(!review.contains("as the request asks"), "{review}");
    assert!(!review.contains("stays in strings"), "{review}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_number_typed_into_printed_text_is_left_out_of_what_the_review_reads() {
    let llm = FakeLlm::start(vec![
        Reply::Answer(
            "```python\ntop = max(prices)\nprint(top)\nprint('The largest price is 12.5.')\n```"
                .into(),
        ),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute("prices = [1.2, 0.5, 3.0, 1.1]").await;
    let (reply, iopub) = kernel
        .execute("%%ask --max-turns 1\nWhich price is the largest?")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let text = stream_text(&iopub, "stdout");
    assert!(
        text.contains("12.5 was typed into the printed text"),
        "{text}"
    );
    assert_eq!(llm.request_count(), 2);
    // The review reads what the block computed, without the guess, and is
    // told a line typing in 12.5 was left out.
    let review = llm.last_prompt();
    assert!(
        review.contains("```python\ntop = max(prices)\nprint(top)\n```"),
        "{review}"
    );
    assert!(review.contains("It printed:\n3.0\n"), "{review}");
    assert!(
        review.contains("typed in, not computed (12.5). What they said is not done."),
        "{review}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_requests_example_typed_over_the_users_data_runs_again_on_the_users_data() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nprices = [1, 2]\ntotal = sum(prices)\n```".into()),
        Reply::Answer(r#"{"form": "one number"}"#.into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute("prices = [10, 20, 30]").await;
    let (reply, iopub) = kernel
        .execute("%%ask\nI have a list of prices, say prices = [1, 2]. Put their total in `total`.")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let status = stream_text(&iopub, "stdout");
    assert!(
        status.contains("`prices` is defined already with the data"),
        "{status}"
    );
    // The user's list is back, and the total is of it; no model call
    // between the two runs (the form, then the review).
    let (_, iopub) = kernel.execute("prices, total").await;
    assert_eq!(result_text(&iopub), "([10, 20, 30], 60)");
    assert_eq!(llm.request_count(), 3);
    let review = llm.last_prompt();
    assert!(review.contains("total = sum(prices)"), "{review}");
    assert!(!review.contains("prices = [1, 2]\n"), "{review}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_block_that_runs_past_its_time_limit_is_stopped_and_the_model_told() {
    let fix = r#"{"is_complete": false, "reasoning": "the loop never ends", "next_action": "count to five"}"#;
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nsteps = 0\nwhile True:\n    steps += 1\n```".into()),
        Reply::Answer(fix.into()),
        Reply::Answer("```python\ncounted = min(steps, 5)\n```".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, iopub) = kernel
        .execute("%%ask --block-seconds 1\ncount up, then stop at five")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let streamed = stream_text(&iopub, "stdout");
    assert!(
        streamed.contains("BlockTimedOut: the block ran longer than 1 s and was stopped"),
        "{streamed}"
    );
    // The model is told, and the next block runs on what the first left.
    let requests = llm.requests.lock().unwrap().clone();
    assert!(
        requests
            .iter()
            .skip(1)
            .any(|r| told_model(r).contains("BlockTimedOut: the block ran longer than 1 s")),
        "{requests:?}"
    );
    let (_, iopub) = kernel.execute("print(steps > 5, counted)").await;
    assert_eq!(stream_text(&iopub, "stdout"), "True 5\n");
}

/// A kernel with the embedded local model's settings, its server at `llm`'s
/// URL.
async fn kernel_on_local_model(llm: &FakeLlm) -> Kernel {
    let env = [
        ("MAHTAB_LOCAL_MODEL_URL", llm.base_url.clone()),
        ("MAHTAB_LOCAL_MODEL", "coder-1.5b".to_owned()),
    ];
    Kernel::start_with_env(&env).await
}
