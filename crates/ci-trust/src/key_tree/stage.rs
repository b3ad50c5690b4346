//! Making the key tree: a fresh directory that holds exactly the inputs of
//! one computed key, taken from the manifest `key::compute` returned (the
//! very list the key was hashed from, never a second walk of the checkout).
//!
//! Each input is placed as the key recorded it: a file is copied (the
//! kernel copies in place, and clones where the file system can) with
//! mode 0644, or 0755 when the key says executable; a symlink is made with
//! its recorded text; an absent input is left absent; a path the key
//! reaches through one of its symlinks is left to that symlink. Then every
//! input is hashed again *in the tree* and compared with the manifest, so
//! a checkout that changed since its key was computed, or a link that
//! resolves differently in the tree, is an error, never a quiet difference.
//!
//! Nothing is written outside the new directory: directories are made
//! before any symlink exists, files are created new, and symlinks come
//! last, so no write goes through a link. Must not: read a checkout path
//! the manifest does not name, or keep anything when it fails.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rayon::prelude::*;

use crate::key::{Input, KeyManifest, hashes_to};

/// A staged key tree and what making it cost.
#[derive(Debug)]
pub struct Staged {
    /// The tree of the whole checkout (its top directory, which the
    /// namespace covers): nothing but what the key names.
    pub dir: tempfile::TempDir,
    /// The workspace root's place in it (`dir` itself, unless the
    /// workspace is a subdirectory of the checkout).
    pub tree: PathBuf,
    /// The workspace tree's (device, inode), taken when it was made: a
    /// build of an earlier archive that put another directory (or a
    /// symlink to the checkout) at the tree's path is caught by it.
    #[cfg(unix)]
    pub identity: (u64, u64),
    /// Configuration files outside the workspace but inside the checkout
    /// (an ancestor's `.cargo/config.toml`) the key hashed as components.
    pub outside: usize,
    /// Regular files copied, symlinks made, and inputs recorded absent.
    pub files: usize,
    pub symlinks: usize,
    pub absent: usize,
    /// Inputs reached through a symlink of the tree (checked, not copied).
    pub through_links: usize,
    pub bytes: u64,
    pub elapsed: Duration,
}

/// How one input is placed in the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    File { executable: bool },
    Symlink,
    Directory,
    Absent,
}

fn placement(input: &Input) -> Result<Placement> {
    Ok(match input.kind.as_str() {
        "file" => Placement::File { executable: false },
        "executable" => Placement::File { executable: true },
        "symlink" => Placement::Symlink,
        "directory" => Placement::Directory,
        "absent" => Placement::Absent,
        other => bail!(
            "the key tree cannot hold the input {} of kind {other:?}: this ci-trust does not know that kind",
            escape(&input.path)
        ),
    })
}

/// A repository-relative input path, checked to be plain: relative,
/// `/`-separated normal components only (no `.`, `..`, root or empty part).
#[cfg(all(test, unix))]
fn plain(path: &str) -> Result<PathBuf> {
    placed(Path::new(""), path)
}

/// Where the input `path` (relative to the workspace, which is `sub`
/// below the checkout's top directory) lies relative to the top: `/`-
/// separated normal components, after leading `..` ones that stay inside
/// the checkout (a workspace in a subdirectory of its repository names
/// the files above it so: `../shared/cfg.txt`). No `.`, root, empty part,
/// or `..` after a name.
fn placed(sub: &Path, path: &str) -> Result<PathBuf> {
    let refuse = || {
        anyhow::anyhow!(
            "the key input {} is not a plain repository-relative path inside the checkout; the key tree refuses it",
            escape(path)
        )
    };
    if path.is_empty() || path.contains("//") || path.ends_with('/') {
        return Err(refuse());
    }
    // The workspace's own directory: a whole-package walk of a root
    // package (a build script watching its package) records its entry set.
    if path == "." {
        return Ok(sub.to_path_buf());
    }
    // `Path::components` drops an inner or trailing `.`; the key writes none.
    if path.split('/').any(|segment| segment == ".") {
        return Err(refuse());
    }
    let mut placed: Vec<&std::ffi::OsStr> = sub
        .components()
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(refuse()),
        })
        .collect::<Result<_>>()?;
    let mut named = false;
    for component in Path::new(path).components() {
        match component {
            Component::ParentDir if !named => {
                placed.pop().ok_or_else(refuse)?;
            }
            Component::Normal(name) => {
                named = true;
                placed.push(name);
            }
            _ => return Err(refuse()),
        }
    }
    if !named {
        return Err(refuse());
    }
    Ok(placed.iter().collect())
}

