//! Definitions, stored as backend records so every process sharing the backend sees
//! the same ones, and cached here: a step's end reads its workflow's definition, and a
//! record read per step would be most of a step's cost.
//!
//! Records: `def/wf/<name>/<version>` (a workflow definition), `def/task/<name>` (a task
//! definition) and `def/index` (the names and versions, for listing and for the latest
//! version). A definition written by another process is seen here within
//! [`CACHE_FOR`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tranche_core::Client;
use tranche_types::{BackendError, Commit, Limit, LimitScope, RecordWrite, StartRate};
use tranche_workflow::{After, Graph};
use tranche_workflow_def::{TaskDef, TaskType, WorkflowDef, WorkflowTask};

use crate::state::Header;
use crate::WorkflowError;

/// How long a definition read from the backend is used before it is read again.
pub const CACHE_FOR: Duration = Duration::from_secs(2);

const INDEX: &str = "def/index";

/// The names and versions stored.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Index {
    workflows: BTreeMap<String, Vec<u32>>,
    tasks: Vec<String>,
}

/// A workflow definition with what the engine derives from it once.
#[derive(Debug)]
pub struct Prepared {
    /// The definition.
    pub def: WorkflowDef,
    /// The reference names its mappings read outputs of (`${ref.output…}`,
    /// `${ref.input…}`): a decision needs those steps' outputs and no others.
    pub mentioned: Vec<String>,
    /// The loops each step is in, outermost first (only steps in a loop).
    loops: HashMap<String, Vec<String>>,
    /// For a step whose end only reaches one step that is scheduled (or arrives at a
    /// join, or ends the workflow): the reference names that step's input (or the
    /// workflow's output) reads. Its end's decision needs those outputs and no others,
    /// so no step that has not run yet is looked for. Steps whose end passes a switch,
    /// a fork or a loop's condition are not here: their decisions read `mentioned`.
    after_mentions: HashMap<String, Vec<String>>,
}

impl Prepared {
    /// The unique key of step `reference` of `header`'s workflow: its generation, and
    /// the iteration of each loop it is in.
    pub fn step_key(&self, header: &Header, reference: &str) -> String {
        header.step_key_in(
            reference,
            self.loops.get(reference).map_or(&[][..], Vec::as_slice),
        )
    }

    /// The reference names the decision of `reference`'s end reads outputs of.
    pub fn wanted_after(&self, reference: &str) -> &[String] {
        self.after_mentions
            .get(reference)
            .unwrap_or(&self.mentioned)
    }

    /// Every step in loop `loop_ref`'s body, nested ones too.
    pub fn body_of(&self, loop_ref: &str) -> Vec<String> {
        self.loops
            .iter()
            .filter(|(_, loops)| loops.iter().any(|l| l == loop_ref))
            .map(|(r, _)| r.clone())
            .collect()
    }
}

impl Prepared {
    fn of(def: WorkflowDef) -> Prepared {
        let mut mentioned = HashSet::new();
        let mut templates: Vec<&Value> = def.output_parameters.values().collect();
        collect_templates(&def.tasks, &mut templates);
        for t in templates {
            mentioned_refs(t, &mut mentioned);
        }
        mentioned.remove("workflow");
        let mut mentioned: Vec<String> = mentioned.into_iter().collect();
        mentioned.sort();
        let mut loops = HashMap::new();
        collect_loops(&def.tasks, &mut Vec::new(), &mut loops);
        let after_mentions = after_mentions(&def);
        Prepared {
            def,
            mentioned,
            loops,
            after_mentions,
        }
    }
}

