//! How a failed agent request reaches Python: each kind of failure is an
//! exception class of `mahtab.agent.api` (all subclasses of `AskError`),
//! named here once; the Python side raises the class the name gives.

use crate::exception::PythonException;

/// Why an `%%ask` cell, `ask()` or `rlm()` call failed, as the exception
/// Python raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskFailure {
    /// The run failed (the model, the graph, a record that cannot be read).
    Run,
    /// No usable provider, or settings that cannot be read.
    Config,
    /// The provider could not be set up.
    Provider,
    /// Options the magic or `ask()` does not take.
    Usage,
}

impl AskFailure {
    /// Every kind, for the test that holds the Python side to them.
    pub const ALL: [AskFailure; 4] = [Self::Run, Self::Config, Self::Provider, Self::Usage];

    /// The class `mahtab.agent.api` raises for it.
    pub const fn class(self) -> &'static str {
        match self {
            Self::Run => "AskError",
            Self::Config => "AskConfigError",
            Self::Provider => "AskProviderError",
            Self::Usage => "UsageError",
        }
    }

    /// The exception for this failure, saying `why`.
    pub fn because(self, why: impl Into<String>) -> PythonException {
        PythonException::new(self.class(), why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AGENT_API: &str = include_str!("../python/mahtab/agent/api.py");

    #[test]
    fn every_failure_is_a_class_of_the_python_side() {
        for failure in AskFailure::ALL {
            let class = failure.class();
            let declared = AGENT_API
                .lines()
                .any(|line| line.starts_with(&format!("class {class}(")));
            assert!(declared, "mahtab/agent/api.py declares no class {class}");
            let base = if failure == AskFailure::Run {
                "Exception"
            } else {
                "AskError"
            };
            assert!(
                AGENT_API.contains(&format!("class {class}({base}):")),
                "{class} derives from {base}"
            );
        }
    }
}
