//! The installers in `scripts/ci/`, run with bash on fake vendor trees.
//!
//! Vendor downloads cannot happen here, so each test points `CI_VENDOR_DIR`
//! at an unpacked fake redistributable (the scripts' one replaceable
//! download) and exercises everything else for real: the selection of files,
//! symlink chains, completion markers, rejection of restored trees and the
//! PTX probe run by a fake `nvcc` that reads the kernel it is given.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::{Fixture, has_tool, stderr};

/// The repository root at run time. nextest sets `CARGO_MANIFEST_DIR` when it
/// runs an archive elsewhere (remapped), so prefer it over the compile-time path.
fn repo_root() -> PathBuf {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest_dir.parent().unwrap().to_path_buf()
}

/// Runs `bash scripts/ci/<script> ARGS` with `CI_VENDOR_DIR=vendor`.
fn run_script(script: &str, args: &[&Path], vendor: &Path) -> Output {
    let mut cmd = Command::new("bash");
    cmd.arg(repo_root().join("scripts/ci").join(script));
    cmd.args(args);
    cmd.env("CI_VENDOR_DIR", vendor);
    cmd.env_remove("GITHUB_ACTIONS");
    cmd.env_remove("CUTENSOR_CUDA_MAJOR");
    cmd.output().expect("run bash")
}

fn assert_success(output: &Output) {
    assert!(output.status.success(), "script failed: {}", stderr(output));
}

fn assert_failure(output: &Output, needle: &str) {
    let text = stderr(output);
    assert!(!output.status.success(), "script succeeded: {text}");
    assert!(text.contains(needle), "expected {needle:?} in: {text}");
}

fn link(fixture: &Fixture, rel: &str, target: &str) {
    let path = fixture.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    symlink(target, path).unwrap();
}

fn executable(fixture: &Fixture, rel: &str, contents: &str) {
    crate::support::write_executable(&fixture.join(rel), contents);
}

/// Names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|err| panic!("read {}: {err}", dir.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

// cuTENSOR

/// An unpacked cuTENSOR redistributable as NVIDIA ships it: the shared
/// library chain for CUDA 12 next to what must not be installed.
fn fake_cutensor_archive(fixture: &Fixture) {
    let lib = "vendor/libcutensor/lib/12";
    fixture.file(&format!("{lib}/libcutensor.so.2.2.0"), "ELF cutensor");
    link(
        fixture,
        &format!("{lib}/libcutensor.so.2"),
        "libcutensor.so.2.2.0",
    );
    link(
        fixture,
        &format!("{lib}/libcutensor.so"),
        "libcutensor.so.2",
    );
    fixture.file(&format!("{lib}/libcutensor_static.a"), "static");
    fixture.file(&format!("{lib}/libcutensorMg.so.2.2.0"), "ELF mg");
    link(
        fixture,
        &format!("{lib}/libcutensorMg.so.2"),
        "libcutensorMg.so.2.2.0",
    );
    fixture.file(&format!("{lib}/libcutensorMg_static.a"), "static mg");
    fixture.file("vendor/libcutensor/lib/11/libcutensor.so.2", "ELF cuda 11");
    fixture.file("vendor/libcutensor/include/cutensor.h", "header");
    fixture.file("vendor/libcutensor/LICENSE", "license");
}

fn install_cutensor(fixture: &Fixture) -> Output {
    run_script(
        "install_cutensor.sh",
        &[Path::new("2.2.0"), &fixture.join("opt/cutensor")],
        &fixture.join("vendor"),
    )
}

#[test]
fn cutensor_installs_only_the_shared_library_chain() {
    let fixture = Fixture::new();
    fake_cutensor_archive(&fixture);
    let output = install_cutensor(&fixture);
    assert_success(&output);
    let dir = fixture.join("opt/cutensor");
    assert_eq!(listing(&dir), ["lib"]);
    assert_eq!(
        listing(&dir.join("lib")),
        ["libcutensor.so", "libcutensor.so.2", "libcutensor.so.2.2.0"]
    );
    // The chain stays a chain: one copy of the library, not three.
    assert_eq!(
        std::fs::read_link(dir.join("lib/libcutensor.so.2")).unwrap(),
        Path::new("libcutensor.so.2.2.0")
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("lib/libcutensor.so")).unwrap(),
        "ELF cutensor"
    );
    // No staging directory is left beside the tree.
    assert_eq!(listing(&fixture.join("opt")), ["cutensor"]);
}

