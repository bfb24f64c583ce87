//! Interrupts by message and by signal, while busy and while idle.

use std::time::Duration;

use serde_json::json;

use crate::support::{Channel, Kernel, parent_id, stream_text};

/// Starts a cell that sleeps far longer than any test waits, and returns as
/// soon as its execute_input is published: an interrupt sent then may arrive
/// before the cell's code starts, and must not be lost.
async fn start_long_cell(kernel: &mut Kernel) -> String {
    let msg_id = kernel
        .send(
            Channel::Shell,
            "execute_request",
            json!({ "code": "import time\ntime.sleep(600)" }),
        )
        .await;
    loop {
        let message = kernel.next_for(&msg_id).await;
        if message.header.msg_type == "execute_input" {
            return msg_id;
        }
    }
}

async fn expect_keyboard_interrupt(kernel: &mut Kernel, msg_id: &str) {
    let reply = kernel.reply(Channel::Shell).await;
    assert_eq!(parent_id(&reply), msg_id);
    assert_eq!(reply.content["status"], "error");
    assert_eq!(reply.content["ename"], "KeyboardInterrupt");
    let iopub = kernel.iopub_for(msg_id).await;
    let errors: Vec<_> = iopub
        .iter()
        .filter(|m| m.header.msg_type == "error")
        .collect();
    assert_eq!(errors.len(), 1);
}

async fn assert_namespace_survived(kernel: &mut Kernel) {
    let (reply, iopub) = kernel.execute("print(kept)").await;
    assert_eq!(
        reply.content["status"], "ok",
        "no stale KeyboardInterrupt: {}",
        reply.content
    );
    assert_eq!(stream_text(&iopub, "stdout"), "yes\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn interrupt_request_stops_a_running_cell() {
    let mut kernel = Kernel::start().await;
    kernel.execute("kept = 'yes'").await;
    let cell = start_long_cell(&mut kernel).await;
    let (reply, iopub) = kernel
        .request(Channel::Control, "interrupt_request", json!({}))
        .await;
    assert_eq!(reply.content["status"], "ok");
    assert_eq!(iopub.len(), 2, "busy and idle around interrupt_request");
    expect_keyboard_interrupt(&mut kernel, &cell).await;
    assert_namespace_survived(&mut kernel).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigint_stops_a_running_cell() {
    let mut kernel = Kernel::start().await;
    kernel.execute("kept = 'yes'").await;
    let cell = start_long_cell(&mut kernel).await;
    // SAFETY: plain kill(2) on our own child process.
    assert_eq!(unsafe { libc::kill(kernel.pid() as i32, libc::SIGINT) }, 0);
    expect_keyboard_interrupt(&mut kernel, &cell).await;
    assert_namespace_survived(&mut kernel).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn interrupts_while_idle_are_ignored() {
    let mut kernel = Kernel::start().await;
    kernel.execute("kept = 'yes'").await;
    for _ in 0..3 {
        // SAFETY: plain kill(2) on our own child process.
        assert_eq!(unsafe { libc::kill(kernel.pid() as i32, libc::SIGINT) }, 0);
        let (reply, _) = kernel
            .request(Channel::Control, "interrupt_request", json!({}))
            .await;
        assert_eq!(reply.content["status"], "ok");
    }
    // A signal is handled when the interpreter thread next runs, which on a
    // busy machine may be later than the control replies above. A request
    // served by that thread (but not a cell) makes sure it has run.
    kernel
        .request(
            Channel::Shell,
            "is_complete_request",
            json!({ "code": "1" }),
        )
        .await;
    assert_namespace_survived(&mut kernel).await;
    assert!(
        kernel
            .reply_within(Channel::Shell, Duration::from_millis(50))
            .await
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn repeated_interrupts_each_stop_their_cell() {
    let mut kernel = Kernel::start().await;
    kernel.execute("kept = 'yes'").await;
    for _ in 0..3 {
        let cell = start_long_cell(&mut kernel).await;
        kernel
            .request(Channel::Control, "interrupt_request", json!({}))
            .await;
        expect_keyboard_interrupt(&mut kernel, &cell).await;
    }
    assert_namespace_survived(&mut kernel).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn interrupt_after_the_cell_started_keeps_what_it_did() {
    let mut kernel = Kernel::start().await;
    let msg_id = kernel
        .send(
            Channel::Shell,
            "execute_request",
            json!({ "code": "import time\nkept = 'yes'\nprint('sleeping', flush=True)\ntime.sleep(600)" }),
        )
        .await;
    loop {
        let message = kernel.next_for(&msg_id).await;
        if message.header.msg_type == "stream" {
            break;
        }
    }
    kernel
        .request(Channel::Control, "interrupt_request", json!({}))
        .await;
    expect_keyboard_interrupt(&mut kernel, &msg_id).await;
    assert_namespace_survived(&mut kernel).await;
}

/// Runs `code`, which stops in the debugger, and returns the request's
/// msg_id once the debugger asks for a command.
async fn stop_in_the_debugger(kernel: &mut Kernel, code: &str) -> String {
    let msg_id = kernel
        .send(
            Channel::Shell,
            "execute_request",
            json!({ "code": code, "allow_stdin": true }),
        )
        .await;
    let prompt = kernel.next_stdin().await;
    assert_eq!(parent_id(&prompt), msg_id);
    let prompt = prompt.content["prompt"].as_str().unwrap_or_default();
    assert!(
        ["(Pdb) ", "ipdb> "].contains(&prompt),
        "a debugger prompt, got {prompt:?}"
    );
    msg_id
}

/// The cell stopped in the debugger is answered, no further prompt comes,
/// and the kernel runs the next cell with the namespace intact.
async fn expect_debugger_ended(kernel: &mut Kernel, msg_id: &str) {
    let reply = kernel.reply(Channel::Shell).await;
    assert_eq!(parent_id(&reply), msg_id);
    kernel.iopub_for(msg_id).await;
    assert_namespace_survived(kernel).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interrupt_while_the_debugger_waits_ends_the_cell() {
    let mut kernel = Kernel::start().await;
    let cell = stop_in_the_debugger(
        &mut kernel,
        "import pdb\nkept = 'yes'\npdb.set_trace()\nx = 1",
    )
    .await;
    kernel
        .request(Channel::Control, "interrupt_request", json!({}))
        .await;
    expect_debugger_ended(&mut kernel, &cell).await;

    // breakpoint(), interrupted by a signal as jupyter_client sends it.
    let cell = stop_in_the_debugger(&mut kernel, "def f():\n    breakpoint()\nf()").await;
    // SAFETY: plain kill(2) on our own child process.
    assert_eq!(unsafe { libc::kill(kernel.pid() as i32, libc::SIGINT) }, 0);
    expect_debugger_ended(&mut kernel, &cell).await;
}
