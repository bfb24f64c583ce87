//! Writing and removing the `mahtab` kernelspec.
//!
//! The kernelspec records the absolute path of this binary and of the Python
//! environment's interpreter chosen at install time; the kernel embeds that
//! environment (its site-packages import, `sys.executable` names its python),
//! so `pip install` from a cell lands where `import` finds it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use serde_json::Value;

const KERNEL_JSON_TEMPLATE: &str = include_str!("../kernelspec/kernel.json");
const LOGOS: [(&str, &[u8]); 3] = [
    (
        "logo-32x32.png",
        include_bytes!("../kernelspec/logo-32x32.png"),
    ),
    (
        "logo-64x64.png",
        include_bytes!("../kernelspec/logo-64x64.png"),
    ),
    ("logo-svg.svg", include_bytes!("../kernelspec/logo-svg.svg")),
];

/// The Python version (major.minor) this binary was built against.
pub const BUILD_PYTHON_VERSION: &str = env!("MAHTAB_BUILD_PYTHON");

/// Where kernelspecs go, as in `jupyter kernelspec install`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// The user's Jupyter data directory.
    User,
    /// `share/jupyter/kernels` under the Python environment's `sys.prefix`.
    SysPrefix,
    /// `share/jupyter/kernels` under the given prefix.
    Prefix(PathBuf),
}

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("cannot run {python}: {source}")]
    PythonNotRunnable {
        python: String,
        source: std::io::Error,
    },
    #[error("{python} did not describe itself: {detail}")]
    PythonProbe { python: String, detail: String },
    #[error(
        "{python} is Python {found}, but this mahtab was built for Python {BUILD_PYTHON_VERSION}; \
         choose a Python {BUILD_PYTHON_VERSION} environment with --python, or rebuild mahtab with \
         PYO3_PYTHON pointing at the Python you want"
    )]
    VersionMismatch { python: String, found: String },
    #[error("invalid kernel name {0:?}: use ASCII letters, digits, '-', '.' and '_'")]
    BadName(String),
    #[error("cannot find the user's home directory (HOME is not set)")]
    NoHome,
    #[error("{python} has no mahtab package: pip install mahtab in that environment first")]
    NoModule { python: String },
    #[error("no kernelspec {name:?} in {dir}")]
    NotInstalled { name: String, dir: PathBuf },
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// How this process came to run mahtab, and so how its kernelspecs start
/// the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launcher {
    /// The `mahtab` binary, which starts CPython on a thread of its own.
    Binary,
    /// `python -m mahtab` (the wheel's extension module): the hosting
    /// interpreter's main thread runs the cells, and the kernel's channels
    /// run on a thread beside it. `python` is its `sys.executable`.
    PythonModule { python: PathBuf },
}

/// A Python environment as it describes itself.
#[derive(Debug, Clone, Deserialize)]
pub struct PythonEnv {
    /// `sys.executable`: the environment's own interpreter path (a venv's
    /// `bin/python`, not the base interpreter it links to).
    pub executable: PathBuf,
    pub prefix: PathBuf,
    /// major.minor, e.g. "3.11".
    pub version: String,
    /// Whether debugpy is installed there (the kernel's debugger drives it).
    #[serde(default)]
    pub debugpy: bool,
    /// Whether the `mahtab` package (the wheel) is installed there.
    #[serde(default)]
    pub has_mahtab: bool,
}

impl PythonEnv {
    /// Asks `python` (a path or a command on PATH) about itself.
    pub fn probe(python: &Path) -> Result<Self, InstallError> {
        let name = python.display().to_string();
        let output = Command::new(python)
            .args([
                "-c",
                "import json, sys, importlib.util; print(json.dumps({'executable': sys.executable, \
                 'prefix': sys.prefix, 'version': '%d.%d' % sys.version_info[:2], \
                 'debugpy': importlib.util.find_spec('debugpy') is not None, \
                 'has_mahtab': importlib.util.find_spec('mahtab') is not None}))",
            ])
            .output()
            .map_err(|source| InstallError::PythonNotRunnable {
                python: name.clone(),
                source,
            })?;
        if !output.status.success() {
            return Err(InstallError::PythonProbe {
                python: name,
                detail: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            });
        }
        serde_json::from_slice(&output.stdout).map_err(|e| InstallError::PythonProbe {
            python: name,
            detail: e.to_string(),
        })
    }

