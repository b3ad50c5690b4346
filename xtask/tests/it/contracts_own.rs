//! `cargo xtask check-contracts` on this repository's own CI
//! (`.github/workflows` and `.github/ci-trust.toml`): it must be clean, every
//! realistic single-edit weakening in [`OWN_REGRESSIONS`] must be caught by
//! exactly its rules, and every harmless edit in [`HARMLESS`] must produce no
//! finding. docs/contracts.md reports the same corpus side by side with zizmor.

use std::collections::BTreeSet;
use std::path::Path;

use crate::contracts::{check, failing_rules, workflow};
use crate::support::Fixture;

const OWN_GITHUB: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../.github");

/// A copy of this repository's `.github` in a temporary directory.
fn own() -> Fixture {
    let fixture = Fixture::new();
    for entry in walkdir::WalkDir::new(OWN_GITHUB) {
        let entry = entry.unwrap();
        if entry.file_type().is_file() {
            let rel = entry.path().strip_prefix(OWN_GITHUB).unwrap();
            let text = std::fs::read_to_string(entry.path()).unwrap();
            fixture.file(&format!(".github/{}", rel.to_string_lossy()), &text);
        }
    }
    fixture
}

/// One edit to this repository's CI: what it changes, what an attacker
/// gains from it, and the rules that must fire (none for a harmless edit).
pub struct OwnEdit {
    pub what: &'static str,
    pub gain: &'static str,
    pub file: &'static str,
    pub edits: &'static [(&'static str, &'static str)],
    pub rules: &'static [&'static str],
}

const TEST: &str = "runpod-gpu-test.yml";
const EXECUTE: &str = "runpod-gpu-execute.yml";
const PUBLISH: &str = "ci-cache-publish.yml";
const CI: &str = "ci.yml";
const REAP: &str = "runpod-reap.yml";
const POLICY: &str = "ci-trust.toml";

/// Anchors used by several edits.
const KEY_STEP: &str = "      - name: Compute the archive key with the trusted xtask\n        id: archive_key\n        working-directory: trusted\n        run: cargo xtask ci-key --root ../pr --github-output\n      # Exact key only";
const ARCHIVE_JOB_HEAD: &str = "    cache-mode: read\n    timeout-minutes: 90\n";
const BUILD_STEP_ENV: &str = "          HEAD_SHA: ${{ needs.authorize.outputs.head_sha }}\n        run: |\n          set -euo pipefail\n          args=";
const CREATE_POD_SCRIPT: &str =
    "          label=\"gha-$REPO_ID-$GITHUB_RUN_ID-$GITHUB_RUN_ATTEMPT\"\n";
const DELETE_POD_SCRIPT: &str = "          if [[ -n \"$RUNNER_ID\" ]]; then\n";
const RUN_NAME: &str =
    "run-name: GPU tests for ${{ github.event.workflow_run.head_sha || inputs.head_sha }}\n";
const PUBLISH_NEXTEST: &str = "      - name: Install cargo-nextest\n        if: steps.published.outputs.cache-hit != 'true'\n        uses: taiki-e/install-action@a416ddeedbd372e614cc1386e8b642692f66865e # v2.57.1\n        with:\n          tool: cargo-nextest\n";

