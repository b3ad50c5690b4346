//! `ci-key`'s reading of Rust sources on forms that are easy to miss, on
//! real fixture workspaces: each is built with the real cargo, `verify-key`
//! must find nothing missing, and changing each file must change the key.
//! The crate roots live outside `src/`, so only the module walk can find
//! these files (`src/` is hashed whole).

use std::process::Command;

use crate::support::{Fixture, stderr, stdout, xtask_cmd};

fn ci_key(f: &Fixture) -> String {
    let output = f.xtask(&["ci-key"]);
    assert!(
        output.status.success(),
        "ci-key failed:\n{}",
        stderr(&output)
    );
    stdout(&output).trim().to_owned()
}

fn refused(f: &Fixture, needles: &[&str]) {
    let output = f.xtask(&["ci-key"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(stdout(&output).is_empty());
    for needle in needles {
        assert!(err.contains(needle), "lacks {needle:?}:\n{err}");
    }
}

fn forms_workspace() -> Fixture {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"forms\", \"other\"]\nresolver = \"2\"\n",
    )
    .file(
        "forms/Cargo.toml",
        "[package]\nname = \"forms\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"code/lib.rs\"\n",
    )
    .file(
        "other/Cargo.toml",
        "[package]\nname = \"other\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nforms = { path = \"../forms\" }\n",
    )
    .file(
        "forms/code/lib.rs",
        r#"#![debugger_visualizer(gdb_script_file = "../../dbg/g.py")]
pub use std::include_str as embed;
use core::{include_bytes as ib};
mod user;
mod r#match;
mod ws;
macro_rules! declare { () => { #[path = "../../extra/m.rs"] mod from_macro; }; }
declare!();
#[cfg_attr(unix, path = "sys_unix")]
mod sys { pub mod inner; }
pub static B: &[u8] = ib!("../../data/b.bin");
pub const U: &str = user::U;
pub const M: u8 = r#match::M + ws::W + from_macro::X + sys::inner::I;
pub const C: &str = ::core::include_str!("../../data/c.txt");
pub struct S;
impl S { pub const I: &'static str = include_str!("../../data/impl.txt"); }
"#,
    )
    .file(
        "forms/code/user.rs",
        "pub const U: &str = crate::embed!(\"../../data/u.txt\");\n",
    )
    .file("forms/code/match.rs", "pub const M: u8 = 1;\n")
    // `mod` and its name separated by U+2028, Pattern_White_Space to rustc.
    .file("forms/code/ws.rs", "mod\u{2028}uni;\npub const W: u8 = uni::V;\n")
    .file("forms/code/ws/uni.rs", "pub const V: u8 = 2;\n")
    .file("forms/code/sys_unix/inner.rs", "pub const I: u8 = 4;\n")
    .file("extra/m.rs", "pub const X: u8 = 3;\n")
    .file(
        "other/src/lib.rs",
        "pub const O: &str = forms::embed!(\"../../data/o.txt\");\n",
    )
    .file("data/u.txt", "u")
    .file("data/b.bin", "b")
    .file("data/c.txt", "c")
    .file("data/o.txt", "o")
    .file("data/impl.txt", "i")
    .file("dbg/g.py", "print(1)\n");
    f
}

#[test]
fn aliases_raw_names_unicode_space_macro_modules_and_visualizers_are_inputs() {
    let f = forms_workspace();
    let target = Fixture::new();
    let build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--workspace",
            "--offline",
            "--quiet",
            "--target-dir",
        ])
        .arg(target.path())
        .current_dir(f.path())
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "fixture build failed:\n{}",
        stderr(&build)
    );
    let verify = xtask_cmd(&["verify-key", "--target-dir"])
        .arg(target.path())
        .arg("--root")
        .arg(f.path())
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "every file the build read must be a key input:\n{}",
        stderr(&verify)
    );
    let mut key = ci_key(&f);
    for file in [
        "data/u.txt",                   // `crate::embed!`, a private alias used in another file
        "data/b.bin",                   // `use core::{include_bytes as ib}`
        "data/o.txt",                   // `forms::embed!`, a `pub use` alias in another crate
        "data/c.txt",                   // `::core::include_str!`
        "data/impl.txt",                // in an impl block
        "dbg/g.py",                     // `#![debugger_visualizer(gdb_script_file = …)]`
        "forms/code/match.rs",          // `mod r#match;`
        "forms/code/ws/uni.rs",         // `mod\u{2028}uni;`
        "extra/m.rs",                   // `#[path] mod` in a macro_rules! body
        "forms/code/sys_unix/inner.rs", // in `#[cfg_attr(unix, path = "sys_unix")] mod sys { … }`
    ] {
        f.file(file, "changed\n");
        let changed = ci_key(&f);
        assert_ne!(changed, key, "changing {file} must change the key");
        key = changed;
    }
}

