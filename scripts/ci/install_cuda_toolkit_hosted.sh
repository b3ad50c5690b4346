#!/usr/bin/env bash
# Usage: install_cuda_toolkit_hosted.sh VERSION DIR
#
# Installs the relocatable CUDA toolkit tree (nvcc, headers, libraries) for
# CUDA VERSION (full version, such as 12.8.1) into DIR on a hosted runner,
# from NVIDIA's redistributables. Publisher and readers use the same absolute
# DIR, so a restored tree is byte-for-byte where the publisher built it.
#
# A tree, restored or new, is used or published only after its own nvcc has
# compiled a small kernel to PTX: a cache-hit message alone is not evidence
# that the tree works. A restored tree that fails is rebuilt; a fresh tree
# that fails is an error.
#
# Environment:
#   CI_VENDOR_DIR  use CI_VENDOR_DIR/<component>/ (unpacked archives, such as
#                  CI_VENDOR_DIR/cuda_nvcc/) instead of downloading; for tests
#                  and air-gapped runners
set -euo pipefail
SCRIPT_NAME=install_cuda_toolkit_hosted
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/common.sh"

[[ $# -eq 2 ]] || die "usage: install_cuda_toolkit_hosted.sh VERSION DIR"
VERSION=$1
DIR=$2
require_version "$VERSION"
require_target_dir "$DIR"

# The redistributable components of a relocatable nvcc tree. CUDA 13 split
# the front end's headers (cuda_crt) and NVVM (libnvvm) out of cuda_nvcc.
COMPONENTS=(cuda_nvcc cuda_cudart cuda_cccl cuda_crt libnvvm)
OPTIONAL_COMPONENTS=(cuda_crt libnvvm)

# compiles_ptx TREE: TREE/bin/nvcc turns a small kernel into PTX that
# defines the kernel. An nvcc that exits 0 without writing it fails too.
compiles_ptx() {
    local tree=$1 work status=0
    if [[ ! -x "$tree/bin/nvcc" ]]; then
        log "$tree/bin/nvcc is missing or not executable"
        return 1
    fi
    work=$(mktemp -d)
    cat >"$work/probe.cu" <<'KERNEL'
extern "C" __global__ void ci_probe(float *out) {
    out[threadIdx.x] = 2.0f * static_cast<float>(threadIdx.x);
}
KERNEL
    if ! "$tree/bin/nvcc" --ptx -o "$work/probe.ptx" "$work/probe.cu" >"$work/log" 2>&1; then
        log "$tree/bin/nvcc --ptx failed:"
        sed 's/^/    /' "$work/log" >&2
        status=1
    elif ! grep -q '\.entry[[:space:]]\+ci_probe' "$work/probe.ptx" 2>/dev/null; then
        log "$tree/bin/nvcc --ptx exited 0 but wrote no PTX entry for the probe kernel"
        status=1
    fi
    rm -rf -- "$work"
    return "$status"
}

if [[ -e "$DIR" ]]; then
    if compiles_ptx "$DIR"; then
        log "CUDA $VERSION toolkit at $DIR compiled the PTX probe; using it"
        exit 0
    fi
    log "CUDA toolkit at $DIR failed the PTX probe; rebuilding it"
fi

make_staging "$DIR"
mkdir -p -- "$STAGING/tree"
for component in "${COMPONENTS[@]}"; do
    status=0
    fetch_component "$component" "$STAGING/tree" || status=$?
    if [[ $status -eq 3 ]]; then
        is_optional "$component" || die "CUDA $VERSION does not ship $component"
        log "CUDA $VERSION has no $component; skipping it"
        continue
    fi
    [[ $status -eq 0 ]] || die "fetching $component failed"
done

compiles_ptx "$STAGING/tree" || die "the freshly installed CUDA $VERSION toolkit cannot compile PTX (see above)"
replace_dir "$STAGING/tree" "$DIR"
log "installed the CUDA $VERSION toolkit into $DIR"