pub const OWN_REGRESSIONS: &[OwnEdit] = &[
    // --- A policy grant does not make untrusted code trusted ---------------
    OwnEdit {
        what: "create-pod checks out the pull request to run its pod setup script",
        gain: "the PR's script runs with RUNPOD_API_KEY and RUNNER_ADMIN_TOKEN (register runners, rent GPUs)",
        file: EXECUTE,
        edits: &[(
            "      # --- RunPod API and runner registration (outside the xtask) ---\n      - name: Register a single-use runner",
            "      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2\n        with:\n          ref: ${{ inputs.head_sha }}\n          path: pr\n          persist-credentials: false\n      - run: pr/scripts/ci/pod_setup.sh\n      # --- RunPod API and runner registration (outside the xtask) ---\n      - name: Register a single-use runner",
        )],
        rules: &["untrusted-secrets"],
    },
    OwnEdit {
        what: "delete-pod downloads a report the pod job uploaded, to log it",
        gain: "the pod's PR code (root on the pod) writes the bytes a job holding the RunPod key unpacks",
        file: EXECUTE,
        edits: &[(
            "      # --- RunPod API and runner registration (outside the xtask) ---\n      - name: Delete the pod",
            "      - uses: actions/download-artifact@d3f86a106a0bac45b974a628896c90dbdf5c8093 # v4.3.0\n        with:\n          name: pod-report\n      # --- RunPod API and runner registration (outside the xtask) ---\n      - name: Delete the pod",
        )],
        // delete-pod now handles PR bytes, and its `if: always()` ignores
        // what its needs concluded.
        rules: &["untrusted-secrets", "gate-bypass"],
    },
    OwnEdit {
        what: "the reaper fetches the PR run's pod list (an artifact of another run) before reaping",
        gain: "a PR run's artifact steers a job holding the RunPod key and actions: write",
        file: REAP,
        edits: &[(
            "      # --- RunPod API (outside the xtask) ---\n",
            "      - uses: actions/download-artifact@d3f86a106a0bac45b974a628896c90dbdf5c8093 # v4.3.0\n        with:\n          name: pods\n          run-id: ${{ vars.LAST_GPU_RUN }}\n          github-token: ${{ github.token }}\n      # --- RunPod API (outside the xtask) ---\n",
        )],
        rules: &["untrusted-secrets", "untrusted-write-permissions"],
    },
    OwnEdit {
        what: "the policy grants the pod job a model-hub token for upcoming tests",
        gain: "the PR's tests, root on the pod, read HF_TOKEN the moment a workflow passes it",
        file: POLICY,
        edits: &[(
            "[[contracts.job]]\nworkflow = \"runpod-reap.yml\"\n",
            "[[contracts.job]]\nworkflow = \"runpod-gpu-execute.yml\"\njob = \"run-gpu-tests\"\nsecrets = [\"HF_TOKEN\"]\n\n[[contracts.job]]\nworkflow = \"runpod-reap.yml\"\n",
        )],
        rules: &["untrusted-secrets"],
    },
    // --- The trusted key step sees no PR bytes -------------------------------
    OwnEdit {
        what: "archive job moves CARGO_HOME into the PR checkout to share the registry",
        gain: "the PR plants .cargo-home/config.toml and bin/ shims that the trusted key step runs",
        file: TEST,
        edits: &[(
            ARCHIVE_JOB_HEAD,
            "    cache-mode: read\n    timeout-minutes: 90\n    env:\n      CARGO_HOME: ${{ github.workspace }}/pr/.cargo-home\n",
        )],
        rules: &["trusted-step-environment"],
    },
    OwnEdit {
        what: "key step runs with the PR's rustc wrapper",
        gain: "the PR's wrapper runs while the trusted xtask builds and decides the key",
        file: TEST,
        edits: &[(
            KEY_STEP,
            "      - name: Compute the archive key with the trusted xtask\n        id: archive_key\n        working-directory: trusted\n        env:\n          RUSTC_WRAPPER: ../pr/tools/rustc-wrapper.sh\n        run: cargo xtask ci-key --root ../pr --github-output\n      # Exact key only",
        )],
        rules: &["trusted-step-environment"],
    },
    OwnEdit {
        what: "archive job adds the PR's tools directory to GITHUB_PATH before the key step",
        gain: "a `cargo` shim in the PR computes whatever key it likes",
        file: TEST,
        edits: &[(
            KEY_STEP,
            "      - run: echo \"$GITHUB_WORKSPACE/pr/tools/bin\" >> \"$GITHUB_PATH\"\n      - name: Compute the archive key with the trusted xtask\n        id: archive_key\n        working-directory: trusted\n        run: cargo xtask ci-key --root ../pr --github-output\n      # Exact key only",
        )],
        rules: &["trusted-step-environment"],
    },
    OwnEdit {
        what: "archive job pins the toolchain from the PR's rust-toolchain file through GITHUB_ENV",
        gain: "RUSTUP_TOOLCHAIN may name a path: the PR's directory becomes the compiler of the trusted xtask",
        file: TEST,
        edits: &[(
            KEY_STEP,
            "      - name: Use the PR's toolchain\n        run: echo \"RUSTUP_TOOLCHAIN=$(cat pr/rust-toolchain)\" >> \"$GITHUB_ENV\"\n      - name: Compute the archive key with the trusted xtask\n        id: archive_key\n        working-directory: trusted\n        run: cargo xtask ci-key --root ../pr --github-output\n      # Exact key only",
        )],
        rules: &["trusted-step-environment"],
    },
    OwnEdit {
        what: "archive job sources the PR's CI environment file into GITHUB_ENV",
        gain: "the PR sets LD_PRELOAD, CARGO_HOME or BASH_ENV for every later step, the trusted ones included",
        file: TEST,
        edits: &[(
            KEY_STEP,
            "      - name: Load the PR's CI settings\n        working-directory: pr\n        run: cat ci/env >> \"$GITHUB_ENV\"\n      - name: Compute the archive key with the trusted xtask\n        id: archive_key\n        working-directory: trusted\n        run: cargo xtask ci-key --root ../pr --github-output\n      # Exact key only",
        )],
        rules: &["trusted-step-environment"],
    },
    OwnEdit {
        what: "archive job loads toolchain settings from the PR's CI run (an artifact) into GITHUB_ENV",
        gain: "the PR's CI run writes that artifact; its values (RUSTC_WRAPPER, CARGO_HOME) reach the trusted key step",
        file: TEST,
        edits: &[(
            KEY_STEP,
            "      - uses: actions/download-artifact@d3f86a106a0bac45b974a628896c90dbdf5c8093 # v4.3.0\n        with:\n          name: ci-meta\n          path: meta\n          run-id: ${{ github.event.workflow_run.id }}\n          github-token: ${{ github.token }}\n      - run: cat meta/toolchain.env >> \"$GITHUB_ENV\"\n      - name: Compute the archive key with the trusted xtask\n        id: archive_key\n        working-directory: trusted\n        run: cargo xtask ci-key --root ../pr --github-output\n      # Exact key only",
        )],
        rules: &["trusted-step-environment"],
    },
    OwnEdit {
        what: "the archive build runs from the PR checkout so that relative paths resolve",
        gain: "the PR's own xtask decides what to reuse and uploads anything under the key's name",
        file: TEST,
        edits: &[(
            "        id: archive\n        working-directory: trusted\n",
            "        id: archive\n        working-directory: pr\n",
        )],
        rules: &["trusted-step-environment"],
    },
    OwnEdit {
        what: "archive job's trusted xtask checkout moves inside the PR checkout",
        gain: "cargo reads the PR's .cargo/config.toml (and rustup its rust-toolchain.toml) from the parent directory",
        file: TEST,
        edits: &[
            (
                "          ref: ${{ github.workflow_sha }}\n          path: trusted\n          persist-credentials: false\n      - name: Check out the pull request at the pinned SHA\n        uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2\n        with:\n          ref: ${{ needs.authorize.outputs.head_sha }}\n          path: pr\n          persist-credentials: false\n",
                "          ref: ${{ needs.authorize.outputs.head_sha }}\n          path: pr\n          persist-credentials: false\n      - name: Check out the pull request at the pinned SHA\n        uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2\n        with:\n          ref: ${{ github.workflow_sha }}\n          path: pr/trusted\n          persist-credentials: false\n",
            ),
            (
                "        id: archive_key\n        working-directory: trusted\n        run: cargo xtask ci-key --root ../pr --github-output\n      # Exact",
                "        id: archive_key\n        working-directory: pr/trusted\n        run: cargo xtask ci-key --root .. --github-output\n      # Exact",
            ),
        ],
        rules: &["key-mismatch", "trusted-step-environment"],
    },
    // --- Credentials never persist next to PR code ---------------------------
    OwnEdit {
        what: "pod job's PR checkout keeps its credentials (persist-credentials dropped)",
        gain: "the PR's tests, root on the pod, read the token from pr/.git/config",
        file: EXECUTE,
        edits: &[(
            "          ref: ${{ inputs.head_sha }}\n          path: pr\n          persist-credentials: false\n",
            "          ref: ${{ inputs.head_sha }}\n          path: pr\n",
        )],
        rules: &["untrusted-persist-credentials"],
    },
    OwnEdit {
        what: "archive job's PR checkout sets persist-credentials: true to fetch submodules",
        gain: "build.rs reads the token from pr/.git/config",
        file: TEST,
        edits: &[(
            "          ref: ${{ needs.authorize.outputs.head_sha }}\n          path: pr\n          persist-credentials: false\n",
            "          ref: ${{ needs.authorize.outputs.head_sha }}\n          path: pr\n          persist-credentials: true\n",
        )],
        rules: &["untrusted-persist-credentials"],
    },
    OwnEdit {
        what: "archive job's trusted checkout keeps its credentials",
        gain: "build.rs reads the token from trusted/.git/config, next door",
        file: TEST,
        edits: &[(
            "          ref: ${{ github.workflow_sha }}\n          path: trusted\n          persist-credentials: false\n      - name: Check out the pull request",
            "          ref: ${{ github.workflow_sha }}\n          path: trusted\n      - name: Check out the pull request",
        )],
        rules: &["untrusted-persist-credentials"],
    },
    // --- Cache credentials in every form -------------------------------------
    OwnEdit {
        what: "archive job exports the runner's ACTIONS_ variables for sccache",
        gain: "build.rs reads the cache token from the environment and writes poisoned main-scope entries",
        file: TEST,
        edits: &[(
            KEY_STEP,
            "      - run: env | grep ^ACTIONS_ >> \"$GITHUB_ENV\"\n      - name: Compute the archive key with the trusted xtask\n        id: archive_key\n        working-directory: trusted\n        run: cargo xtask ci-key --root ../pr --github-output\n      # Exact key only",
        )],
        rules: &["untrusted-cache-save"],
    },
    OwnEdit {
        what: "archive job exports the cache variables in a loop",
        gain: "the same cache token, exported by name",
        file: TEST,
        edits: &[(
            KEY_STEP,
            "      - run: |\n          for v in CACHE_URL RESULTS_URL RUNTIME_TOKEN; do\n            echo \"ACTIONS_$v=$(printenv ACTIONS_$v)\" >> \"$GITHUB_ENV\"\n          done\n      - name: Compute the archive key with the trusted xtask\n        id: archive_key\n        working-directory: trusted\n        run: cargo xtask ci-key --root ../pr --github-output\n      # Exact key only",
        )],
        rules: &["untrusted-cache-save"],
    },
    OwnEdit {
        what: "archive job exports every ACTIONS_ variable with github-script",
        gain: "the cache token reaches the PR's build scripts",
        file: TEST,
        edits: &[(
            KEY_STEP,
            "      - uses: actions/github-script@60a0d83039c74a4aee543508d2ffcb1c3799cdea # v7.0.1\n        with:\n          script: |\n            for (const [k, v] of Object.entries(process.env))\n              if (k.startsWith('ACTIONS_')) core.exportVariable(k, v)\n      - name: Compute the archive key with the trusted xtask\n        id: archive_key\n        working-directory: trusted\n        run: cargo xtask ci-key --root ../pr --github-output\n      # Exact key only",
        )],
        rules: &["untrusted-cache-save"],
    },
    OwnEdit {
        what: "archive job builds a helper image with buildx, caching layers in the Actions cache",
        gain: "layers built from the PR's Dockerfile land in the cache main reads",
        file: TEST,
        edits: &[(
            BUILD_STEP_ENV,
            "          HEAD_SHA: ${{ needs.authorize.outputs.head_sha }}\n        run: |\n          set -euo pipefail\n          docker buildx build --cache-from type=gha --cache-to type=gha,mode=max -t helper ../pr/ci\n          args=",
        )],
        rules: &["untrusted-cache-save"],
    },
    OwnEdit {
        what: "archive job switches sccache's GHA backend on through GITHUB_ENV",
        gain: "every compilation of PR code writes main-scope sccache entries",
        file: TEST,
        edits: &[(
            KEY_STEP,
            "      - run: |\n          echo \"RUSTC_WRAPPER=sccache\" >> \"$GITHUB_ENV\"\n          echo \"SCCACHE_GHA_ENABLED=true\" >> \"$GITHUB_ENV\"\n      - name: Compute the archive key with the trusted xtask\n        id: archive_key\n        working-directory: trusted\n        run: cargo xtask ci-key --root ../pr --github-output\n      # Exact key only",
        )],
        rules: &["untrusted-cache-save"],
    },
    OwnEdit {
        what: "pod job hands the cache service URL and token to the test run",
        gain: "the PR's tests, on the pod, write the Actions cache",
        file: EXECUTE,
        edits: &[
            (
                "          ARCHIVES: ${{ inputs.archives }}\n",
                "          ARCHIVES: ${{ inputs.archives }}\n        # the runner exports ACTIONS_RUNTIME_TOKEN to actions only\n",
            ),
            (
                "          read -ra files <<<\"$ARCHIVES\"\n",
                "          read -ra files <<<\"$ARCHIVES\"\n          export CACHE_TOKEN=\"$ACTIONS_RUNTIME_TOKEN\"\n",
            ),
        ],
        rules: &["untrusted-cache-save"],
    },
    // --- Run names that bind artifacts ---------------------------------------
    OwnEdit {
        what: "consumer's run-name adds the branch for readability",
        gain: "a branch named after another PR's head SHA makes the attacker's run name state that SHA",
        file: TEST,
        edits: &[(
            RUN_NAME,
            "run-name: GPU tests for ${{ github.event.workflow_run.head_branch }} at ${{ github.event.workflow_run.head_sha || inputs.head_sha }}\n",
        )],
        rules: &["artifact-binding"],
    },
    OwnEdit {
        what: "consumer's run-name shows the PR title",
        gain: "a PR titled with a victim's SHA binds the attacker's artifact to the victim's commit",
        file: TEST,
        edits: &[(
            RUN_NAME,
            "run-name: ${{ github.event.workflow_run.display_title }} (${{ github.event.workflow_run.head_sha || inputs.head_sha }})\n",
        )],
        rules: &["artifact-binding"],
    },
    OwnEdit {
        what: "consumer's run-name shows the head commit message",
        gain: "a commit message stating a victim's SHA does the same",
        file: TEST,
        edits: &[(
            RUN_NAME,
            "run-name: GPU tests for ${{ github.event.workflow_run.head_sha || inputs.head_sha }} ${{ github.event.workflow_run.head_commit.message }}\n",
        )],
        rules: &["artifact-binding"],
    },
    // --- Attacker-controlled text in privileged jobs ---------------------------
    OwnEdit {
        what: "create-pod names the pod after the PR branch",
        gain: "a branch named `$(curl …|sh)` runs shell with RUNPOD_API_KEY and RUNNER_ADMIN_TOKEN",
        file: EXECUTE,
        edits: &[(
            CREATE_POD_SCRIPT,
            "          label=\"gha-$REPO_ID-$GITHUB_RUN_ID-$GITHUB_RUN_ATTEMPT-${{ github.event.workflow_run.head_branch }}\"\n",
        )],
        rules: &["privileged-injection"],
    },
    OwnEdit {
        what: "delete-pod logs the PR title",
        gain: "a PR title runs shell next to the RunPod key",
        file: EXECUTE,
        edits: &[(
            DELETE_POD_SCRIPT,
            "          echo \"cleaning up after ${{ github.event.workflow_run.display_title }}\"\n          if [[ -n \"$RUNNER_ID\" ]]; then\n",
        )],
        rules: &["privileged-injection"],
    },
    OwnEdit {
        what: "delete-pod logs the PR's head ref from the workflow_run payload",
        gain: "a branch name runs shell next to the RunPod key",
        file: EXECUTE,
        edits: &[(
            DELETE_POD_SCRIPT,
            "          echo \"branch ${{ github.event.workflow_run.pull_requests[0].head.ref }}\"\n          if [[ -n \"$RUNNER_ID\" ]]; then\n",
        )],
        rules: &["privileged-injection"],
    },
    OwnEdit {
        what: "publisher logs the pushed commit message",
        gain: "a commit message merged to main runs shell in the job that writes the shared archive cache",
        file: PUBLISH,
        edits: &[(
            "        run: echo \"::notice title=gpu-archive::$KEY is already published; nothing to build\"\n",
            "        run: echo \"::notice title=gpu-archive::$KEY is already published (${{ github.event.head_commit.message }})\"\n",
        )],
        rules: &["privileged-injection"],
    },
    OwnEdit {
        what: "a new job comments on the pull request where the archive came from",
        gain: "the PR's build code sets the archive job's `source` output, which runs as shell with a pull-requests: write token",
        file: TEST,
        edits: &[(
            "  # --- GPU-project template job ---------------------------------------------\n",
            "  report:\n    needs: [authorize, cuda-archive]\n    runs-on: ubuntu-24.04\n    permissions:\n      pull-requests: write\n    cache-mode: none\n    steps:\n      - env:\n          GH_TOKEN: ${{ github.token }}\n          PR: ${{ needs.authorize.outputs.pr_number }}\n        run: |\n          gh pr comment \"$PR\" -R \"$GITHUB_REPOSITORY\" --body \"GPU archive: ${{ needs.cuda-archive.outputs.source }}\"\n\n  # --- GPU-project template job ---------------------------------------------\n",
        )],
        rules: &["privileged-injection"],
    },
    // --- The publisher builds; it never reuses ---------------------------------
    OwnEdit {
        what: "publisher reuses an archive artifact instead of building",
        gain: "an archive a PR's archive job uploaded under the key becomes the shared, trusted cache entry",
        file: PUBLISH,
        edits: &[(
            "        run: cargo xtask gpu-archive --root ../pr --out \"$GITHUB_WORKSPACE/gpu-archive\"\n",
            "        run: cargo xtask gpu-archive --root ../pr --out \"$GITHUB_WORKSPACE/gpu-archive\" --reuse\n",
        )],
        rules: &["publisher-untrusted-ref"],
    },
    OwnEdit {
        what: "publisher installs nextest with a piped install script",
        gain: "whoever controls the URL writes the shared archive cache",
        file: PUBLISH,
        edits: &[(
            PUBLISH_NEXTEST,
            "      - name: Install cargo-nextest\n        if: steps.published.outputs.cache-hit != 'true'\n        run: curl -LsSf https://get.nexte.st/install.sh | bash\n",
        )],
        rules: &["remote-script"],
    },
    OwnEdit {
        what: "publisher's CUDA job installs the toolkit through `wget -qO- | sudo bash`",
        gain: "whoever controls the URL writes the shared toolkit cache",
        file: PUBLISH,
        edits: &[(
            "          trusted/scripts/ci/install_cuda_toolkit_hosted.sh \"$CUDA_VERSION\" \"$CI_TREE_ROOT/cuda-toolkit-$CUDA_VERSION\"\n",
            "          wget -qO- \"https://developer.download.nvidia.com/compute/cuda/$CUDA_VERSION/install.sh\" | sudo bash -s -- \"$CI_TREE_ROOT/cuda-toolkit-$CUDA_VERSION\"\n",
        )],
        rules: &["remote-script"],
    },
    OwnEdit {
        what: "create-pod downloads and runs a RunPod CLI installer",
        gain: "whoever controls the URL reads RUNPOD_API_KEY and RUNNER_ADMIN_TOKEN",
        file: EXECUTE,
        edits: &[(
            CREATE_POD_SCRIPT,
            "          curl -fsSLo runpodctl-install.sh https://cli.runpod.net/install.sh && bash runpodctl-install.sh\n          label=\"gha-$REPO_ID-$GITHUB_RUN_ID-$GITHUB_RUN_ATTEMPT\"\n",
        )],
        rules: &["remote-script"],
    },
    OwnEdit {
        what: "the reaper fetches a helper script and then runs it",
        gain: "whoever controls the URL gets the RunPod key and an actions: write token",
        file: REAP,
        edits: &[(
            "        run: scripts/ci/runpod_reap.sh\n",
            "        run: |\n          wget -q https://raw.githubusercontent.com/example/runpod-tools/main/reap.sh\n          bash reap.sh\n",
        )],
        rules: &["remote-script"],
    },
    // --- Gates hold ------------------------------------------------------------
    OwnEdit {
        what: "authorize may fail without failing the run",
        gain: "a fork PR, or one no maintainer approved, reaches the archive build",
        file: TEST,
        edits: &[(
            "    cache-mode: none\n    timeout-minutes: 5\n",
            "    cache-mode: none\n    continue-on-error: true\n    timeout-minutes: 5\n",
        )],
        rules: &["gate-bypass"],
    },
    OwnEdit {
        what: "authorize's decision step may fail without failing the job",
        gain: "a refused PR still passes the gate (with an empty head SHA)",
        file: TEST,
        edits: &[(
            "      - name: Decide\n        id: decide\n",
            "      - name: Decide\n        id: decide\n        continue-on-error: true\n",
        )],
        rules: &["gate-bypass"],
    },
    OwnEdit {
        what: "archive job runs `if: always()` so that a flaky authorize does not block it",
        gain: "the build runs even after authorize refused",
        file: TEST,
        edits: &[(
            "    needs: authorize\n    runs-on: ubuntu-24.04\n    permissions:\n      contents: read\n      actions: read",
            "    needs: authorize\n    if: always()\n    runs-on: ubuntu-24.04\n    permissions:\n      contents: read\n      actions: read",
        )],
        rules: &["gate-bypass"],
    },
    OwnEdit {
        what: "the runtime staging job may fail without failing the run",
        gain: "the pod job, which needs it through its caller, loads unverified CUDA trees",
        file: TEST,
        edits: &[(
            "    cache-mode: read\n    timeout-minutes: 30\n",
            "    cache-mode: read\n    continue-on-error: true\n    timeout-minutes: 30\n",
        )],
        rules: &["gate-bypass"],
    },
    // --- Suppressions have limits ---------------------------------------------
    OwnEdit {
        what: "archive job's rust-cache saves again, silenced by an inline allow comment",
        gain: "PR code writes the main-scope rust-cache; the comment is in the PR's own diff",
        file: TEST,
        edits: &[(
            "          save-if: false\n",
            "          # ci-trust: allow[untrusted-cache-save] warm cache for PR builds\n          save-if: true\n",
        )],
        rules: &["untrusted-cache-save"],
    },
    OwnEdit {
        what: "archive build receives the RunPod key, silenced by an inline allow comment",
        gain: "build.rs reads RUNPOD_API_KEY",
        file: TEST,
        edits: &[(
            "          GITHUB_TOKEN: ${{ github.token }}\n          CACHE_HIT",
            "          GITHUB_TOKEN: ${{ github.token }}\n          # ci-trust: allow[untrusted-secrets] the archive build probes GPU quota\n          RUNPOD_API_KEY: ${{ secrets.RUNPOD_API_KEY }}\n          CACHE_HIT",
        )],
        rules: &["untrusted-secrets"],
    },
];

