//! Forms that `ci-key` refused on real workspaces although they include
//! nothing it cannot read (the corpus of `xtask/tests/fixtures/key-corpus/`):
//! each fixture is modelled on the real code named in its comment, is
//! keyed, is built with the real cargo where the offline registry allows
//! (so `verify-key` proves nothing the build read is missing), and the
//! files it does include change the key.

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

/// `ci-key` refuses, and says each of `needles`.
fn refused(f: &Fixture, needles: &[&str]) -> String {
    let output = f.xtask(&["ci-key"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    for needle in needles {
        assert!(err.contains(needle), "lacks {needle:?}:\n{err}");
    }
    err
}

/// Builds the workspace at `root` with the real cargo and runs
/// `verify-key` on the build: every file the compiler read is an input.
fn build_and_verify(root: &std::path::Path) {
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
        .current_dir(root)
        .output()
        .unwrap();
    assert!(build.status.success(), "{}", stderr(&build));
    let verify = xtask_cmd(&["verify-key", "--target-dir"])
        .arg(target.path())
        .arg("--root")
        .arg(root)
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "every file the build read must be a key input:\n{}",
        stderr(&verify)
    );
}

/// Changing each of `files` (relative to `f`) changes the key of `f`.
fn each_changes_the_key(f: &Fixture, files: &[&str]) {
    let mut key = ci_key(f);
    for file in files {
        let before = std::fs::read_to_string(f.join(file)).unwrap_or_default();
        f.file(file, &format!("{before}// changed\n"));
        let changed = ci_key(f);
        assert_ne!(changed, key, "changing {file} must change the key");
        key = changed;
    }
}

const LIB: &str = "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n";

/// A `macro_rules!` whose body calls a metavariable (`$m!(…)`), as most
/// large workspaces have one: before, its mere presence made every
/// `include` token handed to any macro a refusal.
const CALLS_A_METAVARIABLE: &str = "macro_rules! id { ($x:expr) => { $x * 2 } }\nmacro_rules! apply { ($m:ident, $x:expr) => { $m!($x) } }\npub fn twice() -> u32 { apply!(id, 2) }\n";

/// rust-analyzer's `hir-expand/src/builtin/fn_macro.rs` registers the
/// builtin macros in a table (`(include, Include) => include_expand`), and
/// wasmtime's `Filter` formats `include = include`: `include` and
/// `include_str` are handed to macros that never invoke them. Only a macro
/// that calls a metavariable may.
#[test]
fn include_as_a_name_in_a_macro_table_is_no_include() {
    let f = Fixture::new();
    f.file("Cargo.toml", LIB).file(
        "src/lib.rs",
        &format!(
            r#"{CALLS_A_METAVARIABLE}
macro_rules! register_builtin {{
    ( $EXPANDER:ident: $(($name:ident, $kind:ident) => $expand:ident),* $(,)? ) => {{
        #[derive(Debug, Clone, Copy)]
        pub enum $EXPANDER {{ $($kind),* }}
        impl $EXPANDER {{
            pub fn find_by_name(ident: &str) -> Option<Self> {{
                match ident {{
                    $( id if id == stringify!($name) => Some(Self::$kind), )*
                    _ => None,
                }}
            }}
            pub fn expander(&self) -> fn() -> u8 {{ match *self {{ $( Self::$kind => $expand, )* }} }}
        }}
    }}
}}
fn include_expand() -> u8 {{ 1 }}
fn include_str_expand() -> u8 {{ 2 }}
fn include_bytes_expand() -> u8 {{ 3 }}
register_builtin! {{
    EagerExpander:
    (include, Include) => include_expand,
    (include_bytes, IncludeBytes) => include_bytes_expand,
    (include_str, IncludeStr) => include_str_expand,
}}
pub struct Filter {{ pub include: bool }}
impl std::fmt::Display for Filter {{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {{
        let include = if self.include {{ "include" }} else {{ "exclude" }};
        write!(f, "{{include}}:", include = include)
    }}
}}
"#
        ),
    );
    ci_key(&f);
    build_and_verify(f.path());
    // Handed to the macro that calls `$m!`, it is one: refused, naming the call.
    f.file(
        "src/user.rs",
        "pub const A: &str = apply!(include_str, \"../data/a.txt\");\n",
    )
    .file("data/a.txt", "a");
    let lib = std::fs::read_to_string(f.join("src/lib.rs")).unwrap();
    f.file("src/lib.rs", &format!("mod user;\n{lib}"));
    refused(
        &f,
        &[
            "src/user.rs:1: include_str! names a path chosen where `include_str` is handed to apply!",
            "site = \"src/user.rs\"",
        ],
    );
}

/// rust-analyzer's `parser/src/lib.rs` (`pub use T_ as T;`, the generated
/// `macro_rules! T_ { [include_bytes] => … }`) and `syntax`'s
/// `T![include_bytes]`: handed to an alias of a workspace macro that calls
/// no metavariable, an include name is no include. (Found on the corpus's
/// test half, after its one reported run.)
#[test]
fn an_include_name_handed_to_an_alias_of_a_workspace_macro_is_no_include() {
    let f = Fixture::new();
    f.file("Cargo.toml", LIB)
        .file(
            "src/lib.rs",
            &format!(
                "{CALLS_A_METAVARIABLE}mod kinds;\npub use kinds::T_ as T;\npub const K: u8 = T![include_bytes] + T![include_str];\n"
            ),
        )
        .file(
            "src/kinds.rs",
            "#[macro_export]\nmacro_rules! T_ {\n    [include_bytes] => { 1 };\n    [include_str] => { 2 };\n}\npub use T_;\n",
        );
    build_and_verify(f.path());
    ci_key(&f);
}

/// biome's generated `crates/biome_css_syntax/src/generated/kind.rs`
/// (`#[macro_export] macro_rules ! T { [!] => { $ crate :: … :: BANG } ;
/// [include] => { $ crate :: … :: INCLUDE_KW } ; … }`, spaced as `quote!`
/// prints it) and the parser's `T![include]` beside `T![!]`: a macro whose
/// transcribers hold no metavariable emits only its own tokens, so neither
/// the include name nor the `!` it is handed can become a call. (holdout4,
/// found after its one run.) A rule that transcribes what it is handed
/// makes the same calls refused.
#[test]
fn an_include_name_and_a_bang_handed_to_a_macro_emitting_only_its_own_tokens_are_no_call() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"syntax\", \"parser\"]\nresolver = \"2\"\n",
    )
    .file(
        "syntax/Cargo.toml",
        "[package]\nname = \"syntax\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file(
        "syntax/src/lib.rs",
        &format!("{CALLS_A_METAVARIABLE}pub mod generated;\n"),
    )
    .file(
        "syntax/src/generated.rs",
        "pub struct Kind(pub u8);\nimpl Kind { pub const BANG: u8 = 1; pub const INCLUDE_KW: u8 = 2; pub const SEMI: u8 = 3; }\n#[macro_export]\nmacro_rules ! T { [;] => { $ crate :: generated :: Kind :: SEMI } ; [!] => { $ crate :: generated :: Kind :: BANG } ; [include] => { $ crate :: generated :: Kind :: INCLUDE_KW } ; }\n",
    )
    .file(
        "parser/Cargo.toml",
        "[package]\nname = \"parser\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nsyntax = { path = \"../syntax\" }\n",
    )
    .file(
        "parser/src/lib.rs",
        "use syntax::T;\npub fn at_rule(kind: u8) -> u8 {\n    match kind {\n        T![include] => 10,\n        T![!] => 20,\n        T![;] => 30,\n        _ => 0,\n    }\n}\n",
    );
    ci_key(&f);
    build_and_verify(f.path());
    // A rule that hands back what it is given may assemble `include ! (…)`.
    let generated = std::fs::read_to_string(f.join("syntax/src/generated.rs")).unwrap();
    f.file(
        "syntax/src/generated.rs",
        &generated.replace(
            "[;] =>",
            "[$m:ident $b:tt] => { $m $b (\"../data/a.txt\") } ; [;] =>",
        ),
    );
    refused(
        &f,
        &[
            "parser/src/lib.rs:4: include! names a path chosen where `include` is handed to T! as a token",
        ],
    );
    // A mention of `decl_macro` is no definition (rust-analyzer's hir
    // names it, in code and in test fixtures, and its re-run refused
    // rust-analyzer with the first reading of this rule), nor is `macro T`
    // in a string or a comment.
    f.file("syntax/src/generated.rs", &generated);
    f.file(
        "syntax/src/lib.rs",
        &format!(
            "#![cfg_attr(nightly, feature(decl_macro))]\n{CALLS_A_METAVARIABLE}pub mod generated;\n// a macro T {{}} in prose\npub const FIXTURE: &str = \"pub macro T($x:tt) {{ $x!() }}\";\npub fn is_decl_macro() -> bool {{ true }}\n"
        ),
    );
    ci_key(&f);
    // A `macro T` item (macros 2.0, whose rules ci-key does not read) may
    // define the name too, in a group no include word marks, with or
    // without a file naming the feature (`-Zcrate-attr` enables it).
    f.file(
        "syntax/src/lib.rs",
        &format!(
            "{CALLS_A_METAVARIABLE}pub mod generated;\nmod two {{\n    pub macro T($m:ident $b:tt) {{ $m $b (\"../data/a.txt\") }}\n}}\n"
        ),
    );
    refused(
        &f,
        &[
            "parser/src/lib.rs:4: include! names a path chosen where `include` is handed to T! as a token",
        ],
    );
    // So may a `macro_rules! $name` a macro's body generates.
    f.file(
        "syntax/src/lib.rs",
        &format!(
            "{CALLS_A_METAVARIABLE}pub mod generated;\nmacro_rules! make {{ ($name:ident) => {{ macro_rules! $name {{ () => {{ 1 }} }} }} }}\nmake!(unused);\n"
        ),
    );
    refused(
        &f,
        &[
            "parser/src/lib.rs:4: include! names a path chosen where `include` is handed to T! as a token",
        ],
    );
}

