//! The table of cache-aware actions and the other ways a step writes a
//! cache: which `uses:` save (and under which inputs), and which
//! environment switches turn a cache write on.
//!
//! This is the ONE place that knows how caches are written; rules ask it
//! ([`cache_save`], [`cache_env_saves`]) and never match action names
//! themselves. It must not decide who may save (that is the rules' job).

use super::commands;
use super::shell::{Command, Script};
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
    // docker/build-push-action and docker/bake-action: `cache-to` of any
    // type is a write; see EXTERNAL_CACHE_ACTIONS (type=gha is the Actions cache).
    (
        "DeterminateSystems/magic-nix-cache-action",
        Saves::UnlessFalse(&["use-gha-cache"]),
    ),
    (
        "nix-community/cache-nix-action",
        Saves::UnlessFalse(&["save"]),
    ),
    // It exports the runtime token and cache URL to every later step.
    ("crazy-max/ghaction-github-runtime", Saves::Always),
    // So does sccache's setup action, unconditionally (for sccache's GHA
    // backend): every later `run:` step, PR code included, can then write.
    ("mozilla-actions/sccache-action", Saves::Always),
    // The usual hand-written form of the same export.
    (
        "actions/github-script",
        Saves::WhenContains("script", "ACTIONS_"),
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
    if let Some(found) = buildx_gha_save(step) {
        return Some(found);
    }
    if let Some(external) = external_step_save(step) {
        return Some((
            external.pos,
            format!(
                "it writes to {}, which `cache-mode:` does not govern",
                external.backend
            ),
        ));
    }
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
            let script = Script::cached(&run.value);
            let said = commands::spoken(&run.value, &script);
            for (what, find) in CACHE_COMMANDS {
                if let Some(command) = find(&said) {
                    let line = commands::line(&run.value, &script, command);
                    found.push((
                        wf.locate(run.pos, line),
                        format!("`{}`: {what}", line.trim()),
                    ));
                }
            }
        }
    }
    found
}

/// A recogniser of one command-line form: the first command of a `run:`
/// script that uses it, given what each command says
/// ([`commands::spoken`]).
type CommandForm = for<'a> fn(&[(&'a Command, String)]) -> Option<&'a Command>;

/// The first command whose words say something `test` accepts.
fn first_saying<'a>(
    said: &[(&'a Command, String)],
    test: impl Fn(&str) -> bool,
) -> Option<&'a Command> {
    said.iter().find(|(_, text)| test(text)).map(|(c, _)| *c)
}

/// The command-line forms of cache writes in `run:` scripts, beside
/// [`CACHE_ACTIONS`]: the same cache service, reached without an action.
/// Add rows as tools grow GHA cache backends.
const CACHE_COMMANDS: &[(&str, CommandForm)] = &[
    (
        "`SCCACHE_GHA_ENABLED` makes sccache write to the Actions cache",
        |said| {
            first_saying(said, |l| {
                l.contains("SCCACHE_GHA_ENABLED=")
                    && !["false", "0", "off"]
                        .iter()
                        .any(|v| l.contains(&format!("SCCACHE_GHA_ENABLED={v}")))
            })
        },
    ),
    (
        "a BuildKit cache export to the Actions cache (`--cache-to type=gha`)",
        |said| first_saying(said, |l| l.contains("cache-to") && l.contains("type=gha")),
    ),
    (
        "a BuildKit cache export to the Actions cache (`--export-cache type=gha`)",
        |said| {
            first_saying(said, |l| {
                l.contains("--export-cache") && l.contains("type=gha")
            })
        },
    ),
    (
        "the Actions cache toolkit's `saveCache` writes the cache",
        |said| first_saying(said, |l| l.contains("saveCache(")),
    ),
    (
        "the runner's cache credentials (`ACTIONS_RUNTIME_TOKEN`, `ACTIONS_CACHE_URL`, `ACTIONS_RESULTS_URL`) reach a script, which can write the cache",
        |said| {
            first_saying(said, |l| {
                [
                    "ACTIONS_RUNTIME_TOKEN",
                    "ACTIONS_CACHE_URL",
                    "ACTIONS_RESULTS_URL",
                    "ACTIONS_ID_TOKEN_REQUEST",
                ]
                .iter()
                .any(|name| l.contains(name))
            })
        },
    ),
    (
        "the runner's `ACTIONS_*` variables are exported to later steps, which can then write the cache",
        exports_actions_variables,
    ),
];

