//! The scan's unit tests, on token-level readings of small sources.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::expand::names_a_use_may_rename;
use super::rerun::RERUN_DIRECTIVE;
use super::*;

fn scan(text: &str, file: &str) -> FileScan {
    let file = Path::new(file);
    let module_dir = file.parent().unwrap();
    let ctx = FileContext {
        file,
        module_dir,
        package_dir: Path::new("/ws/pkg"),
        aliases: &HashMap::new(),
        token_output: &[],
        cargo_readme: None,
    };
    scan_file(text, &ctx)
}

fn targets(scan: &FileScan) -> Vec<EmbedTarget> {
    scan.embeds.iter().map(|e| e.target.clone()).collect()
}

#[test]
fn finds_embeds_in_every_position_but_not_in_literals_or_comments() {
    let text = r##"
//! Crate docs.
#![doc = include_str!("../README.md")]
// include_str!("commented.txt")
const A: &str = include_str!("a.txt");
const B: &str = "include_str!(\"in_literal.txt\")";
/* include_bytes!("block_comment.bin") */
static C: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/data/c.bin"));
fn f() { println!("{}", include_str!(r#"nested/d.md"#)); }
include!(concat!(env!("OUT_DIR"), "/gen.rs"));
#[cfg_attr(feature = "docs", doc = include_str!("e.md"))]
struct S;
"##;
    let scan = scan(text, "/ws/pkg/src/lib.rs");
    assert_eq!(
        targets(&scan),
        vec![
            EmbedTarget::File("/ws/pkg/src/../README.md".into()),
            EmbedTarget::File("/ws/pkg/src/a.txt".into()),
            EmbedTarget::File("/ws/pkg/data/c.bin".into()),
            EmbedTarget::File("/ws/pkg/src/nested/d.md".into()),
            EmbedTarget::OutDir,
            EmbedTarget::File("/ws/pkg/src/e.md".into()),
        ]
    );
    assert_eq!(scan.embeds[1].site.line, 5);
    assert!(scan.refused.is_none());
}

#[test]
fn macro_rules_metavariables_become_patterns_and_other_arguments_are_unresolved() {
    let text = r#"
macro_rules! kernel { ($name:literal) => { include_bytes!(concat!("../kernels/", $name, ".ptx")) }; }
const P: &str = include_str!(PATH);
const Q: &str = include_str!(concat!(env!("HOME"), "/x"));
"#;
    let scan = scan(text, "/ws/pkg/src/lib.rs");
    let got = targets(&scan);
    assert_eq!(
        got[0],
        EmbedTarget::Pattern("/ws/pkg/src/../kernels/*.ptx".into())
    );
    assert!(
        matches!(&got[1], EmbedTarget::Unresolved(t) if t.contains("PATH")),
        "{got:?}"
    );
    assert!(
        matches!(&got[2], EmbedTarget::Unresolved(t) if t.contains("HOME")),
        "{got:?}"
    );
    assert_eq!(scan.embeds[1].site.line, 3);
}

#[test]
fn module_declarations_follow_rustc_path_rules() {
    let text = r#"
mod plain;
#[path = "elsewhere/x.rs"] mod moved;
#[cfg(feature = "cuda")] pub mod cuda;
mod inline { mod child; #[path = "p.rs"] mod pathed; }
mod tests { #[test] fn t() {} }
"#;
    let scan = scan(text, "/ws/pkg/src/foo.rs");
    let got: Vec<_> = scan
        .modules
        .iter()
        .map(|m| (m.name.clone(), m.candidates.clone()))
        .collect();
    let p = PathBuf::from;
    // The scope directory of a non-mod-rs file `src/foo.rs` is `src/foo/`;
    // the test passes the file's parent to keep the expectations short.
    assert_eq!(
        got[0].1,
        vec![
            (p("/ws/pkg/src/plain.rs"), p("/ws/pkg/src/plain")),
            (p("/ws/pkg/src/plain/mod.rs"), p("/ws/pkg/src/plain"))
        ]
    );
    assert_eq!(
        got[1].1,
        vec![(p("/ws/pkg/src/elsewhere/x.rs"), p("/ws/pkg/src/elsewhere"))]
    );
    assert_eq!(got[2].0, "cuda");
    assert_eq!(got[3].1[0].0, p("/ws/pkg/src/inline/child.rs"));
    assert_eq!(got[4].1[0].0, p("/ws/pkg/src/inline/p.rs"));
    assert_eq!(got.len(), 5);
}

#[test]
fn syntax_no_parser_knows_is_still_read() {
    // Not valid Rust (a missing comma stands in for syntax newer than
    // any parser), but it tokenises.
    let text = r#"
struct Future { a: u8 b: u8 }
mod kept;
const A: &str = include_str!("still_found.txt");
"#;
    let scan = scan(text, "/ws/pkg/src/lib.rs");
    assert!(scan.refused.is_none());
    assert_eq!(scan.modules.len(), 1);
    assert_eq!(
        targets(&scan),
        vec![EmbedTarget::File("/ws/pkg/src/still_found.txt".into())]
    );
}

#[test]
fn a_rerun_directive_split_across_literals_marks_an_assembled_line() {
    for (text, marked) in [
        (
            "println!(concat!(\"cargo:rerun-if-\", \"changed=data\"));",
            true,
        ),
        ("println!(\"cargo:rerun-if-{}\", \"changed=data\");", true),
        (
            "println!(\"{}{}\", \"cargo:rer\", \"un-if-changed=data\");",
            true,
        ),
        ("println!(\"cargo:rerun-if-env-changed=CUDA_PATH\");", false),
    ] {
        let scan = scan(&format!("fn main() {{ {text} }}\n"), "/ws/pkg/build.rs");
        let got = scan
            .rerun_literals
            .iter()
            .any(|(v, _)| v == RERUN_DIRECTIVE);
        assert_eq!(got, marked, "{text}: {:?}", scan.rerun_literals);
    }
}

#[test]
fn assembler_templates_name_the_files_of_their_directives() {
    let text = r#"core::arch::global_asm!(".INCBIN \"a.bin\"", concat!(".inc", "lude \"b.s\""), include_str!("boot.s"));
fn f() { unsafe { std::arch::asm!("nop // .incbin \"c.bin\"", in(reg) 1, ".incbin \"not-a-template\"") } }
macro_rules! m { ($t:literal) => { core::arch::asm!($t) } }
core::arch::global_asm!(".incbin \"{}\"", const 1);
core::arch::global_asm!(my_template!());
"#;
    let found: Vec<String> = scan(text, "/ws/pkg/src/lib.rs")
        .embeds
        .iter()
        .filter(|e| e.macro_name.contains("asm"))
        .map(|e| format!("{}:{:?}", e.site.line, e.target))
        .collect();
    assert_eq!(found.len(), 6, "{found:#?}");
    for (line, needle) in [
        (1, r#"Assembler { path: "a.bin", source: false }"#),
        (1, r#"Assembler { path: "b.s", source: true }"#),
        (
            1,
            r#"Assembler { path: "/ws/pkg/src/boot.s", source: true }"#,
        ),
        (2, r#"Assembler { path: "c.bin", source: false }"#),
        (4, "an asm! operand chooses"),
        (5, "which another macro makes"),
    ] {
        assert!(
            found
                .iter()
                .any(|f| f.starts_with(&format!("{line}:")) && f.contains(needle)),
            "{line}: {needle}: {found:#?}"
        );
    }
    // In a macro body, a template a caller completes is bounded from the
    // callers (`sources.rs`), not refused where it stands.
    let bounds = scan(text, "/ws/pkg/src/lib.rs").assembler_bounds;
    assert_eq!(bounds.len(), 1, "{bounds:#?}");
    assert_eq!(
        (bounds[0].site.line, bounds[0].macro_rules.as_str()),
        (3, "m")
    );
    assert!(bounds[0].pieces.metavariables);
    assert_eq!(
        asm_directives(
            ".incbin\t\"x\"\n.include \"es\\cape\"\n.includes \"no\"\nfoo.incbin \"no\"\n.incbin x"
        ),
        vec![
            Ok(("x".to_owned(), false)),
            Err("a `.incbin` whose file is not a quoted string".to_owned()),
            Err("a `.include` whose file name holds an escape or no closing quote".to_owned()),
        ]
    );
}

#[test]
fn rerun_literals_are_collected() {
    let text = r#"fn main() {
println!("cargo:rerun-if-changed=kernels");
println!("cargo::rerun-if-changed={}", dir);
}"#;
    let scan = scan(text, "/ws/pkg/build.rs");
    assert_eq!(
        scan.rerun_literals,
        vec![
            ("cargo:rerun-if-changed=kernels".to_owned(), 2),
            ("cargo::rerun-if-changed={}".to_owned(), 3)
        ]
    );
}

fn module_files(scan: &FileScan) -> Vec<PathBuf> {
    scan.modules
        .iter()
        .flat_map(|m| m.candidates.iter().map(|(file, _)| file.clone()))
        .collect()
}

#[test]
fn modules_in_item_macros_and_cfg_attr_paths_are_followed() {
    let text = r#"
cfg_if::cfg_if! {
if #[cfg(unix)] { mod unix_impl; } else { #[path = "other/win.rs"] mod win; }
}
macro_rules! prelude { () => { mod declared_by_the_caller; }; }
#[cfg_attr(target_os = "linux", path = "../gen/linux.rs")]
#[cfg_attr(windows, cfg_attr(all(), path = "windows.rs"))]
mod sys;
"#;
    for parse_fails in [false, true] {
        // Text no parser accepts is read the same way.
        let text = if parse_fails {
            format!(
                "struct Broken {{ a: u8 b: u8 }}
{text}"
            )
        } else {
            text.to_owned()
        };
        let scan = scan(&text, "/ws/pkg/src/lib.rs");
        assert!(scan.refused.is_none());
        let p = PathBuf::from;
        assert_eq!(
            module_files(&scan),
            vec![
                p("/ws/pkg/src/unix_impl.rs"),
                p("/ws/pkg/src/unix_impl/mod.rs"),
                p("/ws/pkg/src/other/win.rs"),
                p("/ws/pkg/src/sys.rs"),
                p("/ws/pkg/src/sys/mod.rs"),
                p("/ws/pkg/src/../gen/linux.rs"),
                p("/ws/pkg/src/windows.rs"),
            ],
            "parse fails: {parse_fails}"
        );
        let sys: Vec<bool> = scan
            .modules
            .iter()
            .filter(|m| m.name == "sys")
            .map(|m| m.has_alternatives)
            .collect();
        assert_eq!(sys, vec![true, true, true]);
    }
}

#[test]
fn path_on_an_inline_module_is_relative_to_the_file_directory() {
    // rustc loads `src/x/child.rs` here (checked with rustc --emit=dep-info):
    // at file level a `#[path]` starts from the file's directory, even in a
    // non-mod-rs file whose own modules live in `src/a/`.
    let text = "#[path = \"x\"] mod inline { mod child; }\nmod plain { mod child2; }\n";
    for text in [
        text.to_owned(),
        format!(
            "struct B {{ a: u8 b: u8 }}
{text}"
        ),
    ] {
        let file = Path::new("/ws/pkg/src/a.rs");
        let ctx = FileContext {
            file,
            module_dir: Path::new("/ws/pkg/src/a"),
            package_dir: Path::new("/ws/pkg"),
            aliases: &HashMap::new(),
            token_output: &[],
            cargo_readme: None,
        };
        let scan = scan_file(&text, &ctx);
        let p = PathBuf::from;
        assert_eq!(
            module_files(&scan),
            vec![
                p("/ws/pkg/src/x/child.rs"),
                p("/ws/pkg/src/x/child/mod.rs"),
                p("/ws/pkg/src/a/plain/child2.rs"),
                p("/ws/pkg/src/a/plain/child2/mod.rs"),
            ]
        );
    }
}

#[test]
fn doc_comments_are_not_rerun_declarations() {
    let text = r#"//! This script prints no cargo:rerun-if-changed=build.rs on purpose.
/// Mentions cargo:rerun-if-changed=build.rs too.
fn main() {
#[doc = "cargo:rerun-if-changed=build.rs"]
struct S;
let _ = "cargo:rerun-if-changed=real.txt";
}
"#;
    for text in [
        text.to_owned(),
        format!(
            "{text}
struct B {{ a: u8 b: u8 }}
"
        ),
    ] {
        let scan = scan(&text, "/ws/pkg/build.rs");
        assert_eq!(
            scan.rerun_literals,
            vec![("cargo:rerun-if-changed=real.txt".to_owned(), 6)],
            "{:?}",
            scan.refused
        );
    }
}

#[test]
fn a_path_wholly_chosen_by_the_macro_caller_is_resolved_at_its_callers() {
    let text = "macro_rules! m { ($p:literal) => { include_str!($p) }; }\n";
    let found = scan(text, "/ws/pkg/src/lib.rs");
    assert_eq!(targets(&found), vec![EmbedTarget::FromCallers]);
    assert_eq!(
        found.embeds[0]
            .caller_relative
            .as_ref()
            .unwrap()
            .macro_rules,
        "m"
    );
    // A path that only starts with one may climb anywhere: no glob can
    // bound it, so each call's expansion gives it.
    let text = "macro_rules! m { ($d:literal) => { include_str!(concat!($d, \"/x\")) }; }\n";
    let got = targets(&scan(text, "/ws/pkg/src/lib.rs"));
    assert!(
        matches!(&got[..], [EmbedTarget::AtCalls(t)] if t.contains("metavariable")),
        "{got:?}"
    );
    // Outside a macro body there is no call to expand: refused.
    let text = "const X: &str = include_str!(concat!(env!(\"X\"), \"/x\"));\n";
    let got = targets(&scan(text, "/ws/pkg/src/lib.rs"));
    assert!(matches!(&got[..], [EmbedTarget::Unresolved(_)]), "{got:?}");
}

#[test]
fn call_sites_give_literals_definers_and_hand_overs() {
    let names = std::collections::HashSet::from(["m".to_owned(), "k".to_owned()]);
    let text = r#"use crate::m as k;
const A: &str = m!("a.txt");
macro_rules! outer { ($p:literal) => { k!($p) } }
const B: &str = m /* c */ ! (concat!("b", ".txt"));
const C: () = call!(m, "c.txt");
"#;
    let sites = call_sites(text, &names).unwrap();
    let got: Vec<_> = sites
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.line,
                s.definer.as_deref(),
                s.literals.clone(),
                s.has_macro_call,
                s.handed_over,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("m", 2, None, vec!["a.txt".to_owned()], false, false),
            ("k", 3, Some("outer"), vec![], false, false),
            (
                "m",
                4,
                None,
                vec!["b".to_owned(), ".txt".to_owned()],
                true,
                false
            ),
            ("m", 5, None, vec![], false, true),
        ]
    );
    assert_eq!(use_renames(text), vec![("m".to_owned(), "k".to_owned())]);
}

/// Whether the walk finds anything that loads a file, or refuses. (Its
/// `rerun-if-changed` literals count only in build scripts, which are
/// always read: `sources::scan_read`.)
fn walk_finds_something(text: &str) -> bool {
    let scan = scan(text, "/ws/pkg/src/lib.rs");
    !scan.modules.is_empty()
        || !scan.embeds.is_empty()
        || !scan.macro_modules.is_empty()
        || !scan.metavariable_callers.is_empty()
        || !scan.bare_bang_to.is_empty()
        || !scan.passed_include.is_empty()
        || !scan.macro_rules_defined.is_empty()
        || !scan.macro_items.is_empty()
        // Renames of aliases are found by the alias fixpoint in `sources`.
        || scan
            .use_renames
            .iter()
            .any(|(from, _)| INCLUDE_MACROS.contains(&from.as_str()))
        || scan.refused.is_some()
}

#[test]
fn prefilter_never_skips_a_file_the_walk_finds_something_in() {
    // rustc's Pattern_White_Space.
    let spaces = [
        "\t", "\n", "\u{b}", "\u{c}", "\r", " ", "\u{85}", "\u{200e}", "\u{200f}", "\u{2028}",
        "\u{2029}",
    ];
    let mut cases = 0;
    for ws in spaces {
        for form in [
            "mod{ws}x;",
            "pub(crate){ws}mod{ws}x{ws};",
            "mod{ws}r#match{ws};",
            "mod{ws}café;",
            "#[path{ws}={ws}\"p.rs\"]{ws}mod{ws}m;",
            "mod/**/x;",
            "macro_rules!{ws}m{ws}{{(){ws}=>{ws}{{mod{ws}$x;}}}}",
            "#![debugger_visualizer(natvis_file{ws}={ws}\"a.natvis\")]",
            "const{ws}A:&str=include_str!(\"a\");",
            "const{ws}A:&str=core::include_str{ws}!{ws}(\"a\");",
            "#[folder{ws}={ws}\"public/\"]{ws}struct{ws}S;",
            "fn{ws}m(){ws}{{{ws}sqlx::migrate!{ws}();{ws}}}",
            "macro_rules!{ws}c{ws}{{($m:ident)=>{{$m{ws}!(\"x\")}}}}",
            "macro_rules!{ws}c{ws}{{($($m:ident)*)=>{{$($m)*{ws}!(\"x\")}}}}",
            "macro_rules!{ws}c{ws}{{($($m:ident),+)=>{{$($m),+{ws}!(\"x\")}}}}",
            "macro_rules!{ws}c{ws}{{($($m:ident)*)=>{{$($m)*/*{ws}*/!(\"x\")}}}}",
            "const{ws}A:&str=m!(x,{ws}!{ws});",
        ] {
            let text = format!("fn model() {{}}\n{}\n", form.replace("{ws}", ws));
            assert!(walk_finds_something(&text), "{text:?}");
            assert!(
                may_reference_files(text.as_bytes()),
                "prefilter skips {text:?}"
            );
            cases += 1;
        }
    }
    assert_eq!(cases, 187);
}

/// Run by hand on real material:
/// `CI_KEY_CORPUS=~/.cargo/registry/src cargo test -p ci-trust --lib prefilter_agrees -- --ignored`.
#[test]
#[ignore = "reads the directory CI_KEY_CORPUS names"]
fn prefilter_agrees_with_the_walk_on_a_corpus() {
    let dir = std::env::var("CI_KEY_CORPUS").expect("set CI_KEY_CORPUS");
    let (mut files, mut skipped) = (0, 0);
    for entry in walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
    {
        if entry.path().extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        files += 1;
        if let Some((line, why)) = scan(&text, "/ws/pkg/src/lib.rs").refused {
            eprintln!("refused: {}:{line}: {why}", entry.path().display());
        }
        if !may_reference_files(text.as_bytes()) {
            skipped += 1;
            assert!(
                !walk_finds_something(&text),
                "{}: {:?}",
                entry.path().display(),
                scan(&text, "/ws/pkg/src/lib.rs")
            );
        } else {
            // Skipping the groups the prefilter finds nothing in reads
            // exactly what reading every group does.
            let file = Path::new("/ws/pkg/src/lib.rs");
            let ctx = FileContext {
                file,
                module_dir: file.parent().unwrap(),
                package_dir: Path::new("/ws/pkg"),
                aliases: &HashMap::new(),
                token_output: &["quote", "quote_spanned"],
                cargo_readme: None,
            };
            // (But the `use … as` renames in skipped groups, which matter
            // only for macros the prefilter knows, or are read again from
            // the text when a hand-over needs them: `Walk::learn_renames_of`.)
            let known = |scan: &mut FileScan| {
                scan.use_renames.retain(|(from, to)| {
                    may_reference_files(from.as_bytes()) || may_reference_files(to.as_bytes())
                });
                format!("{scan:?}")
            };
            let fast = known(&mut scan_file_with(&text, &ctx, true));
            let full = known(&mut scan_file_with(&text, &ctx, false));
            assert_eq!(fast, full, "{}", entry.path().display());
        }
    }
    eprintln!("{files} files, {skipped} skipped by the prefilter, none wrongly");
    assert!(files > 0, "no .rs file in the corpus");
}

#[test]
fn path_macros_resolve_their_directories_or_are_unresolved() {
    let text = r#"
static A: Dir = include_dir::include_dir!("$CARGO_MANIFEST_DIR/assets");
#[folder = "/ws/pkg/abs"] struct E;
#[folder = "$OTHER/x"] struct F;
fn m() { sqlx::migrate!(); wgpu::include_wgsl!("k.wgsl"); }
diesel_migrations::embed_migrations!("db/migrations");
#[template(path = "t.html")] struct T;
#[template(source = "inline", ext = "txt")] struct I;
"#;
    let scan = scan(text, "/ws/pkg/src/lib.rs");
    let got = targets(&scan);
    assert_eq!(got[0], EmbedTarget::Tree("/ws/pkg/assets".into()));
    // An absolute path is read where it points, not below the package.
    assert_eq!(got[1], EmbedTarget::Tree("/ws/pkg/abs".into()));
    assert!(
        matches!(&got[2], EmbedTarget::Unresolved(t) if t.contains("$OTHER")),
        "{got:?}"
    );
    assert_eq!(got[3], EmbedTarget::Tree("/ws/pkg/migrations".into()));
    assert_eq!(got[4], EmbedTarget::File("/ws/pkg/src/k.wgsl".into()));
    assert_eq!(got[5], EmbedTarget::Tree("/ws/pkg/db/migrations".into()));
    assert!(
        matches!(&got[6], EmbedTarget::Unresolved(t) if t.contains("askama")),
        "{got:?}"
    );
    // An inline template reads no file.
    assert_eq!(got.len(), 7, "{got:?}");
}

#[test]
fn a_call_assembled_from_handed_tokens_is_unresolved() {
    // `!` handed over on its own lets a macro assemble a call.
    let found = scan("const A: &str = m!(include, !);\n", "/ws/pkg/src/lib.rs");
    assert_eq!(found.bare_bang_to, ["m"]);
    assert_eq!(found.passed_include.len(), 1);
    assert_eq!(found.passed_include[0].handed_to, "m");
    // `include_str !` with nothing after it is no call but a hand-over.
    let found = scan("const A: &str = m!(include_str !);\n", "/ws/pkg/src/lib.rs");
    assert!(found.embeds.is_empty());
    assert!(
        matches!(&found.passed_include[..], [p] if p.include == "include_str" && p.handed_to == "m"),
        "{:?}",
        found.passed_include
    );
    // Unary not is no bare `!`.
    let found = scan("fn f() { assert!(!x, \"y\"); }\n", "/ws/pkg/src/lib.rs");
    assert!(found.bare_bang_to.is_empty());
}

#[test]
fn an_include_name_followed_by_a_metavariable_in_a_macro_body_is_unresolved() {
    let text = "macro_rules! m { ($b:tt) => { include_str $b (\"../data/a.txt\") } }\n";
    let got = targets(&scan(text, "/ws/pkg/src/lib.rs"));
    assert!(
        matches!(&got[..], [EmbedTarget::Unresolved(t)] if t.contains("may pass the `!`")),
        "{got:?}"
    );
}

#[test]
fn an_include_macro_handed_over_in_any_position_is_unresolved() {
    for args in [
        "include_str, \"x\"",
        "include_str: \"x\"",
        "x . include_bytes",
        "include_str(\"x\")",
    ] {
        let text = format!("const A: &str = call!({args});\n");
        let found = scan(&text, "/ws/pkg/src/lib.rs");
        assert!(
            matches!(&found.passed_include[..], [p] if p.handed_to == "call"),
            "{args}: {:?}",
            found.passed_include
        );
    }
    // Outside macro arguments it is no hand-over; a direct call is an embed.
    let got = targets(&scan(
        "use std::include_str;\nconst A: &str = include_str!(\"a\");\n",
        "/ws/pkg/src/lib.rs",
    ));
    assert_eq!(got, vec![EmbedTarget::File("/ws/pkg/src/a".into())]);
    // Whether the macro may invoke it is decided across the workspace, in
    // `sources`: here it is only recorded, with the macro it is handed to.
    let scan = scan(
        "fn f(include: &str) { println!(\"{}\", include); }\n",
        "/ws/pkg/src/lib.rs",
    );
    assert!(scan.embeds.is_empty());
    assert_eq!(scan.passed_include.len(), 1);
    assert_eq!(scan.passed_include[0].handed_to, "println");
    assert!(scan.metavariable_callers.is_empty());
}

#[test]
fn a_shebang_line_is_skipped_as_rustc_skips_it() {
    // The shebang's unterminated quote would swallow the file.
    let found = scan("#!/bin/sh -c \"x\nmod a;\n", "/ws/pkg/src/main.rs");
    assert!(found.refused.is_none(), "{:?}", found.refused);
    assert_eq!(module_files(&found)[0], PathBuf::from("/ws/pkg/src/a.rs"));
    assert_eq!(found.modules[0].site.line, 2);
    // `#![…]` is an inner attribute, not a shebang.
    let found = scan(
        "#![doc = include_str!(\"r.md\")]\nmod b;\n",
        "/ws/pkg/src/lib.rs",
    );
    assert_eq!(
        targets(&found),
        vec![EmbedTarget::File("/ws/pkg/src/r.md".into())]
    );
    assert_eq!(found.modules.len(), 1);
}

#[test]
fn macro_calls_are_whole_identifiers_followed_by_a_bang() {
    let names = std::collections::HashSet::from(["ptx".to_owned()]);
    let calls = |text: &str| {
        call_sites(text, &names)
            .unwrap()
            .iter()
            .any(|s| !s.handed_over)
    };
    assert!(calls("static K: &[u8] = ptx!(\"k\");"));
    assert!(calls("const K: u8 = ptx ! (\"k\");"));
    assert!(calls("const K: u8 = ptx /* c */ !(\"k\");"));
    assert!(calls("const K: u8 = r#ptx!(\"k\");"));
    assert!(!calls("const K: u8 = my_ptx!(\"k\");"));
    assert!(!calls("const K: u8 = ptx_two!(\"k\");"));
    assert!(!calls("fn ptx() {}"));
    assert!(!calls("// ptx!(\"k\")\nconst S: &str = \"ptx!()\";"));
}

#[test]
fn raw_module_names_load_the_plain_file_name() {
    let scan = scan("mod r#match;\n", "/ws/pkg/src/lib.rs");
    assert_eq!(
        module_files(&scan)[0],
        PathBuf::from("/ws/pkg/src/match.rs")
    );
}

#[test]
fn include_macros_by_path_and_by_alias() {
    let text = r#"
use std::include_str as embed;
pub use core::{include_bytes as ib, include_str};
extern "C" { #[doc = include_str!("ext.md")] fn f(); }
impl S { const A: &str = ::std::include_str!("a.txt"); }
fn g() { let _ = [core::include_bytes!("b.bin")]; embed!("c.txt"); }
#[my_attribute(include_str!("attr.txt"))]
fn h() {}
"#;
    let scan = scan(text, "/ws/pkg/src/lib.rs");
    assert_eq!(
        scan.use_renames,
        vec![
            ("include_str".to_owned(), "embed".to_owned()),
            ("include_bytes".to_owned(), "ib".to_owned())
        ]
    );
    let p = |f: &str| EmbedTarget::File(PathBuf::from("/ws/pkg/src").join(f));
    // Without knowing the alias, `embed!` is not an include ...
    assert_eq!(
        targets(&scan),
        vec![p("ext.md"), p("a.txt"), p("b.bin"), p("attr.txt")]
    );
    // ... and with it, it is (sources gathers aliases crate-wide).
    let aliases = HashMap::from([("embed".to_owned(), "include_str".to_owned())]);
    let ctx = FileContext {
        file: Path::new("/ws/pkg/src/lib.rs"),
        module_dir: Path::new("/ws/pkg/src"),
        package_dir: Path::new("/ws/pkg"),
        aliases: &aliases,
        token_output: &[],
        cargo_readme: None,
    };
    let scan = scan_file(text, &ctx);
    assert!(targets(&scan).contains(&p("c.txt")), "{:?}", targets(&scan));
}

#[test]
fn nesting_is_limited_without_recursion() {
    let deep = |n: usize| format!("{}{}", "mod a { ".repeat(n), "}".repeat(n));
    assert!(
        scan(&deep(MAX_NESTING), "/ws/pkg/src/lib.rs")
            .refused
            .is_none()
    );
    let scan = scan(&deep(100_000), "/ws/pkg/src/lib.rs");
    assert!(scan.refused.unwrap().1.contains("nest more than"));
}

#[test]
fn a_hostile_run_of_mod_keywords_stays_linear() {
    // Quadratic, this takes minutes; linear, milliseconds.
    let text = "mod ".repeat(2_000_000);
    assert!(!may_reference_files(text.as_bytes()));
}

#[test]
fn prefilter_sees_file_modules_and_includes_only() {
    assert!(may_reference_files(b"mod x /* moved */;"));
    assert!(may_reference_files(b"mod /* moved */ x;"));
    assert!(may_reference_files(b"mod x // moved\n;"));
    assert!(may_reference_files(b"mod x;"));
    assert!(may_reference_files(b"pub(crate) mod\n  x\n ;"));
    assert!(may_reference_files(b"let s = include_str!(\"a\");"));
    assert!(!may_reference_files(
        b"mod tests { fn t() {} }\nfn model() {}"
    ));
    assert!(!may_reference_files(b"fn main() {}"));
    // A `?` before a comparison is no repetition called as a macro.
    assert!(!may_reference_files(
        b"fn f() -> Option<()> { if g()? != 1 {} None }"
    ));
    assert!(may_reference_files(b"($($m)* // c\n !(1))"));
}

#[test]
fn a_use_with_a_metavariable_names_what_it_may_rename() {
    let cases: [(&str, Option<&[&str]>); 8] = [
        ("use $crate::x::T; use std::fmt;", Some(&[])),
        ("pub(self) use $id as Group;", Some(&["Group"])),
        ("use $krate::T;", Some(&["T"])),
        ("use $a as $b;", None),
        ("use $crate::$name;", None),
        ("use $m::{A, B};", None),
        ("// use $a as $b;\n\"use $a as $b;\"", Some(&[])),
        ("because $x is used; use", Some(&[])),
    ];
    for (body, want) in cases {
        let got = names_a_use_may_rename(body);
        let want = want.map(|names| names.iter().map(|n| n.to_string()).collect::<Vec<_>>());
        assert_eq!(got, want, "{body}");
    }
}

#[test]
fn fn_name_is_found_as_tokens_loosely() {
    assert!(defines_fn(
        "#[proc_macro]\npub fn T(input: TokenStream)",
        "T"
    ));
    assert!(defines_fn("fn   r#T()", "T"));
    assert!(!defines_fn("fn Tee() {} fn xT() {}", "T"));
    assert!(!defines_fn("let T = 1; unfn T", "T"));
}

#[test]
fn macro_items_are_read_as_tokens() {
    let text = "// a macro T in prose\nconst S: &str = \"macro U {}\";\nmod m { pub macro V($x:tt) { $x } }\nfn r#macro() {}\nmacro_rules! W { () => {} }\n";
    assert_eq!(macro_item_names(text), ["V"]);
}

#[test]
fn a_rename_to_a_name_is_seen_before_lexing() {
    let names = ["T", "quote"];
    assert!(may_rename_to("use a::b as T;", &names));
    assert!(may_rename_to("use a::{b as r#T, c};", &names));
    assert!(may_rename_to("use quote_ as\n  quote;", &names));
    assert!(may_rename_to("use a::b as /* x */ T;", &names));
    assert!(!may_rename_to(
        "use a::b as Tee; let has T = 1; alias T",
        &names
    ));
    assert!(!may_rename_to("x as u8; T::new()", &names));
}
