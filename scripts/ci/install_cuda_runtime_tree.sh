#!/usr/bin/env bash
# Usage: install_cuda_runtime_tree.sh VERSION DIR
#
# Installs a CUDA runtime tree for the GPU pod into DIR/lib: the shared
# libraries of the runtime, cuBLAS, cuFFT, cuSOLVER, cuSPARSE, NVRTC (and
# nvJitLink, which cuSPARSE and cuSOLVER load) from NVIDIA's redistributables
# for CUDA VERSION (full version, such as 12.8.1). No compiler, no headers, no
# static archives: the pod runs prebuilt tests, it builds nothing.
#
# A completed tree carries DIR/.ci-runtime-tree-complete, written last. A tree
# restored from the cache is used only when that marker names VERSION and every
# required library resolves to a non-empty file inside DIR; a tree missing one
# (an older cache namespace without cuFFT, say) is rejected and rebuilt.
#
# Environment:
#   CI_VENDOR_DIR  use CI_VENDOR_DIR/<component>/ (unpacked archives, such as
#                  CI_VENDOR_DIR/libcufft/) instead of downloading; for tests
#                  and air-gapped runners
set -euo pipefail
SCRIPT_NAME=install_cuda_runtime_tree
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/common.sh"

[[ $# -eq 2 ]] || die "usage: install_cuda_runtime_tree.sh VERSION DIR"
VERSION=$1
DIR=$2
require_version "$VERSION"
require_target_dir "$DIR"

MARKER=.ci-runtime-tree-complete
# The redistributable components the tree is assembled from.
COMPONENTS=(cuda_cudart libcublas libcufft libcusolver libcusparse cuda_nvrtc libnvjitlink)
# Components that older CUDA versions do not ship; their absence is not an error.
OPTIONAL_COMPONENTS=(libnvjitlink)
# Libraries the pod's tests load: each lib<name>.so.<N> must resolve.
REQUIRED_LIBS=(cudart cublas cublasLt cufft cusolver cusparse nvrtc)

# verify_tree TREE [--no-marker]: every required library resolves inside the
# tree, nothing but shared libraries is there, and (unless --no-marker, for a
# tree still being assembled) the completion marker names VERSION.
verify_tree() {
    local tree=$1 check_marker=${2:-} ok=0 lib entry found
    if [[ "$check_marker" != --no-marker ]]; then
        if [[ ! -f "$tree/$MARKER" ]]; then
            log "$tree has no completion marker $MARKER: an interrupted or foreign tree"
            return 1
        fi
        if ! grep -qx "version=$VERSION" "$tree/$MARKER"; then
            log "$tree/$MARKER is for another CUDA version than $VERSION"
            return 1
        fi
    fi
    for lib in "${REQUIRED_LIBS[@]}"; do
        found=
        for entry in "$tree/lib/lib$lib.so."[0-9]*; do
            [[ -e "$entry" || -L "$entry" ]] || continue
            resolves_inside "$entry" "$tree" || ok=1
            found=1
        done
        if [[ -z "$found" ]]; then
            log "$tree/lib has no lib$lib.so.<N>: the tree lacks a required library"
            ok=1
        fi
    done
    while IFS= read -r -d '' entry; do
        case "${entry#"$tree"/}" in
            "$MARKER" | lib) ;;
            # Every library, required or not, must resolve inside the tree:
            # the loader follows any of them.
            lib/*.so | lib/*.so.*)
                resolves_inside "$entry" "$tree" || ok=1
                ;;
            *)
                log "$tree holds ${entry#"$tree"/}, which does not belong in a runtime tree"
                ok=1
                ;;
        esac
    done < <(find "$tree" -mindepth 1 -print0)
    return "$ok"
}

if [[ -e "$DIR" ]]; then
    if verify_tree "$DIR"; then
        log "CUDA $VERSION runtime tree at $DIR verified; using it"
        exit 0
    fi
    log "CUDA runtime tree at $DIR rejected; rebuilding it"
fi

make_staging "$DIR"
mkdir -p -- "$STAGING/tree/lib"
for component in "${COMPONENTS[@]}"; do
    unpacked="$STAGING/unpacked/$component"
    mkdir -p -- "$unpacked"
    status=0
    fetch_component "$component" "$unpacked" || status=$?
    if [[ $status -eq 3 ]]; then
        is_optional "$component" || die "CUDA $VERSION does not ship $component"
        log "CUDA $VERSION has no $component; skipping it"
        continue
    fi
    [[ $status -eq 0 ]] || die "fetching $component failed"
    # Only shared objects: static archives, stubs and the compiler stay out.
    find "$unpacked/lib" -maxdepth 1 \( -type f -o -type l \) -name '*.so*' \
        -exec cp -P -- {} "$STAGING/tree/lib/" \;
done

verify_tree "$STAGING/tree" --no-marker \
    || die "the freshly assembled CUDA $VERSION runtime tree failed verification (see above)"
# The marker is written last: its presence means every step above finished.
printf 'version=%s\ncomponents=%s\n' "$VERSION" "${COMPONENTS[*]}" >"$STAGING/tree/$MARKER"
replace_dir "$STAGING/tree" "$DIR"
log "installed the CUDA $VERSION runtime tree into $DIR"
