//! Output written straight to file descriptors 1 and 2 (C extensions,
//! `os.system`, subprocesses, `sys.__stdout__`) reaches the cell as stream
//! output, as with ipykernel's fd capture.
//!
//! Each descriptor is replaced by the write end of a pipe. A reader thread per
//! pipe moves what arrives into the [`StreamBuffer`]; at the end of a cell the
//! interpreter thread drains both pipes itself ([`FdCapture::drain`]) so that
//! output written during the cell is published before its reply, and before
//! Python text joins a stream it takes what already waits in that stream's
//! pipe ([`catch_up`]), so `subprocess.run(["echo", "a"]); print("b")` shows
//! `a` first even when the reader thread has not run yet. The kernel's own
//! log goes to a copy of the original stderr ([`original_stderr`]).

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use super::output::{StreamBuffer, StreamName};

/// A copy of the process's stderr from before capture, for the kernel's log.
static ORIGINAL_STDERR: OnceLock<RawFd> = OnceLock::new();

/// A writer to the process's original stderr. Call [`preserve_stderr`] first
/// (before any capture); until then this writes to fd 2 itself.
pub fn original_stderr() -> File {
    let fd = ORIGINAL_STDERR.get().copied().unwrap_or(2);
    // SAFETY: dup of a descriptor that stays open for the whole process; the
    // returned File owns the duplicate. Close-on-exec, as every copy: a
    // process the kernel starts must not hold the kernel's stderr open.
    unsafe { File::from_raw_fd(libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0)) }
}

/// Keeps a copy of fd 2 for the kernel's log. Call before starting threads.
pub fn preserve_stderr() {
    // SAFETY: dup of fd 2, which every process has (or -1, handled below).
    // Close-on-exec: a process the kernel starts (the shared local model
    // server, which outlives it) must not keep the kernel's stderr open.
    let fd = unsafe { libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 0) };
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
    /// Returns whether there was anything.
    fn drain(&mut self, buffer: &StreamBuffer) -> bool {
        let mut chunk = [0u8; 64 * 1024];
        let mut any = false;
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
                return any; // EAGAIN (nothing more now), EOF or error
            }
            any = true;
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
#[derive(Clone)]
pub struct FdCapture {
    /// Stdout's pipe, then stderr's.
    pipes: Vec<Arc<Mutex<Pipe>>>,
    buffer: Arc<StreamBuffer>,
    /// Where [`catch_up`]'s clock starts.
    started: Instant,
}

/// The running capture, for [`catch_up`].
static ACTIVE: OnceLock<FdCapture> = OnceLock::new();

/// Looking in a pipe is a system call, too dear for every one of the
/// thousands of writes a print loop makes: after a look that found nothing,
/// writes within this interval do not look again. Output that needs a look
/// comes from something slower than that (a subprocess, a C call), or from
/// a loop that keeps finding some, which keeps looking ([`HOT_SPAN`]).
const LOOK_INTERVAL: Duration = Duration::from_micros(50);

/// After output came through a descriptor (found by a look or by the
/// reader thread), every write looks, for this long.
const HOT_SPAN: Duration = Duration::from_millis(10);

/// When [`catch_up`] last looked ([`NEVER`] before the first look), and
/// until when it looks at every write (nanoseconds since the capture
/// started).
static LAST_LOOK: AtomicU64 = AtomicU64::new(NEVER);
static HOT_UNTIL: AtomicU64 = AtomicU64::new(0);
const NEVER: u64 = u64::MAX;

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Called before Python text is added to stream `name`: moves output already
/// written to that stream's descriptor (and waiting in its pipe) into the
/// buffer first, so the two keep the order they were written in.
pub(super) fn catch_up(name: StreamName) {
    let Some(FdCapture {
        pipes,
        buffer,
        started,
    }) = ACTIVE.get()
    else {
        return;
    };
    let now = nanos(started.elapsed());
    let last = LAST_LOOK.load(Ordering::Relaxed);
    let due = last == NEVER || now.saturating_sub(last) >= nanos(LOOK_INTERVAL);
    if !due && now >= HOT_UNTIL.load(Ordering::Relaxed) {
        return;
    }
    LAST_LOOK.store(now, Ordering::Relaxed);
    let pipe = match name {
        StreamName::Stdout => &pipes[0],
        StreamName::Stderr => &pipes[1],
    };
    if lock(pipe).drain(buffer) {
        HOT_UNTIL.store(now + nanos(HOT_SPAN), Ordering::Relaxed);
    }
}

/// Output is flowing through the descriptors: every write looks for a while.
fn output_seen() {
    if let Some(capture) = ACTIVE.get() {
        let now = nanos(capture.started.elapsed());
        HOT_UNTIL.store(now + nanos(HOT_SPAN), Ordering::Relaxed);
    }
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
        let capture = Self {
            pipes,
            buffer,
            started: Instant::now(),
        };
        let _ = ACTIVE.set(capture.clone());
        Ok(capture)
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
        if lock(pipe).drain(buffer) {
            output_seen();
        }
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
