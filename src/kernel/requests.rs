//! Tolerant parsing of request contents.
//!
//! Clients omit fields that the spec gives defaults for (ipykernel reads them
//! with `.get(key, default)`), so only what a request cannot do without is
//! required; anything else falls back to the spec's default.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::python::RuntimeRequest;

/// Why a request's content cannot be used; becomes an error reply.
#[derive(Debug, thiserror::Error)]
#[error("invalid {msg_type} content: {reason}")]
pub struct BadContent {
    pub msg_type: String,
    pub reason: String,
}

fn parse<T: for<'de> Deserialize<'de>>(msg_type: &str, content: &Value) -> Result<T, BadContent> {
    if !content.is_object() {
        return Err(BadContent {
            msg_type: msg_type.into(),
            reason: "content is not a JSON object".into(),
        });
    }
    T::deserialize(content).map_err(|e| BadContent {
        msg_type: msg_type.into(),
        reason: e.to_string(),
    })
}

/// A shell or control request, parsed once: what it asks for.
#[derive(Debug, Clone)]
pub enum Request {
    /// Run a cell.
    Execute(ExecuteRequest),
    /// complete, inspect, is_complete, history, comm_info, and the comm
    /// messages (which nothing replies to): the Python runtime serves them.
    Runtime(RuntimeRequest),
    KernelInfo,
    /// Deprecated in the protocol, still sent by some clients.
    Connect,
    Interrupt,
    Shutdown(ShutdownRequest),
    /// A Debug Adapter Protocol request.
    Debug,
    CreateSubshell,
    DeleteSubshell,
    ListSubshell,
    /// A type the kernel does not serve.
    Unknown,
}

/// The channel a request came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Shell,
    Control,
}

impl Request {
    /// Whether serving it on control may wait for Python (to start the
    /// debugger, run what it asks, start or end a subshell's thread); such
    /// requests are served in their own order beside the others, so they
    /// never hold up an interrupt or a shutdown.
    pub fn waits_on_python(&self) -> bool {
        matches!(
            self,
            Request::Debug | Request::CreateSubshell | Request::DeleteSubshell
        )
    }

    /// What a message of `msg_type` with `content` asks for; content a
    /// request cannot use is an error (the reason goes in the error reply).
    pub fn parse(msg_type: &str, content: &Value) -> Result<Self, BadContent> {
        let object = || {
            if content.is_object() {
                Ok(())
            } else {
                Err(BadContent {
                    msg_type: msg_type.into(),
                    reason: "content is not a JSON object".into(),
                })
            }
        };
        if let Some(request) = RuntimeRequest::of_message(msg_type) {
            object()?;
            return Ok(Request::Runtime(request));
        }
        Ok(match msg_type {
            "execute_request" => Request::Execute(ExecuteRequest::parse(content)?),
            "kernel_info_request" => Request::KernelInfo,
            "connect_request" => Request::Connect,
            "interrupt_request" => Request::Interrupt,
            "shutdown_request" => Request::Shutdown(ShutdownRequest::parse(content)?),
            "debug_request" => Request::Debug,
            "create_subshell_request" => Request::CreateSubshell,
            "delete_subshell_request" => Request::DeleteSubshell,
            "list_subshell_request" => Request::ListSubshell,
            _ => Request::Unknown,
        })
    }

    /// Whether the kernel serves this request on `channel`: cells, Python's
    /// requests and comms on shell; the debugger and subshells on control;
    /// the rest on both.
    pub fn served_on(&self, channel: Channel) -> bool {
        match self {
            Request::Execute(_) | Request::Runtime(_) => channel == Channel::Shell,
            Request::Debug
            | Request::CreateSubshell
            | Request::DeleteSubshell
            | Request::ListSubshell => channel == Channel::Control,
            Request::KernelInfo | Request::Connect | Request::Interrupt | Request::Shutdown(_) => {
                true
            }
            Request::Unknown => false,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct ExecuteRequest {
    pub code: String,
    #[serde(default)]
    pub silent: bool,
    #[serde(default)]
    pub store_history: Option<bool>,
    #[serde(default)]
    pub user_expressions: Option<Map<String, Value>>,
    #[serde(default)]
    pub allow_stdin: bool,
    #[serde(default = "default_true")]
    pub stop_on_error: bool,
}

fn default_true() -> bool {
    true
}

impl ExecuteRequest {
    pub fn parse(content: &Value) -> Result<Self, BadContent> {
        parse("execute_request", content)
    }

    /// `store_history` defaults to `!silent`, and a silent cell never stores.
    pub fn stores_history(&self) -> bool {
        !self.silent && self.store_history.unwrap_or(true)
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ShutdownRequest {
    #[serde(default)]
    pub restart: bool,
}

impl ShutdownRequest {
    pub fn parse(content: &Value) -> Result<Self, BadContent> {
        parse("shutdown_request", content)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn execute_request_defaults_follow_the_spec() {
        let request = ExecuteRequest::parse(&json!({"code": "1"})).unwrap();
        assert!(!request.silent && request.stop_on_error && request.stores_history());
        let silent = ExecuteRequest::parse(&json!({"code": "1", "silent": true})).unwrap();
        assert!(!silent.stores_history());
        let no_history =
            ExecuteRequest::parse(&json!({"code": "1", "store_history": false})).unwrap();
        assert!(!no_history.stores_history());
    }

    #[test]
    fn requests_are_parsed_once_and_served_on_their_channels() {
        let parse = |msg_type: &str, content: Value| Request::parse(msg_type, &content);
        let execute = parse("execute_request", json!({"code": "1"})).unwrap();
        assert!(matches!(execute, Request::Execute(ref e) if e.code == "1"));
        assert!(execute.served_on(Channel::Shell) && !execute.served_on(Channel::Control));
        let debug = parse("debug_request", json!({})).unwrap();
        assert!(debug.served_on(Channel::Control) && !debug.served_on(Channel::Shell));
        let info = parse("kernel_info_request", json!({})).unwrap();
        assert!(info.served_on(Channel::Shell) && info.served_on(Channel::Control));
        assert!(matches!(
            parse("shutdown_request", json!({"restart": true})).unwrap(),
            Request::Shutdown(ShutdownRequest { restart: true })
        ));
        assert!(parse("complete_request", json!([])).is_err());
        assert!(parse("comm_msg", json!("text")).is_err());
        let odd = parse("odd_request", json!({})).unwrap();
        assert!(!odd.served_on(Channel::Shell) && !odd.served_on(Channel::Control));
    }

    #[test]
    fn missing_code_or_non_object_content_is_an_error() {
        assert!(ExecuteRequest::parse(&json!({"silent": false})).is_err());
        let err = ExecuteRequest::parse(&json!([1])).unwrap_err();
        assert!(err.to_string().contains("not a JSON object"));
    }
}
