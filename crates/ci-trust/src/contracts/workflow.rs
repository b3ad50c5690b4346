//! The workflow model: the parts of a GitHub Actions workflow file that the
//! contracts look at, each value carrying the line and column it came from.
//!
//! Parsing is done by [`super::yaml`] (a real YAML parser, anchors and
//! aliases included, that keeps spans, into `marked-yaml` nodes);
//! this module turns its tree into plain structs so that the rules never deal
//! with YAML shapes. A file that is not valid YAML, or whose structure GitHub
//! would refuse (a `jobs` that is not a mapping, a step that is not a
//! mapping), is an input error with its location, never a panic.

use std::path::Path;

use anyhow::{Context, Result, bail};
use marked_yaml::{Node, types::MarkedMappingNode};

/// A 1-based line and column in a workflow file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

/// A scalar value with where it was written.
#[derive(Debug, Clone, Default)]
pub struct Scalar {
    pub value: String,
    pub pos: Pos,
}

/// One `*.yml` file under `.github/workflows`.
#[derive(Debug)]
pub struct Workflow {
    /// The file name, as policies and `uses: ./.github/workflows/NAME` name it.
    pub name: String,
    /// Its `name:`, as `on: workflow_run: workflows:` names it.
    pub display_name: Option<String>,
    /// It has no `on:` (commented out to disable it), so it never runs.
    pub disabled: bool,
    /// The `on.workflow_call.inputs` names and their `default:` (if any).
    pub call_inputs: Vec<(String, Option<String>)>,
    /// The declared `type:` of each `workflow_call` input (`string` unless said).
    pub call_input_types: Vec<(String, String)>,
    /// The `on.workflow_dispatch.inputs`.
    pub dispatch_inputs: Vec<DispatchInput>,
    /// The repository-relative path, `/`-separated, as findings report it.
    pub path: String,
    /// The raw lines, for snippets, inline allow comments and locating text in `run:` blocks.
    pub lines: Vec<String>,
    /// `run-name:`, which GitHub evaluates before any job runs.
    pub run_name: Option<Scalar>,
    pub triggers: Vec<Trigger>,
    pub permissions: Option<Permissions>,
    pub cache_mode: Option<Scalar>,
    pub env: Vec<(Scalar, Scalar)>,
    pub default_working_directory: Option<Scalar>,
    /// `defaults.run.shell`.
    pub default_shell: Option<Scalar>,
    pub jobs: Vec<Job>,
}

/// A `workflow_dispatch` input: its name, `type:` and `options:`.
#[derive(Debug, Clone)]
pub struct DispatchInput {
    pub name: String,
    pub kind: String,
    pub options: Vec<String>,
}

/// An event under `on:`, with its filters (`branches: [main]`, `types: [completed]`, …).
#[derive(Debug, Clone)]
pub struct Trigger {
    pub event: Scalar,
    pub filters: Vec<(Scalar, Vec<Scalar>)>,
}

impl Trigger {
    pub fn filter(&self, name: &str) -> Option<&[Scalar]> {
        self.filters
            .iter()
            .find(|(key, _)| key.value == name)
            .map(|(_, values)| values.as_slice())
    }
}

/// A `permissions:` value: `read-all`/`write-all`/`{}` or a scope map.
#[derive(Debug, Clone)]
pub enum Permissions {
    Shorthand(Scalar),
    Map { scopes: Vec<(Scalar, Scalar)> },
}

#[derive(Debug)]
pub struct Job {
    pub id: Scalar,
    /// `strategy.matrix`, as JSON (scalars as strings); `None` without one.
    pub matrix: Option<serde_json::Value>,
    /// `outputs:`: what `needs.<id>.outputs.<name>` reads.
    pub outputs: Vec<(Scalar, Scalar)>,
    pub if_cond: Option<Scalar>,
    /// Every label `runs-on` names (plain, list, or `labels:` of a group form),
    /// with matrix expressions resolved where the matrix lists the values.
    pub runs_on: Vec<Scalar>,
    /// `runs-on` could not be resolved to labels (a `group:`, an expression, …).
    pub runs_on_unresolved: Option<Scalar>,
    /// Host storage the job's container mounts (`container.volumes`, and
    /// `-v`/`--volume`/`--mount` bind or volume mounts in
    /// `container.options`): state kept on the runner's host, outside the job.
    pub host_mounts: Vec<Scalar>,
    pub permissions: Option<Permissions>,
    pub cache_mode: Option<Scalar>,
    /// A reusable workflow this job calls.
    pub uses: Option<Scalar>,
    /// `secrets: inherit`.
    pub secrets_inherit: Option<Scalar>,
    /// The `with:` inputs a job passes to the reusable workflow it calls.
    pub with: Vec<(Scalar, Scalar)>,
    pub env: Vec<(Scalar, Scalar)>,
    pub default_working_directory: Option<Scalar>,
    /// `defaults.run.shell`.
    pub default_shell: Option<Scalar>,
    /// The jobs named by `needs:` (a name or a list).
    pub needs: Vec<Scalar>,
    /// `continue-on-error:` (a literal or an expression).
    pub continue_on_error: Option<Scalar>,
    pub steps: Vec<Step>,
    /// Every scalar in the job, keys excluded, for expression scans (`secrets.X`).
    pub scalars: Vec<Scalar>,
}