/// See [`Prepared::after_mentions`].
fn after_mentions(def: &WorkflowDef) -> HashMap<String, Vec<String>> {
    let graph = Graph::of(def);
    let reads = |templates: &mut dyn Iterator<Item = &Value>| -> Vec<String> {
        let mut found = HashSet::new();
        for t in templates {
            mentioned_refs(t, &mut found);
        }
        found.remove("workflow");
        found.into_iter().collect()
    };
    let mut steps = Vec::new();
    collect_steps(&def.tasks, &mut steps);
    let mut out = HashMap::new();
    for task in steps {
        let reference = task.task_reference_name.as_str();
        let wanted = match graph.after(reference) {
            Some(After::Arrive { .. }) => Some(Vec::new()),
            Some(After::WorkflowEnd) => Some(reads(&mut def.output_parameters.values())),
            Some(After::Reach(next)) => graph
                .task(next)
                .filter(|t| {
                    t.task_type()
                        .is_some_and(|k| !k.is_routing() && k != TaskType::Join)
                })
                .map(|t| reads(&mut t.input_parameters.values())),
            Some(After::LoopEnd { .. }) | None => None,
        };
        if let Some(wanted) = wanted {
            out.insert(reference.to_string(), wanted);
        }
    }
    out
}

fn collect_steps<'a>(tasks: &'a [WorkflowTask], out: &mut Vec<&'a WorkflowTask>) {
    for t in tasks {
        out.push(t);
        for case in t.decision_cases.values() {
            collect_steps(case, out);
        }
        collect_steps(&t.default_case, out);
        for branch in &t.fork_tasks {
            collect_steps(branch, out);
        }
        collect_steps(&t.loop_over, out);
    }
}

fn collect_loops(
    tasks: &[WorkflowTask],
    within: &mut Vec<String>,
    out: &mut HashMap<String, Vec<String>>,
) {
    for t in tasks {
        if !within.is_empty() {
            out.insert(t.task_reference_name.clone(), within.clone());
        }
        for case in t.decision_cases.values() {
            collect_loops(case, within, out);
        }
        collect_loops(&t.default_case, within, out);
        for branch in &t.fork_tasks {
            collect_loops(branch, within, out);
        }
        if !t.loop_over.is_empty() {
            within.push(t.task_reference_name.clone());
            collect_loops(&t.loop_over, within, out);
            within.pop();
        }
    }
}

fn collect_templates<'a>(tasks: &'a [WorkflowTask], out: &mut Vec<&'a Value>) {
    for t in tasks {
        out.extend(t.input_parameters.values());
        for case in t.decision_cases.values() {
            collect_templates(case, out);
        }
        collect_templates(&t.default_case, out);
        for branch in &t.fork_tasks {
            collect_templates(branch, out);
        }
        collect_templates(&t.loop_over, out);
    }
}

/// The first names of the paths `${…}` mappings in `template` read.
fn mentioned_refs(template: &Value, out: &mut HashSet<String>) {
    match template {
        Value::String(s) => {
            let mut rest = s.as_str();
            while let Some(at) = rest.find("${") {
                let path = &rest[at + 2..];
                let end = path.find(['.', '}', '[']).unwrap_or(path.len());
                out.insert(path[..end].to_string());
                rest = &path[end..];
            }
        }
        Value::Array(items) => items.iter().for_each(|v| mentioned_refs(v, out)),
        Value::Object(map) => map.values().for_each(|v| mentioned_refs(v, out)),
        _ => {}
    }
}

struct Cached<T> {
    value: T,
    at: Instant,
}

impl<T: Clone> Cached<T> {
    fn fresh(&self) -> Option<T> {
        (self.at.elapsed() < CACHE_FOR).then(|| self.value.clone())
    }
}

/// The definitions store.
pub struct Definitions {
    client: Client,
    workflows: Mutex<HashMap<(String, u32), Cached<Arc<Prepared>>>>,
    tasks: Mutex<HashMap<String, Cached<Option<Arc<TaskDef>>>>>,
    index: Mutex<Option<Cached<Arc<IndexRead>>>>,
}

struct IndexRead {
    version: u64,
    index: Index,
}

impl Definitions {
    /// Definitions kept in `client`'s backend.
    pub fn new(client: Client) -> Self {
        Definitions {
            client,
            workflows: Mutex::new(HashMap::new()),
            tasks: Mutex::new(HashMap::new()),
            index: Mutex::new(None),
        }
    }