#[test]
fn a_module_a_macro_caller_names_reads_every_candidate() {
    // As aws-lc-sys and snafu do: `mod $name;` in a macro_rules! body.
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"code/lib.rs\"\n",
    )
    .file(
        "code/lib.rs",
        "macro_rules! modules { ($($name:ident),*) => { $(pub mod $name;)* }; }\nmodules!(a, b);\n",
    )
    .file("code/a.rs", "pub const A: u8 = 1;\n")
    .file("code/b.rs", "pub const B: &str = include_str!(\"../data/x.txt\");\n")
    .file("data/x.txt", "x");
    let target = Fixture::new();
    let build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--offline", "--quiet", "--target-dir"])
        .arg(target.path())
        .current_dir(f.path())
        .output()
        .unwrap();
    assert!(build.status.success(), "{}", stderr(&build));
    let verify = xtask_cmd(&["verify-key", "--target-dir"])
        .arg(target.path())
        .arg("--root")
        .arg(f.path())
        .output()
        .unwrap();
    assert!(verify.status.success(), "{}", stderr(&verify));
    let mut key = ci_key(&f);
    for file in ["data/x.txt", "code/a.rs", "code/new.rs"] {
        f.file(file, "changed\n");
        let changed = ci_key(&f);
        assert_ne!(changed, key, "changing {file} must change the key");
        key = changed;
    }
}

#[test]
fn a_module_path_a_macro_caller_chooses_is_refused() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file(
        "src/lib.rs",
        "macro_rules! at { ($p:literal) => { #[path = $p] mod m; }; }\nat!(\"../elsewhere.rs\");\n",
    );
    refused(&f, &["src/lib.rs:1", "macro_rules! at", "`#[path = $…]`"]);
}

#[test]
fn hostile_nesting_is_refused_with_its_line_not_a_stack_overflow() {
    let f = Fixture::new();
    let depth = 5000;
    let mut lib = String::from("pub fn f() {}\n");
    for i in 0..depth {
        lib.push_str(&format!("mod m{i} {{ "));
    }
    lib.push_str("mod leaf;");
    lib.push_str(&"}".repeat(depth));
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("src/lib.rs", &lib);
    refused(&f, &["src/lib.rs:2: brackets nest more than 256 deep"]);
}

#[test]
fn a_chain_of_thousands_of_module_files_is_walked() {
    // Each file declares the next: iterative, so depth costs no stack.
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"code/lib.rs\"\n",
    )
    .file("code/lib.rs", "#[path = \"../chain/c0.rs\"] mod c0;\n");
    let n = 3000;
    for i in 0..n {
        f.file(
            &format!("chain/c{i}.rs"),
            &format!("#[path = \"c{}.rs\"] mod next;\n", i + 1),
        );
    }
    f.file(&format!("chain/c{n}.rs"), "");
    let before = ci_key(&f);
    f.file(&format!("chain/c{n}.rs"), "pub fn last() {}\n");
    assert_ne!(ci_key(&f), before);
}

#[test]
fn an_absolute_path_outside_the_checkout_is_refused() {
    let outside = Fixture::new();
    outside.file("evil.rs", "");
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file(
        "src/lib.rs",
        &format!(
            "#[path = {:?}] mod evil;\n",
            outside.join("evil.rs").display().to_string()
        ),
    );
    refused(&f, &["src/lib.rs:1", "outside the repository"]);
}

