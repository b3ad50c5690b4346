//! GitHub's filter patterns for `on.<event>.branches` (and `tags`): which
//! refs a trigger admits, as GitHub's "filter pattern cheat sheet" defines
//! them (`*` stops at `/`, `**` does not, `?` and `+` quantify the
//! character or class before them, `[…]` is a class of characters and
//! ranges, and a `!` pattern excludes what the patterns before it admitted).
//!
//! Owns the pattern grammar and [`admits_branch`]. Must not decide what a
//! start is (`roles/starts.rs`) or read workflow files (`workflow.rs`).

use super::workflow::Trigger;

/// One element of a pattern.
#[derive(Debug, Clone, PartialEq)]
enum Atom {
    Char(char),
    /// `[…]`: the characters and ranges listed.
    Class(Vec<(char, char)>),
    /// `*`: any run of characters but `/`.
    Star,
    /// `**`: any run of characters.
    DoubleStar,
}

/// How often an atom repeats: once, `?` (zero or one), `+` (one or more).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Times {
    Once,
    Optional,
    OneOrMore,
}

fn compile(pattern: &str) -> Vec<(Atom, Times)> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out: Vec<(Atom, Times)> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        let atom = match c {
            '*' if chars.get(i) == Some(&'*') => {
                i += 1;
                Atom::DoubleStar
            }
            '*' => Atom::Star,
            '\\' if i < chars.len() => {
                i += 1;
                Atom::Char(chars[i - 1])
            }
            '[' => match chars[i..].iter().position(|&c| c == ']') {
                Some(end) => {
                    let body = &chars[i..i + end];
                    i += end + 1;
                    let mut ranges = Vec::new();
                    let mut k = 0;
                    while k < body.len() {
                        if k + 2 < body.len() && body[k + 1] == '-' {
                            ranges.push((body[k], body[k + 2]));
                            k += 3;
                        } else {
                            ranges.push((body[k], body[k]));
                            k += 1;
                        }
                    }
                    Atom::Class(ranges)
                }
                None => Atom::Char('['),
            },
            // A quantifier with nothing before it is a literal.
            '?' | '+' if out.is_empty() => Atom::Char(c),
            '?' | '+' => {
                if let Some(last) = out.last_mut() {
                    if last.1 == Times::Once && !matches!(last.0, Atom::Star | Atom::DoubleStar) {
                        last.1 = if c == '?' {
                            Times::Optional
                        } else {
                            Times::OneOrMore
                        };
                        continue;
                    }
                }
                Atom::Char(c)
            }
            other => Atom::Char(other),
        };
        out.push((atom, Times::Once));
    }
    out
}

fn atom_matches(atom: &Atom, c: char) -> bool {
    match atom {
        Atom::Char(x) => *x == c,
        Atom::Class(ranges) => ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c)),
        Atom::Star => c != '/',
        Atom::DoubleStar => true,
    }
}

fn matches_from(atoms: &[(Atom, Times)], text: &[char]) -> bool {
    let Some(((atom, times), rest)) = atoms.split_first() else {
        return text.is_empty();
    };
    // How many characters this atom may take, fewest first.
    let (min, max) = match (atom, times) {
        (Atom::Star | Atom::DoubleStar, _) => (0, usize::MAX),
        (_, Times::Once) => (1, 1),
        (_, Times::Optional) => (0, 1),
        (_, Times::OneOrMore) => (1, usize::MAX),
    };
    let mut taken = 0;
    loop {
        if taken >= min && matches_from(rest, &text[taken..]) {
            return true;
        }
        if taken == max || taken == text.len() || !atom_matches(atom, text[taken]) {
            return false;
        }
        taken += 1;
    }
}

/// Whether `pattern` (one entry of a filter list, without its `!`) matches `name`.
pub fn pattern_matches(pattern: &str, name: &str) -> bool {
    let text: Vec<char> = name.chars().collect();
    matches_from(&compile(pattern), &text)
}

/// Whether a list of patterns admits `name`: the last pattern that matches
/// decides, a `!` one excluding (GitHub's order rule).
fn list_admits(patterns: &[super::workflow::Scalar], name: &str) -> bool {
    let mut admitted = false;
    for p in patterns {
        let p = p.value.trim();
        match p.strip_prefix('!') {
            Some(negated) if pattern_matches(negated, name) => admitted = false,
            Some(_) => {}
            None if pattern_matches(p, name) => admitted = true,
            None => {}
        }
    }
    admitted
}

/// Whether a push of branch `name` starts a run through `trigger` (a
/// `push` or `pull_request`-like trigger with `branches`/`branches-ignore`
/// filters). A trigger with only `tags` filters admits no branch.
pub fn admits_branch(trigger: &Trigger, name: &str) -> bool {
    if let Some(branches) = trigger.filter("branches") {
        return list_admits(branches, name);
    }
    if let Some(ignored) = trigger.filter("branches-ignore") {
        return !ignored
            .iter()
            .any(|p| pattern_matches(p.value.trim(), name));
    }
    trigger.filter("tags").is_none() && trigger.filter("tags-ignore").is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contracts::workflow::Workflow;

    #[test]
    fn patterns_follow_githubs_cheat_sheet() {
        let cases: &[(&str, &str, bool)] = &[
            ("pull-request/[0-9]+", "pull-request/1234", true),
            ("pull-request/[0-9]+", "pull-request/", false),
            ("pull-request/[0-9]+", "pull-request/12a", false),
            ("pull-request/*", "pull-request/7", true),
            ("pull-request/*", "pull-request/7/x", false),
            ("**", "pull-request/7", true),
            ("*", "pull-request/7", false),
            ("*", "main", true),
            ("main", "main", true),
            ("main", "mainline", false),
            ("releases/**", "releases/1/2", true),
            ("feature/?", "feature/", true),
            ("v1.?", "v1.", true),
            ("v1.?", "v1.0", false),
            ("[a-c]x", "bx", true),
            ("[a-c]x", "dx", false),
            ("z+", "zzz", true),
            ("+", "+", true),
        ];
        for (pattern, name, want) in cases {
            assert_eq!(
                pattern_matches(pattern, name),
                *want,
                "{pattern:?} against {name:?}"
            );
        }
    }

    fn push_trigger(on: &str) -> Trigger {
        let text = format!("on:\n{on}\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: t\n");
        let wf = Workflow::parse("t.yml", &text).unwrap();
        wf.trigger("push").unwrap().clone()
    }

    #[test]
    fn branch_filters_admit_as_github_does() {
        let pr = "pull-request/12";
        assert!(admits_branch(&push_trigger("  push:"), pr));
        assert!(admits_branch(
            &push_trigger("  push:\n    branches: ['pull-request/[0-9]+']"),
            pr
        ));
        assert!(!admits_branch(
            &push_trigger("  push:\n    branches: [main, 'branch-*']"),
            pr
        ));
        assert!(!admits_branch(
            &push_trigger("  push:\n    branches: ['**', '!pull-request/**']"),
            pr
        ));
        assert!(admits_branch(
            &push_trigger("  push:\n    branches: ['!x', 'pull-request/*']"),
            pr
        ));
        assert!(!admits_branch(
            &push_trigger("  push:\n    branches-ignore: ['pull-request/**']"),
            pr
        ));
        assert!(admits_branch(
            &push_trigger("  push:\n    branches-ignore: [main]"),
            pr
        ));
        assert!(!admits_branch(
            &push_trigger("  push:\n    tags: ['v*']"),
            pr
        ));
    }
}