pub const HARMLESS: &[OwnEdit] = &[
    OwnEdit {
        what: "publisher checks out `ref: ${{ github.sha }}` explicitly",
        gain: "",
        file: PUBLISH,
        edits: &[(
            "      - name: Check out the code to archive\n        uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2\n        with:\n",
            "      - name: Check out the code to archive\n        uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2\n        with:\n          ref: ${{ github.sha }}\n",
        )],
        rules: &[],
    },
    OwnEdit {
        what: "publisher's trusted checkout names `ref: ${{ github.workflow_sha }}`",
        gain: "",
        file: PUBLISH,
        edits: &[(
            "      - name: Check out the trusted xtask\n        uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2\n        with:\n",
            "      - name: Check out the trusted xtask\n        uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2\n        with:\n          ref: ${{ github.workflow_sha }}\n",
        )],
        rules: &[],
    },
    OwnEdit {
        what: "archive job adds the trusted checkout's tools to GITHUB_PATH",
        gain: "",
        file: TEST,
        edits: &[(
            KEY_STEP,
            "      - run: echo \"$GITHUB_WORKSPACE/trusted/scripts/ci\" >> \"$GITHUB_PATH\"\n      - name: Compute the archive key with the trusted xtask\n        id: archive_key\n        working-directory: trusted\n        run: cargo xtask ci-key --root ../pr --github-output\n      # Exact key only",
        )],
        rules: &[],
    },
    OwnEdit {
        what: "archive job keeps CARGO_HOME in the runner's temp directory",
        gain: "",
        file: TEST,
        edits: &[(
            ARCHIVE_JOB_HEAD,
            "    cache-mode: read\n    timeout-minutes: 90\n    env:\n      CARGO_HOME: ${{ runner.temp }}/cargo-home\n",
        )],
        rules: &[],
    },
    OwnEdit {
        what: "archive job sets a constant in GITHUB_ENV before the key step",
        gain: "",
        file: TEST,
        edits: &[(
            KEY_STEP,
            "      - run: echo \"CARGO_INCREMENTAL=0\" >> \"$GITHUB_ENV\"\n      - name: Compute the archive key with the trusted xtask\n        id: archive_key\n        working-directory: trusted\n        run: cargo xtask ci-key --root ../pr --github-output\n      # Exact key only",
        )],
        rules: &[],
    },
    OwnEdit {
        what: "archive job records whether step debugging is on",
        gain: "",
        file: TEST,
        edits: &[(
            KEY_STEP,
            "      - run: echo \"debug=${ACTIONS_STEP_DEBUG:-false}\" >> \"$GITHUB_OUTPUT\"\n      - name: Compute the archive key with the trusted xtask\n        id: archive_key\n        working-directory: trusted\n        run: cargo xtask ci-key --root ../pr --github-output\n      # Exact key only",
        )],
        rules: &[],
    },
    OwnEdit {
        what: "authorize's decision step states `continue-on-error: false`",
        gain: "",
        file: TEST,
        edits: &[(
            "      - name: Decide\n        id: decide\n",
            "      - name: Decide\n        id: decide\n        continue-on-error: false\n",
        )],
        rules: &[],
    },
    OwnEdit {
        what: "archive job runs `if: !cancelled()` but requires authorize's success",
        gain: "",
        file: TEST,
        edits: &[(
            "    needs: authorize\n    runs-on: ubuntu-24.04\n    permissions:\n      contents: read\n      actions: read",
            "    needs: authorize\n    if: ${{ !cancelled() && needs.authorize.result == 'success' }}\n    runs-on: ubuntu-24.04\n    permissions:\n      contents: read\n      actions: read",
        )],
        rules: &[],
    },
    OwnEdit {
        // A reworded run-name is no longer harmless: it must render to the
        // policy's artifacts.consumer-run-name, or reuse never matches.
        what: "consumer's run-name takes the head SHA from its operands in the other order",
        gain: "",
        file: TEST,
        edits: &[(
            RUN_NAME,
            "run-name: GPU tests for ${{ inputs.head_sha || github.event.workflow_run.head_sha }}\n",
        )],
        rules: &[],
    },
    OwnEdit {
        what: "delete-pod logs the head SHA and run id",
        gain: "",
        file: EXECUTE,
        edits: &[(
            DELETE_POD_SCRIPT,
            "          echo \"cleaning up ${{ inputs.head_sha }} (run ${{ github.run_id }})\"\n          if [[ -n \"$RUNNER_ID\" ]]; then\n",
        )],
        rules: &[],
    },
    OwnEdit {
        what: "the CUDA publisher verifies a pinned checksum before running a downloaded installer",
        gain: "",
        file: PUBLISH,
        edits: &[(
            "          trusted/scripts/ci/install_cuda_toolkit_hosted.sh \"$CUDA_VERSION\" \"$CI_TREE_ROOT/cuda-toolkit-$CUDA_VERSION\"\n",
            "          curl -fsSLo cuda-install.sh \"https://developer.download.nvidia.com/compute/cuda/$CUDA_VERSION/install.sh\"\n          echo \"$CUDA_INSTALLER_SHA256  cuda-install.sh\" | sha256sum -c -\n          bash cuda-install.sh \"$CI_TREE_ROOT/cuda-toolkit-$CUDA_VERSION\"\n",
        )],
        rules: &[],
    },
    OwnEdit {
        what: "create-pod queries RunPod's GPU types with curl and jq",
        gain: "",
        file: EXECUTE,
        edits: &[(
            CREATE_POD_SCRIPT,
            "          curl -fsS -H \"Authorization: Bearer $RUNPOD_API_KEY\" \"$RUNPOD_API_URL/gpuTypes\" | jq -r '.[].id'\n          label=\"gha-$REPO_ID-$GITHUB_RUN_ID-$GITHUB_RUN_ATTEMPT\"\n",
        )],
        rules: &[],
    },
    OwnEdit {
        what: "archive job's PR checkout fetches the full history",
        gain: "",
        file: TEST,
        edits: &[(
            "          ref: ${{ needs.authorize.outputs.head_sha }}\n          path: pr\n",
            "          ref: ${{ needs.authorize.outputs.head_sha }}\n          path: pr\n          fetch-depth: 0\n",
        )],
        rules: &[],
    },
    OwnEdit {
        what: "archive job's timeout grows to two hours",
        gain: "",
        file: TEST,
        edits: &[(
            ARCHIVE_JOB_HEAD,
            "    cache-mode: read\n    timeout-minutes: 120\n",
        )],
        rules: &[],
    },
    OwnEdit {
        what: "the reaper's checkout fetches a single commit",
        gain: "",
        file: REAP,
        edits: &[(
            "          ref: ${{ github.workflow_sha }}\n          persist-credentials: false\n",
            "          ref: ${{ github.workflow_sha }}\n          fetch-depth: 1\n          persist-credentials: false\n",
        )],
        rules: &[],
    },
    OwnEdit {
        what: "the pull-request CI's clippy job may fail without failing the run",
        gain: "",
        file: CI,
        edits: &[(
            "    name: Clippy\n    runs-on: ubuntu-24.04\n",
            "    name: Clippy\n    continue-on-error: true\n    runs-on: ubuntu-24.04\n",
        )],
        rules: &[],
    },
    OwnEdit {
        what: "publisher pins a newer toolchain",
        gain: "",
        file: PUBLISH,
        edits: &[(
            "  CARGO_TERM_COLOR: always\n  RUST_TOOLCHAIN: stable\n",
            "  CARGO_TERM_COLOR: always\n  RUST_TOOLCHAIN: \"1.91\"\n",
        )],
        rules: &[],
    },
    OwnEdit {
        what: "a new job comments on the pull request with its authorized number, through env",
        gain: "",
        file: TEST,
        edits: &[(
            "  # --- GPU-project template job ---------------------------------------------\n",
            "  report:\n    needs: [authorize, cuda-archive]\n    runs-on: ubuntu-24.04\n    permissions:\n      pull-requests: write\n    cache-mode: none\n    steps:\n      - env:\n          GH_TOKEN: ${{ github.token }}\n          PR: ${{ needs.authorize.outputs.pr_number }}\n          SOURCE: ${{ needs.cuda-archive.outputs.source }}\n        run: |\n          gh pr comment \"$PR\" -R \"$GITHUB_REPOSITORY\" --body \"GPU archive: $SOURCE\"\n\n  # --- GPU-project template job ---------------------------------------------\n",
        )],
        rules: &[],
    },
    OwnEdit {
        what: "the policy grants create-pod, which runs trusted code only, one more secret",
        gain: "",
        file: POLICY,
        edits: &[(
            "job = \"create-pod\"\nsecrets = [\"RUNPOD_API_KEY\", \"RUNNER_ADMIN_TOKEN\"]\n",
            "job = \"create-pod\"\nsecrets = [\"RUNPOD_API_KEY\", \"RUNNER_ADMIN_TOKEN\", \"RUNPOD_REGISTRY_AUTH\"]\n",
        )],
        rules: &[],
    },
    OwnEdit {
        what: "pod job downloads the archives of its own run by explicit run id",
        gain: "",
        file: EXECUTE,
        edits: &[(
            "          name: ${{ inputs.artifact_name }}\n          path: gpu-archive\n",
            "          name: ${{ inputs.artifact_name }}\n          path: gpu-archive\n          run-id: ${{ github.run_id }}\n",
        )],
        rules: &[],
    },
];

