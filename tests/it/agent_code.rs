//! The agent's code in the user's namespace: approvals, its errors and
//! output as the model and the user see them, interrupts, live output,
//! top-level await and magics, the namespace summary the model reads.

use std::time::Duration;

use serde_json::json;

use crate::ask::DONE;
use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{Channel, Kernel, panel_texts, result_text, told_model};

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

#[tokio::test(flavor = "multi_thread")]
async fn a_key_spelled_otherwise_than_the_data_is_named_and_respelled_without_asking() {
    // The Python side names the close key in the error line; the graph
    // reads it and runs the block again with the data's spelling.
    let llm = FakeLlm::start(vec![
        Reply::Answer("```python\nspeed = weather['wind_speed']\nprint(speed)\n```".into()),
        Reply::Answer(DONE.into()),
    ])
    .await;
    let mut kernel = Kernel::start_with_env(&llm.env()).await;
    kernel
        .execute("weather = {'time': 1, 'wind speed': 3.5}")
        .await;
    let (reply, iopub) = kernel
        .execute("%%ask\nPrint the wind speed in weather.")
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    let panels = panel_texts(&iopub, "error").join("\n");
    assert!(
        panels.contains("KeyError: 'wind_speed'. Did you mean: 'wind speed' (a key of weather)?"),
        "{panels}"
    );
    // One answer and one review: the respelled block asked no model.
    assert_eq!(llm.requests.lock().unwrap().len(), 2);
    let review = llm.last_message(1);
    assert!(review.contains("speed = weather['wind speed']"), "{review}");
    let (_, iopub) = kernel.execute("speed").await;
    assert_eq!(result_text(&iopub), "3.5");
}
