//! One local model server per user, shared by every kernel: the first kernel
//! that needs a model starts its server detached (a session of its own, so
//! neither an interrupt nor a kernel restart reaches it), later kernels find
//! it through its server file and reuse the loaded model and its warm prompt
//! cache. The server file (`mahtab-local-model-<model>.json` in Jupyter's
//! runtime directory, mode 0600) holds the server's URL and the random key
//! every request must carry; the server writes it once it answers and takes
//! it away when it stops (unused for a while, its model file changed, or
//! `mahtab local-model --stop`).
//!
//! A server is used only when its file, its process and its listening port
//! all belong to this user, and it answers with that key; a file left by a
//! dead server is replaced. A start lock beside the file makes two kernels
//! starting at once start one server: the starting kernel hands the lock to
//! the server, which lets it go once its file is written.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::io::BufReader;
use tokio::process::Command;

use super::{ModelSpec, PROVIDER, next_line, procfs};
use crate::agent::llm::LlmError;

const SERVER_SCRIPT: &str = include_str!("server.py");

/// The first argument of every shared server's command line, by which
/// `mahtab local-model --status` finds them all, even one whose server file
/// is gone.
pub const MARKER: &str = "mahtab-local-model-server";

/// How many requests the server serves at once, each in a slot with its
/// own cached prompt (one KV cache shared by all, so any one request may
/// use the whole window).
const SLOTS: u32 = 4;

/// How long loading the model may take.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a server that runs may take to answer a health check.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(10);

/// How many of the server's last log lines a failed start reports.
const LOG_TAIL: usize = 8;

/// How to stop the shared servers, for messages.
pub const STOP_HINT: &str = "mahtab local-model --stop";

/// Where the shared server of one model is found: its server file, its
/// start lock and its log, in Jupyter's runtime directory.
#[derive(Debug, Clone)]
pub struct Place {
    dir: PathBuf,
    spec: &'static ModelSpec,
}

impl Place {
    /// The place of `spec`'s server in this user's runtime directory (made
    /// private if it is not there yet).
    pub fn of(spec: &'static ModelSpec) -> io::Result<Self> {
        Self::in_dir(crate::install::runtime_dir()?, spec)
    }

    /// The place of `spec`'s server in `dir` (made private if it is not
    /// there yet).
    pub fn in_dir(dir: PathBuf, spec: &'static ModelSpec) -> io::Result<Self> {
        crate::private_files::private_dir(&dir)?;
        Ok(Self { dir, spec })
    }

    pub fn server_file(&self) -> PathBuf {
        self.dir
            .join(format!("mahtab-local-model-{}.json", self.spec.key))
    }

    fn lock_file(&self) -> PathBuf {
        self.dir
            .join(format!("mahtab-local-model-{}.lock", self.spec.key))
    }

    pub fn log_file(&self) -> PathBuf {
        self.dir
            .join(format!("mahtab-local-model-{}.log", self.spec.key))
    }
}

/// What a running server wrote of itself.
#[derive(Clone, Deserialize)]
pub struct ServerFile {
    pub pid: u32,
    /// e.g. `http://127.0.0.1:40701`.
    pub url: String,
    /// The key every request carries (a bearer token); never shown.
    key: String,
    /// The model's key (`coder-1.5b`).
    pub model: String,
    pub model_file: PathBuf,
    /// When it started (seconds since the epoch).
    pub started: f64,
    /// How long it may go unused before it stops.
    pub idle_seconds: f64,
    pub slots: u32,
}

impl std::fmt::Debug for ServerFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerFile")
            .field("pid", &self.pid)
            .field("url", &self.url)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl ServerFile {
    pub fn key(&self) -> &str {
        &self.key
    }
}

/// Whether this kernel started the shared server or found it running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Started,
    Reused,
}

/// What starting a server takes.
#[derive(Debug)]
pub struct Launch<'a> {
    /// A Python with the llama.cpp server package.
    pub python: &'a Path,
    pub model_file: &'a Path,
    /// How long it may go unused before it stops.
    pub idle: Duration,
}

/// The start lock of one model's server, held while a kernel looks for the
/// server and starts it if none runs: two kernels starting at once start
/// one server.
#[derive(Debug)]
pub struct StartLock<'a> {
    place: &'a Place,
    file: File,
}

