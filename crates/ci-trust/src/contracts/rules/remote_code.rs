//! Family `remote_code`: code a privileged job fetches from elsewhere. Third
//! party actions are pinned to a commit (`unpinned-action`); a publisher or
//! secret-holding job runs no script downloaded at run time, and a remote
//! action handed a secret in a run an outsider starts, whose event names a
//! pull request, is asked about (`remote-script`).
//!
//! Owns these checks and the download-and-run recogniser. Which jobs are
//! privileged is `privileged.rs`'s (`Checker::privilege`).

use anyhow::Result;

use super::{Checker, RuleId, Severity};
use crate::contracts::commands;
use crate::contracts::expr;
use crate::contracts::roles::{Actor, JobInfo};
use crate::contracts::shell::{Command, Script};
use crate::contracts::workflow::Job;

/// `unpinned-action`: in publisher, untrusted-code and lifecycle jobs.
pub(super) fn check_unpinned_action(c: &mut Checker) -> Result<()> {
    c.each_job(|c, info, job| {
        if info.publisher || info.is_untrusted() || info.lifecycle {
            c.unpinned_action(info, job);
        }
        Ok(())
    })
}

/// `remote-script`. A write token alone is `untrusted-write-permissions`'
/// business; a fetched script matters where secrets or the publisher's
/// cache token are.
pub(super) fn check_remote_script(c: &mut Checker) -> Result<()> {
    c.each_job(|c, info, job| {
        if let Some((why, false)) = c.privilege(info, job) {
            c.remote_script(info, job, &why);
        }
        c.secret_to_remote_action(info, job);
        Ok(())
    })
}

impl Checker<'_> {
    /// Rule 9: third-party actions in privileged jobs are pinned to a commit.
    pub(super) fn unpinned_action(&mut self, info: &JobInfo, job: &Job) {
        let at = info.at;
        let uses = job
            .uses
            .iter()
            .chain(job.steps.iter().filter_map(|s| s.uses.as_ref()));
        let mut found = Vec::new();
        for uses in uses {
            let value = uses.value.trim();
            if crate::contracts::workflow::local_uses(value).is_some() {
                continue;
            }
            if let Some(image) = value.strip_prefix("docker://") {
                if !image.contains("@sha256:") {
                    found.push((
                        uses.pos,
                        format!(
                            "{} uses the image `{value}` without a `@sha256:` digest",
                            self.label(at)
                        ),
                    ));
                }
                continue;
            }
            let (name, reference) = crate::contracts::workflow::split_uses(value);
            let owner = name.split('/').next().unwrap_or("").to_ascii_lowercase();
            if owner == "actions" || owner == "github" {
                continue;
            }
            if !expr::is_full_sha(reference) {
                found.push((
                    uses.pos,
                    format!(
                        "{} uses `{value}`, which is not pinned to a full commit SHA",
                        self.label(at)
                    ),
                ));
            }
        }
        for (pos, message) in found {
            self.push(RuleId::UnpinnedAction, at, at.workflow, pos, message);
        }
    }

    /// `remote-script`: a script downloaded and run in a privileged job.
    pub(super) fn remote_script(&mut self, info: &JobInfo, job: &Job, why: &str) {
        let wf = self.model.workflow(info.at);
        let mut found = Vec::new();
        for step in &job.steps {
            let Some(run) = &step.run else { continue };
            if let Some(line) = downloads_and_runs(&run.value) {
                found.push((
                    wf.locate(run.pos, line),
                    format!(
                        "`{}` runs a script fetched at run time in `{}`, a {why}; whoever controls that URL runs code with its secrets and token: vendor the script or verify a pinned checksum before running it",
                        line.trim(),
                        job.id.value
                    ),
                ));
            }
        }
        for (pos, message) in found {
            self.push(
                RuleId::RemoteScript,
                info.at,
                info.at.workflow,
                pos,
                message,
            );
        }
    }
}

