//! The table of cache-aware actions and the other ways a step writes a
//! cache: which `uses:` save (and under which inputs), and which
//! environment switches turn a cache write on.
//!
//! This is the ONE place that knows how caches are written; rules ask it
//! ([`cache_save`], [`cache_env_saves`]) and never match action names
//! themselves. It must not decide who may save (that is the rules' job).

use super::workflow::{Job, Pos, Scalar, Step, Workflow};

pub fn is_false(value: Option<&Scalar>) -> bool {
    value.is_some_and(|v| v.value.trim() == "false")
}

/// How a cache-aware action saves.
enum Saves {
    Always,
    /// Saves unless every listed input is left on; any one literally `false` stops it.
    UnlessFalse(&'static [&'static str]),
    /// Saves unless one of the inputs is literally `true` (read-only or disabled switches).
    UnlessTrue(&'static [&'static str]),
    /// Saves when the input is set to something other than `false`/empty.
    WhenSet(&'static str),
    /// Saves when the input contains the text.
    WhenContains(&'static str, &'static str),
    Never,
}

/// The cache-aware actions and how each saves. An action not listed here is
/// not known to save; add rows as actions grow caching.
const CACHE_ACTIONS: &[(&str, Saves)] = &[
    ("actions/cache", Saves::Always),
    ("actions/cache/save", Saves::Always),
    ("actions/cache/restore", Saves::Never),
    ("Swatinem/rust-cache", Saves::UnlessFalse(&["save-if"])),
    (
        "actions-rust-lang/setup-rust-toolchain",
        Saves::UnlessFalse(&["cache"]),
    ),
    ("actions/setup-go", Saves::UnlessFalse(&["cache"])),
    ("actions/setup-python", Saves::WhenSet("cache")),
    ("actions/setup-java", Saves::WhenSet("cache")),
    ("actions/setup-dotnet", Saves::WhenSet("cache")),
    ("hendrikmuhs/ccache-action", Saves::UnlessFalse(&["save"])),
    (
        "astral-sh/setup-uv",
        Saves::UnlessFalse(&["enable-cache", "save-cache"]),
    ),
    (
        "docker/build-push-action",
        Saves::WhenContains("cache-to", "type=gha"),
    ),
    ("docker/bake-action", Saves::WhenContains("set", "type=gha")),
    // It exports the runtime token and cache URL to every later step.
    ("crazy-max/ghaction-github-runtime", Saves::Always),
    // So does sccache's setup action, unconditionally (for sccache's GHA
    // backend): every later `run:` step, PR code included, can then write.
    ("mozilla-actions/sccache-action", Saves::Always),
    // The usual hand-written form of the same export.
    (
        "actions/github-script",
        Saves::WhenContains("script", "ACTIONS_RUNTIME_TOKEN"),
    ),
    // Write on the default branch by default, and `workflow_run`,
    // `schedule` and dispatch runs are on the default branch.
    (
        "gradle/actions/setup-gradle",
        Saves::UnlessTrue(&["cache-read-only", "cache-disabled"]),
    ),
    (
        "gradle/gradle-build-action",
        Saves::UnlessTrue(&["cache-read-only", "cache-disabled"]),
    ),
    ("ruby/setup-ruby", Saves::WhenSet("bundler-cache")),
    // Caches the CUDA installer it then runs; `use-github-cache` defaults to true.
    (
        "Jimver/cuda-toolkit",
        Saves::UnlessFalse(&["use-github-cache"]),
    ),
];

/// Whether a step saves to the Actions cache, and why.
pub fn cache_save(step: &Step) -> Option<(Pos, String)> {
    let (name, reference) = step.action()?;
    let uses = step.uses.as_ref()?;
    if name.eq_ignore_ascii_case("actions/setup-node") {
        // setup-node saves when `cache:` is set, and from v5 also by default
        // for a package.json `packageManager` unless `package-manager-cache: false`.
        if step
            .input("cache")
            .is_some_and(|c| !c.value.trim().is_empty() && c.value.trim() != "false")
        {
            return Some((
                uses.pos,
                "`actions/setup-node` with `cache:` saves in its post step".to_owned(),
            ));
        }
        let old = ["v1", "v2", "v3", "v4"]
            .iter()
            .any(|v| reference == *v || reference.starts_with(&format!("{v}.")));
        if !old && !is_false(step.input("package-manager-cache")) {
            return Some((
                uses.pos,
                "`actions/setup-node` v5+ caches by default; set `package-manager-cache: false`"
                    .to_owned(),
            ));
        }
        return None;
    }
    let (_, saves) = CACHE_ACTIONS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))?;
    match saves {
        Saves::Never => None,
        Saves::Always => Some((uses.pos, format!("`{name}` saves"))),
        Saves::UnlessFalse(inputs) => {
            if inputs.iter().any(|i| is_false(step.input(i))) {
                return None;
            }
            let set = inputs.iter().find_map(|i| step.input(i));
            let pos = set.map_or(uses.pos, |s| s.pos);
            let why = match set {
                Some(value) if value.value.contains("${{") => format!(
                    "`{}: {}` is an expression; only a literal `false` is known not to save",
                    inputs[0], value.value
                ),
                _ => format!("`{name}` saves unless `{}: false`", inputs[0]),
            };
            Some((pos, why))
        }
        Saves::UnlessTrue(inputs) => {
            if inputs
                .iter()
                .any(|i| step.input(i).is_some_and(|v| v.value.trim() == "true"))
            {
                return None;
            }
            Some((
                uses.pos,
                format!("`{name}` saves unless `{}: true`", inputs[0]),
            ))
        }
        Saves::WhenSet(input) => step
            .input(input)
            .filter(|v| !v.value.trim().is_empty() && v.value.trim() != "false")
            .map(|v| (v.pos, format!("`{name}` with `{input}: {}` saves", v.value))),
        Saves::WhenContains(input, text) => step
            .input(input)
            .filter(|v| v.value.contains(text))
            .map(|v| {
                (
                    v.pos,
                    format!("`{name}` with `{input}` containing `{text}` saves"),
                )
            }),
    }
}

