//! The interpreter thread: it starts CPython and the runtime
//! ([`super::init`]), then serves commands one at a time ([`super::serve`]),
//! running the cells' event loop between them.
//!
//! The thread holds the GIL only while it works on a command, so threads that
//! user code starts keep running between cells.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError};

use pyo3::prelude::*;

use super::agent_runs::AgentRuns;
use super::bridge::Bridge;
use super::commands::{Command, ExecuteOutcome, InputProvider, PythonConfig, RuntimeState};
use super::fd_capture::FdCapture;
use super::init::{describe, initialize, load_runtime};
use super::interrupt::{self};
use super::output::{OutputSink, StreamBuffer};
use super::runtime_calls::{Thread, error_output, execute, request};
use super::runtime_method::RuntimeMethod;
use crate::exception::PythonException;

pub(super) fn spawn(
    config: PythonConfig,
    sink: Arc<dyn OutputSink>,
    input: Arc<dyn InputProvider>,
    agents: AgentRuns,
    commands: Receiver<Command>,
    ready: tokio::sync::watch::Sender<RuntimeState>,
    wake_fd: Option<OwnedFd>,
) {
    if let Some(host) = super::hosted::take_host() {
        // Python is up, and its main thread waits for this loop.
        let job = move || run(config, sink, input, agents, commands, ready, wake_fd);
        if host.send(Box::new(job)).is_ok() {
            return;
        }
        tracing::error!("the hosting thread is gone: Python cannot run");
        return;
    }
    std::thread::Builder::new()
        .name("mahtab-python".into())
        .stack_size(python_stack_size())
        .spawn(move || run(config, sink, input, agents, commands, ready, wake_fd))
        .expect("spawn the Python interpreter thread");
}

/// The smallest stack a thread that runs Python gets: what a main thread
/// has by default (`ulimit -s` is 8 MiB on Linux).
const MIN_PYTHON_STACK: usize = 8 << 20;

/// The most: deep enough for any recursion CPython allows in practice; the
/// stack is reserved address space, and pages are used only as it grows.
const MAX_PYTHON_STACK: usize = 1 << 30;

/// The stack for a thread that runs Python. CPython 3.11 recurses on the C
/// stack (repr of nested containers, pickling, the compiler) as deep as
/// `sys.setrecursionlimit` lets it, and a user who raises the limit expects a
/// main thread's stack, as in ipykernel; a Rust thread's default 2 MiB
/// would end the process instead of raising RecursionError.
pub(super) fn python_stack_size() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes to the struct we own.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_STACK, &mut limit) } == 0 {
        limit.rlim_cur
    } else {
        libc::RLIM_INFINITY
    };
    if soft == libc::RLIM_INFINITY {
        return MAX_PYTHON_STACK;
    }
    usize::try_from(soft)
        .unwrap_or(MAX_PYTHON_STACK)
        .clamp(MIN_PYTHON_STACK, MAX_PYTHON_STACK)
}