#[test]
fn a_contrived_chain_of_include_aliases_is_refused() {
    let f = Fixture::new();
    let mut lib = String::from("use std::include_str as alias0;\n");
    for k in 1..=10 {
        lib.push_str(&format!("mod c{k};\n"));
        f.file(
            &format!("src/c{k}.rs"),
            &format!("pub(crate) use crate::alias{} as alias{k};\n", k - 1),
        );
    }
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("src/lib.rs", &lib);
    refused(&f, &["a chain of more than 8 `use … as …` aliases"]);
}

/// Runs `ci-key` on `f` and returns its own peak RSS in bytes (`wait4`'s
/// `ru_maxrss`: this child's, not the largest of the test process's children).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn ci_key_peak_rss(f: &Fixture) -> u64 {
    let child = xtask_cmd(&["ci-key"])
        .arg("--root")
        .arg(f.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start xtask");
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
    let mut status: libc::c_int = 0;
    // SAFETY: a zeroed `rusage` is a valid value; the pointers are valid for the call.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet reaped.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(rc, pid, "wait4: {}", std::io::Error::last_os_error());
    drop(child);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "ci-key failed (wait status {status})"
    );
    // Linux reports kilobytes.
    u64::try_from(usage.ru_maxrss).expect("non-negative") * 1024
}

/// A generated source of hostile size that must be tokenised (it holds an
/// include) costs memory in proportion to its size, with a small constant:
/// tokens are never materialised (with owned tokens it took 37 times the
/// file, 1.1 GB for 30 MB).
#[cfg(target_os = "linux")]
#[test]
fn a_huge_generated_source_is_read_in_memory_proportional_to_its_size() {
    let f = Fixture::new();
    let mut lib = String::from("pub const A: &str = include_str!(\"a.txt\");\n");
    let mut i = 0;
    while lib.len() < 16_000_000 {
        lib.push_str(&format!(
            "pub fn f{i}(x: u32) -> u32 {{ let v = [1, 2, 3, 4, 5, 6, 7, 8]; x + v[{}] * {i} }}\n",
            i % 8
        ));
        i += 1;
    }
    f.file(
        "Cargo.toml",
        "[package]\nname = \"big\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("src/lib.rs", &lib)
    .file("src/a.txt", "a");
    let size = u64::try_from(lib.len()).expect("fits");
    // What ci-key costs on a tiny crate (the binary, threads, allocator
    // arenas) is not the source's: measured alike, and subtracted.
    let tiny = Fixture::new();
    tiny.file(
        "Cargo.toml",
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file(
        "src/lib.rs",
        "pub const A: &str = include_str!(\"a.txt\");\n",
    )
    .file("src/a.txt", "a");
    let base = ci_key_peak_rss(&tiny);
    let peak = ci_key_peak_rss(&f);
    assert!(
        peak.saturating_sub(base) < 3 * size,
        "ci-key peaked at {} MB on a {} MB source, {} MB on a tiny crate (limit: 3x the source above that)",
        peak >> 20,
        size >> 20,
        base >> 20
    );
}

/// Builds `f` with the real cargo and runs `verify-key` on the build: every
/// file the compiler read must be a key input.
fn build_and_verify(f: &Fixture) {
    let target = Fixture::new();
    let build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--workspace",
            "--offline",
            "--quiet",
            "--target-dir",
        ])
        .arg(target.path())
        .current_dir(f.path())
        .output()
        .unwrap();
    assert!(build.status.success(), "{}", stderr(&build));
    let verify = xtask_cmd(&["verify-key", "--target-dir"])
        .arg(target.path())
        .arg("--root")
        .arg(f.path())
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "every file the build read must be a key input:\n{}",
        stderr(&verify)
    );
}

/// Changing each of `files` changes the key.
fn each_changes_the_key(f: &Fixture, files: &[&str]) {
    let mut key = ci_key(f);
    for file in files {
        f.file(file, "changed\n");
        let changed = ci_key(f);
        assert_ne!(changed, key, "changing {file} must change the key");
        key = changed;
    }
}

