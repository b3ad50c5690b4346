//! The attack table of docs/key-attacks.md, replayed against the key tree:
//! for every edit a pull request can make, either the key moves (or is
//! refused), or the archive built from the pull request's key tree behaves
//! exactly like main's. That is the promise "the archive is a function of
//! its key", checked edit by edit, whatever the key's own rules miss.
//!
//! Each row is shell run in a copy of one fixture workspace (the one the
//! campaign used: `app` with a library, a binary, an integration test and a
//! build script that reads a declared `data/cfg.txt`; `util`, a path
//! dependency; `mac`, a proc macro; `[workspace.package]`, a
//! `.cargo/config.toml` with `rustflags`, a committed `Cargo.lock`): `prep`
//! makes main's tree, `edit` then makes the pull request's. Both keys come
//! from the real binary; when they are equal, both trees are built in
//! their key trees by the real binary (`verify-key --trace --key-tree --
//! cargo build`) and the built `app` runs: its output (every value an edit
//! could move) and the build's outcome must be the same.
//!
//! The default suite runs a representative subset (edits that move the
//! key, and edits the key does not see, whose builds are compared); set
//! `CI_TRUST_ATTACK_TABLE=all` for the whole table (`.ci/run` does).
//! `CI_TRUST_ATTACK_TABLE_OUT=FILE` writes the outcome table to FILE.

use std::path::Path;
use std::process::Command;

use crate::key_tree::{cargo, xtask};
use crate::support::{Fixture, stderr, stdout};

/// One edit of the table.
pub(crate) struct Row {
    /// The row of docs/key-attacks.md (`V8` for the verify-key table).
    pub id: &'static str,
    pub what: &'static str,
    /// Shell run in the tree to make main's state, then the pull request's.
    pub prep: &'static str,
    pub edit: &'static str,
    /// Tools the row needs besides cargo (a C compiler for a static library).
    pub needs: &'static [&'static str],
    /// In the default suite.
    pub default: bool,
    /// `CARGO_HOME` is `.cargo-home` of the tree, for the key and the build.
    pub cargo_home_inside: bool,
    /// The workspace root (`--root`) below the checkout the row makes
    /// (empty: the checkout itself; `ws` when `prep` moves the workspace
    /// into a subdirectory of its repository).
    pub workspace: &'static str,
}

pub(crate) const fn row(
    id: &'static str,
    what: &'static str,
    prep: &'static str,
    edit: &'static str,
) -> Row {
    Row {
        id,
        what,
        prep,
        edit,
        needs: &[],
        default: false,
        cargo_home_inside: false,
        workspace: "",
    }
}

pub(crate) const fn default_row(
    id: &'static str,
    what: &'static str,
    prep: &'static str,
    edit: &'static str,
) -> Row {
    Row {
        default: true,
        ..row(id, what, prep, edit)
    }
}

/// Sets the build script's `EXTRA` line (the placeholder `// EXTRA`).
macro_rules! extra_line {
    () => {
        "sed -i \"s#// EXTRA#$EXTRA#\" app/build.rs"
    };
}

