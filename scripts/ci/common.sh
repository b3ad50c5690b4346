# shellcheck shell=bash
# Shared helpers of the scripts in scripts/ci/. Sourced, never executed.
#
# Every installer follows the same shape: verify what is already at DIR (a
# cache restore may have put it there), rebuild it from the vendor download
# when verification fails, and verify the rebuilt tree again before anyone
# uses or publishes it. A cache-hit message is never evidence on its own.
#
# The vendor download is one function per script, named fetch_*. Tests and
# air-gapped runners replace it without editing the script: when
# CI_VENDOR_DIR is set, fetch_* copies the unpacked redistributable from
# that directory instead of downloading it (see docs/ci-system.md).

log() {
    printf '%s: %s\n' "${SCRIPT_NAME:-ci}" "$*" >&2
}

die() {
    # The runner turns this into an error annotation; elsewhere it is a plain line.
    if [[ "${GITHUB_ACTIONS:-}" == "true" ]]; then
        printf '::error title=%s::%s\n' "${SCRIPT_NAME:-ci}" "$*" >&2
    else
        printf '%s: error: %s\n' "${SCRIPT_NAME:-ci}" "$*" >&2
    fi
    exit 1
}

# require_version VERSION: versions become path and cache-key components, so
# they may hold only digits and dots (12.8, 12.8.1, 2.2.0.0).
require_version() {
    [[ "$1" =~ ^[0-9]+(\.[0-9]+)+$ ]] || die "version '$1' must be dotted digits, such as 12.8.1"
}

# require_target_dir DIR: an absolute path that is not the filesystem root,
# because the installers delete and replace it.
require_target_dir() {
    [[ "$1" == /* ]] || die "install directory '$1' must be an absolute path"
    [[ "$1" != "/" && "$1" != *"/.."* && "$1" != *"/./"* ]] || die "install directory '$1' is not a plain absolute path"
}

# resolves_inside FILE ROOT: FILE exists, its symlink chain resolves to a
# non-empty regular file, and that file lies under ROOT. A chain that is
# broken, loops, or escapes the tree (an absolute link restored from a cache)
# fails with a message saying which.
resolves_inside() {
    local file=$1 root=$2 target
    if [[ ! -e "$file" && ! -L "$file" ]]; then
        log "$file does not exist"
        return 1
    fi
    if ! target=$(readlink -f -- "$file") || [[ ! -e "$target" ]]; then
        log "$file is a broken or looping symlink chain"
        return 1
    fi
    if [[ ! -f "$target" ]]; then
        log "$file resolves to $target, which is not a regular file"
        return 1
    fi
    if [[ ! -s "$target" ]]; then
        log "$file resolves to $target, which is empty"
        return 1
    fi
    root=$(readlink -f -- "$root")
    if [[ "$target" != "$root"/* ]]; then
        log "$file resolves to $target, outside $root"
        return 1
    fi
}

# replace_dir STAGING DIR: moves a verified staging tree into place. The
# staging tree lives next to DIR, so the final rename is atomic and a reader
# never sees a half-written tree.
replace_dir() {
    local staging=$1 dir=$2
    rm -rf -- "$dir"
    mv -- "$staging" "$dir"
}

# make_staging DIR: sets STAGING to a fresh empty directory beside DIR and
# removes it when the script exits. Not for use in a command substitution:
# the trap must be set in the script's own shell.
make_staging() {
    local dir=$1
    mkdir -p -- "$(dirname -- "$dir")"
    STAGING=$(mktemp -d "${dir}.staging.XXXXXX")
    # shellcheck disable=SC2064 # expand now: the path is fixed at creation.
    trap "rm -rf -- '$STAGING'" EXIT
}

# copy_vendor_dir NAME DEST: the test and air-gap replacement for a vendor
# download. Copies $CI_VENDOR_DIR/NAME (an unpacked redistributable) to DEST.
copy_vendor_dir() {
    local name=$1 dest=$2
    [[ -d "$CI_VENDOR_DIR/$name" ]] || die "CI_VENDOR_DIR has no $name/ to install from"
    log "using the local copy $CI_VENDOR_DIR/$name instead of downloading"
    cp -a -- "$CI_VENDOR_DIR/$name/." "$dest/"
}

# download_unpack URL DEST: downloads a vendor .tar.xz and unpacks its single
# top-level directory into DEST.
download_unpack() {
    local url=$1 dest=$2
    log "downloading $url"
    curl --fail --silent --show-error --location --retry 3 --retry-all-errors "$url" \
        | tar -xJ --strip-components=1 -C "$dest"
}

# --- NVIDIA redistributables (install_cuda_runtime_tree.sh, install_cuda_toolkit_hosted.sh)
# The caller sets VERSION, STAGING and OPTIONAL_COMPONENTS (the components an
# older CUDA version may not ship) before calling fetch_component.

REDIST_URL=https://developer.download.nvidia.com/compute/cuda/redist

is_optional() {
    local name
    for name in "${OPTIONAL_COMPONENTS[@]}"; do
        [[ "$name" == "$1" ]] && return 0
    done
    return 1
}

# The one replaceable download: puts component $1, unpacked, in $2. Returns 3
# when VERSION does not ship that component, 1 on any other failure. It runs
# in an `||` context, where errexit is off, so every step checks its status.
fetch_component() {
    local name=$1 dest=$2 manifest="$STAGING/redistrib.json" path sha
    if [[ -n "${CI_VENDOR_DIR:-}" ]]; then
        if [[ ! -d "$CI_VENDOR_DIR/$name" ]] && is_optional "$name"; then
            return 3
        fi
        copy_vendor_dir "$name" "$dest"
        return
    fi
    if [[ ! -s "$manifest" ]]; then
        curl --fail --silent --show-error --location --retry 3 \
            -o "$manifest" "$REDIST_URL/redistrib_${VERSION}.json" || return 1
    fi
    path=$(jq -r --arg c "$name" '.[$c]["linux-x86_64"].relative_path // empty' "$manifest") || return 1
    sha=$(jq -r --arg c "$name" '.[$c]["linux-x86_64"].sha256 // empty' "$manifest") || return 1
    [[ -n "$path" ]] || return 3
    [[ "$sha" =~ ^[0-9a-f]{64}$ ]] || { log "$name has no sha256 in redistrib_${VERSION}.json"; return 1; }
    log "downloading $name ($path)"
    curl --fail --silent --show-error --location --retry 3 \
        -o "$STAGING/$name.tar.xz" "$REDIST_URL/$path" || return 1
    if ! echo "$sha  $STAGING/$name.tar.xz" | sha256sum --check --quiet; then
        log "$name: the download does not match the sha256 in redistrib_${VERSION}.json"
        return 1
    fi
    tar -xJf "$STAGING/$name.tar.xz" --strip-components=1 -C "$dest" || return 1
    rm -f -- "$STAGING/$name.tar.xz"
}
