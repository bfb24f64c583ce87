//! Other solutions tried beside a turn's code, or after a judged "done",
//! through the real kernel and its Python: sampled from a real HTTP server
//! side by side, run on scratch copies of the user's variables, and
//! compared with the run's own values.

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{Kernel, panel_texts, result_text, told_model};
use mahtab::wire::Message;

const ONE_VALUE: &str = r#"{"form": "one number"}"#;

fn answer(code: &str) -> Reply {
    Reply::Answer(format!("```python\n{code}\n```"))
}

/// The kernel with the server as its provider, trying two other solutions,
/// answering at a temperature of 0 as the local model does (a provider
/// left at its own sampling keeps it for the others too).
async fn kernel(llm: &FakeLlm) -> Kernel {
    let mut env = llm.env();
    env.push(("MAHTAB_CANDIDATES", "2".into()));
    env.push(("MAHTAB_TEMPERATURE", "0".into()));
    Kernel::start_with_env(&env).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_value_two_other_solutions_contradict_is_redone_and_agreement_goes_to_the_review() {
    // The two other solutions change `rows` in place: only their copies.
    let other = "rows.append(4)\nn = len(rows) - 1";
    let llm = FakeLlm::start(vec![
        answer("n = len(rows) - 1"),
        answer(other),
        answer(other),
        answer("n = len(rows)"),
        answer(other),
        answer(other),
        Reply::Answer(ONE_VALUE.into()),
        Reply::Answer(crate::ask::DONE.into()),
    ])
    .await;
    let mut kernel = kernel(&llm).await;
    kernel.execute("rows = [1, 2, 3]").await;
    let (reply, iopub) = kernel
        .execute("%%ask\nStore the number of items in rows in `n`.")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);

    let requests = llm.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 8, "the form, then the review");
    // The others were asked for the same prompt as the turn's answer (and
    // for the code alone, at its end), at their own temperature and seeds.
    let own = told_model(&requests[0]);
    for other in &requests[1..3] {
        let told = told_model(other);
        assert!(
            told.starts_with(&own) && told.ends_with("no explanation.)"),
            "{told}"
        );
        assert_eq!(other["stop"], serde_json::json!(["\n```\n"]));
    }
    assert_eq!(requests[0]["temperature"].as_f64(), Some(0.0));
    let temperature = requests[1]["temperature"].as_f64().unwrap();
    assert!((temperature - 0.7).abs() < 1e-6, "{temperature}");
    assert_ne!(requests[1]["seed"], requests[2]["seed"]);
    // The model was shown both values and the other code.
    let told = told_model(&requests[3]);
    assert!(told.contains("2 other solutions"), "{told}");
    assert!(told.contains("n: int = 2"), "{told}");
    assert!(told.contains("n: int = 3"), "{told}");
    assert!(told.contains("rows.append(4)"), "{told}");
    // Agreement does not stand in for the review; the review is told of it.
    let review = told_model(&requests[7]);
    assert!(
        review.contains("Of 3 solutions of this request written independently, 3 computed"),
        "{review}"
    );

    let summary = panel_texts(&iopub, "summary").join("\n");
    assert!(summary.contains("done"), "{summary}");
    assert!(
        summary.contains("the same in 3 of 3 solutions written independently"),
        "{summary}"
    );
    // Only the turns' own code ran in the namespace.
    let code = panel_texts(&iopub, "code").join("\n");
    assert!(!code.contains("append"), "{code}");
    let (_, iopub) = kernel.execute("rows, n").await;
    assert_eq!(result_text(&iopub), "([1, 2, 3], 3)");
}

#[tokio::test(flavor = "multi_thread")]
async fn other_solutions_that_fail_or_would_write_files_leave_the_review_to_judge() {
    let llm = FakeLlm::start(vec![
        answer("total = sum(prices)"),
        answer("open('copy.txt', 'w').write(str(prices))\ntotal = sum(prices)"),
        answer("open('copy.txt', 'w').write(str(prices))\ntotal = sum(prices)"),
        Reply::Answer(ONE_VALUE.into()),
        Reply::Answer(crate::ask::DONE.into()),
    ])
    .await;
    let mut kernel = kernel(&llm).await;
    kernel.execute("prices = [2.5, 1.5]").await;
    let (reply, iopub) = kernel
        .execute("%%ask\nStore the sum of prices in `total`.")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert_eq!(
        llm.requests.lock().unwrap().len(),
        5,
        "the review was asked"
    );
    let summary = panel_texts(&iopub, "summary").join("\n");
    assert!(summary.contains("done"), "{summary}");
    assert!(!summary.contains("solutions written"), "{summary}");
    let (_, iopub) = kernel
        .execute("import os; os.path.exists('copy.txt'), total")
        .await;
    assert_eq!(result_text(&iopub), "(False, 4.0)");
}

/// The kernel with the server as its provider, comparing a judged "done"
/// with two solutions written independently, at a temperature of 0.
async fn cross_checking(llm: &FakeLlm) -> Kernel {
    let mut env = llm.env();
    env.push(("MAHTAB_CROSS_CHECKS", "2".into()));
    env.push(("MAHTAB_TEMPERATURE", "0".into()));
    Kernel::start_with_env(&env).await
}

