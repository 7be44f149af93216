#!/usr/bin/env python3
"""Conductor Python SDK (conductor-python 2.0.0) compatibility check.

Usage:  python3 conductor_sdk_check.py BASE_URL      e.g. http://127.0.0.1:8080/api

Drives a Conductor-compatible server ONLY through the official SDK's clients
(OrkesClients metadata / workflow / task clients and TaskHandler workers).
Prints one line per check ("PASS ..." / "FAIL ...") and a closing summary line,
and exits 0 only if every check passed.  Exit codes: 0 all passed, 1 a check
failed, 2 usage / SDK not installed / server unreachable, 3 watchdog timeout.

Needs a fresh server (fixed definition names are registered with overwrite=True;
per-run correlation ids keep runs apart).
"""
import os
import sys

# No credentials: the SDK then never calls POST /api/token.  Cleared before the SDK
# is imported so that an environment that happens to carry them cannot change that.
# Likewise worker overrides read from the environment by the SDK (domain, poll interval,
# paused, isolation mode, ...: conductor.worker.*, conductor_worker_*, CONDUCTOR_WORKER_*).
for _v in list(os.environ):
    if _v in ("CONDUCTOR_AUTH_KEY", "CONDUCTOR_AUTH_SECRET", "CONDUCTOR_SERVER_URL") \
            or _v.lower().startswith(("conductor.worker.", "conductor_worker_")):
        os.environ.pop(_v, None)

import tempfile
import threading
import time
import traceback
import uuid

try:
    from conductor.client.configuration.configuration import Configuration
    from conductor.client.orkes_clients import OrkesClients
    from conductor.client.automator.task_handler import TaskHandler, get_registered_workers
    from conductor.client.worker.worker_task import worker_task
    from conductor.client.worker.worker_interface import WorkerInterface
    from conductor.client.http.models.task import Task
    from conductor.client.http.models.task_def import TaskDef
    from conductor.client.http.models.task_result import TaskResult
    from conductor.client.http.models.task_result_status import TaskResultStatus
    from conductor.client.http.models.workflow_def import WorkflowDef
    from conductor.client.http.models.workflow_task import WorkflowTask
    from conductor.client.http.models.sub_workflow_params import SubWorkflowParams
    from conductor.client.http.models.start_workflow_request import StartWorkflowRequest, IdempotencyStrategy
    from conductor.client.http.models.rerun_workflow_request import RerunWorkflowRequest
    from conductor.client.http.rest import ApiException
except ImportError as _e:  # pragma: no cover
    print(f"FAIL setup: the Conductor Python SDK is not importable ({_e}); "
          f"install it with: python3 -m pip install conductor-python==2.0.0", flush=True)
    sys.exit(2)

SDK_VERSION_EXPECTED = "2.0.0"
N_PARENTS = 20
FLAG_ENV = "SDK_CHECK_STATE_DIR"   # directory shared with the worker processes

T_DOUBLE, T_GREET, T_FLAKY, T_MANUAL = "sdk_double", "sdk_greet", "sdk_flaky", "sdk_manual"
WF_CHILD, WF_PARENT, WF_FLAKY, WF_MANUAL = "sdk_child", "sdk_parent", "sdk_flaky_wf", "sdk_manual_wf"
FLAKY_REASON = "sdk_flaky: deliberate failure"

# Which endpoint each SDK call uses (for failure messages).
EP = {
    "register_task_def": "POST /api/metadata/taskdefs (JSON array of TaskDef)",
    "get_task_def": "GET /api/metadata/taskdefs/{name}",
    "register_workflow_def": "POST /api/metadata/workflow?overwrite=True (WorkflowDef)",
    "update_workflow_def": "PUT /api/metadata/workflow?overwrite=True (JSON array of WorkflowDef)",
    "get_workflow_def": "GET /api/metadata/workflow/{name}[?version=N]",
    "start_workflow": "POST /api/workflow (StartWorkflowRequest) -> workflow id as text/plain",
    "get_workflow": "GET /api/workflow/{id}?includeTasks=true",
    "terminate": "DELETE /api/workflow/{id}?reason=...",
    "pause": "PUT /api/workflow/{id}/pause",
    "resume": "PUT /api/workflow/{id}/resume",
    "retry": "POST /api/workflow/{id}/retry",
    "restart": "POST /api/workflow/{id}/restart",
    "rerun": "POST /api/workflow/{id}/rerun (RerunWorkflowRequest) -> workflow id as text/plain",
    "remove": "DELETE /api/workflow/{id}/remove",
    "search": "GET /api/workflow/search?queryId=&start=&size=&freeText=*&query=...",
    "update_by_ref": "POST /api/tasks/{workflowId}/{taskRefName}/{status}?workerid=HOST (body {\"result\": output})",
    "poll": "GET /api/tasks/poll/{taskType}?workerid=...",
    "batch_poll": "GET /api/tasks/poll/batch/{taskType}?workerid=&count=&timeout=",
    "update_task": "POST /api/tasks (TaskResult) -> task id as text",
    "queue_sizes": "GET /api/tasks/queue/sizes?taskType=...",
    "task_log": "POST /api/tasks/{taskId}/log (raw text body)",
    "get_task_logs": "GET /api/tasks/{taskId}/log",
    "workers": ("TaskHandler workers: GET /api/tasks/poll/batch/{type}?workerid=&count=&timeout=100, "
                "then POST /api/tasks/update-v2 (or POST /api/tasks after a 404/405 from update-v2)"),
}


# --------------------------------------------------------------------------------------
# Workers.  Module level so that TaskHandler's worker processes ('spawn') can import them.
# --------------------------------------------------------------------------------------

@worker_task(task_definition_name=T_DOUBLE, thread_count=4, poll_interval_millis=50)
def sdk_double(n: int) -> dict:
    return {"n": n * 2}


@worker_task(task_definition_name=T_GREET, thread_count=4, poll_interval_millis=50)
def sdk_greet(name: str) -> dict:
    return {"greeting": "hello " + str(name)}


