//! Rendering findings: `human` (file:line:col with the offending line and a
//! hint), `github` (workflow-command annotations), `json` and `sarif` (2.1.0,
//! for code scanning). Rendering is pure: it returns text, the caller prints.

use serde_json::{Value, json};

use super::rules::{Finding, RULES, Severity, rule};
use crate::flags::Format;
use crate::gha;

/// Where a rule is explained (a note that is no rule, such as `policy`,
/// points at its section by the same name).
pub fn docs_anchor(rule_id: &str) -> String {
    rule(rule_id).map_or_else(
        || format!("docs/contracts.md#{rule_id}"),
        |r| r.rule.docs_anchor(),
    )
}

/// Renders `findings` (sorted by the caller). `line_of(file, line)` returns
/// the source line for snippets.
/// `hidden`: how many warnings the persona left out (the human summary says so).
pub fn render(
    format: Format,
    findings: &[Finding],
    hidden: usize,
    line_of: &dyn Fn(&str, usize) -> Option<String>,
) -> String {
    match format {
        Format::Human => human(findings, hidden, line_of),
        Format::Github => github(findings),
        Format::Json => {
            serde_json::to_string_pretty(&json_findings(findings)).expect("JSON values serialise")
                + "\n"
        }
        Format::Sarif => {
            serde_json::to_string_pretty(&sarif(findings)).expect("JSON values serialise") + "\n"
        }
    }
}

fn human(
    findings: &[Finding],
    hidden: usize,
    line_of: &dyn Fn(&str, usize) -> Option<String>,
) -> String {
    let mut out = String::new();
    let active = findings.iter().filter(|f| {
        f.suppressed.is_none() && matches!(f.severity, Severity::Error | Severity::Warning)
    });
    for finding in active {
        let level = match finding.severity {
            Severity::Warning => "warning: ",
            _ => "",
        };
        out.push_str(&format!(
            "{}:{}:{}: {level}{}: {}\n",
            finding.file, finding.pos.line, finding.pos.column, finding.rule, finding.message
        ));
        if let Some(line) = line_of(&finding.file, finding.pos.line) {
            let number = finding.pos.line.to_string();
            let pad = " ".repeat(number.len());
            let caret = " ".repeat(finding.pos.column.saturating_sub(1));
            out.push_str(&format!("{pad} |\n{number} | {line}\n{pad} | {caret}^\n"));
            if let Some(rule) = rule(finding.rule) {
                out.push_str(&format!("{pad} = hint: {}\n", rule.hint));
            }
            if let Some(question) = &finding.question {
                out.push_str(&format!("{pad} = depends on: {question}\n"));
            }
            out.push_str(&format!("{pad} = see {}\n", docs_anchor(finding.rule)));
        }
        out.push('\n');
    }
    for finding in findings.iter().filter(|f| f.severity == Severity::Note) {
        out.push_str(&format!(
            "{}:{}:{}: note: {}: {}\n",
            finding.file, finding.pos.line, finding.pos.column, finding.rule, finding.message
        ));
    }
    let suppressed: Vec<&Finding> = findings.iter().filter(|f| f.suppressed.is_some()).collect();
    if !suppressed.is_empty() {
        out.push_str("suppressed (reviewed exceptions):\n");
        for finding in &suppressed {
            out.push_str(&format!(
                "  {}:{}:{}: {}: {} [{}]\n",
                finding.file,
                finding.pos.line,
                finding.pos.column,
                finding.rule,
                finding.message,
                finding.suppressed.as_deref().unwrap_or_default()
            ));
        }
    }
    let errors = count_errors(findings);
    let warnings = findings
        .iter()
        .filter(|f| f.suppressed.is_none() && f.severity == Severity::Warning)
        .count();
    let warned = match (warnings, hidden) {
        (0, 0) => String::new(),
        (0, h) => format!(", {h} warning(s) not shown (`--persona auditor` shows them)"),
        (w, _) => format!(", {w} warning(s)"),
    };
    out.push_str(&format!(
        "check-contracts: {errors} finding(s), {} suppressed, {} note(s){warned}\n",
        suppressed.len(),
        findings
            .iter()
            .filter(|f| f.severity == Severity::Note)
            .count()
    ));
    out
}

