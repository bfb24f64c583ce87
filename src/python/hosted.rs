//! Running inside a Python process (`python -m mahtab`, the extension
//! module): CPython is already up, and its main thread, the one that gets
//! signals, called in. That thread becomes the interpreter thread, serving
//! the kernel's commands, while the kernel's channels run on a thread
//! beside it: the same split as the binary's, with the roles of the two
//! threads swapped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::interrupt::{accept_sigint_in_current_thread, block_sigint_in_current_thread};

/// The interpreter thread's loop, handed to the waiting host thread.
pub(super) type Job = Box<dyn FnOnce() + Send>;

/// Where the kernel hands its interpreter loop, while a host thread waits.
static HOST: Mutex<Option<mpsc::Sender<Job>>> = Mutex::new(None);

fn host() -> MutexGuard<'static, Option<mpsc::Sender<Job>>> {
    HOST.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether this process hosts the kernel (CPython was up before it).
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Whether the kernel runs hosted: CPython is up, and the interpreter
/// thread holds no GIL when it starts.
pub(super) fn active() -> bool {
    ACTIVE.load(Ordering::SeqCst)
}

/// The waiting host thread, if the process hosts the kernel (taken: one
/// interpreter thread per process).
pub(super) fn take_host() -> Option<mpsc::Sender<Job>> {
    host().take()
}

/// Runs `kernel` on a new thread; the calling thread (the hosting
/// interpreter's main thread, with the GIL released) runs the interpreter
/// loop once the kernel starts Python, and returns when both have ended.
pub fn run_hosted<T: Send + 'static>(
    kernel: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::Result<T>> {
    // The kernel's threads inherit a blocked SIGINT; the interpreter loop
    // unblocks it on this thread once it handles it (python::interrupt).
    block_sigint_in_current_thread();
    let (sender, jobs) = mpsc::channel::<Job>();
    ACTIVE.store(true, Ordering::SeqCst);
    *host() = Some(sender);
    let kernel = std::thread::Builder::new()
        .name("mahtab-kernel".into())
        .spawn(move || {
            // However the kernel ends (a panic too), the host stops waiting
            // for an interpreter loop it would never get.
            struct StopWaiting;
            impl Drop for StopWaiting {
                fn drop(&mut self) {
                    host().take();
                }
            }
            let _stop_waiting = StopWaiting;
            kernel()
        });
    let kernel = match kernel {
        Ok(kernel) => kernel,
        Err(e) => {
            host().take();
            accept_sigint_in_current_thread();
            return Err(e);
        }
    };
    if let Ok(job) = jobs.recv() {
        job();
    }
    let result = kernel.join();
    accept_sigint_in_current_thread();
    Ok(result)
}

/// Hosted, Python read its environment when it started, before the
/// command line set anything (`launch` adopts a gateway's `KERNEL_*`
/// settings): cells see those in `os.environ` too, as with the binary,
/// which sets them before Python starts.
pub(super) fn adopt_environment(py: pyo3::Python<'_>) -> pyo3::PyResult<()> {
    use pyo3::types::PyAnyMethods;
    let environ = py.import("os")?.getattr("environ")?;
    for (name, value) in std::env::vars_os() {
        if !environ.contains(&name)? {
            environ.set_item(name, value)?;
        }
    }
    Ok(())
}
