#!/usr/bin/env bash
# Usage: install_cutensor.sh VERSION DIR
#
# Installs the single-GPU cuTENSOR shared library, and nothing else, into
# DIR/lib: only lib/libcutensor.so* from NVIDIA's redistributable. Static
# archives and the multi-GPU/MPI providers (libcutensorMg*) are left out here,
# before any cache publication, so they never cost cache quota or transfer.
#
# DIR may already hold a tree restored from the cache; it is kept only when it
# passes the same verification as a fresh install (libcutensor.so.2 exists, is
# non-empty and its symlink chain resolves inside DIR, and nothing but
# libcutensor.so* is present). Otherwise it is rebuilt from the download.
#
# Environment:
#   CUTENSOR_CUDA_MAJOR  CUDA major whose build to take from lib/<major>/ (default 12)
#   CI_VENDOR_DIR        use CI_VENDOR_DIR/libcutensor/ (an unpacked archive) instead
#                        of downloading; for tests and air-gapped runners
set -euo pipefail
SCRIPT_NAME=install_cutensor
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/common.sh"

[[ $# -eq 2 ]] || die "usage: install_cutensor.sh VERSION DIR"
VERSION=$1
DIR=$2
require_version "$VERSION"
require_target_dir "$DIR"
CUDA_MAJOR=${CUTENSOR_CUDA_MAJOR:-12}
[[ "$CUDA_MAJOR" =~ ^[0-9]+$ ]] || die "CUTENSOR_CUDA_MAJOR '$CUDA_MAJOR' must be a number"

# The one replaceable download: puts the unpacked redistributable in $1.
fetch_cutensor() {
    local dest=$1
    if [[ -n "${CI_VENDOR_DIR:-}" ]]; then
        copy_vendor_dir libcutensor "$dest"
        return
    fi
    download_unpack "https://developer.download.nvidia.com/compute/cutensor/redist/libcutensor/linux-x86_64/libcutensor-linux-x86_64-${VERSION}-archive.tar.xz" "$dest"
}

# verify_tree TREE: the installed tree is exactly the shared cuTENSOR ABI.
verify_tree() {
    local tree=$1 entry name ok=0
    if [[ ! -d "$tree/lib" ]]; then
        log "$tree/lib is missing"
        return 1
    fi
    resolves_inside "$tree/lib/libcutensor.so.2" "$tree" || ok=1
    # Dotfiles too (`.[!.]*`, `..?*`): "nothing else" means nothing hidden either.
    for entry in "$tree"/* "$tree"/.[!.]* "$tree"/..?* "$tree"/lib/* "$tree"/lib/.[!.]* "$tree"/lib/..?*; do
        [[ -e "$entry" || -L "$entry" ]] || continue
        name=${entry#"$tree"/}
        case "$name" in
            lib) ;;
            # Every link of the chain, not only the soname, must stay inside:
            # the linker opens libcutensor.so, the loader libcutensor.so.2.
            lib/libcutensor.so | lib/libcutensor.so.*)
                resolves_inside "$entry" "$tree" || ok=1
                ;;
            *)
                log "$tree holds $name, which is not part of the shared cuTENSOR library"
                ok=1
                ;;
        esac
    done
    return "$ok"
}

if [[ -e "$DIR" ]]; then
    if verify_tree "$DIR"; then
        log "cuTENSOR $VERSION at $DIR verified; using it"
        exit 0
    fi
    log "cuTENSOR at $DIR failed verification; rebuilding it"
fi

make_staging "$DIR"
unpacked="$STAGING/unpacked"
mkdir -p -- "$unpacked" "$STAGING/tree/lib"
fetch_cutensor "$unpacked"

source_lib="$unpacked/lib"
if [[ -d "$unpacked/lib/$CUDA_MAJOR" ]]; then
    source_lib="$unpacked/lib/$CUDA_MAJOR"
fi
shopt -s nullglob
libs=("$source_lib"/libcutensor.so*)
shopt -u nullglob
[[ ${#libs[@]} -gt 0 ]] || die "the cuTENSOR $VERSION archive has no libcutensor.so* under ${source_lib#"$unpacked"/}"
# -P keeps the symlink chain as links, so the tree holds one copy of the library.
cp -P -- "${libs[@]}" "$STAGING/tree/lib/"

verify_tree "$STAGING/tree" || die "the freshly installed cuTENSOR $VERSION failed verification (see above)"
replace_dir "$STAGING/tree" "$DIR"
log "installed cuTENSOR $VERSION into $DIR: $(cd "$DIR/lib" && echo libcutensor.so*)"