    /// Fails unless this environment's Python matches the one mahtab embeds.
    pub fn check_version(&self) -> Result<(), InstallError> {
        if self.version == BUILD_PYTHON_VERSION {
            Ok(())
        } else {
            Err(InstallError::VersionMismatch {
                python: self.executable.display().to_string(),
                found: self.version.clone(),
            })
        }
    }
}

/// What to install.
#[derive(Debug, Clone)]
pub struct InstallOptions {
    pub location: Location,
    pub name: String,
    pub display_name: String,
    /// The Python environment to run cells in; when `None`, `python3` on
    /// PATH for the binary, the hosting interpreter for the module.
    pub python: Option<PathBuf>,
    /// A kernelspec for Jupyter Enterprise Gateway rather than for a local
    /// Jupyter client.
    pub gateway: Option<Gateway>,
    /// What the kernelspec starts: this binary, or the Python module.
    pub launcher: Launcher,
}

/// How Enterprise Gateway starts the kernel (its "process proxy").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gateway {
    /// On one of the gateway's remote hosts, over SSH (or directly when the
    /// host is the gateway's own); the binary and the Python environment
    /// must be at the same paths on every host.
    Distributed,
    /// In a Kubernetes pod running `image` (built from
    /// kernelspec/kubernetes/Dockerfile), which the gateway creates with its
    /// own launcher and pod template, copied from `launcher_scripts` (its
    /// etc/kernel-launchers/kubernetes/scripts).
    Kubernetes {
        image: String,
        launcher_scripts: PathBuf,
    },
}

/// The files of Enterprise Gateway's Kubernetes launcher a kernelspec
/// carries in its `scripts` folder.
const KUBERNETES_LAUNCHER_FILES: [&str; 2] = ["launch_kubernetes.py", "kernel-pod.yaml.j2"];

impl Gateway {
    fn process_proxy(&self) -> &'static str {
        match self {
            Gateway::Distributed => {
                "enterprise_gateway.services.processproxies.distributed.DistributedProcessProxy"
            }
            Gateway::Kubernetes { .. } => {
                "enterprise_gateway.services.processproxies.k8s.KubernetesProcessProxy"
            }
        }
    }
}

/// Turns a local kernelspec into one Enterprise Gateway starts through
/// `gateway`'s process proxy. Distributed: the kernel is started by `mahtab
/// launch` with the arguments the gateway fills in, instead of a connection
/// file. Kubernetes: the gateway runs its own launcher from the kernelspec's
/// folder `dir`, which creates the kernel's pod; the image's command is
/// `mahtab launch`, which reads the same arguments from the pod's
/// environment.
pub fn gateway_kernel_json(mut spec: Value, gateway: &Gateway, dir: &Path) -> Value {
    if let Gateway::Kubernetes { image, .. } = gateway {
        let launcher = dir.join("scripts").join(KUBERNETES_LAUNCHER_FILES[0]);
        let mut argv = vec![
            Value::String("python".into()),
            Value::String(launcher.display().to_string()),
        ];
        for (option, placeholder) in [
            ("kernel-id", "{kernel_id}"),
            ("port-range", "{port_range}"),
            ("response-address", "{response_address}"),
            ("public-key", "{public_key}"),
        ] {
            argv.push(Value::String(format!("--RemoteProcessProxy.{option}")));
            argv.push(Value::String(placeholder.into()));
        }
        spec["argv"] = Value::Array(argv);
        spec["metadata"]["process_proxy"] = serde_json::json!({
            "class_name": gateway.process_proxy(),
            "config": { "image_name": image },
        });
        // The image has debugpy and starts the kernel with --debugger.
        spec["metadata"]["debugger"] = Value::Bool(true);
        return spec;
    }
    if let Some(argv) = spec["argv"].as_array_mut() {
        for arg in argv.iter_mut() {
            if arg == "kernel" {
                *arg = Value::String("launch".into());
                break;
            }
        }
        argv.retain(|arg| arg != "-f" && arg != "{connection_file}");
        for (option, placeholder) in [
            ("--kernel-id", "{kernel_id}"),
            ("--response-address", "{response_address}"),
            ("--public-key", "{public_key}"),
            ("--port-range", "{port_range}"),
        ] {
            argv.push(Value::String(option.into()));
            argv.push(Value::String(placeholder.into()));
        }
    }
    spec["metadata"]["process_proxy"] =
        serde_json::json!({ "class_name": gateway.process_proxy() });
    spec
}

