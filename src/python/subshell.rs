//! Kernel subshells (JEP 91): each subshell serves its own queue of shell
//! requests on a Python thread of its own, concurrently with the main shell
//! and with the other subshells, in the same namespace (the threads share
//! the GIL, as ipykernel's subshells do).
//!
//! The thread is a `threading.Thread` the runtime starts, so Python sees it
//! like any other (`threading.active_count()`, `threading.get_ident()`). Its
//! target is [`Bridge`](super::bridge)'s `serve_subshell`, which waits
//! for commands with the GIL released and runs each with the command's own
//! parent: the runtime makes it the thread's parent (output), and input
//! goes to the client that sent the request. When the kernel drops the
//! subshell's [`PythonHandle`](super::PythonHandle), the inbox closes and the
//! thread ends.
//!
//! How an interrupt reaches a subshell's cell is [`super::subshell_interrupts`]'s.

use std::cell::RefCell;
use std::ffi::c_ulong;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use pyo3::prelude::*;

use super::commands::{Command, Parent};
use super::gil::recv_released;
use super::subshell_interrupts;

/// How often a waiting subshell thread looks at its inbox with the GIL
/// released (dropping the sender also wakes it at once).
const POLL: Duration = Duration::from_millis(200);

/// The inbox of one subshell thread, handed to Python as the thread's
/// argument.
#[pyclass(frozen)]
pub(super) struct SubshellInbox {
    commands: Mutex<Option<mpsc::Receiver<Command>>>,
}

impl SubshellInbox {
    pub(super) fn new(commands: mpsc::Receiver<Command>) -> Self {
        Self {
            commands: Mutex::new(Some(commands)),
        }
    }

    /// The receiver, for the one thread that serves it.
    pub(super) fn take(&self) -> Option<mpsc::Receiver<Command>> {
        self.commands
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// Waits for the next command with the GIL released; `None` once the
/// kernel dropped the subshell.
pub(super) fn next_command(
    py: Python<'_>,
    mut inbox: mpsc::Receiver<Command>,
) -> (mpsc::Receiver<Command>, Option<Command>) {
    loop {
        let received;
        (inbox, received) = recv_released(py, inbox, POLL);
        match received {
            Ok(command) => return (inbox, Some(command)),
            Err(RecvTimeoutError::Disconnected) => return (inbox, None),
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
}

thread_local! {
    /// The request this subshell thread serves now (input goes to its
    /// sender; an agent run publishes under it).
    static SERVING: RefCell<Option<Parent>> = const { RefCell::new(None) };
}

/// The request the calling subshell thread serves, if it is one.
pub(super) fn serving() -> Option<Parent> {
    SERVING.with(|serving| serving.borrow().clone())
}

/// Marks the calling thread as serving `parent` while the guard lives, and
/// as interruptible while it runs a cell.
pub(super) struct Serving {
    thread: Option<c_ulong>,
}

impl Serving {
    pub(super) fn start(parent: Parent, cell: bool) -> Self {
        let interrupts_seen = parent.interrupts_seen;
        SERVING.with(|serving| *serving.borrow_mut() = Some(parent));
        let thread = cell.then(|| subshell_interrupts::cell_started(interrupts_seen));
        Self { thread }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        SERVING.with(|serving| *serving.borrow_mut() = None);
        subshell_interrupts::request_ended();
        if let Some(ident) = self.thread {
            // Called with the GIL held (the cell just ran).
            subshell_interrupts::cell_ended(ident);
        }
    }
}
