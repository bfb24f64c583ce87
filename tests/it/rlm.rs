//! `rlm(query, context)` through the kernel with a scripted model over real
//! HTTP: a sub-agent that sees only a description of a value, explores it
//! in a namespace of its own, ends with `FINAL(answer)`, recurses on parts
//! (shown indented), stops at its depth limit and at the stop button.

use std::time::Duration;

use serde_json::json;

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{Channel, Kernel, panel_texts, result_text, stream_text};

const DONE: &str = r#"{"is_complete": true, "reasoning": "found", "next_action": ""}"#;

const MAKE_LOG: &str =
    "log = '\\n'.join(['boot ok'] * 600 + ['ERROR disk full'] + ['idle'] * 5000)";

fn system_prompt(llm: &FakeLlm, n: usize) -> String {
    llm.requests.lock().unwrap()[n]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn rlm_explores_a_description_and_returns_the_final_value() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("Let me look.\n```python\nprint(grep(context, 'ERROR'))\n```".into()),
        Reply::Answer(
            "```python\nFINAL({'line': 601, 'what': 'disk full'})\nprint('never')\n```".into(),
        ),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute(MAKE_LOG).await;
    let (reply, iopub) = kernel
        .execute("found = rlm('where does the error start?', log)")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let (_, result) = kernel.execute("found").await;
    assert_eq!(result_text(&result), "{'line': 601, 'what': 'disk full'}");

    // The sub-agent was told the question and a description, not the data.
    let system = system_prompt(&llm, 0);
    assert!(system.contains("where does the error start?"), "{system}");
    assert!(
        system.contains("str, 29,815 characters; it begins:\nboot ok"),
        "{system}"
    );
    assert!(
        !system.contains("ERROR disk full"),
        "the whole log went to the model"
    );
    assert!(system.contains("2 more levels"), "{system}");
    // It saw what its first block printed; the second ended at FINAL.
    let second = llm.requests.lock().unwrap()[1]["messages"].to_string();
    assert!(second.contains("601: ERROR disk full"), "{second}");
    let outputs = panel_texts(&iopub, "output");
    assert_eq!(outputs.len(), 2);
    assert!(!outputs[1].contains("never"), "{}", outputs[1]);
    assert!(stream_text(&iopub, "stdout").starts_with("Let me look."));
    // Its namespace was its own.
    let (reply, _) = kernel.execute("context").await;
    assert_eq!(reply.content["ename"], "NameError");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lone_call_runs_and_an_answer_in_words_after_it_is_returned() {
    // The local model's answers to the demo's search: a call without a
    // fence, then the answer in words instead of FINAL.
    let llm = FakeLlm::start(vec![
        Reply::Answer("grep('ERROR')".into()),
        Reply::Answer("Line 601: \"ERROR disk full\", the disk is full.".into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute(MAKE_LOG).await;
    let (reply, _) = kernel.execute("found = rlm('what went wrong?', log)").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let second = llm.requests.lock().unwrap()[1]["messages"].to_string();
    assert!(second.contains("601: ERROR disk full"), "{second}");
    let (_, result) = kernel.execute("found").await;
    assert_eq!(
        result_text(&result),
        "'Line 601: \"ERROR disk full\", the disk is full.'"
    );
    assert_eq!(llm.requests.lock().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_searchs_code_computes_but_opens_no_file_and_imports_no_os() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nimport re, collections\nprint(len(re.findall('ERROR', context)), sorted({3, 1}))\n```".into()),
        Reply::Answer("```python\nopen('/etc/hostname').read()\n```".into()),
        Reply::Answer("```python\nimport os\n```".into()),
        Reply::Answer("```python\nFINAL('checked')\n```".into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute(MAKE_LOG).await;
    let (reply, iopub) = kernel
        .execute("found = rlm('what is wrong?', log, max_turns=4)")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let (_, result) = kernel.execute("found").await;
    assert_eq!(result_text(&result), "'checked'");
    let outputs = panel_texts(&iopub, "output").concat();
    let errors = panel_texts(&iopub, "error").concat();
    assert!(outputs.contains("1 [1, 3]"), "{outputs}");
    assert!(
        errors.contains("NameError: name 'open' is not defined"),
        "{errors}"
    );
    assert!(
        errors.contains("ImportError: rlm() code may import only") && errors.contains("not os"),
        "{errors}"
    );
    // The user's own cells keep every builtin.
    let (reply, _) = kernel.execute("import os; open").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tools_look_at_the_searched_value_when_called_without_text() {
    let llm = FakeLlm::start(vec![Reply::Answer(
        "```python\n\
         print(grep('ERROR'))\n\
         print(peek(7))\n\
         print(len(peek()) > 7, len(partition(3)), partition(['a', 'b'], 2))\n\
         print(grep(context, 'idle', context=0).count('idle') == 5000)\n\
         FINAL(peek(n=4))\n\
         ```"
        .into(),
    )])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute(MAKE_LOG).await;
    let (reply, iopub) = kernel.execute("found = rlm('what is wrong?', log)").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let (_, result) = kernel.execute("found").await;
    assert_eq!(
        result_text(&result),
        "'boot\\n... [29811 more characters of 29815]'"
    );
    let output = panel_texts(&iopub, "output").concat();
    for shown in [
        "601: ERROR disk full",
        "boot ok\n... [29808 more characters of 29815]",
        "True 3 [['a'], ['b']]",
        "True",
    ] {
        assert!(output.contains(shown), "{shown:?} not in {output}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn rlm_on_parts_shows_each_level_indented() {
    let llm = FakeLlm::start(vec![
        // The %%ask agent asks a sub-agent...
        Reply::Answer("```python\nfound = rlm('find the errors', log)\n```".into()),
        // ...which splits the log and asks a sub-agent per part.
        Reply::Answer(
            "Splitting.\n```python\nFINAL([rlm('find the errors', part) for part in partition(context, 2)])\n```"
                .into(),
        ),
        Reply::Answer("First half.\n```python\nFINAL('one')\n```".into()),
        Reply::Answer("```python\nFINAL('two')\n```".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute(MAKE_LOG).await;
    let (reply, iopub) = kernel.execute("%%ask\nfind the errors in log").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let (_, result) = kernel.execute("found").await;
    assert_eq!(result_text(&result), "['one', 'two']");
    assert!(system_prompt(&llm, 2).contains("1 more level"));

    let text = stream_text(&iopub, "stdout");
    assert!(text.contains("│ Splitting.\n"), "{text}");
    assert!(text.contains("│ │ First half.\n"), "{text}");
    let codes = panel_texts(&iopub, "code");
    assert_eq!(codes.len(), 4, "{codes:?}");
    assert!(codes[0].starts_with("[code, turn 1]"));
    assert!(codes[1].starts_with("│ [code, turn 1]"));
    assert!(codes[2].starts_with("│ │ [code, turn 1]\n│ │ FINAL('one')"));
    let summaries = panel_texts(&iopub, "summary");
    assert_eq!(summaries.len(), 4);
    assert!(summaries[0].starts_with("│ │ answered"), "{summaries:?}");
    let markdown = iopub
        .iter()
        .find(|m| m.content["metadata"]["mahtab"]["kind"] == "code")
        .map(|m| {
            m.content["data"]["text/markdown"]
                .as_str()
                .unwrap()
                .to_owned()
        });
    assert!(
        !markdown.unwrap().starts_with('>'),
        "the top level is not quoted"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_depth_limit_stops_recursion_with_an_error_the_model_sees() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nrlm('deeper', context[:100])\n```".into()),
        Reply::Answer("```python\nFINAL('without going deeper')\n```".into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute(MAKE_LOG).await;
    let (reply, iopub) = kernel
        .execute("found = rlm('find it', log, max_depth=1)")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let errors = panel_texts(&iopub, "error");
    assert!(errors[0].contains("depth limit (1)"), "{errors:?}");
    assert!(system_prompt(&llm, 0).contains("may not call rlm"));
    let (_, result) = kernel.execute("found").await;
    assert_eq!(result_text(&result), "'without going deeper'");
    let (reply, _) = kernel.execute("rlm('q', 'x', max_depth=0)").await;
    assert_eq!(reply.content["ename"], "AskError");
    assert_eq!(
        llm.requests.lock().unwrap().len(),
        2,
        "no model call past the limit"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interrupt_stops_every_level() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\ntry:\n    rlm('inner', context)\nfinally:\n    print('inner level cleaned up')\n```".into()),
        Reply::Stall("Thinking".into(), Duration::from_secs(600)),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute(MAKE_LOG).await;
    let code = "try:\n    rlm('outer', log)\nfinally:\n    outer_cleaned = True";
    let msg_id = kernel
        .send(Channel::Shell, "execute_request", json!({ "code": code }))
        .await;
    // Wait until the innermost level streams.
    loop {
        let message = kernel.next_for(&msg_id).await;
        if message.header.msg_type == "stream"
            && message.content["text"]
                .as_str()
                .unwrap()
                .contains("Thinking")
        {
            break;
        }
    }
    kernel
        .request(Channel::Control, "interrupt_request", json!({}))
        .await;
    let reply = tokio::time::timeout(Duration::from_secs(5), kernel.reply(Channel::Shell))
        .await
        .expect("every level stops promptly");
    assert_eq!(reply.content["ename"], "KeyboardInterrupt");
    let (_, iopub) = kernel.execute("outer_cleaned").await;
    assert_eq!(result_text(&iopub), "True");
    assert_eq!(llm.requests.lock().unwrap().len(), 2);
}
