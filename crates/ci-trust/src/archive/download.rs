//! Downloading an accepted artifact and installing its archives into `--out`.
//!
//! The zip streams to a temporary file beside `--out` (never whole in
//! memory, never past the listing's `size_in_bytes` or
//! `artifacts.max-download-bytes`, never slower than a floor, never past the
//! reuse path's deadline),
//! its SHA-256 is checked against the artifact's `digest`, only the expected
//! archive names are extracted into a staging directory, each is verified as
//! a zstd tar, and only then are they renamed into `--out`. Any failure drops
//! the staging directory, so `--out` never holds a partial or unverified file.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use super::github::{Artifact, Deadline, DeadlineReader, Github, clip};
use super::verify;
use crate::gha;
use crate::policy::ArchiveSpec;

/// How often a running download reports its progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Downloads `artifact`, checks it, and installs `specs`' archives into `out`.
/// Returns the installed paths. Every stage after the download (extraction,
/// verification) stops at the reuse path's deadline too.
pub async fn install(
    github: &Github,
    artifact: &Artifact,
    specs: &[ArchiveSpec],
    out: &Path,
    max_bytes: u64,
) -> Result<Vec<PathBuf>> {
    let deadline = *github.deadline();
    let staging = staging_dir(out)?;
    let zip_path = staging.path().join("artifact.zip");
    download(github, artifact, &zip_path, max_bytes).await?;
    let extracted = staging.path().join("extracted");
    std::fs::create_dir(&extracted)
        .with_context(|| format!("cannot create {}", extracted.display()))?;
    extract(&zip_path, specs, &extracted, max_bytes, Some(&deadline))?;
    for spec in specs {
        deadline.check("before verifying the archives")?;
        verify::check_archive_within(&extracted.join(&spec.file), spec, Some(&deadline))?;
    }
    deadline.check("before installing the archives")?;
    move_into_place(&extracted, specs, out)
}

/// A fresh directory beside `out`, on the same filesystem so that the final
/// renames are atomic; removed when dropped.
pub fn staging_dir(out: &Path) -> Result<tempfile::TempDir> {
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    tempfile::Builder::new()
        .prefix(".gpu-archive-staging-")
        .tempdir_in(parent)
        .with_context(|| format!("cannot create a staging directory in {}", parent.display()))
}

/// Renames each verified archive from `staging` into `out`, replacing what
/// was there. If one rename fails, the ones already done are removed again.
pub fn move_into_place(staging: &Path, specs: &[ArchiveSpec], out: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut done = Vec::new();
    for spec in specs {
        let target = out.join(&spec.file);
        if let Err(err) = std::fs::rename(staging.join(&spec.file), &target) {
            for path in &done {
                let _ = std::fs::remove_file(path);
            }
            return Err(err)
                .with_context(|| format!("cannot move an archive to {}", target.display()));
        }
        done.push(target);
    }
    Ok(done)
}

