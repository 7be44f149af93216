"""The runner: pollers per queue, handler threads, one thread reporting results in
batches and one heartbeating the leases of running jobs."""

from __future__ import annotations

import dataclasses
import logging
import queue as _queue
import random
import signal
import threading
import time
from typing import Any, Callable, Dict, List, Optional

from .client import ApiError, Client

log = logging.getLogger("tranche_worker")


class Retry(Exception):
    """Fail this attempt; run again after `after_ms` (or the server's backoff)."""

    def __init__(self, message: str, after_ms: Optional[int] = None) -> None:
        super().__init__(message)
        self.after_ms = after_ms


class Discard(Exception):
    """Fail the job for good: no further attempts."""


@dataclasses.dataclass
class Job:
    id: int
    attempt: int
    max_attempts: int
    run: str
    kind: str
    queue: str
    args: Any
    #: The previous chain step's result, or a group callback's member outcomes.
    input: Any
    #: Set when the job's lease was lost (expired, or the job was cancelled): a long
    #: handler should check it and stop, as its result will be refused.
    lost: threading.Event = dataclasses.field(default_factory=threading.Event)

    @property
    def lease(self) -> dict:
        return {"job": self.id, "attempt": self.attempt}


Handler = Callable[[Job], Any]


class Worker:
    """Serves `queues` with the handlers registered by :meth:`task`."""

    def __init__(
        self,
        base_url: str,
        queues: List[str],
        token: Optional[str] = None,
        concurrency: int = 8,
        batch: int = 10,
        wait_ms: int = 5000,
        lease_ms: int = 30000,
        grace_s: float = 30.0,
        report_every_s: float = 0.02,
    ) -> None:
        if not queues:
            raise ValueError("expected at least one queue")
        if concurrency < 1 or batch < 1:
            raise ValueError("expected concurrency and batch of at least 1")
        if lease_ms < 1000:
            raise ValueError(f"expected lease_ms of at least 1000, got {lease_ms}")
        self.client = Client(base_url, token=token, timeout=wait_ms / 1000 + 30)
        self.queues = queues
        self.concurrency = concurrency
        self.batch = batch
        self.wait_ms = wait_ms
        self.lease_ms = lease_ms
        self.grace_s = grace_s
        self.report_every_s = report_every_s
        self._handlers: Dict[str, Handler] = {}
        self._stop = threading.Event()
        self._slots = threading.Semaphore(concurrency)
        self._jobs: "_queue.Queue[Job]" = _queue.Queue()
        self._inflight: Dict[tuple, Job] = {}
        self._inflight_lock = threading.Lock()
        self._results: "_queue.Queue[Optional[tuple]]" = _queue.Queue()
        self._done = threading.Event()
        self.stats = {"succeeded": 0, "failed": 0, "stale": 0}

    def task(self, kind: str) -> Callable[[Handler], Handler]:
        """Register the decorated function as the handler of task `kind`."""

        def register(f: Handler) -> Handler:
            self._handlers[kind] = f
            return f

        return register

    def stop(self) -> None:
        """Stop polling; running jobs finish (within the grace period)."""
        self._stop.set()

    def run(self, install_signals: bool = True) -> None:
        """Serve until :meth:`stop` (or SIGINT/SIGTERM), then drain and return.

        Running jobs get `grace_s` to finish and have their results reported; a handler
        still running after that is abandoned (its lease expires and the job runs
        again elsewhere) and does not keep the process alive."""
        if install_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: self.stop())
        # Daemon threads rather than a ThreadPoolExecutor, whose exit hook joins its
        # threads: one hung handler would otherwise hold the process past its grace.
        for i in range(self.concurrency):
            threading.Thread(target=self._handle_loop, name=f"tranche-task-{i}", daemon=True).start()
        reporter = threading.Thread(target=self._report_loop, name="tranche-report", daemon=True)
        beater = threading.Thread(target=self._heartbeat_loop, name="tranche-heartbeat", daemon=True)
        reporter.start()
        beater.start()
        pollers = [
            threading.Thread(target=self._poll_loop, args=(q,), name=f"tranche-poll-{q}", daemon=True)
            for q in self.queues
        ]
        for p in pollers:
            p.start()
        while not self._stop.wait(0.2):
            pass
        # A poll in flight returns within wait_ms; the jobs it brings still run.
        for p in pollers:
            p.join()
        deadline = time.monotonic() + self.grace_s
        while time.monotonic() < deadline:
            with self._inflight_lock:
                if not self._inflight:
                    break
            time.sleep(0.05)
        with self._inflight_lock:
            abandoned = len(self._inflight)
        if abandoned:
            log.warning("%d job(s) still running after the %.0f s grace period: abandoned, their leases will expire", abandoned, self.grace_s)
        self._results.put(None)
        reporter.join()
        self._done.set()
        beater.join()
        log.info("worker stopped: %s", self.stats)

    def _handle_loop(self) -> None:
        while True:
            self._execute(self._jobs.get())

    def _poll_loop(self, queue: str) -> None:
        delay = 0.1
        while not self._stop.is_set():
            # Ask only for as many jobs as there are free slots.
            if not self._slots.acquire(timeout=0.2):
                continue
            free = 1
            while free < self.batch and self._slots.acquire(blocking=False):
                free += 1
            try:
                # What is ready now, in one batch; only when nothing is, a long-poll for
                # one job, which the server answers as soon as it is there (a long-poll
                # for more is held until all of them are, delaying a lone job).
                jobs = self.client.poll(queue, free, 0, self.lease_ms)
                if not jobs:
                    jobs = self.client.poll(queue, 1, self.wait_ms, self.lease_ms)
                delay = 0.1
            except (ConnectionError, ApiError) as e:
                for _ in range(free):
                    self._slots.release()
                log.warning("poll of %s failed: %s; retrying in %.1f s", queue, e, delay)
                self._stop.wait(delay * (0.5 + random.random()))
                delay = min(delay * 2, 10.0)
                continue
            for _ in range(free - len(jobs)):
                self._slots.release()
            for raw in jobs:
                job = Job(
                    id=raw["id"],
                    attempt=raw["attempt"],
                    max_attempts=raw["max_attempts"],
                    run=raw["run"],
                    kind=raw["kind"],
                    queue=raw["queue"],
                    args=raw.get("args"),
                    input=raw.get("input"),
                )
                with self._inflight_lock:
                    self._inflight[(job.id, job.attempt)] = job
                self._jobs.put(job)

    def _execute(self, job: Job) -> None:
        handler = self._handlers.get(job.kind)
        try:
            if handler is None:
                raise Retry(
                    f"no handler for task kind {job.kind!r} in this worker (it has: {', '.join(sorted(self._handlers))})",
                    after_ms=60_000,
                )
            result = handler(job)
            entry = ("complete", {**job.lease, "result": result})
        except Discard as e:
            entry = ("fail", {**job.lease, "error": str(e) or "discarded", "discard": True})
        except Retry as e:
            failure = {**job.lease, "error": str(e) or "retry"}
            if e.after_ms is not None:
                failure["retry_in_ms"] = e.after_ms
            entry = ("fail", failure)
        except Exception as e:  # noqa: BLE001 - any handler error is retried, as in Rust
            entry = ("fail", {**job.lease, "error": f"{type(e).__name__}: {e}"})
        self._results.put(entry)

    def _report_loop(self) -> None:
        """Send results in batches; a job's slot is freed once its result is durable."""
        done = False
        while not done:
            first = self._results.get()
            batch = [first]
            time.sleep(self.report_every_s)
            while len(batch) < 1000:
                try:
                    batch.append(self._results.get_nowait())
                except _queue.Empty:
                    break
            if None in batch:
                done = True
                batch = [b for b in batch if b is not None]
            completes = [e for kind, e in batch if kind == "complete"]
            fails = [e for kind, e in batch if kind == "fail"]
            for send, entries, counter in (
                (self.client.complete, completes, "succeeded"),
                (self.client.fail, fails, "failed"),
            ):
                if not entries:
                    continue
                try:
                    acks = send(entries)
                except (ConnectionError, ApiError) as e:
                    log.error("could not report %d results (%s); their leases will expire and the jobs run again", len(entries), e)
                    acks = ["stale"] * len(entries)
                for entry, ack in zip(entries, acks):
                    self.stats["stale" if ack == "stale" else counter] += 1
                    with self._inflight_lock:
                        self._inflight.pop((entry["job"], entry["attempt"]), None)
                    self._slots.release()

    def _heartbeat_loop(self) -> None:
        every = self.lease_ms / 3000
        while not self._done.wait(every):
            with self._inflight_lock:
                jobs = list(self._inflight.values())
            if not jobs:
                continue
            try:
                lost = self.client.heartbeat([j.lease for j in jobs], self.lease_ms)
            except (ConnectionError, ApiError) as e:
                log.warning("heartbeat failed: %s", e)
                continue
            lost_keys = {(l["job"], l["attempt"]) for l in lost}
            for j in jobs:
                if (j.id, j.attempt) in lost_keys:
                    j.lost.set()