class FlakyWorker(WorkerInterface):
    """Class-based worker: FAILED until the 'succeed' flag file exists; counts executions."""

    def __init__(self):
        super().__init__(T_FLAKY)
        self.poll_interval = 50  # ms

    def execute(self, task: Task) -> TaskResult:
        state_dir = os.environ.get(FLAG_ENV, "")
        try:
            with open(os.path.join(state_dir, "executions"), "a") as f:
                f.write(task.task_id + "\n")
        except OSError:
            pass
        result = self.get_task_result_from_task(task)
        if os.path.exists(os.path.join(state_dir, "succeed")):
            result.status = TaskResultStatus.COMPLETED
            result.output_data = {"recovered": True, "v": (task.input_data or {}).get("v")}
        else:
            result.status = TaskResultStatus.FAILED
            result.reason_for_incompletion = FLAKY_REASON
        return result


# --------------------------------------------------------------------------------------
# Check bookkeeping
# --------------------------------------------------------------------------------------

class CheckFailed(Exception):
    pass


class Abort(Exception):
    """A failure after which the remaining checks cannot run meaningfully."""


RESULTS = []          # (name, ok)
CURRENT = {"step": "start"}


def out(line):
    print(line, flush=True)


def passed(name, detail=""):
    RESULTS.append((name, True))
    out(f"PASS {name}" + (f": {detail}" if detail else ""))


def failed(name, msg):
    RESULTS.append((name, False))
    out(f"FAIL {name}: {msg}")


def expect(cond, msg):
    if not cond:
        raise CheckFailed(msg)


def api_err(e):
    """Short description of an SDK exception (ApiException carries status and body)."""
    if isinstance(e, ApiException):
        body = e.body if isinstance(e.body, str) else repr(e.body)
        if body and len(body) > 300:
            body = body[:300] + "..."
        return f"HTTP {e.status} {e.reason or ''}".strip() + (f", body: {body}" if body else "")
    return f"{type(e).__name__}: {e}"


def call(endpoint_key, fn, *args, **kwargs):
    """Run one SDK call; on an exception, raise CheckFailed naming the endpoint."""
    CURRENT["step"] = EP.get(endpoint_key, endpoint_key)
    try:
        return fn(*args, **kwargs)
    except CheckFailed:
        raise
    except Exception as e:
        raise CheckFailed(f"{EP.get(endpoint_key, endpoint_key)} failed: {api_err(e)}")


def run_check(name, fn, fatal=False):
    CURRENT["step"] = name
    try:
        detail = fn()
        passed(name, detail or "")
        return True
    except CheckFailed as e:
        failed(name, str(e))
    except Exception as e:
        failed(name, f"unexpected {type(e).__name__}: {e}\n{traceback.format_exc()}")
    if fatal:
        raise Abort(name)
    return False


def wait_until(desc, fn, timeout, interval=0.2):
    """Poll fn() until it returns a truthy value; raise CheckFailed with the last state."""
    deadline = time.time() + timeout
    last = None
    while True:
        value, last = fn()
        if value:
            return value
        if time.time() >= deadline:
            raise CheckFailed(f"timed out after {timeout:.0f}s waiting for {desc}; last state: {last}")
        time.sleep(interval)


def task_states(wf):
    return ", ".join(f"{t.reference_task_name}({t.task_type})={t.status}" for t in (wf.tasks or [])) or "no tasks"


def describe(wf):
    if wf is None:
        return ("None (the SDK could not deserialize the Workflow JSON: an unknown status value, "
                "a non-integer time field or a non-object inputData/outputData makes it return None)")
    return (f"status={wf.status} reason={wf.reason_for_incompletion!r} output={wf.output} "
            f"tasks=[{task_states(wf)}]")


# --------------------------------------------------------------------------------------
# Definitions
# --------------------------------------------------------------------------------------

def simple(task_type, ref, inputs):
    return WorkflowTask(name=task_type, task_reference_name=ref, type="SIMPLE", input_parameters=inputs)


def child_def():
    return WorkflowDef(
        name=WF_CHILD, version=1, schema_version=2, timeout_seconds=0, owner_email="sdk-check@example.com",
        description="sdk-check child",
        input_parameters=["n"],
        tasks=[simple(T_DOUBLE, "c_double_ref", {"n": "${workflow.input.n}"})],
        output_parameters={"n": "${c_double_ref.output.n}"},
    )


def parent_def():
    fork = WorkflowTask(name="fork", task_reference_name="fork_ref", type="FORK_JOIN", fork_tasks=[
        [simple(T_DOUBLE, "fa_ref", {"n": "${sub_ref.output.n}"})],
        [simple(T_GREET, "fb_ref", {"name": "${workflow.input.name}"})],
    ])
    join = WorkflowTask(name="join", task_reference_name="join_ref", type="JOIN", join_on=["fa_ref", "fb_ref"])
    switch = WorkflowTask(
        name="switch", task_reference_name="switch_ref", type="SWITCH",
        evaluator_type="value-param", expression="kind",
        input_parameters={"kind": "${workflow.input.kind}"},
        decision_cases={
            "big": [simple(T_DOUBLE, "sw_big_ref", {"n": "${fa_ref.output.n}"})],
            "small": [simple(T_GREET, "sw_small_ref", {"name": "${fb_ref.output.greeting}"})],
        },
        default_case=[],
    )
    return WorkflowDef(
        name=WF_PARENT, version=1, schema_version=2, timeout_seconds=0, owner_email="sdk-check@example.com",
        description="sdk-check parent",
        input_parameters=["n", "name", "kind"],
        tasks=[
            simple(T_DOUBLE, "double_ref", {"n": "${workflow.input.n}"}),
            WorkflowTask(name=WF_CHILD, task_reference_name="sub_ref", type="SUB_WORKFLOW",
                         sub_workflow_param=SubWorkflowParams(name=WF_CHILD, version=1),
                         input_parameters={"n": "${double_ref.output.n}"}),
            fork, join, switch,
            WorkflowTask(name="wait", task_reference_name="wait_ref", type="WAIT"),
        ],
        output_parameters={
            "doubled": "${double_ref.output.n}",
            "child": "${sub_ref.output.n}",
            "forkA": "${fa_ref.output.n}",
            "greeting": "${fb_ref.output.greeting}",
            "big": "${sw_big_ref.output.n}",
            "small": "${sw_small_ref.output.greeting}",
            "approved": "${wait_ref.output.result.approved}",
        },
    )


PARENT_REFS = ["double_ref", "sub_ref", "fork_ref", "fa_ref", "fb_ref", "join_ref", "switch_ref", "wait_ref"]


