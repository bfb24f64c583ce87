//! What an agent run changed, and `%ask_undo`, through the real kernel and a
//! scripted model over real HTTP: the "changed" panel lists the names added,
//! changed and removed and the files written; `%ask_undo` puts them back,
//! leaves alone what the user's own cells changed since, and covers `ask()`.

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{Kernel, panel_texts, stream_text};

const RUN_CODE: &str = "```python\nprices.append(4)\ndel scratch\ntotal = sum(prices)\nwrite('report.txt', 'total: %d' % total)\nnote = 'made by the agent'\n```";

#[tokio::test(flavor = "multi_thread")]
async fn the_changed_panel_lists_the_run_and_undo_puts_it_back_but_not_the_users_edits() {
    let llm = FakeLlm::start(vec![Reply::Answer(RUN_CODE.into())]).await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel
        .execute("prices = [1, 2, 3]\nscratch = {'a': 1}\nnote = 'mine'")
        .await;
    let (reply, iopub) = kernel
        .execute("%%ask --once --allow files\nAdd a price of 4, total them, write report.txt.")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let changed = panel_texts(&iopub, "changes");
    assert_eq!(changed.len(), 1, "{changed:?}");
    let panel = &changed[0];
    for line in [
        "added    total: int = 10",
        "changed  note: str len 4 = 'mine' -> str len 17 = 'made by the agent'",
        "changed  prices: list len 3 = [1, 2, 3] -> list len 4 = [1, 2, 3, 4]",
        "removed  scratch (was dict len 1 = {'a': 1})",
        "files    report.txt (created)",
        "(%ask_undo puts it back)",
    ] {
        assert!(panel.contains(line), "{line:?} not in\n{panel}");
    }
    // The panel comes before the summary that ends the run.
    let kinds: Vec<_> = iopub
        .iter()
        .filter_map(|m| m.content["metadata"]["mahtab"]["kind"].as_str())
        .filter(|kind| *kind != "status")
        .collect();
    assert_eq!(kinds[kinds.len() - 2..], ["changes", "summary"]);
    assert!(kernel.dir().join("report.txt").exists());

    // The user's own cell changes `note` after the run: undo leaves it.
    kernel.execute("note = 'edited by the user'").await;
    let (reply, iopub) = kernel.execute("%ask_undo").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let report = stream_text(&iopub, "stdout");
    assert!(
        report.contains("Undid the last run: prices, scratch, total, report.txt.")
            && report.contains("left as they are (changed since by your code): note"),
        "{report}"
    );
    let (_, iopub) = kernel
        .execute("print(prices, scratch, note, 'total' in globals())")
        .await;
    assert_eq!(
        stream_text(&iopub, "stdout"),
        "[1, 2, 3] {'a': 1} edited by the user False\n"
    );
    assert!(!kernel.dir().join("report.txt").exists());

    // Nothing is left to undo; a count that is not one is a usage error.
    let (_, iopub) = kernel.execute("%ask_undo").await;
    assert!(stream_text(&iopub, "stdout").starts_with("Nothing to undo"));
    let (reply, _) = kernel.execute("%ask_undo twice").await;
    assert_eq!(reply.content["status"], "error");
    assert!(
        reply.content["evalue"]
            .as_str()
            .unwrap()
            .contains("usage: %ask_undo [N]"),
        "{}",
        reply.content
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn ask_runs_are_undone_too_newest_first() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\ncount = 1\n```".into()),
        Reply::Answer("```python\ncount += 1\nlabel = 'two'\n```".into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, _) = kernel
        .execute("first = ask('Set count to 1.', once=True)\nsecond = ask('Add one to count.', once=True)\nprint(count, label)")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let (_, iopub) = kernel.execute("%ask_undo 2").await;
    let report = stream_text(&iopub, "stdout");
    assert_eq!(
        report,
        "Undid the last run: count, label.\nUndid the run before: count.\n"
    );
    let (_, iopub) = kernel
        .execute("print('count' in globals(), 'label' in globals())")
        .await;
    assert_eq!(stream_text(&iopub, "stdout"), "False False\n");
}