/// rustc resolves an include in a `macro_rules!` body from the file of the
/// outermost call: a call through a `use … as` alias, through another
/// macro, or from another crate (`#[macro_export]`) reads another file
/// than the definition's directory names.
#[test]
fn a_macro_rules_include_called_by_alias_through_a_macro_or_from_another_crate() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"inc\", \"user\"]\nresolver = \"2\"\n",
    )
    .file(
        "inc/Cargo.toml",
        "[package]\nname = \"inc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"code/lib.rs\"\n",
    )
    .file(
        "user/Cargo.toml",
        "[package]\nname = \"user\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"code/lib.rs\"\n[dependencies]\ninc = { path = \"../inc\" }\n",
    )
    .file(
        "inc/code/lib.rs",
        r#"#[macro_export]
macro_rules! my_include { ($p:literal) => { include_str!(concat!("../data/", $p)) } }
macro_rules! outer { ($p:literal) => { my_include!($p) } }
mod sub;
#[path = "a/b/deep.rs"]
mod deep;
pub const T: &str = sub::T;
pub const D: &str = deep::D;
"#,
    )
    .file(
        "inc/code/sub/mod.rs",
        "use crate::my_include as inc;\npub const T: &str = inc /* a comment */ !(\"x.txt\");\n",
    )
    .file("inc/code/a/b/deep.rs", "pub const D: &str = outer!(\"y.txt\");\n")
    .file(
        "user/code/lib.rs",
        "pub const U: &str = inc::my_include!(\"z.txt\");\n",
    )
    .file("inc/code/data/x.txt", "x")
    .file("inc/code/a/data/y.txt", "y")
    .file("user/data/z.txt", "z");
    build_and_verify(&f);
    each_changes_the_key(
        &f,
        &[
            "inc/code/data/x.txt",   // `inc!`, an alias of the macro
            "inc/code/a/data/y.txt", // `outer!`, a macro that calls it
            "user/data/z.txt",       // `inc::my_include!` from another crate
        ],
    );
}

/// Registry macros that read files (`PATH_MACROS`): a directory below the
/// manifest is hashed whole, its absence too; one whose rules are not
/// modelled refuses the key until the policy declares its files. (No build:
/// these crates are not in the offline registry; each form's expansion is
/// the crate's.)
#[test]
fn registry_macros_that_read_files_are_hashed_or_refused() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"code/lib.rs\"\n",
    )
    .file(
        "code/lib.rs",
        r#"mod db;
static ASSETS: Dir = include_dir::include_dir!("$CARGO_MANIFEST_DIR/assets");
#[derive(rust_embed::RustEmbed)]
#[folder = "public/"]
struct Public;
"#,
    )
    .file("code/db.rs", "pub fn m() { sqlx::migrate!(); }\n")
    .file("assets/deep/a.txt", "a")
    .file("public/index.html", "i");
    each_changes_the_key(
        &f,
        &[
            "assets/deep/a.txt", // include_dir!
            "assets/new.txt",
            "public/index.html", // #[folder]
            "migrations/1.sql",  // sqlx::migrate!() with no argument: ./migrations
        ],
    );
    f.file(
        "code/db.rs",
        "#[derive(askama::Template)]\n#[template(path = \"hello.html\")]\nstruct Hello;\n",
    );
    refused(
        &f,
        &[
            "code/db.rs:2: #[template] (askama or rinja)",
            "site = \"code/db.rs\"",
        ],
    );
    f.file(
        ".github/ci-trust.toml",
        "[[key.dynamic-include]]\nsite = \"code/db.rs\"\nfiles = [\"templates/*.html\"]\nreason = \"askama's template directory\"\n",
    )
    .file("templates/hello.html", "h");
    each_changes_the_key(&f, &["templates/hello.html"]);
    f.file(
        "code/db.rs",
        "static OUT: Dir = include_dir::include_dir!(\"$CARGO_MANIFEST_DIR/../../outside\");\n",
    );
    refused(
        &f,
        &[
            "code/db.rs:1: include_dir! (include_dir)",
            "outside the repository",
        ],
    );
}