#[derive(Debug, Clone)]
pub struct Step {
    /// Where the step starts (its first key).
    pub pos: Pos,
    pub index: usize,
    pub id: Option<Scalar>,
    pub uses: Option<Scalar>,
    pub run: Option<Scalar>,
    pub with: Vec<(Scalar, Scalar)>,
    pub env: Vec<(Scalar, Scalar)>,
    pub working_directory: Option<Scalar>,
    /// `continue-on-error:` (a literal or an expression).
    pub continue_on_error: Option<Scalar>,
    /// The step's `if:`.
    pub if_cond: Option<Scalar>,
    /// `shell:`.
    pub shell: Option<Scalar>,
}

impl Step {
    /// The `run:` script as the shell reads it (`None` for an action
    /// step), parsed once per text.
    pub fn script(&self) -> Option<std::rc::Rc<super::shell::Script>> {
        let run = self.run.as_ref()?;
        Some(super::shell::Script::cached(&run.value))
    }

    /// The value of `with: NAME`. The runner reads an action's input names
    /// without regard to case (`Allow_Forks` is `allow_forks`).
    pub fn input(&self, name: &str) -> Option<&Scalar> {
        self.with
            .iter()
            .find(|(key, _)| key.value.eq_ignore_ascii_case(name))
            .map(|(_, value)| value)
    }

    /// True when two of its `with:` names differ only in case: which of
    /// them the action reads is not known.
    pub fn has_ambiguous_inputs(&self) -> bool {
        self.with.iter().enumerate().any(|(i, (a, _))| {
            self.with[i + 1..]
                .iter()
                .any(|(b, _)| a.value.eq_ignore_ascii_case(&b.value))
        })
    }

    /// The action this step uses, split into its name and ref
    /// (`actions/cache/restore`, `v4`); `None` for `run` steps.
    pub fn action(&self) -> Option<(&str, &str)> {
        let uses = self.uses.as_ref()?;
        Some(split_uses(&uses.value))
    }

    /// The major version a `uses: owner/repo@vN[.…]` tag names; `None` for a
    /// branch, a commit or any other ref, whose version is not known.
    pub fn major_version(&self) -> Option<u32> {
        let (_, reference) = self.action()?;
        reference.strip_prefix('v')?.split('.').next()?.parse().ok()
    }

    /// True when the step uses `name` (any ref), e.g. `actions/checkout`.
    pub fn uses_action(&self, name: &str) -> bool {
        self.action()
            .is_some_and(|(action, _)| action.eq_ignore_ascii_case(name))
    }
}

/// Splits `owner/repo/path@ref` at the last `@`.
pub fn split_uses(uses: &str) -> (&str, &str) {
    match uses.rsplit_once('@') {
        Some((name, reference)) => (name, reference),
        None => (uses, ""),
    }
}

pub fn lookup<'a>(pairs: &'a [(Scalar, Scalar)], name: &str) -> Option<&'a Scalar> {
    pairs
        .iter()
        .find(|(key, _)| key.value == name)
        .map(|(_, value)| value)
}

