//! Checking that an archive file is what it claims to be: a complete, readable
//! zstd-compressed tar holding the members its kind must have.
//!
//! Every path that puts an archive into `--out` (cache restore, artifact
//! download, fresh build) ends here, so a damaged or substituted file is never
//! handed to the GPU job. The check decodes the whole stream, verifying each
//! zstd frame's content checksum when the frame carries one, rather than only
//! looking at the first bytes.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use anyhow::{Context, Result, bail};
use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};

use super::github::{Deadline, DeadlineReader};
use crate::policy::ArchiveSpec;

/// The member every `cargo nextest archive` output holds; its absence means
/// the file is some other tar that happens to carry the right name.
pub const NEXTEST_METADATA_MEMBER: &str = "target/nextest/binaries-metadata.json";

/// What a verified archive holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveSummary {
    /// Size of the compressed file on disk.
    pub bytes: u64,
    pub members: usize,
}

/// Checks `path` against `spec`: a regular non-empty file that decodes as a
/// zstd tar to its end and holds the members its kind requires (the nextest
/// metadata for a `nextest` archive, every named binary for a `build` one).
pub fn check_archive(path: &Path, spec: &ArchiveSpec) -> Result<ArchiveSummary> {
    check_archive_within(path, spec, None)
}

/// [`check_archive`], failing once `deadline` (when given) has passed: a
/// few bytes of zstd can declare a member of terabytes, and decoding every
/// byte of it is what proves the stream intact, so only time bounds it.
pub fn check_archive_within(
    path: &Path,
    spec: &ArchiveSpec,
    deadline: Option<&Deadline>,
) -> Result<ArchiveSummary> {
    let meta = std::fs::symlink_metadata(path)
        .with_context(|| format!("{} is missing", path.display()))?;
    if !meta.file_type().is_file() {
        bail!("{} is not a regular file", path.display());
    }
    if meta.len() == 0 {
        bail!("{} is empty", path.display());
    }
    let required: Vec<&str> = if spec.nextest.is_some() {
        vec![NEXTEST_METADATA_MEMBER]
    } else {
        spec.binaries.iter().map(String::as_str).collect()
    };
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let source = BufReader::with_capacity(1 << 16, file);
    let members = match deadline {
        Some(deadline) => tar_members(
            DeadlineReader {
                inner: source,
                deadline,
                what: "while verifying the archives",
            },
            &required,
        ),
        None => tar_members(source, &required),
    };
    let (members, found) = match members {
        Ok(found) => found,
        // The decoder reports the reader's deadline error as a damaged block.
        Err(_) if deadline.is_some_and(Deadline::passed) => {
            bail!(deadline.map_or_else(String::new, |d| d.message("while verifying the archives")))
        }
        Err(err) => {
            return Err(err)
                .with_context(|| format!("{} is not a readable zstd tar", path.display()));
        }
    };
    for member in required {
        if !found.contains(&member) {
            bail!(
                "{} lacks the member {member:?} that a {} archive must hold",
                path.display(),
                if spec.nextest.is_some() {
                    "nextest"
                } else {
                    "binaries"
                }
            );
        }
    }
    Ok(ArchiveSummary {
        bytes: meta.len(),
        members,
    })
}

/// The largest extension record (a GNU long name or link, a PAX header) the
/// check reads into memory. A path is at most a few KiB; the tar reader
/// would otherwise buffer a record of any declared size whole, and a zstd
/// stream of zeros makes a record of gigabytes from a few bytes.
pub const MAX_EXTENSION_BYTES: u64 = 1 << 20;

