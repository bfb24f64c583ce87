//! `%%ask` cells through the real kernel, against a real HTTP server that
//! speaks the OpenAI streaming format with scripted answers.

use std::time::Duration;

use serde_json::{Value, json};

use crate::fake_claude::{claude_script, path_with};
use crate::fake_llm::{FakeLlm, Reply};
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
    assert!(told.contains("```python\nbase = 6\n```"), "{told}");
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

/// A stand-in `claude` executable: records its arguments, then prints the
/// stream-json lines of the next scripted answer.
fn fake_claude(dir: &std::path::Path) {
    let answer_1 = [
        r#"{"type":"system","subtype":"init","session_id":"s","tools":[]}"#,
        r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Computing.\n```python\nfrom_cli = 2 ** 5\n"}},"session_id":"s"}"#,
        r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"print(from_cli)\n```"}},"session_id":"s"}"#,
        r#"{"type":"result","subtype":"success","is_error":false,"result":"...","total_cost_usd":0.0123,"usage":{"input_tokens":100,"output_tokens":20}}"#,
    ];
    let answer_2 = [
        r#"{"type":"result","subtype":"success","is_error":false,"result":"{\"is_complete\": true, \"reasoning\": \"printed 32\", \"next_action\": \"\"}","total_cost_usd":0.001,"usage":{"input_tokens":50,"output_tokens":10}}"#,
    ];
    let quote = |lines: &[&str]| {
        lines
            .iter()
            .map(|l| format!("  printf '%s\\n' '{l}'\n"))
            .collect::<String>()
    };
    let body = format!(
        "printf '%s\\n' \"$@\" > \"{dir}/args.$$\"\ncat > \"{dir}/stdin.$$\"\nprev=\nfor a in \"$@\"; do [ \"$prev\" = --system-prompt-file ] && cat \"$a\" > \"{dir}/system.$$\"; prev=$a; done\ncount=$(ls \"{dir}\" | grep -c '^args')\nif [ \"$count\" = 1 ]; then\n{}else\n{}fi\n",
        quote(&answer_1),
        quote(&answer_2),
        dir = dir.display(),
    );
    claude_script(dir, &body);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_claude_cli_provider_streams_and_reports_cost() {
    let dir = crate::support::TempDir::new("claude");
    fake_claude(&dir.0);
    // Found on PATH, as an installed Claude Code would be.
    let mut kernel = Kernel::start_with_env(&[
        ("MAHTAB_PROVIDER", "claude".into()),
        ("PATH", path_with(&dir.0)),
    ])
    .await;
    // Longer than one command-line argument may be (128 KiB).
    let question = format!("What is two to the fifth? {}", "Take care. ".repeat(20_000));
    let (reply, iopub) = kernel.execute(&format!("%%ask\n{question}")).await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert!(stream_text(&iopub, "stdout").starts_with("Computing."));
    let summary = iopub
        .iter()
        .filter(|m| is_panel(m))
        .map(|m| m.content["data"]["text/plain"].as_str().unwrap().to_owned())
        .next_back()
        .unwrap();
    assert!(
        summary.contains("claude CLI") && summary.contains("$0.0133"),
        "{summary}"
    );
    let (_, iopub) = kernel.execute("from_cli").await;
    let result = result_text(&iopub);
    assert_eq!(result, "32");
    // Claude Code's own tools were blocked on every call.
    let calls: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("args"))
        .collect();
    assert_eq!(calls.len(), 2);
    for call in calls {
        let args = std::fs::read_to_string(call.path()).unwrap();
        assert!(
            args.contains("--disallowedTools") && args.contains("Bash"),
            "{args}"
        );
        assert!(args.contains("stream-json") && args.contains("--include-partial-messages"));
        assert!(
            !args.contains("two to the fifth"),
            "the conversation is not an argument"
        );
        // The conversation went to its standard input, whole.
        let stdin = call.path().to_string_lossy().replace("args.", "stdin.");
        let stdin = std::fs::read_to_string(stdin).unwrap();
        assert!(
            stdin.contains(question.trim_end()),
            "{} bytes on stdin",
            stdin.len()
        );
        // The system prompt came in a file (the review's quotes the request).
        let system = call.path().to_string_lossy().replace("args.", "system.");
        let system = std::fs::read_to_string(system).unwrap();
        assert!(
            system.contains("notebook") && system.len() > 100,
            "{system}"
        );
        // That file is gone once the call is over.
        let file = args
            .lines()
            .skip_while(|arg| *arg != "--system-prompt-file")
            .nth(1)
            .unwrap();
        assert!(!std::path::Path::new(file).exists(), "{file} left behind");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn confirm_asks_before_each_block_and_respects_the_answer() {
    let code_answer = "```python\nconfirmed = 'ran'\n```";
    let llm = FakeLlm::start(vec![
        Reply::Answer(code_answer.into()),
        Reply::Answer(DONE.into()),
        Reply::Answer(code_answer.into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    for (answer, ran) in [("n", false), ("y", true)] {
        let msg_id = kernel
            .send(
                Channel::Shell,
                "execute_request",
                json!({ "code": "%%ask --confirm\nset the flag", "allow_stdin": true }),
            )
            .await;
        let request = kernel.next_stdin().await;
        assert_eq!(request.header.msg_type, "input_request");
        assert!(
            request.content["prompt"]
                .as_str()
                .unwrap()
                .contains("Run this code?")
        );
        assert_eq!(crate::support::parent_id(&request), msg_id);
        kernel.input_reply(&request, answer).await;
        let reply = kernel.reply(Channel::Shell).await;
        assert_eq!(reply.content["status"], "ok", "{}", reply.content);
        kernel.iopub_for(&msg_id).await;
        let (_, iopub) = kernel.execute("'confirmed' in globals()").await;
        let result = result_text(&iopub);
        let expected = if ran { "True" } else { "False" };
        assert_eq!(result, expected, "after answering {answer:?}");
    }
}

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

/// The model name each request to the fake server asked for.
fn models_asked(llm: &FakeLlm) -> Vec<String> {
    let requests = llm.requests.lock().unwrap();
    requests
        .iter()
        .map(|r| r["model"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn settings_come_from_the_cell_then_ask_config_then_the_settings_file() {
    let llm = FakeLlm::start(vec![Reply::Answer("Hello.".into()); 4]).await;
    let dir = crate::support::TempDir::new("ask-config");
    let file = dir.0.join("mahtab.toml");
    std::fs::write(
        &file,
        format!(
            "model = \"file-model\"\n[openai]\nbase_url = \"{}\"\napi_key = \"sk-from-the-file\"\n",
            llm.base_url
        ),
    )
    .unwrap();
    // The environment names another model; the file ranks above it.
    let mut kernel = Kernel::start_with_env(&[
        ("MAHTAB_CONFIG", file.display().to_string()),
        ("MAHTAB_MODEL", "env-model".into()),
    ])
    .await;

    let (reply, _) = kernel.execute("%%ask\nhi").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let (reply, iopub) = kernel.execute("%ask_config --model session-model").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let shown = stream_text(&iopub, "stdout");
    assert!(
        shown.contains("session-model  [%ask_config]") && shown.contains("key set"),
        "{shown}"
    );
    assert!(
        shown.contains(&llm.base_url) && shown.contains("[settings file]"),
        "{shown}"
    );
    assert!(!shown.contains("sk-from-the-file"), "{shown}");
    // Another model from %ask_config makes it another run of the cell; the
    // same settings again would replay the first run, so the last one asks
    // afresh.
    kernel.execute("%%ask\nhi").await;
    kernel.execute("%%ask --model cell-model\nhi").await;
    let (_, iopub) = kernel.execute("%ask_config --reset").await;
    assert!(stream_text(&iopub, "stdout").contains("file-model  [settings file]"));
    kernel.execute("%%ask --fresh\nhi").await;
    assert_eq!(
        models_asked(&llm),
        ["file-model", "session-model", "cell-model", "file-model"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_settings_file_is_a_readable_error_that_keeps_its_secrets() {
    let dir = crate::support::TempDir::new("ask-config-bad");
    let file = dir.0.join("mahtab.toml");
    std::fs::write(
        &file,
        "model = \"m\"\nmax_turns = \"sk-typed-in-the-wrong-place\"\n",
    )
    .unwrap();
    let mut kernel = Kernel::start_with_env(&[("MAHTAB_CONFIG", file.display().to_string())]).await;
    kernel.execute("kept = 1").await;
    for cell in ["%%ask\nhi", "%ask_config"] {
        let (reply, iopub) = kernel.execute(cell).await;
        assert_eq!(
            reply.content["ename"], "AskConfigError",
            "{}",
            reply.content
        );
        let evalue = reply.content["evalue"].as_str().unwrap();
        assert!(
            evalue.contains("mahtab.toml") && evalue.contains("line 2"),
            "{evalue}"
        );
        for message in &iopub {
            assert!(
                !message.content.to_string().contains("sk-typed"),
                "{}",
                message.content
            );
        }
    }
    let (reply, _) = kernel.execute("%ask_config --bogus").await;
    assert_eq!(reply.content["ename"], "UsageError");
    let (reply, _) = kernel.execute("kept").await;
    assert_eq!(reply.content["status"], "ok");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_claude_cli_is_a_readable_error() {
    let dir = crate::support::TempDir::new("claude-fails");
    claude_script(
        &dir.0,
        "echo 'Invalid API key. Please run /login' >&2\nexit 1\n",
    );
    let mut kernel = Kernel::start_with_env(&[
        ("MAHTAB_PROVIDER", "claude".into()),
        ("PATH", path_with(&dir.0)),
    ])
    .await;
    kernel.execute("kept = 1").await;
    let (reply, _) = kernel.execute("%%ask\nhello").await;
    assert_eq!(reply.content["status"], "error");
    let evalue = reply.content["evalue"].as_str().unwrap();
    assert!(
        evalue.contains("claude") && evalue.contains("Invalid API key"),
        "{evalue}"
    );
    let (reply, _) = kernel.execute("kept").await;
    assert_eq!(reply.content["status"], "ok");
}

#[tokio::test(flavor = "multi_thread")]
async fn interrupt_kills_the_claude_cli() {
    let dir = crate::support::TempDir::new("claude-stalls");
    let pid_file = dir.0.join("pid");
    let first = r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Thinking"}}}"#;
    claude_script(
        &dir.0,
        &format!(
            "echo $$ > '{}'\nprintf '%s\\n' '{first}'\nexec sleep 600\n",
            pid_file.display()
        ),
    );
    let mut kernel = Kernel::start_with_env(&[
        ("MAHTAB_PROVIDER", "claude".into()),
        ("PATH", path_with(&dir.0)),
    ])
    .await;
    kernel
        .execute_until("%%ask\ntake your time", "stream")
        .await;
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    kernel
        .request(Channel::Control, "interrupt_request", json!({}))
        .await;
    let reply = tokio::time::timeout(Duration::from_secs(5), kernel.reply(Channel::Shell))
        .await
        .expect("the interrupted run ends promptly");
    assert_eq!(reply.content["ename"], "KeyboardInterrupt");
    // The CLI process (the script exec'd into sleep) is gone: killed, and
    // no longer running even if not yet reaped.
    let running = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while running(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "the claude process {pid} still runs"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (reply, _) = kernel.execute("1 + 1").await;
    assert_eq!(reply.content["status"], "ok");
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_code_errors_show_the_agents_frames_only() {
    let llm = FakeLlm::start(vec![
        // Failed blocks need no review: each next turn follows at once.
        Reply::Answer("```python\ndef f():\n    return missing\nf()\n```".into()),
        Reply::Answer("```python\nx = (1 +\n```".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (_, iopub) = kernel.execute("%%ask\nbreak things").await;
    let errors: Vec<String> = iopub
        .iter()
        .filter(|m| m.content["metadata"]["mahtab"]["kind"] == "error")
        .map(|m| m.content["data"]["text/plain"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    let (name_error, syntax_error) = (&errors[0], &errors[1]);
    assert!(
        name_error.contains("Traceback")
            && name_error.contains("line 3, in <module>")
            && name_error.contains("line 2, in f")
            && name_error.contains("NameError: name 'missing' is not defined"),
        "{name_error}"
    );
    assert!(
        syntax_error.contains("SyntaxError") && !syntax_error.contains("Traceback"),
        "{syntax_error}"
    );
    for error in &errors {
        assert!(
            !error.contains("mahtab/") && !error.contains("ast.py"),
            "{error}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_output_is_cut_in_the_middle_and_rich_values_show_once() {
    let rich = "class Rich:\n    def _repr_html_(self):\n        return '<b>rich</b>'\n    def __repr__(self):\n        return 'Rich()'\n";
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nsix = 6\nsix * 7\n```".into()),
        Reply::Answer(DONE.into()),
        Reply::Answer(format!(
            "```python\nprint('head' + 'x' * 30000 + 'tail')\n{rich}Rich()\n```"
        )),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;

    // A plain last value is part of the output, for the panel and the model.
    let (reply, iopub) = kernel.execute("%%ask\nsix times seven").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert_eq!(panel_texts(&iopub, "output"), ["[output]\n42"]);
    assert!(llm.last_prompt().contains("42"));

    let (reply, iopub) = kernel.execute("%%ask\nsomething long and rich").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    // Long output keeps its head and tail, for the user and the model alike.
    let outputs = panel_texts(&iopub, "output");
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    let output = &outputs[0];
    assert!(
        output.contains("head") && output.contains("tail") && output.contains("characters cut"),
        "{}",
        &output[..200]
    );
    assert!(output.len() < 11_000, "{} characters", output.len());
    // The rich value reaches the user once, as HTML, and not again as text in the panel.
    let rich_shown: Vec<_> = iopub
        .iter()
        .filter(|m| {
            m.header.msg_type == "display_data" && m.content["data"]["text/html"].is_string()
        })
        .collect();
    assert_eq!(rich_shown.len(), 1);
    assert_eq!(rich_shown[0].content["data"]["text/html"], "<b>rich</b>");
    assert!(!output.contains("Rich()"), "{output}");
    // The model is told about it in text.
    let told = llm.last_prompt();
    assert!(
        told.contains("[displayed: Rich()]") && told.contains("characters cut"),
        "{told}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn interrupting_agent_code_keeps_the_namespace_and_the_conversation() {
    let dir = crate::support::TempDir::new("agent-interrupt");
    let started = dir.0.join("started");
    let code = format!(
        "```python\nbefore_sleep = 5\nopen({:?}, 'w').close()\nimport time\ntime.sleep(60)\nafter_sleep = 6\n```",
        started.to_str().unwrap()
    );
    let llm = FakeLlm::start(vec![
        Reply::Answer(code),
        Reply::Answer("Nothing to run this time.".into()),
        Reply::Answer("A fresh start.".into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    // The marker file is written with open(): allowed, so the guard lets it be.
    kernel.execute("%ask_config --allow files").await;
    let msg_id = kernel
        .send(
            Channel::Shell,
            "execute_request",
            json!({ "code": "%%ask\nsleep for a minute" }),
        )
        .await;
    // The agent's code signals that it runs by creating a file.
    crate::support::within(Duration::from_secs(30), async {
        while !started.exists() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    kernel
        .request(Channel::Control, "interrupt_request", json!({}))
        .await;
    let reply = tokio::time::timeout(Duration::from_secs(5), kernel.reply(Channel::Shell))
        .await
        .expect("the interrupted agent code stops promptly");
    assert_eq!(reply.parent_header["msg_id"], msg_id.as_str());
    assert_eq!(reply.content["ename"], "KeyboardInterrupt");

    // What the code did before the interrupt stays; what came after never ran.
    let (_, iopub) = kernel
        .execute("(before_sleep, 'after_sleep' in globals())")
        .await;
    assert_eq!(result_text(&iopub), "(5, False)");

    // The next request continues the conversation; --new starts afresh.
    let mentions_first = |llm: &FakeLlm| {
        let requests = llm.requests.lock().unwrap();
        requests.last().unwrap()["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| {
                m["content"]
                    .as_str()
                    .unwrap()
                    .contains("sleep for a minute")
            })
    };
    let (reply, _) = kernel.execute("%%ask\nand now?").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert!(
        mentions_first(&llm),
        "the interrupted request was forgotten"
    );
    let (reply, _) = kernel.execute("%%ask --new\nsomething else").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert!(!mentions_first(&llm), "--new kept the earlier conversation");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_model_sees_a_bounded_summary_of_the_users_variables() {
    let llm = FakeLlm::start(vec![Reply::Answer("Noted.".into())]).await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel
        .execute("import os\ndef helper(): pass\nclass Thing: pass\n_private = 1\nword = 'hello'\nnumbers = list(range(1000))")
        .await;
    // Far more variables than a prompt should carry.
    kernel
        .execute("for i in range(3000): globals()[f'filler_{i}'] = i")
        .await;
    let (reply, _) = kernel.execute("%%ask\nwhat do I have?").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);

    let system = told_model(&llm.requests.lock().unwrap()[0]);
    assert!(system.contains("word: str len=5 = 'hello'"), "{system}");
    assert!(system.contains("numbers: list len=1000"), "{system}");
    // Modules, functions, classes and private names are counted, not listed.
    for hidden in ["os", "helper", "Thing", "_private"] {
        let line = format!("\n{hidden}: ");
        assert!(!system.contains(&line), "{hidden} in {system}");
    }
    assert!(
        system.contains("functions, classes or modules)"),
        "{system}"
    );
    // 3,000 fillers would take over 40,000 characters: the summary keeps its
    // head and tail within its bound.
    assert!(system.contains("characters cut"), "{system}");
    assert!(system.len() < 12_000, "{} characters", system.len());
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
    for (name, edge) in [("analyst", "code -.-> error"), ("rlm", "extract -.-> run")] {
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

#[tokio::test(flavor = "multi_thread")]
async fn long_running_agent_code_shows_its_output_while_it_runs() {
    let code = "import time\nfor step in range(8):\n    print(f'step {step}')\n    time.sleep(0.4)";
    let llm = FakeLlm::start(vec![
        Reply::Answer(format!("```python\n{code}\n```")),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, iopub) = kernel.execute("%%ask\ncount slowly").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let running: Vec<_> = iopub
        .iter()
        .filter(|m| m.content["metadata"]["mahtab"]["kind"] == "running")
        .map(|m| {
            (
                m.header.msg_type.as_str(),
                m.content["data"]["text/plain"].as_str().unwrap(),
                m.content["transient"]["display_id"].as_str().unwrap(),
            )
        })
        .collect();
    // Shown once the code had run a while, updated in place with what came
    // next, and emptied at the end.
    let (first, rest) = running.split_first().expect("a running panel");
    assert_eq!(first.0, "display_data");
    assert!(first.1.starts_with("[running, ") && first.1.contains("\nstep 0\n"));
    assert!(!first.1.contains("step 7"), "{}", first.1);
    assert!(
        rest.iter()
            .all(|m| m.0 == "update_display_data" && m.2 == first.2)
    );
    let later = rest
        .iter()
        .rev()
        .find(|m| !m.1.is_empty())
        .expect("an update");
    assert!(later.1.len() > first.1.len(), "{later:?} after {first:?}");
    assert_eq!(rest.last().unwrap().1, "");
    // The output panel follows, as for quick code, with all of it.
    let outputs = panel_texts(&iopub, "output");
    let all: String = (0..8).map(|i| format!("\nstep {i}")).collect();
    assert_eq!(outputs, [format!("[output]{all}")]);
    let emptied = iopub
        .iter()
        .position(|m| {
            m.content["metadata"]["mahtab"]["kind"] == "running"
                && m.content["data"]["text/plain"] == ""
        })
        .unwrap();
    let output = iopub
        .iter()
        .position(|m| m.content["metadata"]["mahtab"]["kind"] == "output")
        .unwrap();
    assert!(emptied < output);
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_code_may_await_and_the_review_sees_what_it_changed() {
    let llm = FakeLlm::start(vec![
        Reply::Answer(
            "```python\nimport asyncio\nawait asyncio.sleep(0)\nn_items = len(items)\nitems.append(4)\n```"
                .into(),
        ),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute("items = [1, 2, 3]").await;
    let (reply, _) = kernel
        .execute("%%ask\nCount the items, then add a 4 to them.")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    // The review reads the request and what the code did, changes included.
    let review = llm.last_message(1);
    assert!(review.starts_with("Request:\nCount the items"), "{review}");
    assert!(
        review.contains("n_items: int = 3 (new)")
            && review.contains("items: list len 4 = [1, 2, 3, 4] (changed in place)"),
        "{review}"
    );
    let (_, iopub) = kernel.execute("n_items, items").await;
    assert_eq!(result_text(&iopub), "(3, [1, 2, 3, 4])");
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_code_may_use_magics_as_a_cell_does() {
    let mut kernel_probe = Kernel::start().await;
    let (probe, _) = kernel_probe.execute("import IPython").await;
    drop(kernel_probe);
    if probe.content["status"] != "ok" {
        return; // plain Python: no magics anywhere
    }
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\n%config Completer.use_jedi = False\n%time done = 1\n```".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, iopub) = kernel.execute("%%ask\nset it up").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let outputs = panel_texts(&iopub, "output");
    assert!(
        outputs.iter().any(|text| text.contains("Wall time")),
        "{outputs:?}"
    );
    assert!(panel_texts(&iopub, "error").is_empty());
    let (_, iopub) = kernel.execute("done").await;
    assert_eq!(result_text(&iopub), "1");
}
