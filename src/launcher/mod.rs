//! Running under Jupyter Enterprise Gateway: the gateway's kernel launcher
//! protocol, spoken by the binary itself (`mahtab launch`).
//!
//! The gateway starts the kernel on a remote host (over SSH) or in a pod,
//! passing a kernel id, the address to answer at, its RSA public key and the
//! port range the kernel may use. The kernel binds its five sockets and a
//! communication port in that range, sends the connection information,
//! sealed with the gateway's key ([`payload`]), to the response address, and
//! then serves Jupyter clients as usual; on the communication port it takes
//! the gateway's signal and shutdown requests ([`listener`]).

mod listener;
pub mod payload;

use std::path::PathBuf;
use std::str::FromStr;

use jupyter_protocol::{ConnectionInfo, Transport};
use rsa::rand_core::{OsRng, RngCore};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::kernel::{self, KernelError, Sockets};
use crate::python::PythonConfig;

/// Where the kernel's ports listen: every interface, since the gateway (and
/// through it, the clients) reach the kernel from another host.
const LISTEN_IP: &str = "0.0.0.0";

/// Settings of the agent that may come prefixed with `KERNEL_`: besides
/// the kernelspec's own environment, a gateway passes a kernel only the
/// variables a client sends whose names start with `KERNEL_` (and those on
/// its allow-lists), so `KERNEL_OPENAI_API_KEY` is how a Jupyter server's
/// user gets a key to a remote kernel.
const PROVIDER_VARIABLES: [&str; 3] = ["OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"];

/// The `NAME=value` settings to take from `KERNEL_NAME` variables among
/// `variables`: the agent's (`MAHTAB_*`) and the providers' keys, where
/// `NAME` itself is not set (a setting of the host wins).
pub fn kernel_prefixed_settings(
    variables: impl IntoIterator<Item = (String, String)>,
) -> Vec<(String, String)> {
    let variables: Vec<(String, String)> = variables.into_iter().collect();
    let is_set = |name: &str| variables.iter().any(|(set, _)| set == name);
    variables
        .iter()
        .filter_map(|(name, value)| {
            let name = name.strip_prefix("KERNEL_")?;
            let wanted = name.starts_with("MAHTAB_") || PROVIDER_VARIABLES.contains(&name);
            (wanted && !is_set(name)).then(|| (name.to_owned(), value.clone()))
        })
        .collect()
}

/// What the gateway passes a launcher.
#[derive(Debug, Clone)]
pub struct LaunchArgs {
    pub kernel_id: String,
    /// `ip:port` of the gateway's response listener.
    pub response_address: String,
    /// The gateway's RSA public key: base64 of its DER SubjectPublicKeyInfo.
    pub public_key: String,
    pub port_range: PortRange,
}

/// Why a launch failed.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error("no free port for the communication port in {range}: {source}")]
    CommPort {
        range: PortRange,
        source: std::io::Error,
    },
    #[error(transparent)]
    Seal(#[from] payload::SealError),
    #[error("cannot send the connection information to {address}: {source}")]
    Respond {
        address: String,
        source: std::io::Error,
    },
}

/// The ports the gateway lets the kernel use (`lower..upper`, both
/// included; `0..0`: any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    lower: u16,
    upper: u16,
}

impl PortRange {
    /// Any port the system picks.
    pub const ANY: Self = Self { lower: 0, upper: 0 };

    fn is_any(self) -> bool {
        self.lower == 0 && self.upper == 0
    }

    /// A port to try: a random one in the range (0, for the system to pick,
    /// when any will do).
    fn candidate(self) -> u16 {
        if self.is_any() {
            return 0;
        }
        let size = u32::from(self.upper - self.lower) + 1;
        // The remainder is below `size`, so the sum stays within the range.
        self.lower + (OsRng.next_u32() % size) as u16
    }

    /// Offers `retries` more candidates, after which binding gives up (as
    /// the gateway's own launchers do); none when any port will do, since
    /// the system then picks a free one.
    fn alternatives(self, mut retries: usize) -> impl FnMut() -> Option<u16> {
        move || {
            if self.is_any() || retries == 0 {
                return None;
            }
            retries -= 1;
            Some(self.candidate())
        }
    }
}