#[test]
fn cutensor_fails_when_the_library_is_empty() {
    let fixture = Fixture::new();
    fake_cutensor_archive(&fixture);
    fixture.file("vendor/libcutensor/lib/12/libcutensor.so.2.2.0", "");
    let output = install_cutensor(&fixture);
    assert_failure(&output, "which is empty");
    assert!(!fixture.join("opt/cutensor").exists());
}

#[test]
fn cutensor_fails_when_the_chain_is_broken() {
    let fixture = Fixture::new();
    fake_cutensor_archive(&fixture);
    fixture.remove("vendor/libcutensor/lib/12/libcutensor.so.2.2.0");
    assert_failure(
        &install_cutensor(&fixture),
        "broken or looping symlink chain",
    );
}

#[test]
fn cutensor_fails_when_the_chain_loops() {
    let fixture = Fixture::new();
    fake_cutensor_archive(&fixture);
    let lib = "vendor/libcutensor/lib/12";
    fixture.remove(&format!("{lib}/libcutensor.so.2.2.0"));
    link(
        &fixture,
        &format!("{lib}/libcutensor.so.2.2.0"),
        "libcutensor.so.2",
    );
    assert_failure(
        &install_cutensor(&fixture),
        "broken or looping symlink chain",
    );
}

#[test]
fn cutensor_fails_without_the_soname() {
    let fixture = Fixture::new();
    fake_cutensor_archive(&fixture);
    let lib = "vendor/libcutensor/lib/12";
    fixture.remove(&format!("{lib}/libcutensor.so.2"));
    fixture.remove(&format!("{lib}/libcutensor.so"));
    link(
        &fixture,
        &format!("{lib}/libcutensor.so"),
        "libcutensor.so.2.2.0",
    );
    assert_failure(
        &install_cutensor(&fixture),
        "libcutensor.so.2 does not exist",
    );
}

#[test]
fn cutensor_reuses_a_verified_restored_tree_without_downloading() {
    let fixture = Fixture::new();
    fixture.file("opt/cutensor/lib/libcutensor.so.2.2.0", "ELF restored");
    link(
        &fixture,
        "opt/cutensor/lib/libcutensor.so.2",
        "libcutensor.so.2.2.0",
    );
    // No vendor directory: a download attempt would fail the test.
    let output = install_cutensor(&fixture);
    assert_success(&output);
    assert!(stderr(&output).contains("verified; using it"));
    assert_eq!(
        std::fs::read_to_string(fixture.join("opt/cutensor/lib/libcutensor.so.2")).unwrap(),
        "ELF restored"
    );
}

#[test]
fn cutensor_rebuilds_a_restored_tree_with_multi_gpu_or_static_libraries() {
    for extra in [
        "lib/libcutensorMg.so.2",
        "lib/libcutensor_static.a",
        "include/cutensor.h",
    ] {
        let fixture = Fixture::new();
        fake_cutensor_archive(&fixture);
        fixture.file("opt/cutensor/lib/libcutensor.so.2", "ELF restored");
        fixture.file(&format!("opt/cutensor/{extra}"), "extra");
        let output = install_cutensor(&fixture);
        assert_success(&output);
        let text = stderr(&output);
        // Entries outside lib/ are reported by their top-level directory.
        let reported = if extra.starts_with("lib/") {
            extra
        } else {
            "include"
        };
        assert!(text.contains(&format!("holds {reported},")), "{text}");
        assert!(text.contains("rebuilding"), "{text}");
        assert!(!fixture.join("opt/cutensor").join(extra).exists());
        assert_eq!(
            std::fs::read_to_string(fixture.join("opt/cutensor/lib/libcutensor.so.2")).unwrap(),
            "ELF cutensor"
        );
    }
}