impl Place {
    /// Takes the start lock, waiting while another kernel starts the server.
    pub async fn lock(&self) -> Result<StartLock<'_>, LlmError> {
        let file = acquire(&self.lock_file(), START_TIMEOUT + HEALTH_TIMEOUT).await?;
        Ok(StartLock { place: self, file })
    }
}

impl StartLock<'_> {
    /// The server, if one runs, is this user's and answers with its key.
    pub async fn running(&self) -> Result<Option<ServerFile>, LlmError> {
        running(self.place).await
    }

    /// Starts the server and waits until it answers (loading the model
    /// takes seconds).
    pub async fn start(&self, launch: &Launch<'_>) -> Result<ServerFile, LlmError> {
        start(self.place, launch, &self.file).await
    }
}

/// The start lock, once no other kernel (or starting server) holds it.
async fn acquire(path: &Path, limit: Duration) -> Result<File, LlmError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| failed(format!("cannot open {}: {e}", path.display())))?;
    let deadline = Instant::now() + limit;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(failed(format!(
                    "another kernel has been starting the local model for over {} s",
                    limit.as_secs()
                )));
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(failed(format!("cannot lock {}: {e}", path.display())));
            }
        }
    }
}

/// The server `place` names, if it runs, is this user's and answers with
/// its key. A server file that names no such server is removed (under the
/// start lock, which the caller holds).
async fn running(place: &Place) -> Result<Option<ServerFile>, LlmError> {
    let path = place.server_file();
    let Some(server) = read_server_file(&path) else {
        return Ok(None);
    };
    if !is_server_process(server.pid, &path) {
        tracing::info!("removing {}: its server is gone", path.display());
        let _ = std::fs::remove_file(&path);
        return Ok(None);
    }
    let port = server
        .url
        .rsplit(':')
        .next()
        .and_then(|port| port.parse().ok());
    let ours = port.and_then(procfs::loopback_listener_owner) == Some(procfs::euid());
    if ours && answers(&server).await {
        return Ok(Some(server));
    }
    Err(failed(format!(
        "the shared local model server (pid {}) does not answer at {}; {STOP_HINT} stops it",
        server.pid, server.url
    )))
}

/// The server file at `path`, if it is there, is this user's alone, and
/// reads whole; one that is not (another user's, readable by others,
/// damaged) is removed, never used.
pub fn read_server_file(path: &Path) -> Option<ServerFile> {
    let mut file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!("not using {}: {e}", path.display());
            let _ = std::fs::remove_file(path);
            return None;
        }
    };
    let private = file.metadata().is_ok_and(|meta| {
        meta.is_file() && meta.uid() == procfs::euid() && meta.mode() & 0o077 == 0
    });
    let mut text = String::new();
    let parsed = if private && file.read_to_string(&mut text).is_ok() {
        serde_json::from_str::<ServerFile>(&text).ok()
    } else {
        None
    };
    if parsed.is_none() {
        tracing::warn!(
            "not using {}: not this user's alone, or damaged; removed",
            path.display()
        );
        let _ = std::fs::remove_file(path);
    }
    parsed
}

/// Whether `pid` is a shared server of this user's, the one of
/// `server_file` (not another process that got its number).
fn is_server_process(pid: u32, server_file: &Path) -> bool {
    if procfs::owner(pid) != Some(procfs::euid()) {
        return false;
    }
    let Some(args) = procfs::cmdline(pid) else {
        return false;
    };
    let file = server_file.to_string_lossy();
    args.iter().any(|arg| arg == MARKER) && args.iter().any(|arg| *arg == file)
}

/// Whether the server answers its health check, and a request with its
/// key (so the file's key is the server's).
async fn answers(server: &ServerFile) -> bool {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Ok(client) = reqwest::Client::builder().timeout(HEALTH_TIMEOUT).build() else {
        return false;
    };
    let ok = |response: Result<reqwest::Response, reqwest::Error>| {
        response.is_ok_and(|r| r.status().is_success())
    };
    ok(client.get(format!("{}/health", server.url)).send().await)
        && ok(client
            .get(format!("{}/v1/models", server.url))
            .bearer_auth(&server.key)
            .send()
            .await)
}

