//! Tolerant parsing of request contents.
//!
//! Clients omit fields that the spec gives defaults for (ipykernel reads them
//! with `.get(key, default)`), so only what a request cannot do without is
//! required; anything else falls back to the spec's default.

use serde::Deserialize;
use serde_json::{Map, Value};

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
    fn missing_code_or_non_object_content_is_an_error() {
        assert!(ExecuteRequest::parse(&json!({"silent": false})).is_err());
        let err = ExecuteRequest::parse(&json!([1])).unwrap_err();
        assert!(err.to_string().contains("not a JSON object"));
    }
}
