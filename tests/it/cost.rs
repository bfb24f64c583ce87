//! The cost of a run in the cell, through the real kernel and a scripted
//! model over real HTTP: the settings file's price for the model turns the
//! tokens the server reports into dollars on the summary line, and the
//! session's total shows in `%ask_config`.

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{Kernel, TempDir, panel_texts, stream_text};

#[tokio::test(flavor = "multi_thread")]
async fn the_summary_and_ask_config_show_what_the_runs_cost() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("It is 42.".into()),
        Reply::Answer("Still 42.".into()),
    ])
    .await;
    let dir = TempDir::new("cost");
    let settings = dir.0.join("mahtab.toml");
    // The scripted server reports 30 prompt and 12 completion tokens a call.
    std::fs::write(
        &settings,
        "[prices]\n\"fake-model\" = { input = 1000, output = 2000 }\n",
    )
    .unwrap();
    let mut env = llm.env();
    env.push(("MAHTAB_CONFIG", settings.display().to_string()));
    let mut kernel = Kernel::start_with_env(&env).await;
    for _ in 0..2 {
        // --fresh: the second run asks again rather than replay the first.
        let (reply, iopub) = kernel
            .execute("%%ask --fresh\nWhat is six times seven?")
            .await;
        assert_eq!(reply.content["status"], "ok", "{}", reply.content);
        let summary = &panel_texts(&iopub, "summary")[0];
        // (30 x 1000 + 12 x 2000) / 1e6 dollars.
        assert!(
            summary.contains("30 in / 12 out tokens · $0.0540"),
            "{summary}"
        );
    }
    let (_, iopub) = kernel.execute("%ask_config").await;
    let overview = stream_text(&iopub, "stdout");
    assert!(
        overview.contains("2 runs, 60 in / 24 out tokens · $0.1080"),
        "{overview}"
    );
}
