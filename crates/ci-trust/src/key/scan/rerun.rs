//! String literals a build script prints as `cargo:rerun-if-changed=`,
//! whole or split across pieces the script joins at run time.

use super::walker::TokenWalker;
use crate::key::lexer::{self, Token};

/// What a build script prints to declare the files it reads.
pub(super) const RERUN_DIRECTIVE: &str = "rerun-if-changed";

/// What the build-script directives that hand the linker arguments hold
/// (`rustc-link-arg`, `rustc-link-arg-bins`, …, `rustc-cdylib-link-arg`):
/// the files their literal values name are inputs.
pub(super) const LINK_ARG_DIRECTIVE: &str = "link-arg";

/// Whether a literal holds part of [`RERUN_DIRECTIVE`] cut where another
/// piece may complete it: it ends with a start of the word at least 5
/// characters long (`"cargo:rerun-if-"`), holds one just before a `{`
/// (`"cargo:rerun-if-{}"`), or begins with an end of it at least 10 long
/// (`"if-changed=data"`). Any two-piece split is one of these.
pub(super) fn splits_rerun_directive(value: &str) -> bool {
    let word = RERUN_DIRECTIVE;
    (5..word.len()).any(|n| {
        let head = &word[..n];
        value.ends_with(head) || value.contains(&format!("{head}{{"))
    }) || (10..word.len()).any(|n| value.starts_with(&word[word.len() - n..]))
}

impl TokenWalker<'_, '_, '_> {
    pub(super) fn record_literal(&mut self, token: Token) {
        let text = self.src.text(token);
        // Only an escape can spell the words without holding them.
        if !text.contains("rerun")
            && !text.contains("if-changed")
            && !text.contains(LINK_ARG_DIRECTIVE)
            && !text.contains('\\')
        {
            return;
        }
        let Some(value) = lexer::string_value(text) else {
            return;
        };
        let line = self.src.line(token.start);
        if value.contains(RERUN_DIRECTIVE) || value.contains(LINK_ARG_DIRECTIVE) {
            self.scan.rerun_literals.push((value, line));
        } else if splits_rerun_directive(&value) {
            // Half of the directive: the script assembles the line at run
            // time (`concat!("cargo:rerun-if-", "changed=data")`), which
            // the build-script reading treats as watching the whole package.
            self.scan
                .rerun_literals
                .push((RERUN_DIRECTIVE.to_owned(), line));
        }
    }
}