def expected_parent_output(n, name, kind, approved):
    return {
        "doubled": 2 * n, "child": 4 * n, "forkA": 8 * n, "greeting": "hello " + name,
        "big": 16 * n if kind == "big" else None,
        "small": "hello hello " + name if kind == "small" else None,
        "approved": approved,
    }


def compare_output(got, want):
    """Exact comparison; a key whose expected value is None may be absent or null."""
    got = got or {}
    diffs = []
    for k, v in want.items():
        if v is None:
            if got.get(k) is not None:
                diffs.append(f"{k}: expected null/absent, got {got.get(k)!r}")
        elif k not in got or got[k] != v or type(got[k]) is not type(v):
            diffs.append(f"{k}: expected {v!r}, got {got.get(k, '<absent>')!r}")
    return diffs


# --------------------------------------------------------------------------------------
# The checks
# --------------------------------------------------------------------------------------

class Ctx:
    pass


def main(base_url):
    ctx = Ctx()
    ctx.run = "sdkchk-" + uuid.uuid4().hex[:8]
    ctx.state_dir = tempfile.mkdtemp(prefix="sdk-check-")
    os.environ[FLAG_ENV] = ctx.state_dir   # inherited by the spawned worker processes
    ctx.handler = None
    ctx.aborted = False

    try:
        import importlib.metadata as im
        ver = im.version("conductor-python")
    except Exception:
        ver = "unknown"
    out(f"INFO conductor-python {ver} against {base_url}; run id {ctx.run}")
    if ver != SDK_VERSION_EXPECTED:
        out(f"WARN this check was written for conductor-python {SDK_VERSION_EXPECTED}, found {ver}")

    cfg = Configuration(server_api_url=base_url, log_level="WARNING")
    ctx.cfg = cfg
    clients = OrkesClients(configuration=cfg)
    ctx.md = clients.get_metadata_client()
    ctx.wf = clients.get_workflow_client()
    ctx.tc = clients.get_task_client()

    # Watchdog: never hang a CI job.  Stops the worker processes and exits 3.
    def watchdog():
        time.sleep(WATCHDOG_SECONDS)
        out(f"FAIL watchdog: the check did not finish within {WATCHDOG_SECONDS}s; "
            f"it was in step: {CURRENT['step']}")
        try:
            if ctx.handler is not None:
                ctx.handler.stop_processes()
        finally:
            os._exit(3)
    threading.Thread(target=watchdog, daemon=True).start()

    try:
        run_check("server reachable", lambda: check_reachable(ctx), fatal=True)
        run_check("metadata: register task defs", lambda: check_task_defs(ctx), fatal=True)
        run_check("metadata: register/update/get workflow defs", lambda: check_workflow_defs(ctx), fatal=True)
        run_check("workers: TaskHandler started", lambda: start_workers(ctx), fatal=True)
        run_check(f"workflow: start {N_PARENTS} parents (StartWorkflowRequest)", lambda: start_parents(ctx), fatal=True)
        run_check(f"workflow: {N_PARENTS} parents COMPLETED with exact outputs (WAIT completed by ref name)",
                  lambda: finish_parents(ctx))
        run_check("workflow: get with tasks lists every step and its status", lambda: check_get_with_tasks(ctx))
        run_check("workflow: search by correlation id and by workflow type", lambda: check_search(ctx))
        run_check("workflow: terminate a running workflow -> TERMINATED", lambda: check_terminate(ctx))
        run_check("workflow: remove (delete) a workflow -> 404 afterwards", lambda: check_remove(ctx))
        run_check("workflow: pause -> PAUSED, resume -> RUNNING -> COMPLETED", lambda: check_pause_resume(ctx))
        run_check("workflow: failing worker -> FAILED with the worker's reason", lambda: check_flaky_fails(ctx))
        run_check("workflow: retry after the worker recovers -> COMPLETED", lambda: check_retry(ctx))
        run_check("workflow: restart a COMPLETED workflow -> runs again -> COMPLETED", lambda: check_restart(ctx))
        run_check("workflow: rerun from a task with a new workflow input -> COMPLETED", lambda: check_rerun(ctx))
        run_check("workflow: idempotent start (RETURN_EXISTING) returns the same id", lambda: check_idempotent(ctx))
        run_check("tasks: queue size and single poll", lambda: check_manual_poll(ctx))
        run_check("tasks: add task log and read it back", lambda: check_task_log(ctx))
        run_check("tasks: update task (TaskResult) completes the workflow", lambda: check_update_task(ctx))
        run_check("tasks: batch poll and update; empty polls", lambda: check_manual_batch(ctx))
    except Abort as a:
        ctx.aborted = True
        out(f"ABORT remaining checks skipped after fatal failure in: {a}")
    finally:
        CURRENT["step"] = "stopping workers"
        if ctx.handler is not None:
            try:
                ctx.handler.stop_processes()
                out("INFO workers stopped")
            except Exception as e:
                out(f"WARN stopping workers failed: {e}")

    n_pass = sum(1 for _, ok in RESULTS if ok)
    n_fail = sum(1 for _, ok in RESULTS if not ok)
    out(f"conductor-sdk-check: {n_pass} passed, {n_fail} failed")
    return 0 if n_fail == 0 and not ctx.aborted else 1


WATCHDOG_SECONDS = 150


def check_reachable(ctx):
    # A definition that certainly does not exist: the server must answer 404 (any HTTP
    # answer proves reachability; a connection error does not).
    name = "sdk_check_no_such_workflow_" + ctx.run
    try:
        ctx.md.get_workflow_def(name)
    except ApiException as e:
        if e.status == 0:
            raise CheckFailed(f"cannot reach the server at {ctx.cfg.host}: {e.reason}")
        expect(e.status == 404, f"{EP['get_workflow_def']} for an unknown name: expected HTTP 404, got {api_err(e)}")
        return "unknown workflow def -> 404"
    raise CheckFailed(f"{EP['get_workflow_def']} for an unknown name: expected HTTP 404 (ApiException), got a success")