#[test]
fn cutensor_rebuilds_a_restored_chain_that_escapes_the_tree() {
    let fixture = Fixture::new();
    fake_cutensor_archive(&fixture);
    fixture.file("elsewhere/libcutensor.so.2.2.0", "ELF planted");
    let outside = fixture.join("elsewhere/libcutensor.so.2.2.0");
    link(
        &fixture,
        "opt/cutensor/lib/libcutensor.so.2",
        outside.to_str().unwrap(),
    );
    let output = install_cutensor(&fixture);
    assert_success(&output);
    assert!(stderr(&output).contains("outside"), "{}", stderr(&output));
    assert_eq!(
        std::fs::read_to_string(fixture.join("opt/cutensor/lib/libcutensor.so.2")).unwrap(),
        "ELF cutensor"
    );
}

#[test]
fn cutensor_rebuilds_a_restored_tree_whose_other_links_escape_or_hide() {
    // The soname chain is fine; the linker's `libcutensor.so` points outside,
    // or a hidden file rides along. Both are rejected, not only the soname.
    for planted in ["escaping dev link", "hidden file"] {
        let fixture = Fixture::new();
        fake_cutensor_archive(&fixture);
        fixture.file("opt/cutensor/lib/libcutensor.so.2.2.0", "ELF restored");
        link(
            &fixture,
            "opt/cutensor/lib/libcutensor.so.2",
            "libcutensor.so.2.2.0",
        );
        let needle = if planted == "hidden file" {
            fixture.file("opt/cutensor/lib/.preload", "planted");
            "holds lib/.preload,"
        } else {
            fixture.file("elsewhere/libcutensor.so", "ELF planted");
            let outside = fixture.join("elsewhere/libcutensor.so");
            link(
                &fixture,
                "opt/cutensor/lib/libcutensor.so",
                outside.to_str().unwrap(),
            );
            "outside"
        };
        let output = install_cutensor(&fixture);
        assert_success(&output);
        let text = stderr(&output);
        assert!(text.contains(needle), "{planted}: {text}");
        assert!(text.contains("rebuilding"), "{planted}: {text}");
        assert_eq!(
            std::fs::read_to_string(fixture.join("opt/cutensor/lib/libcutensor.so")).unwrap(),
            "ELF cutensor",
            "{planted}"
        );
        assert!(!fixture.join("opt/cutensor/lib/.preload").exists());
    }
}

#[test]
fn installers_refuse_bad_arguments() {
    let fixture = Fixture::new();
    let vendor = fixture.join("vendor");
    for script in [
        "install_cutensor.sh",
        "install_cuda_runtime_tree.sh",
        "install_cuda_toolkit_hosted.sh",
    ] {
        let output = run_script(
            script,
            &[Path::new("12.8"), Path::new("relative/dir")],
            &vendor,
        );
        assert_failure(&output, "must be an absolute path");
        let output = run_script(script, &[Path::new("12.8;rm"), &fixture.join("x")], &vendor);
        assert_failure(&output, "must be dotted digits");
        let output = run_script(script, &[Path::new("12.8")], &vendor);
        assert_failure(&output, "usage:");
    }
}

// CUDA runtime tree

const RUNTIME_COMPONENTS: &[(&str, &[&str])] = &[
    ("cuda_cudart", &["cudart"]),
    ("libcublas", &["cublas", "cublasLt"]),
    ("libcufft", &["cufft", "cufftw"]),
    ("libcusolver", &["cusolver"]),
    ("libcusparse", &["cusparse"]),
    ("cuda_nvrtc", &["nvrtc", "nvrtc-builtins"]),
    ("libnvjitlink", &["nvJitLink"]),
];

/// Unpacked CUDA redistributables: each shared library as a soname chain,
/// with the static archives, stubs and headers the tree must leave out.
fn fake_runtime_component(fixture: &Fixture, component: &str, libs: &[&str]) {
    let root = format!("vendor/{component}");
    for lib in libs {
        fixture.file(
            &format!("{root}/lib/lib{lib}.so.12.8.1"),
            &format!("ELF {lib}"),
        );
        link(
            fixture,
            &format!("{root}/lib/lib{lib}.so.12"),
            &format!("lib{lib}.so.12.8.1"),
        );
        link(
            fixture,
            &format!("{root}/lib/lib{lib}.so"),
            &format!("lib{lib}.so.12"),
        );
        fixture.file(&format!("{root}/lib/lib{lib}_static.a"), "static");
        fixture.file(&format!("{root}/lib/stubs/lib{lib}.so"), "stub");
    }
    fixture.file(&format!("{root}/include/{component}.h"), "header");
}