impl std::fmt::Display for PortRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}..{}", self.lower, self.upper)
    }
}

/// A `--port-range` the gateway should not have sent.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PortRangeError {
    #[error("a port range is written LOWER..UPPER, not {0:?}")]
    Form(String),
    #[error("the port range {0} has fewer than {1} ports (EG_MIN_PORT_RANGE_SIZE)")]
    TooSmall(String, u32),
}

impl FromStr for PortRange {
    type Err = PortRangeError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let form = || PortRangeError::Form(text.to_owned());
        let (lower, upper) = text.trim().split_once("..").ok_or_else(form)?;
        let lower: u16 = lower.trim().parse().map_err(|_| form())?;
        let upper: u16 = upper.trim().parse().map_err(|_| form())?;
        if upper < lower {
            return Err(form());
        }
        let range = Self { lower, upper };
        let minimum = env_number("EG_MIN_PORT_RANGE_SIZE", 1000);
        if !range.is_any() && u32::from(upper - lower) < minimum {
            return Err(PortRangeError::TooSmall(text.to_owned(), minimum));
        }
        Ok(range)
    }
}

fn env_number(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(default)
}

/// What the gateway learns of a launched kernel: where its sockets are, its
/// key, and how to reach the launcher (process ids, communication port).
#[derive(Debug, serde::Serialize)]
struct LaunchRecord<'a> {
    shell_port: u16,
    iopub_port: u16,
    stdin_port: u16,
    control_port: u16,
    hb_port: u16,
    ip: &'a str,
    key: &'a str,
    transport: &'static str,
    signature_scheme: &'a str,
    kernel_name: &'static str,
    pid: i32,
    pgid: i32,
    comm_port: u16,
    kernel_id: &'a str,
}

/// Binds the kernel's ports in the gateway's range, tells the gateway where
/// they are, and serves until a shutdown_request.
pub async fn launch(args: LaunchArgs, python: PythonConfig) -> Result<(), LaunchError> {
    let range = args.port_range;
    let retries = env_number("EG_MAX_PORT_RANGE_RETRIES", 5) as usize;
    let wanted = ConnectionInfo {
        ip: LISTEN_IP.to_owned(),
        transport: Transport::TCP,
        shell_port: range.candidate(),
        iopub_port: range.candidate(),
        stdin_port: range.candidate(),
        control_port: range.candidate(),
        hb_port: range.candidate(),
        key: uuid::Uuid::new_v4().to_string(),
        signature_scheme: "hmac-sha256".to_owned(),
        kernel_name: None,
    };
    // The five sockets share the retries the gateway's launchers give five
    // ports, one by one.
    let sockets = Sockets::bind_choosing(wanted, range.alternatives(5 * retries)).await?;
    let comm = bind_comm_port(range, retries).await?;
    let comm_port = comm.local_addr().map(|a| a.port()).unwrap_or_default();

    let connection = sockets.connection();
    // SAFETY: getpid and getpgid have no preconditions.
    let (pid, pgid) = unsafe { (libc::getpid(), libc::getpgid(0)) };
    let record = LaunchRecord {
        shell_port: connection.shell_port,
        iopub_port: connection.iopub_port,
        stdin_port: connection.stdin_port,
        control_port: connection.control_port,
        hb_port: connection.hb_port,
        ip: &connection.ip,
        key: &connection.key,
        transport: "tcp",
        signature_scheme: &connection.signature_scheme,
        kernel_name: "",
        pid,
        pgid,
        comm_port,
        kernel_id: &args.kernel_id,
    };
    let sealed = payload::seal(&record, &args.public_key)?;
    respond(&args.response_address, &sealed).await?;
    let connection_file = write_connection_file(&args.kernel_id, connection);
    tracing::info!(
        "launched for the gateway: kernel {} on ports {}..., communication port {comm_port}",
        args.kernel_id,
        connection.shell_port
    );

    let stop = CancellationToken::new();
    let gateway = listener::Allowed::gateway_at(&args.response_address).await;
    let listening = tokio::spawn(listener::serve(comm, gateway, stop.clone()));
    let python = PythonConfig {
        connection_file: connection_file.clone().or(python.connection_file),
        ..python
    };
    let served = kernel::serve_until(sockets, python, stop).await;
    listening.abort();
    if let Some(path) = connection_file {
        let _ = std::fs::remove_file(path);
    }
    Ok(served?)
}

