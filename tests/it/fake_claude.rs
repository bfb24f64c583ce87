//! Stand-in `claude` executables: shell scripts that record how they were
//! called and print Claude Code's stream-json lines, found on the kernel's
//! PATH as an installed CLI would be.

use std::path::Path;

use serde_json::json;

/// Writes an executable shell script named `claude` into `dir`.
pub fn claude_script(dir: &Path, body: &str) {
    let path = dir.join("claude");
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    let mut permissions = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&path, permissions).unwrap();
}

/// The test's PATH with `dir` first.
pub fn path_with(dir: &Path) -> String {
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// A `claude` in `dir` whose `n`th call (from 1) streams `answers[n - 1]`
/// and records its standard input as `stdin.n`; calls past the list fail.
pub fn answering(dir: &Path, answers: &[&str]) {
    for (n, answer) in answers.iter().enumerate() {
        let delta = json!({
            "type": "stream_event",
            "event": {"type": "content_block_delta", "index": 0,
                      "delta": {"type": "text_delta", "text": answer}},
        });
        let result = json!({
            "type": "result", "subtype": "success", "is_error": false, "result": answer,
            "total_cost_usd": 0.001, "usage": {"input_tokens": 10, "output_tokens": 5},
        });
        std::fs::write(
            dir.join(format!("answer.{}", n + 1)),
            format!("{delta}\n{result}\n"),
        )
        .unwrap();
    }
    let at = dir.display();
    claude_script(
        dir,
        &format!(
            "n=$(($(ls '{at}' | grep -c '^stdin\\.') + 1))\n\
             cat > '{at}/stdin.'$n\n\
             [ -f '{at}/answer.'$n ] || {{ echo 'no answer scripted' >&2; exit 1; }}\n\
             cat '{at}/answer.'$n\n"
        ),
    );
}

/// What the `n`th call (from 1) of an [`answering`] CLI read on its
/// standard input.
pub fn stdin_of(dir: &Path, n: usize) -> String {
    std::fs::read_to_string(dir.join(format!("stdin.{n}"))).unwrap_or_default()
}