fn fake_runtime_archives(fixture: &Fixture) {
    for (component, libs) in RUNTIME_COMPONENTS {
        fake_runtime_component(fixture, component, libs);
    }
}

fn install_runtime(fixture: &Fixture) -> Output {
    run_script(
        "install_cuda_runtime_tree.sh",
        &[Path::new("12.8.1"), &fixture.join("opt/cuda-runtime")],
        &fixture.join("vendor"),
    )
}

/// A restored tree as an earlier publisher left it, with `libs` only.
fn restored_runtime_tree(fixture: &Fixture, libs: &[&str], marker: Option<&str>) {
    for lib in libs {
        fixture.file(
            &format!("opt/cuda-runtime/lib/lib{lib}.so.12"),
            "ELF restored",
        );
    }
    if let Some(marker) = marker {
        fixture.file("opt/cuda-runtime/.ci-runtime-tree-complete", marker);
    }
}

const ALL_REQUIRED: &[&str] = &[
    "cudart", "cublas", "cublasLt", "cufft", "cusolver", "cusparse", "nvrtc",
];

#[test]
fn runtime_tree_holds_shared_libraries_and_a_marker() {
    let fixture = Fixture::new();
    fake_runtime_archives(&fixture);
    let output = install_runtime(&fixture);
    assert_success(&output);
    let dir = fixture.join("opt/cuda-runtime");
    assert_eq!(listing(&dir), [".ci-runtime-tree-complete", "lib"]);
    let libs = listing(&dir.join("lib"));
    assert!(libs.contains(&"libcufft.so.12".to_owned()), "{libs:?}");
    assert!(
        libs.contains(&"libnvJitLink.so.12.8.1".to_owned()),
        "{libs:?}"
    );
    assert!(
        libs.iter().all(|name| name.contains(".so")),
        "non-shared files in the tree: {libs:?}"
    );
    let marker = std::fs::read_to_string(dir.join(".ci-runtime-tree-complete")).unwrap();
    assert!(marker.starts_with("version=12.8.1\n"), "{marker}");
}

#[test]
fn runtime_tree_fails_when_a_component_lacks_its_library() {
    let fixture = Fixture::new();
    fake_runtime_archives(&fixture);
    // A cuFFT archive with only its static library.
    for name in ["libcufft.so", "libcufft.so.12", "libcufft.so.12.8.1"] {
        fixture.remove(&format!("vendor/libcufft/lib/{name}"));
    }
    let output = install_runtime(&fixture);
    assert_failure(&output, "has no libcufft.so.<N>");
    assert!(!fixture.join("opt/cuda-runtime").exists());
}

#[test]
fn runtime_tree_fails_when_a_required_component_is_missing() {
    let fixture = Fixture::new();
    fake_runtime_archives(&fixture);
    std::fs::remove_dir_all(fixture.join("vendor/libcusolver")).unwrap();
    assert_failure(&install_runtime(&fixture), "no libcusolver/");
}

#[test]
fn runtime_tree_skips_an_optional_component_the_version_lacks() {
    let fixture = Fixture::new();
    fake_runtime_archives(&fixture);
    std::fs::remove_dir_all(fixture.join("vendor/libnvjitlink")).unwrap();
    let output = install_runtime(&fixture);
    assert_success(&output);
    assert!(stderr(&output).contains("has no libnvjitlink; skipping it"));
}

#[test]
fn runtime_tree_rejects_and_rebuilds_a_restored_tree_missing_cufft() {
    let fixture = Fixture::new();
    fake_runtime_archives(&fixture);
    let without_cufft: Vec<&str> = ALL_REQUIRED
        .iter()
        .copied()
        .filter(|l| *l != "cufft")
        .collect();
    restored_runtime_tree(&fixture, &without_cufft, Some("version=12.8.1\n"));
    let output = install_runtime(&fixture);
    assert_success(&output);
    let text = stderr(&output);
    assert!(text.contains("has no libcufft.so.<N>"), "{text}");
    assert!(text.contains("rejected; rebuilding"), "{text}");
    assert_eq!(
        std::fs::read_to_string(fixture.join("opt/cuda-runtime/lib/libcufft.so.12")).unwrap(),
        "ELF cufft"
    );
}

