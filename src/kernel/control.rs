//! The control channel: answered even while a cell runs, because it never
//! waits for a cell (creating a subshell waits only for Python to start a
//! thread).

use std::sync::Arc;

use super::Shared;
use super::router::{Replies, RouterChannel};
use super::shell::answer_without_python;
use super::subshells;

pub(super) async fn run(mut channel: RouterChannel, replies: Replies, shared: Arc<Shared>) {
    loop {
        let request = tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            request = channel.next() => request,
        };
        replies.busy(&request);
        shared.current.set_control(&request);
        if request.header.msg_type == "debug_request" {
            let reply = shared
                .debugger
                .handle(&request.content, &shared.python, &shared.debug_events)
                .await;
            replies.reply(&request, "debug_reply", reply).await;
        } else if !answer_without_python(&replies, &shared, &request).await
            && !subshells::answer(&replies, &shared, &request).await
        {
            tracing::warn!(
                "control: {} is not served on control",
                request.header.msg_type
            );
            if request.header.msg_type.ends_with("_request") {
                replies
                    .reply_error(
                        &request,
                        "UnsupportedRequest",
                        &format!(
                            "{} is not served on the control channel",
                            request.header.msg_type
                        ),
                    )
                    .await;
            }
        }
        replies.idle(&request);
    }
}