/// A script that writes `ACTIONS_…` variables (by name, prefix or loop) to
/// `GITHUB_ENV` or `GITHUB_OUTPUT`; the debug switches do not count.
fn exports_actions_variables<'a>(said: &[(&'a Command, String)]) -> Option<&'a Command> {
    let exports = said
        .iter()
        .any(|(c, _)| c.writes_to("GITHUB_ENV") || c.writes_to("GITHUB_OUTPUT"));
    if !exports {
        return None;
    }
    first_saying(said, |l| {
        l.match_indices("ACTIONS_").any(|(at, _)| {
            let rest = &l[at + "ACTIONS_".len()..];
            !(rest.starts_with("STEP_DEBUG") || rest.starts_with("RUNNER_DEBUG"))
        })
    })
}

/// A cache outside GitHub's Actions cache: `cache-mode:` does not govern
/// it, so whoever holds its credential can write it from any job, a
/// `pull_request` job included.
pub struct ExternalSave {
    pub pos: Pos,
    /// The backend, in words (`the S3 bucket of sccache (SCCACHE_BUCKET)`).
    pub backend: String,
}

/// Actions that write to a cache outside GitHub's, how, and the backend.
const EXTERNAL_CACHE_ACTIONS: &[(&str, Saves, &str)] = &[
    (
        "runs-on/cache",
        Saves::Always,
        "the RunsOn S3 cache bucket (the runner's instance role)",
    ),
    (
        "runs-on/cache/save",
        Saves::Always,
        "the RunsOn S3 cache bucket (the runner's instance role)",
    ),
    (
        "useblacksmith/cache",
        Saves::Always,
        "Blacksmith's cache service (the runner's credentials)",
    ),
    (
        "useblacksmith/cache/save",
        Saves::Always,
        "Blacksmith's cache service (the runner's credentials)",
    ),
    (
        "useblacksmith/rust-cache",
        Saves::UnlessFalse(&["save-if"]),
        "Blacksmith's cache service (the runner's credentials)",
    ),
    (
        "useblacksmith/stickydisk",
        Saves::Always,
        "a Blacksmith sticky disk that later jobs mount",
    ),
    (
        "cachix/cachix-action",
        Saves::WhenSet("authToken"),
        "a Cachix binary cache (the `authToken` input)",
    ),
    (
        "ryanccn/attic-action",
        Saves::WhenSet("token"),
        "an Attic binary cache (the `token` input)",
    ),
    (
        "DeterminateSystems/flakehub-cache-action",
        Saves::Always,
        "FlakeHub Cache (the job's OIDC token)",
    ),
    (
        "tespkg/actions-cache",
        Saves::Always,
        "an S3 bucket (the `accessKey`/`secretKey` inputs)",
    ),
    (
        "whywaita/actions-cache-s3",
        Saves::Always,
        "an S3 bucket (the `aws-access-key-id` input)",
    ),
];

