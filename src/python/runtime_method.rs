//! The methods of the Python runtime the kernel calls, the one list of
//! them: each variant names its method and the parameters Python declares
//! for what the kernel passes, and a test holds the package to both. The
//! agent scope's methods are typed apart (`agent::scope`), and the requests
//! the runtime serves through [`RuntimeMethod::Request`] are
//! [`super::RuntimeRequest`].

/// A method of the runtime object (`mahtab.runtimes`: the plain or the
/// IPython runtime of `mahtab.runtime`, with the agent's entry points).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeMethod {
    /// Run a cell on the interpreter thread; JSON text of the reply's
    /// fields back.
    Execute,
    /// [`Self::Execute`] on a subshell's thread, under a parent header.
    ExecuteFor,
    /// Serve a [`super::RuntimeRequest`] on the interpreter thread.
    Request,
    /// [`Self::Request`] on a subshell's thread, under a parent header.
    RequestFor,
    /// Start a subshell's thread on an inbox of commands.
    StartSubshell,
    /// Run the event loop between cells until the kernel has work.
    RunEventLoop,
    /// The debugger's variables outside a breakpoint.
    DebugVariables,
    /// The debugger's rich view of one variable.
    DebugRichInspect,
    /// The loaded modules, as the debugger lists them.
    DebugModules,
    /// Close what the runtime holds before the kernel exits.
    Shutdown,
}

impl RuntimeMethod {
    /// Every method, for the test that holds the Python side to them.
    pub const ALL: [RuntimeMethod; 10] = [
        Self::Execute,
        Self::ExecuteFor,
        Self::Request,
        Self::RequestFor,
        Self::StartSubshell,
        Self::RunEventLoop,
        Self::DebugVariables,
        Self::DebugRichInspect,
        Self::DebugModules,
        Self::Shutdown,
    ];

    /// The method's name on the runtime object.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Execute => "execute",
            Self::ExecuteFor => "execute_for",
            Self::Request => "request",
            Self::RequestFor => "request_for",
            Self::StartSubshell => "start_subshell",
            Self::RunEventLoop => "run_event_loop",
            Self::DebugVariables => "debug_variables",
            Self::DebugRichInspect => "debug_rich_inspect",
            Self::DebugModules => "debug_modules",
            Self::Shutdown => "shutdown",
        }
    }

    /// The parameters after `self`, as the Python definition spells them:
    /// what the kernel passes, in its order. The `_for` forms take the
    /// parent header and pass the rest on to their main-thread form.
    pub const fn parameters(self) -> &'static str {
        match self {
            Self::Execute => "code, execution_count, silent, store_history, user_expressions_json",
            Self::ExecuteFor | Self::RequestFor => "parent_json, *args",
            Self::Request => "method, replies, content_json, buffers=()",
            Self::StartSubshell => "inbox, name",
            Self::RunEventLoop => "wake_fd",
            Self::DebugVariables | Self::DebugRichInspect | Self::DebugModules => "args",
            Self::Shutdown => "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_is_defined_by_the_runtime_with_the_parameters_the_kernel_passes() {
        for method in RuntimeMethod::ALL {
            let parameters = match method.parameters() {
                "" => String::new(),
                listed => format!(", {listed}"),
            };
            let definition = format!("def {}(self{parameters}):", method.name());
            assert!(
                crate::python::sources::defines(&definition),
                "no runtime module has `{definition}`"
            );
        }
    }

    #[test]
    fn a_changed_parameter_list_is_noticed() {
        // The check above reads definitions whole: a parameter added on
        // the Python side alone would not match.
        assert!(!crate::python::sources::defines(
            "def execute(self, code, execution_count, silent, store_history):"
        ));
    }
}