/// Stages the inputs of `manifest`, read from the workspace at `root`, into
/// a new directory under `parent` (the system's temporary directory when
/// `None`), laid out as the checkout whose top directory is `top` (`root`
/// or an ancestor of it): the workspace's inputs at `root`'s place, the
/// configuration files of the directories between `top` and `root` that
/// the key hashed (components `cargo-config:../…`) at theirs, and nothing
/// else of the checkout.
pub fn stage(
    root: &Path,
    top: &Path,
    manifest: &KeyManifest,
    parent: Option<&Path>,
) -> Result<Staged> {
    let started = Instant::now();
    let Ok(sub) = root.strip_prefix(top) else {
        bail!(
            "the checkout's top directory {} does not contain the workspace {}",
            top.display(),
            root.display()
        );
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix("ci-trust-key-tree-");
    let dir = match parent {
        Some(parent) => builder.tempdir_in(parent),
        None => builder.tempdir(),
    }
    .context("cannot create a directory for the key tree")?;
    let workspace_tree = dir.path().join(sub);
    std::fs::create_dir_all(&workspace_tree)
        .context("cannot make the workspace's place in the key tree")?;
    let outside = stage_outside_config(root, top, dir.path(), manifest)?;
    // Every path below is relative to the checkout's top directory, in the
    // checkout (`top`) and in the tree (`tree`) alike.
    let tree = dir.path().to_path_buf();
    let mut inputs: Vec<(&Input, PathBuf, Placement)> = Vec::new();
    for input in &manifest.inputs {
        inputs.push((input, placed(sub, &input.path)?, placement(input)?));
    }
    if inputs.iter().all(|(_, _, p)| *p == Placement::Absent) {
        bail!("the key has no file input to stage: a key tree of nothing proves nothing");
    }
    // A path below one of the key's symlinks is reached through it; the
    // file behind the link is an input of its own, at its real path.
    let links: BTreeSet<&Path> = inputs
        .iter()
        .filter(|(_, _, p)| *p == Placement::Symlink)
        .map(|(_, rel, _)| rel.as_path())
        .collect();
    let through_link = |rel: &Path| rel.ancestors().skip(1).any(|dir| links.contains(dir));
    let direct: Vec<&(&Input, PathBuf, Placement)> = inputs
        .iter()
        .filter(|(_, rel, _)| !through_link(rel))
        .collect();

    // 1. Directories, before any symlink exists: nothing here can be
    // written through a link.
    let mut dirs = std::fs::DirBuilder::new();
    dirs.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut dirs, 0o755);
    for (input, rel, placement) in &direct {
        let wanted = match placement {
            Placement::Directory => Some(tree.join(rel)),
            Placement::File { .. } | Placement::Symlink => rel.parent().map(|p| tree.join(p)),
            Placement::Absent => None,
        };
        if let Some(wanted) = wanted {
            dirs.create(&wanted).with_context(|| {
                format!(
                    "cannot make the directory of {} in the key tree",
                    escape(&input.path)
                )
            })?;
        }
    }

    // 2. Files, in parallel: a new file each, then its mode, then its hash.
    let files: Vec<&&(&Input, PathBuf, Placement)> = direct
        .iter()
        .filter(|(_, _, p)| matches!(p, Placement::File { .. }))
        .collect();
    let bytes: u64 = files
        .par_iter()
        .map(|(input, rel, placement)| -> Result<u64> {
            let source = top.join(rel);
            let target = tree.join(rel);
            if std::fs::symlink_metadata(&target).is_ok() {
                bail!(
                    "{} is in the key twice, or below another input",
                    escape(&input.path)
                );
            }
            // `copy` uses the kernel's copy (a clone where the file system
            // has them); the target does not exist, and no symlink does yet.
            let copied = std::fs::copy(&source, &target).with_context(|| {
                format!(
                    "cannot copy the key input {} into the key tree",
                    escape(&input.path)
                )
            })?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = if matches!(placement, Placement::File { executable: true }) {
                    0o755
                } else {
                    0o644
                };
                std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode))
                    .with_context(|| format!("cannot set the mode of {}", escape(&input.path)))?;
            }
            let _ = placement;
            check(&target, input)?;
            Ok(copied)
        })
        .sum::<Result<u64>>()?;

    // 3. Symlinks, last, with the text the key hashed.
    let mut symlinks = 0;
    for (input, rel, _) in direct.iter().filter(|(_, _, p)| *p == Placement::Symlink) {
        let text = std::fs::read_link(top.join(rel))
            .with_context(|| format!("cannot read the link {}", escape(&input.path)))?;
        if text.is_absolute() {
            bail!(
                "the key input {} is a link to an absolute path; the key tree holds only links that stay inside it",
                escape(&input.path)
            );
        }
        make_symlink(&text, &tree.join(rel)).with_context(|| {
            format!(
                "cannot make the link {} in the key tree",
                escape(&input.path)
            )
        })?;
        check(&tree.join(rel), input)?;
        symlinks += 1;
    }

    // 4. Everything else is checked where the tree has it: absent inputs
    // absent, and paths through a link resolving to the recorded bytes.
    let mut absent = 0;
    let mut through_links = 0;
    for (input, rel, placement) in &inputs {
        let direct_file =
            !through_link(rel) && matches!(placement, Placement::File { .. } | Placement::Symlink);
        if direct_file {
            continue;
        }
        match placement {
            Placement::Directory => {
                let meta = std::fs::symlink_metadata(tree.join(rel));
                if !meta.is_ok_and(|m| m.is_dir()) {
                    bail!(
                        "the key tree lacks the directory {} the key records",
                        escape(&input.path)
                    );
                }
            }
            _ => check(&tree.join(rel), input)?,
        }
        if *placement == Placement::Absent {
            absent += 1;
        } else {
            through_links += 1;
        }
    }
    #[cfg(unix)]
    let identity = {
        use std::os::unix::fs::MetadataExt;
        let meta =
            std::fs::symlink_metadata(&workspace_tree).context("cannot read the key tree")?;
        (meta.dev(), meta.ino())
    };
    Ok(Staged {
        dir,
        tree: workspace_tree,
        #[cfg(unix)]
        identity,
        outside,
        files: files.len(),
        symlinks,
        absent,
        through_links,
        bytes,
        elapsed: started.elapsed(),
    })
}

