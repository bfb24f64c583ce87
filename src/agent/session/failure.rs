//! Why a request failed, as the Python exception it becomes.

use crate::agent::config::options::UsageError;

/// Why a request failed, as the Python exception it becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub ename: &'static str,
    pub evalue: String,
}

impl Failure {
    pub(super) fn new(ename: &'static str, evalue: impl Into<String>) -> Self {
        Self {
            ename,
            evalue: evalue.into(),
        }
    }

    pub(super) fn interrupted() -> Self {
        Self::new("KeyboardInterrupt", "the %%ask run was interrupted")
    }
}

impl From<UsageError> for Failure {
    fn from(error: UsageError) -> Self {
        Self::new("UsageError", error.to_string())
    }
}
