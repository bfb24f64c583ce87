//! The shell channel. One task reads it and routes each request to the
//! queue of the shell it is for: the main shell, or the subshell its header
//! names ([`super::subshells`]). Each shell serves its queue one request at
//! a time, in order, concurrently with the others; cells go to its Python
//! thread. After a failed cell with `stop_on_error`, execute requests
//! already in that shell's queue are answered `aborted` without running.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use jupyter_protocol::{ExecuteInput, ExecutionCount};
use serde_json::json;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::Shared;
use super::dispatch;
use super::execute_reply::ExecuteReply;
use super::requests::{Channel, ExecuteRequest, Request};
use super::router::{self, Replies, RouterChannel};
use super::subshells::subshell_of;
use crate::python::{ExecuteCell, Parent, PythonHandle, RuntimeRequest};
use crate::wire::{Message, Outgoing};

/// How long the first request may wait for an IOPub subscriber. A client that
/// sends a request right after connecting (jupyter console with piped input)
/// would otherwise miss everything published before its SUB socket is live.
const FIRST_SUBSCRIBER_WAIT: Duration = Duration::from_secs(2);

/// Reads the shell channel and routes its requests until shutdown.
pub(super) async fn run(mut channel: RouterChannel, shared: Arc<Shared>) {
    let started = Instant::now();
    let mut awaited_subscriber = false;
    let main = start(shared.clone(), shared.python.clone(), None);
    loop {
        let request = tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            request = channel.next() => request,
        };
        if !awaited_subscriber {
            awaited_subscriber = true;
            let limit = FIRST_SUBSCRIBER_WAIT.saturating_sub(started.elapsed());
            if !shared.shell_replies.iopub.wait_for_subscriber(limit).await {
                tracing::debug!("shell: no IOPub subscriber yet; serving anyway");
            }
        }
        let queue = match subshell_of(&request) {
            None => Some(main.clone()),
            Some(id) => shared.subshells.queue(id),
        };
        match queue {
            // A queue closes only at shutdown or when its subshell is
            // deleted, which makes the request one for no subshell.
            Some(queue) => {
                if let Err(unsent) = queue.send(request) {
                    no_such_subshell(&shared.shell_replies, &unsent.0).await;
                }
            }
            None => no_such_subshell(&shared.shell_replies, &request).await,
        }
    }
}

/// Answers a request for a subshell that does not exist.
async fn no_such_subshell(replies: &Replies, request: &Message) {
    let id = subshell_of(request).unwrap_or_default();
    tracing::warn!("shell: {} for no subshell {id:?}", request.header.msg_type);
    replies.busy(request);
    if request.header.msg_type.ends_with("_request") {
        let evalue = format!("no subshell {id:?}");
        replies.reply_error(request, "KeyError", &evalue).await;
    }
    replies.idle(request);
}

/// Starts a shell serving the queue this returns, with `python`: the main
/// shell (`subshell` none) or subshell `subshell`.
pub(super) fn start(
    shared: Arc<Shared>,
    python: PythonHandle,
    subshell: Option<String>,
) -> UnboundedSender<Message> {
    let (queue, requests) = unbounded_channel();
    let shell = Shell {
        replies: shared.shell_replies.clone(),
        shared,
        python,
        subshell,
    };
    tokio::spawn(shell.serve_queue(requests));
    queue
}

/// One shell: the main shell or a subshell.
struct Shell {
    replies: Replies,
    shared: Arc<Shared>,
    python: PythonHandle,
    subshell: Option<String>,
}

impl Shell {
    async fn serve_queue(self, mut requests: UnboundedReceiver<Message>) {
        loop {
            let request = tokio::select! {
                _ = self.shared.shutdown.cancelled() => return,
                request = requests.recv() => match request {
                    Some(request) => request,
                    None => break,
                },
            };
            let mut queued = Vec::new();
            self.serve(&request, Some((&mut queued, &mut requests)))
                .await;
            // Requests that were already waiting when a cell failed: cells
            // among them are answered `aborted`, anything else is served as
            // usual.
            for request in queued {
                self.serve(&request, None).await;
            }
        }
        if let Some(id) = &self.subshell {
            tracing::debug!("shell: subshell {id} ended");
        }
    }

