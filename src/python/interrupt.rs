//! Interrupting running Python code, from a client's SIGINT or from an
//! `interrupt_request`.
//!
//! CPython raises `KeyboardInterrupt` only on the thread that initialised it,
//! and only if its Python-level SIGINT handler is `default_int_handler`. So:
//! - the kernel blocks SIGINT in every thread it starts
//!   ([`block_sigint_in_current_thread`] runs in `main` before any other thread
//!   starts) but the interpreter thread and, once Python has started, the
//!   main thread ([`accept_sigint_in_current_thread`]); the main thread
//!   passes a SIGINT it gets on to the interpreter thread. Linux discards an
//!   ignored signal when it is sent only if the process's main thread does
//!   not block it; blocked there, it would wait, and be handled later as if
//!   sent then;
//! - while a cell is queued or runs (an `%%ask` cell is one), SIGINT has an
//!   OS handler that asks CPython to raise `KeyboardInterrupt`; otherwise its
//!   disposition is SIG_IGN, as in ipykernel, so an idle SIGINT (jupyter_client
//!   sends one before every shutdown, and one per press of stop) is discarded
//!   when it is sent. A handler that merely did nothing while idle would not
//!   do: a signal is handled when its thread next runs, which on a busy
//!   machine can be after the next cell has been queued;
//! - an `interrupt_request` sends SIGINT to that thread ([`Interrupter`]). A real
//!   signal, unlike a bare `PyErr_SetInterrupt`, also wakes blocking calls such as
//!   `time.sleep`, which then see the pending interrupt.
//!
//! A cell goes through phases: queued (the client may already have seen its
//! `execute_input`), starting (the runtime prepares it: IPython runs its
//! pre-execute hooks), running (the user's code), and back to idle. An
//! interrupt while queued or starting is kept and raised the moment the user's
//! code starts: raised earlier, it could land in IPython's event hooks, which
//! report a KeyboardInterrupt and carry on, so the cell would run anyway.
//!
//! A signal that lands just before a blocking call (between CPython's last
//! check and `clock_nanosleep`, say) is noted by CPython but not acted on
//! until the call returns, which may be never. So after an interrupt the
//! kernel nudges the interpreter thread a few times with a wake-up signal
//! whose handler does nothing: the blocking call returns EINTR, CPython sees
//! the interrupt it already holds and raises it. A nudge after that is
//! harmless: an interrupted sleep just resumes. Each nudge waits until the
//! one before was handled: on a busy machine the thread may not run for a
//! while, and nudges that piled up meanwhile would all be handled at once,
//! before it reached the blocking call they were meant to break.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

const IDLE: u8 = 0;
const QUEUED: u8 = 1;
const STARTING: u8 = 2;
const RUNNING: u8 = 3;

/// The phase of the current cell.
static CELL_STATE: AtomicU8 = AtomicU8::new(IDLE);

/// An interrupt that arrived before the user's code started.
static PENDING: AtomicBool = AtomicBool::new(false);

/// Counts cells, so a late wake-up never touches the next cell.
static CELL_SEQ: AtomicU64 = AtomicU64::new(0);

/// Counts interrupts that reached a queued or running cell. The kernel's own
/// waits on the interpreter thread (`input()`, an agent run) watch it besides
/// CPython's flag, which Python code can swallow: a KeyboardInterrupt raised
/// in a finalizer that the garbage collector runs is only reported.
static INTERRUPTS: AtomicU64 = AtomicU64::new(0);

/// Set once Python has started and the interpreter thread took SIGINT over.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Serialises changes of SIGINT's disposition, which threads make in turn.
static DISPOSITION: Mutex<()> = Mutex::new(());

/// When to nudge the interpreter thread after an interrupt.
const WAKE_DELAYS: [Duration; 6] = [
    Duration::from_millis(20),
    Duration::from_millis(50),
    Duration::from_millis(100),
    Duration::from_millis(200),
    Duration::from_millis(400),
    Duration::from_millis(800),
];

/// The signal used for nudges: a real-time one, which nothing else here uses.
fn wake_signal() -> libc::c_int {
    libc::SIGRTMIN() + 1
}