impl Workflow {
    /// Reads and models `path`; `rel` is how findings name it.
    pub fn load(path: &Path, rel: &str) -> Result<Workflow> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read workflow {}", path.display()))?;
        Workflow::parse(rel, &text)
    }

    pub fn parse(rel: &str, text: &str) -> Result<Workflow> {
        let root = super::yaml::parse(text).map_err(|err| anyhow::anyhow!("{rel}:{err}"))?;
        let root = root
            .as_mapping()
            .with_context(|| format!("{rel}:1:1: a workflow must be a mapping"))?;
        let name = rel.rsplit('/').next().unwrap_or(rel).to_owned();
        let mut workflow = Workflow {
            display_name: root.get_node("name").and_then(scalar).map(|s| s.value),
            disabled: false,
            name,
            path: rel.to_owned(),
            lines: text.lines().map(str::to_owned).collect(),
            triggers: Vec::new(),
            permissions: None,
            run_name: None,
            cache_mode: None,
            env: Vec::new(),
            default_working_directory: None,
            default_shell: None,
            jobs: Vec::new(),
            call_inputs: Vec::new(),
            call_input_types: Vec::new(),
            dispatch_inputs: Vec::new(),
        };
        let ctx = Ctx { file: rel };
        // No `on:` (commented out to disable it): a workflow that never runs.
        let on = root.get_node("on");
        workflow.disabled = on.is_none();
        if let Some(on) = on {
            workflow.triggers = ctx.triggers(on)?;
        }
        if let Some(inputs) = on
            .and_then(|on| on.as_mapping())
            .and_then(|m| m.get_mapping("workflow_call"))
            .and_then(|m| m.get_mapping("inputs"))
        {
            for (name, spec) in inputs.iter() {
                let default = spec
                    .as_mapping()
                    .and_then(|s| s.get_node("default"))
                    .and_then(scalar)
                    .map(|d| d.value);
                let kind = spec
                    .as_mapping()
                    .and_then(|s| s.get_node("type"))
                    .and_then(scalar)
                    .map_or_else(|| "string".to_owned(), |t| t.value);
                workflow
                    .call_input_types
                    .push((name.as_str().to_owned(), kind));
                workflow
                    .call_inputs
                    .push((name.as_str().to_owned(), default));
            }
        }
        if let Some(inputs) = on
            .and_then(|on| on.as_mapping())
            .and_then(|m| m.get_mapping("workflow_dispatch"))
            .and_then(|m| m.get_mapping("inputs"))
        {
            for (name, spec) in inputs.iter() {
                let spec = spec.as_mapping();
                let kind = spec
                    .and_then(|s| s.get_node("type"))
                    .and_then(scalar)
                    .map_or_else(|| "string".to_owned(), |t| t.value);
                let options = spec
                    .and_then(|s| s.get_node("options"))
                    .map(scalars_of)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|o| o.value)
                    .collect();
                workflow.dispatch_inputs.push(DispatchInput {
                    name: name.as_str().to_owned(),
                    kind,
                    options,
                });
            }
        }
        workflow.permissions = root
            .get_node("permissions")
            .map(|node| ctx.permissions(node))
            .transpose()?;
        workflow.cache_mode = root.get_node("cache-mode").and_then(scalar);
        workflow.run_name = root.get_node("run-name").and_then(scalar);
        workflow.env = ctx.pairs(root.get_node("env"), "env")?;
        workflow.default_working_directory = default_working_directory(root);
        workflow.default_shell = default_shell(root);
        let Some(jobs) = root.get_node("jobs") else {
            bail!("{rel}:1:1: the workflow has no `jobs:`; GitHub would refuse it");
        };
        let jobs = ctx.mapping(jobs, "jobs")?;
        for (id, node) in jobs.iter() {
            workflow.jobs.push(ctx.job(key_scalar(id), node)?);
        }
        Ok(workflow)
    }

    /// The jobs by id.
    pub fn job(&self, id: &str) -> Option<&Job> {
        self.jobs.iter().find(|job| job.id.value == id)
    }

    /// The events that start this workflow directly.
    pub fn events(&self) -> impl Iterator<Item = &str> {
        self.triggers.iter().map(|t| t.event.value.as_str())
    }

    /// The trigger of `event`, if the workflow has one.
    pub fn trigger(&self, event: &str) -> Option<&Trigger> {
        self.triggers.iter().find(|t| t.event.value == event)
    }

    /// The text of a 1-based line, or "" past the end.
    pub fn line(&self, line: usize) -> &str {
        line.checked_sub(1)
            .and_then(|i| self.lines.get(i))
            .map_or("", String::as_str)
    }

    /// Where `needle` appears in the file at or after `from` (the key of a
    /// block scalar, whose own span the parser does not report usefully).
    pub fn locate(&self, from: Pos, needle: &str) -> Pos {
        let needle = needle.trim();
        if needle.is_empty() {
            return from;
        }
        for (i, line) in self
            .lines
            .iter()
            .enumerate()
            .skip(from.line.saturating_sub(1))
        {
            if let Some(col) = line.find(needle) {
                return Pos {
                    line: i + 1,
                    column: line[..col].chars().count() + 1,
                };
            }
        }
        from
    }
}

/// A local composite action: its steps and the defaults of its inputs.
#[derive(Debug)]
pub struct CompositeAction {
    pub steps: Vec<Step>,
    pub input_defaults: Vec<(String, String)>,
}

/// A local action's `action.yml` (`rel` names it in errors) when it is a
/// composite action; `None` for JavaScript and Docker actions, which have no
/// steps to check.
pub fn composite_action(rel: &str, text: &str) -> Result<Option<CompositeAction>> {
    let root = super::yaml::parse(text)
        .map_err(|err| anyhow::anyhow!("{rel}:{err}; fix the action's YAML"))?;
    let ctx = Ctx { file: rel };
    let root = ctx.mapping(&root, "the action file")?;
    let Some(runs) = root.get_node("runs") else {
        bail!("{rel}:1:1: the action has no `runs:`; GitHub would refuse it");
    };
    let runs = ctx.mapping(runs, "runs")?;
    let composite = runs
        .get_node("using")
        .and_then(scalar)
        .is_some_and(|using| using.value.trim().eq_ignore_ascii_case("composite"));
    if !composite {
        return Ok(None);
    }
    let mut input_defaults = Vec::new();
    if let Some(inputs) = root.get_mapping("inputs") {
        for (name, spec) in inputs.iter() {
            let default = spec
                .as_mapping()
                .and_then(|spec| spec.get_node("default"))
                .and_then(scalar);
            if let Some(default) = default {
                input_defaults.push((name.as_str().to_owned(), default.value));
            }
        }
    }
    let mut steps = Vec::new();
    if let Some(list) = runs.get_node("steps") {
        let list = list
            .as_sequence()
            .with_context(|| format!("{}: `runs.steps` must be a list", ctx.at(list)))?;
        for (index, step) in list.iter().enumerate() {
            steps.push(ctx.step(index, step)?);
        }
    }
    Ok(Some(CompositeAction {
        steps,
        input_defaults,
    }))
}

