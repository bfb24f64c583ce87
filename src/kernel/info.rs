//! The kernel_info_reply content: who this kernel is and the language it runs,
//! described exactly as ipykernel describes Python so that frontends pick the
//! same highlighting, export format and console lexer.

use jupyter_protocol::{CodeMirrorMode, HelpLink, KernelInfoReply, LanguageInfo, ReplyStatus};
use serde_json::Value;

use crate::wire::PROTOCOL_VERSION;

/// kernel_info_reply content for a kernel embedding Python
/// `python_version`, offering the debugger if `debugger`, its sockets
/// encrypted with CURVE if `encrypted`.
pub fn kernel_info(python_version: &str, debugger: bool, encrypted: bool) -> Value {
    let link = |text: &str, url: &str| HelpLink {
        text: text.into(),
        url: url.into(),
    };
    let reply = KernelInfoReply {
        status: ReplyStatus::Ok,
        protocol_version: PROTOCOL_VERSION.into(),
        implementation: "mahtab".into(),
        implementation_version: env!("CARGO_PKG_VERSION").into(),
        language_info: LanguageInfo {
            name: "python".into(),
            version: python_version.into(),
            mimetype: Some("text/x-python".into()),
            file_extension: Some(".py".into()),
            pygments_lexer: Some("ipython3".into()),
            codemirror_mode: Some(CodeMirrorMode::ipython_code_mirror_mode()),
            nbconvert_exporter: Some("python".into()),
        },
        banner: format!(
            "mahtab {} | Python {python_version}\nA cell starting with %%ask goes to the AI agent.\n",
            env!("CARGO_PKG_VERSION")
        ),
        help_links: vec![
            link("Python Reference", "https://docs.python.org/3/"),
            link("Python Tutorial", "https://docs.python.org/3/tutorial/"),
        ],
        debugger,
        error: None,
    };
    // Serialising plain structs cannot fail.
    let mut info = serde_json::to_value(reply).expect("kernel_info serialises");
    // JEP 92's list of optional features (the type predates it).
    let mut features = vec!["kernel subshells"];
    if debugger {
        features.push("debugger");
    }
    info["supported_features"] = serde_json::json!(features);
    // What the connection uses, in the kernelspec's `supported_encryption`
    // terms, so a client can tell an encrypted kernel from one in the clear.
    info["transport_encryption"] = if encrypted { "curve" } else { "none" }.into();
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_python_like_ipykernel() {
        let info = kernel_info("3.11.7", false, false);
        let language = &info["language_info"];
        assert_eq!(language["name"], "python");
        assert_eq!(language["version"], "3.11.7");
        assert_eq!(language["mimetype"], "text/x-python");
        assert_eq!(language["file_extension"], ".py");
        assert_eq!(language["pygments_lexer"], "ipython3");
        assert_eq!(language["nbconvert_exporter"], "python");
        assert_eq!(
            language["codemirror_mode"],
            serde_json::json!({"name": "ipython", "version": 3})
        );
        assert_eq!(info["status"], "ok");
        assert_eq!(info["implementation"], "mahtab");
        assert_eq!(info["debugger"], false);
        assert_eq!(
            info["supported_features"],
            serde_json::json!(["kernel subshells"])
        );
        assert_eq!(info["transport_encryption"], "none");
        let debugging = kernel_info("3.11.7", true, true);
        assert_eq!(debugging["transport_encryption"], "curve");
        assert_eq!(debugging["debugger"], true);
        assert_eq!(
            debugging["supported_features"],
            serde_json::json!(["kernel subshells", "debugger"])
        );
    }
}