def check_task_defs(ctx):
    for name in (T_DOUBLE, T_GREET, T_FLAKY, T_MANUAL):
        call("register_task_def", ctx.md.register_task_def,
             TaskDef(name=name, description="sdk-check", retry_count=0, timeout_seconds=300,
                     response_timeout_seconds=60, owner_email="sdk-check@example.com"))
    for name in (T_DOUBLE, T_FLAKY):
        td = call("get_task_def", ctx.md.get_task_def, name)
        expect(td is not None, f"{EP['get_task_def']}: SDK deserialized None for {name} "
                               f"(timeoutPolicy must be RETRY|TIME_OUT_WF|ALERT_ONLY, retryLogic FIXED|EXPONENTIAL_BACKOFF|LINEAR_BACKOFF)")
        expect(td.name == name, f"{EP['get_task_def']}: expected name {name!r}, got {td.name!r}")
        expect(td.retry_count == 0, f"{EP['get_task_def']}: expected retryCount 0 for {name}, got {td.retry_count!r}")
    return "4 task defs registered, retryCount 0 read back"


def check_workflow_defs(ctx):
    call("register_workflow_def", ctx.md.register_workflow_def, child_def(), overwrite=True)
    call("register_workflow_def", ctx.md.register_workflow_def, parent_def(), overwrite=True)
    call("register_workflow_def", ctx.md.register_workflow_def, WorkflowDef(
        name=WF_FLAKY, version=1, schema_version=2, timeout_seconds=0, owner_email="sdk-check@example.com",
        tasks=[simple(T_FLAKY, "flaky_ref", {"v": "${workflow.input.v}"})],
        output_parameters={"recovered": "${flaky_ref.output.recovered}", "v": "${flaky_ref.output.v}"}), overwrite=True)
    call("register_workflow_def", ctx.md.register_workflow_def, WorkflowDef(
        name=WF_MANUAL, version=1, schema_version=2, timeout_seconds=0, owner_email="sdk-check@example.com",
        tasks=[simple(T_MANUAL, "manual_ref", {"k": "${workflow.input.k}"})],
        output_parameters={"handled": "${manual_ref.output.handled}"}), overwrite=True)

    # update (PUT, list body) the child with a new description, then read both back
    updated = child_def()
    updated.description = "sdk-check child (updated " + ctx.run + ")"
    call("update_workflow_def", ctx.md.update_workflow_def, updated, overwrite=True)

    got = call("get_workflow_def", ctx.md.get_workflow_def, WF_CHILD, version=1)
    expect(got is not None, f"{EP['get_workflow_def']}: SDK deserialized None for {WF_CHILD}")
    expect(got.description == updated.description,
           f"after {EP['update_workflow_def']}: expected description {updated.description!r}, got {got.description!r}")

    got = call("get_workflow_def", ctx.md.get_workflow_def, WF_PARENT)
    expect(got is not None, f"{EP['get_workflow_def']}: SDK deserialized None for {WF_PARENT}")
    expect(got.name == WF_PARENT and got.version == 1,
           f"{EP['get_workflow_def']}: expected {WF_PARENT} v1, got {got.name!r} v{got.version!r}")
    want = [("double_ref", "SIMPLE"), ("sub_ref", "SUB_WORKFLOW"), ("fork_ref", "FORK_JOIN"), ("join_ref", "JOIN"),
            ("switch_ref", "SWITCH"), ("wait_ref", "WAIT")]
    have = [(t.task_reference_name, t.type) for t in (got.tasks or [])]
    expect(have == want, f"{EP['get_workflow_def']}: expected tasks {want}, got {have}")
    fork = got.tasks[2]
    fork_refs = [[t.task_reference_name for t in branch] for branch in (fork.fork_tasks or [])]
    expect(fork_refs == [["fa_ref"], ["fb_ref"]], f"{EP['get_workflow_def']}: forkTasks expected [['fa_ref'], ['fb_ref']], got {fork_refs}")
    sw = got.tasks[4]
    expect(sorted((sw.decision_cases or {}).keys()) == ["big", "small"],
           f"{EP['get_workflow_def']}: SWITCH decisionCases keys expected ['big','small'], got {sorted((sw.decision_cases or {}).keys())}")
    expect(sw.evaluator_type == "value-param" and sw.expression == "kind",
           f"{EP['get_workflow_def']}: SWITCH evaluatorType/expression expected value-param/kind, got {sw.evaluator_type}/{sw.expression}")
    sub = got.tasks[1]
    expect(sub.sub_workflow_param is not None and sub.sub_workflow_param.name == WF_CHILD,
           f"{EP['get_workflow_def']}: subWorkflowParam.name expected {WF_CHILD}, got {getattr(sub.sub_workflow_param, 'name', None)}")
    expect((got.output_parameters or {}).get("approved") == "${wait_ref.output.result.approved}",
           f"{EP['get_workflow_def']}: outputParameters not returned as registered: {got.output_parameters}")
    return "4 workflow defs; child updated via PUT; parent read back with all 6 top-level steps"


def start_workers(ctx):
    workers = [w for w in get_registered_workers() if w.get_task_definition_name() in (T_DOUBLE, T_GREET)]
    workers.append(FlakyWorker())
    names = sorted(w.get_task_definition_name() for w in workers)
    expect(names == sorted([T_DOUBLE, T_GREET, T_FLAKY]), f"unexpected worker set {names}")
    ctx.handler = TaskHandler(workers=workers, configuration=ctx.cfg, scan_for_annotated_workers=False,
                              monitor_processes=False)
    ctx.handler.start_processes()
    return f"{len(workers)} worker processes ({', '.join(names)})"


def start_req(name, inp, corr=None, priority=None, version=1, key=None, strategy=None):
    r = StartWorkflowRequest(name=name, version=version, input=inp, correlation_id=corr, priority=priority)
    if key is not None:
        r.idempotency_key = key
        r.idempotency_strategy = strategy
    return r


def start(ctx, req):
    wid = call("start_workflow", ctx.wf.start_workflow, req)
    expect(isinstance(wid, str) and len(wid) >= 8 and not wid.startswith('"') and not wid.startswith("{"),
           f"{EP['start_workflow']}: expected a workflow id string, got {wid!r}")
    return wid


def start_parents(ctx):
    ctx.parents = {}
    for i in range(N_PARENTS):
        n, name, kind = i + 1, f"w{i}", ("big" if i % 2 == 0 else "small")
        wid = start(ctx, start_req(WF_PARENT, {"n": n, "name": name, "kind": kind},
                                   corr=f"{ctx.run}-p{i}", priority=i % 4))
        ctx.parents[wid] = dict(i=i, n=n, name=name, kind=kind, approved=1000 + i, corr=f"{ctx.run}-p{i}",
                                priority=i % 4, signalled=False, done=False)
    expect(len(ctx.parents) == N_PARENTS, f"{EP['start_workflow']}: expected {N_PARENTS} distinct ids, got {len(ctx.parents)}")
    return f"{N_PARENTS} distinct workflow ids"


