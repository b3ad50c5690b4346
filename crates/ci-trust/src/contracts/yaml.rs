//! Loading YAML the way GitHub Actions does, into `marked-yaml` nodes that
//! keep every value's line and column.
//!
//! `marked-yaml`'s own loader refuses anchors and aliases, which GitHub
//! accepts in workflows since September 2025. This loader drives the same
//! event parser (`yaml-rust2`) itself: an alias becomes a copy of its
//! anchored node, a UTF-8 BOM is skipped, duplicate keys are errors, and a
//! merge key (`<<:`), which GitHub rejects, is reported as GitHub would.
//! Tags are ignored (GitHub reads the value). It owns nothing else: what
//! the nodes mean is [`super::workflow`]'s business.

use std::collections::HashMap;

use marked_yaml::types::{MarkedMappingNode, MarkedScalarNode, MarkedSequenceNode};
use marked_yaml::{Marker, Node, Span};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker as ScanMarker;

/// Why a text is not a workflow GitHub would load, and where.
#[derive(Debug, Clone)]
pub struct YamlError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for YamlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

/// How many nodes alias expansion may produce: a "billion laughs" file
/// (aliases of aliases) is an error, not an out-of-memory.
const NODE_BUDGET: usize = 1_000_000;

/// How many closing brackets one file may have re-indented (see [`parse`]).
const REINDENT_BUDGET: usize = 64;

/// Parses one YAML document (the first, as GitHub does). A flow collection
/// over several lines whose closing `]` or `}` sits at the indentation of
/// its key (`x: [` … `]` inside a mapping) is strictly invalid YAML, which
/// `yaml-rust2` refuses, but GitHub loads it: such a closing line is
/// re-indented to its previous line's indentation and the text parsed
/// again. Only a line that holds nothing but closing brackets is moved.
/// Likewise a quoted scalar's continuation line at its key's indentation
/// (`x: '[` … `]'`, as libyaml and GitHub accept): that line is indented
/// one more space, which changes no value, since a quoted scalar's lines
/// lose their leading white space when they are folded.
pub fn parse(text: &str) -> Result<Node, YamlError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut fixed: Option<String> = None;
    for _ in 0..REINDENT_BUDGET {
        let current = fixed.as_deref().unwrap_or(text);
        match parse_once(current) {
            Err(err) => match reindent_closing_line(current, &err) {
                Some(again) => fixed = Some(again),
                None => return Err(err),
            },
            parsed => return parsed,
        }
    }
    parse_once(fixed.as_deref().unwrap_or(text))
}

/// `text` with the line of `err` re-indented to its previous non-blank
/// line's indentation, when `err` is an indentation error on a line that
/// only closes flow collections and that line is indented less.
fn reindent_closing_line(text: &str, err: &YamlError) -> Option<String> {
    if !err.message.contains("indentation") {
        return None;
    }
    let lines: Vec<&str> = text.split('\n').collect();
    let at = err.line.checked_sub(1)?;
    let line = *lines.get(at)?;
    let body = line.trim_start();
    if err.message.contains("quoted scalar") {
        // `yaml-rust2` marks the line the scalar starts on; the line it
        // refuses is the first after it indented no deeper than that one.
        let indent = |l: &str| l.len() - l.trim_start_matches(' ').len();
        let key = indent(line);
        let (offending, text_line) = lines
            .iter()
            .enumerate()
            .skip(at + 1)
            .find(|(_, l)| !l.trim().is_empty() && indent(l) <= key)?;
        // Spaces only: a tab in the indentation is left to the error.
        if text_line[..indent(text_line)].contains('\t')
            || text_line.trim_start_matches(' ').starts_with('\t')
        {
            return None;
        }
        let mut out: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
        out[offending] = format!("{}{}", " ".repeat(key + 1 - indent(text_line)), text_line);
        return Some(out.join("\n"));
    }
    let closing = body.split('#').next().unwrap_or("").trim();
    if closing.is_empty() || !closing.chars().all(|c| matches!(c, ']' | '}' | ',' | ' ')) {
        return None;
    }
    let previous = lines[..at].iter().rev().find(|l| !l.trim().is_empty())?;
    let want = previous.len() - previous.trim_start().len();
    let have = line.len() - body.len();
    if have >= want {
        return None;
    }
    let mut out: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    out[at] = format!("{}{body}", " ".repeat(want));
    Some(out.join("\n"))
}