/// An alias of a workspace macro handed a `!` on its own may assemble a
/// call from it: `pub use T_ as T;` with `T_` transcribing `$m $b ($p)`,
/// called `T!(include_str, !, "../data/data.txt")`. The binary before
/// `5b4d89c` took only the workspace's own names for the macros a `!` is
/// handed to, so this keyed without `data/data.txt`, which the build reads
/// (found while checking rust-analyzer's re-run).
#[test]
fn a_bang_handed_to_an_alias_of_a_workspace_macro_may_assemble_a_call() {
    let f = Fixture::new();
    f.file("Cargo.toml", LIB)
        .file(
            "src/lib.rs",
            "mod kinds {\n    #[macro_export]\n    macro_rules! T_ { ($m:ident, $b:tt, $p:literal) => { $m $b ($p) }; }\n}\npub use T_ as T;\npub fn data() -> &'static str { T!(include_str, !, \"../data/data.txt\") }\n",
        )
        .file("data/data.txt", "hello\n");
    refused(
        &f,
        &[
            "src/lib.rs:6: include_str! names a path chosen where `include_str` is handed to T! as a token",
        ],
    );
}

/// tikv's `[patch.crates-io] tempdir = { path = "patches/tempdir" }`: a
/// package inside the workspace's directory that `members` neither lists
/// nor `exclude` keeps out. `cargo metadata` on its manifest fails ("believes
/// it's in a workspace when it's not") while cargo reads it fine as a
/// dependency, so it is read the way cargo reads a dependency, with its own
/// relative path dependency; its files are inputs, and nothing is written
/// in the checkout. (holdout4, found after its one run.) A package that
/// inherits `workspace = true` fields there is refused with cargo's words.
#[test]
fn a_patch_inside_the_workspace_directory_that_is_no_member_is_keyed() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n[workspace.package]\nversion = \"0.3.7\"\n[patch.crates-io]\ntempdir = { path = \"patches/tempdir\" }\n",
    )
    .file(
        "app/Cargo.toml",
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("app/src/lib.rs", "pub fn app() {}\n")
    .file(
        "patches/tempdir/Cargo.toml",
        "[package]\nname = \"tempdir\"\nversion = \"0.3.7\"\nedition = \"2021\"\n[dependencies]\nhelper = { path = \"../helper\" }\n",
    )
    .file("patches/tempdir/src/lib.rs", "pub use helper::dir;\n")
    .file(
        "patches/helper/Cargo.toml",
        "[package]\nname = \"helper\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("patches/helper/src/lib.rs", "pub fn dir() {}\n");
    let listing = |root: &std::path::Path| {
        let mut all: Vec<_> = walkdir::WalkDir::new(root)
            .into_iter()
            .map(|e| e.unwrap().path().to_path_buf())
            .collect();
        all.sort();
        all
    };
    let before = listing(f.path());
    let explain = f.xtask(&["ci-key", "--explain"]);
    let text = stderr(&explain);
    assert!(explain.status.success(), "{}", stderr(&explain));
    for needle in [
        "manifest of tempdir ([patch.crates-io] `tempdir` in Cargo.toml)",
        "patches/tempdir/src/lib.rs",
        "manifest of helper (path dependency `helper` of tempdir)",
        "patches/helper/src/lib.rs",
    ] {
        assert!(text.contains(needle), "--explain lacks {needle:?}:\n{text}");
    }
    assert_eq!(listing(f.path()), before, "ci-key wrote in the checkout");
    each_changes_the_key(
        &f,
        &["patches/tempdir/src/lib.rs", "patches/helper/src/lib.rs"],
    );
    let key = ci_key(&f);
    f.file(
        "patches/helper/Cargo.toml",
        "[package]\nname = \"helper\"\nversion = \"0.1.0\"\nedition = \"2021\"\n# changed\n",
    );
    assert_ne!(
        ci_key(&f),
        key,
        "changing patches/helper/Cargo.toml must change the key"
    );
    // Inheriting from the workspace it is no member of: cargo's own error.
    f.file(
        "patches/tempdir/Cargo.toml",
        "[package]\nname = \"tempdir\"\nversion.workspace = true\nedition = \"2021\"\n",
    );
    let output = f.xtask(&["ci-key"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    for needle in [
        "[patch.crates-io] `tempdir` in Cargo.toml",
        "lies inside the workspace's directory but is no member",
        "believes it's in a workspace when it's not",
    ] {
        assert!(err.contains(needle), "lacks {needle:?}:\n{err}");
    }
}

/// burn's `burn-cubecl/src/template/base.rs`: `struct SourceKernel<K> {
/// kernel_source: K }` and `self.kernel_source.id()` beside the
/// `#[macro_export] macro_rules! kernel_source` that includes its `$file`,
/// re-exported by `burn-wgpu` (`pub use burn_cubecl::{…, kernel_source, …}`)
/// and called from an example. A field, a path and a `use` are no calls.
#[test]
fn a_field_named_like_an_include_macro_is_no_call() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"cubecl\", \"wgpu\", \"example\"]\nresolver = \"2\"\n",
    )
    .file(
        "cubecl/Cargo.toml",
        "[package]\nname = \"cubecl\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file(
        "cubecl/src/lib.rs",
        &format!(
            r#"pub mod template;
{CALLS_A_METAVARIABLE}"#
        ),
    )
    .file(
        "cubecl/src/template.rs",
        r#"pub trait KernelSource { fn source(&self) -> &'static str; }
pub struct SourceKernel<K> {
    kernel_source: K,
    pub cube_dim: u32,
}
impl<K: KernelSource> SourceKernel<K> {
    pub fn new(kernel_source: K) -> Self { SourceKernel { kernel_source, cube_dim: 1 } }
    pub fn compile(&self) -> &'static str { self.kernel_source.source() }
}
/// Generates kernel source code from a file.
#[macro_export]
macro_rules! kernel_source {
    ($struct:ident, $file:expr) => {
        pub struct $struct;
        impl $crate::template::KernelSource for $struct {
            fn source(&self) -> &'static str { include_str!($file) }
        }
    };
}
"#,
    )
    .file(
        "wgpu/Cargo.toml",
        "[package]\nname = \"wgpu\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\ncubecl = { path = \"../cubecl\" }\n",
    )
    .file(
        "wgpu/src/lib.rs",
        "pub use cubecl::{kernel_source, template::{KernelSource, SourceKernel}};\n",
    )
    .file(
        "example/Cargo.toml",
        "[package]\nname = \"example\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nwgpu = { path = \"../wgpu\" }\n",
    )
    .file(
        "example/src/lib.rs",
        "mod forward;\npub fn run() -> &'static str { wgpu::SourceKernel::new(forward::FusedMatmulAddRelu).compile() }\n",
    )
    .file(
        "example/src/forward.rs",
        "use wgpu::kernel_source;\nkernel_source!(FusedMatmulAddRelu, \"./kernel.wgsl\");\n",
    )
    .file("example/src/kernel.wgsl", "@compute fn main() {}\n");
    build_and_verify(f.path());
    each_changes_the_key(&f, &["example/src/kernel.wgsl"]);
}

/// wgpu's `wgpu/src/macros.rs`: `include_wgsl!` and `include_spirv!` pass
/// all their tokens on (`include_str!($($token)*)`); every call passes a
/// literal, read from the calling file. A call whose tokens are not
/// literals is refused at that call, with the entry to declare it.
#[test]
fn an_include_wrapper_taking_all_its_tokens_is_resolved_at_each_call() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"wgpu\", \"examples\"]\nresolver = \"2\"\n",
    )
    .file(
        "wgpu/Cargo.toml",
        "[package]\nname = \"wgpu\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file(
        "wgpu/src/lib.rs",
        r#"pub struct ShaderModuleDescriptor { pub label: Option<&'static str>, pub source: &'static str }
pub struct ShaderModuleDescriptorSpirV { pub label: Option<&'static str>, pub source: &'static [u8] }
/// Load WGSL source code from a file at compile time.
#[macro_export]
macro_rules! include_wgsl {
    ($($token:tt)*) => {
        {
            //log::info!("including '{}'", $($token)*);
            $crate::ShaderModuleDescriptor {
                label: Some($($token)*),
                source: include_str!($($token)*),
            }
        }
    };
}
#[macro_export]
macro_rules! include_spirv_raw {
    ($($token:tt)*) => {
        {
            $crate::ShaderModuleDescriptorSpirV {
                label: Some($($token)*),
                source: include_bytes!($($token)*),
            }
        }
    };
}
"#,
    )
    .file(
        "examples/Cargo.toml",
        "[package]\nname = \"examples\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nwgpu = { path = \"../wgpu\" }\n",
    )
    .file("examples/src/lib.rs", "pub mod boids;\n")
    .file(
        "examples/src/boids/mod.rs",
        "pub fn shaders() -> (wgpu::ShaderModuleDescriptor, wgpu::ShaderModuleDescriptorSpirV) {\n    (wgpu::include_wgsl!(\"compute.wgsl\"), wgpu::include_spirv_raw!(\"draw.spv\"))\n}\n",
    )
    .file("examples/src/boids/compute.wgsl", "@compute fn main() {}\n")
    .file("examples/src/boids/draw.spv", "spirv");
    build_and_verify(f.path());
    each_changes_the_key(
        &f,
        &[
            "examples/src/boids/compute.wgsl",
            "examples/src/boids/draw.spv",
        ],
    );
    f.file(
        "examples/src/boids/mod.rs",
        "const NAME: &str = \"compute.wgsl\";\npub fn shader() -> wgpu::ShaderModuleDescriptor { wgpu::include_wgsl!(concat!(\"comp\", \"ute.wgsl\")) }\n",
    );
    refused(
        &f,
        &[
            // The workspace's own macro expands to `include_str!(concat!(…))`
            // and is read; the registry entry for wgpu's `include_wgsl!`
            // (the same name) evaluates only literals, and refuses.
            "examples/src/boids/mod.rs:2: include_wgsl! (wgpu) names files with an argument that is not a string literal",
            "[[key.dynamic-include]]\n      site = \"examples/src/boids/mod.rs\"",
        ],
    );
}

