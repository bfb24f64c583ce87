//! Kernel subshells (JEP 91) as the kernel sees them: `create_subshell`,
//! `delete_subshell` and `list_subshell` on the control channel, and the
//! queue of each subshell, to which the shell channel routes the requests
//! whose header names it (`subshell_id`). Each queue is served by a shell
//! of its own on the subshell's Python thread, which the kernel's
//! [`StartShell`] starts.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::json;
use tokio::sync::mpsc::UnboundedSender;

use super::Shared;
use super::router::Replies;
use crate::python::PythonHandle;
use crate::wire::Message;

/// Starts a shell serving the queue it returns, on a Python thread, for a
/// subshell id. A shell answers subshell requests and a subshell needs a
/// shell, so the kernel hands this in rather than the modules importing each
/// other.
pub(super) type StartShell =
    fn(Arc<Shared>, PythonHandle, Option<String>) -> UnboundedSender<Message>;

/// The subshells alive, oldest first.
pub(super) struct Subshells {
    queues: Mutex<Vec<(String, UnboundedSender<Message>)>>,
    start_shell: StartShell,
}

impl Subshells {
    pub(super) fn new(start_shell: StartShell) -> Self {
        Self {
            queues: Mutex::default(),
            start_shell,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, UnboundedSender<Message>)>> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The queue of subshell `id`, if it exists.
    pub(super) fn queue(&self, id: &str) -> Option<UnboundedSender<Message>> {
        self.lock()
            .iter()
            .find(|(known, _)| known == id)
            .map(|(_, queue)| queue.clone())
    }

    fn ids(&self) -> Vec<String> {
        self.lock().iter().map(|(id, _)| id.clone()).collect()
    }

    /// Ends subshell `id`: its queue closes, so its shell stops after the
    /// request it serves and its thread ends. False if there is none.
    fn remove(&self, id: &str) -> bool {
        let mut queues = self.lock();
        let before = queues.len();
        queues.retain(|(known, _)| known != id);
        queues.len() != before
    }
}

/// The subshell a shell request is for, from its header (`None`, absent or
/// not a string: the main shell).
pub(super) fn subshell_of(request: &Message) -> Option<&str> {
    request.raw_header.get("subshell_id")?.as_str()
}

/// `create_subshell_request`: starts a subshell and answers its id.
pub(super) async fn create(replies: &Replies, shared: &Arc<Shared>, request: &Message) {
    let id = uuid::Uuid::new_v4().to_string();
    match shared.python.create_subshell(&id).await {
        Ok(python) => {
            let queue = (shared.subshells.start_shell)(shared.clone(), python, Some(id.clone()));
            shared.subshells.lock().push((id.clone(), queue));
            tracing::info!("control: created subshell {id}");
            let content = json!({ "status": "ok", "subshell_id": id });
            replies
                .reply(request, "create_subshell_reply", content)
                .await;
        }
        Err(error) => {
            replies
                .reply_error(request, &error.ename, &error.evalue)
                .await;
        }
    }
}

/// `delete_subshell_request`: ends one.
pub(super) async fn delete(replies: &Replies, shared: &Arc<Shared>, request: &Message) {
    match request
        .content
        .get("subshell_id")
        .and_then(|id| id.as_str())
    {
        Some(id) if shared.subshells.remove(id) => {
            tracing::info!("control: deleted subshell {id}");
            replies
                .reply(request, "delete_subshell_reply", json!({ "status": "ok" }))
                .await;
        }
        Some(id) => {
            let evalue = format!("no subshell {id:?}");
            replies.reply_error(request, "KeyError", &evalue).await;
        }
        None => {
            let evalue = "delete_subshell_request needs a subshell_id";
            replies.reply_error(request, "BadRequest", evalue).await;
        }
    }
}

/// `list_subshell_request`: the subshells alive, oldest first.
pub(super) async fn list(replies: &Replies, shared: &Arc<Shared>, request: &Message) {
    let content = json!({ "status": "ok", "subshell_id": shared.subshells.ids() });
    replies.reply(request, "list_subshell_reply", content).await;
}
