//! The communication port: where Enterprise Gateway sends a launched kernel
//! its requests, one JSON object per connection, read to the end and not
//! answered. `{"signum": N}` sends signal N to the kernel's process (0 only
//! asks whether the port still answers: the gateway polls it to learn the
//! kernel is alive; 2 is an interrupt); `{"shutdown": 1}` ends the listener.

use std::time::Duration;

use serde::Deserialize;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

/// The most a request may be; the gateway's are a few bytes.
const MAX_REQUEST: u64 = 4096;

/// How long a connection may take to deliver its request (the gateway
/// writes it at once and closes), so a stuck peer cannot hold the port.
const READ_LIMIT: Duration = Duration::from_secs(5);

#[derive(Debug, Default, Deserialize, PartialEq)]
struct Request {
    signum: Option<i32>,
    shutdown: Option<i64>,
}

/// Serves the gateway's requests on `listener` until one asks to shut down.
pub(super) async fn serve(listener: TcpListener) {
    loop {
        let (mut stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!("communication port: {e}");
                continue;
            }
        };
        let mut text = Vec::new();
        let mut limited = (&mut stream).take(MAX_REQUEST);
        match tokio::time::timeout(READ_LIMIT, limited.read_to_end(&mut text)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!("communication port: reading from {peer}: {e}");
                continue;
            }
            Err(_) => {
                tracing::warn!("communication port: {peer} sent no whole request in time");
                continue;
            }
        }
        let request: Request = match serde_json::from_slice(&text) {
            Ok(request) => request,
            Err(e) => {
                tracing::warn!("communication port: unreadable request from {peer}: {e}");
                continue;
            }
        };
        if let Some(signum) = request.signum.filter(|&signum| signum != 0) {
            tracing::info!("communication port: signal {signum}");
            // The kernel's own handling of the signal applies: SIGINT
            // interrupts the running cell, as the kernelspec's
            // interrupt_mode "signal" promises.
            // SAFETY: kill with our own pid and a signal number has no
            // memory-safety preconditions; a bad number is an EINVAL.
            if unsafe { libc::kill(libc::getpid(), signum) } != 0 {
                tracing::warn!(
                    "communication port: cannot send signal {signum}: {}",
                    std::io::Error::last_os_error()
                );
            }
        }
        if request.shutdown.is_some_and(|shutdown| shutdown != 0) {
            tracing::info!("communication port: shutdown");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_read_as_the_gateway_writes_them() {
        let signal: Request = serde_json::from_str(r#"{"signum": 2}"#).unwrap();
        assert_eq!(signal.signum, Some(2));
        let shutdown: Request = serde_json::from_str(r#"{"shutdown": 1}"#).unwrap();
        assert_eq!(shutdown.shutdown, Some(1));
    }
}
