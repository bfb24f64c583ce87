//! The control channel: answered even while a cell runs, because it never
//! waits for a cell (creating a subshell waits only for Python to start a
//! thread; starting the debugger, for Python to run `debugpy.listen`).

use std::sync::Arc;

use super::Shared;
use super::dispatch;
use super::requests::{Channel, Request};
use super::router::{Replies, RouterChannel};

pub(super) async fn run(mut channel: RouterChannel, replies: Replies, shared: Arc<Shared>) {
    loop {
        let request = tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            request = channel.next() => request,
        };
        replies.busy(&request);
        shared.io.set_control(&request);
        match Request::parse(&request.header.msg_type, &request.content) {
            Ok(parsed) => {
                dispatch::answer(&replies, &shared, &request, parsed, Channel::Control).await
            }
            Err(bad) => dispatch::bad_content(&replies, &request, &bad).await,
        }
        replies.idle(&request);
    }
}