/// A run that appends to `rows` and counts it, passed by the review, then
/// two solutions written independently (`others`); what the cell showed.
async fn appended_and_cross_checked(others: [&str; 2]) -> (FakeLlm, Kernel, Vec<Message>) {
    let own = "rows.append(4)\nn = len(rows)";
    let llm = FakeLlm::start(vec![
        answer(own),
        Reply::Answer(ONE_VALUE.into()),
        Reply::Answer(crate::ask::DONE.into()),
        answer(others[0]),
        answer(others[1]),
    ])
    .await;
    let mut kernel = cross_checking(&llm).await;
    kernel.execute("rows = [1, 2, 3]").await;
    let (reply, iopub) = kernel
        .execute("%%ask\nAppend 4 to rows and store its new length in `n`.")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    (llm, kernel, iopub)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_done_another_solution_computes_too_is_confirmed_by_it() {
    // Tried on rows as it was before the run, both make 4, as the run's own
    // did (tried on rows as the run left it, both would make 5).
    let (llm, mut kernel, iopub) =
        appended_and_cross_checked(["rows.append(4)\nn = len(rows)", "n = len(rows) + 1"]).await;
    let requests = llm.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 5, "the answer, form, review, two others");
    // Asked the request alone, for the code alone, at their own temperature.
    for other in &requests[3..5] {
        let messages = other["messages"].as_array().unwrap();
        let asked = messages.last().unwrap()["content"].as_str().unwrap_or("");
        assert!(
            asked.starts_with("Append 4 to rows") && asked.ends_with("no explanation.)"),
            "{asked}"
        );
        assert!(
            !told_model(other).contains("is_complete"),
            "{}",
            told_model(other)
        );
        assert!((other["temperature"].as_f64().unwrap() - 0.7).abs() < 1e-6);
    }
    let summary = panel_texts(&iopub, "summary").join("\n");
    assert!(summary.contains("done · checked:"), "{summary}");
    assert!(
        summary.contains("the same in 3 of 3 solutions written independently"),
        "{summary}"
    );
    // The user's rows were changed by the run's own code only.
    let (_, iopub) = kernel.execute("rows, n").await;
    assert_eq!(result_text(&iopub), "([1, 2, 3, 4], 4)");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_done_every_other_solution_computes_otherwise_is_not_confirmed() {
    let (_, mut kernel, iopub) =
        appended_and_cross_checked(["n = len(rows)", "n = len(rows) + 2"]).await;
    let summary = panel_texts(&iopub, "summary").join("\n");
    assert!(
        summary.contains(
            "answered, not confirmed · the review passed it but 2 other solutions written independently computed other values"
        ),
        "{summary}"
    );
    // The values stay as the run made them.
    let (_, iopub) = kernel.execute("rows, n").await;
    assert_eq!(result_text(&iopub), "([1, 2, 3, 4], 4)");
}

#[tokio::test(flavor = "multi_thread")]
async fn another_solution_that_raised_is_mended_once_from_its_own_error() {
    let own = "rows.append(4)\nn = len(rows)";
    let llm = FakeLlm::start(vec![
        answer(own),
        Reply::Answer(ONE_VALUE.into()),
        Reply::Answer(crate::ask::DONE.into()),
        answer("count = 1\nn = len(row) + 1"),
        answer("n = len(rows) + 2"),
        answer("n = len(rows) + 1"),
    ])
    .await;
    let mut kernel = cross_checking(&llm).await;
    kernel.execute("rows = [1, 2, 3]").await;
    let (_, iopub) = kernel
        .execute("%%ask\nAppend 4 to rows and store its new length in `n`.")
        .await;
    let requests = llm.requests.lock().unwrap().clone();
    assert_eq!(
        requests.len(),
        6,
        "the answer, form, review, two others, a mend"
    );
    // Its own code and what it raised, where: nothing of the run's.
    let mend = requests[5]["messages"].as_array().unwrap();
    let said: Vec<&str> = mend
        .iter()
        .map(|m| m["content"].as_str().unwrap_or(""))
        .collect();
    // The system prompt, the request, its code and error.
    assert_eq!(said.len(), 3, "{said:?}");
    assert!(
        said[2].contains("count = 1\nn = len(row) + 1\n"),
        "{}",
        said[2]
    );
    assert!(
        said[2].contains("line 2: `n = len(row) + 1`\nNameError: name 'row' is not defined\n"),
        "{}",
        said[2]
    );
    assert!(!told_model(&requests[5]).contains("rows.append(4)"));
    let summary = panel_texts(&iopub, "summary").join("\n");
    assert!(
        summary.contains("the same in 2 of 3 solutions written independently"),
        "{summary}"
    );
    let (_, iopub) = kernel.execute("rows, n").await;
    assert_eq!(result_text(&iopub), "([1, 2, 3, 4], 4)");
}