/// Forms found by attacking the scanner with real builds: a file module
/// declared in the parenthesised arguments of an item macro, an include
/// called by its raw name, a string continued over lines or spelled with
/// escapes, a `#[path]` module in a function body.
#[test]
fn modules_in_paren_macro_arguments_and_raw_include_names_are_inputs() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"code/lib.rs\"\n",
    )
    .file(
        "code/lib.rs",
        r#"macro_rules! items { ($($i:item)*) => { $($i)* } }
items!(pub mod a;);
pub fn f() -> &'static str {
    #[path = "fnmod.rs"]
    mod inner;
    inner::X
}
pub const R: &str = r#include_str!("../data/raw.txt");
pub const S: &str = include_str!("../data\
      /cont.txt");
pub const U: &str = include_str!("../d\u{61}ta/uni.txt");
"#,
    )
    .file(
        "code/a.rs",
        "pub const A: &str = include_str!(\"../data/a.txt\");\n",
    )
    .file("code/fnmod.rs", "pub const X: &str = \"x\";\n")
    .file("data/a.txt", "a")
    .file("data/raw.txt", "r")
    .file("data/cont.txt", "c")
    .file("data/uni.txt", "u");
    build_and_verify(&f);
    each_changes_the_key(
        &f,
        &[
            "data/a.txt",    // included by `a`, a module of `items!(pub mod a;)`
            "data/raw.txt",  // `r#include_str!`
            "data/cont.txt", // "…\<newline> …"
            "data/uni.txt",  // "\u{61}"
            "code/fnmod.rs", // `#[path]` module in a function body
            "code/a.rs",
        ],
    );
}

/// An include macro handed to a `macro_rules!` as a token and called there
/// as `$m!(…)`: no reading of the definition shows the path, so the key is
/// refused until the policy declares the files (then the build is covered).
#[test]
fn an_include_macro_handed_to_a_macro_as_a_token_is_refused_until_declared() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"code/lib.rs\"\n",
    )
    .file(
        "code/lib.rs",
        "macro_rules! call { ($m:ident, $p:literal) => { $m!($p) } }\nmod user;\npub const B: &str = user::B;\n",
    )
    .file(
        "code/user.rs",
        "pub const B: &str = call!(include_str, \"../data/b.txt\");\npub fn f(include: &str) { println!(\"{}\", include.len()); }\n",
    )
    .file("data/b.txt", "b");
    refused(
        &f,
        &[
            "code/user.rs:1: include_str! names a path chosen where `include_str` is handed to call! as a token",
            "site = \"code/user.rs\"",
        ],
    );
    // `include` handed to `println!` is a value, never invoked; handed to
    // `call!`, whose body calls `$m!`, it may be.
    f.file(
        "code/user.rs",
        "pub const B: &str = \"\";\npub fn f(include: &str) { println!(\"{}\", include); }\npub fn g() -> &'static str { call!(include, \"../data/b.rs\") }\n",
    );
    let output = f.xtask(&["ci-key"]);
    let err = stderr(&output);
    assert!(
        err.contains(
            "code/user.rs:3: include! names a path chosen where `include` is handed to call!"
        ),
        "{err}"
    );
    assert!(!err.contains("code/user.rs:2"), "{err}");
    f.file(
        "code/user.rs",
        "pub const B: &str = call!(include_str, \"../data/b.txt\");\n",
    )
    .file(
        ".github/ci-trust.toml",
        "[[key.dynamic-include]]\nsite = \"code/user.rs\"\nfiles = [\"data/*.txt\"]\nreason = \"call! is handed include_str\"\n",
    );
    build_and_verify(&f);
    each_changes_the_key(&f, &["data/b.txt"]);
}

