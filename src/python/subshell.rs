//! Kernel subshells (JEP 91): each subshell serves its own queue of shell
//! requests on a Python thread of its own, concurrently with the main shell
//! and with the other subshells, in the same namespace (the threads share
//! the GIL, as ipykernel's subshells do).
//!
//! The thread is a `threading.Thread` the runtime starts, so Python sees it
//! like any other (`threading.active_count()`, `threading.get_ident()`). Its
//! target is [`Bridge`](super::interpreter)'s `serve_subshell`, which waits
//! for commands with the GIL released and runs each with the command's own
//! parent: the runtime makes it the thread's parent (output), and input
//! goes to the client that sent the request. When the kernel drops the
//! subshell's [`PythonHandle`](super::PythonHandle), the inbox closes and the
//! thread ends.
//!
//! Only the thread that initialised CPython gets signals, so an interrupt
//! (an `interrupt_request`, or SIGINT while a subshell's cell runs) reaches
//! a subshell's running cell as an asynchronous `KeyboardInterrupt`, raised
//! at its next bytecode (a blocking call such as `time.sleep` ends first).

use std::cell::RefCell;
use std::ffi::c_ulong;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use pyo3::prelude::*;

use super::{Command, Parent};

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
        (inbox, received) = super::recv_released(py, inbox, POLL);
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

/// Interrupts of subshell cells so far.
static INTERRUPTS: AtomicU64 = AtomicU64::new(0);

/// Subshell cells sent to their thread and not started yet.
static QUEUED: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// An interrupt came for this thread's cell before its code started.
    static INTERRUPTED_EARLY: AtomicBool = const { AtomicBool::new(false) };
}

/// A subshell cell is about to be queued (call before the client learns of
/// it): an interrupt from now on reaches it, even before it starts. Returns
/// the interrupts counted so far, for [`Parent::interrupts_seen`].
pub(super) fn cell_coming() -> u64 {
    QUEUED.fetch_add(1, Ordering::SeqCst);
    INTERRUPTS.load(Ordering::SeqCst)
}

/// A cell announced by [`cell_coming`] will not run after all.
pub(super) fn cell_dropped() {
    QUEUED.fetch_sub(1, Ordering::SeqCst);
}

/// How many times subshell cells were interrupted.
pub(super) fn interrupt_count() -> u64 {
    INTERRUPTS.load(Ordering::SeqCst)
}

/// This thread's cell was just told of its interrupt in another way (a
/// wait saw the count change): the exception set for it to raise at its
/// next instruction would be a second one. Call with the GIL held.
pub(super) fn interrupt_delivered() {
    // SAFETY: PyThread_get_thread_ident has no preconditions.
    let ident = unsafe { pyo3::ffi::PyThread_get_thread_ident() };
    let mut running = running();
    if let Some(cell) = running.iter_mut().find(|cell| cell.ident == ident) {
        // Interrupts counted so far are delivered: `interrupt_all`'s thread,
        // which may not have run yet, leaves this cell alone for them.
        cell.delivered = INTERRUPTS.load(Ordering::SeqCst);
        // SAFETY: the caller holds the GIL.
        unsafe { super::interrupt::set_async_exc(ident, std::ptr::null_mut()) };
    }
}

/// The user's code of this thread's cell starts now: true if an interrupt
/// came for it before (the caller raises KeyboardInterrupt).
pub(super) fn interrupted_before_start() -> bool {
    INTERRUPTED_EARLY.with(|early| early.swap(false, Ordering::SeqCst))
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
        let thread = cell.then(|| {
            QUEUED.fetch_sub(1, Ordering::SeqCst);
            let early = INTERRUPTS.load(Ordering::SeqCst) != interrupts_seen;
            INTERRUPTED_EARLY.with(|flag| flag.store(early, Ordering::SeqCst));
            // SAFETY: PyThread_get_thread_ident has no preconditions.
            let ident = unsafe { pyo3::ffi::PyThread_get_thread_ident() };
            running().push(RunningCell {
                ident,
                delivered: INTERRUPTS.load(Ordering::SeqCst),
            });
            super::interrupt::subshell_cell(true);
            ident
        });
        Self { thread }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        SERVING.with(|serving| *serving.borrow_mut() = None);
        INTERRUPTED_EARLY.with(|early| early.store(false, Ordering::SeqCst));
        if let Some(ident) = self.thread {
            running().retain(|cell| cell.ident != ident);
            super::interrupt::subshell_cell(false);
            // An interrupt that came as the cell ended must not surface in
            // the next one. Called with the GIL held (the cell just ran).
            // SAFETY: clearing a thread's async exception needs the GIL,
            // which the serving thread holds here.
            unsafe {
                super::interrupt::set_async_exc(ident, std::ptr::null_mut());
            }
        }
    }
}

/// A subshell thread running a cell.
struct RunningCell {
    ident: c_ulong,
    /// The interrupt count up to which the cell has had its interrupts.
    delivered: u64,
}

/// The subshell threads running a cell.
fn running() -> std::sync::MutexGuard<'static, Vec<RunningCell>> {
    static RUNNING: Mutex<Vec<RunningCell>> = Mutex::new(Vec::new());
    RUNNING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Raises `KeyboardInterrupt` in every subshell cell that runs; returns
/// whether there was one. Takes the GIL on a thread of its own, so the
/// caller never waits for it.
pub(super) fn interrupt_all() -> bool {
    if QUEUED.load(Ordering::SeqCst) == 0 && running().is_empty() {
        return false;
    }
    let count = INTERRUPTS.fetch_add(1, Ordering::SeqCst) + 1;
    std::thread::spawn(move || {
        Python::attach(|_py| {
            // Checked again with the GIL held: a cell that has ended since
            // (its thread clears what is set, but only before this), or that
            // a wait has already told (`interrupt_delivered`), is left alone.
            for cell in running().iter().filter(|cell| cell.delivered < count) {
                // SAFETY: the GIL is held; PyExc_KeyboardInterrupt is a
                // static exception type.
                unsafe {
                    super::interrupt::set_async_exc(cell.ident, pyo3::ffi::PyExc_KeyboardInterrupt);
                }
            }
        });
    });
    true
}
