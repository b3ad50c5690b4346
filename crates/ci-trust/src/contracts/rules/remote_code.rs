//! Family `remote_code`: code a privileged job fetches from elsewhere. Third
//! party actions are pinned to a commit (`unpinned-action`); a publisher or
//! secret-holding job runs no script downloaded at run time
//! (`remote-script`).
//!
//! Owns these checks and the download-and-run recogniser. Which jobs are
//! privileged is `privileged.rs`'s (`Checker::privilege`).

use anyhow::Result;

use super::{Checker, RuleId};
use crate::contracts::expr;
use crate::contracts::roles::JobInfo;
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

/// Programs that run what is piped into them (after `sudo`, `env`, …).
const INTERPRETERS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "fish", "python", "python3", "node", "perl", "ruby",
    "pwsh", "source", ".", "eval",
];

/// The first line of a script that runs what it downloads: a pipe from
/// `curl`/`wget` into an interpreter, a process substitution, or a file
/// fetched and then run without a checksum check in between.
pub fn downloads_and_runs(script: &str) -> Option<&str> {
    // Commands in order: `curl -o x && bash x` is two of them.
    let lines: Vec<&str> = script
        .lines()
        .flat_map(|l| l.split("&&").flat_map(|c| c.split(';')))
        .flat_map(|c| c.split("||"))
        .collect();
    let is_fetch =
        |w: &str| matches!(w, "curl" | "wget") || w.ends_with("/curl") || w.ends_with("/wget");
    let mut fetched: Vec<(String, usize)> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if !words
            .iter()
            .any(|w| is_fetch(w.trim_start_matches(['(', '$', '<', '`', '"'])))
        {
            // A later line may run a file fetched earlier.
            let runs_fetched = fetched.iter().any(|(file, at)| {
                let verified = lines[*at..i].iter().any(|l| verifies_checksum(l));
                !verified && runs_file(line, file)
            });
            if runs_fetched {
                return Some(line);
            }
            continue;
        }
        // curl … | sh, wget -O- … | sudo bash
        let mut pieces = line.split('|').filter(|p| !p.trim().is_empty());
        let mut seen_fetch = false;
        for piece in pieces.by_ref() {
            let piece_words: Vec<&str> = piece.split_whitespace().collect();
            if seen_fetch {
                let program = piece_words
                    .iter()
                    .map(|w| w.rsplit('/').next().unwrap_or(w))
                    .find(|w| !matches!(*w, "sudo" | "env" | "-E" | "exec") && !w.contains('='));
                if program.is_some_and(|p| INTERPRETERS.contains(&p)) {
                    return Some(line);
                }
            }
            seen_fetch |= piece_words.iter().any(|w| is_fetch(w));
        }
        // bash <(curl …), sh -c "$(curl …)", source <(wget -qO- …)
        let substituted = ["<(curl", "<(wget", "$(curl", "$(wget", "`curl", "`wget"]
            .iter()
            .any(|s| line.contains(s));
        if substituted
            && words
                .iter()
                .any(|w| INTERPRETERS.contains(&w.trim_start_matches("sudo")))
        {
            return Some(line);
        }
        // curl -o FILE URL / wget -O FILE URL / curl -O URL (remote name)
        fetched.extend(downloaded_file(&words).map(|f| (f, i)));
    }
    None
}

/// The file a `curl`/`wget` command line writes, when it names one.
fn downloaded_file(words: &[&str]) -> Option<String> {
    let mut out = None;
    let mut url = None;
    for (i, w) in words.iter().enumerate() {
        let next = words.get(i + 1).map(|s| s.trim_matches('"').to_owned());
        match *w {
            "-o" | "--output" | "--output-document" => out = next,
            "-O" if words.iter().any(|w| w.ends_with("wget")) => out = next,
            _ if w.starts_with("--output-document=") => {
                out = w
                    .split_once('=')
                    .map(|(_, f)| f.trim_matches('"').to_owned())
            }
            _ if w.starts_with('-') && !w.starts_with("--") && w.ends_with('o') => out = next,
            _ if w.trim_matches('"').starts_with("http") => url = Some(w.trim_matches('"')),
            _ => {}
        }
    }
    let short_o = |w: &&&str| w.starts_with('-') && !w.starts_with("--") && w.contains('O');
    let remote_name = words.iter().any(|w| short_o(&w) || *w == "--remote-name")
        && !words.iter().any(|w| w.ends_with("wget"))
        || words.iter().any(|w| w.ends_with("wget")) && out.is_none();
    out.or_else(|| {
        remote_name
            .then(|| url.and_then(|u| u.rsplit('/').next()).map(str::to_owned))
            .flatten()
    })
    .filter(|f| f != "-" && !f.is_empty())
}

/// True when `line` runs `file`: as a command, or through an interpreter.
fn runs_file(line: &str, file: &str) -> bool {
    let bare = file.trim_start_matches("./");
    let words: Vec<&str> = line
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
        .filter(|w| !w.is_empty())
        .map(|w| w.trim_matches('"'))
        .collect();
    words.iter().enumerate().any(|(i, w)| {
        let names = w.trim_start_matches("./") == bare;
        if !names {
            return false;
        }
        let before = i.checked_sub(1).map(|j| words[j]);
        // `./x.sh` or `/tmp/x.sh` as the command, `bash x.sh`, `sudo x.sh`;
        // `chmod +x x.sh` or `tar -xf /tmp/x.tgz` is not a run.
        let command = i == 0 || before.is_some_and(|b| matches!(b, "sudo" | "exec" | "nohup"));
        (w.starts_with("./") || w.starts_with('/')) && command
            || before.is_some_and(|b| {
                INTERPRETERS.contains(&b.rsplit('/').next().unwrap_or(b)) || b == "sudo"
            })
    })
}

fn verifies_checksum(line: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    let sum = words
        .iter()
        .any(|w| w.ends_with("sum") && (w.starts_with("sha") || w.starts_with("b2")));
    (sum && words.iter().any(|w| *w == "-c" || *w == "--check"))
        || words.windows(2).any(|w| w == ["gpg", "--verify"])
        || words.windows(2).any(|w| w == ["cosign", "verify-blob"])
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
            "echo curl | tee log",
        ] {
            assert!(downloads_and_runs(ok).is_none(), "{ok}");
        }
    }
}