/// The repository path of a `uses:` that names this repository: `./PATH`
/// (the workspace, for actions; this commit, for reusable workflows) or
/// `$/PATH` (GitHub's self-repository form: the workflow's own repository
/// at the commit that is running, for actions and reusable workflows alike).
pub fn local_uses(uses: &str) -> Option<&str> {
    let uses = uses.trim();
    uses.strip_prefix("./").or_else(|| uses.strip_prefix("$/"))
}

/// A local composite action opened for one use of it: its file, and its
/// steps with every `${{ inputs.NAME }}` that is a whole value resolved
/// from the caller's `with:` (itself resolved from `outer`) or the input's
/// default. This is the one place composite actions are expanded; the
/// role inference and the rules both read these steps.
pub struct ExpandedAction {
    pub file: String,
    pub steps: Vec<Step>,
    /// The inputs as resolved, for nested expansion.
    pub inputs: Vec<(String, String)>,
}

/// What `uses: ./DIR` names: `Ok(None)` when the tree at `root` has no
/// `action.yml` there (the caller decides what that means), an expansion
/// with no steps for JavaScript and Docker actions.
pub fn expand_local_action(
    root: &Path,
    step: &Step,
    outer: &[(String, String)],
) -> Result<Option<ExpandedAction>> {
    let Some(uses) = &step.uses else {
        return Ok(None);
    };
    let Some(file) = local_action_file(root, &uses.value) else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(root.join(&file))
        .with_context(|| format!("cannot read the local action {file}"))?;
    let Some(action) = composite_action(&file, &text)? else {
        return Ok(Some(ExpandedAction {
            file,
            steps: Vec::new(),
            inputs: Vec::new(),
        }));
    };
    let mut inputs = action.input_defaults.clone();
    for (name, value) in &step.with {
        let value = resolve_input(&value.value, outer);
        inputs.retain(|(n, _)| *n != name.value);
        inputs.push((name.value.clone(), value));
    }
    let steps = action
        .steps
        .iter()
        .map(|inner| {
            let mut inner = inner.clone();
            for (_, value) in inner.with.iter_mut().chain(inner.env.iter_mut()) {
                value.value = resolve_input(&value.value, &inputs);
            }
            inner
        })
        .collect();
    Ok(Some(ExpandedAction {
        file,
        steps,
        inputs,
    }))
}

/// `${{ inputs.NAME }}` (the whole value) replaced by the input's value.
pub fn resolve_input(value: &str, inputs: &[(String, String)]) -> String {
    let name = value
        .trim()
        .strip_prefix("${{")
        .and_then(|v| v.strip_suffix("}}"))
        .map(str::trim)
        .and_then(|body| body.strip_prefix("inputs."));
    match name.and_then(|name| inputs.iter().find(|(n, _)| n == name)) {
        Some((_, resolved)) => resolved.clone(),
        None => value.to_owned(),
    }
}

/// The `action.yml` (or `action.yaml`) of a local action `uses: ./DIR`,
/// repository-relative, when the tree at `root` has one.
pub fn local_action_file(root: &Path, uses: &str) -> Option<String> {
    // `uses: ./` is the action at the workspace root.
    let dir = local_uses(uses)?.trim_end_matches('/');
    ["action.yml", "action.yaml"]
        .iter()
        .map(|name| match dir {
            "" => (*name).to_owned(),
            dir => format!("{dir}/{name}"),
        })
        .find(|rel| root.join(rel).is_file())
}

struct Ctx<'a> {
    file: &'a str,
}

