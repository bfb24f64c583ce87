//! The communication port: where Enterprise Gateway sends a launched kernel
//! its requests, one JSON object per connection, read to the end and not
//! answered. `{"signum": N}` sends signal N to the kernel's process (0 only
//! asks whether the port still answers: the gateway polls it to learn the
//! kernel is alive; 2 is an interrupt); `{"shutdown": 1}` stops the kernel.
//!
//! The port listens where the gateway can reach it, so it trusts no one
//! else: only the gateway's address (the one it gave for the kernel's
//! answer) and loopback are heard, only the signals the gateway sends are
//! sent, and each connection has a short time of its own to say what it
//! wants, a few at once, so a peer that connects and says nothing holds up
//! neither the port nor the gateway's next request.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The most a request may be; the gateway's are a few bytes.
const MAX_REQUEST: u64 = 4096;

/// How long a connection may take to deliver its request (the gateway
/// writes it at once).
const READ_LIMIT: Duration = Duration::from_secs(2);

/// Connections served at once; more are closed unheard.
const AT_ONCE: usize = 8;

/// The signals the gateway sends: 0 (a poll), SIGINT (interrupt), SIGTERM
/// and SIGKILL (ending a kernel whose shutdown request went unanswered).
const GATEWAY_SIGNALS: [i32; 4] = [0, libc::SIGINT, libc::SIGTERM, libc::SIGKILL];

#[derive(Debug, Default, Deserialize, PartialEq)]
struct Request {
    signum: Option<i32>,
    shutdown: Option<i64>,
}

/// Who may use the port: loopback and the gateway's addresses.
#[derive(Debug, Clone, Default)]
pub(super) struct Allowed {
    gateway: Vec<IpAddr>,
}

impl Allowed {
    /// The gateway at `response_address` (`host:port`, as the gateway
    /// passes it); a name is resolved once, now.
    pub(super) async fn gateway_at(response_address: &str) -> Self {
        let gateway = match tokio::net::lookup_host(response_address).await {
            Ok(addresses) => addresses.map(|a| a.ip()).collect(),
            Err(e) => {
                tracing::warn!(
                    "communication port: cannot resolve the gateway's address {response_address}: {e}; only loopback is heard"
                );
                Vec::new()
            }
        };
        Self { gateway }
    }

    fn admits(&self, peer: IpAddr) -> bool {
        let peer = match peer {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(peer, IpAddr::V4),
            v4 => v4,
        };
        peer.is_loopback() || self.gateway.contains(&peer)
    }
}

/// Serves the gateway's requests on `listener` until one asks to shut down,
/// which cancels `stop` (the kernel's shutdown).
pub(super) async fn serve(listener: TcpListener, allowed: Allowed, stop: CancellationToken) {
    let slots = Arc::new(Semaphore::new(AT_ONCE));
    loop {
        let (stream, peer) = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!("communication port: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        if !allowed.admits(peer.ip()) {
            tracing::warn!("communication port: refused {peer} (not the gateway)");
            continue;
        }
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!("communication port: too many connections; closed {peer}");
            continue;
        };
        let stop = stop.clone();
        tokio::spawn(async move {
            if let Some(request) = read_request(stream, peer).await {
                carry_out(&request, &stop);
            }
            drop(slot);
        });
    }
}

async fn read_request(mut stream: TcpStream, peer: std::net::SocketAddr) -> Option<Request> {
    let mut text = Vec::new();
    let mut limited = (&mut stream).take(MAX_REQUEST);
    match tokio::time::timeout(READ_LIMIT, limited.read_to_end(&mut text)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            tracing::warn!("communication port: reading from {peer}: {e}");
            return None;
        }
        // The gateway writes its request and may leave the connection open:
        // what came in time is the request.
        Err(_) if !text.is_empty() => {}
        Err(_) => {
            tracing::warn!("communication port: {peer} sent no request in time");
            return None;
        }
    }
    match serde_json::from_slice(&text) {
        Ok(request) => Some(request),
        Err(e) => {
            tracing::warn!("communication port: unreadable request from {peer}: {e}");
            None
        }
    }
}

fn carry_out(request: &Request, stop: &CancellationToken) {
    if let Some(signum) = request.signum.filter(|&signum| signum != 0) {
        if !GATEWAY_SIGNALS.contains(&signum) {
            tracing::warn!(
                "communication port: signal {signum} refused (not one the gateway sends)"
            );
        } else {
            tracing::info!("communication port: signal {signum}");
            // The kernel's own handling of the signal applies: SIGINT
            // interrupts the running cell, as the kernelspec's
            // interrupt_mode "signal" promises.
            // SAFETY: kill with our own pid and a signal number has no
            // memory-safety preconditions.
            if unsafe { libc::kill(libc::getpid(), signum) } != 0 {
                tracing::warn!(
                    "communication port: cannot send signal {signum}: {}",
                    std::io::Error::last_os_error()
                );
            }
        }
    }
    if request.shutdown.is_some_and(|shutdown| shutdown != 0) {
        tracing::info!("communication port: shutdown");
        stop.cancel();
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

    #[test]
    fn only_loopback_and_the_gateway_are_heard() {
        let allowed = Allowed {
            gateway: vec!["10.1.2.3".parse().unwrap()],
        };
        for heard in ["127.0.0.1", "::1", "10.1.2.3", "::ffff:10.1.2.3"] {
            assert!(allowed.admits(heard.parse().unwrap()), "{heard}");
        }
        for refused in ["10.1.2.4", "192.168.0.1", "fe80::1"] {
            assert!(!allowed.admits(refused.parse().unwrap()), "{refused}");
        }
    }

    #[test]
    fn a_shutdown_request_stops_the_kernel_and_odd_signals_are_refused() {
        let stop = CancellationToken::new();
        // SIGUSR1 would end this test process if it were sent.
        carry_out(
            &Request {
                signum: Some(libc::SIGUSR1),
                shutdown: None,
            },
            &stop,
        );
        assert!(!stop.is_cancelled());
        carry_out(
            &Request {
                signum: None,
                shutdown: Some(1),
            },
            &stop,
        );
        assert!(stop.is_cancelled());
    }

    #[tokio::test]
    async fn a_silent_connection_does_not_hold_up_the_next_request() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let serving = tokio::spawn(serve(listener, Allowed::default(), stop.clone()));
        // Connects and says nothing, keeping the connection open.
        let _silent = TcpStream::connect(address).await.unwrap();
        let mut shutdown = TcpStream::connect(address).await.unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut shutdown, br#"{"shutdown": 1}"#)
            .await
            .unwrap();
        drop(shutdown);
        // Well before the silent one's time is up.
        tokio::time::timeout(READ_LIMIT / 2, stop.cancelled())
            .await
            .expect("the shutdown was heard while the silent peer waited");
        tokio::time::timeout(Duration::from_secs(5), serving)
            .await
            .unwrap()
            .unwrap();
    }
}
