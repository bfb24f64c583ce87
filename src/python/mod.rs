//! Everything that touches CPython. The kernel sees only [`PythonHandle`]
//! (send work, await results), [`Interrupter`] and the [`OutputSink`] it
//! implements; it never imports pyo3, and this module never touches ZeroMQ.
//!
//! Python runs on one dedicated OS thread (`interpreter`): CPython delivers
//! `KeyboardInterrupt` only to the thread that initialised it, so every cell
//! of the main shell runs there, one at a time, in the order requests
//! arrive. Run by `python -m mahtab`, that thread is the hosting
//! interpreter's main thread (`hosted`). Each kernel subshell has a Python thread of its own
//! (`subshell`). The modules, leaves first: `commands` (what goes to a
//! Python thread and back), `gil`, `pyerr`, `async_exc`, `output` and
//! `fd_capture`; `runtime_method` and `runtime_request` (the runtime's methods the
//! kernel calls); `subshell_interrupts` and `interrupt`; `subshell`,
//! `agent_runs` (agent runs served on the thread that asked),
//! `runtime_calls` (one command), `bridge` (what the runtime holds), `init`, `interpreter` (the
//! thread), and `handle` (the kernel's side).

mod agent_runs;
mod async_exc;
mod bridge;
mod commands;
mod fd_capture;
mod gil;
mod handle;
mod hosted;
mod init;
mod interpreter;
mod interrupt;
mod output;
mod pyerr;
mod runtime_calls;
mod runtime_method;
mod runtime_request;
mod sources;
mod subshell;
mod subshell_interrupts;

pub use crate::exception::PythonException;
pub use agent_runs::AgentRuns;
pub use commands::{
    ExecuteCell, ExecuteOutcome, InputProvider, InputUnavailable, Parent, PythonConfig,
};
pub use fd_capture::{original_stderr, preserve_stderr};
pub use handle::{PythonHandle, linked_python_version};
pub use hosted::run_hosted;
pub use interrupt::{
    Interrupter, accept_sigint_in_current_thread, block_sigint_in_current_thread, sigint_taken_over,
};
pub use output::{FLUSH_INTERVAL, MAX_BATCH_BYTES, Output, OutputSink, StreamName};
pub use runtime_method::RuntimeMethod;
pub use runtime_request::RuntimeRequest;