/// nushell's `nu-cli/tests/completions/mod.rs`: `vec![folder("test_a"),
/// folder("test_b")]` calls a function `folder`; rust-embed's attribute is
/// `#[folder = "…"]`, an attribute only where an attribute stands (also
/// inside `cfg_attr`).
#[test]
fn a_function_named_folder_is_no_rust_embed_attribute() {
    let f = Fixture::new();
    f.file("Cargo.toml", LIB).file(
        "src/lib.rs",
        r#"fn folder(s: impl Into<String>) -> String { format!("{}/", s.into()) }
pub fn expected() -> Vec<String> {
    let v = vec![folder("test_a"), folder("test_a_symlink"), folder("test_b")];
    let w = [folder(format!("directory_completion/{}", "inside"))];
    v.into_iter().chain(w).collect()
}
"#,
    );
    build_and_verify(f.path());
    ci_key(&f);
    // The attribute, in `cfg_attr`, reads its folder.
    f.file(
        "src/lib.rs",
        "#[cfg_attr(feature = \"embed\", derive(rust_embed::RustEmbed), folder = \"public/\")]\npub struct Assets;\n",
    )
    .file("public/index.html", "i");
    each_changes_the_key(&f, &["public/index.html"]);
}

/// cubecl's `cubecl-macros/src/generate/kernel.rs` (`include_str!(#file)`),
/// vulkano-shaders' `codegen.rs` (`::std::include_bytes!( #s )` and
/// `#( #include_bytes ),*`), sqlx-macros-core and wiggle: a proc macro
/// writes `include_str!` inside `quote!` for its caller to expand. The
/// crate depends on the quote crate by that name, so `quote!` is quote's:
/// its arguments are token output, and compiling the proc macro reads
/// nothing. A `macro_rules! quote` of the workspace would make them code.
#[test]
fn include_str_inside_a_proc_macros_quote_is_token_output() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"macros\"]\nresolver = \"2\"\n",
    )
    .file(
        "macros/Cargo.toml",
        "[package]\nname = \"macros\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\nproc-macro = true\n[dependencies]\nquote = \"1\"\nproc-macro2 = \"1\"\n",
    )
    .file(
        "macros/src/lib.rs",
        r#"use proc_macro::TokenStream;
use quote::{quote, quote_spanned};

#[proc_macro]
pub fn shader(input: TokenStream) -> TokenStream {
    let file = input.to_string();
    let input_paths = vec![file.clone()];
    let include_bytes = input_paths.iter().map(|s| {
        quote! {
            // Using `include_bytes` here ensures that changing the shader will force recompilation.
            ::std::include_bytes!( #s )
        }
    });
    let span = proc_macro2::Span::call_site();
    let tokens = quote_spanned! {span=>
        const _: &[&[u8]] = &[ #( #include_bytes ),* ];
        pub const SOURCE: &str = include_str!(#file);
    };
    tokens.into()
}
"#,
    );
    build_and_verify(f.path());
    ci_key(&f);
    // `quote` is the workspace's own macro here, which expands its tokens:
    // the include inside is code, and its path is read.
    f.file(
        "macros/src/lib.rs",
        "macro_rules! quote { ($($t:tt)*) => { $($t)* } }\npub const S: &str = quote! { include_str!(\"../data/s.txt\") };\n",
    )
    .file("macros/data/s.txt", "s");
    each_changes_the_key(&f, &["macros/data/s.txt"]);
    // A `quote` of the checkout (a path dependency, here a proc macro that
    // could emit its input as code) is the pull request's: read too.
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"macros\", \"quote\"]\nresolver = \"2\"\n",
    )
    .file(
        "quote/Cargo.toml",
        "[package]\nname = \"quote\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\nproc-macro = true\n",
    )
    .file(
        "quote/src/lib.rs",
        "#[proc_macro]\npub fn quote(input: proc_macro::TokenStream) -> proc_macro::TokenStream { input }\n",
    )
    .file(
        "macros/Cargo.toml",
        "[package]\nname = \"macros\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nquote = { path = \"../quote\" }\n",
    )
    .file(
        "macros/src/lib.rs",
        "pub const S: &str = quote::quote! { include_str!(\"../data/s.txt\") };\n",
    );
    build_and_verify(f.path());
    each_changes_the_key(&f, &["macros/data/s.txt"]);
}

/// rust-analyzer: `crates/syntax` renames its own `quote_` to `quote`
/// (`pub(crate) use quote_ as quote;`), and `xtask`, which depends on the
/// quote crate and not on `syntax`, generates the parser's `macro_rules! T_`
/// inside `quote! { … #([#p] => { … };)* … }`. That `quote!` is still
/// quote's: its tokens are output, not a second definition of `T_` whose
/// rules cannot be read. (Before, one package's `macro_rules! quote` made
/// every package's `quote!` code, and rust-analyzer's re-run refused its
/// `define_symbols!(… include_bytes, …)` table.) A package that can name
/// the renamed `quote` still has its arguments read.
#[test]
fn a_quote_one_package_takes_is_still_token_output_in_packages_that_cannot_name_it() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"syntax\", \"intern\", \"xtask\"]\nresolver = \"2\"\n",
    )
    .file(
        "syntax/Cargo.toml",
        "[package]\nname = \"syntax\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file(
        "syntax/src/lib.rs",
        "macro_rules! quote_ { ($($t:tt)*) => { stringify!($($t)*) } }\npub(crate) use quote_ as quote;\npub const Q: &str = quote!(a b);\npub mod generated;\npub use T_ as T;\npub fn bang(k: u8) -> bool { k == T![!] }\n",
    )
    .file(
        "syntax/src/generated.rs",
        "#[macro_export]\nmacro_rules ! T_ { [!] => { 1 } ; [;] => { 2 } ; }\n",
    )
    .file(
        "intern/Cargo.toml",
        "[package]\nname = \"intern\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file(
        "intern/src/lib.rs",
        "macro_rules! define_symbols { (@PLAIN: $($name:ident,)*) => { $(#[allow(non_upper_case_globals)] pub const $name: &str = stringify!($name);)* } }\ndefine_symbols! { @PLAIN: include_bytes, include_str, include, }\n",
    )
    .file(
        "xtask/Cargo.toml",
        "[package]\nname = \"xtask\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nquote = \"1\"\n",
    )
    .file(
        "xtask/src/main.rs",
        "use quote::quote;\nfn main() {\n    let p: Vec<proc_macro2::TokenStream> = Vec::new();\n    let out = quote! {\n        #[macro_export]\n        macro_rules! T_ {\n            #([#p] => { $crate::K::#p };)*\n        }\n    };\n    println!(\"{out}\");\n}\n",
    );
    ci_key(&f);
    // Where `xtask` can name `syntax`'s macros, its `quote!` may be that
    // crate's, and the `T_` inside is a definition ci-key cannot read.
    f.file(
        "xtask/Cargo.toml",
        "[package]\nname = \"xtask\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nquote = \"1\"\nsyntax = { path = \"../syntax\" }\n",
    );
    refused(
        &f,
        &[
            "intern/src/lib.rs:2: include_bytes! names a path chosen where `include_bytes` is handed to define_symbols! as a token",
        ],
    );
}

