//! Integration tests: the real `mahtab` binary on real sockets.

// Helpers outside #[test] functions unwrap too: a failed unwrap fails the test.
#![allow(clippy::unwrap_used)]

mod agent_code;
mod ask;
mod ask_analyst;
mod ask_claude_cli;
mod ask_python;
mod ask_settings;
mod cost;
mod data_stack;
mod execute;
mod fake_claude;
mod fake_llm;
mod guard;
mod in_place;
mod install;
mod interrupt;
mod lifecycle;
mod malformed;
mod planner;
mod providers;
mod requests;
mod rlm;
mod solutions;
mod structured;
mod support;
mod tools;
mod triage;
mod undo;
