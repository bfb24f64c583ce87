//! Integration tests: the real `mahtab` binary on real sockets.

mod execute;
mod install;
mod interrupt;
mod lifecycle;
mod malformed;
mod requests;
mod support;