/// A wrapper's name followed by a metavariable in another macro's body
/// (`my_include $b ("…")`): the caller may pass the `!` (`call_it!(!)`),
/// making it a call no reading shows; refused at the body.
#[test]
fn a_wrapper_called_with_a_bang_its_caller_passes_is_refused() {
    let f = Fixture::new();
    f.file("Cargo.toml", LIB).file(
        "src/lib.rs",
        "macro_rules! my_include { ($p:literal) => { include_str!($p) } }\nmacro_rules! call_it { ($b:tt) => { my_include $b (\"../data/a.txt\") } }\npub const A: &str = call_it!(!);\n",
    )
    .file("data/a.txt", "a");
    refused(
        &f,
        &["src/lib.rs:2: my_include! names a path chosen where `my_include`"],
    );
}

/// A workspace in a subdirectory of its repository (tokenizers' `tokenizers/`,
/// polars' `py-polars/`), whose `README.md` is a symlink to the repository's
/// (`../README.md`), included as the crate docs: the link stays inside the
/// repository, which `.git` marks, so it is followed and hashed; `--root`
/// stays the workspace. A link out of the repository is still refused.
#[test]
fn a_readme_symlink_above_the_workspace_but_inside_the_repository_is_followed() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.join(".git")).unwrap();
    f.file("README.md", "# the project\n")
        .file("rust/Cargo.toml", LIB)
        .file(
            "rust/src/lib.rs",
            "#![doc = include_str!(\"../README.md\")]\npub fn f() {}\n",
        );
    std::os::unix::fs::symlink("../README.md", f.join("rust/README.md")).unwrap();
    let workspace = f.join("rust");
    let key = |f: &Fixture| {
        let output = xtask_cmd(&["ci-key", "--root"])
            .arg(f.join("rust"))
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        stdout(&output).trim().to_owned()
    };
    let before = key(&f);
    build_and_verify(&workspace);
    f.file("README.md", "# the project, renamed\n");
    assert_ne!(key(&f), before, "the README behind the link is an input");
    // A gitfile (a worktree's or a submodule's `.git`) marks the root too.
    std::fs::remove_dir(f.join(".git")).unwrap();
    f.file(".git", "gitdir: /elsewhere/.git/worktrees/x\n");
    key(&f);
    // Without `.git`, the workspace is the repository: refused, naming the link.
    f.remove(".git");
    let output = xtask_cmd(&["ci-key", "--root"])
        .arg(&workspace)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("through the symlink README.md"));
    // ... unless the policy names the repository's top directory.
    f.file(
        "rust/.github/ci-trust.toml",
        "[key]\nrepository-root = \"..\"\n",
    );
    key(&f);
    // A `.git` bounds the repository: the policy may not widen it.
    std::fs::create_dir_all(f.join("rust/.git")).unwrap();
    let output = xtask_cmd(&["ci-key", "--root"])
        .arg(&workspace)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
}

/// vulkano's `vulkano/src/lib.rs`: `include!(crate::autogen_output!("errors.rs"))`,
/// where `macro_rules! autogen_output` gives
/// `concat!(std::env!("CARGO_MANIFEST_DIR"), "/autogen-out/", $file)`: the
/// workspace's macro is expanded as rustc would, in the include's crate.
/// A macro the workspace does not define is refused at the include.
#[test]
fn an_include_path_a_workspace_macro_gives_is_expanded() {
    let f = Fixture::new();
    f.file("Cargo.toml", LIB)
        .file(
            "src/lib.rs",
            r#"include!(crate::autogen_output!("errors.rs"));
mod device;
pub use device::D;
macro_rules! autogen_output {
    ($file:literal) => {
        concat!(std::env!("CARGO_MANIFEST_DIR"), "/autogen-out/", $file)
    };
}
use autogen_output;
"#,
        )
        .file(
            "src/device.rs",
            "include!(crate::autogen_output!(\"device.rs\"));\n",
        )
        .file("autogen-out/errors.rs", "pub const E: u8 = 1;\n")
        .file("autogen-out/device.rs", "pub const D: u8 = 2;\n");
    build_and_verify(f.path());
    each_changes_the_key(&f, &["autogen-out/errors.rs", "autogen-out/device.rs"]);
    f.file(
        "src/device.rs",
        "include!(other_crate::generated!(\"device.rs\"));\n",
    );
    refused(
        &f,
        &[
            "src/device.rs:1: include! names `other_crate::generated!(\"device.rs\")`, a call of a macro that is not a macro_rules! of the workspace",
            "site = \"src/device.rs\"",
        ],
    );
}

/// sqlx's `src/macros/mod.rs`: `macro_rules! migrate { ($dir:literal) =>
/// {{ $crate::sqlx_macros::migrate!($dir) }}; () => {{ … migrate!() }} }`,
/// called from other crates: `sqlx::migrate!` reads below the calling
/// crate's manifest directory, what each call names or `migrations/`. And
/// pest's `#[grammar = "…"]` (wasmtime's `cranelift/isle/veri/aslp`): the
/// file below the manifest directory, else below `src/`; both are hashed.
/// (No build: these crates are not in the offline registry.)
#[test]
fn registry_macro_wrappers_read_from_the_calling_crate() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"sqlx\", \"app\"]\nresolver = \"2\"\n",
    )
    .file(
        "sqlx/Cargo.toml",
        "[package]\nname = \"sqlx\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file(
        "sqlx/src/lib.rs",
        r#"#[macro_export]
macro_rules! migrate {
    ($dir:literal) => {{
        $crate::sqlx_macros::migrate!($dir)
    }};

    () => {{
        $crate::sqlx_macros::migrate!()
    }};
}
"#,
    )
    .file(
        "app/Cargo.toml",
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nsqlx = { path = \"../sqlx\" }\n",
    )
    .file(
        "app/src/lib.rs",
        "pub fn m() { let _ = sqlx::migrate!(\"./db\"); }\npub fn n() { let _ = sqlx::migrate!(); }\nmod parser;\n",
    )
    .file(
        "app/src/parser.rs",
        "#[derive(pest_derive::Parser)]\n#[grammar = \"aslp.pest\"]\npub struct AslpParser;\n",
    )
    .file("app/db/1.sql", "create table a();\n")
    .file("app/migrations/1.sql", "create table b();\n")
    .file("app/src/aslp.pest", "rule = { \"a\" }\n");
    each_changes_the_key(
        &f,
        &[
            "app/db/1.sql",
            "app/db/2.sql",
            "app/migrations/1.sql",
            "app/src/aslp.pest",
            // Present, it is the grammar pest reads (the earlier candidate).
            "app/aslp.pest",
        ],
    );
}

/// Whether `path` is an input of `f`'s key.
fn is_input(f: &Fixture, path: &str) -> bool {
    let output = f.xtask(&["ci-key", "--explain"]);
    assert!(output.status.success(), "{}", stderr(&output));
    stderr(&output)
        .lines()
        .any(|line| line.trim_start().starts_with(&format!("{path} ")))
}

/// risc0's `risc0/zkvm/src/host/server/prove/tests.rs`: `ext_test_case!`
/// includes `concat!("../testdata/", stringify!($func_name), ".bin")`; each
/// call names an identifier, so each call's expansion is one file, read
/// from the calling file's directory (held-out half 2's wrong refusal).
#[test]
fn a_path_a_wrapper_builds_with_stringify_is_read_at_each_call() {
    let f = Fixture::new();
    f.file("Cargo.toml", LIB)
        .file("src/lib.rs", "pub mod prove;\n")
        .file(
            "src/prove/mod.rs",
            r#"macro_rules! ext_test_case {
    ($func_name:ident) => {
        pub fn $func_name() -> (&'static str, &'static [u8]) {
            (
                stringify!($func_name),
                include_bytes!(concat!("../testdata/", stringify!($func_name), ".bin")),
            )
        }
    };
}
ext_test_case!(bigint2_add);
ext_test_case!(ecdsa_verify);
"#,
        )
        .file("src/testdata/bigint2_add.bin", "a")
        .file("src/testdata/ecdsa_verify.bin", "e")
        .file("src/testdata/unused.bin", "u");
    build_and_verify(f.path());
    each_changes_the_key(
        &f,
        &[
            "src/testdata/bigint2_add.bin",
            "src/testdata/ecdsa_verify.bin",
        ],
    );
    // Exactly what the calls name: no glob of the directory.
    assert!(is_input(&f, "src/testdata/bigint2_add.bin"));
}