impl Ctx<'_> {
    fn at(&self, node: &Node) -> String {
        let pos = node_pos(node);
        format!("{}:{}:{}", self.file, pos.line, pos.column)
    }

    fn mapping<'n>(&self, node: &'n Node, what: &str) -> Result<&'n MarkedMappingNode> {
        node.as_mapping()
            .with_context(|| format!("{}: `{what}` must be a mapping", self.at(node)))
    }

    fn triggers(&self, on: &Node) -> Result<Vec<Trigger>> {
        let mut triggers = Vec::new();
        match on {
            Node::Scalar(_) => triggers.push(Trigger {
                event: scalar(on).unwrap_or_default(),
                filters: Vec::new(),
            }),
            Node::Sequence(events) => {
                for event in events.iter() {
                    let event = scalar(event).with_context(|| {
                        format!("{}: an event in `on:` must be a name", self.at(event))
                    })?;
                    triggers.push(Trigger {
                        event,
                        filters: Vec::new(),
                    });
                }
            }
            Node::Mapping(events) => {
                for (event, config) in events.iter() {
                    let mut filters = Vec::new();
                    if let Node::Mapping(config) = config {
                        for (name, values) in config.iter() {
                            filters.push((key_scalar(name), scalars_of(values)));
                        }
                    }
                    triggers.push(Trigger {
                        event: key_scalar(event),
                        filters,
                    });
                }
            }
        }
        Ok(triggers)
    }

    fn permissions(&self, node: &Node) -> Result<Permissions> {
        match node {
            Node::Scalar(_) => Ok(Permissions::Shorthand(scalar(node).unwrap_or_default())),
            Node::Mapping(map) => Ok(Permissions::Map {
                scopes: map
                    .iter()
                    .map(|(scope, level)| {
                        let level = scalar(level).with_context(|| {
                            format!("{}: a permission level must be a word", self.at(level))
                        })?;
                        Ok((key_scalar(scope), level))
                    })
                    .collect::<Result<_>>()?,
            }),
            Node::Sequence(_) => bail!(
                "{}: `permissions` must be `read-all`, `write-all` or a mapping",
                self.at(node)
            ),
        }
    }

    /// A mapping of names to scalar values (`env:`, `with:`); absent means empty.
    fn pairs(&self, node: Option<&Node>, what: &str) -> Result<Vec<(Scalar, Scalar)>> {
        let Some(node) = node else {
            return Ok(Vec::new());
        };
        // `env: ${{ fromJSON(...) }}` is legal; keep it visible to the scans as one value.
        if let Some(value) = scalar(node) {
            return Ok(vec![(Scalar::default(), value)]);
        }
        let map = self.mapping(node, what)?;
        Ok(map
            .iter()
            .map(|(key, value)| {
                let key = key_scalar(key);
                let value = value_scalar(&key, value);
                (key, value)
            })
            .collect())
    }

    fn job(&self, id: Scalar, node: &Node) -> Result<Job> {
        let map = self.mapping(node, &format!("jobs.{}", id.value))?;
        let (runs_on, runs_on_unresolved) = runs_on(map);
        let mut job = Job {
            matrix: map
                .get_mapping("strategy")
                .and_then(|s| s.get_node("matrix"))
                .map(to_json),
            outputs: self.pairs(map.get_node("outputs"), "outputs")?,
            if_cond: map.get_node("if").map(|v| value_scalar(&id, v)),
            runs_on,
            runs_on_unresolved,
            host_mounts: host_mounts(map),
            permissions: map
                .get_node("permissions")
                .map(|node| self.permissions(node))
                .transpose()?,
            cache_mode: map.get_node("cache-mode").and_then(scalar),
            uses: map.get_node("uses").and_then(scalar),
            secrets_inherit: map
                .get_node("secrets")
                .and_then(scalar)
                .filter(|s| s.value == "inherit"),
            with: self.pairs(map.get_node("with"), "with")?,
            env: self.pairs(map.get_node("env"), "env")?,
            default_working_directory: default_working_directory(map),
            default_shell: default_shell(map),
            needs: map.get_node("needs").map(scalars_of).unwrap_or_default(),
            continue_on_error: map
                .get_node("continue-on-error")
                .map(|v| value_scalar(&id, v)),
            steps: Vec::new(),
            scalars: Vec::new(),
            id,
        };
        collect_scalars(node, &mut job.scalars);
        if let Some(steps) = map.get_node("steps") {
            let steps = steps.as_sequence().with_context(|| {
                format!(
                    "{}: `jobs.{}.steps` must be a list",
                    self.at(steps),
                    job.id.value
                )
            })?;
            for (index, step) in steps.iter().enumerate() {
                job.steps.push(self.step(index, step)?);
            }
        }
        Ok(job)
    }

    fn step(&self, index: usize, node: &Node) -> Result<Step> {
        let map = node
            .as_mapping()
            .with_context(|| format!("{}: a step must be a mapping", self.at(node)))?;
        let pos = map
            .keys()
            .filter_map(|key| key.span().start())
            .map(|m| Pos {
                line: m.line(),
                column: m.column(),
            })
            .min()
            .unwrap_or_else(|| node_pos(node));
        let entry = |name: &str| {
            map.iter()
                .find(|(key, _)| key.as_str() == name)
                .map(|(key, value)| value_scalar(&key_scalar(key), value))
        };
        Ok(Step {
            pos,
            index,
            id: entry("id"),
            uses: entry("uses"),
            run: entry("run"),
            with: self.pairs(map.get_node("with"), "with")?,
            env: self.pairs(map.get_node("env"), "env")?,
            working_directory: entry("working-directory"),
            continue_on_error: entry("continue-on-error"),
            if_cond: entry("if"),
            shell: entry("shell"),
        })
    }
}

fn default_shell(map: &MarkedMappingNode) -> Option<Scalar> {
    map.get_mapping("defaults")?
        .get_mapping("run")?
        .get_node("shell")
        .and_then(scalar)
}

fn default_working_directory(map: &MarkedMappingNode) -> Option<Scalar> {
    map.get_mapping("defaults")?
        .get_mapping("run")?
        .get_node("working-directory")
        .and_then(scalar)
}

/// The host storage a job's `container:` mounts: each `volumes:` entry
/// and each `-v`/`--volume`/`--mount` in `options:` whose source is a host
/// path or a named volume (both outlive the job on the host); `tmpfs`
/// mounts are left out.
fn host_mounts(job: &MarkedMappingNode) -> Vec<Scalar> {
    let Some(container) = job.get_mapping("container") else {
        return Vec::new();
    };
    let mut mounts: Vec<Scalar> = container
        .get_node("volumes")
        .map(scalars_of)
        .unwrap_or_default();
    if let Some(options) = container.get_node("options").and_then(scalar) {
        let words: Vec<&str> = options.value.split_whitespace().collect();
        let mut i = 0;
        while i < words.len() {
            let (flag, inline) = match words[i].split_once('=') {
                Some((flag, value)) if flag.starts_with("--") => (flag, Some(value)),
                _ => (words[i], None),
            };
            if matches!(flag, "-v" | "--volume" | "--mount") {
                let value = inline.or_else(|| words.get(i + 1).copied());
                if inline.is_none() {
                    i += 1;
                }
                let bind = value
                    .filter(|v| flag != "--mount" || !v.split(',').any(|kv| kv == "type=tmpfs"));
                if let Some(value) = bind {
                    mounts.push(Scalar {
                        value: value.to_owned(),
                        pos: options.pos,
                    });
                }
            }
            i += 1;
        }
    }
    mounts
}