/// Copies the configuration files between the checkout's `top` and the
/// workspace `root` that the key hashed as components (an ancestor's
/// `.cargo/config.toml`, `cargo-config:../.cargo/config.toml`) into the
/// tree of the checkout at `top_tree`, each checked against the digest the
/// key holds. Without them the build would not see the configuration its
/// key names; with anything else of those directories, it would see what
/// its key does not.
fn stage_outside_config(
    root: &Path,
    top: &Path,
    top_tree: &Path,
    manifest: &KeyManifest,
) -> Result<usize> {
    use sha2::Digest;
    let mut staged = 0;
    for component in &manifest.components {
        let Some(label) = component.name.strip_prefix("cargo-config:") else {
            continue;
        };
        if !label.starts_with("../") {
            continue;
        }
        let source = crate::key::workspace::normalize(&root.join(label));
        let Ok(rel) = source.strip_prefix(top) else {
            continue;
        };
        if rel.as_os_str().is_empty() || source.starts_with(root) {
            continue;
        }
        let bytes = std::fs::read(&source)
            .with_context(|| format!("cannot read the configuration {}", source.display()))?;
        let digest: String = sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        if digest != component.value {
            bail!(
                "{} is not what the key hashed: the checkout changed after its key was computed; compute the key again",
                source.display()
            );
        }
        let target = top_tree.join(rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).with_context(|| {
                format!(
                    "cannot make the directory of {} in the key tree",
                    rel.display()
                )
            })?;
        }
        let mut file = std::fs::File::create_new(&target)
            .with_context(|| format!("cannot create {} in the key tree", rel.display()))?;
        std::io::Write::write_all(&mut file, &bytes)
            .with_context(|| format!("cannot write {} in the key tree", rel.display()))?;
        staged += 1;
    }
    Ok(staged)
}

/// Fails unless `path` in the tree is what `input` records.
fn check(path: &Path, input: &Input) -> Result<()> {
    let same = hashes_to(path, input)
        .with_context(|| format!("cannot check {} in the key tree", escape(&input.path)))?;
    if !same {
        bail!(
            "{} in the key tree is not what the key recorded ({}): the checkout changed after its key was computed, or a link resolves differently without the files the key left out; compute the key again",
            escape(&input.path),
            input.kind
        );
    }
    Ok(())
}

#[cfg(unix)]
fn make_symlink(text: &Path, at: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(text, at)
}

#[cfg(not(unix))]
fn make_symlink(_text: &Path, _at: &Path) -> std::io::Result<()> {
    Err(std::io::Error::other(
        "the key tree makes symlinks on Unix only",
    ))
}

