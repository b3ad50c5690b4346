//! The key tree: the fresh build compiles a tree that holds exactly the
//! inputs of its key, and nothing else of the checkout, so that the archive
//! is a function of the key and reusing it under that key is exact.
//!
//! Owns: staging the tree from the manifest `key::compute` returned
//! ([`stage`]), and running a build in it ([`KeyTree::isolate`]): on Linux
//! the tree is mounted at the checkout's own path in a private mount and
//! PID namespace (`namespace.rs`), with the build's output directories of
//! the checkout (its target directory) bound through, so paths, `file!()`,
//! nextest's recorded workspace and a restored target directory stay what
//! they were, and the checkout itself cannot be reached. [`TreeView`] tells
//! the trace where a path the build used lies on this process's disk.
//! Where no namespace can be made (not Linux, no `CAP_SYS_ADMIN` and no
//! user namespaces), [`available`] says why, and the caller falls back to
//! the checkout build (or fails, when the trust policy requires the tree).
//! Must not: decide what the key holds (`key`), or read the checkout
//! beyond the paths the manifest names.

mod git_index;
#[cfg(target_os = "linux")]
mod namespace;
pub mod stage;

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::key::KeyManifest;

/// How builds enter the key tree here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mechanism {
    #[cfg(target_os = "linux")]
    privilege: namespace::Privilege,
}

impl Mechanism {
    pub fn describe(&self) -> String {
        #[cfg(target_os = "linux")]
        return format!(
            "mounted at the checkout's path in a private mount and PID namespace ({})",
            self.privilege.describe()
        );
        #[cfg(not(target_os = "linux"))]
        unreachable!("no mechanism exists off Linux")
    }
}

/// Makes [`available`] answer no, with the variable's value as the reason:
/// for trying the fallback where a key tree could be made. It can only take
/// the tree away; `[verify] key-tree = "required"` still refuses to build.
pub const DISABLE_VAR: &str = "CI_TRUST_NO_KEY_TREE";

/// Whether builds can run in a key tree here; otherwise why not, with the fix.
pub fn available() -> std::result::Result<Mechanism, String> {
    if let Some(reason) = std::env::var_os(DISABLE_VAR).filter(|v| !v.is_empty()) {
        return Err(format!(
            "{DISABLE_VAR} is set ({})",
            reason.to_string_lossy()
        ));
    }
    #[cfg(target_os = "linux")]
    {
        namespace::probe().map(|privilege| Mechanism { privilege })
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err("the key tree needs Linux mount namespaces; this system has none".to_owned())
    }
}

/// The repository around a workspace at `root`: the nearest of `root` and
/// its ancestors whose `.git` is a directory (a `.git` file only marks a
/// submodule or a worktree, whose superproject's files are the pull
/// request's too), else the nearest whose `.git` is a file (a worktree).
fn repository_of(root: &Path) -> Option<PathBuf> {
    let git = |want_dir: bool| {
        root.ancestors()
            .find(|dir| {
                std::fs::symlink_metadata(dir.join(".git"))
                    .is_ok_and(|meta| !want_dir || meta.is_dir())
            })
            .map(Path::to_path_buf)
    };
    git(true).or_else(|| git(false))
}

/// The directory the key tree covers for a workspace at `root`: the whole
/// checkout, not only the workspace. A workspace in a subdirectory of its
/// repository (`--root repo/rust`) would otherwise see the rest of the pull
/// request's checkout through `..`: files no key names, which the trace
/// counts as outside the repository. The checkout is the repository around
/// `root` ([`repository_of`]), or the policy's `key.repository-root` where
/// that is wider, else `root` itself.
pub fn checkout_top(root: &Path, configured: Option<&str>) -> PathBuf {
    let named = configured.map(|up| crate::key::workspace::normalize(&root.join(up)));
    [repository_of(root), named]
        .into_iter()
        .flatten()
        .filter(|dir| root.starts_with(dir) && dir.parent().is_some())
        .min_by_key(|dir| dir.components().count())
        .unwrap_or_else(|| root.to_path_buf())
}

/// A staged key tree for the checkout at `root`.
#[derive(Debug)]
pub struct KeyTree {
    staged: stage::Staged,
    root: PathBuf,
    /// The checkout's top directory ([`checkout_top`]): what the tree
    /// covers in the namespace.
    top: PathBuf,
    mechanism: Mechanism,
}