/// Cache writes switched on by the environment or by `cache-mode:`.
pub fn cache_env_saves(wf: &Workflow, job: &Job) -> Vec<(Pos, String)> {
    let mut found = Vec::new();
    for mode in job
        .cache_mode
        .iter()
        .chain(wf.cache_mode.iter().filter(|_| job.cache_mode.is_none()))
    {
        if matches!(mode.value.trim(), "write" | "write-only") {
            found.push((
                mode.pos,
                format!("`cache-mode: {}` lets it write the cache", mode.value),
            ));
        }
    }
    let envs = wf
        .env
        .iter()
        .chain(job.env.iter())
        .chain(job.steps.iter().flat_map(|s| s.env.iter()));
    for (name, value) in envs {
        if name.value == "SCCACHE_GHA_ENABLED"
            && !matches!(value.value.trim(), "false" | "0" | "off" | "")
        {
            found.push((
                name.pos,
                "`SCCACHE_GHA_ENABLED` makes sccache write to the Actions cache".to_owned(),
            ));
        }
    }
    for step in &job.steps {
        if let Some(run) = &step.run {
            if let Some(line) = run.value.lines().find(|l| {
                l.contains("SCCACHE_GHA_ENABLED=") && !l.contains("SCCACHE_GHA_ENABLED=false")
            }) {
                found.push((
                    wf.locate(run.pos, line),
                    "`SCCACHE_GHA_ENABLED` makes sccache write to the Actions cache".to_owned(),
                ));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(yaml_steps: &str) -> Workflow {
        Workflow::parse(
            "x.yml",
            &format!("on: push\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n{yaml_steps}"),
        )
        .unwrap()
    }

    #[test]
    fn the_cache_action_table_decides_who_saves() {
        let wf = steps(
            "      - uses: actions/cache/restore@v4
      - uses: actions/cache@v4
      - uses: Swatinem/rust-cache@v2
        with: { save-if: false }
      - uses: Swatinem/rust-cache@v2
        with: { save-if: \"${{ false }}\" }
      - uses: actions/setup-go@v5
      - uses: actions/setup-go@v5
        with: { cache: false }
      - uses: actions/setup-node@v4
      - uses: actions/setup-node@v5
      - uses: actions/setup-node@v4
        with: { cache: npm }
      - uses: actions/setup-python@v5
        with: { cache: pip }
      - uses: docker/build-push-action@v6
        with: { cache-to: \"type=gha,mode=max\" }
      - uses: astral-sh/setup-uv@v6
        with: { enable-cache: false }
      - run: echo no action
      - uses: Jimver/cuda-toolkit@v0.2.24
      - uses: Jimver/cuda-toolkit@v0.2.24
        with: { use-github-cache: false }
      - uses: Mozilla-Actions/sccache-action@v0.0.9
      - uses: actions/github-script@v7
        with:
          script: core.exportVariable('ACTIONS_RUNTIME_TOKEN', process.env.ACTIONS_RUNTIME_TOKEN)
      - uses: actions/github-script@v7
        with: { script: \"core.info('hi')\" }
      - uses: gradle/actions/setup-gradle@v4
        with: { cache-read-only: \"${{ github.ref != 'refs/heads/main' }}\" }
      - uses: gradle/actions/setup-gradle@v4
        with: { cache-read-only: true }
      - uses: ruby/setup-ruby@v1
        with: { bundler-cache: true }
",
        );
        let saves: Vec<bool> = wf.jobs[0]
            .steps
            .iter()
            .map(|s| cache_save(s).is_some())
            .collect();
        assert_eq!(
            saves,
            [
                false, true, false, true, true, false, false, true, true, true, true, false, false,
                true, false, true, true, false, true, false, true
            ]
        );
        let why = cache_save(&wf.jobs[0].steps[3]).unwrap().1;
        assert!(why.contains("is an expression"), "{why}");
    }
}
