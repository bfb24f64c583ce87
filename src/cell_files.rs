//! Where a cell's code lives for a debugger. Jupyter frontends name a
//! cell's file after a 32-bit MurmurHash2 of its text, with the seed,
//! directory and suffix the kernel gives in its `debugInfo` reply; the
//! kernel compiles each cell under that same name, so a breakpoint set in
//! the notebook, the frames the debugger reports and tracebacks all agree.

use std::path::PathBuf;

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
pub fn directory() -> PathBuf {
    std::env::temp_dir().join(format!("mahtab_{}", std::process::id()))
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
        assert!(prefix().contains(&format!("mahtab_{}", std::process::id())));
    }
}