/// Streams the artifact's zip to `dest`, checking size and digest. The HTTP
/// side (the redirect without the token, the byte and time bounds) is
/// [`Github`]'s; the bytes may not exceed the listing's `size_in_bytes`.
async fn download(github: &Github, artifact: &Artifact, dest: &Path, max_bytes: u64) -> Result<()> {
    let expected = artifact.size_in_bytes;
    if expected > max_bytes {
        bail!("the artifact is {expected} bytes, over artifacts.max-download-bytes = {max_bytes}");
    }
    // The digest is what ties the blob host's bytes to what the trusted run
    // uploaded; without one they would be taken on the blob host's word.
    if artifact.digest.is_none() {
        bail!(
            "the listing gives no digest for it, so its bytes could not be checked against what its run uploaded (actions/upload-artifact v4 and later give one); not downloading it"
        );
    }
    let file =
        File::create_new(dest).with_context(|| format!("cannot create {}", dest.display()))?;
    let mut writer = BufWriter::with_capacity(1 << 20, file);
    let mut hasher = Sha256::new();
    let mut received: u64 = 0;
    let started = Instant::now();
    let mut last_report = started;
    github
        .download_artifact_zip(artifact.id, expected, |data| {
            received += data.len() as u64;
            hasher.update(data);
            writer
                .write_all(data)
                .with_context(|| format!("cannot write {}", dest.display()))?;
            if last_report.elapsed() >= PROGRESS_EVERY {
                last_report = Instant::now();
                gha::log(&format!(
                    "downloading artifact {}: {} of {} ({:.0} MiB/s)",
                    artifact.id,
                    mib(received),
                    mib(expected),
                    received as f64 / (1 << 20) as f64 / started.elapsed().as_secs_f64()
                ));
            }
            Ok(())
        })
        .await?;
    // Flushed, not synced: a sync waits on the disk and cannot be cut off
    // at the deadline, and nothing here needs the bytes to survive a crash
    // of the runner (the zip is read back through the page cache).
    writer
        .into_inner()
        .map_err(|err| err.into_error())
        .with_context(|| format!("cannot write {}", dest.display()))?;
    let actual = hex(&hasher.finalize());
    if let Some(digest) = &artifact.digest {
        let Some(expected) = digest.strip_prefix("sha256:") else {
            bail!(
                "the artifact digest {:?} is not a sha256 digest; cannot verify it",
                clip(digest)
            );
        };
        if !expected.eq_ignore_ascii_case(&actual) {
            bail!(
                "the download's SHA-256 {actual} does not match the artifact digest {}",
                clip(expected)
            );
        }
    }
    gha::log(&format!(
        "downloaded artifact {}: {} in {:.1} s, sha256 {actual} (matches the artifact digest)",
        artifact.id,
        mib(received),
        started.elapsed().as_secs_f64(),
    ));
    Ok(())
}