/// An input path for a message: the pull request chooses file names.
fn escape(path: &str) -> String {
    path.escape_debug().to_string()
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::key::Input;
    use sha2::Digest;

    fn digest(bytes: &[u8]) -> String {
        sha2::Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    fn input(path: &str, kind: &str, bytes: &[u8]) -> Input {
        Input {
            path: path.into(),
            sha256: if kind == "absent" {
                String::new()
            } else {
                digest(bytes)
            },
            size: bytes.len() as u64,
            kind: kind.into(),
            reason: String::new(),
        }
    }

    fn manifest(inputs: Vec<Input>) -> KeyManifest {
        KeyManifest {
            key: "k".into(),
            artifact_name: "k".into(),
            components: Vec::new(),
            inputs,
            warnings: Vec::new(),
            stats: Default::default(),
        }
    }

    /// The tree holds the inputs as recorded, nothing else of the
    /// checkout, and no write leaves it (a link into a directory the key
    /// also names as files is not written through).
    #[test]
    fn the_tree_holds_exactly_the_inputs_as_the_key_recorded_them() {
        let checkout = tempfile::tempdir().unwrap();
        let c = checkout.path();
        std::fs::create_dir_all(c.join("src")).unwrap();
        std::fs::create_dir_all(c.join("shared")).unwrap();
        std::fs::create_dir_all(c.join("empty")).unwrap();
        std::fs::write(c.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
        std::fs::write(c.join("secret.txt"), "not an input\n").unwrap();
        std::fs::write(c.join("shared/cfg.txt"), "cfg\n").unwrap();
        std::fs::write(c.join("run.sh"), "#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink("shared", c.join("data")).unwrap();
        let outside = tempfile::tempdir().unwrap();
        let m = manifest(vec![
            input("src/lib.rs", "file", b"pub fn f() {}\n"),
            input("run.sh", "executable", b"#!/bin/sh\n"),
            input("data", "symlink", b"shared"),
            input("shared/cfg.txt", "file", b"cfg\n"),
            input("data/cfg.txt", "file", b"cfg\n"),
            input("app/.cargo/config.toml", "absent", b""),
        ]);
        let staged = stage(c, c, &m, Some(outside.path())).unwrap();
        let t = staged.dir.path();
        assert!(t.starts_with(outside.path()));
        assert_eq!(
            std::fs::read_to_string(t.join("data/cfg.txt")).unwrap(),
            "cfg\n"
        );
        assert_eq!(
            std::fs::read_link(t.join("data")).unwrap(),
            Path::new("shared")
        );
        assert!(!t.join("secret.txt").exists(), "a file outside the key");
        assert!(
            !t.join("empty").exists(),
            "a directory the key does not record"
        );
        assert!(!t.join("app").exists(), "an absent input");
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &str| std::fs::metadata(t.join(p)).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode("run.sh"), mode("src/lib.rs")), (0o755, 0o644));
        assert_eq!(
            (
                staged.files,
                staged.symlinks,
                staged.absent,
                staged.through_links
            ),
            (3, 1, 1, 1)
        );
        let listed: Vec<_> = walkdir::WalkDir::new(t)
            .min_depth(1)
            .sort_by_file_name()
            .into_iter()
            .map(|e| {
                e.unwrap()
                    .path()
                    .strip_prefix(t)
                    .unwrap()
                    .display()
                    .to_string()
            })
            .collect();
        assert_eq!(
            listed,
            [
                "data",
                "run.sh",
                "shared",
                "shared/cfg.txt",
                "src",
                "src/lib.rs"
            ]
        );
    }

    #[test]
    fn a_checkout_that_changed_after_its_key_is_refused_and_nothing_is_kept() {
        let checkout = tempfile::tempdir().unwrap();
        let c = checkout.path();
        std::fs::write(c.join("a.txt"), "changed\n").unwrap();
        let parent = tempfile::tempdir().unwrap();
        let err = stage(
            c,
            c,
            &manifest(vec![input("a.txt", "file", b"keyed\n")]),
            Some(parent.path()),
        )
        .unwrap_err();
        assert!(
            format!("{err:#}").contains("changed after its key was computed"),
            "{err:#}"
        );
        assert_eq!(
            std::fs::read_dir(parent.path()).unwrap().count(),
            0,
            "the failed tree is removed"
        );
        // A link whose text changed, and an absent input that appeared.
        std::os::unix::fs::symlink("b", c.join("l")).unwrap();
        assert!(
            stage(
                c,
                c,
                &manifest(vec![input("l", "symlink", b"a")]),
                Some(parent.path())
            )
            .is_err()
        );
        std::fs::write(c.join("keyed.txt"), "x").unwrap();
        let m = manifest(vec![
            input("keyed.txt", "file", b"x"),
            input("keyed.txt/../a.txt", "absent", b""),
        ]);
        assert!(
            stage(c, c, &m, Some(parent.path())).is_err(),
            "not a plain path"
        );
    }

    #[test]
    fn paths_that_are_not_plain_or_kinds_it_does_not_know_are_refused() {
        for path in ["", "/etc/passwd", "a/../b", "./a", "a//b", "a/"] {
            assert!(plain(path).is_err(), "{path:?}");
        }
        assert!(plain("a/b.rs").is_ok());
        assert!(plain("../a").is_err(), "above a workspace that is the top");
        assert!(placement(&input("x", "fifo", b"")).is_err());
        // A workspace `ws/r` below the checkout's top: leading `..` stay
        // inside the checkout, and nothing climbs after a name.
        let sub = Path::new("ws/r");
        assert_eq!(placed(sub, "src/a.rs").unwrap(), Path::new("ws/r/src/a.rs"));
        assert_eq!(
            placed(sub, "../../shared/x").unwrap(),
            Path::new("shared/x")
        );
        for path in [
            "../../../x",
            "../..",
            "a/../../x",
            "../x/../y",
            "./x",
            "a/.",
            "..",
        ] {
            assert!(placed(sub, path).is_err(), "{path:?}");
        }
        // The workspace's own directory, at the checkout's top or below it.
        assert_eq!(placed(sub, ".").unwrap(), Path::new("ws/r"));
        assert_eq!(placed(Path::new(""), ".").unwrap(), Path::new(""));
    }

    /// A workspace below its checkout: the tree is the checkout's, with the
    /// workspace's inputs at its place, an input above it at its own, the
    /// ancestor configuration the key hashed checked against its digest,
    /// and nothing else of the checkout (the file beside the workspace).
    #[test]
    fn a_workspace_below_its_checkout_is_staged_at_its_place_in_a_tree_of_the_checkout() {
        let checkout = tempfile::tempdir().unwrap();
        let c = checkout.path();
        let root = c.join("ws");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(c.join("shared")).unwrap();
        std::fs::create_dir_all(c.join(".cargo")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "lib").unwrap();
        std::fs::write(c.join("shared/cfg.txt"), "cfg").unwrap();
        std::fs::write(c.join("beside.txt"), "not an input").unwrap();
        std::fs::write(c.join(".cargo/config.toml"), "[env]\n").unwrap();
        let mut m = manifest(vec![
            input("src/lib.rs", "file", b"lib"),
            input("../shared/cfg.txt", "file", b"cfg"),
        ]);
        m.components.push(crate::key::Component {
            name: "cargo-config:../.cargo/config.toml".into(),
            value: digest(b"[env]\n"),
        });
        let parent = tempfile::tempdir().unwrap();
        let staged = stage(&root, c, &m, Some(parent.path())).unwrap();
        let t = staged.dir.path();
        assert_eq!(staged.tree, t.join("ws"));
        assert_eq!(std::fs::read(t.join("ws/src/lib.rs")).unwrap(), b"lib");
        assert_eq!(std::fs::read(t.join("shared/cfg.txt")).unwrap(), b"cfg");
        assert_eq!(
            std::fs::read(t.join(".cargo/config.toml")).unwrap(),
            b"[env]\n"
        );
        assert!(!t.join("beside.txt").exists());
        assert_eq!(staged.outside, 1);
        // The configuration changed after the key was computed.
        std::fs::write(c.join(".cargo/config.toml"), "[env]\nX = \"1\"\n").unwrap();
        let err = stage(&root, c, &m, Some(parent.path())).unwrap_err();
        assert!(
            format!("{err:#}").contains("not what the key hashed"),
            "{err:#}"
        );
    }

    /// A link the checkout points out of the tree is never made: the key
    /// refused it already, and the tree refuses it again.
    #[test]
    fn an_absolute_link_is_refused() {
        let checkout = tempfile::tempdir().unwrap();
        let c = checkout.path();
        std::os::unix::fs::symlink("/etc/hostname", c.join("l")).unwrap();
        std::fs::write(c.join("a"), "a").unwrap();
        let m = manifest(vec![
            input("a", "file", b"a"),
            input("l", "symlink", b"/etc/hostname"),
        ]);
        let err = stage(c, c, &m, None).unwrap_err();
        assert!(format!("{err:#}").contains("absolute path"), "{err:#}");
    }
}