/// Decodes a zstd tar to its very end; returns how many members it holds and
/// which of `wanted` are among them.
///
/// The entries are read raw, so that no extension record is buffered by the
/// tar reader: a GNU long name or a PAX `path` is read here, up to
/// [`MAX_EXTENSION_BYTES`], and names the member after it. Only the wanted
/// names are kept, so memory does not grow with the member count.
fn tar_members<'w>(source: impl BufRead, wanted: &[&'w str]) -> Result<(usize, Vec<&'w str>)> {
    let mut decoder = ZstdFrames::new(source);
    let mut count = 0usize;
    let mut found = Vec::new();
    {
        let mut archive = tar::Archive::new(&mut decoder);
        let entries = archive
            .entries()
            .context("cannot read the tar stream")?
            .raw(true);
        let mut pending_name: Option<Vec<u8>> = None;
        for entry in entries {
            let mut entry = entry.context("a tar header is damaged")?;
            let kind = entry.header().entry_type();
            let is_extension = kind.is_gnu_longname()
                || kind.is_gnu_longlink()
                || kind.is_pax_local_extensions()
                || kind.is_pax_global_extensions();
            if is_extension {
                let mut record = Vec::new();
                (&mut entry)
                    .take(MAX_EXTENSION_BYTES + 1)
                    .read_to_end(&mut record)
                    .context("a tar extension record is damaged")?;
                if record.len() as u64 > MAX_EXTENSION_BYTES {
                    bail!(
                        "a tar extension record (long name or PAX header) is over {MAX_EXTENSION_BYTES} bytes"
                    );
                }
                if kind.is_gnu_longname() {
                    if record.last() == Some(&0) {
                        record.pop();
                    }
                    pending_name = Some(record);
                } else if kind.is_pax_local_extensions() {
                    for extension in tar::PaxExtensions::new(&record) {
                        let extension = extension.context("a tar PAX header is malformed")?;
                        if extension.key_bytes() == b"path" {
                            pending_name = Some(extension.value_bytes().to_vec());
                        }
                    }
                }
                continue;
            }
            let path = match pending_name.take() {
                Some(name) => String::from_utf8_lossy(&name).into_owned(),
                None => entry
                    .path()
                    .context("a tar member has an unreadable path")?
                    .to_string_lossy()
                    .into_owned(),
            };
            // Reading the content is what proves the stream is intact: a
            // truncated or corrupted block fails here or in the checksum.
            io::copy(&mut entry, &mut io::sink()).with_context(|| {
                format!(
                    "the content of tar member {:?} is damaged",
                    super::github::clip(&path)
                )
            })?;
            count += 1;
            if let Some(name) = wanted.iter().find(|name| **name == path)
                && !found.contains(name)
            {
                found.push(*name);
            }
        }
    }
    // The tar reader stops at the end-of-archive marker; the rest of the
    // stream (padding, the final frame checksum) must decode too.
    io::copy(&mut decoder, &mut io::sink()).context("the zstd stream after the tar is damaged")?;
    if count == 0 {
        bail!("the tar holds no members");
    }
    Ok((count, found))
}

/// A reader over every zstd frame of a stream, one after another, as the
/// `zstd` tool writes them (and skipping skippable frames, as it does).
///
/// `ruzstd`'s own streaming decoder handles one frame and leaves the checksum
/// comparison to its caller; this reader does both, so that a damaged frame
/// or trailing garbage is an error rather than an early end of file.
pub struct ZstdFrames<R: BufRead> {
    source: R,
    frame: FrameDecoder,
    /// True between a frame header and the end of that frame's content.
    in_frame: bool,
}

impl<R: BufRead> ZstdFrames<R> {
    pub fn new(source: R) -> Self {
        ZstdFrames {
            source,
            frame: FrameDecoder::new(),
            in_frame: false,
        }
    }

    /// Reads the next frame header; false at the clean end of the stream.
    fn start_frame(&mut self) -> io::Result<bool> {
        loop {
            if self.source.fill_buf()?.is_empty() {
                return Ok(false);
            }
            match self.frame.reset(&mut self.source) {
                Ok(()) => return Ok(true),
                Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                    length,
                    ..
                })) => {
                    let length = u64::from(length);
                    let skipped = io::copy(&mut (&mut self.source).take(length), &mut io::sink())?;
                    if skipped != length {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "truncated zstd skippable frame",
                        ));
                    }
                }
                Err(err) => {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, err.to_string()));
                }
            }
        }
    }
}

impl<R: BufRead> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if !self.in_frame {
                if !self.start_frame()? {
                    return Ok(0);
                }
                self.in_frame = true;
            }
            while self.frame.can_collect() == 0 && !self.frame.is_finished() {
                self.frame
                    .decode_blocks(&mut self.source, BlockDecodingStrategy::UptoBlocks(1))
                    .map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err.to_string()))?;
            }
            let n = self.frame.read(buf)?;
            if n > 0 {
                return Ok(n);
            }
            // The frame is finished and drained: its checksum must match.
            if let (Some(expected), Some(actual)) = (
                self.frame.get_checksum_from_data(),
                self.frame.get_calculated_checksum(),
            ) && expected != actual
            {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "zstd frame checksum mismatch",
                ));
            }
            self.in_frame = false;
        }
    }
}