/// The most natural wrapper, `include_str!($p)`, includes whatever each
/// outermost call passes, read from that call's file: resolved from every
/// call's string literal (by name, by alias, through another macro); an
/// argument that is not plain literals refuses the key until declared.
#[test]
fn a_macro_rules_wrapper_whose_path_is_its_argument_is_resolved_at_each_call() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"code/lib.rs\"\n",
    )
    .file(
        "code/lib.rs",
        r#"macro_rules! my_include { ($p:literal) => { include_str!($p) } }
pub(crate) use my_include;
macro_rules! outer { ($p:literal) => { my_include!($p) } }
mod sub;
#[path = "a/b/deep.rs"]
mod deep;
pub const T: &str = sub::T;
pub const D: &str = deep::D;
pub const L: &str = my_include!("../data/l.txt");
"#,
    )
    .file(
        "code/sub/mod.rs",
        "use crate::my_include as inc;\npub const T: &str = inc!(\"../data/x.txt\");\n",
    )
    .file("code/a/b/deep.rs", "pub const D: &str = outer!(\"../data/y.txt\");\n")
    .file("code/data/x.txt", "x")
    .file("code/a/data/y.txt", "y")
    .file("data/l.txt", "l");
    build_and_verify(&f);
    each_changes_the_key(
        &f,
        &[
            "data/l.txt",        // a call in the defining file
            "code/data/x.txt",   // `inc!`, an alias, from another file
            "code/a/data/y.txt", // `outer!`, a macro passing its argument on
        ],
    );
    f.file(
        "code/a/b/deep.rs",
        "macro_rules! wrap { ($p:expr) => { include_str!($p) } }\npub const D: &str = wrap!(concat!(\"../data/\", \"y.txt\"));\n",
    );
    // The call is expanded as rustc expands it: `include_str!(concat!(…))`.
    f.file("code/a/data/y.txt", "y");
    build_and_verify(&f);
    each_changes_the_key(&f, &["code/a/data/y.txt"]);
    // A call whose expansion gives no path ci-key can read is refused
    // there, with the entry to declare it.
    f.file(
        "code/a/b/deep.rs",
        "macro_rules! wrap { ($p:expr) => { include_str!($p) } }\npub const D: &str = wrap!(concat!(env!(\"DATA_DIR\"), \"/y.txt\"));\n",
    );
    refused(
        &f,
        &[
            "code/a/b/deep.rs:2: wrap! names the argument of wrap!",
            "expanding the call: env!(\"DATA_DIR\")",
            "site = \"code/a/b/deep.rs\"",
        ],
    );
    f.file(
        "code/a/b/deep.rs",
        "macro_rules! fixed { () => { crate::my_include!(\"../data/y.txt\") } }\npub const D: &str = fixed!();\n",
    );
    // A literal handed to the wrapper inside another macro's body is read
    // from the file of each outermost call of that macro.
    f.file("code/a/data/y.txt", "y");
    build_and_verify(&f);
    each_changes_the_key(&f, &["code/a/data/y.txt"]);
}

/// A `macro_rules!` that declares a file module, called through an alias
/// from a file that holds nothing else (no `include`, no `mod x;`: the
/// byte prefilter skips it), loads the module from that file's directory.
#[test]
fn a_module_declaring_macro_called_by_alias_from_a_plain_file_is_followed() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"code/lib.rs\"\n",
    )
    .file(
        "code/lib.rs",
        "macro_rules! declare { () => { pub mod from_macro; } }\npub(crate) use declare;\npub mod sub;\n",
    )
    .file("code/sub/mod.rs", "use crate::declare as d;\nd!();\n")
    .file("code/sub/from_macro.rs", "pub const X: u8 = 3;\n");
    build_and_verify(&f);
    each_changes_the_key(&f, &["code/sub/from_macro.rs"]);
}

/// rustc obeys the first of two `#[path]` attributes (the second is an
/// "unused attribute" warning); the scan took the last one.
#[test]
fn the_first_of_two_path_attributes_is_the_module_file() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"code/lib.rs\"\n",
    )
    .file(
        "code/lib.rs",
        "#[path = \"a.rs\"]\n#[path = \"b.rs\"]\nmod m;\npub use m::X;\n",
    )
    .file("code/a.rs", "pub const X: u8 = 1;\n")
    .file("code/b.rs", "pub const X: u8 = 2;\n");
    build_and_verify(&f);
    each_changes_the_key(&f, &["code/a.rs", "code/b.rs"]);
}

/// rustc reads `#[r#path = …]` and `#[r#cfg_attr(…, r#path = …)]` as
/// `path` and `cfg_attr`: raw attribute names are the same attributes.
#[test]
fn raw_attribute_names_are_the_attributes() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"code/lib.rs\"\n",
    )
    .file(
        "code/lib.rs",
        "#[r#path = \"a.rs\"]\nmod m;\npub use m::X;\n#[r#cfg_attr(all(), r#path = \"c.rs\")]\nmod n;\npub use n::Y;\n",
    )
    .file("code/a.rs", "pub const X: u8 = 1;\n")
    .file("code/c.rs", "pub const Y: u8 = 1;\n");
    build_and_verify(&f);
    each_changes_the_key(&f, &["code/a.rs", "code/c.rs"]);
}

