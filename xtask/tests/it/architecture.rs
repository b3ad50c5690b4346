//! `docs/architecture.md` stays a true map of `crates/ci-trust/src/` and
//! `xtask/src/`: every module it names exists, and every module is named.

use std::collections::BTreeSet;
use std::path::Path;

/// The modules of the source tree `src` (a repository-relative directory), as
/// repository-relative paths (`crates/ci-trust/src/archive/trust.rs`).
fn source_modules(repository: &Path, src: &str) -> BTreeSet<String> {
    let src = repository.join(src);
    let mut found = BTreeSet::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(repository).unwrap();
                found.insert(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    found
}

/// The modules the code map names: its `### \`path\`` headings.
fn mapped_modules(doc: &str) -> BTreeSet<String> {
    let map = doc
        .split("\n## ")
        .find(|section| section.starts_with("Code map"))
        .expect("docs/architecture.md has a `## Code map` section");
    map.lines()
        .filter_map(|line| line.strip_prefix("### `"))
        .filter_map(|rest| rest.strip_suffix('`'))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_code_map_names_every_module_and_only_modules() {
    let repository = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let doc_path = repository.join("docs/architecture.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    let mapped = mapped_modules(&doc);
    let mut modules = source_modules(repository, "crates/ci-trust/src");
    modules.extend(source_modules(repository, "xtask/src"));
    assert!(!modules.is_empty() && !mapped.is_empty());
    let mut problems = Vec::new();
    for module in modules.difference(&mapped) {
        problems.push(format!(
            "{module} is not in docs/architecture.md's code map: add a `### \\`{module}\\`` entry saying what it owns and what it must not touch"
        ));
    }
    for module in mapped.difference(&modules) {
        problems.push(format!(
            "docs/architecture.md's code map names `{module}`, which is not a source file: remove or rename the entry"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