const ROWS: &[Row] = &[
    default_row(
        "1",
        "add app/README.md (CARGO_PKG_README)",
        "",
        "echo '# app' > app/README.md",
    ),
    row(
        "2",
        "add app/.cargo/config.toml (a nested cargo in app/ reads it)",
        "",
        "mkdir -p app/.cargo && printf '[build]\\nrustflags = [\"--cfg\", \"evil\"]\\n' > app/.cargo/config.toml",
    ),
    row(
        "3",
        "add app/.cargo/config (no extension) with [env]",
        "",
        "mkdir -p app/.cargo && printf '[env]\\nENVVAR = \"evil\"\\n' > app/.cargo/config",
    ),
    row(
        "4",
        "add app/rust-toolchain.toml (nightly)",
        "",
        "printf '[toolchain]\\nchannel = \"nightly\"\\n' > app/rust-toolchain.toml",
    ),
    row(
        "5",
        "edit a file a nested configuration includes",
        "mkdir -p app/.cargo && printf 'include = \"inc.toml\"\\n' > app/.cargo/config.toml && printf '[env]\\nENVVAR = \"a\"\\n' > app/.cargo/inc.toml",
        "printf '[env]\\nENVVAR = \"b\"\\n' > app/.cargo/inc.toml",
    ),
    row(
        "6",
        "add .config/nextest.toml.toml",
        "",
        "mkdir -p .config && printf '[profile.default]\\nretries = 2\\n' > .config/nextest.toml.toml",
    ),
    row(
        "7",
        "edit .config/nextest.toml",
        "mkdir -p .config && printf '[profile.default]\\nretries = 0\\n' > .config/nextest.toml",
        "printf '[profile.default]\\nretries = 1\\n' > .config/nextest.toml",
    ),
    Row {
        id: "8",
        what: "replace a static library in a rustc-link-search directory",
        prep: concat!(
            "mkdir -p app/libs && printf 'int atk_value(void) { return 1; }\\n' > atk.c && cc -c atk.c -o atk.o && ar rcs app/libs/libatk.a atk.o && rm atk.c atk.o && ",
            "EXTRA='println!(\"cargo:rustc-link-search=native=libs\"); println!(\"cargo:rustc-link-lib=static=atk\");' && ",
            extra_line!(),
            " && printf 'extern \"C\" { fn atk_value() -> i32; }\\npub fn extra() -> String { format!(\"lib={}\", unsafe { atk_value() }) }\\n' > app/src/extra.rs"
        ),
        edit: "printf 'int atk_value(void) { return 2; }\\n' > atk.c && cc -c atk.c -o atk.o && rm app/libs/libatk.a && ar rcs app/libs/libatk.a atk.o && rm atk.c atk.o",
        needs: &["cc", "ar"],
        default: false,
        cargo_home_inside: false,
        workspace: "",
    },
    default_row(
        "9",
        "a build script reads ../shared.txt without declaring it",
        concat!(
            "echo one > shared.txt && EXTRA='println!(\"cargo:rustc-env=EXTRA={}\", std::fs::read_to_string(\"..\\/shared.txt\").unwrap_or_default().trim());' && ",
            extra_line!()
        ),
        "echo two > shared.txt",
    ),
    default_row(
        "10",
        "a proc macro reads mac/val.txt with std::fs",
        "echo 1 > mac/val.txt && printf 'use proc_macro::TokenStream;\\n#[proc_macro]\\npub fn value(_: TokenStream) -> TokenStream {\\n    let v = std::fs::read_to_string(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/val.txt\")).unwrap_or_else(|_| \"0\".into());\\n    v.trim().parse().unwrap()\\n}\\n' > mac/src/lib.rs",
        "echo 2 > mac/val.txt",
    ),
    row(
        "11",
        "a build script declares data through concat!(\"cargo:rerun-if-\", \"changed=data\")",
        "sed -i 's|println!(\"cargo:rerun-if-changed=data/cfg.txt\");|println!(concat!(\"cargo:rerun-if-\", \"changed=data\"));|' app/build.rs",
        "echo cfg-11 > app/data/cfg.txt",
    ),
    row(
        "12",
        "inc!(include_str, \"../data/n.txt\") through a macro_rules!",
        "echo n1 > app/data/n.txt && printf 'macro_rules! inc { ($m:ident, $p:literal) => { $m!($p) } }\\npub fn extra() -> String { inc!(include_str, \"../data/n.txt\").trim().to_string() }\\n' > app/src/extra.rs && printf '[[key.dynamic-include]]\\nsite = \"app/src/extra.rs\"\\nfiles = [\"app/data/n.txt\"]\\nreason = \"inc! hands include_str to a macro\"\\n' >> .github/ci-trust.toml",
        "echo n2 > app/data/n.txt",
    ),
    row(
        "13",
        "edit a file the root configuration includes (../cfgx/extra.toml)",
        "mkdir -p cfgx && printf '[env]\\nENVVAR = \"a\"\\n' > cfgx/extra.toml && sed -i '1i include = \"../cfgx/extra.toml\"' .cargo/config.toml",
        "printf '[env]\\nENVVAR = \"b\"\\n' > cfgx/extra.toml",
    ),
    row(
        "14",
        "add the absent optional include ../local.toml",
        "sed -i '1i include = [{ path = \"../local.toml\", optional = true }]' .cargo/config.toml",
        "printf '[env]\\nENVVAR = \"local\"\\n' > local.toml",
    ),
    row(
        "15",
        "add .cargo/config beside .cargo/config.toml",
        "",
        "printf '[env]\\nENVVAR = \"shadow\"\\n' > .cargo/config",
    ),
    row(
        "16",
        "edit a rustflags @argfile",
        "mkdir -p flags && echo '--cfg=base' > flags/args.txt && sed -i 's|rustflags = .*|rustflags = [\"@flags/args.txt\"]|' .cargo/config.toml",
        "echo '--cfg=evil' > flags/args.txt",
    ),
    row(
        "17",
        "edit build.rustc-wrapper = tools/wrap.sh",
        "mkdir -p tools && printf '#!/bin/sh\\nexec \"$@\"\\n' > tools/wrap.sh && chmod +x tools/wrap.sh && sed -i 's|^\\[build\\]|[build]\\nrustc-wrapper = \"tools/wrap.sh\"|' .cargo/config.toml",
        "printf '#!/bin/sh\\nexec \"$@\" --cfg evil\\n' > tools/wrap.sh",
    ),
    row(
        "18",
        "edit the file an [env] relative value names, read by the build script",
        concat!(
            "mkdir -p shared && echo s1 > shared/cfg.txt && printf '[env]\\nCFG_FILE = { value = \"shared/cfg.txt\", relative = true }\\n' >> .cargo/config.toml && ",
            "EXTRA='println!(\"cargo:rustc-env=EXTRA={}\", std::fs::read_to_string(std::env::var(\"CFG_FILE\").unwrap()).unwrap_or_default().trim());' && ",
            extra_line!()
        ),
        "echo s2 > shared/cfg.txt",
    ),
    row(
        "19",
        "build.target-dir = \"app/data\"",
        "",
        "sed -i 's|^\\[build\\]|[build]\\ntarget-dir = \"app/data\"|' .cargo/config.toml",
    ),
    row(
        "20",
        "build.build-dir = \"bdir\"",
        "",
        "sed -i 's|^\\[build\\]|[build]\\nbuild-dir = \"bdir\"|' .cargo/config.toml",
    ),
    default_row(
        "21",
        "data/cfg.txt a symlink to ../../shared/cfg.txt; edit the target",
        "mkdir -p shared && mv app/data/cfg.txt shared/cfg.txt && ln -s ../../shared/cfg.txt app/data/cfg.txt",
        "echo cfg-21 > shared/cfg.txt",
    ),
    default_row(
        "22",
        "app/data a symlink to ../shared_data; edit a file behind it",
        "mv app/data shared_data && ln -s ../shared_data app/data",
        "echo cfg-22 > shared_data/cfg.txt",
    ),
    row(
        "23",
        "a chain data/cfg.txt -> s/a -> s/b; edit s/b",
        "mkdir -p app/data/s && mv app/data/cfg.txt app/data/s/b && ln -s b app/data/s/a && ln -s s/a app/data/cfg.txt",
        "echo cfg-23 > app/data/s/b",
    ),
    row(
        "24",
        ".cargo a symlink to cfgdir/; edit cfgdir/config.toml",
        "mv .cargo cfgdir && ln -s cfgdir .cargo",
        "sed -i 's|base|evil|' cfgdir/config.toml",
    ),
    row(
        "25",
        ".cargo/config.toml a symlink to ../cfgfile.toml; edit it",
        "mv .cargo/config.toml cfgfile.toml && ln -s ../cfgfile.toml .cargo/config.toml",
        "sed -i 's|base|evil|' cfgfile.toml",
    ),
    row(
        "26",
        "Cargo.lock a symlink into lk/; edit the target",
        "mkdir -p lk && mv Cargo.lock lk/Cargo.lock && ln -s lk/Cargo.lock Cargo.lock",
        "echo '# edited' >> lk/Cargo.lock",
    ),
    row(
        "27",
        "rust-toolchain.toml a symlink into tc/; switch it to nightly",
        "mkdir -p tc && printf '[toolchain]\\nchannel = \"stable\"\\n' > tc/rt.toml && ln -s tc/rt.toml rust-toolchain.toml",
        "printf '[toolchain]\\nchannel = \"nightly\"\\n' > tc/rt.toml",
    ),
    row(
        "28",
        "a declared link dangling on main, then its target created",
        concat!(
            "ln -s ../gen/cfg2.txt app/data/extra.txt && EXTRA='println!(\"cargo:rerun-if-changed=data\\/extra.txt\"); println!(\"cargo:rustc-env=EXTRA={}\", std::fs::read_to_string(\"data\\/extra.txt\").unwrap_or_default().trim());' && ",
            extra_line!()
        ),
        "mkdir -p app/gen && echo created > app/gen/cfg2.txt",
    ),
    row(
        "29",
        "declared data/cfg.txt replaced by a link to /etc/hostname",
        "",
        "rm app/data/cfg.txt && ln -s /etc/hostname app/data/cfg.txt",
    ),
    row(
        "30",
        "add rust-toolchain (nightly) beside rust-toolchain.toml",
        "printf '[toolchain]\\nchannel = \"stable\"\\n' > rust-toolchain.toml",
        "echo nightly > rust-toolchain",
    ),
    row(
        "31",
        "rust-toolchain.toml with path = \"tools/tc\"",
        "",
        "printf '[toolchain]\\npath = \"tools/tc\"\\n' > rust-toolchain.toml",
    ),
    row(
        "32",
        "build = \"../tools/appbuild.rs\"; edit that file",
        "mkdir -p tools && mv app/build.rs tools/appbuild.rs && sed -i 's|^\\[dependencies\\]|build = \"../tools/appbuild.rs\"\\n[dependencies]|' app/Cargo.toml",
        "echo '// edited' >> tools/appbuild.rs",
    ),
    row(
        "33",
        "[lib] path = \"../shared/util.rs\"; edit it",
        "mkdir -p shared && mv util/src/lib.rs shared/util.rs && printf '[lib]\\npath = \"../shared/util.rs\"\\n' >> util/Cargo.toml",
        "sed -i 's|VALUE: u32 = 1|VALUE: u32 = 2|' shared/util.rs",
    ),
    row(
        "34",
        "members = [..., \"extra/*\"]; add extra/evil/",
        "mkdir -p extra/a/src && printf '[package]\\nname = \"a\"\\nversion = \"0.1.0\"\\nedition = \"2021\"\\n' > extra/a/Cargo.toml && echo '' > extra/a/src/lib.rs && sed -i 's|\"mac\"\\]|\"mac\", \"extra/*\"]|' Cargo.toml && cargo generate-lockfile --offline -q",
        "mkdir -p extra/evil/src && printf '[package]\\nname = \"evil\"\\nversion = \"0.1.0\"\\nedition = \"2021\"\\n' > extra/evil/Cargo.toml && echo '' > extra/evil/src/lib.rs",
    ),
    row(
        "35",
        "add util/build.rs",
        "",
        "printf 'fn main() { println!(\"cargo:rustc-cfg=evil\"); }\\n' > util/build.rs",
    ),
    row(
        "36",
        "add util/src/bin/x.rs",
        "",
        "mkdir -p util/src/bin && echo 'fn main() {}' > util/src/bin/x.rs",
    ),
    row(
        "37",
        "add [lints] to a manifest; a description through [workspace.package]",
        "",
        "printf '[lints.rust]\\nunused = \"allow\"\\n' >> util/Cargo.toml && sed -i 's|description = \"base\"|description = \"evil\"|' Cargo.toml",
    ),
    Row {
        id: "38",
        what: "$CARGO_HOME inside the checkout (.cargo-home/); add its config.toml",
        prep: "mkdir -p .cargo-home",
        edit: "printf '[env]\\nENVVAR = \"home\"\\n' > .cargo-home/config.toml",
        needs: &[],
        default: false,
        cargo_home_inside: true,
        workspace: "",
    },
    row(
        "39",
        "a source file whose name holds a newline, embedded",
        "",
        "printf 'x' > \"app/src/we\nird.txt\" && printf 'pub fn extra() -> String { include_str!(\"we\\\\nird.txt\").into() }\\n' > app/src/extra.rs",
    ),
    row(
        "40",
        "a source file whose name is not UTF-8",
        "",
        "printf 'x' > \"app/src/$(printf '\\377').rs\"",
    ),
    row(
        "41",
        "[target.<host>] runner = \"tools/run.sh --flag\"; edit the script",
        "mkdir -p tools && printf '#!/bin/sh\\nexec \"$@\"\\n' > tools/run.sh && chmod +x tools/run.sh && printf '[target.%s]\\nrunner = \"tools/run.sh --flag\"\\n' \"$(rustc -vV | sed -n 's/^host: //p')\" >> .cargo/config.toml",
        "printf '#!/bin/sh\\necho evil\\nexec \"$@\"\\n' > tools/run.sh",
    ),
    default_row(
        "42",
        "[profile.dev] added to .cargo/config.toml",
        "",
        "printf '[profile.dev]\\nopt-level = 1\\n' >> .cargo/config.toml",
    ),
    row(
        "43",
        "build.dep-info-basedir = \"app\", then a declared input edited",
        "sed -i 's|^\\[build\\]|[build]\\ndep-info-basedir = \"app\"|' .cargo/config.toml",
        "echo cfg-43 > app/data/cfg.txt",
    ),
    row(
        "44",
        "r#include_str!(\"../data/n.txt\") (a raw macro name)",
        "echo n1 > app/data/n.txt && printf 'pub fn extra() -> String { r#include_str!(\"../data/n.txt\").trim().into() }\\n' > app/src/extra.rs",
        "echo n2 > app/data/n.txt",
    ),
    default_row(
        "V8",
        "a build script runs cargo metadata in tools/kernels/; add its .cargo/config",
        concat!(
            "mkdir -p tools/kernels/src && printf '[package]\\nname = \"kernels\"\\nversion = \"0.1.0\"\\nedition = \"2021\"\\n[workspace]\\n' > tools/kernels/Cargo.toml && echo '' > tools/kernels/src/lib.rs && ",
            "EXTRA='let m = std::process::Command::new(std::env::var(\"CARGO\").unwrap()).args([\"metadata\", \"--format-version\", \"1\", \"--no-deps\", \"--offline\"]).current_dir(\"..\\/tools\\/kernels\").output().map(|o| String::from_utf8_lossy(\\&o.stdout).contains(\"\\/evil\\\\\"\")).unwrap_or(false); println!(\"cargo:rustc-env=EXTRA=metadata-evil={m}\");' && ",
            extra_line!()
        ),
        "mkdir -p tools/kernels/.cargo && printf '[build]\\ntarget-dir = \"evil\"\\n' > tools/kernels/.cargo/config",
    ),
];