/// The forms the issue lists for an attacker to try, each built for real:
/// doc attributes (outer and inner), a raw-string path, `concat!` of
/// literals only, an `include!`d file that itself includes, an include in a
/// build script under a `cfg`, and a `#[path]` module in an inline module.
#[test]
fn attacked_include_forms_are_inputs() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\nbuild = \"tools/build.rs\"\n[lib]\npath = \"code/lib.rs\"\n",
    )
    .file(
        "code/lib.rs",
        r###"#![doc = include_str!("../data/inner.md")]
#[doc = include_str!("../data/outer.md")]
pub struct S;
pub const R: &str = include_str!(r#"../data/raw.txt"#);
pub const C: &str = include_str!(concat!("../data/", "cat", ".txt"));
pub const I: &str = include!("../gen/part.rs");
mod inline {
    #[path = "../../data/nested.rs"]
    pub mod nested;
}
pub const N: u8 = inline::nested::N;
"###,
    )
    .file("gen/part.rs", "include_str!(\"../data/deep.txt\")\n")
    .file(
        "tools/build.rs",
        "#[cfg(target_os = \"linux\")]\nconst B: &str = include_str!(\"../data/build.txt\");\n#[cfg(not(target_os = \"linux\"))]\nconst B: &str = \"\";\nfn main() { let _ = B; }\n",
    )
    .file("data/inner.md", "i")
    .file("data/outer.md", "o")
    .file("data/raw.txt", "r")
    .file("data/cat.txt", "c")
    .file("data/deep.txt", "d")
    .file("data/build.txt", "b")
    .file("data/nested.rs", "pub const N: u8 = 1;\n")
    // The kernel resolves `inline/..` only if the directory exists.
    .file("code/inline/README", "");
    build_and_verify(&f);
    each_changes_the_key(
        &f,
        &[
            "data/inner.md",
            "data/outer.md",
            "data/raw.txt",
            "data/cat.txt",
            "data/deep.txt", // included by the `include!`d file
            "data/build.txt",
            "data/nested.rs",
            "gen/part.rs",
        ],
    );
}

/// A `macro_rules!` that declares a file module, called inside an inline
/// module, loads the file from that module's directory (outside `src/`,
/// which is not hashed whole); inside an inline module that `#[path]`
/// moves, the key is refused.
#[test]
fn a_module_declaring_macro_called_in_an_inline_module_loads_from_its_directory() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"code/lib.rs\"\n",
    )
    .file(
        "code/lib.rs",
        "macro_rules! declare { () => { pub mod from_macro; } }\npub mod outer { declare!(); }\npub const X: u8 = outer::from_macro::X;\n",
    )
    .file("code/outer/from_macro.rs", "pub const X: u8 = 3;\n");
    build_and_verify(&f);
    each_changes_the_key(&f, &["code/outer/from_macro.rs"]);
    f.file(
        "code/lib.rs",
        "macro_rules! declare { () => { pub mod from_macro; } }\n#[path = \"moved\"]\npub mod outer { declare!(); }\n",
    );
    refused(
        &f,
        &[
            "code/lib.rs:3: macro_rules! declare declares a file module and is called inside an inline module that #[path] or cfg_attr moves",
        ],
    );
}

/// A call assembled by a macro from tokens its caller hands over (the `!`
/// from `m!(!)`): rustc reads the file (a real build shows it), no reading
/// of the definition sees a call, so the key is refused.
#[test]
fn an_include_call_assembled_from_a_handed_bang_is_refused() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"code/lib.rs\"\n",
    )
    .file(
        "code/lib.rs",
        "macro_rules! m { ($b:tt) => { include_str $b (\"../data/a.txt\") } }\npub const A: &str = m!(!);\n",
    )
    .file("data/a.txt", "a");
    refused(
        &f,
        &[
            "code/lib.rs:1: include_str! names a path chosen where `include_str` is followed by a metavariable in macro_rules! m",
        ],
    );
}