/// A Markdown summary for the Actions job page: the failing findings as a table.
pub fn markdown_summary(findings: &[Finding]) -> String {
    let errors = count_errors(findings);
    let mut out = format!("### check-contracts: {errors} finding(s)\n\n");
    if errors == 0 {
        out.push_str("The workflows satisfy the cache-trust contracts.\n");
        return out;
    }
    out.push_str("| rule | location | message |\n|---|---|---|\n");
    for f in findings
        .iter()
        .filter(|f| f.suppressed.is_none() && f.severity == Severity::Error)
    {
        // File names and messages carry workflow text a pull request
        // controls: escaped, so that they inject no markup.
        out.push_str(&format!(
            "| [`{}`]({}) | {} | {} |\n",
            f.rule,
            docs_anchor(f.rule),
            gha::markdown_code(&format!("{}:{}:{}", f.file, f.pos.line, f.pos.column)),
            gha::escape_markdown(&f.message)
        ));
    }
    out
}

/// The findings that fail the check.
pub fn count_errors(findings: &[Finding]) -> usize {
    findings
        .iter()
        .filter(|f| f.suppressed.is_none() && f.severity == Severity::Error)
        .count()
}

fn github(findings: &[Finding]) -> String {
    let mut out = String::new();
    for finding in findings {
        let location = gha::Location {
            file: finding.file.clone(),
            line: finding.pos.line,
            column: finding.pos.column,
        };
        let (level, message) = match (&finding.suppressed, finding.severity) {
            (Some(reason), _) => (
                "notice",
                format!("suppressed: {} [{reason}]", finding.message),
            ),
            (None, Severity::Note) => ("notice", finding.message.clone()),
            (None, Severity::Warning) => (
                "warning",
                format!(
                    "{} (depends on: {}; see {})",
                    finding.message,
                    finding
                        .question
                        .as_deref()
                        .unwrap_or("what the workflows do not show"),
                    docs_anchor(finding.rule)
                ),
            ),
            (None, Severity::Error) => (
                "error",
                format!("{} (see {})", finding.message, docs_anchor(finding.rule)),
            ),
        };
        out.push_str(&gha::annotation(level, &location, finding.rule, &message));
        out.push('\n');
    }
    out
}

fn json_findings(findings: &[Finding]) -> Value {
    Value::Array(
        findings
            .iter()
            .map(|f| {
                json!({
                    "rule": f.rule,
                    "severity": f.severity.as_str(),
                    "confidence": f.confidence.as_str(),
                    "question": f.question,
                    "file": f.file,
                    "line": f.pos.line,
                    "column": f.pos.column,
                    "message": f.message,
                    "workflow": f.workflow,
                    "job": f.job,
                    "suppressed": f.suppressed.is_some(),
                    "suppression": f.suppressed,
                    "help": rule(f.rule).map(|r| r.hint),
                    "docs": docs_anchor(f.rule),
                })
            })
            .collect(),
    )
}

fn sarif(findings: &[Finding]) -> Value {
    let rules: Vec<Value> = RULES
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "name": r.id,
                "shortDescription": { "text": r.summary },
                "fullDescription": { "text": r.summary },
                "help": { "text": format!("{} (see {})", r.hint, r.rule.docs_anchor()) },
                "defaultConfiguration": { "level": "error" },
                "properties": { "tags": ["security", "ci-cache-trust", r.family.as_str()] },
            })
        })
        .collect();
    let results: Vec<Value> = findings
        .iter()
        .map(|f| {
            let mut result = json!({
                "ruleId": f.rule,
                "level": f.severity.as_str(),
                "message": { "text": match &f.question {
                    Some(q) => format!("{} (depends on: {q})", f.message),
                    None => f.message.clone(),
                } },
                "properties": { "confidence": f.confidence.as_str() },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": f.file, "uriBaseId": "%SRCROOT%" },
                        "region": { "startLine": f.pos.line.max(1), "startColumn": f.pos.column.max(1) },
                    }
                }],
            });
            if let Some(index) = RULES.iter().position(|r| r.id == f.rule) {
                result["ruleIndex"] = json!(index);
            }
            if let Some(reason) = &f.suppressed {
                let kind = if reason.starts_with("inline") { "inSource" } else { "external" };
                result["suppressions"] = json!([{ "kind": kind, "justification": reason }]);
            }
            result
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "check-contracts",
                    "fullName": "cargo xtask check-contracts",
                    "version": env!("CARGO_PKG_VERSION"),
                    "rules": rules,
                }
            },
            "originalUriBaseIds": { "%SRCROOT%": { "description": { "text": "The repository root (--root)." } } },
            "results": results,
        }]
    })
}