    async fn read_index(&self, fresh: bool) -> Result<Arc<IndexRead>, BackendError> {
        if !fresh {
            if let Some(cached) = self.index.lock().unwrap().as_ref().and_then(Cached::fresh) {
                return Ok(cached);
            }
        }
        let record = self.client.records(&[INDEX.to_string()]).await?.remove(0);
        let read = Arc::new(match record {
            Some(r) => IndexRead {
                version: r.version,
                index: serde_json::from_str(&r.value)
                    .map_err(|e| BackendError::store("read the definitions' index", e))?,
            },
            None => IndexRead {
                version: 0,
                index: Index::default(),
            },
        });
        *self.index.lock().unwrap() = Some(Cached {
            value: read.clone(),
            at: Instant::now(),
        });
        Ok(read)
    }

    /// Store workflow definitions (already checked), replacing a stored one of the same
    /// name and version. The sub-workflows and task definitions they name must exist
    /// (or be among them), as Conductor requires of `SIMPLE` steps' task definitions.
    pub async fn put_workflows(&self, defs: Vec<WorkflowDef>) -> Result<(), WorkflowError> {
        let mut problems = Vec::new();
        for def in &defs {
            for name in simple_task_names(&def.tasks) {
                if self.task(&name).await?.is_none() {
                    problems.push(format!(
                        "{} v{}: a SIMPLE step runs task {name:?}: expected a task definition of that name (POST /api/metadata/taskdefs), got none",
                        def.name, def.version
                    ));
                }
            }
        }
        problems.extend(self.sub_workflow_problems(&defs).await?);
        if !problems.is_empty() {
            return Err(WorkflowError::Invalid(problems.join("\n")));
        }
        self.update_index(
            |index| {
                for def in &defs {
                    let versions = index.workflows.entry(def.name.clone()).or_default();
                    if !versions.contains(&def.version) {
                        versions.push(def.version);
                        versions.sort_unstable();
                    }
                }
            },
            defs.iter()
                .map(|d| {
                    let text = serde_json::to_string(d).expect("a definition serialises");
                    (workflow_key(&d.name, d.version), text)
                })
                .collect(),
        )
        .await?;
        let mut cache = self.workflows.lock().unwrap();
        for def in defs {
            cache.insert(
                (def.name.clone(), def.version),
                Cached {
                    value: Arc::new(Prepared::of(def)),
                    at: Instant::now(),
                },
            );
        }
        Ok(())
    }

    /// What is wrong with the sub-workflows `defs` name: one that exists neither among
    /// them nor stored, and one that leads back to the workflow naming it (a cycle:
    /// each start would start the next, without end). A name given as a mapping
    /// (`${…}`) is only known when the step runs, and is not checked.
    async fn sub_workflow_problems(
        &self,
        defs: &[WorkflowDef],
    ) -> Result<Vec<String>, WorkflowError> {
        let stored = self.read_index(true).await?;
        // Which version a reference means: the given one, or the latest of the batch
        // and the stored ones.
        let resolve = |name: &str, version: Option<u32>| -> Option<u32> {
            let batch = defs.iter().filter(|d| d.name == name).map(|d| d.version);
            let kept = stored
                .index
                .workflows
                .get(name)
                .into_iter()
                .flatten()
                .copied();
            let mut known = batch.chain(kept);
            match version {
                Some(v) => known.any(|k| k == v).then_some(v),
                None => known.max(),
            }
        };
        let mut problems = Vec::new();
        for def in defs {
            for (path, name, version) in sub_workflows(&def.tasks) {
                if name.contains("${") {
                    continue;
                }
                let Some(v) = resolve(&name, version) else {
                    let wanted = version.map_or(String::new(), |v| format!(" version {v}"));
                    problems.push(format!(
                        "{} v{}: {path}.subWorkflowParam: expected a workflow definition {name:?}{wanted} (PUT /api/metadata/workflow), got none",
                        def.name, def.version
                    ));
                    continue;
                };
                // Depth first from the sub-workflow, looking for the way back.
                let mut trail = vec![(def.name.clone(), def.version), (name.clone(), v)];
                if let Some(cycle) = self
                    .leads_back(defs, &resolve, &mut trail, &mut HashSet::new())
                    .await?
                {
                    problems.push(format!(
                        "{} v{}: {path}.subWorkflowParam: expected a sub-workflow that does not lead back to this workflow, got a cycle: {cycle}",
                        def.name, def.version
                    ));
                }
            }
        }
        Ok(problems)
    }

