//! What each request does, in one table for both ROUTER channels: the shell
//! serves cells, Python's requests and comms itself (each shell in its own
//! order, see [`super::shell`]); everything else, on whichever channel it
//! is served, is answered here.

use std::sync::Arc;

use jupyter_protocol::{InterruptReply, ShutdownReply};

use super::Shared;
use super::requests::{BadContent, Channel, Request};
use super::router::Replies;
use super::subshells;
use crate::wire::{Message, Outgoing};

/// Answers `request`, which `parsed` says what it is, on `channel`. Cells,
/// Python's requests and comms are the shell's own and never come here.
pub(super) async fn answer(
    replies: &Replies,
    shared: &Arc<Shared>,
    request: &Message,
    parsed: Request,
    channel: Channel,
) {
    if !parsed.served_on(channel) {
        unsupported(replies, request, channel).await;
        return;
    }
    match parsed {
        Request::KernelInfo => {
            replies
                .reply(request, "kernel_info_reply", shared.kernel_info.clone())
                .await;
        }
        Request::Connect => {
            replies
                .reply(request, "connect_reply", shared.ports.clone())
                .await;
        }
        Request::Interrupt => {
            let interrupted = shared.interrupter.interrupt();
            tracing::info!("{}: interrupt (cell running: {interrupted})", replies.name);
            replies.reply_typed(request, InterruptReply::new()).await;
        }
        Request::Shutdown(shutdown) => {
            let content = ShutdownReply {
                restart: shutdown.restart,
                ..ShutdownReply::default()
            };
            replies.reply_typed(request, content.clone()).await;
            // ipykernel also tells every client, so other frontends learn of it.
            replies
                .iopub
                .send(Outgoing::typed(content, request.raw_header.clone()));
            tracing::info!("{}: shutdown (restart: {})", replies.name, shutdown.restart);
            shared.shutdown.cancel();
        }
        Request::Debug => {
            let reply = shared
                .debugger
                .handle(&request.content, &shared.python, &shared.debug_events)
                .await;
            replies.reply(request, "debug_reply", reply).await;
        }
        Request::CreateSubshell => subshells::create(replies, shared, request).await,
        Request::DeleteSubshell => subshells::delete(replies, shared, request).await,
        Request::ListSubshell => subshells::list(replies, shared, request).await,
        Request::Execute(_) | Request::Runtime(_) | Request::Unknown => {
            unsupported(replies, request, channel).await;
        }
    }
}

/// A request not served on `channel`: an error reply (nothing, for a
/// message that is not a request).
pub(super) async fn unsupported(replies: &Replies, request: &Message, channel: Channel) {
    let msg_type = &request.header.msg_type;
    tracing::warn!("{}: {msg_type} is not served here", replies.name);
    if msg_type.ends_with("_request") {
        let evalue = match channel {
            Channel::Shell => format!("unknown request type {msg_type}"),
            Channel::Control => format!("{msg_type} is not served on the control channel"),
        };
        replies
            .reply_error(request, "UnsupportedRequest", &evalue)
            .await;
    }
}

/// A request whose content it cannot use: an error reply (nothing, for a
/// message that is not a request).
pub(super) async fn bad_content(replies: &Replies, request: &Message, bad: &BadContent) {
    tracing::warn!("{}: {bad}", replies.name);
    if request.header.msg_type.ends_with("_request") {
        replies
            .reply_error(request, "BadRequest", &bad.to_string())
            .await;
    }
}