/// The fixture of the campaign (docs/key-attacks.md, "Method").
pub(crate) fn base() -> Fixture {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"app\", \"util\", \"mac\"]\nresolver = \"2\"\n\n[workspace.package]\nversion = \"0.1.0\"\nedition = \"2021\"\ndescription = \"base\"\n",
    )
    .file(
        "app/Cargo.toml",
        "[package]\nname = \"app\"\nversion.workspace = true\nedition.workspace = true\ndescription.workspace = true\n\n[dependencies]\nutil = { path = \"../util\" }\nmac = { path = \"../mac\" }\n",
    )
    .file(
        "app/build.rs",
        "fn main() {\n    println!(\"cargo:rerun-if-changed=build.rs\");\n    println!(\"cargo:rerun-if-changed=data/cfg.txt\");\n    let cfg = std::fs::read_to_string(\"data/cfg.txt\").unwrap_or_default();\n    println!(\"cargo:rustc-env=CFG={}\", cfg.trim());\n    // EXTRA\n}\n",
    )
    .file("app/data/cfg.txt", "cfg-1\n")
    .file(
        "app/src/lib.rs",
        "mod extra;\npub fn report() -> String {\n    format!(\n        \"util={} mac={} cfg={} readme={:?} desc={} evil={} base={} env={:?} build-extra={:?} extra={}\",\n        util::VALUE,\n        mac::value!(),\n        env!(\"CFG\"),\n        option_env!(\"CARGO_PKG_README\"),\n        env!(\"CARGO_PKG_DESCRIPTION\"),\n        cfg!(evil),\n        cfg!(base),\n        option_env!(\"ENVVAR\"),\n        option_env!(\"EXTRA\"),\n        extra::extra(),\n    )\n}\n",
    )
    .file("app/src/extra.rs", "pub fn extra() -> String {\n    String::new()\n}\n")
    .file("app/src/main.rs", "fn main() {\n    println!(\"{}\", app::report());\n}\n")
    .file(
        "app/tests/it.rs",
        "#[test]\nfn reports() {\n    assert!(!app::report().is_empty());\n}\n",
    )
    .file(
        "util/Cargo.toml",
        "[package]\nname = \"util\"\nversion.workspace = true\nedition.workspace = true\n",
    )
    .file("util/src/lib.rs", "pub const VALUE: u32 = 1;\n")
    .file(
        "mac/Cargo.toml",
        "[package]\nname = \"mac\"\nversion.workspace = true\nedition.workspace = true\n\n[lib]\nproc-macro = true\n",
    )
    .file(
        "mac/src/lib.rs",
        "use proc_macro::TokenStream;\n#[proc_macro]\npub fn value(_: TokenStream) -> TokenStream {\n    \"1\".parse().unwrap()\n}\n",
    )
    .file(".cargo/config.toml", "[build]\nrustflags = [\"--cfg\", \"base\"]\n")
    .file(
        ".github/ci-trust.toml",
        "[[archive]]\nfile = \"app.tar.zst\"\nnextest = [\"-p\", \"app\", \"--locked\"]\n",
    );
    let lock = Command::new(cargo())
        .args(["generate-lockfile", "--offline"])
        .current_dir(f.path())
        .output()
        .unwrap();
    assert!(lock.status.success(), "{}", stderr(&lock));
    f
}

