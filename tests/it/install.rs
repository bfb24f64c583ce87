//! `mahtab install` / `uninstall` / `--version` as a user runs them.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::{TempDir, mahtab_binary};

fn mahtab(args: &[&str]) -> Output {
    Command::new(mahtab_binary())
        .args(args)
        .output()
        .expect("run mahtab")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The Python the tests embed: the configured environment, else python3.
fn test_python() -> String {
    std::env::var("MAHTAB_TEST_PYTHON").unwrap_or_else(|_| "python3".into())
}

#[test]
fn version_is_printed() {
    let out = mahtab(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        text(&out.stdout).trim(),
        format!("mahtab {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn install_writes_a_kernelspec_and_uninstall_removes_it() {
    let prefix = TempDir::new("install");
    let prefix_arg = prefix.0.to_str().unwrap();
    let python = test_python();
    let out = mahtab(&[
        "install",
        "--prefix",
        prefix_arg,
        "--python",
        &python,
        "--name",
        "mahtab-test",
        "--display-name",
        "Mahtab Test",
    ]);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let dir = prefix.0.join("share/jupyter/kernels/mahtab-test");
    let spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("kernel.json")).unwrap()).unwrap();
    let mut argv: Vec<&str> = spec["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    // The debugger is offered when, and only when, the environment has debugpy.
    let has_debugpy = std::process::Command::new(&python)
        .args(["-c", "import debugpy"])
        .output()
        .unwrap()
        .status
        .success();
    assert_eq!(spec["metadata"]["debugger"], has_debugpy);
    assert_eq!(argv.get(2) == Some(&"--debugger"), has_debugpy, "{argv:?}");
    if has_debugpy {
        argv.remove(2);
    }
    assert_eq!(argv[0], mahtab_binary());
    assert!(Path::new(argv[0]).is_absolute());
    assert_eq!(argv[1..3], ["kernel", "--python"]);
    assert!(
        Path::new(argv[3]).is_absolute(),
        "python path is absolute: {}",
        argv[3]
    );
    assert_eq!(argv[4..], ["-f", "{connection_file}"]);
    assert_eq!(spec["display_name"], "Mahtab Test");
    assert_eq!(spec["language"], "python");
    assert_eq!(spec["interrupt_mode"], "signal");
    for logo in ["logo-32x32.png", "logo-64x64.png", "logo-svg.svg"] {
        assert!(dir.join(logo).is_file(), "{logo} installed");
    }

    let out = mahtab(&["uninstall", "--prefix", prefix_arg, "--name", "mahtab-test"]);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert!(!dir.exists());
    let again = mahtab(&["uninstall", "--prefix", prefix_arg, "--name", "mahtab-test"]);
    assert!(!again.status.success());
    assert!(text(&again.stderr).contains("no kernelspec"));
}

#[test]
fn install_refuses_a_python_of_another_version() {
    let dir = TempDir::new("oldpython");
    let fake = dir.0.join("python");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho '{\"executable\": \"/old/bin/python\", \"prefix\": \"/old\", \"version\": \"2.7\"}'\n",
    )
    .unwrap();
    let mut permissions = std::fs::metadata(&fake).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&fake, permissions).unwrap();

    let prefix = TempDir::new("noinstall");
    let out = mahtab(&[
        "install",
        "--prefix",
        prefix.0.to_str().unwrap(),
        "--python",
        fake.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("Python 2.7") && stderr.contains("built for Python 3."),
        "stderr: {stderr}"
    );
    assert!(!prefix.0.join("share").exists(), "nothing installed");
}

#[test]
fn install_rejects_bad_names_and_missing_pythons() {
    let prefix = TempDir::new("badname");
    let out = mahtab(&[
        "install",
        "--prefix",
        prefix.0.to_str().unwrap(),
        "--name",
        "../escape",
    ]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("invalid kernel name"));
    let out = mahtab(&[
        "install",
        "--prefix",
        prefix.0.to_str().unwrap(),
        "--python",
        "/nonexistent/python",
    ]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("cannot run /nonexistent/python"));
}