/// Events whose runs hold the base repository's secrets while their payload
/// names a pull request an outsider opened or commented on: code there can
/// read the pull request's head from the event and fetch it.
const PR_NAMING_PRIVILEGED_EVENTS: &[&str] =
    &["pull_request_target", "issue_comment", "workflow_run"];

impl Checker<'_> {
    /// A remote action (code the repository does not show) handed a
    /// secret, in a job an outsider can start on an event that names a
    /// pull request (mosaicml's `pytest-gpu` action on `pull_request_target`
    /// with `MCLOUD_API_KEY`, which submits the pull request's tests to a
    /// cloud account). Whether the action builds or runs the pull
    /// request's code is what the repository does not show: a warning with
    /// that question, never an error.
    pub(super) fn secret_to_remote_action(&mut self, info: &JobInfo, job: &Job) {
        let members_untrusted = self
            .policy
            .contracts
            .same_repository_pull_requests_untrusted();
        let Some(start) = info.starts.iter().find(|s| {
            PR_NAMING_PRIVILEGED_EVENTS.contains(&s.event.as_str())
                && (s.actor == Actor::Outsider || (s.actor == Actor::Member && members_untrusted))
        }) else {
            return;
        };
        let event = start.event.clone();
        let wf = self.model.workflow(info.at);
        let mut found = Vec::new();
        for step in &job.steps {
            let Some(uses) = &step.uses else { continue };
            let value = uses.value.trim();
            if crate::contracts::workflow::local_uses(value).is_some()
                || value.starts_with("docker://")
            {
                continue;
            }
            let (name, _) = crate::contracts::workflow::split_uses(value);
            let owner = name.split('/').next().unwrap_or("").to_ascii_lowercase();
            if owner == "actions" || owner == "github" {
                continue;
            }
            let mut secrets: Vec<String> = step
                .with
                .iter()
                .chain(&step.env)
                .flat_map(|(_, v)| expr::secret_refs(&v.value))
                .filter_map(|r| r.name)
                .filter(|n| n != "GITHUB_TOKEN")
                .collect();
            secrets.sort();
            secrets.dedup();
            if secrets.is_empty() {
                continue;
            }
            let listed: Vec<String> = secrets.iter().map(|s| format!("`secrets.{s}`")).collect();
            found.push((
                wf.locate(uses.pos, value),
                format!(
                    "`{}` hands {} to `{value}`, code this repository does not show, in a run that {event} lets someone outside the repository start; the action can read the pull request's head from the event: hand the secret only where no pull request's code can reach it (a `pull_request` run holds none), or behind an environment with required reviewers",
                    job.id.value,
                    listed.join(", ")
                ),
            ));
        }
        for (pos, message) in found {
            self.push_as(
                RuleId::RemoteScript,
                info.at,
                info.at.workflow,
                pos,
                message,
                Severity::Warning,
                Some("does this action build or run the pull request's code (or hand it to a service) with the secret? The workflows do not show it".to_owned()),
            );
        }
    }
}

/// Programs that run what is piped into them (after `sudo`, `env`, …).
const INTERPRETERS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "fish", "python", "python3", "node", "perl", "ruby",
    "pwsh", "source", ".", "eval",
];