/// The kernels directory for `location`.
pub fn kernels_dir(location: &Location, env: Option<&PythonEnv>) -> Result<PathBuf, InstallError> {
    Ok(match location {
        Location::User => user_data_dir()?.join("kernels"),
        Location::SysPrefix => {
            let prefix = match env {
                Some(env) => env.prefix.clone(),
                None => PythonEnv::probe(Path::new("python3"))?.prefix,
            };
            prefix.join("share/jupyter/kernels")
        }
        Location::Prefix(prefix) => prefix.join("share/jupyter/kernels"),
    })
}

/// Jupyter's per-user data directory, as jupyter_core finds it on Linux.
pub(crate) fn user_data_dir() -> Result<PathBuf, InstallError> {
    if let Some(dir) = std::env::var_os("JUPYTER_DATA_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(xdg).join("jupyter"));
    }
    let home = std::env::var_os("HOME").ok_or(InstallError::NoHome)?;
    Ok(PathBuf::from(home).join(".local/share/jupyter"))
}

/// Jupyter's runtime directory (connection files and the like), as
/// jupyter_core finds it on Linux.
pub(crate) fn runtime_dir() -> std::io::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("JUPYTER_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    user_data_dir()
        .map(|data| data.join("runtime"))
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::NotFound, e.to_string()))
}

fn check_name(name: &str) -> Result<(), InstallError> {
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
    if valid {
        Ok(())
    } else {
        Err(InstallError::BadName(name.to_owned()))
    }
}

/// The kernel.json content for this binary and environment.
///
/// `interrupt_mode` is `signal`, as ipykernel's: jupyter_client's
/// `KernelManager` sends an `interrupt_request` from a session whose id its
/// clients share and whose message ids they count afresh, so in message mode
/// an interrupt's busy/idle can carry the id of a later cell and a client
/// waiting for that cell's idle stops before its output. The kernel still
/// serves `interrupt_request` for clients that send one.
///
/// With `debugger` (the environment has debugpy) the kernel is started with
/// `--debugger` and the spec's metadata says so, which is what JupyterLab
/// reads to offer its debugger.
pub fn kernel_json(mahtab: &Path, python: &Path, display_name: &str, debugger: bool) -> Value {
    let mut spec: Value =
        serde_json::from_str(KERNEL_JSON_TEMPLATE).expect("kernelspec/kernel.json is valid JSON");
    if let Some(argv) = spec["argv"].as_array_mut() {
        for arg in argv {
            let replacement = match arg.as_str() {
                Some("{mahtab}") => mahtab.display().to_string(),
                Some("{python}") => python.display().to_string(),
                _ => continue,
            };
            *arg = Value::String(replacement);
        }
    }
    spec["display_name"] = Value::String(display_name.to_owned());
    spec["metadata"]["debugger"] = Value::Bool(debugger);
    if debugger && let Some(argv) = spec["argv"].as_array_mut() {
        argv.insert(2, Value::String("--debugger".into()));
    }
    spec
}

/// The kernelspec of a kernel started as `python -m mahtab` (the wheel's):
/// the environment's own interpreter runs the kernel module.
pub fn module_kernel_json(python: &Path, display_name: &str, debugger: bool) -> Value {
    let mut spec = kernel_json(Path::new("mahtab"), python, display_name, debugger);
    let python = python.display().to_string();
    let mut argv = vec![python.as_str(), "-m", "mahtab", "kernel"];
    if debugger {
        argv.push("--debugger");
    }
    argv.extend(["-f", "{connection_file}"]);
    spec["argv"] = serde_json::json!(argv);
    spec
}

