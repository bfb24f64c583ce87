//! The execute flow: message order, outputs, errors and execute_request options.

use serde_json::json;

use crate::support::{Channel, Kernel, parent_id, result_text, stream_text, strip_ansi, types};

#[tokio::test(flavor = "multi_thread")]
async fn execute_flow_is_busy_input_outputs_reply_idle() {
    let mut kernel = Kernel::start().await;
    let (reply, iopub) = kernel
        .execute("import sys\nprint('hello')\nprint('oops', file=sys.stderr)\n6*7")
        .await;
    assert_eq!(reply.header.msg_type, "execute_reply");
    assert_eq!(reply.content["status"], "ok");
    assert_eq!(reply.content["execution_count"], 1);
    assert_eq!(reply.content["user_expressions"], json!({}));
    assert_eq!(reply.content["payload"], json!([]));
    assert_eq!(
        types(&iopub),
        [
            "status",
            "execute_input",
            "stream",
            "stream",
            "execute_result",
            "status"
        ]
    );
    assert_eq!(iopub[0].content["execution_state"], "busy");
    assert_eq!(
        iopub[1].content["code"],
        "import sys\nprint('hello')\nprint('oops', file=sys.stderr)\n6*7"
    );
    assert_eq!(iopub[1].content["execution_count"], 1);
    assert_eq!(stream_text(&iopub, "stdout"), "hello\n");
    assert_eq!(stream_text(&iopub, "stderr"), "oops\n");
    assert_eq!(iopub[4].content["data"]["text/plain"], "42");
    assert_eq!(iopub[4].content["execution_count"], 1);
    assert_eq!(iopub[5].content["execution_state"], "idle");

    // Nothing is published for that request after its idle.
    let (_, next) = kernel.execute("2").await;
    assert!(next.iter().all(|m| parent_id(m) == parent_id(&next[0])));
}

