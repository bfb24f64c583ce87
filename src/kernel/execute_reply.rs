//! The content of an `execute_reply`, for every way a cell ends: it ran
//! (`ok`), it raised (`error`, with the exception's fields), it was
//! skipped after an earlier failure (`aborted`), or its request could not
//! be read (an `error` of the kernel's own).

use serde::Serialize;
use serde_json::Value;

use crate::exception::PythonException;
use crate::python::ExecuteOutcome;

#[derive(Debug, Serialize)]
pub(super) struct ExecuteReply {
    status: &'static str,
    execution_count: u32,
    user_expressions: Value,
    payload: Vec<Value>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    error: Option<PythonException>,
}

impl ExecuteReply {
    /// How the cell counted `execution_count` ran.
    pub(super) fn ran(execution_count: u32, outcome: ExecuteOutcome) -> Self {
        Self {
            status: if outcome.error.is_some() {
                "error"
            } else {
                "ok"
            },
            execution_count,
            user_expressions: outcome.user_expressions,
            payload: outcome.payload,
            error: outcome.error,
        }
    }

    /// A cell skipped because one before it failed.
    pub(super) fn aborted(execution_count: u32) -> Self {
        Self {
            status: "aborted",
            ..Self::ran(execution_count, ExecuteOutcome::ok())
        }
    }

    /// A request whose content could not be read.
    pub(super) fn bad_request(execution_count: u32, why: String) -> Self {
        Self::ran(
            execution_count,
            ExecuteOutcome::failed(PythonException::new("BadRequest", why)),
        )
    }

    pub(super) fn failed(&self) -> bool {
        self.error.is_some()
    }

    pub(super) fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_ending_has_the_fields_the_protocol_asks_for() {
        assert_eq!(
            ExecuteReply::ran(3, ExecuteOutcome::ok()).to_json(),
            json!({"status": "ok", "execution_count": 3, "user_expressions": {}, "payload": []})
        );
        assert_eq!(
            ExecuteReply::aborted(4).to_json(),
            json!({"status": "aborted", "execution_count": 4, "user_expressions": {}, "payload": []})
        );
        assert_eq!(
            ExecuteReply::bad_request(5, "no code".into()).to_json(),
            json!({"status": "error", "execution_count": 5, "user_expressions": {}, "payload": [],
                   "ename": "BadRequest", "evalue": "no code", "traceback": []})
        );
        let failed = ExecuteOutcome {
            error: Some(PythonException {
                ename: "ZeroDivisionError".into(),
                evalue: "division by zero".into(),
                traceback: vec!["line 1".into()],
            }),
            user_expressions: json!({"x": {"status": "ok"}}),
            payload: vec![json!({"source": "page"})],
        };
        assert_eq!(
            ExecuteReply::ran(6, failed).to_json(),
            json!({"status": "error", "execution_count": 6,
                   "user_expressions": {"x": {"status": "ok"}}, "payload": [{"source": "page"}],
                   "ename": "ZeroDivisionError", "evalue": "division by zero",
                   "traceback": ["line 1"]})
        );
    }
}
