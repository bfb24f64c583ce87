//! The control channel: answered even while a cell runs, because it never
//! waits for Python.

use std::sync::Arc;

use super::Shared;
use super::router::RouterChannel;
use super::shell::answer_without_python;

pub(super) async fn run(mut channel: RouterChannel, shared: Arc<Shared>) {
    loop {
        let request = tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            request = channel.next() => request,
        };
        channel.busy(&request);
        shared.current.set_control(&request);
        if !answer_without_python(&mut channel, &shared, &request).await {
            tracing::warn!(
                "control: {} is not served on control",
                request.header.msg_type
            );
            if request.header.msg_type.ends_with("_request") {
                channel
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
        channel.idle(&request);
    }
}