/// Installs the kernelspec; returns its directory.
pub fn install(options: &InstallOptions) -> Result<PathBuf, InstallError> {
    check_name(&options.name)?;
    let python = match (&options.python, &options.launcher) {
        (Some(python), _) => python.as_path(),
        (None, Launcher::PythonModule { python }) => python.as_path(),
        (None, Launcher::Binary) => Path::new("python3"),
    };
    let env = PythonEnv::probe(python)?;
    let mut spec = match &options.launcher {
        Launcher::Binary => {
            env.check_version()?;
            let mahtab = std::env::current_exe().map_err(|source| InstallError::Io {
                action: "cannot locate",
                path: PathBuf::from("the mahtab binary"),
                source,
            })?;
            kernel_json(&mahtab, &env.executable, &options.display_name, env.debugpy)
        }
        Launcher::PythonModule { .. } => {
            if !env.has_mahtab {
                return Err(InstallError::NoModule {
                    python: env.executable.display().to_string(),
                });
            }
            module_kernel_json(&env.executable, &options.display_name, env.debugpy)
        }
    };
    let dir = kernels_dir(&options.location, Some(&env))?.join(&options.name);
    if let Some(gateway) = &options.gateway {
        spec = gateway_kernel_json(spec, gateway, &dir);
    }

    let io = |action, path: &Path| {
        let path = path.to_owned();
        move |source| InstallError::Io {
            action,
            path,
            source,
        }
    };
    std::fs::create_dir_all(&dir).map_err(io("cannot create", &dir))?;
    let json_path = dir.join("kernel.json");
    let text = serde_json::to_string_pretty(&spec).expect("JSON values serialise") + "\n";
    std::fs::write(&json_path, text).map_err(io("cannot write", &json_path))?;
    for (name, bytes) in LOGOS {
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(io("cannot write", &path))?;
    }
    if let Some(Gateway::Kubernetes {
        launcher_scripts, ..
    }) = &options.gateway
    {
        let scripts = dir.join("scripts");
        std::fs::create_dir_all(&scripts).map_err(io("cannot create", &scripts))?;
        for name in KUBERNETES_LAUNCHER_FILES {
            let from = launcher_scripts.join(name);
            std::fs::copy(&from, scripts.join(name)).map_err(io("cannot copy", &from))?;
        }
    }
    Ok(dir)
}

