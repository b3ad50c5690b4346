//! Human-readable views of a key: `--explain` and `--diff`.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::KeyManifest;
use crate::policy::Policy;

/// The table of every component and input, and why each is there.
pub fn explain(manifest: &KeyManifest, policy: &Policy) -> String {
    let mut out = String::new();
    let (dirs, files): (Vec<_>, Vec<_>) =
        manifest.inputs.iter().partition(|i| i.kind == "directory");
    let total: u64 = files.iter().map(|i| i.size).sum();
    let _ = writeln!(out, "key: {}", manifest.key);
    let _ = writeln!(out, "policy: {}", policy.describe_source());
    let _ = writeln!(out, "\ncomponents (in key order):");
    for component in &manifest.components {
        let _ = writeln!(out, "  {:<24} {}", component.name, component.value);
    }
    let _ = writeln!(
        out,
        "\ninputs: {} files, {} bytes, {} directory entry sets, from {} packages; {} module files parsed; {} OUT_DIR embeds covered by their build scripts",
        files.len(),
        total,
        dirs.len(),
        manifest.stats.packages,
        manifest.stats.parsed_files,
        manifest.stats.out_dir_embeds
    );
    let width = manifest
        .inputs
        .iter()
        .map(|i| i.path.len())
        .max()
        .unwrap_or(4)
        .min(60);
    let _ = writeln!(
        out,
        "  {:<width$} {:>10}  {:<12}  reason",
        "path", "size", "sha256"
    );
    for input in &manifest.inputs {
        let short = if input.kind == "absent" {
            "(absent)".to_owned()
        } else {
            input.sha256[..12].to_owned()
        };
        let kind = match input.kind.as_str() {
            "file" => String::new(),
            other => format!("[{other}] "),
        };
        let _ = writeln!(
            out,
            "  {:<width$} {:>10}  {:<12}  {kind}{}",
            input.path, input.size, short, input.reason
        );
    }
    let empty: Vec<_> = policy
        .key
        .dynamic_include
        .iter()
        .filter(|d| d.files.is_empty())
        .collect();
    if !empty.is_empty() {
        let _ = writeln!(
            out,
            "\ndynamic includes declared to read no repository file (allow-empty):"
        );
        for dynamic in empty {
            let _ = writeln!(out, "  {}: {}", dynamic.site, dynamic.reason);
        }
    }
    let _ = writeln!(
        out,
        "\nnever hashed: .github/workflows/** (runs use the default branch's definitions), target directories, .git/, and the policy file itself (its settings enter as components)"
    );
    out
}

/// What changed between an earlier manifest and this one.
pub fn diff(old: &KeyManifest, new: &KeyManifest) -> String {
    let mut out = String::new();
    if old.key == new.key {
        let _ = writeln!(out, "key unchanged: {}", new.key);
        return out;
    }
    let _ = writeln!(out, "key changed:\n  was {}\n  now {}", old.key, new.key);
    let old_components: Vec<_> = old.components.iter().map(|c| (&c.name, &c.value)).collect();
    let new_components: Vec<_> = new.components.iter().map(|c| (&c.name, &c.value)).collect();
    if old_components != new_components {
        let _ = writeln!(out, "components:");
        let old_map: BTreeMap<_, Vec<_>> = group(&old_components);
        let new_map: BTreeMap<_, Vec<_>> = group(&new_components);
        for name in old_map
            .keys()
            .chain(new_map.keys())
            .collect::<std::collections::BTreeSet<_>>()
        {
            let (was, now) = (old_map.get(name), new_map.get(name));
            if was != now {
                let _ = writeln!(out, "  {name}: {} -> {}", show(was), show(now));
            }
        }
    }
    let old_inputs: BTreeMap<_, _> = old.inputs.iter().map(|i| (&i.path, i)).collect();
    let new_inputs: BTreeMap<_, _> = new.inputs.iter().map(|i| (&i.path, i)).collect();
    let mut lines = Vec::new();
    for (path, input) in &new_inputs {
        match old_inputs.get(path) {
            None => lines.push(format!("  added    {path} ({})", input.reason)),
            Some(was) if was.sha256 != input.sha256 || was.kind != input.kind => {
                lines.push(format!("  changed  {path}"))
            }
            Some(_) => {}
        }
    }
    for path in old_inputs.keys().filter(|p| !new_inputs.contains_key(*p)) {
        lines.push(format!("  removed  {path}"));
    }
    if !lines.is_empty() {
        let _ = writeln!(out, "inputs:\n{}", lines.join("\n"));
    }
    out
}

fn group<'a>(pairs: &[(&'a String, &'a String)]) -> BTreeMap<&'a String, Vec<&'a String>> {
    let mut map: BTreeMap<_, Vec<_>> = BTreeMap::new();
    for (name, value) in pairs {
        map.entry(*name).or_default().push(*value);
    }
    map
}

fn show(values: Option<&Vec<&String>>) -> String {
    match values {
        None => "(none)".into(),
        Some(values) => values
            .iter()
            .map(|v| v.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    }
}