/// Nudges the interpreter thread has handled.
static WAKES_HANDLED: AtomicU64 = AtomicU64::new(0);

/// How long a nudge may wait for the one before it to be handled.
const WAKE_HANDLED_LIMIT: Duration = Duration::from_secs(10);

extern "C" fn on_wake(_signum: libc::c_int) {
    // Being delivered is the point (the blocking call returns EINTR); the
    // count paces the next nudge.
    WAKES_HANDLED.fetch_add(1, Ordering::SeqCst);
}

/// The interpreter thread, once it has installed its handler.
static INTERPRETER_THREAD: OnceLock<libc::pthread_t> = OnceLock::new();

extern "C" fn on_sigint(_signum: libc::c_int) {
    // Threads started from the interpreter thread (the fd readers, threads of
    // the user's code) inherit its unblocked SIGINT, so a signal sent to the
    // process may land on one of them, where it would not wake the
    // interpreter thread from a blocking call. Such a thread passes it on.
    if let Some(interpreter) = INTERPRETER_THREAD.get() {
        // SAFETY: pthread_self and pthread_equal have no preconditions.
        if unsafe { libc::pthread_equal(libc::pthread_self(), *interpreter) } == 0 {
            // SAFETY: pthread_kill is async-signal-safe; the thread id was
            // recorded by the interpreter thread, which lives as long as the
            // process.
            unsafe {
                libc::pthread_kill(*interpreter, libc::SIGINT);
            }
            return;
        }
    }
    if CELL_STATE.load(Ordering::SeqCst) != IDLE {
        INTERRUPTS.fetch_add(1, Ordering::SeqCst);
        wake_soon();
    }
    match CELL_STATE.load(Ordering::SeqCst) {
        // SAFETY: PyErr_SetInterruptEx is documented as async-signal-safe and
        // needs no thread state; the interpreter is initialised before this
        // handler is installed.
        RUNNING => unsafe {
            pyo3::ffi::PyErr_SetInterruptEx(libc::SIGINT);
        },
        QUEUED | STARTING => PENDING.store(true, Ordering::SeqCst),
        _ => {}
    }
    if SUBSHELL_CELLS.load(Ordering::SeqCst) > 0 {
        // Raising it in their threads takes the GIL: the waker does that.
        ask_waker(INTERRUPT_SUBSHELLS);
    }
}

/// How many subshell cells run now; while any does, SIGINT is listened to
/// (it interrupts them, see `subshell`).
static SUBSHELL_CELLS: AtomicUsize = AtomicUsize::new(0);

/// What the waker reads to interrupt the subshells' cells rather than nudge
/// the main shell's (cell numbers never get this high).
const INTERRUPT_SUBSHELLS: u64 = u64::MAX;

/// A subshell's cell starts (`true`) or ends.
fn subshell_cell(running: bool) {
    if running {
        SUBSHELL_CELLS.fetch_add(1, Ordering::SeqCst);
    } else {
        SUBSHELL_CELLS.fetch_sub(1, Ordering::SeqCst);
    }
    update_disposition();
}

fn sigint_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset only write to the set we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        set
    }
}