/// Resolves `runs-on` to labels. A `${{ matrix.NAME }}` is replaced by the
/// values the job's matrix lists for NAME (and its `include` entries); any
/// other expression, or a runner `group`, is unresolved.
fn runs_on(job: &MarkedMappingNode) -> (Vec<Scalar>, Option<Scalar>) {
    let Some(node) = job.get_node("runs-on") else {
        return (Vec::new(), None);
    };
    let raw: Vec<Scalar> = match node {
        Node::Mapping(map) => {
            if let Some(group) = map.get_node("group") {
                return (Vec::new(), scalar(group));
            }
            map.get_node("labels").map(scalars_of).unwrap_or_default()
        }
        _ => scalars_of(node),
    };
    let mut labels = Vec::new();
    for label in raw {
        if !label.value.contains("${{") {
            labels.push(label);
            continue;
        }
        let Some(inner) = label
            .value
            .trim()
            .strip_prefix("${{")
            .and_then(|s| s.strip_suffix("}}"))
            .map(str::trim)
        else {
            return (labels, Some(label));
        };
        match expression_labels(job, inner, label.pos) {
            Some(values) if !values.is_empty() => labels.extend(values),
            _ => return (labels, Some(label)),
        }
    }
    (labels, None)
}

/// The labels a `runs-on` expression can name: `matrix.a.b` (through
/// nested objects and `include` entries), `fromJSON('["l1","l2"]')` or
/// `fromJSON(matrix.x)`, and the literal branches of a conditional
/// (`cond && 'gpu' || 'ubuntu-latest'`). `None` for anything else.
fn expression_labels(job: &MarkedMappingNode, inner: &str, pos: Pos) -> Option<Vec<Scalar>> {
    let at = |values: Vec<String>| {
        values
            .into_iter()
            .map(|value| Scalar { value, pos })
            .collect::<Vec<_>>()
    };
    // `a && 'x' || 'y'`, `matrix.os || 'ubuntu-latest'`: the outcomes are
    // the literals and matrix values among the operands; a condition
    // (`x == 'y'`) is skipped; any other outcome is unknown.
    if inner.contains("&&") || inner.contains("||") {
        let mut out = Vec::new();
        let mut rest = inner;
        let mut op_before: Option<&str> = None;
        loop {
            let next = [rest.find("&&"), rest.find("||")]
                .into_iter()
                .flatten()
                .min();
            let (operand, op_after) = match next {
                Some(i) => (&rest[..i], Some(&rest[i..i + 2])),
                None => (rest, None),
            };
            let operand = operand
                .trim()
                .trim_start_matches('(')
                .trim_end_matches(')')
                .trim();
            let identifier = |p: &str| {
                p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
            };
            if let Some(lit) = operand
                .strip_prefix('\'')
                .and_then(|l| l.strip_suffix('\''))
            {
                if op_before.is_some() || op_after == Some("||") {
                    out.push(Scalar {
                        value: lit.to_owned(),
                        pos,
                    });
                }
            } else if let Some(path) = operand.strip_prefix("matrix.").filter(|p| identifier(p)) {
                out.extend(matrix_values(job, path, pos)?);
            } else if op_before == Some("||")
                || op_after == Some("||")
                    && op_before.is_none()
                    && !operand.contains("==")
                    && !operand.contains("!=")
            {
                return None;
            }
            match next {
                Some(i) => {
                    op_before = op_after;
                    rest = &rest[i + 2..];
                }
                None => break,
            }
        }
        return (!out.is_empty()).then_some(out);
    }
    if let Some(path) = inner.strip_prefix("matrix.") {
        return matrix_values(job, path, pos);
    }
    let lower = inner.to_ascii_lowercase();
    if let Some(arg) = lower
        .strip_prefix("fromjson(")
        .and_then(|_| inner.get("fromJSON(".len()..))
        .and_then(|a| a.trim().strip_suffix(')'))
        .map(str::trim)
    {
        if let Some(path) = arg.strip_prefix("matrix.") {
            // A matrix value holding JSON text.
            let texts = matrix_values(job, path, pos)?;
            let mut out = Vec::new();
            for text in texts {
                out.extend(json_labels(&text.value)?);
            }
            return Some(at(out));
        }
        let literal = arg.strip_prefix('\'')?.strip_suffix('\'')?;
        return json_labels(&literal.replace("''", "'")).map(at);
    }
    None
}

/// The labels of a JSON runner value: a string or a list of strings.
fn json_labels(text: &str) -> Option<Vec<String>> {
    match serde_json::from_str::<serde_json::Value>(text).ok()? {
        serde_json::Value::String(label) => Some(vec![label]),
        serde_json::Value::Array(items) => items
            .into_iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => None,
    }
}

