//! Links mahtab to the libpython it was built against and records its version;
//! turns the names both languages use (the package's `declared.json`) into
//! Rust constants.
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
/// The project's scripts build everything that way (`scripts/cargo-env.sh`);
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

/// The names both languages use, declared once in
/// `src/python/mahtab/declared.json` (the package's `mahtab.declared` reads
/// it too): the toolbox's functions and the kinds of action the guard asks
/// about, as Rust constants in `$OUT_DIR/python_lists.rs`, so Rust validates
/// options and lists tools with the same names.
fn python_lists() {
    const DECLARED: &str = "src/python/mahtab/declared.json";
    println!("cargo:rerun-if-changed={DECLARED}");
    #[derive(serde::Deserialize)]
    struct Declared {
        toolbox_functions: Vec<String>,
        guarded_kinds: serde_json::Map<String, serde_json::Value>,
    }
    let text =
        std::fs::read_to_string(DECLARED).unwrap_or_else(|e| panic!("cannot read {DECLARED}: {e}"));
    let declared: Declared =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{DECLARED}: {e}"));
    let kinds: Vec<&String> = declared.guarded_kinds.keys().collect();
    let code = format!(
        "/// The toolbox's functions, from `{DECLARED}`.\n\
         pub const TOOLBOX_FUNCTIONS: &[&str] = &{:?};\n\
         /// The kinds of action the guard asks about, from `{DECLARED}`.\n\
         pub const GUARDED_KINDS: &[&str] = &{:?};\n",
        declared.toolbox_functions, kinds
    );
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("python_lists.rs"), code).expect("write python_lists.rs");
}