    /// Serves one request inside busy/idle.
    ///
    /// `queued` is where a failed cell with `stop_on_error` puts the requests
    /// that arrived before its reply (taken from the queue beside it);
    /// `None` means those are being served now, so cells are aborted instead
    /// of run.
    async fn serve(
        &self,
        request: &Message,
        queued: Option<(&mut Vec<Message>, &mut UnboundedReceiver<Message>)>,
    ) {
        let replies = &self.replies;
        replies.busy(request);
        match Request::parse(&request.header.msg_type, &request.content) {
            Ok(Request::Execute(exec)) => self.execute(request, exec, queued).await,
            Ok(Request::Runtime(asked)) if asked.replies() => self.ask_python(request, asked).await,
            Ok(Request::Runtime(told)) => self.tell_python(request, told).await,
            Ok(parsed) => {
                dispatch::answer(replies, &self.shared, request, parsed, Channel::Shell).await
            }
            // A cell's reply has fields of its own.
            Err(bad) if request.header.msg_type == "execute_request" => {
                tracing::warn!("shell: {bad}");
                let count = self.shared.execution_count.load(Ordering::SeqCst);
                let content = ExecuteReply::bad_request(count, bad.to_string()).to_json();
                replies.reply(request, "execute_reply", content).await;
            }
            Err(bad) => dispatch::bad_content(replies, request, &bad).await,
        }
        replies.idle(request);
    }

    /// What Python's output and input belong to while it serves `request`
    /// (each command carries its own).
    fn parent_for(request: &Message, allow_stdin: bool) -> Parent {
        Parent {
            header: request.raw_header.clone(),
            identities: request.identities.clone(),
            allow_stdin,
            interrupts_seen: 0,
            cell_id: request.metadata["cellId"]
                .as_str()
                .filter(|id| !id.is_empty())
                .map(Arc::from),
        }
    }

    async fn execute(
        &self,
        request: &Message,
        exec: ExecuteRequest,
        queued: Option<(&mut Vec<Message>, &mut UnboundedReceiver<Message>)>,
    ) {
        let replies = &self.replies;
        let execution_count = &self.shared.execution_count;
        let Some((queued, requests)) = queued else {
            let content = ExecuteReply::aborted(execution_count.load(Ordering::SeqCst)).to_json();
            replies.reply(request, "execute_reply", content).await;
            return;
        };

        let store_history = exec.stores_history();
        // One count for the kernel, shared by the main shell and subshells.
        let count = if store_history {
            execution_count.fetch_add(1, Ordering::SeqCst) + 1
        } else {
            execution_count.load(Ordering::SeqCst)
        };
        // From here on an interrupt reaches the cell, even before it starts.
        let interrupts_seen = match self.subshell {
            None => {
                self.shared.interrupter.cell_coming();
                0
            }
            Some(_) => self.shared.interrupter.subshell_cell_coming(),
        };
        if !exec.silent {
            let input = ExecuteInput {
                code: exec.code.clone(),
                execution_count: ExecutionCount::new(count as usize),
            };
            replies
                .iopub
                .send(Outgoing::typed(input, request.raw_header.clone()));
        }
        let parent = Parent {
            interrupts_seen,
            ..Self::parent_for(request, exec.allow_stdin)
        };
        let started = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let outcome = self
            .python
            .execute(ExecuteCell {
                code: exec.code,
                execution_count: count,
                silent: exec.silent,
                store_history,
                user_expressions: exec.user_expressions.unwrap_or_default(),
                parent,
            })
            .await;

        let content = ExecuteReply::ran(count, outcome);
        let failed = content.failed();
        let mut reply =
            crate::wire::Outgoing::reply_to(request, "execute_reply", content.to_json());
        reply.metadata = json!({
            "started": started,
            "dependencies_met": true,
            "status": if failed { "error" } else { "ok" },
        });
        if failed && exec.stop_on_error {
            // Collect before replying: the client cannot yet have reacted to
            // this failure, so whatever is queued now was sent behind it. The
            // reader gets a turn first, for requests it has read but not yet
            // routed.
            tokio::task::yield_now().await;
            while let Ok(request) = requests.try_recv() {
                queued.push(request);
            }
        }
        replies.send_outgoing(reply).await;
    }

    /// Hands a comm message to Python's comm manager; no reply is due.
    async fn tell_python(&self, request: &Message, told: RuntimeRequest) {
        let msg_type = request.header.msg_type.as_str();
        let parent = Self::parent_for(request, false);
        let content = request.content.clone();
        let buffers = request.buffers.clone();
        if let Err(error) = self.python.request(told, content, buffers, parent).await {
            tracing::warn!(
                "shell: {msg_type} failed: {}: {}",
                error.ename,
                error.evalue
            );
        }
    }

    /// Requests answered by the Python runtime (their content is an
    /// object; Python checks the fields it needs).
    async fn ask_python(&self, request: &Message, asked: RuntimeRequest) {
        let replies = &self.replies;
        let msg_type = request.header.msg_type.as_str();
        let parent = Self::parent_for(request, false);
        match self
            .python
            .request(asked, request.content.clone(), Vec::new(), parent)
            .await
        {
            Ok(content) => {
                replies
                    .reply(request, &router::reply_type(msg_type), content)
                    .await;
            }
            Err(error) => {
                tracing::warn!(
                    "shell: {msg_type} failed: {}: {}",
                    error.ename,
                    error.evalue
                );
                replies
                    .reply_error(request, &error.ename, &error.evalue)
                    .await;
            }
        }
    }
}