/// Starts the server of `launch` and waits until it has written its server
/// file; it holds `lock` (as its fd 3) until then, so other kernels wait for
/// it even if this one stops waiting.
async fn start(place: &Place, launch: &Launch<'_>, lock: &File) -> Result<ServerFile, LlmError> {
    let server_file = place.server_file();
    let _ = std::fs::remove_file(&server_file);
    let log = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(place.log_file())
        .map_err(|e| failed(format!("cannot write {}: {e}", place.log_file().display())))?;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    let mut command = Command::new(launch.python);
    command
        .arg("-c")
        .arg(SERVER_SCRIPT)
        .arg(MARKER)
        .arg(place.spec.key)
        .arg(launch.model_file)
        .arg(threads.to_string())
        .arg(place.spec.context_tokens.to_string())
        .arg(SLOTS.to_string())
        .arg(format!("{:.3}", launch.idle.as_secs_f64()))
        .arg(&server_file)
        .arg(place.lock_file())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log));
    let lock_fd = lock.as_raw_fd();
    // SAFETY: between fork and exec only async-signal-safe calls: a session
    // of its own (no terminal, no process group of the kernel's: an
    // interrupt or a restart of the kernel does not reach it), and the start
    // lock as fd 3, inherited across exec.
    unsafe {
        command.pre_exec(move || {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            let inherited = if lock_fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(lock_fd, 3)
            };
            if inherited == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .map_err(|e| failed(format!("cannot start {}: {e}", launch.python.display())))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| failed("no stdout".into()))?;
    let mut stdout = BufReader::new(stdout);
    loop {
        let line = tokio::time::timeout(START_TIMEOUT, next_line(&mut stdout))
            .await
            .map_err(|_| failed("the model server did not start in time".into()))?
            .map_err(|e| failed(e.to_string()))?;
        match line {
            Some(line) if line.starts_with("READY ") => break,
            Some(_) => {}
            None => {
                let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
                return Err(failed(format!(
                    "the model server exited while starting: {}",
                    log_tail(&place.log_file())
                )));
            }
        }
    }
    // The server runs on by itself: dropping the handle neither kills nor
    // waits for it (the runtime reaps it if it ends while this kernel runs).
    drop(child);
    let server = read_server_file(&server_file)
        .ok_or_else(|| failed("the model server started but wrote no server file".into()))?;
    tracing::info!(
        "local model {} serving {} at {} (pid {})",
        place.spec.key,
        launch.model_file.display(),
        server.url,
        server.pid
    );
    Ok(server)
}

/// The last lines of the server's log.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL)..].join("\n")
}

fn failed(message: String) -> LlmError {
    LlmError::Connect {
        provider: PROVIDER,
        message,
    }
}

/// What runs of `spec`'s shared server in this user's runtime directory,
/// in a line for `%ask_config`.
pub fn describe(spec: &'static ModelSpec) -> String {
    let running = Place::of(spec).ok().and_then(|place| {
        let path = place.server_file();
        read_server_file(&path).filter(|server| is_server_process(server.pid, &path))
    });
    match running {
        Some(server) => format!(
            "{} shared by this user's kernels: pid {} at {}, stops after {:.0} min unused; {STOP_HINT} stops it",
            spec.name,
            server.pid,
            server.url,
            server.idle_seconds / 60.0
        ),
        None => format!(
            "{} not running (the first %%ask with no provider starts it, shared by this user's kernels)",
            spec.name
        ),
    }
}

/// A shared server process of this user's, as `--status` lists it.
#[derive(Debug)]
pub struct Listed {
    pub pid: u32,
    /// The server file its command line names.
    pub server_file: PathBuf,
    /// What that file says, when it names this process.
    pub server: Option<ServerFile>,
    pub resident_bytes: Option<u64>,
}

/// Every shared server process of this user's, in any runtime directory,
/// with what its server file says (none for one whose file is gone: it is
/// listed all the same, so none runs unseen).
pub fn list() -> Vec<Listed> {
    procfs::processes_of(procfs::euid())
        .into_iter()
        .filter_map(|pid| {
            let args = procfs::cmdline(pid)?;
            let at = args.iter().position(|arg| arg == MARKER)?;
            // MARKER MODEL_KEY MODEL THREADS CONTEXT SLOTS IDLE SERVER_FILE LOCK
            let server_file = PathBuf::from(args.get(at + 7)?);
            let server = read_server_file(&server_file).filter(|server| server.pid == pid);
            Some(Listed {
                pid,
                server_file,
                server,
                resident_bytes: procfs::resident_bytes(pid),
            })
        })
        .collect()
}

