//! The cells the MCP server ran, each followed to its end by a task of its
//! own, so a client may stop waiting (its call returns "still running") and
//! read the rest later. The last [`KEPT`] are kept for such reads.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::kernel::Pending;
use super::outputs::Outputs;

/// How many executions are kept for `read_output`.
pub const KEPT: usize = 32;

/// One cell run for the client.
pub struct Execution {
    pub id: u64,
    pub started: Instant,
    outputs: Mutex<Outputs>,
    /// Bumped at every output; waiters watch it.
    changes: watch::Sender<u64>,
    /// The last line shown, for progress notifications.
    latest_line: Mutex<Option<String>>,
}

impl Execution {
    pub fn outputs(&self) -> MutexGuard<'_, Outputs> {
        self.outputs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn done(&self) -> bool {
        self.outputs().done
    }

    /// The latest output line not yet told (taken).
    pub fn take_latest_line(&self) -> Option<String> {
        self.latest_line
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// A receiver of its changes, for [`Execution::wait_step`].
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Waits for the cell's next output, or its end, or `heartbeat` of
    /// silence, but not past `deadline`.
    pub async fn wait_step(
        &self,
        changes: &mut watch::Receiver<u64>,
        deadline: tokio::time::Instant,
        heartbeat: Duration,
    ) -> Waited {
        if self.done() {
            return Waited::Ended;
        }
        let beat = (tokio::time::Instant::now() + heartbeat).min(deadline);
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() || self.done() {
                    return Waited::Ended;
                }
                Waited::Output
            }
            () = tokio::time::sleep_until(beat) => {
                if self.done() {
                    Waited::Ended
                } else if beat == deadline {
                    Waited::TimedOut
                } else {
                    Waited::Quiet
                }
            }
        }
    }

    /// Follows the request's IOPub messages to its end.
    async fn follow(self: Arc<Self>, mut pending: Pending) {
        while let Some(message) = pending.next_output().await {
            let line = self
                .outputs()
                .add(&message.header.msg_type, &message.content);
            if line.is_some() {
                *self
                    .latest_line
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = line;
            }
            let done = self.done();
            self.changes.send_modify(|count| *count += 1);
            if done {
                return;
            }
        }
        // The kernel went away mid-cell.
        let mut outputs = self.outputs();
        outputs.error = Some("the kernel stopped before the cell ended".into());
        outputs.done = true;
        drop(outputs);
        self.changes.send_modify(|count| *count += 1);
    }
}

/// What [`Execution::wait_step`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    Ended,
    Output,
    Quiet,
    TimedOut,
}

/// The executions so far.
#[derive(Default)]
pub struct Executions {
    kept: Mutex<VecDeque<Arc<Execution>>>,
    next_id: Mutex<u64>,
}

impl Executions {
    fn kept(&self) -> MutexGuard<'_, VecDeque<Arc<Execution>>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts following the execute request `pending`.
    pub fn start(&self, pending: Pending) -> Arc<Execution> {
        let id = {
            let mut next = self.next_id.lock().unwrap_or_else(PoisonError::into_inner);
            *next += 1;
            *next
        };
        let execution = Arc::new(Execution {
            id,
            started: Instant::now(),
            outputs: Mutex::new(Outputs::default()),
            changes: watch::Sender::new(0),
            latest_line: Mutex::new(None),
        });
        tokio::spawn(execution.clone().follow(pending));
        let mut kept = self.kept();
        if kept.len() == KEPT {
            kept.pop_front();
        }
        kept.push_back(execution.clone());
        execution
    }

    pub fn get(&self, id: u64) -> Option<Arc<Execution>> {
        self.kept()
            .iter()
            .find(|execution| execution.id == id)
            .cloned()
    }

    /// The execution still running, if one is.
    pub fn running(&self) -> Option<Arc<Execution>> {
        self.kept()
            .iter()
            .find(|execution| !execution.done())
            .cloned()
    }
}
