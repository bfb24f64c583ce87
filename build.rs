//! Links mahtab to the libpython it was built against and records its version.
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
}