/// Applies `edits` to `file`; an anchor that does not occur exactly once is
/// a broken corpus entry, reported instead of applied.
fn apply(fixture: &Fixture, entry: &OwnEdit) -> Result<(), String> {
    let path = fixture.join(&workflow(entry.file));
    let mut text = std::fs::read_to_string(&path).unwrap();
    for (from, to) in entry.edits {
        let count = text.matches(from).count();
        if count != 1 {
            return Err(format!(
                "{}: the anchor {from:?} occurs {count} times in {}",
                entry.what, entry.file
            ));
        }
        text = text.replacen(from, to, 1);
    }
    std::fs::write(&path, text).unwrap();
    Ok(())
}

/// With `CHECK_CONTRACTS_OWN_EXPORT=DIR`, the unmodified tree goes to
/// `DIR/base` and each edited one to `DIR/rNN` (regressions) or `DIR/hNN`
/// (harmless), with `what.txt`, `gain.txt` and `rules.txt`, for
/// compare-zizmor.py.
fn export(name: &str, entry: Option<&OwnEdit>, fixture: &Fixture) {
    let Some(dir) = std::env::var_os("CHECK_CONTRACTS_OWN_EXPORT") else {
        return;
    };
    let out = Path::new(&dir).join(name);
    for file in walkdir::WalkDir::new(fixture.path()) {
        let file = file.unwrap();
        let rel = file.path().strip_prefix(fixture.path()).unwrap();
        if file.file_type().is_file() {
            std::fs::create_dir_all(out.join(rel).parent().unwrap()).unwrap();
            std::fs::copy(file.path(), out.join(rel)).unwrap();
        }
    }
    if let Some(entry) = entry {
        std::fs::write(
            out.join("what.txt"),
            format!("{} ({})\n", entry.what, entry.file),
        )
        .unwrap();
        std::fs::write(out.join("gain.txt"), format!("{}\n", entry.gain)).unwrap();
        std::fs::write(out.join("rules.txt"), entry.rules.join(",") + "\n").unwrap();
    }
}