/// bevy's `bevy_asset/src/io/embedded/mod.rs` and `bevy_shader/src/lib.rs`:
/// `embedded_asset!($app, $path)` forwards to `embedded_asset!($app, "src",
/// $path)`, whose `include_bytes!($path)` reads the file the call names
/// (not "src"); `load_shader_library!(app, "x.wesl", |s| …)` of another
/// crate calls it through a re-export, with an optional `$(, $settings:expr)?`
/// closure holding `vec![…]` (held-out half 2's wrong refusal).
#[test]
fn a_wrapper_forwarding_to_another_rule_is_expanded_at_each_call() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"asset\", \"shader\", \"render\"]\nresolver = \"2\"\n",
    )
    .file(
        "asset/Cargo.toml",
        "[package]\nname = \"asset\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file(
        "asset/src/lib.rs",
        r#"pub struct App(pub Vec<(&'static str, &'static [u8])>);
#[macro_export]
macro_rules! embedded_asset {
    ($app: expr, $path: expr) => {{
        $crate::embedded_asset!($app, "src", $path)
    }};

    ($app: expr, $source_path: expr, $path: expr) => {{
        let app: &mut $crate::App = $app;
        app.0.push((concat!($source_path, "/", $path), ::core::include_bytes!($path)));
    }};
}
"#,
    )
    .file(
        "shader/Cargo.toml",
        "[package]\nname = \"shader\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nasset = { path = \"../asset\" }\n",
    )
    .file(
        "shader/src/lib.rs",
        r#"pub mod _macro { pub use asset; }
#[macro_export]
macro_rules! load_shader_library {
    ($asset_server_provider: expr, $path: literal $(, $settings: expr)?) => {
        $crate::_macro::asset::embedded_asset!($asset_server_provider, $path);
        $( let _settings: fn(u32) -> Vec<u32> = $settings; )?
    }
}
"#,
    )
    .file(
        "render/Cargo.toml",
        "[package]\nname = \"render\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nasset = { path = \"../asset\" }\nshader = { path = \"../shader\" }\n",
    )
    .file("render/src/lib.rs", "pub mod pass;\n")
    .file(
        "render/src/pass/mod.rs",
        r#"pub fn build(app: &mut asset::App) {
    shader::load_shader_library!(app, "view.wesl", |s| { vec![s, 1] });
    shader::load_shader_library!(app, "mesh.wesl");
    asset::embedded_asset!(app, "three.wgsl");
    asset::embedded_asset!(app, "assets", "four.wgsl");
}
"#,
    )
    .file("render/src/pass/view.wesl", "v")
    .file("render/src/pass/mesh.wesl", "m")
    .file("render/src/pass/three.wgsl", "t")
    .file("render/src/pass/four.wgsl", "f");
    build_and_verify(f.path());
    each_changes_the_key(
        &f,
        &[
            "render/src/pass/view.wesl",
            "render/src/pass/mesh.wesl",
            "render/src/pass/three.wgsl",
            "render/src/pass/four.wgsl",
        ],
    );
}

/// deno's `libs/core/extensions.rs`, `fast_string.rs` and `cli/worker.rs`:
/// `ascii_str_include!($file:expr_2021)` is `include_str!($file)`; callers
/// pass `concat!("./", "Cargo.toml")` (here `"../notes.txt"`), a local `test_file!` repeats
/// `concat!("js/", $file)` over `$($file:literal),*`, and `include_js_files!`
/// of another crate reaches it through two more macros with repetitions, an
/// optional `dir`, and `concat!(env!("CARGO_MANIFEST_DIR"), "/", $dir)` of
/// the calling crate (held-out half 2's wrong refusal).
#[test]
fn includes_reached_through_repetitions_of_several_macros_are_read() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"core\", \"ext\"]\nresolver = \"2\"\n",
    )
    .file(
        "core/Cargo.toml",
        "[package]\nname = \"core_js\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file(
        "core/src/lib.rs",
        r#"#[macro_export]
macro_rules! ascii_str_include {
  ($file:expr_2021) => {{
    const S: &str = ::std::include_str!($file);
    S
  }};
}
#[macro_export]
macro_rules! include_js_files {
  ($name:ident $( dir $dir:literal, )? $(
    $s1:literal
    $(with_specifier $s2:literal)?
  ),* $(,)?) => {
    $crate::__include_detect!(name=$name, dir=$crate::__root_dir!($($dir)?), $([
      $s1 $(with_specifier $s2)?
    ]),*)
  };
}
#[doc(hidden)]
#[macro_export]
macro_rules! __include_detect {
  (name=$name:ident, dir=$dir:expr_2021, $([ $file:literal $(with_specifier $spec:literal)? ]),*) => {
    [ $( $crate::__include_inner!(@item name=$name, dir=$dir, file=$file) ),* ]
  };
}
#[doc(hidden)]
#[macro_export]
macro_rules! __root_dir {
  () => { env!("CARGO_MANIFEST_DIR") };
  ($dir:expr_2021) => { concat!(env!("CARGO_MANIFEST_DIR"), "/", $dir) };
}
#[doc(hidden)]
#[macro_export]
macro_rules! __include_inner {
  (@item name=$name:ident, dir=$dir:expr_2021, file=$file:literal) => {
    (concat!("ext:", stringify!($name), "/", $file), $crate::ascii_str_include!(concat!($dir, "/", $file)))
  };
}
pub const MANIFEST: &str = ascii_str_include!(concat!("../", "notes.txt"));
pub fn tests() -> Vec<&'static str> {
    let mut v = Vec::new();
    macro_rules! test_file {
      ($($file:literal),*) => {
        $(v.push(crate::ascii_str_include!(concat!("js/", $file)));)*
      }
    }
    test_file!("40_test.js", "40_bench.js");
    v
}
"#,
    )
    .file("core/notes.txt", "n")
    .file("core/src/js/40_test.js", "t")
    .file("core/src/js/40_bench.js", "b")
    .file(
        "ext/Cargo.toml",
        "[package]\nname = \"ext\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\ncore_js = { path = \"../core\" }\n",
    )
    .file("ext/src/lib.rs", "mod files;\npub use files::FILES;\n")
    .file(
        "ext/src/files.rs",
        "pub const FILES: [(&str, &str); 2] = core_js::include_js_files!(web dir \"js\", \"00_infra.js\", \"01_dom.js\" with_specifier \"ext:web/dom\");\n",
    )
    .file("ext/js/00_infra.js", "i")
    .file("ext/js/01_dom.js", "d");
    build_and_verify(f.path());
    each_changes_the_key(
        &f,
        &[
            "core/notes.txt",
            "core/src/js/40_test.js",
            "core/src/js/40_bench.js",
            "ext/js/00_infra.js",
            "ext/js/01_dom.js",
        ],
    );
}

/// A crate whose `macro_rules!` live in `src/macros/defs/mod.rs` and are
/// called from `src/deep/mod.rs`: the two directories differ, so what the
/// definition's own directory gives is not what a call reads, and the files
/// the calls read lie in `data/`, outside `src/` (which is hashed whole).
/// The attacks of 475e5f5's review (docs: key-attacks): each call expands
/// by another rule than rustc's, or by another macro than the one in scope.
fn wrapper_fixture(definitions: &str, caller: &str) -> Fixture {
    let f = Fixture::new();
    f.file("Cargo.toml", LIB)
        .file(
            "src/lib.rs",
            "#[macro_use]\npub mod macros;\npub mod deep;\n",
        )
        .file("src/macros/mod.rs", "#[macro_use]\npub mod defs;\n")
        .file("src/macros/defs/mod.rs", definitions)
        .file("src/deep/mod.rs", caller)
        .file("data/default.toml", "d")
        .file("data/prod.toml", "p");
    f
}

/// `config!(file "prod.toml")`: our `$default:expr` ran to the end
/// (`file "prod.toml"`), so the first rule matched and only
/// `data/default.toml` was keyed; rustc's expression is `file`, the rule
/// fails, and the second reads `data/prod.toml`. The expansion now adds to
/// the literals of the call, and an expression rustc ends early is refused.
#[test]
fn an_expression_rustc_ends_before_a_word_takes_no_rule_of_ours() {
    let f = wrapper_fixture(
        r#"macro_rules! config {
    ($default:expr) => { (include_str!("../../data/default.toml"), $default) };
    (file $path:literal) => { (include_str!(concat!("../../data/", $path)), 0) };
}
"#,
        "pub fn prod() -> (&'static str, i32) { config!(file \"prod.toml\") }\n",
    );
    build_and_verify(f.path());
    each_changes_the_key(&f, &["data/prod.toml"]);
    // A path only the expansion gives (`stringify!`): refused, not keyed.
    f.file(
        "src/macros/defs/mod.rs",
        r#"macro_rules! config {
    ($default:expr) => { (include_str!("../../data/default.toml"), $default) };
    (file $n:ident) => { (include_str!(concat!("../../data/", stringify!($n), ".toml")), 0) };
}
"#,
    )
    .file(
        "src/deep/mod.rs",
        "pub fn prod() -> (&'static str, i32) { config!(file prod) }\n",
    );
    refused(
        &f,
        &["src/deep/mod.rs:1", "where rustc's parser may end it"],
    );
}