def get_wf(ctx, wid):
    wf = call("get_workflow", ctx.wf.get_workflow, wid, include_tasks=True)
    expect(wf is not None, f"{EP['get_workflow']} for {wid}: {describe(None)}")
    return wf


def find_task(wf, ref):
    for t in wf.tasks or []:
        if t.reference_task_name == ref:
            return t
    return None


def complete_wait(ctx, wid, output):
    # NB: the SDK wraps the output: the request body is {"result": output}.  The SDK also
    # rejects a worker_id argument here (it always sends workerid=<hostname>).
    return call("update_by_ref", ctx.tc.update_task_by_ref_name, wid, "wait_ref", "COMPLETED", output)


def drive_to_completion(ctx, items, timeout, what):
    """items: {wid: info}; completes each WAIT once it is IN_PROGRESS, until all COMPLETED."""
    deadline = time.time() + timeout
    pending = dict(items)
    last = {}
    while pending:
        for wid, info in list(pending.items()):
            wf = get_wf(ctx, wid)
            last[wid] = wf
            if wf.status == "COMPLETED":
                info["done"] = True
                info["wf"] = wf
                del pending[wid]
            elif wf.status in ("FAILED", "TERMINATED", "TIMED_OUT"):
                raise CheckFailed(f"{what} {wid} (corr {info.get('corr')}) ended {wf.status}: {describe(wf)}")
            elif wf.status == "RUNNING" and not info.get("signalled"):
                wt = find_task(wf, "wait_ref")
                if wt is not None and wt.status == "IN_PROGRESS":
                    complete_wait(ctx, wid, {"approved": info["approved"]})
                    info["signalled"] = True
        if not pending:
            break
        if time.time() >= deadline:
            wid = next(iter(pending))
            wf = last.get(wid)
            stuck = [t for t in (wf.tasks or []) if t.status in ("SCHEDULED", "IN_PROGRESS")] if wf else []
            hint = ""
            if any(t.task_type in (T_DOUBLE, T_GREET, T_FLAKY) and t.status == "SCHEDULED" for t in stuck):
                hint = f" (a SIMPLE task is still SCHEDULED: workers are not getting it; {EP['workers']})"
            elif any(t.reference_task_name == "wait_ref" for t in stuck):
                hint = f" (the WAIT step was not completed by {EP['update_by_ref']})"
            raise CheckFailed(f"{len(pending)} of {len(items)} {what}(s) not COMPLETED after {timeout:.0f}s; "
                              f"e.g. {wid}: {describe(wf)}{hint}")
        time.sleep(0.2)


def finish_parents(ctx):
    drive_to_completion(ctx, ctx.parents, 60, "parent workflow")
    problems = []
    for wid, info in ctx.parents.items():
        want = expected_parent_output(info["n"], info["name"], info["kind"], info["approved"])
        diffs = compare_output(info["wf"].output, want)
        if diffs:
            problems.append(f"{wid} (n={info['n']}, kind={info['kind']}): " + "; ".join(diffs))
    expect(not problems, f"{len(problems)} workflow outputs differ (the WAIT output is read as "
                         f"${{wait_ref.output.result.approved}} because the SDK sends {{\"result\": output}}): "
                         + " | ".join(problems[:3]))
    return f"all {N_PARENTS} outputs exact (double, sub-workflow, fork/join, switch big/small, wait)"


def check_get_with_tasks(ctx):
    checked = 0
    for wid, info in ctx.parents.items():
        if info["i"] not in (0, 1):
            continue
        wf = get_wf(ctx, wid)
        expect(wf.workflow_id == wid, f"{EP['get_workflow']}: workflowId expected {wid}, got {wf.workflow_id}")
        expect(wf.status == "COMPLETED", f"{EP['get_workflow']}: expected COMPLETED, got {describe(wf)}")
        expect(wf.correlation_id == info["corr"], f"{EP['get_workflow']}: correlationId expected {info['corr']}, got {wf.correlation_id}")
        expect(wf.input == {"n": info["n"], "name": info["name"], "kind": info["kind"]},
               f"{EP['get_workflow']}: input expected {{n,name,kind}}, got {wf.input}")
        expect((wf.priority or 0) == info["priority"], f"{EP['get_workflow']}: priority expected {info['priority']}, got {wf.priority}")
        refs = PARENT_REFS + (["sw_big_ref"] if info["kind"] == "big" else ["sw_small_ref"])
        for ref in refs:
            t = find_task(wf, ref)
            expect(t is not None, f"{EP['get_workflow']}: task {ref} missing from tasks; tasks: {task_states(wf)}")
            expect(t.status == "COMPLETED", f"{EP['get_workflow']}: task {ref} expected COMPLETED, got {t.status}; tasks: {task_states(wf)}")
            expect(bool(t.task_id), f"{EP['get_workflow']}: task {ref} has no taskId")
        other = "sw_small_ref" if info["kind"] == "big" else "sw_big_ref"
        expect(find_task(wf, other) is None, f"{EP['get_workflow']}: the SWITCH branch not taken ({other}) appears in tasks")
        for ref, ttype in (("double_ref", T_DOUBLE), ("fb_ref", T_GREET)):
            t = find_task(wf, ref)
            expect(t.task_type == ttype, f"{EP['get_workflow']}: task {ref} taskType expected {ttype}, got {t.task_type}")
            expect(t.workflow_instance_id == wid, f"{EP['get_workflow']}: task {ref} workflowInstanceId expected {wid}, got {t.workflow_instance_id}")
        d = find_task(wf, "double_ref")
        expect(d.input_data == {"n": info["n"]} and d.output_data == {"n": 2 * info["n"]},
               f"{EP['get_workflow']}: double_ref inputData/outputData expected {{'n': {info['n']}}}/{{'n': {2 * info['n']}}}, "
               f"got {d.input_data}/{d.output_data}")
        sub = find_task(wf, "sub_ref")
        expect(bool(sub.sub_workflow_id) or bool((sub.output_data or {}).get("subWorkflowId")),
               f"{EP['get_workflow']}: SUB_WORKFLOW task has neither subWorkflowId nor outputData.subWorkflowId")
        child_id = sub.sub_workflow_id or sub.output_data.get("subWorkflowId")
        child = get_wf(ctx, child_id)
        expect(child.status == "COMPLETED" and child.output == {"n": 4 * info["n"]},
               f"child workflow {child_id}: expected COMPLETED with output {{'n': {4 * info['n']}}}, got {describe(child)}")
        expect(child.parent_workflow_id == wid, f"child workflow {child_id}: parentWorkflowId expected {wid}, got {child.parent_workflow_id}")
        checked += 1
    return f"{checked} workflows: {len(PARENT_REFS) + 1} steps each COMPLETED, child workflow linked"