#[test]
fn runtime_tree_rebuilds_a_restored_tree_with_a_library_link_that_escapes() {
    let fixture = Fixture::new();
    fake_runtime_archives(&fixture);
    restored_runtime_tree(&fixture, ALL_REQUIRED, Some("version=12.8.1\n"));
    // Not a required soname, but the loader follows it all the same.
    fixture.file("elsewhere/libcufft.so", "ELF planted");
    let outside = fixture.join("elsewhere/libcufft.so");
    link(
        &fixture,
        "opt/cuda-runtime/lib/libcufft.so",
        outside.to_str().unwrap(),
    );
    let output = install_runtime(&fixture);
    assert_success(&output);
    let text = stderr(&output);
    assert!(text.contains("outside"), "{text}");
    assert!(text.contains("rejected; rebuilding"), "{text}");
    assert_eq!(
        std::fs::read_to_string(fixture.join("opt/cuda-runtime/lib/libcufft.so")).unwrap(),
        "ELF cufft"
    );
}

#[test]
fn runtime_tree_rebuilds_a_restored_tree_without_marker_or_for_another_version() {
    for marker in [None, Some("version=12.6.3\n")] {
        let fixture = Fixture::new();
        fake_runtime_archives(&fixture);
        restored_runtime_tree(&fixture, ALL_REQUIRED, marker);
        let output = install_runtime(&fixture);
        assert_success(&output);
        let expected = match marker {
            None => "no completion marker",
            Some(_) => "another CUDA version",
        };
        assert!(stderr(&output).contains(expected), "{}", stderr(&output));
        assert_eq!(
            std::fs::read_to_string(fixture.join("opt/cuda-runtime/lib/libcudart.so.12")).unwrap(),
            "ELF cudart"
        );
    }
}

#[test]
fn runtime_tree_rebuilds_a_restored_tree_with_a_compiler_or_static_archive() {
    for extra in ["bin/nvcc", "lib/libcufft_static.a"] {
        let fixture = Fixture::new();
        fake_runtime_archives(&fixture);
        restored_runtime_tree(&fixture, ALL_REQUIRED, Some("version=12.8.1\n"));
        fixture.file(&format!("opt/cuda-runtime/{extra}"), "extra");
        let output = install_runtime(&fixture);
        assert_success(&output);
        assert!(stderr(&output).contains("does not belong in a runtime tree"));
        assert!(!fixture.join("opt/cuda-runtime").join(extra).exists());
    }
}

#[test]
fn runtime_tree_reuses_a_complete_restored_tree_without_downloading() {
    let fixture = Fixture::new();
    restored_runtime_tree(
        &fixture,
        ALL_REQUIRED,
        Some("version=12.8.1\ncomponents=x\n"),
    );
    let output = install_runtime(&fixture);
    assert_success(&output);
    assert!(stderr(&output).contains("verified; using it"));
}

// Hosted CUDA toolkit

/// A fake nvcc that behaves like the real one for `--ptx -o OUT IN`: it
/// reads the kernel's name from the source and writes a PTX entry for it.
const WORKING_NVCC: &str = r#"#!/usr/bin/env bash
set -eu
out= src=
while [ $# -gt 0 ]; do
    case "$1" in
        -o) out=$2; shift 2 ;;
        --ptx) shift ;;
        *) src=$1; shift ;;
    esac
done
name=$(sed -n 's/.*__global__ void \([A-Za-z_0-9]*\).*/\1/p' "$src")
[ -n "$name" ] || { echo "no kernel in $src" >&2; exit 2; }
printf '.version 8.7\n.target sm_52\n.visible .entry %s(\n)\n{\n}\n' "$name" > "$out"
"#;

const FAILING_NVCC: &str =
    "#!/usr/bin/env bash\necho 'nvcc fatal : cannot find libdevice' >&2\nexit 1\n";

