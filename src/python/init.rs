//! Starting CPython in the chosen environment and loading the runtime (the
//! `mahtab` package) with its bridge.

use pyo3::prelude::*;

use super::bridge::Bridge;
use super::commands::PythonConfig;
use super::pyerr::python_error;
use super::sources;

/// Initialises CPython for the configured environment.
#[cfg(not(feature = "abi3"))]
pub(super) fn initialize(config: &PythonConfig) -> Result<(), String> {
    use std::ffi::{CStr, CString};
    use std::os::unix::ffi::OsStrExt;

    use super::interrupt;

    // SAFETY: the PyConfig API is used as CPython documents it: init, set
    // fields, initialise from it, clear it. This runs once, on this thread,
    // before anything else touches Python.
    unsafe {
        if pyo3::ffi::Py_IsInitialized() != 0 {
            return Err("Python was already initialised".into());
        }
        let mut cfg = std::mem::MaybeUninit::<pyo3::ffi::PyConfig>::zeroed();
        pyo3::ffi::PyConfig_InitPythonConfig(cfg.as_mut_ptr());
        let mut cfg = cfg.assume_init();
        // Python's own SIGINT handler makes KeyboardInterrupt possible (it is
        // installed only if SIGINT is not ignored); the interrupt module then
        // takes over the OS-level disposition.
        interrupt::sigint_default_before_python();
        cfg.install_signal_handlers = 1;
        cfg.parse_argv = 0;
        let mut status = pyo3::ffi::PyStatus_Ok();
        if let Some(executable) = &config.executable {
            let path = CString::new(executable.as_os_str().as_bytes())
                .map_err(|_| "the Python path contains a NUL byte".to_string())?;
            let field = std::ptr::addr_of_mut!(cfg.executable);
            status = pyo3::ffi::PyConfig_SetBytesString(&mut cfg, field, path.as_ptr());
        }
        if pyo3::ffi::PyStatus_Exception(status) == 0 {
            status = pyo3::ffi::Py_InitializeFromConfig(&cfg);
        }
        pyo3::ffi::PyConfig_Clear(&mut cfg);
        if pyo3::ffi::PyStatus_Exception(status) != 0 {
            let message = if status.err_msg.is_null() {
                "unknown error".to_string()
            } else {
                CStr::from_ptr(status.err_msg)
                    .to_string_lossy()
                    .into_owned()
            };
            return Err(format!("CPython initialisation failed: {message}"));
        }
    }
    Ok(())
}

/// The wheel's module (the stable ABI) runs only in the interpreter that
/// imported it; starting one of its own takes CPython's full C API.
#[cfg(feature = "abi3")]
pub(super) fn initialize(_config: &PythonConfig) -> Result<(), String> {
    Err("this build of mahtab runs inside Python only (python -m mahtab)".into())
}

/// Loads the Python side and creates the session's runtime: IPython's when
/// IPython imports, else plain Python (and says so once, on stderr).
pub(super) fn load_runtime(py: Python<'_>, bridge: impl Fn() -> Bridge) -> PyResult<Py<PyAny>> {
    sources::install(py)?;
    let runtimes = py.import("mahtab.runtimes")?;
    let ipython = runtimes
        .getattr("ipython_runtime")
        .and_then(|start| start.call1((bridge(),)));
    match ipython {
        Ok(shell) => Ok(shell.unbind()),
        Err(e) => {
            // Without a working IPython the kernel still runs plain Python.
            // The kernel's log says so once; a cell that uses a magic says so
            // in its error.
            let plain = runtimes.getattr("PlainRuntime")?.call1((bridge(),))?;
            let reason = if e.is_instance_of::<pyo3::exceptions::PyImportError>(py) {
                format!("IPython is not available ({})", e.value(py))
            } else {
                let error = python_error(py, &e);
                tracing::error!("IPython failed to start:\n{}", error.traceback.join("\n"));
                format!(
                    "IPython failed to start ({}: {})",
                    error.ename, error.evalue
                )
            };
            tracing::warn!(
                "{reason}, so cells run as plain Python; magics such as %time need IPython \
                 (pip install ipython in the kernel's environment)"
            );
            Ok(plain.unbind())
        }
    }
}

/// A readable one-line description of a start-up failure.
pub(super) fn describe(py: Python<'_>, err: &PyErr) -> String {
    let error = python_error(py, err);
    format!("{}: {}", error.ename, error.evalue)
}