#[tokio::test(flavor = "multi_thread")]
async fn namespace_persists_and_counts_increase() {
    let mut kernel = Kernel::start().await;
    kernel.execute("x = 20").await;
    let (reply, iopub) = kernel.execute("x + 1").await;
    assert_eq!(reply.content["execution_count"], 2);
    let result = result_text(&iopub);
    assert_eq!(result, "21");
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_publish_exactly_one_error_message() {
    let mut kernel = Kernel::start().await;
    let (reply, iopub) = kernel.execute("def f():\n    return 1/0\nf()").await;
    assert_eq!(reply.content["status"], "error");
    assert_eq!(reply.content["ename"], "ZeroDivisionError");
    assert_eq!(reply.content["evalue"], "division by zero");
    let traceback = reply.content["traceback"].as_array().unwrap();
    let text: Vec<&str> = traceback.iter().filter_map(|l| l.as_str()).collect();
    let text = strip_ansi(&text.join("\n"));
    assert!(
        text.contains("return 1/0"),
        "traceback shows the cell's source: {text}"
    );
    assert!(!text.contains("mahtab"), "no kernel frames: {text}");
    assert_eq!(
        types(&iopub),
        ["status", "execute_input", "error", "status"]
    );
    assert_eq!(iopub[2].content["ename"], "ZeroDivisionError");

    let (reply, _) = kernel.execute("def broken(:\n  pass").await;
    assert_eq!(reply.content["ename"], "SyntaxError");
    // The kernel still runs cells afterwards.
    let (reply, _) = kernel.execute("1").await;
    assert_eq!(reply.content["status"], "ok");
}

#[tokio::test(flavor = "multi_thread")]
async fn silent_cells_publish_no_input_or_result_and_keep_the_count() {
    let mut kernel = Kernel::start().await;
    kernel.execute("1").await;
    let (reply, iopub) = kernel
        .execute_with(json!({ "code": "print('shh')\n5", "silent": true }))
        .await;
    assert_eq!(reply.content["execution_count"], 1);
    assert_eq!(types(&iopub), ["status", "stream", "status"]);

    let (reply, _) = kernel
        .execute_with(json!({ "code": "5", "store_history": false }))
        .await;
    assert_eq!(reply.content["execution_count"], 1);
    let (reply, _) = kernel.execute("5").await;
    assert_eq!(reply.content["execution_count"], 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn trailing_semicolon_suppresses_the_result() {
    let mut kernel = Kernel::start().await;
    let (_, iopub) = kernel.execute("1 + 1;").await;
    assert_eq!(types(&iopub), ["status", "execute_input", "status"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn user_expressions_are_evaluated_after_the_cell() {
    let mut kernel = Kernel::start().await;
    let (reply, _) = kernel
        .execute_with(json!({
            "code": "a = 3",
            "user_expressions": { "double": "a * 2", "bad": "undefined_name" },
        }))
        .await;
    let expressions = &reply.content["user_expressions"];
    assert_eq!(expressions["double"]["status"], "ok");
    assert_eq!(expressions["double"]["data"]["text/plain"], "6");
    assert_eq!(expressions["bad"]["status"], "error");
    assert_eq!(expressions["bad"]["ename"], "NameError");
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_on_error_aborts_queued_cells_only() {
    let mut kernel = Kernel::start().await;
    // Three cells sent at once: the first fails after a pause, so the other
    // two are queued behind it and must be aborted, not run.
    let first = kernel
        .send(
            Channel::Shell,
            "execute_request",
            json!({ "code": "import time; time.sleep(0.3); raise ValueError('x')" }),
        )
        .await;
    let second = kernel
        .send(
            Channel::Shell,
            "execute_request",
            json!({ "code": "ran = True" }),
        )
        .await;
    let third = kernel
        .send(
            Channel::Shell,
            "execute_request",
            json!({ "code": "ran = True" }),
        )
        .await;
    let mut statuses = Vec::new();
    for expected in [&first, &second, &third] {
        let reply = kernel.reply(Channel::Shell).await;
        assert_eq!(parent_id(&reply), expected.as_str());
        statuses.push(reply.content["status"].as_str().unwrap().to_owned());
    }
    assert_eq!(statuses, ["error", "aborted", "aborted"]);
    for id in [&first, &second, &third] {
        kernel.iopub_for(id).await;
    }

    // A request sent after the failure's reply runs normally.
    let (reply, iopub) = kernel.execute("'ran' in globals()").await;
    assert_eq!(reply.content["status"], "ok");
    let result = result_text(&iopub);
    assert_eq!(result, "False");
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_on_error_false_keeps_running_queued_cells() {
    let mut kernel = Kernel::start().await;
    let first = kernel
        .send(
            Channel::Shell,
            "execute_request",
            json!({ "code": "import time; time.sleep(0.2); raise ValueError('x')", "stop_on_error": false }),
        )
        .await;
    let second = kernel
        .send(Channel::Shell, "execute_request", json!({ "code": "1" }))
        .await;
    let a = kernel.reply(Channel::Shell).await;
    let b = kernel.reply(Channel::Shell).await;
    assert_eq!(
        (parent_id(&a), parent_id(&b)),
        (first.as_str(), second.as_str())
    );
    assert_eq!(a.content["status"], "error");
    assert_eq!(b.content["status"], "ok");
}

#[tokio::test(flavor = "multi_thread")]
async fn output_of_a_long_cell_arrives_while_it_runs_and_in_few_messages() {
    let mut kernel = Kernel::start().await;
    let msg_id = kernel
        .send(
            Channel::Shell,
            "execute_request",
            json!({ "code": "import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second')" }),
        )
        .await;
    // "first" must arrive before the cell ends: before the idle of this request.
    loop {
        let message = kernel.next_for(&msg_id).await;
        assert_ne!(
            message.content["execution_state"], "idle",
            "the cell ended before its output arrived"
        );
        if message.header.msg_type == "stream" {
            assert_eq!(message.content["text"], "first\n");
            break;
        }
    }
    let rest = kernel.iopub_for(&msg_id).await;
    assert_eq!(stream_text(&rest, "stdout"), "second\n");
    let reply = kernel.reply(Channel::Shell).await;
    assert_eq!(parent_id(&reply), msg_id);

    let (_, iopub) = kernel.execute("for i in range(20000):\n    print(i)").await;
    let expected: String = (0..20000).map(|i| format!("{i}\n")).collect();
    assert_eq!(stream_text(&iopub, "stdout"), expected);
    let streams = iopub
        .iter()
        .filter(|m| m.header.msg_type == "stream")
        .count();
    assert!(
        streams <= 20,
        "{streams} stream messages for one burst of prints"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_environment_is_a_normal_python_main() {
    let mut kernel = Kernel::start().await;
    let (_, iopub) = kernel
        .execute("import sys, __main__\nprint(__name__, sys.path[0] == '', __main__.__dict__ is globals(), sys.stdout.isatty())")
        .await;
    assert_eq!(stream_text(&iopub, "stdout"), "__main__ True True False\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_asks_the_frontend_to_end_the_session() {
    let mut kernel = Kernel::start().await;
    for code in ["exit", "quit()"] {
        let (reply, iopub) = kernel.execute(code).await;
        assert_eq!(reply.content["status"], "ok");
        assert_eq!(
            reply.content["payload"],
            json!([{ "source": "ask_exit", "keepkernel": false }])
        );
        assert!(!types(&iopub).contains(&"execute_result"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn deep_recursion_in_c_code_has_a_main_threads_stack() {
    let mut kernel = Kernel::start().await;
    // repr() of nested dicts recurses in C, a few hundred bytes a level; with
    // the limit raised, 30,000 levels need more than a default thread stack.
    let (reply, iopub) = kernel
        .execute(
            "import sys\nsys.setrecursionlimit(200000)\nd = {}\nfor _ in range(30000):\n    d = {'k': d}\ntext = repr(d)\nprint(len(text), text.count('{'))",
        )
        .await;
    assert_eq!(reply.content["status"], "ok", "{}", reply.content);
    assert_eq!(stream_text(&iopub, "stdout"), "210002 30001\n");
    let (reply, _) = kernel.execute("del d, text").await;
    assert_eq!(reply.content["status"], "ok");
}
