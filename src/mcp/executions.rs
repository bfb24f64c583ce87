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
/// How long the kernel's idle may trail its reply (the idle comes first
/// unless IOPub dropped it).
const IDLE_AFTER_REPLY: Duration = Duration::from_secs(2);

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

    /// Follows the request's IOPub messages to its end: the kernel's idle
    /// for it, or (should IOPub have dropped that message for a slow
    /// reader) a short while after its reply.
    async fn follow(self: Arc<Self>, mut pending: Pending) {
        let mut replied: Option<tokio::time::Instant> = None;
        let Some(mut reply) = pending.take_reply() else {
            return self.finish(Some("the reply was already taken"));
        };
        loop {
            let message = tokio::select! {
                message = pending.next_output() => message,
                answer = &mut reply, if replied.is_none() => {
                    if answer.is_err() {
                        break;
                    }
                    replied = Some(tokio::time::Instant::now() + IDLE_AFTER_REPLY);
                    continue;
                }
                () = sleep_until_or_never(replied) => {
                    tracing::debug!("execution {}: no idle after the reply; taken as ended", self.id);
                    self.finish(None);
                    return;
                }
            };
            let Some(message) = message else { break };
            // Decoding and shrinking a figure happens before the lock.
            let image = Outputs::image_of(&message.header.msg_type, &message.content);
            let line = self
                .outputs()
                .add(&message.header.msg_type, &message.content, image);
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
        self.finish(Some("the kernel stopped before the cell ended"));
    }

    /// Marks the cell ended (with `error`, if it did not end by itself).
    fn finish(&self, error: Option<&str>) {
        let mut outputs = self.outputs();
        if let Some(error) = error {
            outputs.error = Some(error.into());
        }
        outputs.done = true;
        drop(outputs);
        self.changes.send_modify(|count| *count += 1);
    }
}

/// Sleeps until `deadline`, or for ever without one.
async fn sleep_until_or_never(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
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
}

impl Executions {
    fn kept(&self) -> MutexGuard<'_, VecDeque<Arc<Execution>>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends a cell with `send` and follows it, unless one of ours still
    /// runs (then its id): the check and the start are one step, so two
    /// calls at once cannot both start a cell.
    pub fn start(
        &self,
        send: impl FnOnce() -> anyhow::Result<Pending>,
    ) -> Result<anyhow::Result<Arc<Execution>>, u64> {
        let mut kept = self.kept();
        if let Some(running) = kept.iter().find(|execution| !execution.done()) {
            return Err(running.id);
        }
        let pending = match send() {
            Ok(pending) => pending,
            Err(e) => return Ok(Err(e)),
        };
        let id = kept.back().map_or(1, |last| last.id + 1);
        let execution = Arc::new(Execution {
            id,
            started: Instant::now(),
            outputs: Mutex::new(Outputs::default()),
            changes: watch::Sender::new(0),
            latest_line: Mutex::new(None),
        });
        tokio::spawn(execution.clone().follow(pending));
        if kept.len() == KEPT {
            kept.pop_front();
        }
        kept.push_back(execution.clone());
        Ok(Ok(execution))
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