    /// Whether the workflow at the end of `trail` leads, through its sub-workflows, to
    /// the one at its start; the cycle, written out, when it does.
    async fn leads_back(
        &self,
        defs: &[WorkflowDef],
        resolve: &(dyn Fn(&str, Option<u32>) -> Option<u32> + Sync),
        trail: &mut Vec<(String, u32)>,
        seen: &mut HashSet<(String, u32)>,
    ) -> Result<Option<String>, WorkflowError> {
        let (name, version) = trail.last().cloned().expect("a trail has a start");
        if trail.len() > 1 && (name.as_str(), version) == (trail[0].0.as_str(), trail[0].1) {
            let steps: Vec<String> = trail.iter().map(|(n, v)| format!("{n} v{v}")).collect();
            return Ok(Some(steps.join(" → ")));
        }
        if !seen.insert((name.clone(), version)) {
            return Ok(None);
        }
        let tasks = match defs.iter().find(|d| d.name == name && d.version == version) {
            Some(def) => def.tasks.clone(),
            None => match self.workflow(&name, Some(version)).await {
                Ok(prepared) => prepared.def.tasks.clone(),
                Err(WorkflowError::NotFound(_)) => return Ok(None),
                Err(e) => return Err(e),
            },
        };
        for (_, sub, sub_version) in sub_workflows(&tasks) {
            let Some(v) = resolve(&sub, sub_version) else {
                continue;
            };
            trail.push((sub, v));
            let found = Box::pin(self.leads_back(defs, resolve, trail, seen)).await?;
            if found.is_some() {
                return Ok(found);
            }
            trail.pop();
        }
        Ok(None)
    }

    /// Store task definitions (already checked), replacing stored ones of those names.
    /// A definition's `rateLimitPerFrequency` and `concurrentExecLimit` become the
    /// engine's limit on the task's queue (the one mechanism: every process sharing the
    /// backend enforces it in its reserves); a definition without them removes it.
    pub async fn put_tasks(&self, defs: Vec<TaskDef>) -> Result<(), WorkflowError> {
        for def in &defs {
            let scope = LimitScope::Queue(def.name.clone());
            let starts = (def.rate_limit_per_frequency > 0).then(|| StartRate {
                count: def.rate_limit_per_frequency,
                per_ms: u64::from(def.rate_limit_frequency_in_seconds.max(1)) * 1_000,
            });
            let running = (def.concurrent_exec_limit > 0).then_some(def.concurrent_exec_limit);
            if starts.is_some() || running.is_some() {
                let limit = Limit {
                    scope,
                    starts,
                    running,
                };
                limit
                    .check()
                    .map_err(|e| WorkflowError::Invalid(format!("task {}: {e}", def.name)))?;
                self.client.put_limit(&limit).await?;
            } else {
                self.client.delete_limit(&scope).await?;
            }
        }
        self.update_index(
            |index| {
                for def in &defs {
                    if !index.tasks.contains(&def.name) {
                        index.tasks.push(def.name.clone());
                    }
                }
                index.tasks.sort();
            },
            defs.iter()
                .map(|d| {
                    let text = serde_json::to_string(d).expect("a task definition serialises");
                    (task_key(&d.name), text)
                })
                .collect(),
        )
        .await?;
        let mut cache = self.tasks.lock().unwrap();
        for def in defs {
            cache.insert(
                def.name.clone(),
                Cached {
                    value: Some(Arc::new(def)),
                    at: Instant::now(),
                },
            );
        }
        Ok(())
    }

