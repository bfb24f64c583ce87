//! Output written straight to file descriptors 1 and 2 (C extensions,
//! `os.system`, subprocesses, `sys.__stdout__`) reaches the cell as stream
//! output, as with ipykernel's fd capture.
//!
//! Each descriptor is replaced by the write end of a pipe. A reader thread per
//! pipe moves what arrives into the [`StreamBuffer`]; at the end of a cell the
//! interpreter thread drains both pipes itself ([`FdCapture::drain`]) so that
//! output written during the cell is published before its reply. The kernel's
//! own log goes to a copy of the original stderr ([`original_stderr`]).

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use super::output::{StreamBuffer, StreamName};

/// A copy of the process's stderr from before capture, for the kernel's log.
static ORIGINAL_STDERR: OnceLock<RawFd> = OnceLock::new();

/// A writer to the process's original stderr. Call [`preserve_stderr`] first
/// (before any capture); until then this writes to fd 2 itself.
pub fn original_stderr() -> File {
    let fd = ORIGINAL_STDERR.get().copied().unwrap_or(2);
    // SAFETY: dup of a descriptor that stays open for the whole process; the
    // returned File owns the duplicate.
    unsafe { File::from_raw_fd(libc::dup(fd)) }
}

/// Keeps a copy of fd 2 for the kernel's log. Call before starting threads.
pub fn preserve_stderr() {
    // SAFETY: dup of fd 2, which every process has (or -1, handled below).
    let fd = unsafe { libc::dup(2) };
    if fd >= 0 {
        let _ = ORIGINAL_STDERR.set(fd);
    }
}

/// One captured descriptor: the read end of its pipe and undecoded bytes.
struct Pipe {
    name: StreamName,
    read: OwnedFd,
    /// Bytes of an incomplete UTF-8 sequence at the end of the last read.
    partial: Vec<u8>,
}

impl Pipe {
    /// Moves everything readable now into `buffer`, without blocking.
    fn drain(&mut self, buffer: &StreamBuffer) {
        let mut chunk = [0u8; 64 * 1024];
        loop {
            // SAFETY: reading into a stack buffer of the given length from a
            // descriptor this struct owns (non-blocking).
            let n = unsafe {
                libc::read(
                    self.read.as_raw_fd(),
                    chunk.as_mut_ptr().cast(),
                    chunk.len(),
                )
            };
            if n <= 0 {
                return; // EAGAIN (nothing more now), EOF or error
            }
            self.partial.extend_from_slice(&chunk[..n as usize]);
            let text = take_text(&mut self.partial);
            buffer.write(self.name, &text);
        }
    }
}

/// Decodes the complete UTF-8 prefix of `bytes`, leaving a trailing
/// incomplete sequence (at most 3 bytes) for the next read. Invalid bytes
/// become U+FFFD.
fn take_text(bytes: &mut Vec<u8>) -> String {
    let keep = match std::str::from_utf8(bytes) {
        Ok(_) => 0,
        Err(e) if e.error_len().is_none() => bytes.len() - e.valid_up_to(),
        Err(_) => 0,
    };
    let tail = bytes.split_off(bytes.len() - keep);
    let text = String::from_utf8_lossy(bytes).into_owned();
    *bytes = tail;
    text
}

/// The capture of fds 1 and 2; lives as long as the interpreter thread.
pub struct FdCapture {
    pipes: Vec<Arc<Mutex<Pipe>>>,
    buffer: Arc<StreamBuffer>,
}

impl FdCapture {
    /// Redirects fds 1 and 2 into `buffer`. On failure nothing is redirected
    /// and the error is returned (the kernel then runs without fd capture).
    pub fn start(buffer: Arc<StreamBuffer>) -> std::io::Result<Self> {
        let mut pipes = Vec::new();
        for (fd, name) in [(1, StreamName::Stdout), (2, StreamName::Stderr)] {
            let (read, write) = pipe()?;
            // SAFETY: dup2 onto the standard descriptors, which the process
            // owns; the pipe's write end stays open through them.
            if unsafe { libc::dup2(write.as_raw_fd(), fd) } < 0 {
                return Err(std::io::Error::last_os_error());
            }
            drop(write);
            pipes.push(Arc::new(Mutex::new(Pipe {
                name,
                read,
                partial: Vec::new(),
            })));
        }
        for pipe in &pipes {
            let pipe = pipe.clone();
            let buffer = buffer.clone();
            std::thread::Builder::new()
                .name("mahtab-fd-capture".into())
                .spawn(move || read_forever(&pipe, &buffer))?;
        }
        Ok(Self { pipes, buffer })
    }

    /// Flushes C stdio buffers and moves everything already written to the
    /// captured descriptors into the stream buffer.
    pub fn drain(&self) {
        // SAFETY: fflush(NULL) flushes every C stdio output stream.
        unsafe {
            libc::fflush(std::ptr::null_mut());
        }
        for pipe in &self.pipes {
            lock(pipe).drain(&self.buffer);
        }
    }
}

fn lock(pipe: &Mutex<Pipe>) -> std::sync::MutexGuard<'_, Pipe> {
    pipe.lock().unwrap_or_else(PoisonError::into_inner)
}

fn read_forever(pipe: &Mutex<Pipe>, buffer: &StreamBuffer) {
    let fd = lock(pipe).read.as_raw_fd();
    loop {
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: polls one descriptor that outlives this thread (the pipe is
        // kept by the FdCapture, which lives as long as the interpreter).
        let ready = unsafe { libc::poll(&mut poll, 1, -1) };
        if ready < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if poll.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
            && poll.revents & libc::POLLIN == 0
        {
            return;
        }
        lock(pipe).drain(buffer);
    }
}

/// A pipe whose read end is non-blocking; both ends close on exec.
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 fills the two descriptors, which we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: sets a flag on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(read.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(read.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    Ok((read, write))
}

#[cfg(test)]
mod tests {
    use super::take_text;

    #[test]
    fn keeps_an_incomplete_utf8_sequence_for_the_next_read() {
        let mut bytes = "hé".as_bytes().to_vec();
        let last = bytes.pop().unwrap(); // split "é" in two
        assert_eq!(take_text(&mut bytes), "h");
        assert_eq!(bytes.len(), 1);
        bytes.push(last);
        assert_eq!(take_text(&mut bytes), "é");
        assert!(bytes.is_empty());
    }

    #[test]
    fn invalid_bytes_are_replaced_not_kept() {
        let mut bytes = vec![b'a', 0xff, b'b'];
        assert_eq!(take_text(&mut bytes), "a\u{fffd}b");
        assert!(bytes.is_empty());
    }
}