fn run(
    config: PythonConfig,
    sink: Arc<dyn OutputSink>,
    input: Arc<dyn InputProvider>,
    agents: AgentRuns,
    commands: Receiver<Command>,
    ready: tokio::sync::watch::Sender<RuntimeState>,
    wake_fd: Option<OwnedFd>,
) {
    let hosted = super::hosted::active();
    let buffer = StreamBuffer::start(sink);
    // Hosted, CPython is up and this thread (its main one) holds no GIL.
    let started = if hosted {
        Python::attach(|py| {
            super::hosted::adopt_environment(py)
                .map_err(|e| format!("cannot read the environment: {}", describe(py, &e)))
        })
    } else {
        initialize(&config)
    };
    let runtime = started.and_then(|()| {
        let connection_file = config
            .connection_file
            .as_ref()
            .map(|path| path.to_string_lossy().into_owned());
        let bridge = || {
            Bridge::new(
                buffer.clone(),
                input.clone(),
                agents.clone(),
                connection_file.clone(),
            )
        };
        let runtime = Python::attach(|py| {
            load_runtime(py, bridge).map_err(|e| {
                let error = super::pyerr::python_error(py, &e);
                tracing::debug!("Python's start failed:\n{}", error.traceback.join("\n"));
                describe(py, &e)
            })
        });
        // After the runtime's imports, which may have set Python's own handler.
        interrupt::install_on_interpreter_thread();
        runtime
    });
    // Start-up messages went to the kernel's log; from here on, output on
    // fds 1 and 2 belongs to the cells.
    let capture = match FdCapture::start(buffer.clone()) {
        Ok(capture) => Some(capture),
        Err(e) => {
            tracing::warn!("output of C code and subprocesses is not captured: {e}");
            None
        }
    };
    let drain = || {
        if let Some(capture) = &capture {
            capture.drain();
        }
    };
    let _ = ready.send(match &runtime {
        Ok(runtime) => RuntimeState::Ready(Arc::new(Python::attach(|py| runtime.clone_ref(py)))),
        Err(message) => {
            tracing::error!("Python failed to start: {message}");
            RuntimeState::Failed(message.clone())
        }
    });
    // Release the GIL that initialisation left with this thread; each command
    // takes it again for as long as it runs.
    // SAFETY: this thread holds the GIL after Py_InitializeFromConfig (or none,
    // if initialisation failed, in which case we skip this).
    if runtime.is_ok() && !hosted {
        unsafe {
            pyo3::ffi::PyEval_SaveThread();
        }
    }

    loop {
        let command = match commands.try_recv() {
            Ok(command) => command,
            Err(TryRecvError::Disconnected) => break,
            Err(TryRecvError::Empty) => {
                // Idle: asyncio tasks that cells created go on until work
                // comes (a byte on the wake pipe), as in ipykernel, whose
                // own loop runs them.
                if let (Ok(runtime), Some(wake_fd)) = (&runtime, &wake_fd)
                    && run_event_loop(runtime, wake_fd)
                {
                    drain();
                    buffer.flush();
                    continue;
                }
                match commands.recv() {
                    Ok(command) => command,
                    Err(_) => break,
                }
            }
        };
        match (command, &runtime) {
            (Command::Shutdown(done), Ok(runtime)) => {
                Python::attach(|py| {
                    if let Err(e) = runtime
                        .bind(py)
                        .call_method0(RuntimeMethod::Shutdown.name())
                    {
                        tracing::warn!("runtime shutdown failed: {}", describe(py, &e));
                    }
                });
                drain();
                buffer.close();
                let _ = done.send(());
                return;
            }
            (Command::Shutdown(done), Err(_)) => {
                let _ = done.send(());
                return;
            }
            (Command::Execute(cell, reply), Ok(runtime)) => {
                let thread = Thread::Main {
                    drain_fds: &drain,
                    aside: false,
                };
                let outcome =
                    Python::attach(|py| execute(py, runtime.bind(py), &buffer, cell, thread));
                let _ = reply.send(outcome);
            }
            (Command::Execute(cell, reply), Err(message)) => {
                let error = PythonException::internal(format!("Python failed to start: {message}"));
                buffer.emit_after_flush(error_output(&error), Some(&cell.parent.header));
                let _ = reply.send(ExecuteOutcome::failed(error));
            }
            (
                Command::Request {
                    request: asked,
                    content,
                    buffers,
                    parent,
                    aside,
                    reply,
                },
                Ok(runtime),
            ) => {
                let thread = Thread::Main {
                    drain_fds: &drain,
                    aside,
                };
                let result = Python::attach(|py| {
                    let message = (asked, content, buffers.as_slice());
                    request(py, runtime.bind(py), &buffer, message, parent, thread)
                });
                buffer.flush();
                let _ = reply.send(result);
            }
            (Command::Request { reply, .. }, Err(message)) => {
                let error = PythonException::internal(format!("Python failed to start: {message}"));
                let _ = reply.send(Err(error));
            }
        }
    }
    buffer.close();
}

/// Runs the event loop of the cells between them, if it has work, until
/// the kernel has something to do; returns whether it ran.
fn run_event_loop(runtime: &Py<PyAny>, wake_fd: &OwnedFd) -> bool {
    Python::attach(|py| {
        match runtime
            .bind(py)
            .call_method1(RuntimeMethod::RunEventLoop.name(), (wake_fd.as_raw_fd(),))
            .and_then(|ran| ran.extract::<bool>())
        {
            Ok(ran) => ran,
            Err(e) => {
                tracing::warn!("the event loop between cells failed: {}", describe(py, &e));
                false
            }
        }
    })
}