/// Removes the kernelspec `name`; returns the removed directory.
pub fn uninstall(
    location: &Location,
    name: &str,
    python: Option<&Path>,
) -> Result<PathBuf, InstallError> {
    check_name(name)?;
    let env = match (location, python) {
        (Location::SysPrefix, Some(python)) => Some(PythonEnv::probe(python)?),
        _ => None,
    };
    let dir = kernels_dir(location, env.as_ref())?.join(name);
    if !dir.join("kernel.json").is_file() {
        return Err(InstallError::NotInstalled {
            name: name.to_owned(),
            dir: dir.parent().map(Path::to_owned).unwrap_or_default(),
        });
    }
    std::fs::remove_dir_all(&dir).map_err(|source| InstallError::Io {
        action: "cannot remove",
        path: dir.clone(),
        source,
    })?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wheels_kernelspec_is_the_module_kernelspec_of_its_python() {
        // pip installs kernelspec/wheel's data as it is; `python` there is
        // what jupyter_client replaces with its own interpreter.
        let path = "kernelspec/wheel/data/share/jupyter/kernels/mahtab/kernel.json";
        let text =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap();
        let shipped: Value = serde_json::from_str(&text).unwrap();
        let spec = module_kernel_json(Path::new("python"), "Mahtab (Python + AI)", true);
        assert_eq!(shipped, spec);
        assert_eq!(spec["argv"][0], "python");
        assert_eq!(spec["argv"][3], "kernel");
    }

    #[test]
    fn a_gateway_starts_the_module_with_launch() {
        let spec = module_kernel_json(Path::new("/env/bin/python"), "M", false);
        let gateway = gateway_kernel_json(spec, &Gateway::Distributed, Path::new("/k"));
        let argv: Vec<&str> = gateway["argv"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(argv[..4], ["/env/bin/python", "-m", "mahtab", "launch"]);
        assert!(!argv.contains(&"{connection_file}"));
    }

    #[test]
    fn kernel_json_names_binary_and_python_and_never_python3() {
        let spec = kernel_json(
            Path::new("/opt/mahtab"),
            Path::new("/env/bin/python"),
            "Mahtab (Python + AI)",
            false,
        );
        assert_eq!(
            spec["argv"],
            serde_json::json!([
                "/opt/mahtab",
                "kernel",
                "--python",
                "/env/bin/python",
                "-f",
                "{connection_file}"
            ])
        );
        assert_eq!(spec["language"], "python");
        assert_eq!(spec["interrupt_mode"], "signal");
        assert_ne!(spec["display_name"], "Python 3");
        assert_eq!(spec["metadata"]["debugger"], false);
        let with_debugpy = kernel_json(Path::new("/m"), Path::new("/p"), "M", true);
        assert_eq!(with_debugpy["metadata"]["debugger"], true);
        assert_eq!(with_debugpy["argv"][2], "--debugger");
        // jupyter_client provisions CURVE keys for a spec that says it
        // takes them, and reads the protocol version from the spec.
        assert_eq!(
            spec["metadata"]["supported_encryption"],
            serde_json::json!(["curve"])
        );
        assert_eq!(
            spec["kernel_protocol_version"],
            crate::wire::PROTOCOL_VERSION
        );
        let wheel: Value = serde_json::from_str(include_str!(
            "../kernelspec/wheel/data/share/jupyter/kernels/mahtab/kernel.json"
        ))
        .unwrap();
        assert_eq!(
            wheel["metadata"]["supported_encryption"],
            serde_json::json!(["curve"])
        );
        assert_eq!(
            wheel["kernel_protocol_version"],
            crate::wire::PROTOCOL_VERSION
        );
    }

    #[test]
    fn a_gateway_kernelspec_launches_with_the_gateways_arguments() {
        let local = kernel_json(Path::new("/opt/mahtab"), Path::new("/p"), "M", true);
        let spec = gateway_kernel_json(local, &Gateway::Distributed, Path::new("/k"));
        assert_eq!(
            spec["argv"],
            serde_json::json!([
                "/opt/mahtab",
                "launch",
                "--debugger",
                "--python",
                "/p",
                "--kernel-id",
                "{kernel_id}",
                "--response-address",
                "{response_address}",
                "--public-key",
                "{public_key}",
                "--port-range",
                "{port_range}"
            ])
        );
        assert_eq!(
            spec["metadata"]["process_proxy"]["class_name"],
            "enterprise_gateway.services.processproxies.distributed.DistributedProcessProxy"
        );
        assert_eq!(spec["metadata"]["debugger"], true);
    }

    #[test]
    fn a_kubernetes_kernelspec_runs_the_gateways_launcher_for_the_image() {
        let local = kernel_json(Path::new("/opt/mahtab"), Path::new("/p"), "M", false);
        let gateway = Gateway::Kubernetes {
            image: "registry.example/mahtab:1".into(),
            launcher_scripts: PathBuf::from("/eg/scripts"),
        };
        let spec = gateway_kernel_json(local, &gateway, Path::new("/kernels/mahtab_kubernetes"));
        assert_eq!(spec["argv"][0], "python");
        assert_eq!(
            spec["argv"][1],
            "/kernels/mahtab_kubernetes/scripts/launch_kubernetes.py"
        );
        assert!(
            spec["argv"]
                .as_array()
                .unwrap()
                .contains(&"{public_key}".into())
        );
        let proxy = &spec["metadata"]["process_proxy"];
        assert_eq!(
            proxy["class_name"],
            "enterprise_gateway.services.processproxies.k8s.KubernetesProcessProxy"
        );
        assert_eq!(proxy["config"]["image_name"], "registry.example/mahtab:1");
        assert_eq!(spec["language"], "python");
    }

    #[test]
    fn kernel_names_are_checked() {
        assert!(check_name("mahtab").is_ok());
        assert!(check_name("mahtab-dev_1.0").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("../evil").is_err());
    }
}