/// Extracts exactly the archives named by `specs` from the zip at `zip_path`
/// into the empty directory `dest`.
///
/// Every entry is checked before anything is written: an entry that is not
/// one of the expected plain file names (an absolute path, `..`, a
/// directory, a nested path, anything else), a symlink, a duplicate, or a
/// missing archive rejects the whole artifact.
pub fn extract(
    zip_path: &Path,
    specs: &[ArchiveSpec],
    dest: &Path,
    max_bytes: u64,
    deadline: Option<&Deadline>,
) -> Result<()> {
    let file =
        File::open(zip_path).with_context(|| format!("cannot open {}", zip_path.display()))?;
    // Reading the central directory is work in proportion to its entries,
    // which the artifact chooses: under the deadline too.
    let never = Deadline::after(crate::policy::MAX_REUSE_SECS);
    let what = "while extracting the artifact";
    // The zip reader indexes every entry of the central directory before a
    // name can be checked, in memory that grows with their number: reading
    // the directory has a budget of its own, lifted once it is indexed.
    let index_budget = Rc::new(Cell::new(Some(MAX_ZIP_INDEX_BYTES)));
    let file = io::BufReader::new(IndexBudget {
        inner: DeadlineReader {
            inner: file,
            deadline: deadline.unwrap_or(&never),
            what,
        },
        left: Rc::clone(&index_budget),
    });
    let mut archive = match zip::ZipArchive::new(file) {
        Ok(archive) => archive,
        Err(_) if deadline.is_some_and(Deadline::passed) => {
            bail!(deadline.map_or_else(String::new, |d| d.message(what)))
        }
        Err(_) if index_budget.get() == Some(0) => bail!(
            "the artifact's zip directory is more than {} KiB to read, where {} archive(s) need a few hundred bytes: refused before it fills memory",
            MAX_ZIP_INDEX_BYTES >> 10,
            specs.len()
        ),
        Err(err) => return Err(err).context("the artifact is not a readable zip"),
    };
    index_budget.set(None);
    // The zip reader keeps one entry per name; which of two same-named
    // entries a tool extracts differs between tools, so refuse them all.
    if archive.has_duplicate_names() {
        bail!("the artifact holds two entries with the same name");
    }
    let expected: BTreeSet<&str> = specs.iter().map(|s| s.file.as_str()).collect();
    let mut seen = BTreeSet::new();
    for index in 0..archive.len() {
        let entry = archive
            .by_index_raw(index)
            .with_context(|| format!("zip entry {index} is unreadable"))?;
        let name = String::from_utf8_lossy(entry.name_raw()).into_owned();
        if !expected.contains(name.as_str()) {
            bail!(
                "the artifact holds an unexpected entry {:?}; expected only {expected:?}",
                clip(&name)
            );
        }
        if entry.is_symlink() || !entry.is_file() {
            bail!("the artifact entry {name:?} is not a regular file");
        }
        if !seen.insert(name.clone()) {
            bail!("the artifact holds {name:?} twice");
        }
    }
    if let Some(missing) = expected.iter().find(|name| !seen.contains(**name)) {
        bail!("the artifact lacks the archive {missing:?}");
    }
    let mut budget = max_bytes;
    for spec in specs {
        let mut entry = archive
            .by_name(&spec.file)
            .with_context(|| format!("cannot open {:?} in the artifact", spec.file))?;
        let target = dest.join(&spec.file);
        let mut out = BufWriter::with_capacity(
            1 << 20,
            File::create_new(&target)
                .with_context(|| format!("cannot create {}", target.display()))?,
        );
        // The zip reader checks each entry's CRC-32 when it reaches the end.
        let mut reader: Box<dyn Read + '_> = match deadline {
            Some(deadline) => Box::new(DeadlineReader {
                inner: (&mut entry).take(budget + 1),
                deadline,
                what,
            }),
            None => Box::new((&mut entry).take(budget + 1)),
        };
        let written = match io::copy(&mut reader, &mut out) {
            Ok(written) => written,
            Err(_) if deadline.is_some_and(Deadline::passed) => {
                bail!(deadline.map_or_else(String::new, |d| d.message(what)))
            }
            Err(err) => {
                return Err(err)
                    .with_context(|| format!("cannot extract {:?} from the artifact", spec.file));
            }
        };
        if written > budget {
            bail!("the artifact's archives expand past artifacts.max-download-bytes = {max_bytes}");
        }
        budget -= written;
        // Not synced, like the download: the archive is verified by
        // reading it back, and a sync would outlast the deadline.
        out.into_inner()
            .map_err(|err| err.into_error())
            .with_context(|| format!("cannot write {}", target.display()))?;
    }
    Ok(())
}

/// The most bytes the zip reader may read to find and index the central
/// directory (the end records are in the last 64 KiB, and each entry takes
/// 46 bytes and its name): at most about 20,000 entries are ever indexed,
/// a few MiB of memory, whatever the artifact's size.
pub const MAX_ZIP_INDEX_BYTES: u64 = 1 << 20;

/// A reader that fails once `left` bytes have been read, while `left` is
/// `Some`; shared, so that the caller can lift the limit after the zip
/// reader (which owns this) has indexed the directory.
struct IndexBudget<R> {
    inner: R,
    left: Rc<Cell<Option<u64>>>,
}

impl<R: Read> Read for IndexBudget<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(left) = self.left.get() else {
            return self.inner.read(buf);
        };
        if left == 0 {
            return Err(io::Error::other(
                "the zip directory is larger than its budget",
            ));
        }
        let wanted = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let read = self.inner.read(&mut buf[..wanted])?;
        self.left.set(Some(left - read as u64));
        Ok(read)
    }
}

impl<R: io::Seek> io::Seek for IndexBudget<R> {
    fn seek(&mut self, position: io::SeekFrom) -> io::Result<u64> {
        self.inner.seek(position)
    }
}

pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
