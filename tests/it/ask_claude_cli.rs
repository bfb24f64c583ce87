//! `%%ask` through the `claude` CLI provider (a stand-in executable on
//! PATH): streaming, cost, a failing CLI, and an interrupt that kills it.

use std::time::Duration;

use serde_json::json;

use crate::fake_claude::{claude_script, path_with};
use crate::support::{Channel, Kernel, is_panel, result_text, stream_text};

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