/// Blocks SIGINT in the calling thread and in every thread it spawns later.
/// Call first thing in `main`.
pub fn block_sigint_in_current_thread() {
    let set = sigint_set();
    // SAFETY: changes only the calling thread's signal mask.
    unsafe {
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Unblocks SIGINT in the calling thread, which must be the process's main
/// thread, once Python has taken SIGINT over ([`sigint_taken_over`]); any
/// SIGINT it gets is passed on to the interpreter thread. Until then a SIGINT
/// stays pending, and Python's start discards it.
pub fn accept_sigint_in_current_thread() {
    let set = sigint_set();
    // SAFETY: changes only the calling thread's signal mask.
    unsafe {
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// Told once the interpreter thread has installed SIGINT's handling.
static TAKEN_OVER: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Resolves once the interpreter thread has taken SIGINT over (never, if
/// Python fails to start).
pub async fn sigint_taken_over() {
    TAKEN_OVER.notified().await;
}

/// Gives SIGINT its default disposition before CPython initialises. A kernel
/// started by a process that ignores SIGINT (a server run as a script's
/// background job, or under nohup) inherits the ignore across exec; CPython
/// then records SIGINT as ignored and never installs `default_int_handler`,
/// so `PyErr_SetInterruptEx` does nothing and no interrupt ever lands.
#[cfg(not(feature = "abi3"))]
pub(super) fn sigint_default_before_python() {
    // SAFETY: changes the process's disposition of SIGINT; the kernel handles
    // SIGINT itself, so an inherited ignore is never wanted.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
    }
}

/// Whether the calling thread is the one that initialised Python (where
/// the main shell's cells run).
pub(super) fn on_interpreter_thread() -> bool {
    // SAFETY: pthread_self and pthread_equal have no preconditions.
    INTERPRETER_THREAD
        .get()
        .is_some_and(|thread| unsafe { libc::pthread_equal(libc::pthread_self(), *thread) } != 0)
}

/// Unblocks SIGINT for the calling thread, which must be the thread that
/// initialised Python, and sets its disposition for an idle kernel.
pub(super) fn install_on_interpreter_thread() {
    // SAFETY: pthread_self has no preconditions.
    let _ = INTERPRETER_THREAD.set(unsafe { libc::pthread_self() });
    INSTALLED.store(true, Ordering::SeqCst);
    super::subshell_interrupts::when_cells_change(subshell_cell);
    // A SIGINT sent while Python started is pending (blocked in every
    // thread); ignoring it discards it. It was meant for no cell: the client
    // had no cell running, only the kernel_info it was answered at once.
    // SAFETY: a plain sigaction setting SIG_IGN.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
    update_disposition();
    // Started while SIGINT is still blocked here, so the waker never gets it.
    start_waker();
    // SAFETY: installs a handler that does nothing, for a signal only the
    // kernel sends; no SA_RESTART, so blocking calls see EINTR.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_wake as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(wake_signal(), &action, std::ptr::null_mut());
    }
    let set = sigint_set();
    // SAFETY: changes only the calling thread's signal mask.
    unsafe {
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
    // A permit, kept if nobody waits yet.
    TAKEN_OVER.notify_one();
}

/// Gives SIGINT the kernel's handler while a cell is queued or runs (an
/// `%%ask` cell and `ask()` are cells too), SIG_IGN otherwise. Setting it again
/// after every cell also undoes Python code that called
/// `signal.signal(SIGINT, ...)` (asyncio.run does, on the way out), which
/// would otherwise turn an idle SIGINT into a KeyboardInterrupt later.
fn update_disposition() {
    let _serial = DISPOSITION.lock().unwrap_or_else(PoisonError::into_inner);
    // Before then CPython is still starting: it reads SIGINT's disposition
    // to decide whether to install default_int_handler, and a handler of
    // ours seen there would make every interrupt "ignored due to race
    // condition".
    if !INSTALLED.load(Ordering::SeqCst) {
        return;
    }
    let listening =
        CELL_STATE.load(Ordering::SeqCst) != IDLE || SUBSHELL_CELLS.load(Ordering::SeqCst) > 0;
    // SAFETY: a plain sigaction, with a handler that only touches atomics and
    // calls an async-signal-safe CPython function, or SIG_IGN. No
    // SA_RESTART, so blocking system calls return EINTR and CPython checks
    // for the interrupt.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = if listening {
            on_sigint as *const () as libc::sighandler_t
        } else {
            libc::SIG_IGN
        };
        libc::sigemptyset(&mut action.sa_mask);
        action.sa_flags = 0;
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
    }
}

/// How many interrupts have reached a cell so far, the main shell's and
/// the subshells' together; a wait (for input, for an agent run) that sees
/// it change was interrupted, on the interpreter thread or a subshell's.
/// (An interrupt stops every shell's cells, so either count will do.)
pub(super) fn interrupt_count() -> u64 {
    INTERRUPTS
        .load(Ordering::SeqCst)
        .wrapping_add(super::subshell_interrupts::interrupt_count())
}

/// Marks a cell as on its way to the interpreter thread (not yet running).
/// Idempotent: the kernel may announce the same cell more than once.
pub(super) fn cell_queued() {
    if CELL_STATE
        .compare_exchange(IDLE, QUEUED, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        CELL_SEQ.fetch_add(1, Ordering::SeqCst);
        update_disposition();
    }
}

/// Marks a cell as in the runtime's hands for as long as the guard lives.
pub(super) struct CellRunning;

impl CellRunning {
    /// The runtime is preparing the cell; its code has not started yet.
    pub(super) fn start() -> Self {
        CELL_STATE.store(STARTING, Ordering::SeqCst);
        update_disposition();
        CellRunning
    }
}

/// The user's code starts now (called by the runtime, on the interpreter
/// thread, with the GIL held). Returns true when an interrupt was kept for
/// the cell: the caller raises KeyboardInterrupt itself. Leaving it to
/// CPython's pending-signal flag is not enough: another Python thread that
/// takes the GIL recomputes the flag that makes the main thread look, and
/// may clear it, so a cell could run on into a long sleep with nothing left
/// to wake it.
pub(super) fn user_code_starting() -> bool {
    if CELL_STATE.load(Ordering::SeqCst) != STARTING {
        return false;
    }
    CELL_STATE.store(RUNNING, Ordering::SeqCst);
    PENDING.swap(false, Ordering::SeqCst)
}

impl Drop for CellRunning {
    fn drop(&mut self) {
        CELL_STATE.store(IDLE, Ordering::SeqCst);
        PENDING.store(false, Ordering::SeqCst);
        update_disposition();
    }
}

/// Interrupts the running cell, if any. Cheap to copy; usable from any thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct Interrupter;

impl Interrupter {
    /// Announces that a cell is about to be sent to the interpreter thread:
    /// from now on an interrupt is kept for it. Call this before telling the
    /// client the cell started (execute_input), so no interrupt is lost.
    pub fn cell_coming(&self) {
        cell_queued();
    }

    /// [`Interrupter::cell_coming`] for a subshell's cell; the count it
    /// returns goes with the cell ([`super::Parent::interrupts_seen`]).
    pub fn subshell_cell_coming(&self) -> u64 {
        super::subshell_interrupts::cell_coming()
    }

    /// Raises `KeyboardInterrupt` in the running (or about to run) cell,
    /// and in the cells subshells run. Returns false, and does nothing,
    /// when no cell is running.
    pub fn interrupt(&self) -> bool {
        let subshells = super::subshell_interrupts::interrupt_all();
        self.interrupt_main() || subshells
    }

    fn interrupt_main(&self) -> bool {
        if CELL_STATE.load(Ordering::SeqCst) != IDLE {
            INTERRUPTS.fetch_add(1, Ordering::SeqCst);
        }
        match CELL_STATE.load(Ordering::SeqCst) {
            QUEUED | STARTING => {
                PENDING.store(true, Ordering::SeqCst);
                // The user's code may have started meanwhile; then signal it.
                if CELL_STATE.load(Ordering::SeqCst) == RUNNING {
                    signal_interpreter(libc::SIGINT);
                }
            }
            RUNNING => signal_interpreter(libc::SIGINT),
            _ => return false,
        }
        wake_soon();
        true
    }
}

fn signal_interpreter(signal: libc::c_int) {
    if let Some(thread) = INTERPRETER_THREAD.get() {
        // SAFETY: the thread id was recorded by the interpreter thread, which
        // lives as long as the process.
        unsafe {
            libc::pthread_kill(*thread, signal);
        }
    }
}

/// The write end of the pipe that asks the waker thread for nudges (-1
/// until it runs).
static WAKER: AtomicI32 = AtomicI32::new(-1);

/// Asks the waker thread to nudge the current cell. Async-signal-safe (one
/// `write` of a few bytes), so signal handlers call it too: a SIGINT that
/// lands just before a blocking call needs the nudges as much as an
/// `interrupt_request` does.
fn wake_soon() {
    ask_waker(CELL_SEQ.load(Ordering::SeqCst));
}

/// Sends `seq` to the waker thread: a cell number to nudge, or
/// [`INTERRUPT_SUBSHELLS`]. Async-signal-safe.
fn ask_waker(seq: u64) {
    let fd = WAKER.load(Ordering::SeqCst);
    if fd < 0 {
        return;
    }
    let seq = seq.to_ne_bytes();
    // SAFETY: write(2) and errno access are async-signal-safe; errno is put
    // back so the interrupted code sees its own. A full pipe (many
    // interrupts queued) drops this request, which is no loss.
    unsafe {
        let errno = libc::__errno_location();
        let saved = *errno;
        libc::write(fd, seq.as_ptr().cast(), seq.len());
        *errno = saved;
    }
}

/// Starts the thread that nudges the interpreter thread while a cell that
/// was interrupted runs its user code, so an interrupt held by CPython is
/// acted on even if it arrived just before a blocking call.
fn start_waker() {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        tracing::warn!("no interrupt waker: {}", std::io::Error::last_os_error());
        return;
    }
    let [read_end, write_end] = fds;
    // SAFETY: fcntl on a descriptor we own; a signal handler must never
    // block on a full pipe.
    unsafe {
        libc::fcntl(write_end, libc::F_SETFL, libc::O_NONBLOCK);
    }
    let spawned = std::thread::Builder::new()
        .name("mahtab-interrupt-wake".into())
        .spawn(move || {
            let mut seq = [0u8; 8];
            loop {
                // SAFETY: reads into the buffer we own from our descriptor.
                let read = unsafe { libc::read(read_end, seq.as_mut_ptr().cast(), seq.len()) };
                match read {
                    8 if u64::from_ne_bytes(seq) == INTERRUPT_SUBSHELLS => {
                        super::subshell_interrupts::interrupt_all();
                    }
                    8 => nudge(u64::from_ne_bytes(seq)),
                    -1 if std::io::Error::last_os_error().kind()
                        == std::io::ErrorKind::Interrupted => {}
                    _ => return,
                }
            }
        });
    match spawned {
        Ok(_) => WAKER.store(write_end, Ordering::SeqCst),
        Err(e) => tracing::warn!("cannot start the interrupt waker: {e}"),
    }
}

/// Nudges the interpreter thread while cell `seq` runs its user code.
fn nudge(seq: u64) {
    let this_cell = || CELL_SEQ.load(Ordering::SeqCst) == seq;
    for delay in WAKE_DELAYS {
        std::thread::sleep(delay);
        if !this_cell() {
            return;
        }
        match CELL_STATE.load(Ordering::SeqCst) {
            RUNNING => {
                let handled = WAKES_HANDLED.load(Ordering::SeqCst);
                signal_interpreter(wake_signal());
                let started = Instant::now();
                while WAKES_HANDLED.load(Ordering::SeqCst) == handled
                    && this_cell()
                    && started.elapsed() < WAKE_HANDLED_LIMIT
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            IDLE => return,
            _ => {}
        }
    }
}

/// Raises the KeyboardInterrupt of an interrupt that came while the kernel
/// waited on this thread: CPython's flag, or failing that (Python code may
/// have swallowed the exception) the kernel's count, seen at
/// `interrupts` when the wait began.
pub(super) fn check_interrupt(py: pyo3::Python<'_>, interrupts: u64) -> pyo3::PyResult<()> {
    py.check_signals()?;
    if interrupt_count() != interrupts {
        super::subshell_interrupts::interrupt_delivered();
        return Err(pyo3::exceptions::PyKeyboardInterrupt::new_err(()));
    }
    Ok(())
}

/// A SIGINT that arrived as a cell ended is still pending in CPython; consume
/// it now so it cannot surface in the next cell.
pub(super) fn discard_pending_interrupt(py: pyo3::Python<'_>) {
    if let Err(e) = py.check_signals() {
        tracing::debug!("discarded a late interrupt: {e}");
    }
}