/// Copies `from` to `to` as it is (symlinks as links), with `cp -a`.
pub(crate) fn copy(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}

pub(crate) fn shell(dir: &Path, script: &str) -> Result<(), String> {
    if script.is_empty() {
        return Ok(());
    }
    let output = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .output()
        .unwrap();
    if output.status.success() {
        Ok(())
    } else {
        Err(stderr(&output))
    }
}

/// The key of `dir`, or why it was refused.
pub(crate) fn key(dir: &Path, row: &Row) -> Result<String, String> {
    let mut cmd = xtask(&["ci-key", "--root"]);
    cmd.arg(dir.join(row.workspace));
    if row.cargo_home_inside {
        cmd.env("CARGO_HOME", dir.join(".cargo-home"));
    }
    let output = cmd.output().unwrap();
    if output.status.success() {
        Ok(stdout(&output).trim().to_owned())
    } else {
        Err(stderr(&output)
            .lines()
            .find(|l| l.starts_with("error"))
            .unwrap_or("")
            .chars()
            .take(160)
            .collect())
    }
}

/// What the build in `dir`'s key tree made: whether it built, and what the
/// built `app` printed.
fn built_in_key_tree(dir: &Path, tracer: &str, row: &Row) -> String {
    built(dir, tracer, row, true)
}

