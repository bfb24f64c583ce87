//! Interrupts of subshells' cells. Only the thread that initialised CPython
//! gets signals, so an interrupt reaches a subshell's running cell as an
//! asynchronous `KeyboardInterrupt`, raised at its next bytecode; one that
//! comes while the cell is queued or starting is kept for it and raised when
//! its code starts. The counts here let a wait (for input, for an agent run)
//! on a subshell's thread see that an interrupt came.

use std::ffi::c_ulong;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};

use pyo3::prelude::*;

use super::async_exc::set_async_exc;

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
        unsafe { set_async_exc(ident, std::ptr::null_mut()) };
    }
}

/// The user's code of this thread's cell starts now: true if an interrupt
/// came for it before (the caller raises KeyboardInterrupt).
pub(super) fn interrupted_before_start() -> bool {
    INTERRUPTED_EARLY.with(|early| early.swap(false, Ordering::SeqCst))
}

/// Told when a subshell cell starts (`true`) or ends, so SIGINT is listened
/// to while one runs: set once by the interrupt module, which this module
/// does not import.
static CELLS_CHANGED: OnceLock<fn(bool)> = OnceLock::new();

/// Registers what hears subshell cells start and end.
pub(super) fn when_cells_change(hook: fn(bool)) {
    let _ = CELLS_CHANGED.set(hook);
}

fn cells_changed(running: bool) {
    if let Some(hook) = CELLS_CHANGED.get() {
        hook(running);
    }
}

/// This thread's cell, which the kernel announced with `interrupts_seen`
/// interrupts counted, starts: it may be interrupted from now on (and is
/// told at once if an interrupt came meanwhile). Returns the thread's
/// ident, for [`cell_ended`].
pub(super) fn cell_started(interrupts_seen: u64) -> c_ulong {
    QUEUED.fetch_sub(1, Ordering::SeqCst);
    let early = INTERRUPTS.load(Ordering::SeqCst) != interrupts_seen;
    INTERRUPTED_EARLY.with(|flag| flag.store(early, Ordering::SeqCst));
    // SAFETY: PyThread_get_thread_ident has no preconditions.
    let ident = unsafe { pyo3::ffi::PyThread_get_thread_ident() };
    running().push(RunningCell {
        ident,
        delivered: INTERRUPTS.load(Ordering::SeqCst),
    });
    cells_changed(true);
    ident
}

/// The cell of thread `ident` ended. Call with the GIL held.
pub(super) fn cell_ended(ident: c_ulong) {
    running().retain(|cell| cell.ident != ident);
    cells_changed(false);
    // An interrupt that came as the cell ended must not surface in the next
    // one.
    // SAFETY: clearing a thread's async exception needs the GIL, which the
    // caller holds.
    unsafe {
        set_async_exc(ident, std::ptr::null_mut());
    }
}

/// Forgets an early interrupt of this thread's (its request ended).
pub(super) fn request_ended() {
    INTERRUPTED_EARLY.with(|early| early.store(false, Ordering::SeqCst));
}

/// The interrupt count up to which this thread's cell has had its
/// interrupts (None when it runs no subshell cell). Above it: an interrupt
/// that came and has not reached the cell yet, which a wait starting now
/// must not miss. Call with the GIL held (what delivers them holds it).
pub(super) fn delivered_to_this_cell() -> Option<u64> {
    // SAFETY: PyThread_get_thread_ident has no preconditions.
    let ident = unsafe { pyo3::ffi::PyThread_get_thread_ident() };
    running()
        .iter()
        .find(|cell| cell.ident == ident)
        .map(|cell| cell.delivered)
}

/// Wakes the waits of [`wait_for_interrupt`] when an interrupt comes.
static INTERRUPT_CAME: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());

/// Waits up to `limit` for the subshell interrupt count to move past
/// `seen`: how a subshell cell's sleep ends at once when interrupted,
/// which an exception raised at the next bytecode cannot do. Call with
/// the GIL released.
pub(super) fn wait_for_interrupt(seen: u64, limit: std::time::Duration) {
    let (lock, came) = &INTERRUPT_CAME;
    let guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
    let _ = came
        .wait_timeout_while(guard, limit, |_| INTERRUPTS.load(Ordering::SeqCst) == seen)
        .unwrap_or_else(PoisonError::into_inner);
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
    let count = {
        // Counted under the lock the sleepers wait with, so none misses it.
        let _waiting = INTERRUPT_CAME
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        INTERRUPTS.fetch_add(1, Ordering::SeqCst) + 1
    };
    INTERRUPT_CAME.1.notify_all();
    std::thread::spawn(move || {
        Python::attach(|_py| {
            // Checked again with the GIL held: a cell that has ended since
            // (its thread clears what is set, but only before this), or that
            // a wait has already told (`interrupt_delivered`), is left alone.
            for cell in running().iter_mut().filter(|cell| cell.delivered < count) {
                // SAFETY: the GIL is held; PyExc_KeyboardInterrupt is a
                // static exception type.
                unsafe {
                    set_async_exc(cell.ident, pyo3::ffi::PyExc_KeyboardInterrupt);
                }
                // Raised at the cell's next bytecode: delivered.
                cell.delivered = count;
            }
        });
    });
    true
}
