#!/usr/bin/env bash
# use_prebuilt_xtask.sh DIR: routes `cargo xtask` to the prebuilt xtask
# binary DIR/xtask that the job restored from the publisher's cache.
#
# It checks that the binary is a regular executable file that runs, names
# the commit it was built from and says it is optimised (`--version`: the
# publisher builds it with `--release`), then makes later steps' `cargo
# xtask …` run it: cargo reads the alias CARGO_ALIAS_XTASK from the
# environment before .cargo/config.toml, and an alias naming an unknown
# command runs `cargo-<name>` from PATH. Any failure exits non-zero and
# changes nothing, so the job fails visibly rather than running something
# unchecked. (The restore is exact-key and read-only; only
# ci-cache-publish.yml saves the entry, from main.)
set -euo pipefail

dir=${1:?usage: use_prebuilt_xtask.sh DIR}
binary="$dir/xtask"
if [[ -L "$binary" || ! -f "$binary" || ! -x "$binary" ]]; then
    echo "::error title=prebuilt xtask::$binary is not a regular executable file" >&2
    exit 1
fi
if ! version=$("$binary" --version); then
    echo "::error title=prebuilt xtask::$binary does not run" >&2
    exit 1
fi
if [[ "$version" != *"(built from "* ]]; then
    echo "::error title=prebuilt xtask::$binary --version names no commit: $version" >&2
    exit 1
fi
if [[ "$version" != *", optimised)" ]]; then
    echo "::error title=prebuilt xtask::$binary is not an optimised build (--version: $version); the publisher builds it with --release" >&2
    exit 1
fi
# The wrapper drops the subcommand name cargo passes to `cargo-<name>`.
wrapper="$dir/cargo-xtask-prebuilt"
# shellcheck disable=SC2016 # "${@:2}" is the wrapper's text, expanded when it runs.
printf '#!/usr/bin/env bash\nexec %q "${@:2}"\n' "$binary" >"$wrapper"
chmod 755 "$wrapper"
echo "prebuilt xtask: $version"
echo "$dir" >>"${GITHUB_PATH:?GITHUB_PATH is not set}"
echo "CARGO_ALIAS_XTASK=xtask-prebuilt" >>"${GITHUB_ENV:?GITHUB_ENV is not set}"
