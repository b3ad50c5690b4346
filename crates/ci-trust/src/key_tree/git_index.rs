//! What the checkout's git index tracks below a directory, read as data
//! (git never runs: its configuration can name programs).
//!
//! The key tree binds the build's output directories inside the checkout
//! (`target/`, which a cache restores) through from the checkout, with
//! whatever is in them. A pull request can commit files there, and cargo
//! takes a fingerprint and an rlib it finds for fresh build output: a
//! tracked path below an output directory is what the tree must refuse.
//! actions/checkout writes the index; the pull request's bytes are the
//! working tree, never `.git/`.
//!
//! The index format (git's `Documentation/gitformat-index.txt`): `DIRC`,
//! version 2, 3 or 4, the entry count, then each entry's stat data, object
//! id (20 bytes, or 32 in a SHA-256 repository), flags and path (versions
//! 2 and 3: NUL-padded to a multiple of 8; version 4: a prefix of the
//! previous path, then the rest). Must not: run git, or read anything but
//! `.git`, the index and the repository's object format.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// What the index says about a directory.
#[derive(Debug, PartialEq, Eq)]
pub enum Tracked {
    /// The tracked paths below it (repository-relative), at most a few.
    Paths(Vec<String>),
    /// The checkout has no git index to ask.
    NoIndex,
}

/// The tracked paths below `dir` (repository-relative, `/`-separated) in
/// the git index of the checkout at `root`, at most `limit` of them.
pub fn tracked_below(root: &Path, dir: &str, limit: usize) -> Result<Tracked> {
    let Some((index, git_dir)) = index_file(root)? else {
        return Ok(Tracked::NoIndex);
    };
    let bytes = match std::fs::read(&index) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Tracked::NoIndex),
        Err(err) => {
            return Err(err).with_context(|| format!("cannot read {}", index.display()));
        }
    };
    let hash_len = if sha256_repository(&git_dir) { 32 } else { 20 };
    let prefix = format!("{}/", dir.trim_end_matches('/'));
    let mut found = Vec::new();
    for path in entries(&bytes, hash_len)
        .with_context(|| format!("cannot read the git index {}", index.display()))?
    {
        if path.starts_with(prefix.as_bytes()) || path == dir.as_bytes() {
            found.push(String::from_utf8_lossy(&path).into_owned());
            if found.len() >= limit {
                break;
            }
        }
    }
    Ok(Tracked::Paths(found))
}

/// The index file and the git directory of the checkout at `root`: `.git/`,
/// or the directory a `.git` file names (`gitdir: …`, a worktree).
fn index_file(root: &Path) -> Result<Option<(PathBuf, PathBuf)>> {
    let dot_git = root.join(".git");
    let Ok(meta) = std::fs::symlink_metadata(&dot_git) else {
        return Ok(None);
    };
    let git_dir = if meta.is_dir() {
        dot_git
    } else if meta.is_file() {
        let text = std::fs::read_to_string(&dot_git)
            .with_context(|| format!("cannot read {}", dot_git.display()))?;
        let Some(dir) = text.trim_end().strip_prefix("gitdir: ") else {
            bail!("{} is not a gitdir file", dot_git.display());
        };
        root.join(dir)
    } else {
        return Ok(None);
    };
    Ok(Some((git_dir.join("index"), git_dir)))
}

/// Whether the repository's objects are named by SHA-256
/// (`extensions.objectformat = sha256` in its configuration).
fn sha256_repository(git_dir: &Path) -> bool {
    let config = std::fs::read_to_string(git_dir.join("config")).unwrap_or_default();
    config.lines().any(|line| {
        let line = line.trim().to_ascii_lowercase();
        line.starts_with("objectformat") && line.ends_with("sha256")
    })
}

