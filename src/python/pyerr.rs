//! Reading a raised Python exception into the kernel's [`PythonException`].

use pyo3::prelude::*;

use crate::exception::PythonException;

/// The one conversion from a Python exception to an error message's fields.
pub(super) fn python_error(py: Python<'_>, err: &PyErr) -> PythonException {
    let ename = err
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    let evalue = err.value(py).to_string();
    let mut traceback = Vec::new();
    if let Some(tb) = err.traceback(py)
        && let Ok(text) = tb.format()
    {
        traceback.extend(text.lines().map(str::to_owned));
    }
    traceback.push(format!("{ename}: {evalue}"));
    PythonException {
        ename,
        evalue,
        traceback,
    }
}
