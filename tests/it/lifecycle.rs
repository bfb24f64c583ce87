//! Start-up, heartbeat, shutdown and restart, and refusing bad connection files.

use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use zeromq::{SocketRecv, SocketSend, ZmqMessage};

use crate::support::{
    Channel, Kernel, TIMEOUT, TempDir, Transport, connection_json, parent_id, spawn_kernel,
    stream_text, wait_for_exit, within,
};

#[tokio::test(flavor = "multi_thread")]
async fn the_ipc_transport_works_like_tcp() {
    let mut kernel = Kernel::start_on(Transport::Ipc).await;
    let (reply, iopub) = kernel.execute("print('over ipc')").await;
    assert_eq!(reply.content["status"], "ok");
    assert_eq!(stream_text(&iopub, "stdout"), "over ipc\n");
    let (_, status) = kernel.shutdown(false).await;
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread")]
async fn cells_run_in_the_chosen_python_environment() {
    // A venv of the test's own (the Python mahtab embeds is the system's
    // python3), given with --python: cells see its interpreter, prefix and
    // site-packages, not the environment the tests run in.
    let dir = TempDir::new("venv");
    let env = dir.0.join("env");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&env)
        .status()
        .expect("run python3 -m venv");
    assert!(made.success(), "python3 -m venv failed");
    let python = env.join("bin/python");
    let mut kernel =
        Kernel::start_with_env(&[("MAHTAB_TEST_PYTHON", python.display().to_string())]).await;
    let (_, iopub) = kernel
        .execute("import sys, site\nprint(sys.executable)\nprint(sys.prefix)\nprint(any(p.startswith(sys.prefix) for p in site.getsitepackages()))")
        .await;
    let expected = format!("{}\n{}\nTrue\n", python.display(), env.display());
    assert_eq!(stream_text(&iopub, "stdout"), expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn heartbeat_echoes_while_a_cell_runs() {
    let mut kernel = Kernel::start().await;
    let cell = kernel
        .send(
            Channel::Shell,
            "execute_request",
            json!({ "code": "import time; time.sleep(3)" }),
        )
        .await;
    for i in 0..5 {
        let ping = Bytes::from(format!("ping {i}"));
        within(
            TIMEOUT,
            kernel.heartbeat.send(ZmqMessage::from(ping.clone())),
        )
        .await
        .unwrap();
        let pong = within(Duration::from_secs(1), kernel.heartbeat.recv())
            .await
            .unwrap();
        assert_eq!(pong.get(0), Some(&ping));
    }
    let reply = kernel.reply(Channel::Shell).await;
    assert_eq!(parent_id(&reply), cell);
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_replies_and_exits_cleanly() {
    let kernel = Kernel::start().await;
    let (reply, status) = kernel.shutdown(false).await;
    assert_eq!(reply.content, json!({ "status": "ok", "restart": false }));
    assert!(status.success(), "exit status {status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_with_restart_is_echoed_and_a_new_kernel_starts_on_the_same_ports() {
    let mut kernel = Kernel::start().await;
    kernel.execute("1").await;
    let (reply, status) = kernel.shutdown(true).await;
    assert_eq!(reply.content["restart"], true);
    assert!(status.success());
    // Restart is the client starting a fresh process; the old one must have
    // released everything, which a fresh kernel proves by running cells.
    let mut fresh = Kernel::start().await;
    let (reply, _) = fresh.execute("1").await;
    assert_eq!(reply.content["execution_count"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn what_a_cell_printed_reaches_the_client_when_shutdown_follows_at_once() {
    let mut kernel = Kernel::start().await;
    let size = 64 << 20;
    let cell = kernel
        .send(
            Channel::Shell,
            "execute_request",
            json!({ "code": format!("print('x' * {size}, end='')") }),
        )
        .await;
    kernel.reply(Channel::Shell).await;
    // Asked before the output was read: the kernel must write it out first.
    let (_, status) = kernel.stop(false).await;
    assert!(status.success());
    let printed: usize = kernel
        .iopub_for(&cell)
        .await
        .iter()
        .filter(|m| m.header.msg_type == "stream")
        .map(|m| m.content["text"].as_str().unwrap_or_default().len())
        .sum();
    assert_eq!(printed, size);
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_during_a_running_cell_still_exits() {
    let mut kernel = Kernel::start().await;
    kernel
        .send(
            Channel::Shell,
            "execute_request",
            json!({ "code": "while True: pass" }),
        )
        .await;
    let (_, status) = kernel.shutdown(false).await;
    assert!(status.success());
}

#[test]
fn unsupported_signature_scheme_stops_start_up_with_a_clear_message() {
    let dir = TempDir::new("scheme");
    let mut child = spawn_kernel(&dir, &connection_json([0; 5], "hmac-md5"));
    let status = wait_for_exit(&mut child, TIMEOUT).expect("the kernel refuses to start");
    assert!(!status.success());
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains("unsupported signature_scheme"),
        "stderr: {stderr}"
    );
    assert!(
        !stderr.contains(crate::support::KEY),
        "the key must never be printed"
    );
}

#[test]
fn unreadable_connection_file_is_reported() {
    let dir = TempDir::new("badfile");
    let mut child = spawn_kernel(&dir, &json!({ "not": "a connection file" }));
    let status = wait_for_exit(&mut child, TIMEOUT).expect("the kernel refuses to start");
    assert!(!status.success());
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains("invalid connection file"),
        "stderr: {stderr}"
    );
}
