//! Where a cell's code lives for a debugger. Jupyter frontends name a
//! cell's file after a 32-bit MurmurHash2 of its text, with the seed,
//! directory and suffix the kernel gives in its `debugInfo` reply; the
//! kernel compiles each cell under that same name, so a breakpoint set in
//! the notebook, the frames the debugger reports and tracebacks all agree.
//!
//! The files live in a directory of this process's own, private to the
//! user (cells may hold secrets) and named unpredictably, so nobody else can
//! make it first; it is removed when the kernel ends.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The hash's seed, as Jupyter kernels announce it (`hashSeed`).
pub const HASH_SEED: u32 = 0xC70F_6907;

/// The suffix of a cell's file (`tmpFileSuffix`).
pub const SUFFIX: &str = ".py";

/// MurmurHash2, 32-bit (the x86 variant frontends compute over the UTF-8
/// bytes of a cell).
pub fn murmur2(data: &[u8], seed: u32) -> u32 {
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    // The length goes in modulo 2^32, as the 32-bit algorithm takes it.
    let mut h = seed ^ (data.len() as u32);
    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, byte) in tail.iter().enumerate() {
            h ^= u32::from(*byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^ (h >> 15)
}

/// The directory of this kernel's cell files (`tmpFilePrefix` is it with a
/// trailing separator).
pub fn directory() -> &'static Path {
    static DIRECTORY: OnceLock<PathBuf> = OnceLock::new();
    DIRECTORY.get_or_init(|| {
        let random = uuid::Uuid::new_v4().simple().to_string();
        std::env::temp_dir().join(format!("mahtab_{}_{}", std::process::id(), &random[..12]))
    })
}

/// Writes the file a cell with `code` compiles under; returns its name.
pub fn write(code: &str) -> std::io::Result<String> {
    crate::private_files::private_dir(directory())?;
    let path = file_name(code);
    crate::private_files::replace(Path::new(&path), code.as_bytes())?;
    Ok(path)
}

/// Removes the directory and the cell files in it (at the kernel's end).
pub fn remove_all() {
    let dir = directory();
    // Only ever a directory this process made: `write` refuses any other.
    if std::fs::symlink_metadata(dir).is_ok_and(|meta| meta.is_dir()) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// `tmpFilePrefix`: the directory, ending in a separator.
pub fn prefix() -> String {
    format!("{}{}", directory().display(), std::path::MAIN_SEPARATOR)
}

/// The file name of a cell with this code.
pub fn file_name(code: &str) -> String {
    format!(
        "{}{}{SUFFIX}",
        prefix(),
        murmur2(code.as_bytes(), HASH_SEED)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_match_what_frontends_compute() {
        // Values computed with the function Jupyter kernels and frontends
        // share, over UTF-8 bytes.
        for (code, hash) in [
            ("", 3_990_065_800),
            ("a", 2_167_009_006),
            ("abcd", 804_720_481),
            ("print(1)", 3_773_950_048),
            (
                "def f(a, b):\n    c = a + b\n    return c\n\nf(2, 3)",
                1_440_027_060,
            ),
            ("é日本", 1_114_760_302),
        ] {
            assert_eq!(murmur2(code.as_bytes(), HASH_SEED), hash, "{code:?}");
        }
    }

    #[test]
    fn a_cells_file_is_in_this_kernels_directory() {
        let name = file_name("print(1)");
        assert!(name.starts_with(&prefix()), "{name}");
        assert!(name.ends_with("/3773950048.py"), "{name}");
        assert!(prefix().contains(&format!("mahtab_{}_", std::process::id())));
    }

    #[test]
    fn cell_files_are_private_and_removed_at_the_end() {
        use std::os::unix::fs::MetadataExt;
        let path = write("x = 1").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "x = 1");
        assert_eq!(
            std::fs::metadata(directory()).unwrap().mode() & 0o777,
            0o700
        );
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        remove_all();
        assert!(!directory().exists());
    }
}