/// `inner!($e + 1, $n)`: a captured expression with an operator after it
/// is one expression to rustc; ours took the opaque capture alone, the
/// first rule failed, and the catch-all's `default.toml` was keyed.
#[test]
fn an_expression_passed_on_with_an_operator_is_one_expression() {
    let f = wrapper_fixture(
        r#"macro_rules! inner {
    ($e:expr, $n:ident) => { ($e, include_str!(concat!("../../data/", stringify!($n), ".toml"))) };
    ($($t:tt)*) => { (0, include_str!("../../data/default.toml")) };
}
macro_rules! outer { ($e:expr, $n:ident) => { inner!($e + 1, $n) } }
"#,
        "pub fn prod() -> (i32, &'static str) { outer!(1, prod) }\n",
    );
    build_and_verify(f.path());
    each_changes_the_key(&f, &["data/prod.toml"]);
}

/// `asset!(let prod = 1)`: rustc's `expr` never starts at `let` (nor at
/// `else`), so the first rule fails and the second reads `data/prod.toml`
/// through `stringify!`, which nothing but the expansion names. Ours took
/// `let prod = 1` for the expression, expanded the first rule and keyed
/// only `data/default.toml`.
#[test]
fn an_expression_rustc_does_not_start_at_let_or_else_takes_the_next_rule() {
    let f = wrapper_fixture(
        r#"macro_rules! asset {
    ($e:expr) => { ($e, include_str!("../../data/default.toml")).1 };
    (let $n:ident = $v:expr) => { { let $n = $v; include_str!(concat!("../../data/", stringify!($n), ".toml")) } };
    (else $n:ident) => { include_str!(concat!("../../data/", stringify!($n), ".toml")) };
}
"#,
        "pub fn prod() -> &'static str { asset!(let prod = 1) }\npub fn other() -> &'static str { asset!(else default) }\n",
    );
    build_and_verify(f.path());
    each_changes_the_key(&f, &["data/prod.toml", "data/default.toml"]);
}

/// `asset!(fn helper() {}; prod)`: a `stmt` is an item too, so rustc takes
/// the first rule and reads `data/prod.toml`; ours ended the statement at
/// `fn`, failed the rule and expanded the catch-all (`default.toml`).
#[test]
fn a_statement_that_is_an_item_is_refused_not_skipped() {
    let f = wrapper_fixture(
        r#"macro_rules! asset {
    ($s:stmt; $n:ident) => { { $s include_str!(concat!("../../data/", stringify!($n), ".toml")) } };
    ($($t:tt)*) => { include_str!("../../data/default.toml") };
}
"#,
        "pub fn prod() -> &'static str { asset!(fn helper() {}; prod) }\n",
    );
    refused(&f, &["src/deep/mod.rs:1", "an item to rustc"]);
}

/// `asset!(true)` after a `($t:ty)` rule: `true` begins no type to rustc
/// (a reserved word), so the `literal` rule reads `data/true.toml`, which
/// only the expansion names; ours took `true` for a type.
#[test]
fn a_reserved_word_begins_no_type_and_takes_the_next_rule() {
    let f = wrapper_fixture(
        r#"macro_rules! asset {
    ($t:ty) => { include_str!("../../data/default.toml") };
    ($b:literal) => { include_str!(concat!("../../data/", stringify!($b), ".toml")) };
}
"#,
        "pub fn on() -> &'static str { asset!(true) }\n",
    );
    f.file("data/true.toml", "t");
    build_and_verify(f.path());
    each_changes_the_key(&f, &["data/true.toml"]);
}

/// `paste::paste! { … asset!([<pr od>]) … }`: paste rewrites the call to
/// `asset!(prod)` before rustc expands it, so the `ident` rule reads
/// `data/prod.toml`; ours expanded the call as written, took the catch-all
/// and keyed `data/default.toml` only. Also inside a workspace macro's body.
#[test]
fn a_call_a_foreign_macro_may_rewrite_is_refused_not_expanded_as_written() {
    let definitions = r#"macro_rules! asset {
    ($n:ident) => { include_str!(concat!("../../data/", stringify!($n), ".toml")) };
    ($($t:tt)*) => { include_str!("../../data/default.toml") };
}
"#;
    let f = wrapper_fixture(
        definitions,
        "paste::paste! { pub fn prod() -> &'static str { asset!([<pr od>]) } }\n",
    );
    f.file(
        "Cargo.toml",
        &format!("{LIB}\n[dependencies]\npaste = \"1\"\n"),
    );
    refused(&f, &["src/deep/mod.rs:1", "among the arguments of paste!"]);
    f.file(
        "src/macros/defs/mod.rs",
        &format!(
            "{definitions}macro_rules! named {{ ($a:ident $b:ident) => {{ paste::paste! {{ asset!([<$a $b>]) }} }} }}\n"
        ),
    )
    .file(
        "src/deep/mod.rs",
        "pub fn prod() -> &'static str { named!(pr od) }\n",
    );
    refused(&f, &["among the arguments of `paste!`"]);
}

/// A doc comment in a call is `#[doc = "…"]` to rustc's matcher: the first
/// rule (no attribute) fails and the second reads `data/prod.toml`. Our
/// lexer dropped comments, so the first rule matched.
#[test]
fn doc_comments_in_a_call_are_attributes_a_matcher_sees() {
    let f = wrapper_fixture(
        r#"macro_rules! asset {
    ($n:ident) => { include_str!("../../data/default.toml") };
    ($(#[$($a:tt)*])* $n:ident) => { include_str!(concat!("../../data/", stringify!($n), ".toml")) };
}
"#,
        "pub fn prod() -> &'static str { asset!(\n    /// The production configuration.\n    prod) }\n",
    );
    build_and_verify(f.path());
    each_changes_the_key(&f, &["data/prod.toml"]);
    // `$(#[$m:meta])*`, the form item-making macros take attributes by.
    f.file(
        "src/macros/defs/mod.rs",
        r#"macro_rules! asset {
    ($n:ident) => { include_str!("../../data/default.toml") };
    ($(#[$m:meta])* $n:ident) => { include_str!(concat!("../../data/", stringify!($n), ".toml")) };
}
"#,
    );
    build_and_verify(f.path());
    each_changes_the_key(&f, &["data/prod.toml"]);
}

/// `vec![include_str!(…)]` in a wrapper's body is the standard `vec!`
/// where the call stands, though a private module of the workspace
/// defines a `macro_rules! vec` that drops its tokens: expanding by name
/// alone keyed nothing.
#[test]
fn a_workspace_macro_named_like_a_standard_one_still_has_its_arguments_read() {
    let f = wrapper_fixture(
        "macro_rules! load { ($n:ident) => { vec![include_str!(concat!(\"../../data/\", stringify!($n), \".toml\"))] } }\n",
        "pub fn prod() -> Vec<&'static str> { load!(prod) }\nmod helpers {\n    macro_rules! vec { ($($t:tt)*) => { () } }\n    pub fn unit() { vec![1] }\n}\n",
    );
    build_and_verify(f.path());
    each_changes_the_key(&f, &["data/prod.toml"]);
}

/// `$crate::macros::defs::inc!(…)` with `pub use std::include_str as inc;`:
/// the expansion's include by an alias was read as an unknown macro.
#[test]
fn an_include_by_an_alias_in_an_expansion_is_an_include() {
    let f = wrapper_fixture(
        "pub use std::include_str as inc;\nmacro_rules! asset { ($n:ident) => { $crate::macros::defs::inc!(concat!(\"../../data/\", stringify!($n), \".toml\")) } }\n",
        "pub fn prod() -> &'static str { asset!(prod) }\n",
    );
    build_and_verify(f.path());
    each_changes_the_key(&f, &["data/prod.toml"]);
}

/// A `macro_rules!` whose body is over the 64 KiB kept for expansion was
/// not recorded, so a call of it in an expansion read as a registry
/// macro's: its arguments hold no include, and nothing was keyed.
#[test]
fn a_definition_too_large_to_keep_does_not_expand_to_nothing() {
    let padding = "x".repeat(70_000);
    let f = wrapper_fixture(
        &format!(
            "macro_rules! big {{ ($n:ident) => {{ include_str!(concat!(\"../../data/\", stringify!($n), \".toml\")) }}; /* {padding} */ }}\nmacro_rules! asset {{ ($n:ident) => {{ big!($n) }} }}\n"
        ),
        "pub fn prod() -> &'static str { asset!(prod) }\n",
    );
    refused(
        &f,
        &["src/deep/mod.rs:1", "a body of more than 65536 bytes"],
    );
}

/// Fragments whose end or start depends on the edition: edition 2018's
/// `$a:pat` ends at `|` (rustc takes the first rule and reads
/// `data/prod.toml`; we ran past the `|` and took the catch-all), and
/// `$e:expr` matches `_` only from edition 2024 (rustc 2021 takes the
/// second rule and reads `data/_.toml`). Both were keyed by the wrong rule;
/// both are refused now.
#[test]
fn fragments_that_differ_by_edition_are_refused_not_guessed() {
    let f = wrapper_fixture(
        r#"macro_rules! pick {
    ($a:pat | $n:ident) => { include_str!(concat!("../../data/", stringify!($n), ".toml")) };
    ($($t:tt)*) => { include_str!("../../data/default.toml") };
}
"#,
        "pub fn prod() -> &'static str { pick!(_ | prod) }\n",
    );
    f.file("Cargo.toml", &LIB.replace("2021", "2018"));
    refused(&f, &["src/deep/mod.rs:1", "a top-level `|`"]);
    f.file("Cargo.toml", LIB)
        .file(
            "src/macros/defs/mod.rs",
            r#"macro_rules! pick {
    ($e:expr) => { include_str!("../../data/default.toml") };
    ($n:tt) => { include_str!(concat!("../../data/", stringify!($n), ".toml")) };
}
"#,
        )
        .file(
            "src/deep/mod.rs",
            "pub fn prod() -> &'static str { pick!(_) }\n",
        )
        .file("data/_.toml", "u");
    refused(&f, &["src/deep/mod.rs:1", "in some editions only"]);
}

