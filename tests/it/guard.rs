//! The guard on agent code through the kernel, with a scripted model over
//! real HTTP: code that would run shell commands asks first (and runs only
//! on "y"), is refused with a message the model sees when nobody can be
//! asked, and runs without asking once `%ask_config --allow` says so; and
//! `--approve always|risky|never`, which says when code asks at all.

use serde_json::json;

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{Channel, Kernel, parent_id, result_text};

const DONE: &str = r#"{"is_complete": true, "reasoning": "done", "next_action": ""}"#;

/// Agent code that runs a shell command through an alias, leaving a file.
fn shell_block(marker: &std::path::Path) -> String {
    format!(
        "```python\nimport subprocess as sp\nsp.run(['touch', {:?}])\n```",
        marker.to_str().unwrap()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn shell_commands_ask_first_and_run_only_when_allowed() {
    let dir = crate::support::TempDir::new("guard-ask");
    let marker = dir.0.join("ran");
    let llm = FakeLlm::start(vec![
        Reply::Answer(shell_block(&marker)),
        Reply::Answer(DONE.into()),
        Reply::Answer(shell_block(&marker)),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    for (answer, runs) in [("n", false), ("y", true)] {
        let msg_id = kernel
            .send(
                Channel::Shell,
                "execute_request",
                json!({ "code": "%%ask\ntouch the file", "allow_stdin": true }),
            )
            .await;
        let request = kernel.next_stdin().await;
        assert_eq!(parent_id(&request), msg_id);
        let prompt = request.content["prompt"].as_str().unwrap();
        assert_eq!(
            prompt,
            "The agent's code would run shell commands (subprocess.run, line 2). Run it? [y/N] "
        );
        kernel.input_reply(&request, answer).await;
        let reply = kernel.reply(Channel::Shell).await;
        assert_eq!(reply.content["status"], "ok", "{}", reply.content);
        kernel.iopub_for(&msg_id).await;
        assert_eq!(marker.exists(), runs, "after answering {answer:?}");
    }
    // The model heard that the user said no.
    assert!(
        llm.last_message(1)
            .contains("Not run: the user did not allow this code")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_stdin_the_code_is_refused_and_the_model_is_told_how_to_allow_it() {
    let dir = crate::support::TempDir::new("guard-refuse");
    let marker = dir.0.join("ran");
    let llm = FakeLlm::start(vec![
        Reply::Answer(format!(
            "```python\nkept = 1\n```\n{}",
            shell_block(&marker)
        )),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, _) = kernel.execute("%%ask\ntouch the file").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert!(!marker.exists());
    let told = llm.last_message(1);
    assert!(
        told.contains("no one can allow that here") && told.contains("%ask_config --allow shell"),
        "{told}"
    );
    let (_, iopub) = kernel.execute("kept").await;
    assert_eq!(result_text(&iopub), "1");
}

#[tokio::test(flavor = "multi_thread")]
async fn allowed_kinds_run_without_asking() {
    let dir = crate::support::TempDir::new("guard-allow");
    let marker = dir.0.join("ran");
    let llm = FakeLlm::start(vec![
        Reply::Answer(shell_block(&marker)),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, iopub) = kernel.execute("%ask_config --allow shell,network").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let overview = crate::support::stream_text(&iopub, "stdout");
    assert!(
        overview.contains("allowed    shell, network  [%ask_config]"),
        "{overview}"
    );
    let (reply, _) = kernel.execute("%%ask\ntouch the file").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert!(marker.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_toolboxs_file_changes_ask_like_any_other() {
    let dir = crate::support::TempDir::new("guard-toolbox");
    let kept = dir.0.join("kept.csv");
    std::fs::write(&kept, "a,b\n").unwrap();
    let llm = FakeLlm::start(vec![
        Reply::Answer(format!(
            "```python\ndelete({:?})\n```",
            kept.to_str().unwrap()
        )),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, _) = kernel.execute("%%ask\ndelete the file").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    // Nobody could be asked (no stdin): refused, and the file is there.
    assert!(kept.exists());
    let told = llm.last_message(1);
    assert!(
        told.contains("delete or overwrite files (delete(), line 1)"),
        "{told}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn approve_never_runs_flagged_code_without_asking_and_ask_takes_it_too() {
    let dir = crate::support::TempDir::new("guard-approve-never");
    let (first, second) = (dir.0.join("first"), dir.0.join("second"));
    let llm = FakeLlm::start(vec![
        Reply::Answer(shell_block(&first)),
        Reply::Answer(DONE.into()),
        Reply::Answer(shell_block(&second)),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, iopub) = kernel.execute("%ask_config --approve never").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let overview = crate::support::stream_text(&iopub, "stdout");
    assert!(
        overview.contains("approve    never: agent code runs without asking  [%ask_config]"),
        "{overview}"
    );
    // No stdin, yet nothing is refused: nothing asks.
    let (reply, _) = kernel.execute("%%ask\ntouch the file").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert!(first.exists());
    kernel.execute("%ask_config --reset").await;
    let (reply, _) = kernel
        .execute("ask('touch the other file', approve='never')")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert!(second.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn approve_always_asks_before_every_block_and_without_stdin_the_model_hears_why_not() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nflag = 'ran'\n```".into()),
        Reply::Answer(DONE.into()),
        Reply::Answer("```python\nflag = 'ran'\n```".into()),
        Reply::Answer("I could not run it.".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    // Harmless code asks too, and "y" runs it.
    let msg_id = kernel
        .send(
            Channel::Shell,
            "execute_request",
            json!({ "code": "%%ask --approve always\nset the flag", "allow_stdin": true }),
        )
        .await;
    let request = kernel.next_stdin().await;
    assert_eq!(parent_id(&request), msg_id);
    assert_eq!(request.content["prompt"], "Run this code? [y/N] ");
    kernel.input_reply(&request, "y").await;
    let reply = kernel.reply(Channel::Shell).await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    kernel.iopub_for(&msg_id).await;
    let (_, iopub) = kernel.execute("flag").await;
    assert_eq!(result_text(&iopub), "'ran'");

    // Where no one can answer, the block is refused and the model told.
    kernel.execute("del flag").await;
    let (reply, _) = kernel
        .execute("%%ask --approve always --max-turns 2\nset the flag")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let told = llm.last_message(3);
    assert!(
        told.contains("no one can approve it") && told.contains("--approve risky"),
        "{told}"
    );
    let (_, iopub) = kernel.execute("'flag' in globals()").await;
    assert_eq!(result_text(&iopub), "False");
}
