//! Interrupting running Python code, from a client's SIGINT or from an
//! `interrupt_request`.
//!
//! CPython raises `KeyboardInterrupt` only on the thread that initialised it,
//! and only if its Python-level SIGINT handler is `default_int_handler`. So:
//! - the kernel blocks SIGINT in every thread but the interpreter thread
//!   ([`block_sigint_in_current_thread`] runs in `main` before any other thread
//!   starts), so a process-wide SIGINT from jupyter_client lands there;
//! - the interpreter thread installs an OS handler ([`install_on_interpreter_thread`])
//!   that asks CPython to raise `KeyboardInterrupt` only while a cell runs, so
//!   an idle SIGINT (jupyter_client sends one before every shutdown) is ignored
//!   rather than left pending for the next cell;
//! - an `interrupt_request` sends SIGINT to that thread ([`Interrupter`]). A real
//!   signal, unlike a bare `PyErr_SetInterrupt`, also wakes blocking calls such as
//!   `time.sleep`, which then see the pending interrupt.
//!
//! An interrupt that comes after a cell was handed to the interpreter thread
//! but before its code started (the client has seen `execute_input`) is kept
//! and raised as the cell starts, rather than lost.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

const IDLE: u8 = 0;
const QUEUED: u8 = 1;
const RUNNING: u8 = 2;

/// Whether a cell is waiting for, or running on, the interpreter thread.
static CELL_STATE: AtomicU8 = AtomicU8::new(IDLE);

/// An interrupt that arrived while the cell was queued.
static PENDING: AtomicBool = AtomicBool::new(false);

/// The interpreter thread, once it has installed its handler.
static INTERPRETER_THREAD: OnceLock<libc::pthread_t> = OnceLock::new();

extern "C" fn on_sigint(_signum: libc::c_int) {
    match CELL_STATE.load(Ordering::SeqCst) {
        // SAFETY: PyErr_SetInterruptEx is documented as async-signal-safe and
        // needs no thread state; the interpreter is initialised before this
        // handler is installed.
        RUNNING => unsafe {
            pyo3::ffi::PyErr_SetInterruptEx(libc::SIGINT);
        },
        QUEUED => PENDING.store(true, Ordering::SeqCst),
        _ => {}
    }
}

fn sigint_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset only write to the set we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        set
    }
}

/// Blocks SIGINT in the calling thread and in every thread it spawns later.
/// Call first thing in `main`.
pub fn block_sigint_in_current_thread() {
    let set = sigint_set();
    // SAFETY: changes only the calling thread's signal mask.
    unsafe {
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Installs the SIGINT handler and unblocks SIGINT for the calling thread,
/// which must be the thread that initialised Python.
pub(super) fn install_on_interpreter_thread() {
    // SAFETY: pthread_self has no preconditions.
    let _ = INTERPRETER_THREAD.set(unsafe { libc::pthread_self() });
    // SAFETY: a plain sigaction with a handler that only touches an atomic and
    // calls an async-signal-safe CPython function. No SA_RESTART, so blocking
    // system calls return EINTR and CPython checks for the interrupt.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigint as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        action.sa_flags = 0;
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
        let set = sigint_set();
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// Marks a cell as handed to the interpreter thread (not yet running).
pub(super) fn cell_queued() {
    CELL_STATE.store(QUEUED, Ordering::SeqCst);
}

/// Marks user code as running for as long as the guard lives.
pub(super) struct CellRunning;

impl CellRunning {
    /// Must be called on the interpreter thread with the GIL held.
    pub(super) fn start() -> Self {
        CELL_STATE.store(RUNNING, Ordering::SeqCst);
        if PENDING.swap(false, Ordering::SeqCst) {
            // SAFETY: the interpreter is initialised; this only sets a flag
            // that CPython checks before running the next bytecode.
            unsafe {
                pyo3::ffi::PyErr_SetInterruptEx(libc::SIGINT);
            }
        }
        CellRunning
    }
}

impl Drop for CellRunning {
    fn drop(&mut self) {
        CELL_STATE.store(IDLE, Ordering::SeqCst);
        PENDING.store(false, Ordering::SeqCst);
    }
}

/// Interrupts the running cell, if any. Cheap to copy; usable from any thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct Interrupter;

impl Interrupter {
    /// Raises `KeyboardInterrupt` in the running (or about to run) cell.
    /// Returns false, and does nothing, when no cell is running.
    pub fn interrupt(&self) -> bool {
        match CELL_STATE.load(Ordering::SeqCst) {
            QUEUED => {
                PENDING.store(true, Ordering::SeqCst);
                // The cell may have started meanwhile; then signal it as well.
                if CELL_STATE.load(Ordering::SeqCst) != RUNNING {
                    return true;
                }
            }
            RUNNING => {}
            _ => return false,
        }
        match INTERPRETER_THREAD.get() {
            // SAFETY: the thread id was recorded by the interpreter thread,
            // which lives as long as the process.
            Some(thread) => unsafe { libc::pthread_kill(*thread, libc::SIGINT) == 0 },
            None => false,
        }
    }
}