    /// Write `records` (key, value; whatever their versions: a definition replaces the
    /// one stored) with the index changed by `change`, in one commit; a concurrent
    /// change of the index is read again and the commit repeated.
    async fn update_index(
        &self,
        change: impl Fn(&mut Index),
        records: Vec<(String, String)>,
    ) -> Result<(), WorkflowError> {
        for _ in 0..100 {
            let read = self.read_index(true).await?;
            let mut index = read.index.clone();
            change(&mut index);
            let keys: Vec<String> = records.iter().map(|(k, _)| k.clone()).collect();
            let current = self.client.records(&keys).await?;
            let mut writes: Vec<RecordWrite> = records
                .iter()
                .zip(current)
                .map(|((key, value), cur)| {
                    RecordWrite::new(key.clone(), cur.map_or(0, |c| c.version), value.clone())
                })
                .collect();
            writes.push(RecordWrite::new(
                INDEX,
                read.version,
                serde_json::to_string(&index).expect("the index serialises"),
            ));
            match self
                .client
                .worker_protocol()
                .commit(Commit {
                    records: writes,
                    ..Commit::default()
                })
                .await
            {
                Ok(_) => {
                    *self.index.lock().unwrap() = None;
                    return Ok(());
                }
                Err(BackendError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(WorkflowError::Busy("the definitions' index"))
    }

    /// Workflow definition `name` at `version`, or its latest version.
    pub async fn workflow(
        &self,
        name: &str,
        version: Option<u32>,
    ) -> Result<Arc<Prepared>, WorkflowError> {
        let version = match version {
            Some(v) => v,
            None => self
                .read_index(false)
                .await?
                .index
                .workflows
                .get(name)
                .and_then(|v| v.last().copied())
                .ok_or_else(|| WorkflowError::NotFound(format!("workflow definition {name:?}")))?,
        };
        let key = (name.to_string(), version);
        if let Some(hit) = self
            .workflows
            .lock()
            .unwrap()
            .get(&key)
            .and_then(Cached::fresh)
        {
            return Ok(hit);
        }
        let record = self
            .client
            .records(&[workflow_key(name, version)])
            .await?
            .remove(0)
            .ok_or_else(|| {
                WorkflowError::NotFound(format!("workflow definition {name:?} version {version}"))
            })?;
        let def: WorkflowDef = serde_json::from_str(&record.value)
            .map_err(|e| BackendError::store("read a workflow definition", e))?;
        let prepared = Arc::new(Prepared::of(def));
        self.workflows.lock().unwrap().insert(
            key,
            Cached {
                value: prepared.clone(),
                at: Instant::now(),
            },
        );
        Ok(prepared)
    }

    /// Task definition `name`, if stored.
    pub async fn task(&self, name: &str) -> Result<Option<Arc<TaskDef>>, BackendError> {
        if let Some(hit) = self.tasks.lock().unwrap().get(name).and_then(Cached::fresh) {
            return Ok(hit);
        }
        let record = self.client.records(&[task_key(name)]).await?.remove(0);
        let def = match record {
            Some(r) => Some(Arc::new(
                serde_json::from_str::<TaskDef>(&r.value)
                    .map_err(|e| BackendError::store("read a task definition", e))?,
            )),
            None => None,
        };
        self.tasks.lock().unwrap().insert(
            name.to_string(),
            Cached {
                value: def.clone(),
                at: Instant::now(),
            },
        );
        Ok(def)
    }

    /// Every workflow definition's name with its versions.
    pub async fn workflow_names(&self) -> Result<BTreeMap<String, Vec<u32>>, BackendError> {
        Ok(self.read_index(true).await?.index.workflows.clone())
    }

    /// Every task definition's name.
    pub async fn task_names(&self) -> Result<Vec<String>, BackendError> {
        Ok(self.read_index(true).await?.index.tasks.clone())
    }
}

fn workflow_key(name: &str, version: u32) -> String {
    format!("def/wf/{name}/{version}")
}

fn task_key(name: &str) -> String {
    format!("def/task/{name}")
}

/// Every `SUB_WORKFLOW` step of `tasks`, nested ones too: its path (as definition
/// problems write it) and the workflow name and version it names.
fn sub_workflows(tasks: &[WorkflowTask]) -> Vec<(String, String, Option<u32>)> {
    fn walk(tasks: &[WorkflowTask], at: &str, out: &mut Vec<(String, String, Option<u32>)>) {
        for (i, t) in tasks.iter().enumerate() {
            let path = format!("{at}[{i}]");
            if t.task_type() == Some(TaskType::SubWorkflow) {
                if let Some(p) = &t.sub_workflow_param {
                    out.push((path.clone(), p.name.clone(), p.version));
                }
            }
            for (case, steps) in &t.decision_cases {
                walk(steps, &format!("{path}.decisionCases.{case}"), out);
            }
            walk(&t.default_case, &format!("{path}.defaultCase"), out);
            for (b, branch) in t.fork_tasks.iter().enumerate() {
                walk(branch, &format!("{path}.forkTasks[{b}]"), out);
            }
            walk(&t.loop_over, &format!("{path}.loopOver"), out);
        }
    }
    let mut out = Vec::new();
    walk(tasks, "tasks", &mut out);
    out
}

/// The task names of every `SIMPLE` step, nested ones too.
fn simple_task_names(tasks: &[WorkflowTask]) -> Vec<String> {
    let mut names = Vec::new();
    fn walk(tasks: &[WorkflowTask], names: &mut Vec<String>) {
        for t in tasks {
            if t.task_type() == Some(TaskType::Simple) && !names.contains(&t.name) {
                names.push(t.name.clone());
            }
            for case in t.decision_cases.values() {
                walk(case, names);
            }
            walk(&t.default_case, names);
            for branch in &t.fork_tasks {
                walk(branch, names);
            }
            walk(&t.loop_over, names);
        }
    }
    walk(tasks, &mut names);
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steps_end_reads_what_the_step_it_reaches_reads() {
        let def: WorkflowDef = serde_json::from_value(serde_json::json!({
            "name": "w", "version": 1,
            "outputParameters": {"last": "${t3.output.v}"},
            "tasks": [
                {"name": "a", "taskReferenceName": "t1"},
                {"name": "a", "taskReferenceName": "t2",
                 "inputParameters": {"p": "${t1.output.v}", "n": "${workflow.input.n}"}},
                {"name": "s", "taskReferenceName": "route", "type": "SWITCH",
                 "evaluatorType": "value-param", "expression": "k",
                 "inputParameters": {"k": "${t2.output.k}"},
                 "decisionCases": {"x": [{"name": "a", "taskReferenceName": "t4"}]}},
                {"name": "f", "taskReferenceName": "fork", "type": "FORK_JOIN",
                 "forkTasks": [[{"name": "a", "taskReferenceName": "b1"}]]},
                {"name": "j", "taskReferenceName": "join", "type": "JOIN"},
                {"name": "a", "taskReferenceName": "t3",
                 "inputParameters": {"q": "${b1.output}"}}
            ]
        }))
        .unwrap();
        let p = Prepared::of(def);
        let sorted = |r: &str| {
            let mut v = p.wanted_after(r).to_vec();
            v.sort();
            v
        };
        assert_eq!(sorted("t1"), ["t1"], "t2's input: t1's output");
        // Before a switch: everything any mapping reads (the switch may pick any case).
        assert_eq!(sorted("t2"), ["b1", "t1", "t2", "t3"]);
        assert_eq!(
            sorted("b1"),
            Vec::<String>::new(),
            "an arrival reads nothing"
        );
        assert_eq!(sorted("join"), ["b1"]);
        assert_eq!(sorted("t3"), ["t3"], "the workflow's output");
    }

    #[test]
    fn the_steps_mappings_read_are_found() {
        let mut found = HashSet::new();
        mentioned_refs(
            &serde_json::json!({"a": "${t01.output.v}", "b": ["x ${t02.output} ${workflow.input.n}"], "c": "${t03['k']}", "d": "$${lit}"}),
            &mut found,
        );
        let mut found: Vec<_> = found.into_iter().collect();
        found.sort();
        assert_eq!(found, ["lit", "t01", "t02", "t03", "workflow"]);
    }
}
