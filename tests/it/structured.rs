//! Answers the kernel reads (the review's verdict here) asked for in the
//! shape of a JSON schema, over real HTTP in each provider's own form:
//! `response_format` on OpenAI-compatible servers, a forced tool call on
//! Anthropic's API; and a server that refuses the schema gets the request
//! again without it, and no schema after.

use serde_json::{Value, json};

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{Kernel, panel_texts, stream_text};

const MEAN_CODE: &str = "```python\nprint(sum(prices) / len(prices))\n```";
const NOT_DONE: &str = r#"{"reasoning": "the mean is not labelled", "is_complete": false, "cannot_fix": false, "next_action": "print it with a label", "answer": ""}"#;
const DONE: &str = r#"{"reasoning": "the mean is shown", "is_complete": true, "cannot_fix": false, "next_action": "", "answer": "The mean price is 2."}"#;

fn requests(llm: &FakeLlm) -> Vec<Value> {
    llm.requests.lock().unwrap().clone()
}

/// Runs a request the review must judge (it names no variable or file).
async fn ask_for_the_mean(kernel: &mut Kernel) -> String {
    kernel.execute("prices = [1, 2, 3]").await;
    let (reply, iopub) = kernel
        .execute("%%ask --max-turns 2\nWhat is the mean price?")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let summary = panel_texts(&iopub, "summary");
    assert!(summary[0].starts_with("done · "), "{summary:?}");
    stream_text(&iopub, "stdout")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_review_asks_an_openai_compatible_server_for_its_verdicts_schema() {
    let llm = FakeLlm::start(vec![
        Reply::Answer(MEAN_CODE.into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let streamed = ask_for_the_mean(&mut kernel).await;
    assert!(streamed.contains("✓ the mean is shown"), "{streamed}");

    let requests = requests(&llm);
    assert_eq!(requests.len(), 2);
    // The code is free text; the verdict has the schema, fields in the order
    // a grammar writes them: the reasoning before the decision.
    assert!(
        requests[0].get("response_format").is_none(),
        "{}",
        requests[0]
    );
    let format = &requests[1]["response_format"];
    assert_eq!(format["type"], "json_schema", "{format}");
    assert_eq!(format["json_schema"]["name"], "verdict");
    let schema = &format["json_schema"]["schema"];
    let fields: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(
        fields,
        [
            "reasoning",
            "is_complete",
            "cannot_fix",
            "next_action",
            "answer"
        ]
    );
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(schema["properties"]["is_complete"]["type"], "boolean");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_refuses_the_schema_is_asked_again_without_it_and_never_with_it() {
    let refusal = json!({"error": {"message": "'response_format' of type 'json_schema' is not supported", "type": "invalid_request_error"}});
    let llm = FakeLlm::start(vec![
        Reply::Answer(MEAN_CODE.into()),
        Reply::Status(400, refusal.to_string()),
        Reply::Answer(NOT_DONE.into()),
        Reply::Answer("```python\nprint('mean price:', sum(prices) / len(prices))\n```".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let streamed = ask_for_the_mean(&mut kernel).await;
    // The verdict read from the second review request steered the next turn.
    assert!(
        streamed.contains("↻ not done yet: the mean is not labelled"),
        "{streamed}"
    );
    let requests = requests(&llm);
    assert_eq!(requests.len(), 5);
    assert_eq!(
        requests[1]["response_format"]["json_schema"]["name"],
        "verdict"
    );
    // The same request again, without the schema; and none for the next review.
    let mut resent = requests[1].clone();
    resent.as_object_mut().unwrap().remove("response_format");
    assert_eq!(requests[2], resent);
    assert!(
        requests[4].get("response_format").is_none(),
        "{}",
        requests[4]
    );
    let turn_two = requests[3]["messages"].to_string();
    assert!(turn_two.contains("print it with a label"), "{turn_two}");
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_verdicts_come_as_a_forced_tool_call_whose_input_is_read() {
    let llm = FakeLlm::start(vec![
        Reply::Answer(MEAN_CODE.into()),
        Reply::Answer(NOT_DONE.into()),
        Reply::Answer("```python\nprint('mean price:', sum(prices) / len(prices))\n```".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.anthropic_env("sk-ant-test-key")).await;
    let streamed = ask_for_the_mean(&mut kernel).await;
    // Both verdicts arrived as `input_json_delta` pieces of a tool call.
    assert!(
        streamed.contains("↻ not done yet: the mean is not labelled")
            && streamed.contains("✓ the mean is shown"),
        "{streamed}"
    );
    let requests = requests(&llm);
    assert_eq!(requests.len(), 4);
    assert!(requests[0].get("tools").is_none(), "{}", requests[0]);
    let review = &requests[1];
    assert_eq!(
        review["tool_choice"],
        json!({"type": "tool", "name": "verdict"})
    );
    let tool = &review["tools"][0];
    assert_eq!(tool["name"], "verdict");
    assert_eq!(tool["input_schema"]["type"], "object");
    assert!(
        tool["input_schema"]["required"]
            .as_array()
            .unwrap()
            .contains(&json!("is_complete")),
        "{tool}"
    );
    let turn_two = requests[2]["messages"].to_string();
    assert!(turn_two.contains("print it with a label"), "{turn_two}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_refused_with_and_without_the_schema_leaves_schemas_on() {
    let too_long = json!({"error": {"message": "the request exceeds the context size", "type": "invalid_request_error"}});
    let llm = FakeLlm::start(vec![
        Reply::Answer(MEAN_CODE.into()),
        Reply::Status(400, too_long.to_string()),
        Reply::Status(400, too_long.to_string()),
        Reply::Answer(MEAN_CODE.into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute("prices = [1, 2, 3]").await;
    let (reply, _) = kernel
        .execute("%%ask --max-turns 2\nWhat is the mean price?")
        .await;
    // The server's own words reach the user.
    assert_eq!(reply.content["status"], "error", "{}", reply.content);
    let told = reply.content["evalue"].as_str().unwrap();
    assert!(told.contains("exceeds the context size"), "{told}");
    // The schema was not what the server refused: the next review has it.
    let (reply, _) = kernel
        .execute("%%ask --max-turns 2\nWhat is the mean price?")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let requests = requests(&llm);
    assert_eq!(requests.len(), 5);
    assert_eq!(
        requests[1]["response_format"]["json_schema"]["name"],
        "verdict"
    );
    assert!(requests[2].get("response_format").is_none());
    assert_eq!(
        requests[4]["response_format"]["json_schema"]["name"],
        "verdict"
    );
}
