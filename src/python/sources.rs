//! The kernel's Python side, the package `mahtab` (`src/python/mahtab/`),
//! embedded in the binary, and the import finder that serves it: a module
//! compiles when it is first imported, so the agent's modules cost nothing
//! until the agent first runs.

use pyo3::exceptions::{PyImportError, PyOSError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

/// A module of the package: its name, the file name its code compiles under
/// (what tracebacks and the debugger show), its source, and whether it is a
/// package (a folder's `__init__.py`).
struct Source {
    name: &'static str,
    file: &'static str,
    text: &'static str,
    package: bool,
}

/// `module!("tools")` is `mahtab.tools`, from `mahtab/tools.py`;
/// `module!("runtime", "base")` is `mahtab.runtime.base`, from
/// `mahtab/runtime/base.py`; `package!("runtime")` is `mahtab.runtime`,
/// from `mahtab/runtime/__init__.py`.
macro_rules! module {
    ($stem:literal) => {
        Source {
            name: concat!("mahtab.", $stem),
            file: concat!("mahtab/", $stem, ".py"),
            text: include_str!(concat!("mahtab/", $stem, ".py")),
            package: false,
        }
    };
    ($folder:literal, $stem:literal) => {
        Source {
            name: concat!("mahtab.", $folder, ".", $stem),
            file: concat!("mahtab/", $folder, "/", $stem, ".py"),
            text: include_str!(concat!("mahtab/", $folder, "/", $stem, ".py")),
            package: false,
        }
    };
}

macro_rules! package {
    ($folder:literal) => {
        Source {
            name: concat!("mahtab.", $folder),
            file: concat!("mahtab/", $folder, "/__init__.py"),
            text: include_str!(concat!("mahtab/", $folder, "/__init__.py")),
            package: true,
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
        package: true,
    },
    module!("__main__"),
    module!("declared"),
    module!("descriptions"),
    module!("runtimes"),
    module!("tools"),
    package!("runtime"),
    module!("runtime", "base"),
    module!("runtime", "comms"),
    module!("runtime", "completion"),
    module!("runtime", "debugger"),
    module!("runtime", "display"),
    module!("runtime", "event_loop"),
    module!("runtime", "figures"),
    module!("runtime", "import_hooks"),
    module!("runtime", "introspection"),
    module!("runtime", "ipython"),
    module!("runtime", "ipython_shell"),
    module!("runtime", "messages"),
    module!("runtime", "paths"),
    module!("runtime", "plain"),
    module!("runtime", "protocol"),
    module!("runtime", "reprs"),
    module!("runtime", "streams"),
    package!("agent"),
    module!("agent", "api"),
    module!("agent", "call_help"),
    module!("agent", "candidates"),
    module!("agent", "close_names"),
    module!("agent", "context"),
    module!("agent", "execution"),
    module!("agent", "guard"),
    module!("agent", "local_models"),
    module!("agent", "magics"),
    module!("agent", "mcp_queries"),
    module!("agent", "namespace"),
    module!("agent", "printed_tokens"),
    module!("agent", "scope"),
    module!("agent", "request_example"),
    module!("agent", "shown_result"),
    module!("agent", "typed_values"),
    module!("agent", "written_difference"),
    module!("agent", "written_labels"),
    module!("agent", "undo"),
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
        options.set_item("is_package", source.package)?;
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
    // A copy of the names (PyDict_Keys) taken in one call: other threads of
    // a hosting interpreter may import while this runs.
    let names: Vec<String> = modules
        .cast::<PyDict>()?
        .keys()
        .iter()
        .map(|name| name.extract())
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
        fn files(folder: &std::path::Path, under: &str, found: &mut Vec<String>) {
            for entry in std::fs::read_dir(folder).unwrap() {
                let entry = entry.unwrap();
                let name = entry.file_name().into_string().unwrap();
                if name.starts_with('.') || name == "__pycache__" {
                    continue;
                }
                let path = format!("{under}/{name}");
                if entry.file_type().unwrap().is_dir() {
                    files(&entry.path(), &path, found);
                } else {
                    found.push(path);
                }
            }
        }
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/python/mahtab");
        let mut on_disk = Vec::new();
        files(&folder, "mahtab", &mut on_disk);
        on_disk.sort();
        let mut embedded: Vec<String> = PACKAGE
            .iter()
            .map(|s| s.file)
            .chain(RESOURCES.iter().map(|r| r.file))
            .map(str::to_owned)
            .collect();
        embedded.sort();
        assert_eq!(embedded, on_disk);
        assert!(find("mahtab.runtime.streams").is_some() && find("mahtab.streams").is_none());
        // Each folder is a package, and only they and the top are.
        let packages: Vec<&str> = PACKAGE
            .iter()
            .filter(|s| s.package)
            .map(|s| s.file)
            .collect();
        assert_eq!(
            packages,
            [
                "mahtab/__init__.py",
                "mahtab/runtime/__init__.py",
                "mahtab/agent/__init__.py"
            ]
        );
    }
}
