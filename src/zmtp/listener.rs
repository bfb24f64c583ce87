//! Listening sockets (TCP or Unix) and the loop that accepts their
//! connections, shared by the ROUTER and XPUB sockets.

use std::path::PathBuf;

use tokio::io::BufReader;
use tokio::net::{TcpListener, UnixListener};

use super::peer::{Mechanism, Reader, Writer};

/// The largest message a peer may send, all frames together; bigger ones
/// are read and dropped (and logged), and the connection goes on.
pub const MAX_MESSAGE_BYTES: u64 = crate::wire::MAX_MESSAGE_BYTES as u64;

/// Where a socket listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A TCP address (`*` means every interface) and port (0: one the system picks).
    Tcp(String, u16),
    /// A Unix socket's path.
    Ipc(PathBuf),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Tcp(ip, port) => write!(f, "tcp://{ip}:{port}"),
            Endpoint::Ipc(path) => write!(f, "ipc://{}", path.display()),
        }
    }
}

/// A bound listening socket.
pub struct Listener {
    kind: ListenerKind,
    /// The security its connections are made with.
    mechanism: Mechanism,
    /// The TCP port it got (the system's choice for port 0); 0 for ipc.
    pub port: u16,
}

enum ListenerKind {
    Tcp(TcpListener),
    Ipc(UnixListener, PathBuf),
}

impl Listener {
    /// Binds `endpoint`. As libzmq does, a Unix socket file left at the path
    /// by an earlier process is replaced.
    pub async fn bind(endpoint: &Endpoint) -> std::io::Result<Self> {
        match endpoint {
            Endpoint::Tcp(ip, port) => {
                let ip = if ip == "*" { "0.0.0.0" } else { ip.as_str() };
                let listener = TcpListener::bind((ip, *port)).await?;
                let port = listener.local_addr()?.port();
                Ok(Self {
                    kind: ListenerKind::Tcp(listener),
                    mechanism: Mechanism::Null,
                    port,
                })
            }
            Endpoint::Ipc(path) => {
                if std::fs::symlink_metadata(path)
                    .is_ok_and(|meta| std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()))
                {
                    let _ = std::fs::remove_file(path);
                }
                let listener = UnixListener::bind(path)?;
                Ok(Self {
                    kind: ListenerKind::Ipc(listener, path.clone()),
                    mechanism: Mechanism::Null,
                    port: 0,
                })
            }
        }
    }

    /// Makes every connection from now on with `mechanism`.
    pub fn secure(&mut self, mechanism: Mechanism) {
        self.mechanism = mechanism;
    }

    pub(super) fn mechanism(&self) -> &Mechanism {
        &self.mechanism
    }

    /// The next connection, as its two halves and a name for the log.
    async fn accept(&self) -> std::io::Result<(Reader, Writer, String)> {
        match &self.kind {
            ListenerKind::Tcp(listener) => {
                let (stream, address) = listener.accept().await?;
                // Messages are whole when written; Nagle would only delay them.
                stream.set_nodelay(true)?;
                let (read, write) = stream.into_split();
                Ok((
                    BufReader::new(Box::new(read)),
                    Box::new(write),
                    address.to_string(),
                ))
            }
            ListenerKind::Ipc(listener, path) => {
                let (stream, _) = listener.accept().await?;
                let (read, write) = stream.into_split();
                Ok((
                    BufReader::new(Box::new(read)),
                    Box::new(write),
                    path.display().to_string(),
                ))
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let ListenerKind::Ipc(_, path) = &self.kind {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Accepts connections on `listener` until the returned task is aborted,
/// handing each to `connected` on a task of its own (so a slow handshake
/// holds up nobody).
pub(super) fn accept_loop<F, Fut>(
    listener: Listener,
    name: &'static str,
    connected: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn(Reader, Writer, String) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((reader, writer, peer)) => {
                    tokio::spawn(connected(reader, writer, format!("{name} {peer}")));
                }
                Err(e) => {
                    // Out of file descriptors, say: wait rather than spin.
                    tracing::warn!("{name}: cannot accept a connection: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
    })
}