/// A `macro_rules!` that a macro body defines: under a literal name its
/// includes are resolved at its own callers; under a name its caller
/// chooses (`macro_rules! $name`), its callers cannot be found: refused.
#[test]
fn a_macro_rules_defined_by_another_macro_is_followed_or_refused() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"code/lib.rs\"\n",
    )
    .file(
        "code/lib.rs",
        "macro_rules! def { () => { macro_rules! inc { ($p:literal) => { include_str!($p) } } } }\ndef!();\nmod sub;\n",
    )
    .file("code/sub/mod.rs", "pub const B: &str = inc!(\"../../data/b.txt\");\n")
    .file("data/b.txt", "b");
    build_and_verify(&f);
    each_changes_the_key(&f, &["data/b.txt"]);
    f.file(
        "code/lib.rs",
        "macro_rules! def { ($n:ident) => { macro_rules! $n { ($p:literal) => { include_str!($p) } } } }\ndef!(inc);\nmod sub;\n",
    );
    refused(
        &f,
        &[
            "code/lib.rs:1: include_str! names a path read from the callers of a macro_rules! that another macro defines under a name its caller chooses",
        ],
    );
}

/// An `include!` in a `macro_rules!` body reads, from each caller's file, a
/// file rustc parses as code: what that file includes is read too.
#[test]
fn a_file_a_macro_includes_from_its_caller_is_walked() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"code/lib.rs\"\n",
    )
    .file(
        "code/lib.rs",
        "macro_rules! inc { () => { include!(\"gen/part.rs\") } }\nmod sub;\n",
    )
    .file("code/sub/mod.rs", "pub const A: &str = inc!();\n")
    .file("code/sub/gen/part.rs", "include_str!(\"x.txt\")\n")
    .file("code/sub/gen/x.txt", "x");
    build_and_verify(&f);
    each_changes_the_key(&f, &["code/sub/gen/x.txt", "code/sub/gen/part.rs"]);
}

/// docs/key-attacks.md row 11: a build script that declares `data` through
/// `concat!("cargo:rerun-if-", "changed=data")` next to a literal
/// declaration of `build.rs` made the key hash `build.rs` only.
#[test]
fn a_rerun_directive_assembled_from_pieces_watches_the_whole_package() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"code/lib.rs\"\n",
    )
    .file(
        "build.rs",
        r#"fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!(concat!("cargo:rerun-if-", "changed=data"));
    let v = std::fs::read_to_string("data/cfg.txt").unwrap();
    println!("cargo:rustc-env=CFG={}", v.trim());
}
"#,
    )
    .file("code/lib.rs", "pub const CFG: &str = env!(\"CFG\");\n")
    .file("data/cfg.txt", "one\n");
    build_and_verify(&f);
    each_changes_the_key(&f, &["data/cfg.txt"]);
}

/// A wrapper called in the body of a `macro_rules! $name` that another
/// macro defines: rustc resolves the include from wherever the generated
/// macro is called (`gen!()` in `code/sub/mod.rs` reads
/// `code/data/x.txt`), and no call of it can be found by name. Before, the
/// path was read from the defining macro's call (`data/x.txt`, absent) and
/// the key missed the file the build read; now it is refused, with the
/// entry to declare it.
#[test]
fn a_wrapper_called_in_a_generated_macro_is_refused() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"code/lib.rs\"\n",
    )
    .file(
        "code/lib.rs",
        "macro_rules! my_include { ($p:literal) => { include_str!($p) } }\nmacro_rules! make { ($name:ident) => { macro_rules! $name { () => { my_include!(\"../data/x.txt\") } } } }\nmake!(gen);\nmod sub;\npub const X: &str = sub::Y;\n",
    )
    .file("code/sub/mod.rs", "pub const Y: &str = gen!();\n")
    .file("code/data/x.txt", "x");
    refused(
        &f,
        &[
            "code/lib.rs:2: my_include! names a call of my_include!",
            "whose callers ci-key cannot find",
            "site = \"code/lib.rs\"",
        ],
    );
}
