//! The analyst graph through the real kernel: planning, retries of failing
//! code, evaluation and explanation, and giving up with every attempt shown.

use serde_json::{Value, json};

use crate::ask::assert_stopped_repeating;
use crate::fake_llm::{FakeLlm, Reply, repeating};
use crate::support::{Kernel, is_panel, result_text, stream_text};

#[tokio::test(flavor = "multi_thread")]
async fn the_analyst_graph_plans_retries_failing_code_evaluates_and_explains() {
    let llm = FakeLlm::start(vec![
        Reply::Answer(
            r#"{"needs_code": true, "needs_evaluation": true, "reasoning": "it needs the data"}"#
                .into(),
        ),
        Reply::Answer("```python\ntotal = sum(prices) / count\n```".into()),
        Reply::Answer("```python\ntotal = sum(prices)\nprint(total)\n```".into()),
        Reply::Answer(
            r#"{"is_complete": true, "reasoning": "the sum is printed", "next_action": ""}"#.into(),
        ),
        Reply::Answer("The prices add up to 6.".into()),
        Reply::Answer("In short: 6.".into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute("prices = [1, 2, 3]").await;
    let (reply, iopub) = kernel
        .execute("%%ask --graph analyst\nWhat do the prices add up to?")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let text = stream_text(&iopub, "stdout");
    assert!(
        text.starts_with("plan: run code, evaluate the results, then explain (it needs the data)"),
        "{text}"
    );
    // The plan's JSON is read, not shown; the evaluation and answer stream.
    assert!(!text.contains("needs_code"), "{text}");
    assert!(text.contains("The prices add up to 6.") && text.contains("In short: 6."));
    let kinds: Vec<_> = iopub
        .iter()
        .filter(|m| is_panel(m))
        .map(|m| m.content["metadata"]["mahtab"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["code", "error", "code", "output", "changes", "summary"]
    );

    // The retry was shown the error; the fixed code's result is the user's.
    let requests = llm.requests.lock().unwrap().clone();
    // Only the plan and the check, which the kernel reads, were asked for
    // as JSON: the check of the attempt that ran, before the evaluation.
    let schemas: Vec<&Value> = requests
        .iter()
        .map(|r| &r["response_format"]["json_schema"]["name"])
        .collect();
    assert_eq!(
        schemas,
        [
            &json!("plan"),
            &Value::Null,
            &Value::Null,
            &json!("verdict"),
            &Value::Null,
            &Value::Null
        ]
    );
    assert!(text.contains("✓ the sum is printed"), "{text}");
    let retry = requests[2]["messages"].as_array().unwrap();
    let told = retry.last().unwrap()["content"].as_str().unwrap();
    assert!(
        told.contains("NameError") && told.contains("count"),
        "{told}"
    );
    let (_, iopub) = kernel.execute("total").await;
    let result = result_text(&iopub);
    assert_eq!(result, "6");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_analyst_graph_gives_up_after_its_attempts_and_shows_them_all() {
    let failing = "```python\nundefined_name\n```";
    let llm = FakeLlm::start(vec![
        Reply::Answer(r#"{"needs_code": true, "needs_evaluation": false}"#.into()),
        Reply::Answer(failing.into()),
        Reply::Answer(failing.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, iopub) = kernel
        .execute("%%ask --graph analyst --max-turns 2\nuse the name")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let panels: Vec<_> = iopub.iter().filter(|m| is_panel(m)).collect();
    let gave_up = panels
        .iter()
        .find(|m| m.content["metadata"]["mahtab"]["kind"] == "gave_up")
        .expect("a panel with the failed attempts");
    let plain = gave_up.content["data"]["text/plain"].as_str().unwrap();
    assert!(
        plain.starts_with("[gave up after 2 failed attempts]"),
        "{plain}"
    );
    assert_eq!(plain.matches("NameError").count(), 2, "{plain}");
    let summary = panels.last().unwrap().content["data"]["text/plain"]
        .as_str()
        .unwrap();
    assert!(summary.starts_with("gave up"), "{summary}");
    assert_eq!(llm.requests.lock().unwrap().len(), 3);
    let (reply, _) = kernel.execute("1 + 1").await;
    assert_eq!(reply.content["status"], "ok");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_explanation_that_repeats_itself_is_stopped_and_kept_once() {
    let line = "The values in the `views` column are grouped into bins by user.\n";
    let llm = FakeLlm::start(vec![
        Reply::Answer(r#"{"needs_code": true, "needs_evaluation": false}"#.into()),
        Reply::Answer("```python\ncounts = {'tom': 3}\nprint(counts)\n```".into()),
        Reply::Answer(r#"{"is_complete": true, "reasoning": "counted", "next_action": ""}"#.into()),
        // The explanation loops, and the server would go on until told to stop.
        repeating("Tom has 3 views.\n", line),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, iopub) = kernel
        .execute("answer = ask('How many views has each user?', graph='analyst')")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert_stopped_repeating(&llm, 3, &iopub).await;
    // The answer says it once.
    let (_, iopub) = kernel.execute("print(answer)").await;
    let kept = stream_text(&iopub, "stdout");
    assert_eq!(kept.matches(line.trim_end()).count(), 1, "{kept}");
    assert!(kept.starts_with("Tom has 3 views."), "{kept}");
}