/// Exits 0 and says it compiled, but writes nothing: a hit message, no PTX.
const SILENT_NVCC: &str = "#!/usr/bin/env bash\necho 'compiled'\nexit 0\n";

fn fake_toolkit_archives(fixture: &Fixture, nvcc: &str) {
    executable(fixture, "vendor/cuda_nvcc/bin/nvcc", nvcc);
    fixture.file("vendor/cuda_nvcc/nvvm/libdevice/libdevice.10.bc", "bc");
    fixture.file("vendor/cuda_cudart/include/cuda_runtime.h", "header");
    fixture.file("vendor/cuda_cudart/lib/libcudart.so.12", "ELF cudart");
    fixture.file("vendor/cuda_cccl/include/cuda/std/version", "header");
}

fn install_toolkit(fixture: &Fixture) -> Output {
    run_script(
        "install_cuda_toolkit_hosted.sh",
        &[
            Path::new("12.8.1"),
            &fixture.join("opt/cuda-toolkit-12.8.1"),
        ],
        &fixture.join("vendor"),
    )
}

#[test]
fn toolkit_installs_when_its_nvcc_compiles_the_probe() {
    let fixture = Fixture::new();
    fake_toolkit_archives(&fixture, WORKING_NVCC);
    let output = install_toolkit(&fixture);
    assert_success(&output);
    let dir = fixture.join("opt/cuda-toolkit-12.8.1");
    assert_eq!(listing(&dir), ["bin", "include", "lib", "nvvm"]);
    assert!(
        stderr(&output).contains("skipping"),
        "optional components absent"
    );
}

#[test]
fn toolkit_fails_when_its_nvcc_fails() {
    let fixture = Fixture::new();
    fake_toolkit_archives(&fixture, FAILING_NVCC);
    let output = install_toolkit(&fixture);
    assert_failure(&output, "cannot find libdevice");
    assert_failure(&output, "cannot compile PTX");
    assert!(!fixture.join("opt/cuda-toolkit-12.8.1").exists());
}

#[test]
fn toolkit_fails_when_nvcc_claims_success_without_ptx() {
    let fixture = Fixture::new();
    fake_toolkit_archives(&fixture, SILENT_NVCC);
    assert_failure(&install_toolkit(&fixture), "wrote no PTX entry");
}

#[test]
fn toolkit_fails_without_nvcc() {
    let fixture = Fixture::new();
    fake_toolkit_archives(&fixture, WORKING_NVCC);
    fixture.remove("vendor/cuda_nvcc/bin/nvcc");
    assert_failure(&install_toolkit(&fixture), "bin/nvcc is missing");
}

#[test]
fn toolkit_rebuilds_a_restored_tree_whose_nvcc_fails() {
    let fixture = Fixture::new();
    fake_toolkit_archives(&fixture, WORKING_NVCC);
    executable(&fixture, "opt/cuda-toolkit-12.8.1/bin/nvcc", FAILING_NVCC);
    let output = install_toolkit(&fixture);
    assert_success(&output);
    assert!(stderr(&output).contains("failed the PTX probe; rebuilding"));
    assert_eq!(
        std::fs::read_to_string(fixture.join("opt/cuda-toolkit-12.8.1/bin/nvcc")).unwrap(),
        WORKING_NVCC
    );
}

#[test]
fn toolkit_reuses_a_restored_tree_that_compiles_without_downloading() {
    let fixture = Fixture::new();
    executable(&fixture, "opt/cuda-toolkit-12.8.1/bin/nvcc", WORKING_NVCC);
    let output = install_toolkit(&fixture);
    assert_success(&output);
    assert!(stderr(&output).contains("compiled the PTX probe; using it"));
}

// RunPod reaper

/// A RunPod and GitHub API stand-in on 127.0.0.1 that records every request.
struct MockApis {
    url: String,
    state: std::sync::Arc<std::sync::Mutex<ApiState>>,
}

#[derive(Default)]
struct ApiState {
    /// Pod id, name, and whether a DELETE fails and leaves the pod in place.
    pods: Vec<(String, String, bool)>,
    /// Run id, status and `run_started_at`.
    runs: Vec<(u64, String, String)>,
    /// `METHOD path auth` of every request, in order.
    log: Vec<String>,
}

