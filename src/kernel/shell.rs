//! The shell channel: requests are served one at a time, in order. Cells go
//! to the Python thread; after a failed cell with `stop_on_error`, execute
//! requests already queued are answered `aborted` without running.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::Shared;
use super::requests::{ExecuteRequest, ShutdownRequest};
use super::router::{self, RouterChannel};
use crate::python::ExecuteCell;
use crate::wire::Message;

/// How long the first request may wait for an IOPub subscriber. A client that
/// sends a request right after connecting (jupyter console with piped input)
/// would otherwise miss everything published before its SUB socket is live.
const FIRST_SUBSCRIBER_WAIT: Duration = Duration::from_secs(2);

#[derive(Default)]
struct ShellState {
    execution_count: u32,
}

pub(super) async fn run(mut channel: RouterChannel, shared: Arc<Shared>) {
    let started = Instant::now();
    let mut awaited_subscriber = false;
    let mut state = ShellState::default();
    loop {
        let request = tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            request = channel.next() => request,
        };
        if !awaited_subscriber {
            awaited_subscriber = true;
            let limit = FIRST_SUBSCRIBER_WAIT.saturating_sub(started.elapsed());
            if !channel.iopub.wait_for_subscriber(limit).await {
                tracing::debug!("shell: no IOPub subscriber yet; serving anyway");
            }
        }
        let mut queued = Vec::new();
        serve(
            &mut channel,
            &shared,
            &mut state,
            &request,
            Some(&mut queued),
        )
        .await;
        // Requests that were already waiting when a cell failed: cells among
        // them are answered `aborted`, anything else is served as usual.
        for request in queued {
            serve(&mut channel, &shared, &mut state, &request, None).await;
        }
    }
}

/// Serves one request inside busy/idle.
///
/// `queued` is where a failed cell with `stop_on_error` puts the requests that
/// arrived before its reply; `None` means those are being served now, so cells
/// are aborted instead of run.
async fn serve(
    channel: &mut RouterChannel,
    shared: &Arc<Shared>,
    state: &mut ShellState,
    request: &Message,
    queued: Option<&mut Vec<Message>>,
) {
    channel.busy(request);
    match request.header.msg_type.as_str() {
        "execute_request" => execute(channel, shared, state, request, queued).await,
        "is_complete_request"
        | "complete_request"
        | "inspect_request"
        | "history_request"
        | "comm_info_request" => ask_python(channel, shared, request).await,
        // Comm messages are not requests: Python handles them, nobody replies.
        "comm_open" | "comm_msg" | "comm_close" => tell_python(shared, request).await,
        _ => {
            if !answer_without_python(channel, shared, request).await {
                tracing::warn!("shell: unknown message type {}", request.header.msg_type);
                if request.header.msg_type.ends_with("_request") {
                    let evalue = format!("unknown request type {}", request.header.msg_type);
                    channel
                        .reply_error(request, "UnsupportedRequest", &evalue)
                        .await;
                }
            }
        }
    }
    channel.idle(request);
}

async fn execute(
    channel: &mut RouterChannel,
    shared: &Arc<Shared>,
    state: &mut ShellState,
    request: &Message,
    queued: Option<&mut Vec<Message>>,
) {
    let exec = match ExecuteRequest::parse(&request.content) {
        Ok(exec) => exec,
        Err(e) => {
            tracing::warn!("shell: {e}");
            let content = json!({
                "status": "error",
                "execution_count": state.execution_count,
                "ename": "BadRequest",
                "evalue": e.to_string(),
                "traceback": [],
                "user_expressions": {},
                "payload": [],
            });
            channel.reply(request, "execute_reply", content).await;
            return;
        }
    };
    let Some(queued) = queued else {
        let content = json!({
            "status": "aborted",
            "execution_count": state.execution_count,
            "user_expressions": {},
            "payload": [],
        });
        channel.reply(request, "execute_reply", content).await;
        return;
    };

    let store_history = exec.stores_history();
    if store_history {
        state.execution_count += 1;
    }
    let count = state.execution_count;
    shared.interrupter.cell_coming();
    if !exec.silent {
        channel.iopub.publish(
            "execute_input",
            json!({ "code": exec.code, "execution_count": count }),
            request.raw_header.clone(),
        );
    }
    shared.current.set(request, exec.allow_stdin);
    let started = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let outcome = shared
        .python
        .execute(ExecuteCell {
            code: exec.code,
            execution_count: count,
            silent: exec.silent,
            store_history,
            user_expressions: exec.user_expressions.unwrap_or_default(),
        })
        .await;

    let failed = outcome.error.is_some();
    let mut content = json!({
        "status": if failed { "error" } else { "ok" },
        "execution_count": count,
        "user_expressions": outcome.user_expressions,
        "payload": outcome.payload,
    });
    if let Some(error) = outcome.error {
        content["ename"] = json!(error.ename);
        content["evalue"] = json!(error.evalue);
        content["traceback"] = json!(error.traceback);
    }
    let mut reply = crate::wire::Outgoing::reply_to(request, "execute_reply", content);
    reply.metadata = json!({
        "started": started,
        "dependencies_met": true,
        "status": if failed { "error" } else { "ok" },
    });
    if failed && exec.stop_on_error {
        // Collect before replying: the client cannot yet have reacted to
        // this failure, so whatever is readable now was queued behind it.
        while let Ok(request) = tokio::time::timeout(Duration::ZERO, channel.next()).await {
            queued.push(request);
        }
    }
    channel.send_outgoing(reply).await;
}

