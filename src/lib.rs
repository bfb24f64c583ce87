//! mahtab: a Jupyter kernel for Python, written in Rust, with an AI agent.
//!
//! # Layout
//! - [`zmtp`]: ZeroMQ's transport for the sockets the kernel binds (ROUTER,
//!   XPUB, REP), each peer with a bounded queue of its own.
//! - [`wire`]: ZeroMQ frames <-> messages; HMAC signing and replay checks.
//! - [`kernel`]: the five channels (shell, control, IOPub, stdin, heartbeat)
//!   and what every request does; talks to Python only through a handle.
//! - [`python`]: the embedded CPython on its own thread; output capture,
//!   rich display, interrupts. Never touches ZeroMQ.
//! - [`agent`]: the `%%ask` agent graph, prompts and model wire formats;
//!   touches neither ZeroMQ nor pyo3.
//! - [`install`]: writing and removing the kernelspec.
//! - [`launcher`]: starting under Jupyter Enterprise Gateway (its kernel
//!   launcher protocol).
//! - [`export`]: `mahtab export`, a notebook's `%%ask` cells as the code
//!   their recorded runs ran, for ipykernel.
//! - [`mcp`]: `mahtab mcp`, an MCP server that is a client of a running
//!   kernel (through [`zmtp`] and [`wire`] only, never the kernel's code).
//! - [`exception`]: a Python exception as it crosses the kernel, one type
//!   for cells, the agent's calls into Python and `%%ask` failures.
//! - [`cell_files`]: the file names cells compile under, for debuggers.
//! - [`text`]: cutting text at byte positions without splitting a character.
//! - [`private_files`]: files and directories only their owner may use.
//! - [`reference`]: the book's reference pages, made from the code (and,
//!   in tests, `book_examples`: the book's examples parse as the code reads them).
//!
//! - [`cli`]: the command line, shared by the `mahtab` binary (`main.rs`)
//!   and the wheel's extension module (`extension.rs`, `python -m mahtab`).

pub mod agent;
#[cfg(test)]
mod book_examples;
pub mod cell_files;
pub mod cli;
pub mod exception;
pub mod export;
mod extension;
pub mod install;
pub mod kernel;
pub mod launcher;
pub mod mcp;
pub mod private_files;
pub mod python;
pub mod reference;
pub mod text;
pub mod wire;
pub mod zmtp;

// The unit tests embed Python: when pyo3 leaves libpython unlinked (see
// build.rs), they link it themselves.
#[cfg(test)]
include!(concat!(env!("OUT_DIR"), "/link_libpython.rs"));