impl MockApis {
    fn start(state: ApiState) -> MockApis {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = std::sync::Arc::new(std::sync::Mutex::new(state));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let mut stream = stream.unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request_line = String::new();
                reader.read_line(&mut request_line).unwrap();
                let mut auth = String::new();
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    let (name, value) = line.split_once(':').unwrap_or((line, ""));
                    match name.to_ascii_lowercase().as_str() {
                        "authorization" => auth = value.trim().to_owned(),
                        "content-length" => length = value.trim().parse().unwrap(),
                        _ => {}
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                let mut parts = request_line.split_whitespace();
                let method = parts.next().unwrap_or("").to_owned();
                let path = parts.next().unwrap_or("").to_owned();
                let (status, response) = shared.lock().unwrap().handle(&method, &path, &auth);
                let reply = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{response}",
                    response.len()
                );
                stream.write_all(reply.as_bytes()).unwrap();
            }
        });
        MockApis { url, state }
    }

    fn log(&self) -> Vec<String> {
        self.state.lock().unwrap().log.clone()
    }
}

impl ApiState {
    fn handle(&mut self, method: &str, path: &str, auth: &str) -> (u16, String) {
        self.log.push(format!("{method} {path} {auth}"));
        let runs_prefix = "/repos/owner/repo/actions/runs/";
        if let Some(rest) = path.strip_prefix("/v1/pods") {
            if auth != "Bearer runpod-key" {
                return (401, "{}".into());
            }
            let id = rest.trim_start_matches('/');
            if id.is_empty() && method == "GET" {
                let pods: Vec<String> = self
                    .pods
                    .iter()
                    .map(|(id, name, _)| format!(r#"{{"id":"{id}","name":"{name}"}}"#))
                    .collect();
                return (200, format!("[{}]", pods.join(",")));
            }
            let Some(index) = self.pods.iter().position(|(pod, _, _)| pod == id) else {
                return (404, "{}".into());
            };
            return match method {
                "GET" => (200, "{}".into()),
                "DELETE" if self.pods[index].2 => (500, "{}".into()),
                "DELETE" => {
                    self.pods.remove(index);
                    (204, String::new())
                }
                _ => (405, "{}".into()),
            };
        }
        if let Some(rest) = path.strip_prefix(runs_prefix) {
            if auth != "Bearer github-token" {
                return (401, "{}".into());
            }
            let (id, cancel) = match rest.strip_suffix("/cancel") {
                Some(id) => (id, true),
                None => (rest, false),
            };
            let id: u64 = id.parse().unwrap();
            let Some((_, status, started)) = self.runs.iter().find(|(run, _, _)| *run == id) else {
                return (404, "{}".into());
            };
            return match (method, cancel) {
                ("GET", false) => (
                    200,
                    format!(r#"{{"id":{id},"status":"{status}","run_started_at":"{started}"}}"#),
                ),
                ("POST", true) => (202, "{}".into()),
                _ => (405, "{}".into()),
            };
        }
        (404, "{}".into())
    }
}

/// `minutes` ago as an RFC 3339 UTC time, as GitHub writes `run_started_at`.
fn minutes_ago(minutes: u64) -> String {
    let output = Command::new("date")
        .args([
            "-u",
            "-d",
            &format!("{minutes} minutes ago"),
            "+%Y-%m-%dT%H:%M:%SZ",
        ])
        .output()
        .unwrap();
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

fn run_reaper(apis: &MockApis) -> Output {
    Command::new("bash")
        .arg(repo_root().join("scripts/ci/runpod_reap.sh"))
        .env("RUNPOD_API_KEY", "runpod-key")
        .env("RUNPOD_API_URL", format!("{}/v1", apis.url))
        .env("GITHUB_TOKEN", "github-token")
        .env("GITHUB_API_URL", &apis.url)
        .env("GITHUB_REPOSITORY", "owner/repo")
        .env("REPO_ID", "42")
        .env("MAX_POD_MINUTES", "180")
        .env("CONFIRM_ATTEMPTS", "3")
        .env("CONFIRM_INTERVAL", "0")
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("run bash")
}

/// The reaper script calls the RunPod and GitHub APIs with curl and reads
/// their answers with jq.
fn reaper_tools_available() -> bool {
    // Both probed, so that each missing tool is named.
    let curl = has_tool(
        "curl",
        "your system's package manager (`apt-get install curl`)",
    );
    let jq = has_tool(
        "jq",
        "your system's package manager (`apt-get install jq`, `brew install jq`)",
    );
    curl && jq
}

fn pod(id: &str, name: &str) -> (String, String, bool) {
    (id.to_owned(), name.to_owned(), false)
}

#[test]
fn reaper_deletes_orphans_and_cancels_expired_runs_after_deletion() {
    if !reaper_tools_available() {
        return;
    }
    let apis = MockApis::start(ApiState {
        pods: vec![
            pod("finished", "gha-42-101-1"),
            pod("expired", "gha-42-102-1"),
            pod("young", "gha-42-103-1"),
            pod("vanished", "gha-42-104-2"),
            pod("other-repo", "gha-7-105-1"),
            pod("not-ours", "my-notebook"),
        ],
        runs: vec![
            (101, "completed".into(), minutes_ago(30)),
            (102, "in_progress".into(), minutes_ago(300)),
            (103, "in_progress".into(), minutes_ago(10)),
            (105, "completed".into(), minutes_ago(30)),
        ],
        ..ApiState::default()
    });
    let output = run_reaper(&apis);
    assert_success(&output);
    let log = apis.log();
    let deleted: Vec<&String> = log.iter().filter(|l| l.starts_with("DELETE")).collect();
    assert_eq!(
        deleted,
        [
            "DELETE /v1/pods/finished Bearer runpod-key",
            "DELETE /v1/pods/expired Bearer runpod-key",
            "DELETE /v1/pods/vanished Bearer runpod-key",
        ]
    );
    let cancels: Vec<usize> = (0..log.len())
        .filter(|&i| log[i].contains("/cancel"))
        .collect();
    assert_eq!(cancels.len(), 1, "{log:#?}");
    assert!(log[cancels[0]].starts_with("POST /repos/owner/repo/actions/runs/102/cancel"));
    // The cancellation follows RunPod's 404 for the deleted pod.
    assert_eq!(
        log[cancels[0] - 1],
        "GET /v1/pods/expired Bearer runpod-key",
        "{log:#?}"
    );
    // Each API saw only its own credential.
    assert!(
        log.iter()
            .all(|l| !l.contains(" Bearer runpod-key") || l.contains(" /v1/"))
    );
    assert!(stderr(&output).contains("run 103 is 10 minutes old; keeping it"));
}

#[test]
fn reaper_never_cancels_a_run_whose_pod_survives_deletion() {
    if !reaper_tools_available() {
        return;
    }
    let apis = MockApis::start(ApiState {
        pods: vec![("stuck".into(), "gha-42-201-1".into(), true)],
        runs: vec![(201, "in_progress".into(), minutes_ago(400))],
        ..ApiState::default()
    });
    let output = run_reaper(&apis);
    assert_failure(
        &output,
        "still exists after deletion; not cancelling run 201",
    );
    assert!(apis.log().iter().all(|l| !l.contains("/cancel")));
}

#[test]
fn reaper_fails_closed_on_an_unreadable_pod_list_or_missing_credentials() {
    if !reaper_tools_available() {
        return;
    }
    let apis = MockApis::start(ApiState::default());
    let output = Command::new("bash")
        .arg(repo_root().join("scripts/ci/runpod_reap.sh"))
        .env("RUNPOD_API_KEY", "wrong-key")
        .env("RUNPOD_API_URL", format!("{}/v1", apis.url))
        .env("GITHUB_TOKEN", "github-token")
        .env("GITHUB_REPOSITORY", "owner/repo")
        .env("REPO_ID", "42")
        .output()
        .unwrap();
    assert_failure(&output, "cannot list RunPod pods");
    let output = Command::new("bash")
        .arg(repo_root().join("scripts/ci/runpod_reap.sh"))
        .env_remove("RUNPOD_API_KEY")
        .env("GITHUB_TOKEN", "github-token")
        .output()
        .unwrap();
    assert_failure(&output, "set RUNPOD_API_KEY");
}
