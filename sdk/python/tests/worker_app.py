"""A Python worker process used by the integration tests (crates/tranche/tests/python_sdk.rs).

Usage: worker_app.py URL MODE MARKER_DIR
  MODE "chain": serves `py.transform`, a step between two Rust tasks.
  MODE "hang":  `py.hang` writes MARKER_DIR/started-<job> and blocks (to be killed).
  MODE "finish": `py.hang` returns at once.
  MODE "slow":  `py.slow` writes MARKER_DIR/started-<job>, then works for 3.5 s: three
                and a half of its 1 s leases, kept only by heartbeats.
  MODE "report": `py.report` writes MARKER_DIR/started-<job>, waits for the test to
                create MARKER_DIR/release-<job>, writes MARKER_DIR/returned-<job> and
                returns: its result is reported while the test has the server down.
  MODE "idle":  `py.quick` returns at once; the worker long-polls for 20 s at a time.
"""

import logging
import os
import sys
import time

from tranche_worker import Job, Worker


def main() -> None:
    url, mode, markers = sys.argv[1], sys.argv[2], sys.argv[3]
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    # "slow" must outlive its lease several times over and finish within the grace.
    lease_ms, grace_s = {"slow": (1000, 30), "report": (30000, 30)}.get(mode, (2000, 2))
    wait_ms = 20000 if mode == "idle" else 1000
    worker = Worker(url, queues=["py"], concurrency=4, batch=10, wait_ms=wait_ms, lease_ms=lease_ms, grace_s=grace_s)

    def started(job: Job) -> None:
        with open(os.path.join(markers, f"started-{job.id}"), "w") as f:
            f.write(str(os.getpid()))

    @worker.task("py.transform")
    def transform(job: Job) -> dict:
        return {"text": job.input["text"] + " via python", "attempt": job.attempt}

    @worker.task("py.hang")
    def hang(job: Job) -> str:
        if mode == "hang":
            started(job)
            time.sleep(300)
        return f"finished by {mode}"

    @worker.task("py.slow")
    def slow(job: Job) -> str:
        started(job)
        time.sleep(3.5)
        return "lost" if job.lost.is_set() else "slow done"

    @worker.task("py.quick")
    def quick(job: Job) -> str:
        return "quick"

    @worker.task("py.report")
    def report(job: Job) -> str:
        started(job)
        while not os.path.exists(os.path.join(markers, f"release-{job.id}")):
            time.sleep(0.05)
        with open(os.path.join(markers, f"returned-{job.id}"), "w") as f:
            f.write(str(os.getpid()))
        return "reported"

    with open(os.path.join(markers, f"ready-{mode}"), "w") as f:
        f.write(str(os.getpid()))
    worker.run()


if __name__ == "__main__":
    main()