fn parse_once(text: &str) -> Result<Node, YamlError> {
    let mut loader = Loader::default();
    let mut parser = Parser::new_from_str(text);
    if let Err(err) = parser.load(&mut loader, false) {
        return Err(YamlError {
            line: err.marker().line(),
            column: err.marker().col() + 1,
            message: format!("YAML syntax error: {}", err.info()),
        });
    }
    if let Some(err) = loader.error {
        return Err(err);
    }
    loader.root.ok_or(YamlError {
        line: 1,
        column: 1,
        message: "the file is empty".to_owned(),
    })
}

enum Frame {
    Sequence(Marker, Vec<Node>),
    /// A mapping and the key waiting for its value.
    Mapping(Marker, Box<MarkedMappingNode>, Option<MarkedScalarNode>),
}

#[derive(Default)]
struct Loader {
    stack: Vec<(Frame, usize)>,
    anchors: HashMap<usize, Node>,
    root: Option<Node>,
    error: Option<YamlError>,
    nodes: usize,
}

fn marker(mark: ScanMarker) -> Marker {
    Marker::new(0, mark.index(), mark.line(), mark.col() + 1)
}

fn count(node: &Node) -> usize {
    match node {
        Node::Scalar(_) => 1,
        Node::Sequence(items) => 1 + items.iter().map(count).sum::<usize>(),
        Node::Mapping(map) => 1 + map.values().map(count).sum::<usize>(),
    }
}

impl Loader {
    fn fail(&mut self, mark: Marker, message: String) {
        if self.error.is_none() {
            self.error = Some(YamlError {
                line: mark.line(),
                column: mark.column(),
                message,
            });
        }
    }

    /// Adds a finished node to its parent (or makes it the document).
    fn add(&mut self, node: Node, anchor: usize, mark: Marker) {
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => {
                if self.root.is_none() {
                    self.root = Some(node);
                }
            }
            Some((Frame::Sequence(_, items), _)) => items.push(node),
            Some((Frame::Mapping(_, map, key), _)) => match key.take() {
                None => {
                    let Node::Scalar(scalar) = node else {
                        self.fail(
                            mark,
                            "a mapping key must be a plain value; GitHub would refuse it".into(),
                        );
                        return;
                    };
                    if scalar.as_str() == "<<" {
                        self.fail(
                            mark,
                            "YAML merge keys (`<<:`) are not supported by GitHub Actions, which would refuse this workflow; write the keys out".into(),
                        );
                        return;
                    }
                    *key = Some(scalar);
                }
                Some(k) => {
                    if let Some((prev, _)) = map.get_key_value(k.as_str()) {
                        let line = prev.span().start().map_or(0, |m| m.line());
                        let message = format!(
                            "the key `{}` is repeated (first on line {line}); GitHub would refuse it",
                            k.as_str()
                        );
                        let at = k.span().start().copied().unwrap_or(mark);
                        self.fail(at, message);
                        return;
                    }
                    map.insert(k, node);
                }
            },
        }
    }
}

