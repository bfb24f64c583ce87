//! `ask()` called from Python code in a cell, through the real kernel and a
//! real HTTP server with scripted answers: the run streams into the calling
//! cell, its code runs in the same namespace on the very thread that called
//! `ask()`, and the answer comes back as a value.

use std::time::Duration;

use serde_json::json;

use crate::fake_llm::{FakeLlm, Reply, cut_off};
use crate::support::{Channel, Kernel, is_panel, result_text, stream_text};

const DONE: &str = r#"{"is_complete": true, "reasoning": "set", "next_action": ""}"#;

fn prompts_asked(llm: &FakeLlm) -> Vec<String> {
    llm.requests
        .lock()
        .unwrap()
        .iter()
        .map(|request| {
            let messages = request["messages"].as_array().unwrap();
            messages.last().unwrap()["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn ask_in_a_loop_returns_each_answer_and_streams_into_the_cell() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("Alpha comes first.".into()),
        Reply::Answer("Beta comes second.".into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, iopub) = kernel
        .execute("answers = [ask(f'describe {c}') for c in 'ab']\nprint(answers)")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let text = stream_text(&iopub, "stdout");
    let printed = "['Alpha comes first.', 'Beta comes second.']\n";
    assert!(text.ends_with(printed), "{text}");
    // Each answer streamed into this cell before the print.
    assert!(text.starts_with("Alpha comes first.\n"), "{text}");
    assert!(text.contains("Beta comes second.\n"), "{text}");
    let summaries = iopub
        .iter()
        .filter(|m| m.content["metadata"]["mahtab"]["kind"] == "summary")
        .count();
    assert_eq!(summaries, 2);
    assert_eq!(prompts_asked(&llm), ["describe a", "describe b"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn ask_returns_what_the_run_did_beside_the_answer() {
    let plan = r#"{"needs_code": true, "needs_evaluation": false, "needs_explanation": true, "reasoning": "a sum"}"#;
    let llm = FakeLlm::start(vec![
        Reply::Answer(plan.into()),
        Reply::Answer("```python\ntotal = sum(prices) + missing_name\n```".into()),
        Reply::Answer("```python\ntotal = sum(prices)\nprint(total)\n```".into()),
        Reply::Answer(DONE.into()), // the check of the attempt that ran
        Reply::Answer("The total is 6.".into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute("prices = [1, 2, 3]").await;
    let (reply, iopub) = kernel
        .execute(
            "a = ask('Sum prices into `total`.', graph='analyst')\n\
             print(repr(str(a)), a.outcome, a.plan['needs_explanation'], a.code, repr(a.output), \
             a.figures, a.changes, [f['error'].splitlines()[-1] for f in a.failed_attempts])",
        )
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let printed = stream_text(&iopub, "stdout");
    let last = printed.lines().last().unwrap_or_default();
    assert_eq!(
        last,
        "'The total is 6.' Complete True \
         ['total = sum(prices) + missing_name', 'total = sum(prices)\\nprint(total)'] '6' 0 \
         ['total: int = 6 (new)'] [\"NameError: name 'missing_name' is not defined\"]",
        "{printed}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn judgements_go_to_the_judge_model() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nprint(6 * 7)\n```".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, _) = kernel
        .execute("ask('Print six times seven.', judge_model='small-judge')")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let models: Vec<String> = llm
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|request| request["model"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(models, ["fake-model", "small-judge"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn ask_inside_a_function_runs_its_code_in_the_namespace() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("Setting it.\n```python\nfrom_agent = 7\n```".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, iopub) = kernel
        .execute(
            "def helper():\n    return ask('set from_agent to 7', max_turns=1)\nresult = helper()",
        )
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let kinds: Vec<_> = iopub
        .iter()
        .filter(|m| is_panel(m))
        .map(|m| m.content["metadata"]["mahtab"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["code", "output", "changes", "summary"]);
    let (_, iopub) = kernel.execute("(from_agent, result)").await;
    assert_eq!(result_text(&iopub), "(7, 'Setting it.')");
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_code_may_call_ask_again_without_deadlock() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\ninner = ask('the inner question')\n```".into()),
        Reply::Answer("The inner answer.".into()),
        Reply::Answer(DONE.into()),
        Reply::Answer("Both, in order.".into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, _) = kernel.execute("%%ask --max-turns 1\nask yourself").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let (_, iopub) = kernel.execute("inner").await;
    assert_eq!(result_text(&iopub), "'The inner answer.'");
    assert_eq!(prompts_asked(&llm)[1], "the inner question");

    // The conversation keeps both runs: the inner one ended first, and the
    // outer one's end does not write over it.
    let (reply, _) = kernel.execute("%%ask\nwhat did we talk about?").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let requests = llm.requests.lock().unwrap();
    let history: Vec<(&str, &str)> = requests[3]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| Some((m["role"].as_str()?, m["content"].as_str()?.trim())))
        .collect();
    // Messages of their own, not only the code and output that mention them.
    for said in [
        ("user", "the inner question"),
        ("assistant", "The inner answer."),
        ("user", "ask yourself"),
    ] {
        assert!(
            history.contains(&said),
            "{said:?} is not in the follow-up's conversation: {history:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn ask_from_a_thread_answers_into_the_cell_that_started_it() {
    let llm = FakeLlm::start(vec![Reply::Answer("Threaded answer.".into())]).await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, iopub) = kernel
        .execute(
            "import threading\n\
             box = {}\n\
             worker = threading.Thread(target=lambda: box.setdefault('answer', ask('from a thread')))\n\
             worker.start()\n\
             worker.join(60)\n\
             print('got', repr(box.get('answer')))",
        )
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let stdout = stream_text(&iopub, "stdout");
    assert!(stdout.contains("Threaded answer."), "{stdout}");
    assert!(stdout.ends_with("got 'Threaded answer.'\n"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread")]
async fn callbacks_hear_the_tokens_each_block_and_its_outcome() {
    const ANSWER: &str =
        "Computing it.\n```python\nx = 6 * 7\nprint(x)\n```\nAnd a check:\n```python\n1 / 0\n```";
    let llm = FakeLlm::start(vec![
        Reply::Answer(ANSWER.into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, iopub) = kernel
        .execute(
            "tokens, blocks, runs = [], [], []\n\
             def on_code_block(code, index):\n\
             \x20   blocks.append((index, code))\n\
             \x20   if index == 1:\n\
             \x20       raise ValueError('a callback failed')\n\
             answer = ask('compute', max_turns=1, on_token=tokens.append, on_code_block=on_code_block,\n\
             \x20             on_execution=lambda output, error, index: runs.append((index, output, error)))",
        )
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    // A callback's exception is shown, and the run went on.
    assert!(
        stream_text(&iopub, "stderr").contains("ValueError: a callback failed"),
        "{}",
        stream_text(&iopub, "stderr")
    );
    // The streamed text (a JSON string is a Python literal here).
    let check = format!(
        "print(''.join(tokens) == {}, len(tokens) > 1)\n\
         print(blocks)\n\
         print(runs[0])\n\
         print(runs[1][0], repr(runs[1][1]), runs[1][2].splitlines()[-1])",
        serde_json::to_string(ANSWER).unwrap()
    );
    let (_, iopub) = kernel.execute(&check).await;
    let printed = stream_text(&iopub, "stdout");
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines[0], "True True", "{printed}");
    assert_eq!(
        lines[1], "[(0, 'x = 6 * 7\\nprint(x)'), (1, '1 / 0')]",
        "{printed}"
    );
    assert_eq!(lines[2], "(0, '42\\n', None)", "{printed}");
    assert_eq!(
        lines[3], "1 '' ZeroDivisionError: division by zero",
        "{printed}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn on_execution_hears_why_the_guard_did_not_run_a_block() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nimport subprocess\nsubprocess.run(['true'])\n```".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    // No stdin in this request: the guard cannot ask, so it refuses.
    let (reply, _) = kernel
        .execute(
            "runs = []\n\
             ask('run true', max_turns=1,\n\
             \x20   on_execution=lambda output, error, index: runs.append((index, output, error)))",
        )
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let (_, iopub) = kernel
        .execute("print(runs[0][0], repr(runs[0][1]), 'no one can allow that here' in runs[0][2])")
        .await;
    assert_eq!(stream_text(&iopub, "stdout"), "0 '' True\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interrupt_ends_ask_with_keyboard_interrupt_in_the_caller() {
    let llm = FakeLlm::start(vec![Reply::Stall(
        "Thinking".into(),
        Duration::from_secs(600),
    )])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (msg_id, first) = kernel
        .execute_until(
            "kept = 1\ntry:\n    ask('take your time')\nfinally:\n    cleaned_up = True",
            "stream",
        )
        .await;
    assert!(first.content["text"].as_str().unwrap().contains("Thinking"));
    kernel
        .request(Channel::Control, "interrupt_request", json!({}))
        .await;
    let reply = tokio::time::timeout(Duration::from_secs(5), kernel.reply(Channel::Shell))
        .await
        .expect("the interrupted ask() ends promptly");
    assert_eq!(reply.parent_header["msg_id"], msg_id.as_str());
    assert_eq!(reply.content["ename"], "KeyboardInterrupt");
    let (_, iopub) = kernel.execute("(kept, cleaned_up)").await;
    assert_eq!(result_text(&iopub), "(1, True)");
}

#[tokio::test(flavor = "multi_thread")]
async fn ask_errors_are_exceptions_the_caller_can_catch() {
    let mut kernel = Kernel::start_with_env(&[("MAHTAB_LOCAL_MODEL", "0".into())]).await;
    let (reply, iopub) = kernel
        .execute(
            "from mahtab import AskError\n\
             caught = []\n\
             for kwargs in ({}, {'max_turns': 0}, {'graph': 'fancy'}):\n\
             \x20   try:\n\
             \x20       ask('hello', **kwargs)\n\
             \x20   except AskError as e:\n\
             \x20       caught.append(type(e).__name__)\n\
             print(caught)",
        )
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert!(
        stream_text(&iopub, "stdout").ends_with("['AskConfigError', 'UsageError', 'UsageError']\n"),
        "{}",
        stream_text(&iopub, "stdout")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_ends_with_its_trace_when_asked_and_ask_returns_it_always() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("Setting it.\n```python\ntraced = 1\n```".into()),
        Reply::Answer(DONE.into()),
        Reply::Answer("Just words.".into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, iopub) = kernel.execute("%%ask --trace\nset traced").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let traces: Vec<&str> = iopub
        .iter()
        .filter(|m| m.content["metadata"]["mahtab"]["kind"] == "trace")
        .map(|m| m.content["data"]["text/plain"].as_str().unwrap())
        .collect();
    assert_eq!(traces.len(), 1, "{traces:?}");
    assert!(
        traces[0].contains("\ngenerate → extract → execute → reflect\n"),
        "{}",
        traces[0]
    );
    // Without --trace no trace panel, but ask() hands the trace back.
    let (reply, iopub) = kernel
        .execute("a = ask('say something')\nprint(type(a).__name__, a, [s['node'] for s in a.trace['steps']], a.trace['turns'])")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert!(
        !iopub
            .iter()
            .any(|m| m.content["metadata"]["mahtab"]["kind"] == "trace")
    );
    let printed = stream_text(&iopub, "stdout");
    assert!(
        printed.ends_with("AskAnswer Just words. ['generate', 'extract'] 1\n"),
        "{printed}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_cut_off_at_the_length_limit_is_kept_in_the_trace() {
    let cut = "Here it is:\n```python\nvalues = [1,\n          2,";
    let llm = FakeLlm::start(vec![
        cut_off(cut),
        Reply::Answer("```python\nvalues = [1, 2]\n```".into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, iopub) = kernel
        .execute(
            "import json\n\
             for _ in range(2):\n\
             \x20   a = ask('make values', once=True, max_turns=1, new=True)\n\
             \x20   print('cut off:', json.dumps([c['cut_off_text'] for c in a.trace['calls']]))",
        )
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let printed = stream_text(&iopub, "stdout");
    let lines: Vec<&str> = printed
        .lines()
        .filter_map(|line| line.strip_prefix("cut off: "))
        .collect();
    assert_eq!(lines.len(), 2, "{printed}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(lines[0]).unwrap(),
        json!([cut]),
        "{printed}"
    );
    assert_eq!(lines[1], "[null]", "{printed}");
}
