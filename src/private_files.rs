//! Files only their owner may read, in directories only their owner may
//! enter: connection files (they hold the HMAC key) and cell files (cells
//! may hold secrets); and files written whole or not at all. A directory someone else made, or may write to, is
//! refused rather than used, and no write follows a symbolic link, so
//! another user of the host can neither read these files nor plant a file
//! or link where they will be written.

use std::fs::{DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Makes `dir` (mode 0700) or checks the one there: a real directory (not
/// a link), owned by this user, that nobody else may enter or write. One of
/// ours with looser permissions is tightened.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    match DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.file_type().is_dir() {
        return Err(refused(dir, "is not a directory"));
    }
    // SAFETY: geteuid has no preconditions.
    if meta.uid() != unsafe { libc::geteuid() } {
        return Err(refused(dir, "belongs to another user"));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Writes `contents` to a new file at `path`, readable by its owner only;
/// fails if anything (a file, a link) is there already.
pub fn create_new(path: &Path, contents: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    file.write_all(contents)
}

/// Writes `contents` to `path`, replacing a file there but never following
/// a link; a file it makes is readable by its owner only. For files in a
/// directory [`private_dir`] checked.
pub fn replace(path: &Path, contents: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    file.write_all(contents)
}

/// Writes `contents` to `path` whole or not at all: into a new file beside
/// it (made with `mode`), flushed to disk, then renamed over it, so a reader
/// never sees half a file and a crash leaves the old one.
pub fn write_whole(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let temporary = dir.join(format!(".{}.tmp", uuid::Uuid::new_v4()));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&temporary)?;
        file.write_all(contents)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result
}

fn refused(dir: &Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{} {why}; not used", dir.display()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("mahtab-private-{tag}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_private_dir_is_made_0700_and_a_loose_one_of_ours_tightened() {
        let base = scratch("dir");
        let dir = base.join("a");
        private_dir(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        private_dir(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn a_link_or_a_file_in_the_dirs_place_is_refused() {
        let base = scratch("link");
        let target = base.join("target");
        std::fs::create_dir(&target).unwrap();
        let link = base.join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(
            private_dir(&link).unwrap_err().kind(),
            io::ErrorKind::PermissionDenied
        );
        let file = base.join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(private_dir(&file).is_err());
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn writes_never_follow_a_planted_link_and_new_files_are_0600() {
        let base = scratch("write");
        let victim = base.join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let planted = base.join("kernel.json");
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        assert!(create_new(&planted, b"key").is_err());
        assert!(replace(&planted, b"key").is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");

        let fresh = base.join("fresh.json");
        create_new(&fresh, b"key").unwrap();
        assert_eq!(std::fs::metadata(&fresh).unwrap().mode() & 0o777, 0o600);
        assert!(create_new(&fresh, b"again").is_err(), "never overwrites");
        replace(&fresh, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&fresh).unwrap(), "new");
        std::fs::remove_dir_all(base).unwrap();
    }
}
