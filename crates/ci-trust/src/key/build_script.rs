//! What a build script makes cargo watch: the paths of its
//! `cargo:rerun-if-changed=` / `cargo::rerun-if-changed=` lines, or cargo's
//! own fallback, the whole package directory.
//!
//! Only literal text counts. A path assembled at run time (`format!`, a
//! variable), or one that does not exist, cannot be known statically, so the
//! key then covers the whole package directory: failing closed costs a
//! spurious rebuild now and then, never a stale archive.

use std::path::{Path, PathBuf};

/// The files a build script's reruns depend on, beyond its own module tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildScriptInputs {
    /// Declared paths (absolute; a directory means every file below it).
    Declared(Vec<PathBuf>),
    /// The whole package directory, for the reason given.
    WholePackage(String),
}

/// Reads the `rerun-if-changed` literals found in a build script's module
/// tree: `(literal value, file, line)`. Warnings go to `warnings`.
pub fn analyse(
    literals: &[(String, PathBuf, usize)],
    package_dir: &Path,
    root: &Path,
    warnings: &mut Vec<String>,
) -> BuildScriptInputs {
    const DIRECTIVE: &str = "rerun-if-changed";
    let mut declared = Vec::new();
    for (value, file, line) in literals {
        let site = format!(
            "{}:{line}",
            file.strip_prefix(root).unwrap_or(file).display()
        );
        let mut rest = value.as_str();
        while let Some(pos) = rest.find(DIRECTIVE) {
            let after = &rest[pos + DIRECTIVE.len()..];
            let Some(path_text) = after.strip_prefix('=') else {
                return BuildScriptInputs::WholePackage(format!(
                    "{site} assembles a rerun-if-changed line at run time"
                ));
            };
            let line_text = path_text.split(['\n', '\r']).next().unwrap_or("");
            // Cargo trims the value: `rerun-if-changed= data ` watches `data`.
            let path_text = line_text.trim();
            if path_text.is_empty() || path_text.contains(['{', '}']) {
                return BuildScriptInputs::WholePackage(format!(
                    "{site} builds a rerun-if-changed path at run time"
                ));
            }
            let path = package_dir.join(path_text);
            // An absolute path outside the checkout (a CUDA header under
            // /usr/local/cuda) is the build machine's environment: the key
            // cannot hash it, and verify-key counts it as external too. The
            // toolkit's version belongs in the key as a component instead.
            if Path::new(path_text).is_absolute() && !path.starts_with(root) {
                warnings.push(format!(
                    "{site}: the build script watches {path_text}, outside the repository, which the key does not hash; if the build depends on it, put its toolkit's version in the key with key.toolkit-env"
                ));
                rest = &after[1 + line_text.len()..];
                continue;
            }
            if std::fs::symlink_metadata(&path).is_err() {
                return BuildScriptInputs::WholePackage(format!(
                    "{site} names {path_text}, which does not exist, so cargo reruns the script on every build"
                ));
            }
            declared.push(path);
            rest = &after[1 + line_text.len()..];
        }
    }
    if declared.is_empty() {
        BuildScriptInputs::WholePackage(
            "the build script declares no rerun-if-changed, so cargo watches the whole package"
                .to_owned(),
        )
    } else {
        declared.sort();
        declared.dedup();
        BuildScriptInputs::Declared(declared)
    }
}

