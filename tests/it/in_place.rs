//! Requests to change a value itself, through the real kernel and a
//! scripted model over real HTTP: a rebinding is caught, the original object
//! goes back under its name, the model is told its own line in place, and
//! the change in place ends the run with no review; a pandas change that
//! went to a copy is caught from pandas' own warning.

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{Kernel, result_text};

#[tokio::test(flavor = "multi_thread")]
async fn a_rebound_list_gets_its_original_back_and_the_change_in_place_is_done() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nemails = [e.strip().lower() for e in emails]\n```".into()),
        Reply::Answer("```python\nemails[:] = [e.strip().lower() for e in emails]\n```".into()),
        Reply::Answer(crate::ask::DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel
        .execute("emails = [' Ann@X.com', 'BOB@x.com ']\nalias = emails")
        .await;
    let (reply, _) = kernel
        .execute("%%ask\nClean up emails: strip and lower-case each (change the list itself).")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let told = llm.last_message(1);
    assert!(
        told.contains("`emails` was assigned a new object"),
        "{told}"
    );
    assert!(
        told.contains("`emails` names the original object again"),
        "{told}"
    );
    assert!(
        told.contains("write `emails[:] = [e.strip().lower() for e in emails]`"),
        "{told}"
    );
    // The rebinding went back with no review call; the change in place went
    // to the review, which saw what it did to the list.
    assert_eq!(llm.request_count(), 3);
    let review = llm.last_message(2);
    assert!(review.contains("emails: list len 2"), "{review}");
    let (_, iopub) = kernel.execute("emails is alias, emails").await;
    assert_eq!(result_text(&iopub), "(True, ['ann@x.com', 'bob@x.com'])");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pandas_change_that_went_to_a_copy_is_sent_back_as_an_assignment() {
    let mut probe = Kernel::start().await;
    let (has_pandas, _) = probe.execute("import pandas").await;
    drop(probe);
    if has_pandas.content["status"] != "ok" {
        return; // no pandas in this Python
    }
    let llm = FakeLlm::start(vec![
        Reply::Answer(
            "```python\npeople['age'].fillna(people['age'].mean(), inplace=True)\n```".into(),
        ),
        Reply::Answer(
            "```python\npeople['age'] = people['age'].fillna(people['age'].mean())\n```".into(),
        ),
        Reply::Answer(crate::ask::DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel
        .execute(
            "import pandas as pd, warnings\nwarnings.simplefilter('always')\n\
             people = pd.DataFrame({'age': [31, None, 45]})",
        )
        .await;
    let (reply, _) = kernel
        .execute("%%ask\nFill the missing ages in people with the mean age.")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let (_, iopub) = kernel.execute("people['age'].tolist()").await;
    let ages = result_text(&iopub);
    let told = llm.last_message(1);
    if ages == "[31.0, 38.0, 45.0]" && !told.contains("went to a copy") {
        // A pandas without copy-on-write changes the column in place and
        // warns of nothing: the first block simply worked.
        return;
    }
    assert!(told.contains("went to a copy"), "{told}");
    assert!(
        told.contains("write `people['age'] = people['age'].fillna(people['age'].mean())`"),
        "{told}"
    );
    assert_eq!(ages, "[31.0, 38.0, 45.0]");
}