/// Every entry's path, in index order.
fn entries(bytes: &[u8], hash_len: usize) -> Result<Vec<Vec<u8>>> {
    let take = |at: usize, len: usize| -> Result<&[u8]> {
        bytes
            .get(at..at + len)
            .context("the index ends inside an entry")
    };
    let u32_at = |at: usize| -> Result<u32> {
        let b = take(at, 4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    if take(0, 4)? != b"DIRC" {
        bail!("not a git index (no DIRC signature)");
    }
    let version = u32_at(4)?;
    if !(2..=4).contains(&version) {
        bail!("git index version {version} is not one this reader knows (2, 3 or 4)");
    }
    let count = u32_at(8)?;
    let mut at = 12;
    let mut paths = Vec::new();
    let mut previous: Vec<u8> = Vec::new();
    for _ in 0..count {
        let start = at;
        // ctime, mtime (8 bytes each), dev, ino, mode, uid, gid, size.
        at += 40 + hash_len;
        let flags = take(at, 2)?;
        let flags = u16::from_be_bytes([flags[0], flags[1]]);
        at += 2;
        if version >= 3 && flags & 0x4000 != 0 {
            at += 2;
        }
        let path = if version == 4 {
            let (strip, used) = varint(bytes.get(at..).unwrap_or(&[]))?;
            at += used;
            let rest = bytes.get(at..).unwrap_or(&[]);
            let end = memchr::memchr(0, rest).context("an index path has no end")?;
            let keep = previous
                .len()
                .checked_sub(usize::try_from(strip).unwrap_or(usize::MAX))
                .context("an index path strips more than the previous path holds")?;
            let mut path = previous[..keep].to_vec();
            path.extend_from_slice(&rest[..end]);
            at += end + 1;
            path
        } else {
            let rest = bytes.get(at..).unwrap_or(&[]);
            let end = memchr::memchr(0, rest).context("an index path has no end")?;
            let path = rest[..end].to_vec();
            // The entry, NUL-padded (1 to 8 NULs) to a multiple of 8 bytes.
            let len = at + end - start;
            at = start + (len + 8) / 8 * 8;
            path
        };
        previous.clone_from(&path);
        paths.push(path);
    }
    Ok(paths)
}

/// Git's offset encoding: 7 bits a byte, high bit set while more follow,
/// each continuation adding one before the shift.
fn varint(bytes: &[u8]) -> Result<(u64, usize)> {
    let mut iter = bytes.iter();
    let mut byte = *iter.next().context("the index ends inside a number")?;
    let mut value = u64::from(byte & 0x7f);
    let mut used = 1;
    while byte & 0x80 != 0 {
        byte = *iter.next().context("the index ends inside a number")?;
        value = ((value + 1) << 7) | u64::from(byte & 0x7f);
        used += 1;
        if used > 9 {
            bail!("a number in the index is too long");
        }
    }
    Ok((value, used))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> bool {
        std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// A real index of each version, written by git itself.
    #[test]
    fn tracked_paths_below_a_directory_are_read_from_a_real_index() {
        let repo = tempfile::tempdir().unwrap();
        let r = repo.path();
        if !git(r, &["init", "-q"]) {
            eprintln!("skipped: git is not installed");
            return;
        }
        for file in [
            "src/lib.rs",
            "target/debug/.fingerprint/x/lib-x",
            "targets.txt",
            "target2/a",
        ] {
            std::fs::create_dir_all(r.join(file).parent().unwrap()).unwrap();
            std::fs::write(r.join(file), "x").unwrap();
        }
        assert!(git(r, &["add", "-f", "."]));
        for version in ["2", "3", "4"] {
            assert!(git(r, &["update-index", "--index-version", version]));
            assert_eq!(
                tracked_below(r, "target", 5).unwrap(),
                Tracked::Paths(vec!["target/debug/.fingerprint/x/lib-x".into()]),
                "index version {version}"
            );
            assert_eq!(tracked_below(r, "out", 5).unwrap(), Tracked::Paths(vec![]));
        }
        let plain = tempfile::tempdir().unwrap();
        assert_eq!(
            tracked_below(plain.path(), "target", 5).unwrap(),
            Tracked::NoIndex
        );
    }

    #[test]
    fn a_damaged_index_is_an_error_not_an_empty_answer() {
        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(repo.path().join(".git")).unwrap();
        std::fs::write(
            repo.path().join(".git/index"),
            b"DIRC\0\0\0\x02\0\0\0\x05short",
        )
        .unwrap();
        assert!(tracked_below(repo.path(), "target", 5).is_err());
        std::fs::write(repo.path().join(".git/index"), b"NOPE").unwrap();
        assert!(tracked_below(repo.path(), "target", 5).is_err());
        assert_eq!(varint(&[0x80, 0x01]).unwrap(), (129, 2));
    }
}