impl KeyTree {
    /// Stages the inputs of `manifest` (the key of the workspace at `root`,
    /// in the checkout whose top directory is `top`).
    pub fn stage(
        root: &Path,
        top: &Path,
        manifest: &KeyManifest,
        mechanism: Mechanism,
    ) -> Result<KeyTree> {
        let staged = stage::stage(root, top, manifest, None)?;
        Ok(KeyTree {
            staged,
            root: root.to_path_buf(),
            top: top.to_path_buf(),
            mechanism,
        })
    }

    /// The workspace's tree on this process's disk.
    pub fn dir(&self) -> &Path {
        &self.staged.tree
    }

    /// The tree of the whole checkout (its top directory's place).
    pub fn top_dir(&self) -> &Path {
        self.staged.dir.path()
    }

    pub fn staged(&self) -> &stage::Staged {
        &self.staged
    }

    /// One line for the log: what the tree holds, what it cost, how builds
    /// enter it.
    pub fn describe(&self) -> String {
        let s = &self.staged;
        format!(
            "{} files, {} symlinks, {} inputs recorded absent ({:.1} MiB), staged in {:.3} s; {}",
            s.files,
            s.symlinks,
            s.absent,
            s.bytes as f64 / (1024.0 * 1024.0),
            s.elapsed.as_secs_f64(),
            self.mechanism.describe()
        )
    }

    /// The directories of the checkout a build writes to, bound through
    /// into the tree: those of `output_dirs` inside the checkout (the
    /// others are visible where they are).
    pub fn write_through(&self, output_dirs: &[PathBuf]) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = output_dirs
            .iter()
            .map(|dir| crate::key::workspace::normalize(dir))
            .filter(|dir| dir.starts_with(&self.top))
            .collect();
        dirs.sort();
        dirs.dedup();
        dirs
    }

    /// Refuses output directories of the checkout that the build writes to
    /// (bound through into the tree, with what is in them) when the
    /// checkout commits files there (its git index tracks them): cargo
    /// would take a committed fingerprint and library for fresh build
    /// output. Returns a warning when the checkout has no git index to ask.
    pub fn refuse_committed_output(&self, output_dirs: &[PathBuf]) -> Result<Option<String>> {
        let mut unknown = Vec::new();
        // The index is the repository's: a wider top (a policy's
        // `key.repository-root`) holds none of its own.
        let repository = repository_of(&self.root).unwrap_or_else(|| self.top.clone());
        for dir in self.write_through(output_dirs) {
            let Ok(rel) = dir.strip_prefix(&repository) else {
                // Inside the tree's top but outside the repository: not
                // a directory the pull request's commits can fill.
                continue;
            };
            let rel = rel.to_string_lossy().replace('\\', "/");
            match git_index::tracked_below(&repository, &rel, 3)? {
                git_index::Tracked::Paths(paths) if !paths.is_empty() => anyhow::bail!(
                    "the checkout commits {} under the build's output directory {}: bound into the key tree, cargo would take it for build output it made; remove it from the repository, or build into a target directory outside the checkout (--target-dir, CARGO_TARGET_DIR)",
                    paths
                        .iter()
                        .map(|p| p.escape_debug().to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    rel.escape_debug()
                ),
                git_index::Tracked::Paths(_) => {}
                git_index::Tracked::NoIndex => unknown.push(rel),
            }
        }
        Ok((!unknown.is_empty()).then(|| {
            format!(
                "the checkout has no git index, so nothing shows that it commits no file under the build's output directories inside it ({}), which the key tree binds through: a committed file there would pass for build output; build into a target directory outside the checkout",
                unknown.join(", ")
            )
        }))
    }

    /// Makes `command` (which starts in `cwd`, the checkout's root or below
    /// it) run in the tree, with `output_dirs` of the checkout bound through
    /// and those outside it writable (everything else but the temporary
    /// directories and `$CARGO_HOME` is read-only to the build).
    pub fn isolate(
        &self,
        command: &mut std::process::Command,
        cwd: &Path,
        output_dirs: &[PathBuf],
    ) -> Result<()> {
        #[cfg(target_os = "linux")]
        {
            use anyhow::Context as _;
            let outside: Vec<PathBuf> = output_dirs
                .iter()
                .map(|dir| crate::key::workspace::normalize(dir))
                .filter(|dir| !dir.starts_with(&self.top))
                .collect();
            if let Some(dir) = output_dirs
                .iter()
                .map(|dir| crate::key::workspace::normalize(dir))
                .find(|dir| self.root.starts_with(dir))
            {
                anyhow::bail!(
                    "the build's output directory {} contains the workspace {}: bound through, it would show the build the checkout; give the build a target directory of its own",
                    dir.display(),
                    self.root.display()
                );
            }
            if !cwd.starts_with(&self.root) {
                anyhow::bail!(
                    "the build starts in {}, outside the workspace {}",
                    cwd.display(),
                    self.root.display()
                );
            }
            // They exist before the build, so that they can be kept writable.
            for dir in &outside {
                std::fs::create_dir_all(dir).with_context(|| {
                    format!("cannot create the output directory {}", dir.display())
                })?;
            }
            // The build must start in the workspace tree staged, not in
            // whatever an earlier build left at the tree's path.
            let identity = (cwd == self.root).then_some(self.staged.identity);
            let isolation = namespace::Isolation::new(
                self.mechanism.privilege,
                self.top_dir(),
                &self.top,
                cwd,
                identity,
                &self.write_through(output_dirs),
                &outside,
            )?;
            isolation.apply(command);
            Ok(())
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (command, cwd, output_dirs);
            anyhow::bail!("the key tree needs Linux")
        }
    }

    /// Where the paths a build in the tree used lie on this process's disk.
    pub fn view(&self, output_dirs: &[PathBuf]) -> TreeView {
        TreeView {
            root: self.top.clone(),
            tree: self.top_dir().to_path_buf(),
            through: self.write_through(output_dirs),
        }
    }
}