/// The values of `matrix.PATH` (`os`, or `platform.runner` through nested
/// objects), from the listed values and the `include` entries.
fn matrix_values(job: &MarkedMappingNode, path: &str, pos: Pos) -> Option<Vec<Scalar>> {
    let matrix = job.get_mapping("strategy")?.get_mapping("matrix")?;
    let (name, rest) = match path.split_once('.') {
        Some((name, rest)) => (name, Some(rest)),
        None => (path, None),
    };
    let descend = |node: &Node| -> Option<Vec<Scalar>> {
        let mut node = node;
        if let Some(rest) = rest {
            for key in rest.split('.') {
                node = node.as_mapping()?.get_node(key)?;
            }
        }
        runner_labels(node)
    };
    let mut values = Vec::new();
    if let Some(listed) = matrix.get_node(name) {
        for value in listed.as_sequence()?.iter() {
            values.extend(descend(value)?);
        }
    }
    if let Some(include) = matrix.get_sequence("include") {
        for entry in include.iter() {
            if let Some(value) = entry.as_mapping().and_then(|m| m.get_node(name)) {
                values.extend(descend(value)?);
            }
        }
    }
    // Labels point at the `runs-on` line, where the reader looks.
    Some(
        values
            .into_iter()
            .map(|v| Scalar {
                value: v.value,
                pos,
            })
            .collect(),
    )
}

/// The labels one matrix value stands for: a label, or a list of labels
/// (`os: [[self-hosted, gpu], ubuntu-latest]`). `None` for anything else
/// (a `{ group: … }` mapping, nested lists), which stays unresolved.
fn runner_labels(value: &Node) -> Option<Vec<Scalar>> {
    match value {
        Node::Scalar(_) => scalar(value).map(|label| vec![label]),
        Node::Sequence(items) => items.iter().map(scalar).collect(),
        Node::Mapping(_) => None,
    }
}

/// A YAML node as JSON, scalars as strings (as GitHub passes matrix values).
fn to_json(node: &Node) -> serde_json::Value {
    match node {
        Node::Scalar(s) => serde_json::Value::String(s.as_str().to_owned()),
        Node::Sequence(items) => serde_json::Value::Array(items.iter().map(to_json).collect()),
        Node::Mapping(map) => serde_json::Value::Object(
            map.iter()
                .map(|(k, v)| (k.as_str().to_owned(), to_json(v)))
                .collect(),
        ),
    }
}

fn node_pos(node: &Node) -> Pos {
    node.span()
        .start()
        .map(|m| Pos {
            line: m.line(),
            column: m.column(),
        })
        .unwrap_or_default()
}

/// A top-level scalar of a YAML mapping file (a bot's configuration):
/// `Err` when the text is not YAML or not a mapping, `Ok(None)` when the
/// key is absent or not a scalar.
pub fn top_level_scalar(text: &str, key: &str) -> Result<Option<Scalar>, ()> {
    let root = super::yaml::parse(text).map_err(|_| ())?;
    let map = root.as_mapping().ok_or(())?;
    Ok(map.get_node(key).and_then(scalar))
}

fn scalar(node: &Node) -> Option<Scalar> {
    let s = node.as_scalar()?;
    Some(Scalar {
        value: s.as_str().to_owned(),
        pos: node_pos(node),
    })
}

fn key_scalar(key: &marked_yaml::types::MarkedScalarNode) -> Scalar {
    Scalar {
        value: key.as_str().to_owned(),
        pos: key
            .span()
            .start()
            .map(|m| Pos {
                line: m.line(),
                column: m.column(),
            })
            .unwrap_or_default(),
    }
}

/// A mapping value as a scalar, positioned where a reader looks: the value
/// itself when it is on the key's line, else the key (block scalars report
/// their end, not their start).
fn value_scalar(key: &Scalar, node: &Node) -> Scalar {
    match scalar(node) {
        Some(mut value) => {
            if value.pos.line != key.pos.line {
                value.pos = key.pos;
            }
            value
        }
        // A non-scalar where a scalar belongs: keep it visible as empty text.
        None => Scalar {
            value: String::new(),
            pos: key.pos,
        },
    }
}

/// The scalars of a scalar or a list of scalars.
fn scalars_of(node: &Node) -> Vec<Scalar> {
    match node {
        Node::Scalar(_) => scalar(node).into_iter().collect(),
        Node::Sequence(items) => items.iter().filter_map(scalar).collect(),
        Node::Mapping(_) => Vec::new(),
    }
}

