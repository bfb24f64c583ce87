//! The kernel's Python side, the package `mahtab` (`src/python/mahtab/`),
//! embedded in the binary, and the import finder that serves it: a module
//! compiles when it is first imported, so the agent's modules cost nothing
//! until the agent first runs.

use pyo3::exceptions::{PyImportError, PyOSError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

/// A module of the package: its name, the file name its code compiles under
/// (what tracebacks and the debugger show), and its source.
struct Source {
    name: &'static str,
    file: &'static str,
    text: &'static str,
}

/// `module!("streams")` is `mahtab.streams`, from `mahtab/streams.py`.
macro_rules! module {
    ($stem:literal) => {
        Source {
            name: concat!("mahtab.", $stem),
            file: concat!("mahtab/", $stem, ".py"),
            text: include_str!(concat!("mahtab/", $stem, ".py")),
        }
    };
}

/// A file of the package that is not a module: its file name and contents.
struct Resource {
    file: &'static str,
    text: &'static str,
}

/// Every data file of the package, read by its modules with
/// `pkgutil.get_data` (the finder's [`EmbeddedPackage::get_data`]).
const RESOURCES: &[Resource] = &[Resource {
    file: "mahtab/declared.json",
    text: include_str!("mahtab/declared.json"),
}];

/// Whether some module of the package holds `text` (how tests hold the
/// Python side to names the Rust side declares).
#[cfg(test)]
pub(crate) fn defines(text: &str) -> bool {
    PACKAGE.iter().any(|source| source.text.contains(text))
}

const PACKAGE_NAME: &str = "mahtab";

/// Every module of the package: the one list of them.
const PACKAGE: &[Source] = &[
    Source {
        name: PACKAGE_NAME,
        file: "mahtab/__init__.py",
        text: include_str!("mahtab/__init__.py"),
    },
    module!("__main__"),
    module!("agent_api"),
    module!("agent_code"),
    module!("agent_scope"),
    module!("candidates"),
    module!("close_names"),
    module!("comms"),
    module!("completion"),
    module!("context"),
    module!("debugger"),
    module!("declared"),
    module!("display"),
    module!("event_loop"),
    module!("figures"),
    module!("guard"),
    module!("import_hooks"),
    module!("introspection"),
    module!("ipython_runtime"),
    module!("ipython_shell"),
    module!("local_models"),
    module!("mcp_queries"),
    module!("messages"),
    module!("namespace"),
    module!("paths"),
    module!("plain_runtime"),
    module!("protocol"),
    module!("reprs"),
    module!("runtime"),
    module!("streams"),
    module!("tools"),
    module!("undo"),
];

fn find(name: &str) -> Option<&'static Source> {
    PACKAGE.iter().find(|source| source.name == name)
}

/// The finder and loader of the embedded package, first on `sys.meta_path`:
/// `import mahtab` finds the kernel's package, whatever else `sys.path`
/// holds.
#[pyclass(frozen, module = "mahtab")]
struct EmbeddedPackage;

#[pymethods]
impl EmbeddedPackage {
    #[pyo3(signature = (name, path = None, target = None))]
    fn find_spec<'py>(
        slf: &Bound<'py, Self>,
        name: &str,
        path: Option<&Bound<'py, PyAny>>,
        target: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let _ = (path, target);
        let Some(source) = find(name) else {
            return Ok(None);
        };
        let py = slf.py();
        let options = PyDict::new(py);
        options.set_item("origin", source.file)?;
        options.set_item("is_package", source.name == PACKAGE_NAME)?;
        let spec = py
            .import("importlib.machinery")?
            .getattr("ModuleSpec")?
            .call((name, slf), Some(&options))?;
        // So the module's `__file__` is its file name.
        spec.setattr("has_location", true)?;
        Ok(Some(spec))
    }

    /// None: the import system makes the module.
    fn create_module(&self, spec: &Bound<'_, PyAny>) -> Option<Py<PyAny>> {
        let _ = spec;
        None
    }

    fn exec_module(&self, module: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = module.py();
        let name: String = module.getattr("__name__")?.extract()?;
        let Some(source) = find(&name) else {
            return Err(PyImportError::new_err(format!(
                "{name} is not a module of the kernel's package"
            )));
        };
        let builtins = py.import("builtins")?;
        // Flags 0 and dont_inherit: the module's code is compiled as a
        // file's, whatever the importing code's `from __future__` imports.
        let code =
            builtins
                .getattr("compile")?
                .call1((source.text, source.file, "exec", 0, true))?;
        builtins
            .getattr("exec")?
            .call1((code, module.getattr("__dict__")?))?;
        Ok(())
    }

    /// The contents of a data file of the package (`path` as `pkgutil`
    /// makes it from the package's `__file__`), as a file-system loader
    /// would read it.
    fn get_data<'py>(&self, py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyBytes>> {
        RESOURCES
            .iter()
            .find(|resource| resource.file == path)
            .map(|resource| PyBytes::new(py, resource.text.as_bytes()))
            .ok_or_else(|| {
                PyOSError::new_err(format!("{path} is not a file of the kernel's package"))
            })
    }

    /// The file names of the package's modules, loaded or not.
    fn file_names(&self) -> Vec<&'static str> {
        PACKAGE.iter().map(|source| source.file).collect()
    }
}

/// Puts the package's finder first on `sys.meta_path`. Run by `python -m
/// mahtab`, the package was imported from the wheel's files before: those
/// modules are dropped (all but the extension module running now), so the
/// kernel runs the package it was built with, as the binary does.
pub(super) fn install(py: Python<'_>) -> PyResult<()> {
    let finder = Bound::new(py, EmbeddedPackage)?;
    let sys = py.import("sys")?;
    sys.getattr("meta_path")?
        .call_method1("insert", (0, finder))?;
    let modules = sys.getattr("modules")?;
    let names: Vec<String> = modules
        .call_method0("keys")?
        .try_iter()?
        .map(|name| name?.extract())
        .collect::<PyResult<_>>()?;
    let extension = format!("{PACKAGE_NAME}._kernel");
    for name in names {
        let ours = name == PACKAGE_NAME || name.starts_with(&format!("{PACKAGE_NAME}."));
        if ours && name != extension {
            modules.del_item(name)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_the_package_is_embedded_once() {
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/python/mahtab");
        let mut on_disk: Vec<String> = std::fs::read_dir(folder)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|name| !name.starts_with('.') && name != "__pycache__")
            .map(|name| format!("mahtab/{name}"))
            .collect();
        on_disk.sort();
        let mut embedded: Vec<String> = PACKAGE
            .iter()
            .map(|s| s.file)
            .chain(RESOURCES.iter().map(|r| r.file))
            .map(str::to_owned)
            .collect();
        embedded.sort();
        assert_eq!(embedded, on_disk);
        assert!(find("mahtab.streams").is_some() && find("mahtab.nothing").is_none());
    }
}