def check_search(ctx):
    some = [info for info in ctx.parents.values() if info["i"] in (3, 4)]
    for info in some:
        q = f"correlationId = '{info['corr']}'"

        wid = [w for w, i in ctx.parents.items() if i is info][0]

        def by_corr():
            res = call("search", ctx.wf.search, start=0, size=10, free_text="*", query=q)
            expect(res is not None, f"{EP['search']}: SDK deserialized None")
            hits = res.results or []
            state = [(h.workflow_id, h.correlation_id, h.workflow_type, h.status) for h in hits]
            mine = [h for h in hits if h.workflow_id == wid]
            return (mine[0] if mine else None), state
        s = wait_until(f"search query={q!r} to return workflow {wid}", by_corr, 10, 0.3)
        expect(s.workflow_type == WF_PARENT and s.status == "COMPLETED" and s.correlation_id == info["corr"],
               f"{EP['search']} query={q!r}: expected workflowType={WF_PARENT} status=COMPLETED correlationId={info['corr']}, "
               f"got {s.workflow_type}/{s.status}/{s.correlation_id}")
        res = call("search", ctx.wf.search, start=0, size=10, free_text="*", query=q)
        others = [(h.workflow_id, h.workflow_type, h.correlation_id) for h in (res.results or [])
                  if h.workflow_id != wid and not (h.workflow_type == WF_CHILD and h.correlation_id == info["corr"])]
        expect(not others, f"{EP['search']} query={q!r}: results other than the workflow (and its sub-workflow, "
                           f"which inherits the correlation id) : {others[:3]}")

    q = f"workflowType IN ({WF_PARENT}) AND status IN (COMPLETED)"

    def by_type():
        res = call("search", ctx.wf.search, start=0, size=1000, free_text="*", query=q)
        expect(res is not None, f"{EP['search']}: SDK deserialized None")
        ids = {s.workflow_id for s in (res.results or [])}
        bad = [(s.workflow_id, s.workflow_type, s.status) for s in (res.results or [])
               if s.workflow_type != WF_PARENT or s.status != "COMPLETED"]
        expect(not bad, f"{EP['search']} query={q!r} returned non-matching summaries: {bad[:3]}")
        missing = set(ctx.parents) - ids
        return (not missing), f"{len(missing)} of our {N_PARENTS} ids missing from {len(ids)} results"
    wait_until(f"search query={q!r} to include all {N_PARENTS} parents", by_type, 10, 0.3)
    return "correlationId = '...' finds the workflow (and only its sub-workflow besides); workflowType IN (...) AND status IN (COMPLETED) finds all"


def check_terminate(ctx):
    wid = start(ctx, start_req(WF_PARENT, {"n": 1, "name": "term", "kind": "big"}, corr=f"{ctx.run}-term"))
    ctx.terminated = wid
    reason = "sdk-check terminate " + ctx.run
    call("terminate", ctx.wf.terminate_workflow, wid, reason=reason)
    wf = get_wf(ctx, wid)
    expect(wf.status == "TERMINATED", f"after {EP['terminate']}: expected TERMINATED, got {describe(wf)}")
    expect(reason in (wf.reason_for_incompletion or ""),
           f"after {EP['terminate']}: reasonForIncompletion expected to contain {reason!r}, got {wf.reason_for_incompletion!r}")
    return "TERMINATED with the given reason"


def check_remove(ctx):
    wid = getattr(ctx, "terminated", None)
    expect(wid is not None, "no terminated workflow to remove (terminate check failed)")
    call("remove", ctx.wf.remove_workflow, wid)
    try:
        wf = ctx.wf.get_workflow(wid, include_tasks=True)
    except ApiException as e:
        expect(e.status == 404, f"after {EP['remove']}: {EP['get_workflow']} expected HTTP 404, got {api_err(e)}")
        return "removed; GET -> 404"
    raise CheckFailed(f"after {EP['remove']}: {EP['get_workflow']} expected HTTP 404, got a workflow: {describe(wf)}")


def check_pause_resume(ctx):
    info = dict(n=5, name="pause", kind="small", approved=77, corr=f"{ctx.run}-pause", signalled=False)
    wid = start(ctx, start_req(WF_PARENT, {"n": 5, "name": "pause", "kind": "small"}, corr=info["corr"]))
    call("pause", ctx.wf.pause_workflow, wid)
    wf = get_wf(ctx, wid)
    expect(wf.status == "PAUSED", f"after {EP['pause']}: expected PAUSED, got {describe(wf)}")
    call("resume", ctx.wf.resume_workflow, wid)
    wf = get_wf(ctx, wid)
    expect(wf.status in ("RUNNING", "COMPLETED"), f"after {EP['resume']}: expected RUNNING, got {describe(wf)}")
    drive_to_completion(ctx, {wid: info}, 20, "paused/resumed workflow")
    diffs = compare_output(info["wf"].output, expected_parent_output(5, "pause", "small", 77))
    expect(not diffs, f"paused/resumed workflow {wid} output: " + "; ".join(diffs))
    return "PAUSED, RUNNING, then COMPLETED with exact output"


def executions():
    try:
        with open(os.path.join(os.environ[FLAG_ENV], "executions")) as f:
            return [l for l in f.read().split("\n") if l]
    except OSError:
        return []


def wait_status(ctx, wid, statuses, timeout, what):
    def probe():
        wf = get_wf(ctx, wid)
        return (wf if wf.status in statuses else None), describe(wf)
    return wait_until(f"{what} {wid} to reach {'/'.join(statuses)}", probe, timeout)