fn collect_scalars(node: &Node, out: &mut Vec<Scalar>) {
    match node {
        Node::Scalar(_) => out.extend(scalar(node)),
        Node::Sequence(items) => items.iter().for_each(|n| collect_scalars(n, out)),
        Node::Mapping(map) => {
            for (key, value) in map.iter() {
                let key = key_scalar(key);
                match value {
                    Node::Scalar(_) => out.push(value_scalar(&key, value)),
                    _ => collect_scalars(value, out),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
name: sample
on:
  push:
    branches: [main]
  workflow_dispatch:
permissions:
  contents: read
jobs:
  build:
    runs-on: ${{ matrix.os }}
    strategy:
      matrix:
        os: [ubuntu-latest, windows-latest]
    steps:
      - uses: actions/checkout@v4
        with:
          ref: ${{ github.sha }}
      - id: archive_key
        run: |
          echo one
          git checkout other
";

    #[test]
    fn parses_triggers_jobs_and_steps_with_positions() {
        let wf = Workflow::parse(".github/workflows/sample.yml", SAMPLE).unwrap();
        assert_eq!(wf.name, "sample.yml");
        assert_eq!(
            wf.events().collect::<Vec<_>>(),
            ["push", "workflow_dispatch"]
        );
        let branches = wf.trigger("push").unwrap().filter("branches").unwrap();
        assert_eq!(branches[0].value, "main");
        assert_eq!(
            branches[0].pos,
            Pos {
                line: 4,
                column: 16
            }
        );
        let job = wf.job("build").unwrap();
        let labels: Vec<_> = job.runs_on.iter().map(|l| l.value.as_str()).collect();
        assert_eq!(labels, ["ubuntu-latest", "windows-latest"]);
        assert!(job.runs_on_unresolved.is_none());
        assert_eq!(job.steps.len(), 2);
        assert_eq!(
            job.steps[0].pos,
            Pos {
                line: 15,
                column: 9
            }
        );
        assert_eq!(job.steps[0].action(), Some(("actions/checkout", "v4")));
        assert_eq!(
            job.steps[0].input("ref").unwrap().value,
            "${{ github.sha }}"
        );
        let run = job.steps[1].run.as_ref().unwrap();
        assert_eq!(run.pos.line, 19, "a block scalar is placed at its key");
        assert_eq!(wf.locate(run.pos, "git checkout other").line, 21);
    }

    #[test]
    fn bad_yaml_is_an_error_with_a_location_not_a_panic() {
        for (text, needle) in [
            ("on: [push\n", "x.yml:"),
            ("on: push\njobs: *x\n", "unknown anchor"),
            ("on: push\na: &x {b: 1}\njobs:\n  <<: *x\n", "merge keys"),
            ("on: push\non: pull_request\njobs: {}\n", "repeated"),
            ("- a\n", "mapping"),
            (
                "on: push\njobs: [a]\n",
                "x.yml:2:7: `jobs` must be a mapping",
            ),
            (
                "on: push\njobs:\n  a:\n    steps: [1]\n",
                "a step must be a mapping",
            ),
        ] {
            let err = format!("{:#}", Workflow::parse("x.yml", text).unwrap_err());
            assert!(err.contains(needle), "{text:?} gave {err}");
        }
    }

    #[test]
    fn matrix_runner_lists_and_groups_are_not_dropped() {
        let wf = Workflow::parse(
            "x.yml",
            "on: push\njobs:\n  a:\n    runs-on: ${{ matrix.os }}\n    strategy:\n      matrix:\n        os: [[self-hosted, gpu], ubuntu-latest]\n  b:\n    runs-on: ${{ matrix.os }}\n    strategy:\n      matrix:\n        os: [ubuntu-latest, {group: gpu}]\n",
        )
        .unwrap();
        let labels: Vec<_> = wf.jobs[0]
            .runs_on
            .iter()
            .map(|l| l.value.as_str())
            .collect();
        assert_eq!(labels, ["self-hosted", "gpu", "ubuntu-latest"]);
        assert!(wf.jobs[0].runs_on_unresolved.is_none());
        assert!(
            wf.jobs[1].runs_on_unresolved.is_some(),
            "a runner group in the matrix is unresolved, not dropped"
        );
    }

    #[test]
    fn unresolvable_runs_on_is_reported() {
        let wf = Workflow::parse(
            "x.yml",
            "on: push\njobs:\n  a:\n    runs-on: [self-hosted, '${{ needs.pod.outputs.label }}']\n  b:\n    runs-on:\n      group: gpu\n",
        )
        .unwrap();
        assert!(wf.jobs[0].runs_on_unresolved.is_some());
        assert_eq!(wf.jobs[0].runs_on[0].value, "self-hosted");
        assert_eq!(wf.jobs[1].runs_on_unresolved.as_ref().unwrap().value, "gpu");
    }

    #[test]
    fn container_host_mounts_are_read_from_volumes_and_options() {
        let wf = Workflow::parse(
            "x.yml",
            "on: push\njobs:\n  a:\n    runs-on: x\n    container:\n      image: i\n      volumes: ['/mount:/mount', 'cargo:/usr/local/cargo']\n      options: --gpus all -v /mnt/hf:/hf --mount type=tmpfs,destination=/tmp --volume=/a:/b\n  b:\n    runs-on: x\n    container:\n      image: i\n      options: --mount type=tmpfs,destination=/tmp --shm-size 64gb\n  c:\n    runs-on: x\n    container: ubuntu\n",
        )
        .unwrap();
        let mounts = |j: usize| -> Vec<String> {
            wf.jobs[j]
                .host_mounts
                .iter()
                .map(|m| m.value.clone())
                .collect()
        };
        assert_eq!(
            mounts(0),
            [
                "/mount:/mount",
                "cargo:/usr/local/cargo",
                "/mnt/hf:/hf",
                "/a:/b"
            ]
        );
        assert!(mounts(1).is_empty());
        assert!(mounts(2).is_empty());
    }
}
