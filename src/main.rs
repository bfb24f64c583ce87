//! The `mahtab` binary: the command line of [`mahtab::cli`], with CPython
//! started on a thread of its own.

fn main() -> anyhow::Result<()> {
    // Before any thread exists: SIGINT must reach only the Python thread (and
    // this one, once Python has started; see python::interrupt).
    mahtab::python::block_sigint_in_current_thread();
    mahtab::cli::run(std::env::args_os(), mahtab::cli::Launcher::Binary)
}
