#!/usr/bin/env bash
# Usage: runpod_reap.sh
#
# The orphan reaper, run by runpod-reap.yml on a schedule. For every RunPod
# pod that runpod-gpu-execute.yml created for this repository (its name is
# gha-<repository id>-<run id>-<attempt>):
#   - the run is finished or gone: the pod is an orphan; delete it;
#   - the run is still going after MAX_POD_MINUTES: it is expired; delete the
#     pod, confirm that RunPod no longer knows it, and only then cancel the run;
#   - otherwise leave it alone.
# A run is never cancelled while its pod may still exist, and the GitHub
# token (actions: write) is used for nothing but that cancellation.
#
# These are thin HTTP calls to RunPod and GitHub, outside the xtask's scope.
#
# Environment:
#   RUNPOD_API_KEY      RunPod API key (required)
#   RUNPOD_API_URL      RunPod REST base (default https://rest.runpod.io/v1)
#   GITHUB_TOKEN        token with actions: write (required)
#   GITHUB_API_URL      GitHub REST base (set by the runner)
#   GITHUB_REPOSITORY   owner/name (set by the runner)
#   REPO_ID             numeric repository id (required)
#   MAX_POD_MINUTES     age after which a running run is expired (default 180)
#   CONFIRM_ATTEMPTS    polls for a deletion to show (default 30, 5 s apart)
set -euo pipefail
SCRIPT_NAME=runpod_reap
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/common.sh"

: "${RUNPOD_API_KEY:?set RUNPOD_API_KEY}"
: "${GITHUB_TOKEN:?set GITHUB_TOKEN}"
: "${GITHUB_REPOSITORY:?set GITHUB_REPOSITORY}"
: "${REPO_ID:?set REPO_ID}"
RUNPOD_API_URL=${RUNPOD_API_URL:-https://rest.runpod.io/v1}
GITHUB_API_URL=${GITHUB_API_URL:-https://api.github.com}
MAX_POD_MINUTES=${MAX_POD_MINUTES:-180}
CONFIRM_ATTEMPTS=${CONFIRM_ATTEMPTS:-30}
[[ "$REPO_ID" =~ ^[0-9]+$ ]] || die "REPO_ID '$REPO_ID' must be the numeric repository id"
[[ "$MAX_POD_MINUTES" =~ ^[0-9]+$ ]] || die "MAX_POD_MINUTES must be a number of minutes"
PREFIX="gha-$REPO_ID-"

runpod() {
    curl --silent --show-error --retry 2 -H "Authorization: Bearer $RUNPOD_API_KEY" "$@"
}

github() {
    curl --silent --show-error --retry 2 -H "Authorization: Bearer $GITHUB_TOKEN" \
        -H "Accept: application/vnd.github+json" "$@"
}

# pod_is_gone ID: polls until RunPod answers 404 for the pod.
pod_is_gone() {
    local id=$1 code attempt
    for ((attempt = 1; attempt <= CONFIRM_ATTEMPTS; attempt++)); do
        code=$(runpod --output /dev/null --write-out '%{http_code}' "$RUNPOD_API_URL/pods/$id" || true)
        [[ "$code" == 404 ]] && return 0
        ((attempt < CONFIRM_ATTEMPTS)) && sleep "${CONFIRM_INTERVAL:-5}"
    done
    return 1
}

pods_json=$(runpod --fail "$RUNPOD_API_URL/pods") || die "cannot list RunPod pods"
listing=$(jq -r --arg prefix "$PREFIX" \
    '(if type == "array" then . else (.pods // error("no pod list")) end)[]
     | select((.name // "") | startswith($prefix)) | "\(.id) \(.name)"' <<<"$pods_json") \
    || die "RunPod's pod list is not the expected JSON"
pods=()
if [[ -n "$listing" ]]; then
    mapfile -t pods <<<"$listing"
fi

now=$(date +%s)
failures=0
for entry in "${pods[@]}"; do
    id=${entry%% *}
    name=${entry#* }
    rest=${name#"$PREFIX"}
    run_id=${rest%%-*}
    if [[ ! "$run_id" =~ ^[0-9]+$ || ! "$id" =~ ^[A-Za-z0-9_-]+$ ]]; then
        log "pod $id ($name): not a name this repository's workflows create; leaving it"
        continue
    fi
    run_file=$(mktemp)
    code=$(github --output "$run_file" --write-out '%{http_code}' \
        "$GITHUB_API_URL/repos/$GITHUB_REPOSITORY/actions/runs/$run_id" || true)
    cancel=
    if [[ "$code" == 404 ]]; then
        reason="its run $run_id no longer exists"
    elif [[ "$code" != 200 ]]; then
        log "pod $id: cannot read run $run_id (HTTP $code); leaving it for the next pass"
        failures=$((failures + 1))
        rm -f -- "$run_file"
        continue
    elif [[ "$(jq -r .status "$run_file")" == completed ]]; then
        reason="its run $run_id has finished"
    else
        started=$(date -d "$(jq -r .run_started_at "$run_file")" +%s)
        age=$(((now - started) / 60))
        if ((age <= MAX_POD_MINUTES)); then
            log "pod $id: run $run_id is $age minutes old; keeping it"
            rm -f -- "$run_file"
            continue
        fi
        reason="its run $run_id has been going for $age minutes (limit $MAX_POD_MINUTES)"
        cancel=1
    fi
    rm -f -- "$run_file"
    log "deleting pod $id: $reason"
    runpod --output /dev/null -X DELETE "$RUNPOD_API_URL/pods/$id" || true
    if ! pod_is_gone "$id"; then
        log "pod $id still exists after deletion; not cancelling run $run_id"
        failures=$((failures + 1))
        continue
    fi
    log "pod $id is gone"
    if [[ -n "$cancel" ]]; then
        code=$(github --output /dev/null --write-out '%{http_code}' -X POST \
            "$GITHUB_API_URL/repos/$GITHUB_REPOSITORY/actions/runs/$run_id/cancel" || true)
        if [[ "$code" == 202 || "$code" == 409 ]]; then
            log "cancelled expired run $run_id (HTTP $code)"
        else
            log "cancelling run $run_id failed (HTTP $code)"
            failures=$((failures + 1))
        fi
    fi
done

log "checked ${#pods[@]} pod(s) of this repository; $failures problem(s)"
((failures == 0)) || die "$failures pod(s) or run(s) need attention (see above)"