/// Environment variables that point sccache or ccache at a shared remote
/// store, which they then write. Checked in workflow, job and step `env:`
/// and in `run:` exports.
const REMOTE_CACHE_ENV: &[(&str, &str)] = &[
    ("SCCACHE_BUCKET", "the S3 bucket of sccache"),
    ("SCCACHE_GCS_BUCKET", "the GCS bucket of sccache"),
    (
        "SCCACHE_AZURE_CONNECTION_STRING",
        "the Azure blob store of sccache",
    ),
    ("SCCACHE_REDIS", "the Redis store of sccache"),
    ("SCCACHE_REDIS_ENDPOINT", "the Redis store of sccache"),
    ("SCCACHE_MEMCACHED", "the memcached store of sccache"),
    (
        "SCCACHE_MEMCACHED_ENDPOINT",
        "the memcached store of sccache",
    ),
    ("SCCACHE_WEBDAV_ENDPOINT", "the WebDAV store of sccache"),
    ("SCCACHE_OSS_BUCKET", "the OSS bucket of sccache"),
    ("CCACHE_REMOTE_STORAGE", "the remote storage of ccache"),
    ("CCACHE_SECONDARY_STORAGE", "the remote storage of ccache"),
];

/// Every write to a cache outside GitHub's that a job makes: the actions
/// above, buildx `cache-to` (`type=s3|registry|local|azblob|gha`), and
/// sccache/ccache pointed at a remote store.
pub fn external_saves(wf: &Workflow, job: &Job) -> Vec<ExternalSave> {
    let mut found = Vec::new();
    for step in &job.steps {
        found.extend(external_step_save_on(step, &job.runs_on));
    }
    let env: Vec<&(Scalar, Scalar)> = wf
        .env
        .iter()
        .chain(job.env.iter())
        .chain(job.steps.iter().flat_map(|s| s.env.iter()))
        .collect();
    let value_of = |name: &str| {
        env.iter()
            .rev()
            .find(|(k, _)| k.value == name)
            .map(|(_, v)| v.value.trim().to_owned())
    };
    // sccache's GCS store is read-only unless SCCACHE_GCS_RW_MODE says otherwise;
    // a ccache store marked `|read-only` is not written.
    let read_only = |name: &str, value: &str| match name {
        "SCCACHE_GCS_BUCKET" => value_of("SCCACHE_GCS_RW_MODE").is_none_or(|m| m != "READ_WRITE"),
        "SCCACHE_BUCKET" => {
            value_of("SCCACHE_S3_NO_CREDENTIALS").is_some_and(|v| v == "true" || v == "1")
        }
        "CCACHE_REMOTE_STORAGE" | "CCACHE_SECONDARY_STORAGE" => value.contains("read-only"),
        _ => false,
    };
    for (name, value) in &env {
        let Some((_, backend)) = REMOTE_CACHE_ENV.iter().find(|(n, _)| *n == name.value) else {
            continue;
        };
        if value.value.trim().is_empty() || read_only(&name.value, &value.value) {
            continue;
        }
        found.push(ExternalSave {
            pos: name.pos,
            backend: format!("{backend} (`{}`)", name.value),
        });
    }
    for step in &job.steps {
        let Some(run) = &step.run else { continue };
        let script = Script::cached(&run.value);
        let said = commands::spoken(&run.value, &script);
        for (name, backend) in REMOTE_CACHE_ENV {
            let setting = format!("{name}=");
            if let Some((command, text)) = said.iter().find(|(_, l)| l.contains(&setting)) {
                if read_only(name, text) {
                    continue;
                }
                let line = commands::line(&run.value, &script, command);
                found.push(ExternalSave {
                    pos: wf.locate(run.pos, line),
                    backend: format!("{backend} (`{name}`, set in a `run:`)"),
                });
            }
        }
    }
    found
}

/// Drop-in replacements of `actions/cache` that use their service's store
/// only on their service's runners, and GitHub's Actions cache elsewhere:
/// the action, and the label prefix of the service's runners.
const FALLS_BACK: &[(&str, &str)] = &[
    ("runs-on/cache", "runs-on"),
    ("runs-on/cache/save", "runs-on"),
    ("useblacksmith/cache", "blacksmith"),
    ("useblacksmith/cache/save", "blacksmith"),
    ("useblacksmith/rust-cache", "blacksmith"),
];