/// `pick!(@prod)` after a `$t:ty` rule, `pick!(&prod)` after a `$p:path`
/// rule: no type starts with `@` and no path with `&`, so rustc takes the
/// second rule and reads `data/prod.toml`; our type and path ran to the end
/// and took the first.
#[test]
fn a_type_or_path_rustc_does_not_start_takes_the_next_rule() {
    let f = wrapper_fixture(
        r#"macro_rules! pick {
    ($t:ty) => { include_str!("../../data/default.toml") };
    (@ $n:ident) => { include_str!(concat!("../../data/", stringify!($n), ".toml")) };
}
"#,
        "pub fn prod() -> &'static str { pick!(@prod) }\n",
    );
    build_and_verify(f.path());
    each_changes_the_key(&f, &["data/prod.toml"]);
    f.file(
        "src/macros/defs/mod.rs",
        r#"macro_rules! pick {
    ($p:path) => { include_str!("../../data/default.toml") };
    (& $n:ident) => { include_str!(concat!("../../data/", stringify!($n), ".toml")) };
}
"#,
    )
    .file(
        "src/deep/mod.rs",
        "pub fn prod() -> &'static str { pick!(&prod) }\n",
    );
    build_and_verify(f.path());
    each_changes_the_key(&f, &["data/prod.toml"]);
}

/// `prefixed!(asset!(prod))`, whose rule rewrites the call it is handed
/// (`$m!(secret)`): rustc expands `prefixed!` first and reads
/// `data/secret.toml`; the inner call, expanded on its own, named
/// `data/prod.toml`. A call among a workspace macro's arguments is now also
/// read through that macro's expansion (or refused where it does not expand).
#[test]
fn a_call_among_a_workspace_macros_arguments_is_read_as_that_macro_rewrites_it() {
    let f = wrapper_fixture(
        r#"macro_rules! asset { ($n:ident) => { include_str!(concat!("../../data/", stringify!($n), ".toml")) } }
macro_rules! prefixed { ($m:ident ! ($n:ident)) => { $m!(secret) } }
"#,
        "pub fn prod() -> &'static str { prefixed!(asset!(prod)) }\n",
    );
    f.file("data/secret.toml", "s");
    build_and_verify(f.path());
    each_changes_the_key(&f, &["data/secret.toml"]);
    // A path wholly the caller's (`include_str!($p)`), rewritten likewise.
    f.file(
        "src/macros/defs/mod.rs",
        r#"macro_rules! asset { ($p:expr) => { include_str!($p) } }
macro_rules! prefixed { ($m:ident ! ($p:literal)) => { $m!(concat!("../../data/", $p)) } }
"#,
    )
    .file(
        "src/deep/mod.rs",
        "pub fn prod() -> &'static str { prefixed!(asset!(\"prod.toml\")) }\n",
    );
    build_and_verify(f.path());
    each_changes_the_key(&f, &["data/prod.toml"]);
}

/// kornia-rs's `crates/kornia/src/lib.rs`: `#![doc =
/// include_str!(concat!("../", env!("CARGO_PKG_README")))]`. Cargo sets the
/// variable from the manifest (a workspace-inherited `readme` rebased onto
/// the package) or to the README it finds in the package (held-out half 3's
/// wrong refusal).
#[test]
fn an_include_of_cargo_pkg_readme_reads_the_readme_cargo_names() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"crates/found\", \"crates/inherited\"]\nresolver = \"2\"\n[workspace.package]\nreadme = \"README.md\"\n",
    )
    .file("README.md", "# workspace\n")
    .file(
        "crates/found/Cargo.toml",
        "[package]\nname = \"found\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("crates/found/README.md", "# found\n")
    .file(
        "crates/found/src/lib.rs",
        "#![doc = include_str!(concat!(\"../\", env!(\"CARGO_PKG_README\")))]\n",
    )
    .file(
        "crates/inherited/Cargo.toml",
        "[package]\nname = \"inherited\"\nversion = \"0.1.0\"\nedition = \"2021\"\nreadme.workspace = true\n",
    )
    .file("crates/inherited/README.md", "# not the one cargo names\n")
    .file(
        "crates/inherited/src/lib.rs",
        "#![doc = include_str!(concat!(\"../\", env!(\"CARGO_PKG_README\")))]\n",
    );
    build_and_verify(f.path());
    each_changes_the_key(&f, &["crates/found/README.md", "README.md"]);
}

/// deno's `tests/bench_util/benches/utf8.rs`: `extension!(bench_setup, js =
/// ["ext:…" = { source = r#"…"# }])` hands a wrapper a script's text as a
/// literal, and a `|op| match op.name { … }` closure. The call expands, so
/// its literals only add inputs: one that cannot be a path adds nothing
/// (before: "File name too long", a tool error), and a `match` expression
/// is one expression (before: refused as two operands side by side).
#[test]
fn a_wrapper_handed_a_script_and_a_match_closure_is_read_where_it_expands() {
    let f = Fixture::new();
    let source = "const hello = \"hello world\\n\";\n".repeat(20);
    f.file("Cargo.toml", LIB)
        .file(
            "src/lib.rs",
            "#[macro_use]\nmod macros;\npub mod deep;\n",
        )
        .file(
            "src/macros.rs",
            "macro_rules! js {\n    ($name:ident, $file:literal, $middleware:expr, $src:literal) => {\n        pub fn $name() -> (&'static str, fn(u8) -> u8, &'static str) { (include_str!($file), $middleware, $src) }\n    };\n}\n",
        )
        .file(
            "src/deep/mod.rs",
            &format!(
                "js!(setup, \"../../data/a.js\", |op| match op {{ 1 => 2, _ => op }}, r#\"{source}\"#);\n"
            ),
        )
        .file("data/a.js", "a");
    build_and_verify(f.path());
    each_changes_the_key(&f, &["data/a.js"]);
}

// The attack on 5b4d89c (inert macros by name; unlisted [patch] packages):
// each reproduction keyed and missed a file the build reads.
/// ci-key refuses, or the key changes when `file` (which the build reads)
/// changes. A key that stays the same is the silent miss.
fn the_key_covers(f: &Fixture, file: &str) {
    let output = f.xtask(&["ci-key"]);
    if output.status.code() == Some(2) {
        return;
    }
    assert!(output.status.success(), "{}", stderr(&output));
    let key = stdout(&output).trim().to_owned();
    let before = std::fs::read_to_string(f.join(file)).unwrap();
    f.file(file, &format!("{before}// changed\n"));
    assert_ne!(
        ci_key(f),
        key,
        "the build reads {file}, yet changing it leaves the key the same"
    );
}