/// Stops `pid`, a shared server of this user's: SIGTERM (it removes its
/// server file), then SIGKILL if it is still there after `grace`.
pub fn stop(pid: u32, grace: Duration) -> bool {
    let is_server = procfs::owner(pid) == Some(procfs::euid())
        && procfs::cmdline(pid).is_some_and(|args| args.iter().any(|arg| arg == MARKER));
    if !is_server {
        return false;
    }
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: kill has no memory effects; the pid was checked above.
    unsafe { libc::kill(raw, libc::SIGTERM) };
    let deadline = Instant::now() + grace;
    while procfs::cmdline(pid).is_some_and(|args| !args.is_empty()) {
        if Instant::now() >= deadline {
            // SAFETY: as above.
            unsafe { libc::kill(raw, libc::SIGKILL) };
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::llm::local::default_spec;

    fn scratch(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("mahtab-shared-{tag}-{}", uuid::Uuid::new_v4()))
    }

    fn launch(python: &'static str) -> Launch<'static> {
        Launch {
            python: Path::new(python),
            model_file: Path::new("model.gguf"),
            idle: Duration::from_secs(60),
        }
    }

    #[tokio::test]
    async fn a_server_that_dies_while_starting_says_why_and_lets_the_lock_go() {
        // `sh -c` runs the Python script as shell code: it fails at once and
        // says so on stderr, as a broken model server would.
        let dir = scratch("dies");
        let place = Place::in_dir(dir.clone(), default_spec()).unwrap();
        let lock = place.lock().await.unwrap();
        assert!(lock.running().await.unwrap().is_none());
        let err = lock.start(&launch("/bin/sh")).await.unwrap_err();
        drop(lock);
        let message = err.to_string();
        assert!(message.contains("exited while starting: "), "{message}");
        let said = message.split("exited while starting: ").nth(1).unwrap();
        assert!(!said.trim().is_empty(), "{message}");
        // Nothing half-made is left to be found, and the next try may start.
        assert!(!place.server_file().exists());
        acquire(&place.lock_file(), Duration::ZERO).await.unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn a_held_start_lock_is_waited_for_then_reported() {
        let dir = scratch("lock");
        let place = Place::in_dir(dir.clone(), default_spec()).unwrap();
        let held = acquire(&place.lock_file(), Duration::ZERO).await.unwrap();
        let err = acquire(&place.lock_file(), Duration::from_millis(120))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("another kernel"), "{err}");
        drop(held);
        acquire(&place.lock_file(), Duration::ZERO).await.unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn server_file_text(pid: u32) -> String {
        serde_json::json!({
            "pid": pid, "url": "http://127.0.0.1:9", "key": "k", "model": "coder-1.5b",
            "model_file": "/m.gguf", "started": 0.0, "idle_seconds": 60.0, "slots": 4,
        })
        .to_string()
    }

    #[tokio::test]
    async fn a_server_file_of_a_process_that_is_no_server_is_removed() {
        let dir = scratch("stale");
        let place = Place::in_dir(dir.clone(), default_spec()).unwrap();
        // This test's own process: alive and ours, but no server.
        crate::private_files::create_new(
            &place.server_file(),
            server_file_text(std::process::id()).as_bytes(),
        )
        .unwrap();
        assert!(running(&place).await.unwrap().is_none());
        assert!(!place.server_file().exists(), "a stale file is removed");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_server_file_others_may_read_or_that_does_not_parse_is_never_used() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("loose");
        let place = Place::in_dir(dir.clone(), default_spec()).unwrap();
        let path = place.server_file();
        std::fs::write(&path, server_file_text(1)).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(read_server_file(&path).is_none());
        assert!(!path.exists());
        crate::private_files::create_new(&path, b"{not json").unwrap();
        assert!(read_server_file(&path).is_none());
        crate::private_files::create_new(&path, server_file_text(1).as_bytes()).unwrap();
        let read = read_server_file(&path).unwrap();
        assert_eq!((read.pid, read.key()), (1, "k"));
        assert!(
            !format!("{read:?}").contains("\"k\""),
            "the key is never shown"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
