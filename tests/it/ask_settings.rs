//! Where a `%%ask` cell's settings come from (the cell, `%ask_config`, the
//! settings file) and a broken settings file's readable error.

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{Kernel, stream_text};

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