/// The first line of a script that runs what it downloads: a pipe from
/// `curl`/`wget` into an interpreter, a substitution of one handed to an
/// interpreter, or a file fetched and then run without a checksum check in
/// between.
pub fn downloads_and_runs(text: &str) -> Option<&str> {
    let script = Script::cached(text);
    // `python -m wget URL` fetches too.
    let is_fetch = |c: &Command| {
        matches!(c.program().as_deref(), Some("curl" | "wget")) || python_wget(c).is_some()
    };
    let interpreter = |c: &Command| {
        c.program()
            .is_some_and(|p| INTERPRETERS.contains(&p.as_str()))
    };
    let mut fetched: Vec<(String, usize)> = Vec::new();
    for (i, command) in script.commands.iter().enumerate() {
        // curl … | sh, wget -O- … | sudo bash
        let piped = command.pipe_position > 0
            && interpreter(command)
            && script.commands[..i].iter().any(|earlier| {
                earlier.pipeline == command.pipeline
                    && earlier.pipe_position < command.pipe_position
                    && is_fetch(earlier)
            });
        // bash <(curl …), sh -c "$(curl …)", source <(wget -qO- …)
        let substituted = interpreter(command)
            && command.words.iter().any(|w| {
                w.substitutions()
                    .any(|range| script.commands[range].iter().any(is_fetch))
            });
        if piped || substituted {
            return Some(commands::line(text, &script, command));
        }
        if is_fetch(command) {
            let args = command.arg_texts();
            let file = if let Some(rest) = python_wget(command) {
                wget_file(&rest)
            } else if command.program().as_deref() == Some("wget") {
                wget_file(&args)
            } else {
                downloaded_file(&args)
            };
            if let Some(file) = file {
                fetched.push((file, i));
            }
            continue;
        }
        // A later command may run a file fetched earlier.
        let runs_fetched = fetched.iter().any(|(file, at)| {
            let verified = script.commands[*at..i].iter().any(verifies_checksum);
            !verified && runs_file(command, file)
        });
        if runs_fetched {
            return Some(commands::line(text, &script, command));
        }
    }
    None
}

/// The arguments of `python -m wget ARGS…`.
fn python_wget(command: &Command) -> Option<Vec<String>> {
    let program = command.program()?;
    if !program.starts_with("python") {
        return None;
    }
    let args = command.arg_texts();
    let at = args
        .windows(2)
        .position(|w| w[0] == "-m" && w[1] == "wget")?;
    Some(args[at + 2..].to_vec())
}

/// The file a `curl` command line writes, when it names one.
fn downloaded_file(args: &[String]) -> Option<String> {
    let mut out = None;
    let mut url = None;
    for (i, w) in args.iter().enumerate() {
        let next = args.get(i + 1).cloned();
        match w.as_str() {
            "-o" | "--output" | "--output-document" => out = next,
            _ if w.starts_with("--output-document=") => {
                out = w.split_once('=').map(|(_, f)| f.to_owned());
            }
            _ if w.starts_with('-') && !w.starts_with("--") && w.ends_with('o') => out = next,
            _ if w.starts_with("http") => url = Some(w.as_str()),
            _ => {}
        }
    }
    let short_o = |w: &String| w.starts_with('-') && !w.starts_with("--") && w.contains('O');
    let remote_name = args.iter().any(|w| short_o(w) || w == "--remote-name");
    out.or_else(|| {
        remote_name
            .then(|| url.and_then(|u| u.rsplit('/').next()).map(str::to_owned))
            .flatten()
    })
    .filter(|f| f != "-" && !f.is_empty())
}

/// The file `wget` writes: `-O FILE`, else the URL's last segment.
fn wget_file(args: &[String]) -> Option<String> {
    let mut url = None;
    for (i, w) in args.iter().enumerate() {
        match w.as_str() {
            "-O" | "--output-document" => return args.get(i + 1).cloned().filter(|f| f != "-"),
            _ if w.starts_with("--output-document=") => {
                return w
                    .split_once('=')
                    .map(|(_, f)| f.to_owned())
                    .filter(|f| f != "-");
            }
            _ if w.starts_with("-qO") || w.starts_with("-O") && w.len() > 2 => {
                let f = w.trim_start_matches("-q").trim_start_matches("-O");
                return (!f.is_empty() && f != "-").then(|| f.to_owned());
            }
            _ if w.starts_with("http") => url = Some(w.as_str()),
            _ => {}
        }
    }
    url.and_then(|u| u.rsplit('/').next()).map(str::to_owned)
}

