//! The server's hold on its kernel: the client and the two subshells it
//! made there, replaced when the kernel restarts, and where the server's
//! cells run: on the main shell while it runs nothing (an interrupt ends
//! a call blocked in C only there: CPython runs signal handlers on the main
//! thread alone), else on the work subshell, so they answer while the
//! notebook's own cells run. jupyter_client restarts a
//! kernel on the same connection file (ports and keys), so while that file
//! is there the server connects again and the MCP session goes on; a tool
//! call made meanwhile waits for the kernel to be back.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;
use tokio::sync::watch;

use super::kernel::KernelClient;

/// How long a restarted kernel may take to answer again.
pub const RESTART_LIMIT: Duration = Duration::from_secs(30);
/// How long a silent empty cell on an idle main shell may take.
const MAIN_SHELL_PROBE: Duration = Duration::from_millis(500);
/// How often a connection is tried while the kernel restarts.
const RETRY: Duration = Duration::from_millis(200);

/// A connected kernel and the server's subshells on it.
pub struct Attached {
    pub kernel: KernelClient,
    /// The subshell that runs `execute` and `ask` cells while the main
    /// shell is busy.
    work: Arc<str>,
    /// The subshell that answers `variables` and `inspect` (replaced when
    /// one of them hangs: a value's own code may never return).
    look: Mutex<Arc<str>>,
}

impl Attached {
    /// Connects to the kernel a connection file describes and makes the
    /// server's two subshells there.
    pub async fn open(connection_file: &Path) -> Result<Self> {
        let kernel = KernelClient::connect(connection_file).await?;
        let work = kernel
            .create_subshell()
            .await
            .context("the kernel must offer subshells (mahtab does)")?;
        let look = match kernel.create_subshell().await {
            Ok(look) => look,
            Err(e) => {
                delete_subshells(&kernel, [work]).await;
                return Err(e);
            }
        };
        // A cell already running there is known once this one, queued
        // behind it, has run: at once when none runs.
        match kernel.queue_on_main_shell() {
            Ok(mut queued) => {
                let _ = tokio::time::timeout(MAIN_SHELL_PROBE, queued.reply()).await;
            }
            Err(e) => tracing::debug!("no cell queued on the main shell: {e:#}"),
        }
        Ok(Self {
            kernel,
            work: work.into(),
            look: Mutex::new(look.into()),
        })
    }

    /// Where the server's next cell runs: the main shell (`None`) when no
    /// cell runs there, and the notebook's next cell then waits for it as
    /// for any other client's; else the work subshell.
    pub fn cell_shell(&self) -> Option<&str> {
        (!self.kernel.main_shell_idle()).then_some(&*self.work)
    }

    /// The subshell the server's cells run on when not on the main shell.
    pub fn work(&self) -> &str {
        &self.work
    }

    pub fn look(&self) -> Arc<str> {
        self.look
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn replace_look(&self, fresh: String) {
        *self.look.lock().unwrap_or_else(PoisonError::into_inner) = fresh.into();
    }

    /// Deletes the server's subshells (the session ends).
    pub async fn close(&self) {
        let work = self.work.to_string();
        delete_subshells(&self.kernel, [work, self.look().to_string()]).await;
    }
}

async fn delete_subshells<const N: usize>(kernel: &KernelClient, ids: [String; N]) {
    for id in ids {
        let request = json!({ "subshell_id": id });
        if let Err(e) = kernel.control("delete_subshell_request", request).await {
            tracing::debug!("subshell {id} not deleted: {e:#}");
        }
    }
}

/// Where the server stands with its kernel.
#[derive(Clone)]
enum State {
    Attached(Arc<Attached>),
    /// Gone, and being looked for again.
    Restarting,
    /// Gone for good (shut down, or not back in time).
    Gone,
}

/// The kernel the tools use.
pub struct Link {
    state: watch::Sender<State>,
}

impl Link {
    pub fn new(attached: Attached) -> Self {
        Self {
            state: watch::Sender::new(State::Attached(Arc::new(attached))),
        }
    }

    /// The kernel now, if it is attached.
    pub fn current(&self) -> Option<Arc<Attached>> {
        match &*self.state.borrow() {
            State::Attached(attached) => Some(attached.clone()),
            State::Restarting | State::Gone => None,
        }
    }

    /// The kernel; while it restarts, waits (up to [`RESTART_LIMIT`]) for
    /// it to be back.
    pub async fn attached(&self) -> Result<Arc<Attached>> {
        let mut changes = self.state.subscribe();
        let settled = |state: &State| match state {
            State::Attached(attached) => !attached.kernel.is_gone(),
            State::Restarting => false,
            State::Gone => true,
        };
        let state = match tokio::time::timeout(RESTART_LIMIT, changes.wait_for(settled)).await {
            Ok(Ok(state)) => state.clone(),
            _ => State::Gone,
        };
        match state {
            State::Attached(attached) => Ok(attached),
            State::Restarting | State::Gone => {
                anyhow::bail!("the kernel has gone away (shut down, or not back from a restart)")
            }
        }
    }

    /// The kernel went away: calls wait until [`Link::attach`] or
    /// [`Link::close`].
    pub fn detach(&self) {
        self.state.send_replace(State::Restarting);
    }

    pub fn attach(&self, attached: Attached) {
        self.state.send_replace(State::Attached(Arc::new(attached)));
    }

    /// The kernel is gone for good: waiting calls fail now.
    pub fn close(&self) {
        self.state.send_replace(State::Gone);
    }
}

/// Connects again to a kernel that went away, while its connection file is
/// there (jupyter_client removes it when it shuts a kernel down, keeps it
/// when it restarts one), for up to [`RESTART_LIMIT`].
pub async fn reattach(connection_file: &Path) -> Result<Attached> {
    let deadline = tokio::time::Instant::now() + RESTART_LIMIT;
    loop {
        anyhow::ensure!(
            connection_file.exists(),
            "its connection file is gone: the kernel was shut down"
        );
        match Attached::open(connection_file).await {
            Ok(attached) => return Ok(attached),
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::debug!("the kernel is not back yet: {e:#}");
                tokio::time::sleep(RETRY).await;
            }
            Err(e) => {
                return Err(e.context(format!("the kernel was not back within {RESTART_LIMIT:?}")));
            }
        }
    }
}
