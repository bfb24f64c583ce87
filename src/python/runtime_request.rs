//! The requests the Python runtime serves besides cells, each naming the
//! runtime method that serves it: the one list of them. The kernel sends
//! the method's name and the Python side calls it, so no table of message
//! types is kept in Python.

/// A request the runtime serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeRequest {
    IsComplete,
    Complete,
    Inspect,
    History,
    CommInfo,
    CommOpen,
    CommMsg,
    CommClose,
    /// Start debugpy's listener (the kernel asks it when a debugger
    /// attaches; no client message asks for it).
    DebugpyListen,
}

impl RuntimeRequest {
    /// Every request, for the test that holds the Python side to them.
    pub const ALL: [RuntimeRequest; 9] = [
        Self::IsComplete,
        Self::Complete,
        Self::Inspect,
        Self::History,
        Self::CommInfo,
        Self::CommOpen,
        Self::CommMsg,
        Self::CommClose,
        Self::DebugpyListen,
    ];

    /// The request a shell message of `msg_type` makes, if the runtime
    /// serves it.
    pub fn of_message(msg_type: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|request| request.msg_type() == Some(msg_type))
    }

    /// The message type that asks for it (none: only the kernel does).
    pub const fn msg_type(self) -> Option<&'static str> {
        Some(match self {
            Self::IsComplete => "is_complete_request",
            Self::Complete => "complete_request",
            Self::Inspect => "inspect_request",
            Self::History => "history_request",
            Self::CommInfo => "comm_info_request",
            Self::CommOpen => "comm_open",
            Self::CommMsg => "comm_msg",
            Self::CommClose => "comm_close",
            Self::DebugpyListen => return None,
        })
    }

    /// The runtime method that serves it.
    pub const fn method(self) -> &'static str {
        match self {
            Self::IsComplete => "do_is_complete",
            Self::Complete => "do_complete",
            Self::Inspect => "do_inspect",
            Self::History => "do_history",
            Self::CommInfo => "do_comm_info",
            Self::CommOpen => "do_comm_open",
            Self::CommMsg => "do_comm_msg",
            Self::CommClose => "do_comm_close",
            Self::DebugpyListen => "do_debugpy_listen",
        }
    }

    /// Whether it is answered with a reply. Comm messages are not requests:
    /// their method gets the whole message and nothing replies.
    pub const fn replies(self) -> bool {
        !matches!(self, Self::CommOpen | Self::CommMsg | Self::CommClose)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_is_a_method_of_the_python_runtime() {
        for request in RuntimeRequest::ALL {
            let method = request.method();
            assert!(
                crate::python::sources::defines(&format!("def {method}(self")),
                "no runtime module defines {method}"
            );
        }
    }

    #[test]
    fn a_message_type_names_its_request_and_nothing_else_does() {
        assert_eq!(
            RuntimeRequest::of_message("complete_request"),
            Some(RuntimeRequest::Complete)
        );
        assert_eq!(
            RuntimeRequest::of_message("comm_msg"),
            Some(RuntimeRequest::CommMsg)
        );
        for other in [
            "execute_request",
            "do_complete",
            "debugpy_listen_request",
            "",
        ] {
            assert_eq!(RuntimeRequest::of_message(other), None, "{other}");
        }
        assert!(RuntimeRequest::Complete.replies() && !RuntimeRequest::CommOpen.replies());
    }
}
