//! Raising an exception in another Python thread, at its next bytecode:
//! how an interrupt reaches a subshell's cell (only the main thread gets
//! signals) and how a call past its time limit is stopped.

use std::sync::atomic::{AtomicBool, Ordering};

/// Sets (or, with null, clears) the exception thread `ident` raises at its
/// next bytecode.
///
/// # Safety
/// The GIL must be held; `exc` is null or an exception type.
pub(super) unsafe fn set_async_exc(ident: std::ffi::c_ulong, exc: *mut pyo3::ffi::PyObject) {
    // CPython takes the thread's ident as an unsigned long; the binding
    // declares a long of the same width.
    // SAFETY: as the caller promised.
    unsafe {
        pyo3::ffi::PyThreadState_SetAsyncExc(ident as std::ffi::c_long, exc);
    }
}

/// A call into Python on a thread of its own that may be given a
/// TimeoutError if it runs too long. Every method runs with the GIL held,
/// so the call cannot end between [`TimedCall::time_out`]'s check and its
/// raise.
#[derive(Default)]
pub(super) struct TimedCall {
    /// The calling thread's Python ident, once it runs.
    ident: std::sync::atomic::AtomicU64,
    running: AtomicBool,
}

impl TimedCall {
    /// The call starts, on its thread (GIL held).
    pub(super) fn begin(&self) {
        // SAFETY: PyThread_get_thread_ident has no preconditions.
        let ident = unsafe { pyo3::ffi::PyThread_get_thread_ident() };
        self.ident.store(ident as u64, Ordering::SeqCst);
        self.running.store(true, Ordering::SeqCst);
    }

    /// The call returned (GIL held).
    pub(super) fn end(&self) {
        self.running.store(false, Ordering::SeqCst);
    }

    /// Raises TimeoutError in the call if it still runs. Takes the GIL.
    pub(super) fn time_out(&self) {
        pyo3::Python::attach(|_py| {
            if self.running.load(Ordering::SeqCst) {
                let ident = self.ident.load(Ordering::SeqCst) as std::ffi::c_ulong;
                // SAFETY: the GIL is held; PyExc_TimeoutError is a static
                // exception type.
                unsafe { set_async_exc(ident, pyo3::ffi::PyExc_TimeoutError) };
            }
        });
    }
}
