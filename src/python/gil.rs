//! Waiting for a Rust channel from a Python thread without holding the GIL.

use std::sync::mpsc;

/// Waits up to `timeout` for a message on `receiver` with the GIL
/// released, so other Python threads run meanwhile. The receiver moves into
/// the detached closure and back (it is Send but not Sync).
pub(crate) fn recv_released<T: Send>(
    py: pyo3::Python<'_>,
    receiver: mpsc::Receiver<T>,
    timeout: std::time::Duration,
) -> (mpsc::Receiver<T>, Result<T, mpsc::RecvTimeoutError>) {
    py.detach(move || {
        let received = receiver.recv_timeout(timeout);
        (receiver, received)
    })
}
