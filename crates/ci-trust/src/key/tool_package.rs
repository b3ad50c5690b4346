//! The xtask's own package in a host workspace: its sources are never key
//! inputs unless an archive build compiles it (its manifest always is:
//! cargo loads every member's manifest, whatever it builds).
//!
//! A host that adopts this xtask (`cargo xtask init-ci`) has it as a workspace
//! member, so `cargo metadata` reports it like any crate; but the GPU archives
//! are built with `-p <crate>` and never compile it. Hashing its files would
//! only make every change to the tool rebuild the host's GPU archives. It is
//! left out exactly when no archive build can compile it: every `[[archive]]`
//! selects its packages by name (`-p`/`--package`, no `--workspace`, `--all`,
//! `--manifest-path`, `--config`, `-Z` or name pattern), none of them is the
//! xtask, and no other package depends on it (by path, or by its name from
//! any source). Anything else keeps it in: fail closed.
//! (This repository archives the xtask's own tests, `-p xtask`, so here it
//! stays an input.)

use std::path::Path;

use super::workspace::Workspace;
use crate::policy::Policy;

/// The xtask's package name: the package this binary was built from.
pub const TOOL_PACKAGE: &str = "xtask";

/// The manifest of the xtask member when no archive build compiles it.
pub fn unbuilt_tool_manifest<'w>(workspace: &'w Workspace, policy: &Policy) -> Option<&'w Path> {
    let tool = workspace
        .packages
        .iter()
        .find(|p| p.name == TOOL_PACKAGE && p.origin == "workspace member")?;
    if policy.archive.is_empty() {
        return None;
    }
    for archive in &policy.archive {
        let args = archive.nextest.iter().chain(&archive.build).flatten();
        let selected = selected_packages(args)?;
        if selected.is_empty() || selected.iter().any(|name| name == TOOL_PACKAGE) {
            return None;
        }
    }
    // A dependency on it by path, or by its name from any source (a
    // `[patch]` can redirect a registry `xtask` to the member), builds it.
    let depended_on = workspace.packages.iter().any(|p| {
        p.path_dependencies
            .iter()
            .any(|(_, manifest)| super::workspace::normalize(manifest) == tool.manifest)
            || p.dependency_features
                .iter()
                .any(|(name, _)| name == TOOL_PACKAGE)
    });
    (!depended_on).then_some(tool.manifest.as_path())
}

/// The package names an archive's cargo arguments select, or `None` when
/// they may select more than named packages (`build_plan` reads them).
fn selected_packages<'a>(args: impl Iterator<Item = &'a String>) -> Option<Vec<String>> {
    let args: Vec<&String> = args.collect();
    crate::build_plan::CargoArgs::new(&args).selected_packages()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn select(args: &[&str]) -> Option<Vec<String>> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        selected_packages(args.iter())
    }

    #[test]
    fn only_explicit_package_names_are_read() {
        assert_eq!(
            select(&[
                "-p",
                "gpu",
                "--features",
                "cuda",
                "--package=k@0.1.0",
                "-pz"
            ]),
            Some(vec!["gpu".into(), "k".into(), "z".into()])
        );
        assert_eq!(select(&["--features", "cuda"]), Some(vec![]));
        for args in [
            &["--workspace"][..],
            &["-p", "gpu", "--all"],
            &["-p", "gpu-*"],
            &["--manifest-path", "xtask/Cargo.toml"],
            &["-p", "gpu", "--config", "patch.crates-io.x.path='xtask'"],
            &["-p", "gpu", "-Zavoid-dev-deps"],
            &["-p"],
        ] {
            assert_eq!(select(args), None, "{args:?}");
        }
    }
}
