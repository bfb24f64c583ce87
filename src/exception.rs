//! A Python exception as it crosses the kernel: the error of a cell, a
//! failed call into the agent's Python scope, or an `%%ask` failure raised
//! back in Python. One type for all three, and its kind is read from the
//! exception's name here only.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PythonException {
    pub ename: String,
    pub evalue: String,
    /// Lines of the traceback, as a frontend shows them (none for
    /// exceptions the kernel raises itself).
    #[serde(default)]
    pub traceback: Vec<String>,
}

/// What an exception means to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExceptionKind {
    /// The user pressed stop.
    Interrupt,
    /// Input was asked for where no frontend can give it.
    NoInput,
    /// Anything else the code raised.
    Raised,
}

impl PythonException {
    /// An exception named `ename`, with no traceback.
    pub fn new(ename: impl Into<String>, evalue: impl Into<String>) -> Self {
        Self {
            ename: ename.into(),
            evalue: evalue.into(),
            traceback: Vec::new(),
        }
    }

    /// An error raised by the kernel itself rather than by user code.
    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            traceback: vec![format!("KernelError: {message}")],
            ..Self::new("KernelError", message)
        }
    }

    /// The user pressed stop; `why` says what stopped.
    pub fn interrupted(why: impl Into<String>) -> Self {
        Self::new("KeyboardInterrupt", why)
    }

    /// A reply of `method` that is not what the call expects.
    pub fn bad_reply(method: &str, error: &dyn std::fmt::Display) -> Self {
        Self::new(
            "ValueError",
            format!("unreadable reply of {method}: {error}"),
        )
    }

    pub fn kind(&self) -> ExceptionKind {
        match self.ename.as_str() {
            "KeyboardInterrupt" => ExceptionKind::Interrupt,
            "StdinNotImplementedError" => ExceptionKind::NoInput,
            _ => ExceptionKind::Raised,
        }
    }

    pub fn is_interrupt(&self) -> bool {
        self.kind() == ExceptionKind::Interrupt
    }
}

impl std::fmt::Display for PythonException {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.evalue.is_empty() {
            f.write_str(&self.ename)
        } else {
            write!(f, "{}: {}", self.ename, self.evalue)
        }
    }
}

impl std::error::Error for PythonException {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_comes_from_the_name() {
        assert!(PythonException::interrupted("").is_interrupt());
        assert_eq!(
            PythonException::new("StdinNotImplementedError", "no stdin").kind(),
            ExceptionKind::NoInput
        );
        assert_eq!(
            PythonException::new("ValueError", "bad").kind(),
            ExceptionKind::Raised
        );
        assert_eq!(
            PythonException::new("KeyboardInterrupt", "").to_string(),
            "KeyboardInterrupt"
        );
        assert_eq!(
            PythonException::internal("oops").traceback,
            ["KernelError: oops"]
        );
    }
}