/// biome's shape: `syntax` defines the inert `macro_rules! T` (only `$crate`
/// in its rules) and `parser` calls `T![include]`, `T![!]`. `lib` is
/// parser/src/lib.rs; parser/data.txt (outside src/, which is hashed
/// wholesale) is what the hidden macro reads.
fn inert_t_fixture(lib: &str) -> Fixture {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"syntax\", \"parser\"]\nresolver = \"2\"\n",
    )
    .file(
        "syntax/Cargo.toml",
        "[package]\nname = \"syntax\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file(
        "syntax/src/lib.rs",
        &format!("{CALLS_A_METAVARIABLE}pub mod generated;\n"),
    )
    .file(
        "syntax/src/generated.rs",
        "pub struct Kind(pub u8);\nimpl Kind { pub const BANG: u8 = 1; pub const INCLUDE_KW: u8 = 2; }\n#[macro_export]\nmacro_rules ! T { [!] => { $ crate :: generated :: Kind :: BANG } ; [include] => { $ crate :: generated :: Kind :: INCLUDE_KW } ; }\n",
    )
    .file(
        "parser/Cargo.toml",
        "[package]\nname = \"parser\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nsyntax = { path = \"../syntax\" }\n",
    )
    .file("parser/data.txt", "secret v1\n")
    .file(
        "parser/src/lib.rs",
        &format!(
            "pub fn at_rule(kind: u8) -> u8 {{\n    match kind {{\n        syntax::T![include] => 10,\n        syntax::T![!] => 20,\n        _ => 0,\n    }}\n}}\n{lib}"
        ),
    );
    f
}

/// `gen!(T)` defines `macro_rules! T` through `macro_rules! $n`, which
/// records no definition of `T`; its rule assembles `$m $b ("../data.txt")`
/// (no `$m!` call, so no metavariable caller either). The only definition
/// of `T` ci-key sees is syntax's inert one, so `T![include_str !]` is no
/// call. rustc: `include_str!("../data.txt")` from parser/src/lib.rs.
/// Renaming syntax's macro to `U` makes ci-key refuse the same call.
#[test]
fn a_macro_rules_named_by_a_metavariable_is_no_inert_macro() {
    let f = inert_t_fixture(
        "macro_rules! gen { ($n:ident) => { macro_rules! $n { ($m:ident $b:tt) => { $m $b (\"../data.txt\") } } } }\ngen!(T);\npub fn data() -> &'static str { T![include_str !] }\n",
    );
    the_key_covers(&f, "parser/data.txt");
}

/// `mkuse!(take, T)` expands to `use take as T;`: a rename no reading of
/// the text shows (`learn_renames_of` looks for `as T`). `T` stays inert
/// while rustc's `T` is `take`, which assembles `include_str!("../data.txt")`.
#[test]
fn a_rename_a_macro_expands_to_makes_no_inert_macro() {
    let f = inert_t_fixture(
        "macro_rules! take { ($m:ident $b:tt) => { $m $b (\"../data.txt\") } }\nmacro_rules! mkuse { ($a:ident, $b:ident) => { use $a as $b; } }\nmkuse!(take, T);\npub fn data() -> &'static str { T![include_str !] }\n",
    );
    the_key_covers(&f, "parser/data.txt");
}

/// build.rs writes `macro_rules! T { ($m:ident $b:tt) => { $m $b
/// ("../data.txt") } }` to OUT_DIR (the name is a format argument, so no
/// `macro_rules! T` appears in build.rs); lib.rs include!s it.
#[test]
fn a_macro_rules_generated_into_out_dir_is_no_inert_macro() {
    let f = inert_t_fixture(
        "include!(concat!(env!(\"OUT_DIR\"), \"/gen.rs\"));\npub fn data() -> &'static str { T![include_str !] }\n",
    );
    f.file(
        "parser/build.rs",
        "fn main() {\n    let out = std::env::var(\"OUT_DIR\").unwrap();\n    let text = format!(\"macro_rules! {} {{ ($m:ident $b:tt) => {{ $m $b (\\\"../data.txt\\\") }} }}\\n\", \"T\");\n    std::fs::write(format!(\"{out}/gen.rs\"), text).unwrap();\n    println!(\"cargo:rerun-if-changed=build.rs\");\n}\n",
    );
    the_key_covers(&f, "parser/data.txt");
}

/// A workspace proc macro `pm::T` (`T![NAME LIT]` gives `NAME!(LIT)`) shares
/// the name of syntax's inert `macro_rules! T`: `include_str` handed to it
/// is no call, though rustc reads parser/data.txt.
#[test]
fn a_proc_macro_named_like_an_inert_macro_rules_may_call_what_it_is_handed() {
    let f =
        inert_t_fixture("pub fn data() -> &'static str { pm::T![include_str \"../data.txt\"] }\n");
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"syntax\", \"parser\", \"pm\"]\nresolver = \"2\"\n",
    )
    .file(
        "pm/Cargo.toml",
        "[package]\nname = \"pm\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\nproc-macro = true\n",
    )
    .file(
        "pm/src/lib.rs",
        "use proc_macro::TokenStream;\n#[allow(non_snake_case)]\n#[proc_macro]\npub fn T(input: TokenStream) -> TokenStream {\n    let mut it = input.into_iter();\n    let name = it.next().unwrap().to_string();\n    let arg = it.next().unwrap().to_string();\n    format!(\"{name}!({arg})\").parse().unwrap()\n}\n",
    )
    .file(
        "parser/Cargo.toml",
        "[package]\nname = \"parser\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nsyntax = { path = \"../syntax\" }\npm = { path = \"../pm\" }\n",
    );
    the_key_covers(&f, "parser/data.txt");
}

/// `decl_macro` enabled by `-Zcrate-attr=feature(decl_macro)` in
/// .cargo/config.toml (nightly): no .rs file names it, so syntax's `T` stays
/// inert while parser's `macro T($m:ident $b:tt) { $m $b ("../data.txt") }`
/// is the `T` rustc calls.
#[test]
fn decl_macro_enabled_by_a_crate_attr_flag_disables_inert_macros() {
    let f = inert_t_fixture(
        "macro T($m:ident $b:tt) { $m $b (\"../data.txt\") }\npub fn data() -> &'static str { T![include_str !] }\n",
    );
    // Built with a nightly toolchain (`cargo +nightly build`); ci-key needs
    // none, so the fixture pins none (a missing pinned toolchain is an error).
    f.file(
        ".cargo/config.toml",
        "[build]\nrustflags = [\"-Zcrate-attr=feature(decl_macro)\", \"-Aunused_features\"]\n",
    );
    the_key_covers(&f, "parser/data.txt");
}

/// `[patch.crates-io] tempdir = { path = "link/../patches/tempdir" }` with
/// `link -> deep/d`: cargo joins the path lexically and builds
/// patches/tempdir; ci-key at 5b4d89c took `..` after the link physically
/// (`normalize`) and keyed deep/patches/tempdir instead. Both lie inside the
/// workspace's directory and are no members, so both are read through the
/// mirror (before 5b4d89c this refused). `[patch]` and `[replace]` paths
/// are now joined as cargo joins them (`normalize_lexically`).
#[test]
fn a_patch_path_cargo_joins_lexically_is_keyed_where_cargo_reads_it() {
    let f = lexical_patch_fixture(
        "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n[patch.crates-io]\ntempdir = { path = \"link/../patches/tempdir\" }\n",
    );
    the_key_covers(&f, "patches/tempdir/src/lib.rs");
}

/// The same `[patch]` path, `link/../patches/tempdir`, from
/// `.cargo/config.toml` (its paths are relative to the directory holding
/// `.cargo`): cargo joins it lexically there too.
#[test]
fn a_config_patch_path_cargo_joins_lexically_is_keyed_where_cargo_reads_it() {
    let f = lexical_patch_fixture(
        "[workspace]\nmembers = [\"app\"]\nexclude = [\"deep\", \"patches\"]\nresolver = \"2\"\n",
    );
    f.file(
        ".cargo/config.toml",
        "[patch.crates-io]\ntempdir = { path = \"link/../patches/tempdir\" }\n",
    );
    the_key_covers(&f, "patches/tempdir/src/lib.rs");
    assert!(
        is_input(&f, "patches/tempdir/src/lib.rs"),
        "the patched crate cargo builds is an input"
    );
}

/// `app` depends on `tempdir`, patched to `patches/tempdir` through
/// `link/../`, with `link -> deep/d` and a decoy at `deep/patches/tempdir`.
fn lexical_patch_fixture(workspace_manifest: &str) -> Fixture {
    let f = Fixture::new();
    let manifest = "[package]\nname = \"tempdir\"\nversion = \"0.3.7\"\nedition = \"2021\"\n";
    f.file("Cargo.toml", workspace_manifest)
        .file(
            "app/Cargo.toml",
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\ntempdir = \"0.3.7\"\n",
        )
        .file("app/src/lib.rs", "pub fn app() -> &'static str { tempdir::dir() }\n")
        .file("patches/tempdir/Cargo.toml", manifest)
        .file(
            "patches/tempdir/src/lib.rs",
            "pub fn dir() -> &'static str { \"built\" }\n",
        )
        .file("deep/d/.keep", "")
        .file("deep/patches/tempdir/Cargo.toml", manifest)
        .file(
            "deep/patches/tempdir/src/lib.rs",
            "pub fn dir() -> &'static str { \"decoy\" }\n",
        );
    std::os::unix::fs::symlink("deep/d", f.join("link")).unwrap();
    f
}