/// The build sees the tree at the checkout's path (`root`, the checkout's
/// top directory), except the directories bound through from the
/// checkout: this maps its paths to this process's disk and back.
#[derive(Debug, Clone)]
pub struct TreeView {
    pub root: PathBuf,
    pub tree: PathBuf,
    pub through: Vec<PathBuf>,
}

impl TreeView {
    /// Where the build's `path` is on this process's disk.
    pub fn to_disk(&self, path: &Path) -> PathBuf {
        match path.strip_prefix(&self.root) {
            Ok(rel) if !self.through.iter().any(|dir| path.starts_with(dir)) => self.tree.join(rel),
            _ => path.to_path_buf(),
        }
    }

    /// The build's name for `path` of this process's disk.
    pub fn from_disk(&self, path: &Path) -> PathBuf {
        match path.strip_prefix(&self.tree) {
            Ok(rel) => self.root.join(rel),
            Err(_) => path.to_path_buf(),
        }
    }

    /// Whether `path` (the build's name) is in a directory bound through.
    pub fn is_through(&self, path: &Path) -> bool {
        self.through.iter().any(|dir| path.starts_with(dir))
    }
}

/// The `[key]` entry that adds `rel` (repository-relative) to the key: the
/// path itself, or a directory's whole content.
pub fn include_entry(rel: &str, directory: bool) -> String {
    let pattern = if directory {
        format!("{rel}/**")
    } else {
        rel.to_owned()
    };
    format!("include = [{pattern:?}]")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checkout, not the nearest `.git`: a submodule's gitfile does not
    /// stop the search for the repository around it; a policy may widen it.
    #[test]
    fn the_tree_covers_the_checkout_around_a_workspace_or_submodule() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join("repo");
        let ws = top.join("sub/ws");
        std::fs::create_dir_all(&ws).unwrap();
        assert_eq!(checkout_top(&ws, None), ws, "no repository: the workspace");
        std::fs::write(ws.join(".git"), "gitdir: ../../.git/modules/ws\n").unwrap();
        assert_eq!(checkout_top(&ws, None), ws, "a gitfile alone: a worktree");
        std::fs::create_dir_all(top.join(".git")).unwrap();
        assert_eq!(checkout_top(&ws, None), top, "a submodule of the checkout");
        assert_eq!(checkout_top(&ws, Some("../../..")), dir.path());
        assert_eq!(checkout_top(&ws, Some("..")), top, "never narrower");
    }

    #[test]
    fn the_view_maps_the_tree_but_not_what_is_bound_through() {
        let view = TreeView {
            root: PathBuf::from("/w/pr"),
            tree: PathBuf::from("/tmp/t"),
            through: vec![PathBuf::from("/w/pr/target")],
        };
        assert_eq!(
            view.to_disk(Path::new("/w/pr/src/a.rs")),
            Path::new("/tmp/t/src/a.rs")
        );
        assert_eq!(
            view.to_disk(Path::new("/w/pr/target/x")),
            Path::new("/w/pr/target/x")
        );
        assert_eq!(
            view.to_disk(Path::new("/usr/lib/x")),
            Path::new("/usr/lib/x")
        );
        assert_eq!(
            view.from_disk(Path::new("/tmp/t/src")),
            Path::new("/w/pr/src")
        );
        assert_eq!(
            include_entry("data/cfg.txt", false),
            r#"include = ["data/cfg.txt"]"#
        );
        assert_eq!(
            include_entry("kernels", true),
            r#"include = ["kernels/**"]"#
        );
    }
}
