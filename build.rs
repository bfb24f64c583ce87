//! Links mahtab to the libpython it was built against and records its version;
//! reads the lists both languages need from the Python files that define them.
//!
//! The rpath makes the binary load that libpython at run time rather than
//! whichever one the loader finds first (on Debian with pyenv, plain linking
//! picked up the system's older libpython and none of the user's packages).

fn main() {
    let config = pyo3_build_config::get();
    if let Some(lib_dir) = config.lib_dir() {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{lib_dir}");
    }
    let version = config.version();
    println!(
        "cargo:rustc-env=MAHTAB_BUILD_PYTHON={}.{}",
        version.major, version.minor
    );
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
    link_libpython_when_pyo3_does_not(config);
    python_lists();
}

/// The wheel's build (maturin) compiles pyo3 for an extension module, which
/// leaves libpython unlinked: the interpreter that imports the module has it.
/// The project's scripts build everything that way (`scripts/cargo-env.sh`),
/// so that the wheel reuses the compiled pyo3 instead of compiling it again;
/// then the binary and the tests, which embed Python, link libpython here.
/// The library itself never names it, or the wheel's module would too.
fn link_libpython_when_pyo3_does_not(config: &pyo3_build_config::InterpreterConfig) {
    println!("cargo:rerun-if-env-changed=PYO3_BUILD_EXTENSION_MODULE");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let unit_test_link = out.join("link_libpython.rs");
    if std::env::var_os("PYO3_BUILD_EXTENSION_MODULE").is_none() {
        std::fs::write(&unit_test_link, "").expect("write link_libpython.rs");
        return;
    }
    let name = config
        .lib_name()
        .expect("pyo3 knows the name of the Python library");
    if !config.shared() {
        // maturin builds only the extension module, which needs no libpython;
        // the binary and the tests cannot be linked to a static one this way.
        println!(
            "cargo:warning=PYO3_BUILD_EXTENSION_MODULE with a Python that has no shared \
             libpython: only the extension module (the wheel) can be built"
        );
        std::fs::write(&unit_test_link, "").expect("write link_libpython.rs");
        return;
    }
    if let Some(lib_dir) = config.lib_dir() {
        println!("cargo:rustc-link-search=native={lib_dir}");
    }
    for target in ["bins", "tests"] {
        println!("cargo:rustc-link-arg-{target}=-l{name}");
    }
    // `rustc-link-arg-tests` does not reach the library's own unit tests:
    // lib.rs includes this under `cfg(test)`.
    let attribute = format!("#[link(name = {name:?})]\nunsafe extern \"C\" {{}}\n");
    std::fs::write(&unit_test_link, attribute).expect("write link_libpython.rs");
}

/// The toolbox's functions (`__all__` of `mahtab/tools.py`) and the kinds of
/// action the guard asks about (the keys of `KINDS` in `mahtab/guard.py`),
/// as Rust constants in `$OUT_DIR/python_lists.rs`: the Python files define
/// them, and Rust validates options and lists tools with the same names.
fn python_lists() {
    const TOOLS: &str = "src/python/mahtab/tools.py";
    const GUARD: &str = "src/python/mahtab/guard.py";
    println!("cargo:rerun-if-changed={TOOLS}");
    println!("cargo:rerun-if-changed={GUARD}");
    let tools = quoted_between(&read(TOOLS), "__all__ = [", "]", TOOLS);
    let kinds: Vec<String> = quoted_between(&read(GUARD), "KINDS = {", "}", GUARD)
        .into_iter()
        .step_by(2) // key, description, key, ...
        .collect();
    let list = |items: &[String]| {
        let quoted: Vec<String> = items.iter().map(|item| format!("{item:?}")).collect();
        format!("&[{}]", quoted.join(", "))
    };
    let code = format!(
        "/// `__all__` of `{TOOLS}`.\npub const TOOLBOX_FUNCTIONS: &[&str] = {};\n\
         /// The keys of `KINDS` in `{GUARD}`.\npub const GUARDED_KINDS: &[&str] = {};\n",
        list(&tools),
        list(&kinds)
    );
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("python_lists.rs"), code).expect("write python_lists.rs");
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// The double-quoted strings from the line that starts with `start` up to
/// the first line with `end`, in order.
fn quoted_between(text: &str, start: &str, end: &str, path: &str) -> Vec<String> {
    let from = text
        .lines()
        .position(|line| line.starts_with(start))
        .unwrap_or_else(|| panic!("{path} has no line starting with {start:?}"));
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate().skip(from) {
        let body = if i == from {
            &line[start.len()..]
        } else {
            line
        };
        let mut parts = body.split('"');
        parts.next();
        while let (Some(item), Some(_)) = (parts.next(), parts.next()) {
            found.push(item.to_owned());
        }
        if body.contains(end) {
            return found;
        }
    }
    panic!("{path}: {start:?} does not end with {end:?}")
}