/// True when `command` runs `file`: as the program, or through an interpreter.
fn runs_file(command: &Command, file: &str) -> bool {
    let bare = file.trim_start_matches("./");
    let names = |w: &str| w.trim_start_matches("./") == bare;
    // `./x.sh` or `/tmp/x.sh` as the program, `sudo x.sh`; `chmod +x x.sh`
    // or `tar -xf /tmp/x.tgz` is not a run.
    if let Some(program) = command.program_text() {
        if names(&program) && (program.starts_with("./") || program.starts_with('/')) {
            return true;
        }
        let sudo = command
            .words
            .first()
            .and_then(|w| w.literal())
            .is_some_and(|w| w == "sudo");
        if sudo && names(&program) {
            return true;
        }
    }
    let interpreter = command
        .program()
        .is_some_and(|p| INTERPRETERS.contains(&p.as_str()));
    if !interpreter {
        return false;
    }
    // The script is the first argument that is no option, unless an option
    // says the script comes from elsewhere: `-` (standard input, a
    // here-document), `-c`/`-e` (inline), `-m` (a module).
    for arg in command.arg_texts() {
        if matches!(arg.as_str(), "-" | "-c" | "-e" | "-m") {
            return false;
        }
        if !arg.starts_with('-') {
            return names(&arg);
        }
    }
    false
}

fn verifies_checksum(command: &Command) -> bool {
    let program = command.program().unwrap_or_default();
    let args = command.arg_texts();
    let sum = program.ends_with("sum") && (program.starts_with("sha") || program.starts_with("b2"));
    (sum && args.iter().any(|a| a == "-c" || a == "--check"))
        || program == "gpg" && args.first().is_some_and(|a| a == "--verify")
        || program == "cosign" && args.first().is_some_and(|a| a == "verify-blob")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn download_and_execute_forms() {
        for bad in [
            "curl -fsSL https://x.example/install.sh | sh",
            "curl -sSf https://sh.rustup.rs | sudo -E bash -s -- -y",
            "wget -qO- https://x.example/i | bash",
            "bash <(curl -s https://x.example/i.sh)",
            "sh -c \"$(curl -fsSL https://x.example/i.sh)\"",
            "curl -fsSLo install.sh https://x.example/i.sh\nbash install.sh",
            "curl -o /tmp/i.sh https://x.example/i.sh\nchmod +x /tmp/i.sh\n/tmp/i.sh --yes",
            "wget https://x.example/setup.py\npython3 setup.py",
            "curl -LO https://x.example/get.sh && sh get.sh",
            "python -m wget https://x.example/adjust.py\npython ./adjust.py req.txt",
            "uv pip install -q -r r.txt\npython -m wget https://x.example/s/adjust.py\nfor f in `ls r/**/*.txt`; do \\\n  python ./adjust.py $f ${{ matrix.v }}; \\\ndone\n",
            "curl -fsSL \\\n  https://x.example/init \\\n  -o init\nchmod +x init\n./init -y",
        ] {
            assert!(downloads_and_runs(bad).is_some(), "{bad}");
        }
        for ok in [
            "curl --fail -d \"$body\" \"$URL/pods\"",
            "curl -o x.tar.gz https://x.example/x.tar.gz\ntar -xf x.tar.gz",
            "curl -o /tmp/x.tgz https://x.example/x.tgz\ntar -xf /tmp/x.tgz -C /opt",
            "curl -o /tmp/i.sh https://x.example/i.sh\nchmod +x /tmp/i.sh",
            "curl -fsSLo i.sh https://x.example/i.sh\necho \"$SUM  i.sh\" | sha256sum -c -\nbash i.sh",
            "gh api repos/x/y | jq .id",
            "curl -sS --output \"$f\" https://x.example/pods/1\npython3 - \"$f\" <<'PY'\nprint(1)\nPY\n",
            "echo curl | tee log",
        ] {
            assert!(downloads_and_runs(ok).is_none(), "{ok}");
        }
    }
}