def check_flaky_fails(ctx):
    wid = start(ctx, start_req(WF_FLAKY, {"v": 7}, corr=f"{ctx.run}-flaky"))
    ctx.flaky = wid
    wf = wait_status(ctx, wid, ("FAILED", "COMPLETED", "TERMINATED"), 20, "flaky workflow")
    expect(wf.status == "FAILED", f"flaky workflow {wid}: expected FAILED, got {describe(wf)}")
    t = find_task(wf, "flaky_ref")
    expect(t is not None and t.status == "FAILED", f"flaky workflow {wid}: task flaky_ref expected FAILED, got {task_states(wf)}")
    expect(t.reason_for_incompletion == FLAKY_REASON,
           f"flaky_ref reasonForIncompletion expected {FLAKY_REASON!r} (sent by the worker in the TaskResult), got {t.reason_for_incompletion!r}")
    expect(FLAKY_REASON in (wf.reason_for_incompletion or ""),
           f"flaky workflow reasonForIncompletion expected to contain {FLAKY_REASON!r}, got {wf.reason_for_incompletion!r}")
    n = len([x for x in (wf.tasks or []) if x.reference_task_name == "flaky_ref"])
    expect(n == 1, f"retryCount is 0, so exactly one flaky_ref attempt expected, got {n}: {task_states(wf)}")
    return f"FAILED, reason {wf.reason_for_incompletion!r}"


def check_retry(ctx):
    wid = getattr(ctx, "flaky", None)
    expect(wid is not None, "no failed workflow to retry (previous check failed)")
    open(os.path.join(ctx.state_dir, "succeed"), "w").close()
    call("retry", ctx.wf.retry_workflow, wid)
    wf = wait_status(ctx, wid, ("COMPLETED", "FAILED", "TERMINATED"), 20, "retried workflow")
    expect(wf.status == "COMPLETED", f"after {EP['retry']}: expected COMPLETED, got {describe(wf)}")
    expect(wf.output == {"recovered": True, "v": 7}, f"after {EP['retry']}: output expected {{'recovered': True, 'v': 7}}, got {wf.output}")
    return "COMPLETED with output from the recovered worker"


def check_restart(ctx):
    wid = getattr(ctx, "flaky", None)
    expect(wid is not None, "no completed workflow to restart (previous checks failed)")
    before = len(executions())
    call("restart", ctx.wf.restart_workflow, wid)

    def probe():
        wf = get_wf(ctx, wid)
        return (wf if wf.status == "COMPLETED" and len(executions()) > before else None), \
            f"{describe(wf)}; worker executions {len(executions())} (before restart {before})"
    wf = wait_until(f"restarted workflow {wid} to run its task again and complete", probe, 20)
    expect(wf.output == {"recovered": True, "v": 7}, f"after {EP['restart']}: output expected {{'recovered': True, 'v': 7}}, got {wf.output}")
    return "task ran again; COMPLETED"


def check_rerun(ctx):
    wid = getattr(ctx, "flaky", None)
    expect(wid is not None, "no completed workflow to rerun (previous checks failed)")
    t = find_task(get_wf(ctx, wid), "flaky_ref")
    expect(t is not None, f"workflow {wid} has no flaky_ref task to rerun from")
    before = len(executions())
    req = RerunWorkflowRequest(re_run_from_task_id=t.task_id, workflow_input={"v": 9})
    got = call("rerun", ctx.wf.rerun_workflow, wid, req)
    expect(got == wid, f"{EP['rerun']}: expected the workflow's id {wid!r}, got {got!r}")

    def probe():
        wf = get_wf(ctx, wid)
        return (wf if wf.status == "COMPLETED" and len(executions()) > before else None), \
            f"{describe(wf)}; worker executions {len(executions())} (before rerun {before})"
    wf = wait_until(f"rerun workflow {wid} to run flaky_ref again and complete", probe, 20)
    expect(wf.output == {"recovered": True, "v": 9},
           f"after {EP['rerun']}: output expected {{'recovered': True, 'v': 9}} (the new input), got {wf.output}")
    n = len([x for x in (wf.tasks or []) if x.reference_task_name == "flaky_ref"])
    expect(n == 1, f"after a rerun flaky_ref should be listed once (the rerun replaced it), got {n}: {task_states(wf)}")
    return "flaky_ref ran again on the new input; COMPLETED"


def check_idempotent(ctx):
    key = f"{ctx.run}-idem"
    a = start(ctx, start_req(WF_CHILD, {"n": 3}, corr=f"{ctx.run}-idem", key=key, strategy=IdempotencyStrategy.RETURN_EXISTING))
    b = start(ctx, start_req(WF_CHILD, {"n": 3}, corr=f"{ctx.run}-idem", key=key, strategy=IdempotencyStrategy.RETURN_EXISTING))
    expect(a == b, f"{EP['start_workflow']} twice with idempotencyKey={key!r} idempotencyStrategy=RETURN_EXISTING: "
                   f"expected the same id, got {a} and {b}")
    c = start(ctx, start_req(WF_CHILD, {"n": 3}, corr=f"{ctx.run}-idem2", key=key + "-other",
                             strategy=IdempotencyStrategy.RETURN_EXISTING))
    expect(c != a, f"{EP['start_workflow']} with a different idempotencyKey returned the same id {a}")
    wf = wait_status(ctx, a, ("COMPLETED", "FAILED", "TERMINATED"), 20, "idempotently started workflow")
    expect(wf.status == "COMPLETED" and wf.output == {"n": 6}, f"idempotently started workflow {a}: expected COMPLETED with {{'n': 6}}, got {describe(wf)}")
    return f"same id {a} for the same key; a new id for another key"