/// Hands a comm message to Python's comm manager; no reply is due.
async fn tell_python(shared: &Shared, request: &Message) {
    let msg_type = request.header.msg_type.as_str();
    if !request.content.is_object() {
        tracing::warn!("shell: dropped {msg_type}: content is not a JSON object");
        return;
    }
    shared.current.set(request, false);
    let content = request.content.clone();
    let buffers = request.buffers.clone();
    if let Err(error) = shared.python.request(msg_type, content, buffers).await {
        tracing::warn!(
            "shell: {msg_type} failed: {}: {}",
            error.ename,
            error.evalue
        );
    }
}

/// Requests answered by the Python runtime. Content that is not an object
/// gets an error reply here; Python checks the fields it needs.
async fn ask_python(channel: &mut RouterChannel, shared: &Shared, request: &Message) {
    let msg_type = request.header.msg_type.as_str();
    if !request.content.is_object() {
        let evalue = format!("invalid {msg_type} content: content is not a JSON object");
        channel.reply_error(request, "BadRequest", &evalue).await;
        return;
    }
    shared.current.set(request, false);
    match shared
        .python
        .request(msg_type, request.content.clone(), Vec::new())
        .await
    {
        Ok(content) => {
            channel
                .reply(request, &router::reply_type(msg_type), content)
                .await;
        }
        Err(error) => {
            tracing::warn!(
                "shell: {msg_type} failed: {}: {}",
                error.ename,
                error.evalue
            );
            channel
                .reply_error(request, &error.ename, &error.evalue)
                .await;
        }
    }
}

/// Answers the requests that need no Python (on shell and control alike).
/// Returns false when `request` is not one of them.
pub(super) async fn answer_without_python(
    channel: &mut RouterChannel,
    shared: &Shared,
    request: &Message,
) -> bool {
    let msg_type = request.header.msg_type.as_str();
    match msg_type {
        "kernel_info_request" => {
            channel
                .reply(request, "kernel_info_reply", shared.kernel_info.clone())
                .await;
        }
        // Deprecated in the protocol, still sent by some clients.
        "connect_request" => {
            channel
                .reply(request, "connect_reply", shared.ports.clone())
                .await;
        }
        "interrupt_request" => {
            let interrupted = shared.interrupter.interrupt();
            tracing::info!("{}: interrupt (cell running: {interrupted})", channel.name);
            channel
                .reply(request, "interrupt_reply", json!({ "status": "ok" }))
                .await;
        }
        "shutdown_request" => match ShutdownRequest::parse(&request.content) {
            Ok(shutdown) => {
                let content = json!({ "status": "ok", "restart": shutdown.restart });
                channel
                    .reply(request, "shutdown_reply", content.clone())
                    .await;
                // ipykernel also tells every client, so other frontends learn of it.
                channel
                    .iopub
                    .publish("shutdown_reply", content, request.raw_header.clone());
                tracing::info!("{}: shutdown (restart: {})", channel.name, shutdown.restart);
                shared.shutdown.cancel();
            }
            Err(e) => {
                channel
                    .reply_error(request, "BadRequest", &e.to_string())
                    .await
            }
        },
        _ => return false,
    }
    true
}
