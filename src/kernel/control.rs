//! The control channel: answered even while a cell runs, because it never
//! waits for a cell. Requests that may wait for Python (the debugger's,
//! creating or deleting a subshell) are served in their own order on a task
//! beside the channel's, so an interrupt or a shutdown is answered at once
//! whatever they wait for.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::Shared;
use super::dispatch;
use super::requests::{Channel, Request};
use super::router::{Replies, RouterChannel};
use crate::wire::Message;

pub(super) async fn run(mut channel: RouterChannel, replies: Replies, shared: Arc<Shared>) {
    let (waiting, queue) = mpsc::unbounded_channel();
    let lane = tokio::spawn(serve_in_order(queue, replies.clone(), shared.clone()));
    loop {
        let request = tokio::select! {
            _ = shared.shutdown.cancelled() => break,
            request = channel.next() => request,
        };
        match Request::parse(&request.header.msg_type, &request.content) {
            Ok(parsed) if parsed.waits_on_python() => {
                // The lane ends only with this task.
                let _ = waiting.send((request, parsed));
            }
            parsed => serve(&replies, &shared, &request, parsed).await,
        }
    }
    lane.abort();
}

/// Serves the requests that may wait for Python, one after another.
async fn serve_in_order(
    mut queue: mpsc::UnboundedReceiver<(Message, Request)>,
    replies: Replies,
    shared: Arc<Shared>,
) {
    while let Some((request, parsed)) = queue.recv().await {
        serve(&replies, &shared, &request, Ok(parsed)).await;
    }
}

/// Serves one request inside busy/idle.
async fn serve(
    replies: &Replies,
    shared: &Arc<Shared>,
    request: &Message,
    parsed: Result<Request, super::requests::BadContent>,
) {
    replies.busy(request);
    shared.io.set_control(request);
    match parsed {
        Ok(parsed) => dispatch::answer(replies, shared, request, parsed, Channel::Control).await,
        Err(bad) => dispatch::bad_content(replies, request, &bad).await,
    }
    replies.idle(request);
}