def check_manual_poll(ctx):
    ctx.manual = {}
    for k in range(3):
        wid = start(ctx, start_req(WF_MANUAL, {"k": k}, corr=f"{ctx.run}-manual{k}"))
        ctx.manual[wid] = k

    def qsize():
        n = call("queue_sizes", ctx.tc.get_queue_size_for_task, T_MANUAL)
        return (isinstance(n, int) and n >= 3), f"queue size {n!r}"
    wait_until(f"{EP['queue_sizes']} to report >= 3 for {T_MANUAL}", qsize, 10, 0.2)

    foreign = []   # tasks of older runs on a reused server are skipped (left IN_PROGRESS)

    def poll1():
        t = call("poll", ctx.tc.poll_task, T_MANUAL, worker_id="sdk-check-manual")
        if t is not None and t.task_id and t.workflow_instance_id not in ctx.manual:
            foreign.append(t.workflow_instance_id)
            return None, f"polled only tasks of other workflows: {foreign[:3]}"
        return (t if t is not None and t.task_id else None), f"poll returned {t!r}"[:300]
    t = wait_until(f"{EP['poll']} to return a {T_MANUAL} task of one of the 3 workflows just started", poll1, 10, 0.1)
    ctx.polled = t
    k = ctx.manual[t.workflow_instance_id]
    expect(t.input_data == {"k": k}, f"{EP['poll']}: inputData expected {{'k': {k}}}, got {t.input_data!r}")
    expect(t.status == "IN_PROGRESS", f"{EP['poll']}: polled task status expected IN_PROGRESS, got {t.status!r}")
    expect(t.task_def_name == T_MANUAL or t.task_type == T_MANUAL,
           f"{EP['poll']}: taskType/taskDefName expected {T_MANUAL}, got {t.task_type}/{t.task_def_name}")
    expect(t.reference_task_name == "manual_ref", f"{EP['poll']}: referenceTaskName expected manual_ref, got {t.reference_task_name!r}")
    return "queue size >= 3; poll -> IN_PROGRESS task with its inputData"


def check_task_log(ctx):
    t = getattr(ctx, "polled", None)
    expect(t is not None, "no polled task (previous check failed)")
    line = f"manual log line {ctx.run}"
    call("task_log", ctx.tc.add_task_log, t.task_id, line)
    logs = call("get_task_logs", ctx.tc.get_task_logs, t.task_id)
    texts = [getattr(entry, "log", None) for entry in (logs or [])]
    expect(line in texts, f"{EP['get_task_logs']}: expected a log entry {line!r} (sent raw by {EP['task_log']}), got {texts}")
    return "log line stored and read back"


def check_update_task(ctx):
    t = getattr(ctx, "polled", None)
    expect(t is not None, "no polled task (previous check failed)")
    ctx.manual.pop(t.workflow_instance_id, None)
    r = TaskResult(task_id=t.task_id, workflow_instance_id=t.workflow_instance_id, worker_id="sdk-check-manual")
    r.status = TaskResultStatus.COMPLETED
    r.output_data = {"handled": "single"}
    ret = call("update_task", ctx.tc.update_task, r)
    expect(ret == t.task_id, f"{EP['update_task']}: expected the task id {t.task_id!r} back, got {ret!r}")
    wf = wait_status(ctx, t.workflow_instance_id, ("COMPLETED", "FAILED", "TERMINATED"), 10, "manual workflow")
    expect(wf.status == "COMPLETED" and wf.output == {"handled": "single"},
           f"manual workflow after {EP['update_task']}: expected COMPLETED with {{'handled': 'single'}}, got {describe(wf)}")
    return "update -> task id; workflow COMPLETED with the TaskResult's output"


def check_manual_batch(ctx):
    expect(len(getattr(ctx, "manual", {})) == 2 and getattr(ctx, "polled", None) is not None,
           "the poll check did not leave 2 queued manual workflows to work on")
    got = {}
    deadline = time.time() + 10
    while len(got) < 2 and time.time() < deadline:
        ts = call("batch_poll", ctx.tc.batch_poll_tasks, T_MANUAL, worker_id="sdk-check-manual", count=5,
                  timeout_in_millisecond=200)
        expect(isinstance(ts, list), f"{EP['batch_poll']}: expected a JSON array, SDK got {ts!r}")
        for t in ts:
            expect(t is not None and t.task_id, f"{EP['batch_poll']}: array element without taskId: {t!r}")
            if t.workflow_instance_id in ctx.manual:   # skip tasks of older runs on a reused server
                got[t.task_id] = t
    expect(len(got) == 2, f"{EP['batch_poll']}: expected the 2 remaining {T_MANUAL} tasks within 10s, got {len(got)}")
    for t in got.values():
        r = TaskResult(task_id=t.task_id, workflow_instance_id=t.workflow_instance_id, worker_id="sdk-check-manual")
        r.status = TaskResultStatus.COMPLETED
        r.output_data = {"handled": "batch"}
        call("update_task", ctx.tc.update_task, r)
    for wid in ctx.manual:
        wf = wait_status(ctx, wid, ("COMPLETED", "FAILED", "TERMINATED"), 10, "manual workflow")
        expect(wf.status == "COMPLETED" and wf.output == {"handled": "batch"},
               f"manual workflow {wid}: expected COMPLETED with {{'handled': 'batch'}}, got {describe(wf)}")
    # Nothing left: the single poll answers 204 (the SDK then returns an empty Task whose
    # taskId is None) and the batch poll answers an empty array (or 204).
    t = call("poll", ctx.tc.poll_task, T_MANUAL, worker_id="sdk-check-manual")
    expect(t is None or not t.task_id, f"{EP['poll']} on an empty queue: expected 204/no task, got task {t.task_id}")
    ts = call("batch_poll", ctx.tc.batch_poll_tasks, T_MANUAL, worker_id="sdk-check-manual", count=2, timeout_in_millisecond=100)
    expect(not ts, f"{EP['batch_poll']} on an empty queue: expected [] or 204, got {len(ts)} task(s)")
    n = call("queue_sizes", ctx.tc.get_queue_size_for_task, T_MANUAL)
    expect(n == 0, f"{EP['queue_sizes']}: expected 0 for {T_MANUAL} after all tasks were polled, got {n!r}")
    return "2 tasks in batch polls; both workflows COMPLETED; empty poll / batch poll / queue size 0"


def _on_sigterm(signum, frame):
    raise SystemExit(f"signal {signum}")


if __name__ == "__main__":
    if len(sys.argv) != 2 or not sys.argv[1].startswith(("http://", "https://")):
        out("usage: python3 conductor_sdk_check.py BASE_URL   (e.g. http://127.0.0.1:8080/api)")
        sys.exit(2)
    import signal
    signal.signal(signal.SIGTERM, _on_sigterm)
    base = sys.argv[1].rstrip("/")
    t0 = time.time()
    try:
        rc = main(base)
    except SystemExit:
        raise
    out(f"INFO finished in {time.time() - t0:.1f}s")
    if RESULTS and RESULTS[0] == ("server reachable", False):
        rc = 2
    sys.exit(rc)
