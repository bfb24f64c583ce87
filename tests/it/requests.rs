//! Requests other than execute: each is answered validly inside busy/idle.

use serde_json::json;

use crate::support::{Channel, Kernel, parent_id, types};

#[tokio::test(flavor = "multi_thread")]
async fn kernel_info_is_answered_on_shell_and_control_with_busy_idle() {
    let mut kernel = Kernel::start().await;
    for channel in [Channel::Shell, Channel::Control] {
        let (reply, iopub) = kernel
            .request(channel, "kernel_info_request", json!({}))
            .await;
        assert_eq!(reply.header.msg_type, "kernel_info_reply");
        let content = &reply.content;
        assert_eq!(content["status"], "ok");
        assert_eq!(content["implementation"], "mahtab");
        assert_eq!(content["language_info"]["name"], "python");
        assert_eq!(content["language_info"]["file_extension"], ".py");
        assert!(
            content["language_info"]["version"]
                .as_str()
                .unwrap()
                .starts_with("3.")
        );
        let version = content["protocol_version"].as_str().unwrap();
        assert!(version >= "5.3", "protocol version {version}");
        assert_eq!(reply.raw_header["version"], version);
        assert_eq!(types(&iopub), ["status", "status"]);
        assert_eq!(iopub[0].content["execution_state"], "busy");
        assert_eq!(iopub[1].content["execution_state"], "idle");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kernel_info_on_control_is_answered_while_a_cell_runs() {
    let mut kernel = Kernel::start().await;
    let cell = kernel
        .send(
            Channel::Shell,
            "execute_request",
            json!({ "code": "import time; time.sleep(2)" }),
        )
        .await;
    let (reply, _) = kernel
        .request(Channel::Control, "kernel_info_request", json!({}))
        .await;
    assert_eq!(reply.content["status"], "ok");
    // The cell is still running: its reply has not come yet.
    assert!(
        kernel
            .reply_within(Channel::Shell, std::time::Duration::from_millis(100))
            .await
            .is_none()
    );
    let done = kernel.reply(Channel::Shell).await;
    assert_eq!(parent_id(&done), cell);
}

#[tokio::test(flavor = "multi_thread")]
async fn is_complete_follows_python_rules() {
    let mut kernel = Kernel::start().await;
    let cases = [
        ("1 + 1", "complete"),
        ("for i in range(3):", "incomplete"),
        ("def f(x):\n    return x", "incomplete"),
        ("def f(x):\n    return x\n\n", "complete"),
        ("print('''hello", "incomplete"),
        ("import = 7q", "invalid"),
    ];
    for (code, expected) in cases {
        let (reply, _) = kernel
            .request(
                Channel::Shell,
                "is_complete_request",
                json!({ "code": code }),
            )
            .await;
        assert_eq!(reply.content["status"], expected, "is_complete({code:?})");
    }
    let (reply, _) = kernel
        .request(
            Channel::Shell,
            "is_complete_request",
            json!({ "code": "if x:" }),
        )
        .await;
    assert_eq!(reply.content["indent"], "    ");
}

#[tokio::test(flavor = "multi_thread")]
async fn other_requests_get_valid_replies() {
    let mut kernel = Kernel::start().await;
    let (reply, _) = kernel
        .request(
            Channel::Shell,
            "complete_request",
            json!({ "code": "héllo", "cursor_pos": 5 }),
        )
        .await;
    assert_eq!(reply.content["status"], "ok");
    assert_eq!(reply.content["cursor_end"], 5);
    let (reply, _) = kernel
        .request(
            Channel::Shell,
            "inspect_request",
            json!({ "code": "zip", "cursor_pos": 3 }),
        )
        .await;
    assert_eq!(reply.content["status"], "ok");
    kernel.execute("remembered = 1").await;
    let (reply, _) = kernel
        .request(
            Channel::Shell,
            "history_request",
            json!({ "hist_access_type": "search", "pattern": "remember*" }),
        )
        .await;
    let history = reply.content["history"].as_array().unwrap();
    assert_eq!(history.len(), 1, "{history:?}");
    assert_eq!(history[0][2], "remembered = 1");
    let (reply, _) = kernel
        .request(Channel::Shell, "comm_info_request", json!({}))
        .await;
    assert_eq!(reply.content["comms"], json!({}));
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_requests_get_an_error_reply_and_busy_idle() {
    let mut kernel = Kernel::start().await;
    let (reply, iopub) = kernel
        .request(Channel::Shell, "frobnicate_request", json!({}))
        .await;
    assert_eq!(reply.header.msg_type, "frobnicate_reply");
    assert_eq!(reply.content["status"], "error");
    assert_eq!(types(&iopub), ["status", "status"]);
    let (reply, _) = kernel.execute("1").await;
    assert_eq!(reply.content["status"], "ok");
}

#[tokio::test(flavor = "multi_thread")]
async fn comm_open_for_an_unknown_target_is_closed() {
    let mut kernel = Kernel::start().await;
    let msg_id = kernel
        .send(
            Channel::Shell,
            "comm_open",
            json!({ "comm_id": "c1", "target_name": "jupyter.widget.control", "data": {} }),
        )
        .await;
    let iopub = kernel.iopub_for(&msg_id).await;
    assert_eq!(types(&iopub), ["status", "comm_close", "status"]);
    assert_eq!(iopub[1].content["comm_id"], "c1");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_request_content_gets_an_error_reply() {
    let mut kernel = Kernel::start().await;
    let (reply, iopub) = kernel
        .request(
            Channel::Shell,
            "execute_request",
            json!({ "silent": false }),
        )
        .await;
    assert_eq!(reply.content["status"], "error");
    assert!(reply.content["evalue"].as_str().unwrap().contains("code"));
    // The error is for the client, not output of a cell: nothing but busy/idle.
    assert_eq!(types(&iopub), ["status", "status"]);

    let (reply, _) = kernel
        .request(
            Channel::Shell,
            "execute_request",
            json!(["not", "an", "object"]),
        )
        .await;
    assert_eq!(reply.content["status"], "error");
    let (reply, _) = kernel
        .request(Channel::Shell, "is_complete_request", json!("text"))
        .await;
    assert_eq!(reply.content["status"], "error");
    let (reply, _) = kernel.execute("1").await;
    assert_eq!(reply.content["status"], "ok");
}