/// What the build of `dir` made, in its key tree or in the checkout.
pub(crate) fn built(dir: &Path, tracer: &str, row: &Row, in_key_tree: bool) -> String {
    let target = Fixture::new();
    let mut cmd = xtask(&["verify-key", "--trace", "--tracer", tracer]);
    if in_key_tree {
        cmd.arg("--key-tree");
    }
    cmd.arg("--root")
        .arg(dir.join(row.workspace))
        .arg("--")
        .arg(cargo())
        .args(["build", "--offline", "--quiet", "-p", "app", "--target-dir"])
        .arg(target.path());
    if row.cargo_home_inside {
        cmd.env("CARGO_HOME", dir.join(".cargo-home"));
    }
    let output = cmd.output().unwrap();
    let text = stderr(&output);
    assert_eq!(
        text.contains("the build runs in the key tree"),
        in_key_tree,
        "{text}"
    );
    match output.status.code() {
        Some(0 | 1) => {
            let app = Command::new(target.join("debug/app")).output().unwrap();
            format!("built: {}", stdout(&app).trim())
        }
        _ => "the build failed".to_owned(),
    }
}

fn has(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn every_edit_of_the_attack_table_moves_the_key_or_builds_like_main() {
    let test = "every_edit_of_the_attack_table_moves_the_key_or_builds_like_main";
    if !crate::key_tree::have_key_tree(test) {
        return;
    }
    let all = std::env::var("CI_TRUST_ATTACK_TABLE").is_ok_and(|v| v == "all");
    run_table(ROWS, all, "CI_TRUST_ATTACK_TABLE_OUT");
}

/// The tracer the table's builds run under: fanotify where permitted.
pub(crate) fn table_tracer() -> &'static str {
    if xtask(&[
        "verify-key",
        "--trace",
        "--tracer",
        "fanotify",
        "--",
        "true",
    ])
    .output()
    .is_ok_and(|o| !stderr(&o).contains("fanotify is not permitted"))
    {
        "fanotify"
    } else {
        "strace"
    }
}