/// Whether `step` is such a replacement on a job whose `runs-on` names
/// only other runners (every label known): then it writes GitHub's Actions
/// cache, which `cache-mode:` governs.
pub fn falls_back_to_actions_cache(step: &Step, runs_on: &[Scalar]) -> bool {
    let Some((name, _)) = step.action() else {
        return false;
    };
    let Some((_, prefix)) = FALLS_BACK
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
    else {
        return false;
    };
    !runs_on.is_empty()
        && runs_on
            .iter()
            .all(|l| !l.value.contains("${{") && !l.value.to_lowercase().starts_with(prefix))
}

/// Whether what `step` saves (if it saves) goes to GitHub's Actions cache,
/// on a job that runs on `runs_on` (unknown inside an action: empty).
pub fn saves_to_actions_cache(step: &Step, runs_on: &[Scalar]) -> bool {
    external_step_save_on(step, runs_on).is_none()
}

fn external_step_save_on(step: &Step, runs_on: &[Scalar]) -> Option<ExternalSave> {
    if falls_back_to_actions_cache(step, runs_on) {
        return None;
    }
    external_step_save(step)
}

fn external_step_save(step: &Step) -> Option<ExternalSave> {
    let (name, _) = step.action()?;
    let uses = step.uses.as_ref()?;
    if name.eq_ignore_ascii_case("docker/build-push-action")
        || name.eq_ignore_ascii_case("docker/bake-action")
    {
        let value = step
            .input("cache-to")
            .or_else(|| step.input("set").filter(|v| v.value.contains("cache-to")))?;
        let kind = value
            .value
            .split(|c: char| c == ',' || c.is_whitespace() || c == '"')
            .find_map(|part| part.split_once("type=").map(|(_, t)| t.to_owned()))
            .unwrap_or_else(|| "registry".to_owned());
        let backend = match kind.as_str() {
            "gha" => return None, // the Actions cache: see CACHE_ACTIONS' rules
            "local" => {
                "a buildx layer cache directory that a later step or a persistent runner keeps"
                    .to_owned()
            }
            other => format!(
                "the buildx `{other}` layer cache (`cache-to`, with the registry or bucket credentials the job logs in with)"
            ),
        };
        return Some(ExternalSave {
            pos: value.pos,
            backend,
        });
    }
    let (_, saves, backend) = EXTERNAL_CACHE_ACTIONS
        .iter()
        .find(|(n, _, _)| n.eq_ignore_ascii_case(name))?;
    let writes = match saves {
        Saves::Always => true,
        Saves::UnlessFalse(inputs) => !inputs.iter().any(|i| is_false(step.input(i))),
        Saves::UnlessTrue(inputs) => !inputs
            .iter()
            .any(|i| step.input(i).is_some_and(|v| v.value.trim() == "true")),
        Saves::WhenSet(input) => step
            .input(input)
            .is_some_and(|v| !v.value.trim().is_empty() && v.value.trim() != "false"),
        Saves::WhenContains(input, text) => {
            step.input(input).is_some_and(|v| v.value.contains(text))
        }
        Saves::Never => false,
    };
    writes.then(|| ExternalSave {
        pos: uses.pos,
        backend: (*backend).to_owned(),
    })
}

/// The Actions-cache writes of buildx (`cache-to: type=gha`), which
/// `cache-mode:` governs like any other Actions-cache save.
fn buildx_gha_save(step: &Step) -> Option<(Pos, String)> {
    let (name, _) = step.action()?;
    let is_buildx = name.eq_ignore_ascii_case("docker/build-push-action")
        || name.eq_ignore_ascii_case("docker/bake-action");
    let value = step
        .input("cache-to")
        .or_else(|| step.input("set"))
        .filter(|v| is_buildx && v.value.contains("type=gha"))?;
    Some((
        value.pos,
        format!("`{name}` with `cache-to` of `type=gha` saves"),
    ))
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
