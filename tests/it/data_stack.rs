//! Tests that need the data stack (IPython, pandas, matplotlib): they run
//! against the project's environment, which has it, and fail there when it
//! is missing; the plain-Python run of the suite leaves this module out
//! (`--skip data_stack::`).

use crate::ask::DONE;
use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{Kernel, panel_texts, result_text, stream_text, told_model, types};

#[tokio::test(flavor = "multi_thread")]
async fn a_figure_agent_code_draws_shows_in_its_own_cell() {
    let llm = FakeLlm::start(vec![
        Reply::Answer(
            "```python\nimport matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nprint('drawn')\n```"
                .into(),
        ),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, _) = kernel.execute("import matplotlib, IPython").await;
    assert_eq!(
        reply.content["status"], "ok",
        "the data stack is missing: {}",
        reply.content
    );
    // (A request for a plot would end at the figure with no review; the
    // review is where the model reads the figure's text.)
    let (reply, iopub) = kernel.execute("%%ask\nshow me the squares").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let images = iopub
        .iter()
        .filter(|m| {
            m.header.msg_type == "display_data" && m.content["data"]["image/png"].is_string()
        })
        .count();
    assert_eq!(images, 1, "{:?}", types(&iopub));
    assert_eq!(panel_texts(&iopub, "output"), ["[output]\ndrawn"]);
    // A model that does not see images reads the figure in words.
    let review = llm.last_prompt();
    assert!(
        review.contains("[displayed: figure: figure 640x480 px, 1 axes; axes 1: x unlabelled; y unlabelled; 1 line x 0..2 y 1..9]"),
        "{review}"
    );
    let requests = llm.requests.lock().unwrap().clone();
    assert!(
        requests.iter().all(|r| r["messages"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["content"].is_string())),
        "no image parts for a text-only model"
    );
    // Nothing of it is left for the user's next cell.
    let (_, iopub) = kernel.execute("1 + 1").await;
    assert_eq!(
        types(&iopub),
        ["status", "execute_input", "execute_result", "status"]
    );
}

/// The content parts of the review's message (the second request's last).
fn review_parts(llm: &FakeLlm) -> Vec<serde_json::Value> {
    let requests = llm.requests.lock().unwrap();
    let review = requests[1]["messages"].as_array().unwrap().last().unwrap();
    review["content"].as_array().expect("content parts").clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_sees_images_gets_the_figure_itself() {
    let plot = "```python\nimport matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.bar(['a', 'b'], [3, 5])\nax.set_title('Totals')\nplt.show()\n```";
    let llm = FakeLlm::start(vec![Reply::Answer(plot.into()), Reply::Answer(DONE.into())]).await;
    let mut env = llm.env();
    env.push(("MAHTAB_VISION", "1".into()));
    let mut kernel = Kernel::start_with_env(&env).await;
    let (reply, _) = kernel.execute("%%ask\nshow me the totals").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    // The review got the figure as an image part after its words.
    let parts = review_parts(&llm);
    assert_eq!(parts[0]["type"], "text");
    let text = parts[0]["text"].as_str().unwrap();
    assert!(
        text.contains("figure: figure 640x480 px, 1 axes; axes 1: title 'Totals'; x unlabelled (ticks a, b); y unlabelled; 2 bars values 3..5"),
        "{text}"
    );
    assert_eq!(parts.len(), 2, "{parts:?}");
    assert_eq!(parts[1]["type"], "image_url");
    let url = parts[1]["image_url"]["url"].as_str().unwrap();
    // A PNG's signature, base64.
    assert!(
        url.starts_with("data:image/png;base64,iVBORw0KGgo"),
        "{}",
        &url[..40]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_says_its_model_takes_images_gets_the_figures() {
    let plot =
        "```python\nimport matplotlib.pyplot as plt\nplt.plot([1, 2], [3, 4])\nplt.show()\n```";
    // llama.cpp's /props for a model served with a vision projector.
    let props = serde_json::json!({
        "default_generation_settings": {"n_ctx": 32768},
        "modalities": {"vision": true, "audio": false},
    });
    let llm = FakeLlm::start_with_props(
        vec![Reply::Answer(plot.into()), Reply::Answer(DONE.into())],
        Some(props),
    )
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, _) = kernel.execute("%%ask\nshow me the line").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let parts = review_parts(&llm);
    assert_eq!(parts[1]["type"], "image_url", "{parts:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_model_sees_a_dataframes_columns_dtypes_and_first_values() {
    let llm = FakeLlm::start(vec![Reply::Answer("Noted.".into())]).await;
    let mut kernel = kernel_with_pandas(&llm, "import pandas as pd\nsales = pd.DataFrame({'fruit': ['apple', 'pear', 'plum', 'fig'], 'price': [1.5, 2.0, 0.5, 3.0]})").await;
    let (reply, _) = kernel.execute("%%ask\nwhat do I have?").await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let system = last_system_prompt(&llm);
    assert!(
        system.contains("sales: DataFrame (4, 2); columns fruit (")
            && system.contains("['apple', 'pear', 'plum']")
            && system.contains("price (float64) [1.5, 2.0, 0.5]"),
        "{system}"
    );
}

/// A kernel that talks to `llm`, with `setup` (code that makes pandas
/// tables) run in it; fails the test where pandas is missing.
async fn kernel_with_pandas(llm: &FakeLlm, setup: &str) -> Kernel {
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    let (reply, _) = kernel.execute(setup).await;
    assert_eq!(
        reply.content["status"], "ok",
        "pandas is missing: {}",
        reply.content
    );
    kernel
}

/// A model that answers with `answer`, says the result must be `form`,
/// then passes the work.
async fn answer_form_done(answer: &str, form: &str) -> FakeLlm {
    FakeLlm::start(vec![
        Reply::Answer(answer.into()),
        Reply::Answer(serde_json::json!({ "form": form }).to_string()),
        Reply::Answer(DONE.into()),
    ])
    .await
}

fn last_system_prompt(llm: &FakeLlm) -> String {
    told_model(&llm.requests.lock().unwrap()[0])
}

#[tokio::test(flavor = "multi_thread")]
async fn the_informer_tells_the_planner_a_tables_columns_missing_values_and_rows() {
    let llm = FakeLlm::start(vec![Reply::Answer(
        "Final Answer: one price is missing.".into(),
    )])
    .await;
    let mut kernel = kernel_with_pandas(&llm, "import pandas as pd\nsales = pd.DataFrame({'fruit': ['apple', 'pear', 'plum'], 'price': [1.5, None, 0.5]})").await;
    let (reply, iopub) = kernel
        .execute("%%ask --graph planner --informer\nwhich sales rows lack a price?")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let informed = panel_texts(&iopub, "key_information");
    assert_eq!(informed.len(), 1, "{informed:?}");
    let found = &informed[0];
    for part in [
        "sales: DataFrame, 3 rows x 2 columns",
        "price  float64  1 missing",
        "first rows:",
        "pear",
    ] {
        assert!(found.contains(part), "{part:?} missing from\n{found}");
    }
    let requests = llm.requests.lock().unwrap();
    let system = told_model(&requests[0]);
    assert!(system.contains("price  float64  1 missing"), "{system}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_triage_repairs_a_misspelt_column_without_asking_the_model() {
    let llm = FakeLlm::start(
        [
            r#"{"agent": "planner", "confidence": 0.2}"#,
            r#"{"action": "delegate", "agent": "planner", "task": "sum the prices"}"#,
            "Action: python\nAction Input: print(sales['prcie'].sum())",
            "Final Answer: the column name was wrong.",
            DONE, // the planner's check of its task
            DONE, // the triage's check of the request, after the repair
        ]
        .into_iter()
        .map(|text| Reply::Answer(text.into()))
        .collect(),
    )
    .await;
    let mut kernel = kernel_with_pandas(&llm, "import pandas as pd\nsales = pd.DataFrame({'fruit': ['apple', 'pear'], 'price': [1.5, 2.0]})").await;
    let (reply, iopub) = kernel
        .execute("%%ask --graph triage\nwhat do the sales add up to?")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let code = panel_texts(&iopub, "code");
    assert_eq!(
        code.last().map(String::as_str),
        Some("[code, turn 2]\nprint(sales['price'].sum())"),
        "{code:?}"
    );
    assert_eq!(panel_texts(&iopub, "output"), ["[output]\n3.5"]);
    let requests = llm.requests.lock().unwrap().len();
    assert_eq!(requests, 6, "the repair asked no model");
    // The review saw the failure and the repaired code with its result.
    let review = llm.last_prompt();
    assert!(
        review.contains("(it failed)")
            && review.contains("print(sales['price'].sum())")
            && review.contains("3.5"),
        "{review}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_users_own_data_typed_in_again_as_an_array_stays() {
    let llm = answer_form_done(
        "```python\nimport numpy as np\nx = np.array([-1, 2, 5])\nsquares = x**2\n```",
        "several values",
    )
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute("x = [-1, 2, 5]").await;
    let (reply, iopub) = kernel
        .execute("%%ask\nI have points x = [-1, 2, 5]. Put their squares in `squares`.")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let status = stream_text(&iopub, "stdout");
    assert!(!status.contains("defined already"), "{status}");
    // The block ran once, as written: its array of the user's list stays.
    let (_, iopub) = kernel.execute("type(x).__name__, squares.tolist()").await;
    assert_eq!(result_text(&iopub), "('ndarray', [1, 4, 25])");
    assert_eq!(llm.request_count(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_value_the_request_gives_as_an_example_does_not_replace_the_users() {
    // The notebook's `m` is 8; the request's example says 4, and the block
    // typed that over it: it runs again without the line, on the user's `m`.
    let llm = answer_form_done(
        "```python\nm = 4\nbits = (a[:, None] >> np.arange(m)[::-1]) & 1\n```",
        "a table",
    )
    .await;
    let mut kernel =
        kernel_with_pandas(&llm, "import numpy as np\na = np.array([1, 2, 3])\nm = 8").await;
    let (reply, iopub) = kernel
        .execute(
            "%%ask\nConvert each integer of a to a binary array of length m. For example, \
             say m = 4: 2 becomes (0, 0, 1, 0). Put the matrix in `bits`.",
        )
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let status = stream_text(&iopub, "stdout");
    assert!(status.contains("`m` is defined already"), "{status}");
    // The run on the user's `m` is the same turn's code again: no turn.
    assert_eq!(
        panel_texts(&iopub, "code").last().map(String::as_str),
        Some("[code, turn 1]\nbits = (a[:, None] >> np.arange(m)[::-1]) & 1")
    );
    let (_, iopub) = kernel.execute("m, bits.shape, bits[1].tolist()").await;
    assert_eq!(result_text(&iopub), "(8, (3, 8), [0, 0, 0, 0, 0, 0, 1, 0])");
    // One answer, the form and the review: the rerun asked no model.
    assert_eq!(llm.request_count(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_function_named_after_the_users_data_runs_named_otherwise_and_the_data_stays() {
    // The local model's helper took the name of the user's list (DS-1000):
    // the runtime does not run it, and it runs again renamed.
    let llm = answer_form_done(
        "```python\ndef shift(values, n):\n    return values[n:]\n\nmoved = shift(x, shift[0])\n```",
        "a list",
    )
    .await;
    let mut kernel = kernel_with_pandas(&llm, "x = [5, 6, 7]\nshift = [1, 2]").await;
    let (reply, iopub) = kernel
        .execute("%%ask\nShift x by the first value of shift and put the list in `moved`.")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let errors = panel_texts(&iopub, "error");
    assert!(
        errors
            .iter()
            .any(|e| e.contains("NameInUse: `def shift(...)` would replace `shift`")),
        "{errors:?}"
    );
    let status = stream_text(&iopub, "stdout");
    assert!(
        status.contains("definition named `shift_function`"),
        "{status}"
    );
    let (_, iopub) = kernel
        .execute("moved, shift, shift_function.__name__")
        .await;
    assert_eq!(result_text(&iopub), "([6, 7], [1, 2], 'shift_function')");
    // One answer, the form and the review: the rename asked no model.
    assert_eq!(llm.request_count(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_column_pandas_reports_missing_in_a_list_is_respelled_without_asking() {
    // `dropna(subset=[...])` raises KeyError(['wind_speed']): the error line
    // still names the close column, and the block's other key spelled
    // otherwise ('time'), and the block runs again with both.
    let llm = FakeLlm::start(vec![
        Reply::Answer(
            "```python\nclean = weather.dropna(subset=['wind_speed'])\n\
             print(clean['wind_speed'].max(), clean['time'].max())\n```"
                .into(),
        ),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = kernel_with_pandas(
        &llm,
        "import pandas as pd\n\
         weather = pd.DataFrame({'wind speed': [3.5, None, 7.0], 'Time': [1, 2, 3]})",
    )
    .await;
    let (reply, iopub) = kernel
        .execute("%%ask\nPrint the highest wind speed and the last time in weather.")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let panels = panel_texts(&iopub, "error").join("\n");
    assert!(
        panels.contains(
            "KeyError: ['wind_speed']. Did you mean: 'wind speed' for 'wind_speed' \
             (a column of weather)? Also: 'Time' for 'time'."
        ),
        "{panels}"
    );
    assert!(
        panel_texts(&iopub, "output")
            .iter()
            .any(|text| text.ends_with("7.0 3")),
        "{:?}",
        panel_texts(&iopub, "output")
    );
    // One answer and one review: the respelled block asked no model.
    assert_eq!(llm.request_count(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_series_method_called_through_an_accessor_runs_again_on_the_series_without_asking() {
    // `.str.isin` (as the local model wrote it, three times over when
    // told the error): the error line names the Series' own method, and
    // the block runs again without `.str`.
    let llm = FakeLlm::start(vec![
        Reply::Answer(
            "```python\nresult = df[df['A'].str.isin(['s', 'b'])]\nprint(len(result))\n```".into(),
        ),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = kernel_with_pandas(
        &llm,
        "import pandas as pd\ndf = pd.DataFrame({'A': ['s', 'x', 'b', 's']})",
    )
    .await;
    let (reply, iopub) = kernel
        .execute("%%ask\nPrint how many rows of df have an A of s or b.")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let errors = panel_texts(&iopub, "error").join("\n");
    assert!(
        errors.contains(
            "AttributeError: 'StringMethods' object has no attribute 'isin'. \
             Did you mean the Series's own .isin, without .str?"
        ),
        "{errors}"
    );
    assert_eq!(
        panel_texts(&iopub, "code").last().map(String::as_str),
        Some("[code, turn 2]\nresult = df[df['A'].isin(['s', 'b'])]\nprint(len(result))")
    );
    assert!(
        panel_texts(&iopub, "output")
            .iter()
            .any(|text| text.ends_with("3")),
        "{:?}",
        panel_texts(&iopub, "output")
    );
    // One answer and one review: the rerun asked no model.
    assert_eq!(llm.request_count(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_that_is_a_value_of_the_series_iterated_is_told_so_with_what_to_loop_over() {
    // `for col in row` gives the row's values: the first, NaN, is looked
    // up as a label. The error line says so (close_names.py), and the next
    // turn is told what to loop over (errors.rs, reading that line).
    let llm = FakeLlm::start(vec![
        Reply::Answer(
            "```python\nrow = df.iloc[0]\nresult = [col for col in row if row[col] > 1]\n```"
                .into(),
        ),
        Reply::Answer(
            "```python\nrow = df.iloc[0]\nresult = [col for col, v in row.items() if v > 1]\n\
             print(result)\n```"
                .into(),
        ),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = kernel_with_pandas(
        &llm,
        "import pandas as pd\nimport numpy as np\n\
         df = pd.DataFrame({'c0': [np.nan, 1.0], 'c1': [6.0, 2.0]})",
    )
    .await;
    let (reply, iopub) = kernel
        .execute("%%ask\nWhich columns of the first row of df are above 1?")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let panels = panel_texts(&iopub, "error").join("\n");
    assert!(
        panels.contains("KeyError: nan. nan is a value of row, not one of its labels"),
        "{panels}"
    );
    let second = llm.last_message(1);
    assert!(
        second.contains("loop over the labels (series.index)"),
        "{second}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_table_other_than_the_one_the_request_writes_out_goes_back_to_the_model() {
    // The request prints the notebook's table and the table it wants; the
    // first answer's running sum is not it, and code says so, and where; the running
    // maximum is, and the run is done with no review asked.
    let llm = FakeLlm::start(vec![
        Reply::Answer(
            "```python\nout = sales.assign(top=sales.groupby('id')['val'].cumsum())\n```".into(),
        ),
        Reply::Answer(
            "```python\nout = sales.assign(top=sales.groupby('id')['val'].cummax())\n```".into(),
        ),
    ])
    .await;
    let mut kernel = kernel_with_pandas(
        &llm,
        "import pandas as pd\nsales = pd.DataFrame({'id': ['A', 'B', 'A'], 'val': [3, 5, 2]})",
    )
    .await;
    let (reply, iopub) = kernel
        .execute(
            "%%ask\nI have this table:\n\n  id  val\n0  A    3\n1  B    5\n2  A    2\n\n\
             I want the running maximum of val within each id, like this:\n\n\
             \x20 id  val  top\n0  A    3    3\n1  B    5    5\n2  A    2    3\n\nStore it in `out`.",
        )
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let requests = llm.requests.lock().unwrap();
    // The comparison needs no model: no form question, no review.
    assert_eq!(requests.len(), 2, "no form question or review asked");
    let told = told_model(&requests[1]);
    assert!(
        told.contains(
            "`out` is not the result the request writes out for this data. The first row \
             that differs: the written result has `2 A 2 3` where `out` has `2 A 2 5`."
        ) && told.contains("2  A    2    5"),
        "{told}"
    );
    drop(requests);
    let summary = panel_texts(&iopub, "summary").join("\n");
    assert!(
        summary.contains("done · checked: out is the result the request writes out"),
        "{summary}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn code_that_makes_the_result_written_for_the_request_s_example_is_done_with_no_review() {
    // The request shows a small table (not the notebook's) and the result
    // it wants for it; the model's code, tried on that example, makes it:
    // done with no review, and the notebook keeps its own values.
    let llm = FakeLlm::start(vec![Reply::Answer(
        "```python\nout = sales.assign(top=sales.groupby('id')['val'].cummax())\n```".into(),
    )])
    .await;
    let mut kernel = kernel_with_pandas(
        &llm,
        "import pandas as pd\nsales = pd.DataFrame({'id': ['A', 'B', 'A', 'C'], 'val': [4, 1, 7, 2]})",
    )
    .await;
    let (reply, iopub) = kernel
        .execute(
            "%%ask\nMy table looks like this:\n\n  id  val\n0  A    3\n1  B    5\n2  A    2\n\n\
             I want the running maximum of val within each id, like this:\n\n\
             \x20 id  val  top\n0  A    3    3\n1  B    5    5\n2  A    2    3\n\nStore it in `out`.",
        )
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert_eq!(llm.request_count(), 1, "no form question or review asked");
    let summary = panel_texts(&iopub, "summary").join("\n");
    assert!(
        summary.contains(
            "done · checked: out is what the request writes out for its example, with the code run on it"
        ),
        "{summary}"
    );
    let (_, iopub) = kernel
        .execute("out['top'].tolist(), sales['val'].tolist()")
        .await;
    assert_eq!(result_text(&iopub), "([4, 1, 7, 2], [4, 1, 7, 2])");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dict_without_the_keys_the_request_writes_out_is_sent_back() {
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nanswers = {-0.868: -0.868}\n```".into()),
        Reply::Answer(r#"{"keys": ["mean_wage", "std_wage"]}"#.into()),
        Reply::Answer("```python\nanswers = {'mean_wage': 4.0, 'std_wage': 0.82}\n```".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel.execute("wages = [3.0, 4.0, 5.0]").await;
    let (reply, iopub) = kernel
        .execute(
            "%%ask\nFind the mean of wages and its spread. Store the answers in a dict named \
             `answers`, from each answer's name to its value; their names and forms: \
             @mean_wage[mean_value] @std_wage[std_value]",
        )
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    // The kernel's own description of the dict shows the key it holds.
    let status = stream_text(&iopub, "stdout");
    assert!(
        status.contains(
            "`answers` holds none of the keys the request writes out ('mean_wage', \
             'std_wage'); its keys are: -0.868"
        ),
        "{status}"
    );
    assert_eq!(llm.request_count(), 4);
    let (_, iopub) = kernel.execute("sorted(answers)").await;
    assert_eq!(result_text(&iopub), "['mean_wage', 'std_wage']");
}