/// The communication port's listener, in the range like the kernel's ports.
async fn bind_comm_port(range: PortRange, retries: usize) -> Result<TcpListener, LaunchError> {
    let mut tries = 0;
    loop {
        match TcpListener::bind((LISTEN_IP, range.candidate())).await {
            Ok(listener) => return Ok(listener),
            Err(source) if range.is_any() || tries >= retries => {
                return Err(LaunchError::CommPort { range, source });
            }
            Err(_) => tries += 1,
        }
    }
}

/// Sends the sealed record to the gateway, which reads to the end of the
/// connection and answers nothing.
async fn respond(address: &str, sealed: &[u8]) -> Result<(), LaunchError> {
    let failed = |source| LaunchError::Respond {
        address: address.to_owned(),
        source,
    };
    let mut stream = TcpStream::connect(address).await.map_err(failed)?;
    stream.write_all(sealed).await.map_err(failed)?;
    stream.shutdown().await.map_err(failed)
}

/// Writes the connection information where tools on the kernel's host find
/// it (`%connect_info`, `jupyter console --existing kernel-<id>.json`): the
/// Jupyter runtime directory, as ipykernel does. The file holds the HMAC key,
/// so it is made new (never through a link, never over another file),
/// readable by the owner only, in a directory only the owner may use.
/// `None` if it cannot be.
fn write_connection_file(kernel_id: &str, connection: &ConnectionInfo) -> Option<PathBuf> {
    let safe_id: String = kernel_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    let text = serde_json::to_string_pretty(connection).ok()?;
    let written = crate::install::runtime_dir().and_then(|dir| {
        crate::private_files::private_dir(&dir)?;
        let path = dir.join(format!("kernel-{safe_id}.json"));
        crate::private_files::create_new(&path, text.as_bytes())?;
        Ok(path)
    });
    match written {
        Ok(path) => Some(path),
        Err(e) => {
            tracing::warn!("cannot write the connection file: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_ranges_parse_as_the_gateway_writes_them() {
        assert_eq!("0..0".parse::<PortRange>(), Ok(PortRange::ANY));
        let range: PortRange = "40000..41000".parse().unwrap();
        assert_eq!(range.to_string(), "40000..41000");
        for _ in 0..100 {
            let port = range.candidate();
            assert!((40000..=41000).contains(&port), "{port}");
        }
        assert!(matches!(
            "40000-41000".parse::<PortRange>(),
            Err(PortRangeError::Form(_))
        ));
        assert!(matches!(
            "41000..40000".parse::<PortRange>(),
            Err(PortRangeError::Form(_))
        ));
        assert!(matches!(
            "40000..40010".parse::<PortRange>(),
            Err(PortRangeError::TooSmall(_, 1000))
        ));
    }

    #[test]
    fn agent_settings_come_from_kernel_prefixed_variables_unless_set() {
        let variables = [
            ("KERNEL_MAHTAB_MODEL", "small"),
            ("KERNEL_OPENAI_API_KEY", "sk-from-client"),
            ("KERNEL_OPENAI_BASE_URL", "http://client"),
            ("OPENAI_BASE_URL", "http://host"),
            ("KERNEL_USERNAME", "alice"),
            ("KERNEL_HOME", "/elsewhere"),
        ]
        .map(|(name, value)| (name.to_owned(), value.to_owned()));
        let mut settings = kernel_prefixed_settings(variables);
        settings.sort();
        assert_eq!(
            settings,
            [
                ("MAHTAB_MODEL".to_owned(), "small".to_owned()),
                ("OPENAI_API_KEY".to_owned(), "sk-from-client".to_owned()),
            ]
        );
    }

    #[test]
    fn any_port_needs_no_alternatives_and_a_range_offers_its_retries() {
        assert_eq!(PortRange::ANY.candidate(), 0);
        assert_eq!(PortRange::ANY.alternatives(5)(), None);
        let range: PortRange = "40000..41000".parse().unwrap();
        let mut alternatives = range.alternatives(2);
        assert!(alternatives().is_some());
        assert!(alternatives().is_some());
        assert_eq!(alternatives(), None);
    }
}
