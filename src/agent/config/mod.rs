//! What a run is asked to do and with what: the `%%ask` and `ask()`
//! options, the provider chosen from the environment, the settings file,
//! and how those layers combine (with `%ask_config`).

pub mod choice;
pub mod file;
pub mod layers;
pub mod options;
