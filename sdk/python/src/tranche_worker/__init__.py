"""Run Tranche tasks in Python.

Register handlers with :meth:`Worker.task`, then :meth:`Worker.run`: the worker polls
the Tranche HTTP API in batches (long-polling when nothing is ready), runs handlers on
its threads, heartbeats the leases of running jobs, reports results in batches, retries
HTTP failures with backoff and, on SIGINT/SIGTERM, stops polling and gives running jobs
`grace_s` to finish before exiting.

A handler gets a :class:`Job` and returns its result (any JSON value, handed to the
next step of a chain). Raising :class:`Retry` or any other exception retries the job
with backoff; :class:`Discard` fails it for good.

:class:`Client` also does what an operator does: list jobs page by page, read, retry,
cancel and delete one, pause and resume queues, declare and remove schedules, prune
finished runs.
"""

from .client import ApiError, Client
from .worker import Discard, Job, Retry, Worker

__all__ = ["ApiError", "Client", "Discard", "Job", "Retry", "Worker"]