/// The checkout files a build script hands the linker in a literal
/// `cargo::rustc-link-arg…=` line: a linker script, a version script, a
/// response file (`@file`, read for the files it names in turn). The linker
/// runs where rustc does, the workspace root (`rustc_cwd`); the package
/// directory is tried too. A value built at run time (`{}`) names a file
/// the script computes, often in `OUT_DIR`: `verify-key` reads the real
/// line from the script's output after the build, and the trace sees the
/// linker open it.
pub fn link_arg_paths(
    literals: &[(String, PathBuf, usize)],
    package_dir: &Path,
    rustc_cwd: &Path,
) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for (value, _, _) in literals {
        for line in value.lines() {
            let Some(directive) = line
                .trim()
                .strip_prefix("cargo::")
                .or_else(|| line.trim().strip_prefix("cargo:"))
            else {
                continue;
            };
            let Some((name, args)) = directive.split_once('=') else {
                continue;
            };
            if !name.contains("link-arg") || args.contains(['{', '}']) {
                continue;
            }
            for base in [rustc_cwd, package_dir] {
                paths.extend(super::cargo_config::flag_paths(
                    args.split_whitespace(),
                    base,
                    &[],
                ));
            }
        }
    }
    paths.sort();
    paths.dedup();
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(value: &str) -> (String, PathBuf, usize) {
        (value.to_owned(), PathBuf::from("/r/p/build.rs"), 3)
    }

    #[test]
    fn literal_paths_are_declared_and_everything_else_means_the_whole_package() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("kernels")).unwrap();
        std::fs::write(dir.path().join("build.rs"), "").unwrap();
        let pkg = dir.path();
        let declared = analyse(
            &[
                lit("cargo:rerun-if-changed=kernels"),
                lit("cargo::rerun-if-changed=build.rs"),
            ],
            pkg,
            Path::new("/r"),
            &mut Vec::new(),
        );
        assert_eq!(
            declared,
            BuildScriptInputs::Declared(vec![pkg.join("build.rs"), pkg.join("kernels")])
        );
        for (literals, needle) in [
            (vec![], "declares no rerun-if-changed"),
            (vec![lit("cargo:rerun-if-changed={}")], "at run time"),
            (vec![lit("cargo:rerun-if-changed=")], "at run time"),
            (vec![lit("rerun-if-changed")], "assembles"),
            (
                vec![lit("cargo:rerun-if-changed=missing.txt")],
                "does not exist",
            ),
        ] {
            match analyse(&literals, pkg, Path::new("/r"), &mut Vec::new()) {
                BuildScriptInputs::WholePackage(reason) => {
                    assert!(reason.contains(needle), "{reason}")
                }
                other => panic!("{literals:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn an_absolute_path_outside_the_repository_is_the_environment() {
        let repo = tempfile::tempdir().unwrap();
        std::fs::write(repo.path().join("build.rs"), "").unwrap();
        let mut warnings = Vec::new();
        let got = analyse(
            &[
                lit("cargo:rerun-if-changed=/usr/local/cuda/include/cuda.h"),
                lit("cargo:rerun-if-changed=build.rs"),
            ],
            repo.path(),
            repo.path(),
            &mut warnings,
        );
        assert_eq!(
            got,
            BuildScriptInputs::Declared(vec![repo.path().join("build.rs")])
        );
        assert!(
            warnings.len() == 1
                && warnings[0].contains("/usr/local/cuda/include/cuda.h")
                && warnings[0].contains("key.toolkit-env"),
            "{warnings:?}"
        );
    }

    #[test]
    fn values_are_trimmed_as_cargo_trims_them() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), "").unwrap();
        let got = analyse(
            &[lit("cargo:rerun-if-changed= a \n")],
            dir.path(),
            Path::new("/"),
            &mut Vec::new(),
        );
        assert_eq!(got, BuildScriptInputs::Declared(vec![dir.path().join("a")]));
    }

    #[test]
    fn several_lines_in_one_literal_are_all_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), "").unwrap();
        std::fs::write(dir.path().join("b"), "").unwrap();
        let got = analyse(
            &[lit("cargo:rerun-if-changed=a\ncargo:rerun-if-changed=b\n")],
            dir.path(),
            Path::new("/"),
            &mut Vec::new(),
        );
        assert_eq!(
            got,
            BuildScriptInputs::Declared(vec![dir.path().join("a"), dir.path().join("b")])
        );
    }
}
