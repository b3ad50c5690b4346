//! The benchmarks' `--workdir`: a directory the benchmark may fill and clear.
//!
//! Owns the rule that keeps a benchmark from deleting what it did not write:
//! a directory is used only when it is new, empty, or holds the marker file an
//! earlier run wrote; and only the entries the generator writes are removed
//! from it. Everything else in it is left alone, and a non-empty directory
//! without the marker is refused.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The marker file a benchmark writes into a `--workdir` it takes over.
pub const MARKER: &str = ".ci-trust-bench-workdir";

/// The top-level entries the workspace generator writes (and the build's
/// `target`): the only names ever deleted from a work directory.
pub const GENERATED: &[&str] = &["Cargo.toml", "Cargo.lock", "crates", "target"];

/// Makes `dir` ready for a generated workspace and returns it, absolute.
///
/// `dir` is created when missing; an empty directory gets the marker; a
/// directory with the marker has its generated entries removed; a non-empty
/// directory without it is refused with the reason.
pub fn prepare(dir: &Path) -> Result<PathBuf> {
    let dir = std::path::absolute(dir)
        .with_context(|| format!("cannot resolve --workdir {}", dir.display()))?;
    if dir.is_symlink() {
        bail!(
            "--workdir {} is a symbolic link; pass the directory itself",
            dir.display()
        );
    }
    if !dir.exists() {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create --workdir {}", dir.display()))?;
    } else if !dir.is_dir() {
        bail!("--workdir {} is not a directory", dir.display());
    }
    let entries: Vec<_> = std::fs::read_dir(&dir)
        .with_context(|| format!("cannot read --workdir {}", dir.display()))?
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("cannot read --workdir {}", dir.display()))?;
    let marked = dir.join(MARKER).is_file();
    if !entries.is_empty() && !marked {
        bail!(
            "--workdir {} is not empty and was not created by a benchmark (no {MARKER} in it); \
             the benchmark deletes what it generates there, so pass a new or empty directory",
            dir.display()
        );
    }
    if marked {
        for name in GENERATED {
            let path = dir.join(name);
            // `symlink_metadata`: a link planted in place of a generated
            // directory is removed as a link, never followed.
            let removed = match std::fs::symlink_metadata(&path) {
                Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&path),
                Ok(_) => std::fs::remove_file(&path),
                Err(_) => continue,
            };
            removed.with_context(|| format!("cannot clear {}", path.display()))?;
        }
    } else {
        std::fs::write(
            dir.join(MARKER),
            "Created by a ci-trust benchmark (cargo xtask bench-*); it may delete \
             Cargo.toml, Cargo.lock, crates/ and target/ here on its next run.\n",
        )
        .with_context(|| format!("cannot write the marker in {}", dir.display()))?;
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_directory_it_did_not_create_and_deletes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let precious = tmp.path().join("precious");
        std::fs::create_dir(&precious).unwrap();
        std::fs::write(precious.join("Cargo.toml"), "mine").unwrap();
        let err = format!("{:#}", prepare(&precious).unwrap_err());
        assert!(err.contains("not empty and was not created"), "{err}");
        assert_eq!(
            std::fs::read_to_string(precious.join("Cargo.toml")).unwrap(),
            "mine"
        );
        assert!(!precious.join(MARKER).exists());
    }

    #[test]
    fn takes_a_new_or_empty_directory_and_clears_only_what_it_generates() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("new");
        assert_eq!(prepare(&dir).unwrap(), dir);
        assert!(dir.join(MARKER).is_file());
        // A later run: generated entries go, anything else stays, and a
        // link planted as `crates` is removed without following it.
        std::fs::create_dir_all(dir.join("target/debug")).unwrap();
        std::fs::write(dir.join("Cargo.toml"), "generated").unwrap();
        std::fs::write(dir.join("notes.txt"), "keep me").unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("file"), "outside").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(&outside, dir.join("crates")).unwrap();
        prepare(&dir).unwrap();
        assert!(!dir.join("target").exists() && !dir.join("Cargo.toml").exists());
        assert!(!dir.join("crates").exists() && !dir.join("crates").is_symlink());
        assert_eq!(
            std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
            "keep me"
        );
        assert_eq!(
            std::fs::read_to_string(outside.join("file")).unwrap(),
            "outside"
        );
        let empty = tmp.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        prepare(&empty).unwrap();
        assert!(empty.join(MARKER).is_file());
    }
}