impl MarkedEventReceiver for Loader {
    fn on_event(&mut self, event: Event, mark: ScanMarker) {
        if self.error.is_some() {
            return;
        }
        let mark = marker(mark);
        match event {
            Event::Scalar(value, _, anchor, _) => {
                self.nodes += 1;
                let node = Node::from(MarkedScalarNode::new(Span::new_start(mark), value));
                self.add(node, anchor, mark);
            }
            Event::SequenceStart(anchor, _) => {
                self.stack.push((Frame::Sequence(mark, Vec::new()), anchor));
            }
            Event::MappingStart(anchor, _) => {
                let map = MarkedMappingNode::new_empty(Span::new_start(mark));
                self.stack
                    .push((Frame::Mapping(mark, Box::new(map), None), anchor));
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some((frame, anchor)) = self.stack.pop() else {
                    return;
                };
                self.nodes += 1;
                let node = match frame {
                    Frame::Sequence(start, items) => Node::from(MarkedSequenceNode::new(
                        Span::new_with_marks(start, mark),
                        items,
                    )),
                    Frame::Mapping(start, mut map, _) => {
                        *map.span_mut() = Span::new_with_marks(start, mark);
                        Node::from(*map)
                    }
                };
                self.add(node, anchor, mark);
            }
            Event::Alias(id) => {
                let Some(node) = self.anchors.get(&id).cloned() else {
                    self.fail(mark, "an alias names an unknown anchor".into());
                    return;
                };
                self.nodes += count(&node);
                if self.nodes > NODE_BUDGET {
                    self.fail(
                        mark,
                        format!("aliases expand to more than {NODE_BUDGET} values"),
                    );
                    return;
                }
                self.add(node, 0, mark);
            }
            Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart
            | Event::DocumentEnd
            | Event::Nothing => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_aliases_bom_and_flow_collections_load() {
        let node =
            parse("\u{feff}on: push\nx: &base\n  runs-on: ubuntu-latest\ny: *base\nz: [a,\n  b]\n")
                .unwrap();
        let map = node.as_mapping().unwrap();
        let y = map.get_mapping("y").unwrap();
        assert_eq!(y.get_scalar("runs-on").unwrap().as_str(), "ubuntu-latest");
        assert_eq!(map.get_sequence("z").unwrap().len(), 2);
        assert_eq!(
            map.get_node("on").unwrap().span().start().unwrap().line(),
            1
        );
    }

    #[test]
    fn flow_collections_closed_at_the_keys_indentation_load() {
        // huggingface/accelerate's self-hosted integration tests.
        let text = "jobs:\n  t:\n    strategy:\n      matrix:\n        devices: [\n          \"0\",\n          \"0,1\"\n        ]\n        extra: {\n          a: 1\n        }\n    runs-on: x\n";
        let node = parse(text).unwrap();
        let matrix = node
            .as_mapping()
            .and_then(|m| m.get_mapping("jobs"))
            .and_then(|m| m.get_mapping("t"))
            .and_then(|m| m.get_mapping("strategy"))
            .and_then(|m| m.get_mapping("matrix"))
            .unwrap();
        assert_eq!(matrix.get_sequence("devices").unwrap().len(), 2);
        assert_eq!(matrix.get_mapping("extra").unwrap().len(), 1);
        // Other indentation errors stay errors.
        let err = parse("a:\n  b: 1\n c: 2\n").unwrap_err();
        assert!(err.message.starts_with("YAML syntax error"), "{err}");
    }

    #[test]
    fn quoted_scalars_continued_at_the_keys_indentation_load_unchanged() {
        // tenstorrent/tt-xla's nightly: a single-quoted JSON filter whose
        // lines sit at the key's indentation, as libyaml (and GitHub) load.
        let text = "jobs:\n  t:\n    with:\n      adv_filter: '[\n        { \"a\": 1 },\n      { \"b\": 2 }\n      ]'\n      other: \"x\n      y\"\n    uses: ./w.yml\n";
        let node = parse(text).unwrap();
        let with = node
            .as_mapping()
            .and_then(|m| m.get_mapping("jobs"))
            .and_then(|m| m.get_mapping("t"))
            .and_then(|m| m.get_mapping("with"))
            .unwrap();
        // The folded value is what the strict text would give.
        assert_eq!(
            with.get_scalar("adv_filter").unwrap().as_str(),
            "[ { \"a\": 1 }, { \"b\": 2 } ]"
        );
        assert_eq!(with.get_scalar("other").unwrap().as_str(), "x y");
        // Lines after the repaired ones keep their numbers.
        let uses = node
            .as_mapping()
            .and_then(|m| m.get_mapping("jobs"))
            .and_then(|m| m.get_mapping("t"))
            .and_then(|m| m.get_scalar("uses"))
            .unwrap();
        assert_eq!(uses.span().start().unwrap().line(), 10);
        // An unclosed quote is still an error.
        let err = parse("a: 'x\nb: 1\n").unwrap_err();
        assert!(err.message.starts_with("YAML syntax error"), "{err}");
    }

    #[test]
    fn merge_keys_duplicates_and_syntax_errors_are_located() {
        let err = parse("a: &x {b: 1}\nc:\n  <<: *x\n").unwrap_err();
        assert_eq!((err.line, err.column), (3, 3), "{err}");
        assert!(err.message.contains("merge keys"), "{err}");
        let err = parse("on: push\non: pull_request\n").unwrap_err();
        assert!(err.message.contains("repeated (first on line 1)"), "{err}");
        assert_eq!(err.line, 2);
        let err = parse("on: [push\n").unwrap_err();
        assert!(err.message.starts_with("YAML syntax error"), "{err}");
        let err = parse("a: *nope\n").unwrap_err();
        assert!(err.message.contains("unknown anchor"), "{err}");
    }

    #[test]
    fn alias_bombs_end_in_an_error() {
        let mut text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n".to_owned();
        for i in 1..9 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let err = parse(&text).unwrap_err();
        assert!(err.message.contains("expand to more than"), "{err}");
    }
}
