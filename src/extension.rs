//! `mahtab._kernel`, the extension module of the wheel (`pip install
//! mahtab`), which `python -m mahtab` runs: the same command line as the
//! binary, in the hosting interpreter, so cells run in that environment's
//! own Python with no libpython of mahtab's own to match.

use std::ffi::OsString;
use std::path::PathBuf;

use pyo3::prelude::*;

use crate::cli::{self, Launcher};

#[pymodule]
#[pyo3(name = "_kernel")]
fn kernel_module(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(main, module)?)
}

/// Runs the mahtab command line (`argv` without the program's name);
/// returns the exit status.
#[pyfunction]
fn main(py: Python<'_>, argv: Vec<String>) -> PyResult<i32> {
    let python: PathBuf = py.import("sys")?.getattr("executable")?.extract()?;
    let launcher = Launcher::PythonModule { python };
    let args: Vec<OsString> = std::iter::once(OsString::from("mahtab"))
        .chain(argv.into_iter().map(OsString::from))
        .collect();
    // The kernel takes the GIL as it needs it, on this thread too.
    Ok(py.detach(move || match cli::run(args, launcher) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("mahtab: {e:#}");
            1
        }
    }))
}