/// Runs `rows` (those in the default suite, or `all`) and fails on any
/// whose key is the same and whose key-tree builds differ; writes the
/// outcome table to the file `$out_var` names.
pub(crate) fn run_table(rows: &[Row], all: bool, out_var: &str) {
    let tracer = table_tracer();
    let base = base();
    let mut table = vec![
        "| # | edit | key | key-tree builds |".to_owned(),
        "|---|---|---|---|".to_owned(),
    ];
    let mut failures = Vec::new();
    let mut ran = 0;
    for row in rows.iter().filter(|r| all || r.default) {
        if let Some(tool) = row.needs.iter().find(|t| !has(t)) {
            eprintln!("skipped row {}: needs {tool}", row.id);
            table.push(format!(
                "| {} | {} | skipped: needs {tool} | |",
                row.id, row.what
            ));
            continue;
        }
        let main = Fixture::new();
        copy(base.path(), main.path());
        if let Err(err) = shell(main.path(), row.prep) {
            failures.push(format!("row {}: prep failed: {err}", row.id));
            continue;
        }
        let pr = Fixture::new();
        copy(main.path(), pr.path());
        if let Err(err) = shell(pr.path(), row.edit) {
            failures.push(format!("row {}: edit failed: {err}", row.id));
            continue;
        }
        ran += 1;
        let (main_key, pr_key) = (key(main.path(), row), key(pr.path(), row));
        let (outcome, builds) = match (&main_key, &pr_key) {
            (Err(err), _) => {
                failures.push(format!("row {}: main's tree has no key: {err}", row.id));
                continue;
            }
            (Ok(_), Err(why)) => (format!("refused ({why})"), String::new()),
            (Ok(a), Ok(b)) if a != b => ("moved".to_owned(), String::new()),
            (Ok(_), Ok(_)) => {
                let (before, after) = (
                    built_in_key_tree(main.path(), tracer, row),
                    built_in_key_tree(pr.path(), tracer, row),
                );
                if before != after {
                    failures.push(format!(
                        "row {} ({}): the key is the same, but the key-tree builds differ:\n  main: {before}\n  pr:   {after}",
                        row.id, row.what
                    ));
                }
                let verdict = if before == after { "same" } else { "DIFFERENT" };
                ("same".to_owned(), format!("{verdict}: {after}"))
            }
        };
        table.push(format!(
            "| {} | {} | {} | {} |",
            row.id,
            row.what,
            outcome.replace('|', "/"),
            builds.replace('|', "/")
        ));
    }
    let table = table.join("\n");
    eprintln!("{table}");
    if let Ok(path) = std::env::var(out_var) {
        std::fs::write(path, format!("{table}\n")).unwrap();
    }
    assert!(ran > 0, "no row ran");
    assert!(failures.is_empty(), "{}\n{table}", failures.join("\n"));
}

/// The harness can fail: the edits the key does not see, built in the
/// checkout instead of the key tree, do change what is built.
#[test]
fn without_the_key_tree_the_edits_the_key_misses_change_the_build() {
    let test = "without_the_key_tree_the_edits_the_key_misses_change_the_build";
    if !crate::key_tree::have_key_tree(test) {
        return;
    }
    let base = base();
    for id in ["9", "10", "V8"] {
        let row = ROWS.iter().find(|r| r.id == id).unwrap();
        let main = Fixture::new();
        copy(base.path(), main.path());
        shell(main.path(), row.prep).unwrap();
        let pr = Fixture::new();
        copy(main.path(), pr.path());
        shell(pr.path(), row.edit).unwrap();
        assert_eq!(key(main.path(), row), key(pr.path(), row), "row {id}");
        let tracer = "strace";
        if !Command::new(tracer)
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            eprintln!("skipped {test}: needs strace");
            return;
        }
        assert_ne!(
            built(main.path(), tracer, row, false),
            built(pr.path(), tracer, row, false),
            "row {id}: the checkout build should see the edit"
        );
    }
}