#[test]
fn this_repositorys_ci_is_clean() {
    let fixture = own();
    export("base", None, &fixture);
    let (code, findings) = check(&fixture);
    assert_eq!(failing_rules(&findings), BTreeSet::new(), "{findings:#?}");
    assert_eq!(code, 0);
}

#[test]
fn every_weakening_of_this_repositorys_ci_is_caught() {
    let mut failures = Vec::new();
    for (index, entry) in OWN_REGRESSIONS.iter().enumerate() {
        assert!(
            !entry.gain.is_empty(),
            "{}: say what an attacker gains",
            entry.what
        );
        let fixture = own();
        if let Err(err) = apply(&fixture, entry) {
            failures.push(err);
            continue;
        }
        export(&format!("r{:02}", index + 1), Some(entry), &fixture);
        let (code, findings) = check(&fixture);
        let got = failing_rules(&findings);
        let want: BTreeSet<String> = entry.rules.iter().map(|r| r.to_string()).collect();
        // Exit 1 when something fails the check; a path that depends on
        // what the repository does not show is a warning, exit 0.
        let fails = findings
            .iter()
            .any(|f| f["severity"] == "error" && f["suppressed"] == false);
        if got != want || code != i32::from(fails) || want.is_empty() {
            failures.push(format!(
                "{} ({}): want {want:?} exit 1, got {got:?} exit {code}: {findings:#?}",
                entry.what, entry.file
            ));
        }
    }
    assert!(OWN_REGRESSIONS.len() >= 30);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn harmless_edits_of_this_repositorys_ci_raise_nothing() {
    let mut failures = Vec::new();
    for (index, entry) in HARMLESS.iter().enumerate() {
        let fixture = own();
        if let Err(err) = apply(&fixture, entry) {
            failures.push(err);
            continue;
        }
        export(&format!("h{:02}", index + 1), Some(entry), &fixture);
        let (code, findings) = check(&fixture);
        let errors: Vec<_> = findings
            .iter()
            .filter(|f| f["severity"] == "error")
            .collect();
        if code != 0 || !errors.is_empty() {
            failures.push(format!(
                "{} ({}): want no finding, got exit {code}: {errors:#?}",
                entry.what, entry.file
            ));
        }
    }
    assert!(HARMLESS.len() >= 15);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// An attacker-controlled value passed as a reusable workflow's input is as
/// dangerous in the callee's privileged script as the context itself; the
/// head SHA passed the same way is not.
#[test]
fn attacker_text_passed_as_an_input_reaches_privileged_scripts() {
    for (passed, rules) in [
        (
            "${{ github.event.workflow_run.head_branch }}",
            BTreeSet::from(["privileged-injection".to_owned()]),
        ),
        ("${{ github.event.workflow_run.head_sha }}", BTreeSet::new()),
    ] {
        let fixture = own();
        let callee = OwnEdit {
            what: "create-pod names the pod after an input",
            gain: "",
            file: EXECUTE,
            edits: &[
                (
                    "      max_minutes:\n",
                    "      branch:\n        required: false\n        type: string\n        default: \"\"\n      max_minutes:\n",
                ),
                (
                    CREATE_POD_SCRIPT,
                    "          label=\"gha-$REPO_ID-$GITHUB_RUN_ID-$GITHUB_RUN_ATTEMPT-${{ inputs.branch }}\"\n",
                ),
            ],
            rules: &[],
        };
        apply(&fixture, &callee).unwrap();
        let path = fixture.join(&workflow(TEST));
        let text = std::fs::read_to_string(&path).unwrap();
        let from = "      archives: xtask-tests.tar.zst\n";
        assert_eq!(text.matches(from).count(), 1);
        std::fs::write(
            &path,
            text.replacen(from, &format!("{from}      branch: {passed}\n"), 1),
        )
        .unwrap();
        let (_, findings) = check(&fixture);
        assert_eq!(failing_rules(&findings), rules, "{passed}: {findings:#?}");
    }
}

/// Only a reviewed policy entry silences `untrusted-cache-save`; the inline
/// comment of the same edit does not (r36 of the corpus).
#[test]
fn a_policy_allow_entry_can_silence_what_an_inline_comment_cannot() {
    let fixture = own();
    let entry = OWN_REGRESSIONS
        .iter()
        .find(|e| {
            e.what.contains("silenced by an inline allow comment")
                && e.rules == ["untrusted-cache-save"]
        })
        .unwrap();
    apply(&fixture, entry).unwrap();
    let (code, findings) = check(&fixture);
    assert_eq!(code, 1);
    let message = findings[0]["message"].as_str().unwrap();
    assert!(
        message.contains("cannot silence untrusted-cache-save"),
        "{message}"
    );
    let policy = fixture.join(".github/ci-trust.toml");
    let text = std::fs::read_to_string(&policy).unwrap();
    std::fs::write(
        &policy,
        format!("{text}\n[[allow]]\nrule = \"untrusted-cache-save\"\nworkflow = \"runpod-gpu-test.yml\"\njob = \"cuda-archive\"\nreason = \"reviewed: warm cache experiment until 2026-12\"\n"),
    )
    .unwrap();
    let (code, findings) = check(&fixture);
    assert_eq!(code, 0, "{findings:#?}");
    assert!(
        findings.iter().all(|f| f["suppressed"] == true),
        "{findings:#?}"
    );
}
