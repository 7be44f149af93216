"""The HTTP client: JSON over keep-alive connections (standard library only), with
retries and exponential backoff for connection failures, 429 and 5xx answers; the
worker endpoints, and what an operator does: list, retry, cancel and delete jobs,
pause and resume queues, declare and remove schedules, prune finished runs."""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
import urllib.parse
from datetime import datetime
from typing import Any, Iterator, Optional, Union


class ApiError(Exception):
    """An answer the server refused (4xx other than 429): retrying will not help.

    ``code`` is the server's stable error code (``not_found``, ``invalid_request``…)
    and ``field`` the offending field, when it names one."""

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body
        error = body.get("error", {}) if isinstance(body, dict) else {}
        self.code: Optional[str] = error.get("code")
        self.field: Optional[str] = error.get("field")
        message = error.get("message") if isinstance(body, dict) else body
        super().__init__(f"HTTP {status}: {message}")


def _segment(value: str) -> str:
    """A path segment: run, queue and schedule names may hold `/` and other reserved
    characters."""
    return urllib.parse.quote(value, safe="")


def _micros(at: Union[int, datetime]) -> int:
    """Microseconds since the Unix epoch, from an int (taken as such) or an aware
    datetime."""
    if isinstance(at, datetime):
        if at.tzinfo is None:
            raise ValueError(f"expected a timezone-aware datetime, got {at!r}")
        return round(at.timestamp() * 1_000_000)
    if isinstance(at, bool) or not isinstance(at, int):
        raise TypeError(f"expected microseconds since the epoch (int) or a datetime, got {at!r}")
    return at


class Client:
    """One keep-alive connection per thread to a Tranche server."""

    def __init__(
        self,
        base_url: str,
        token: Optional[str] = None,
        timeout: float = 90.0,
        max_tries: int = 8,
    ) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"expected an http(s)://host:port URL, got {base_url!r}")
        self._scheme = parsed.scheme
        self._host = parsed.hostname
        self._port = parsed.port
        self._prefix = parsed.path.rstrip("/")
        self._token = token
        self._timeout = timeout
        self._max_tries = max_tries
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            conn = cls(self._host, self._port, timeout=self._timeout)
            self._local.conn = conn
        return conn

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def close(self) -> None:
        """Close this thread's connection (the next request opens another)."""
        self._drop_connection()

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """Send a request and return the decoded JSON answer, retrying transient
        failures with exponential backoff and jitter."""
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        delay = 0.1
        for attempt in range(1, self._max_tries + 1):
            try:
                conn = self._connection()
                conn.request(method, self._prefix + path, body=payload, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                status = resp.status
                retry_after = resp.getheader("Retry-After")
            except (OSError, http.client.HTTPException) as e:
                self._drop_connection()
                if attempt == self._max_tries:
                    raise ConnectionError(f"{method} {path}: {e}") from e
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 5.0)
                continue
            decoded = json.loads(data) if data else None
            if status < 400:
                return decoded
            if (status == 429 or status >= 500) and attempt < self._max_tries:
                wait = float(retry_after) if retry_after and retry_after.isdigit() else delay
                time.sleep(wait * (0.5 + random.random()))
                delay = min(delay * 2, 5.0)
                continue
            raise ApiError(status, decoded)
        raise AssertionError("unreachable")

    # The worker endpoints.

    def poll(self, queue: str, max: int, wait_ms: int, lease_ms: int) -> list:
        out = self.request(
            "POST",
            "/v1/workers/poll",
            {"queue": queue, "max": max, "wait_ms": wait_ms, "lease_ms": lease_ms},
        )
        return out["jobs"]

    def heartbeat(self, leases: list, lease_ms: int) -> list:
        out = self.request("POST", "/v1/workers/heartbeat", {"leases": leases, "lease_ms": lease_ms})
        return out["lost"]

    def complete(self, results: list) -> list:
        return self.request("POST", "/v1/workers/complete", {"results": results})["acks"]

    def fail(self, failures: list) -> list:
        return self.request("POST", "/v1/workers/fail", {"failures": failures})["acks"]

    # Jobs, queues, schedules and retention: what an operator does.

    def list_jobs(
        self,
        run: Optional[str] = None,
        state: Optional[str] = None,
        queue: Optional[str] = None,
        kind: Optional[str] = None,
        after: Optional[int] = None,
        limit: int = 50,
    ) -> Iterator[list]:
        """Jobs matching every filter given, a page (a list of job summaries, ids
        increasing) at a time, following the server's cursor to the last page.

        A page holds at most ``limit`` (1 to 1000); the server may answer a short or
        empty page while more follow (empty ones are not yielded). Jobs submitted
        while paging never make a page skip or repeat one. ``after`` starts after that
        job id."""
        filters = {"run": run, "state": state, "queue": queue, "kind": kind}
        query = {k: v for k, v in filters.items() if v is not None}
        query["limit"] = limit
        while True:
            if after is not None:
                query["after"] = after
            page = self.request("GET", "/v1/jobs?" + urllib.parse.urlencode(query))
            if page["jobs"]:
                yield page["jobs"]
            after = page["next"]
            if after is None:
                return

    def iter_jobs(self, **filters: Any) -> Iterator[dict]:
        """Each job of :meth:`list_jobs` (same arguments), page after page."""
        for page in self.list_jobs(**filters):
            yield from page

    def job(self, job_id: int) -> dict:
        """One job with its attempts' errors, its arguments and result (personal data
        masked unless the token may see it). :class:`ApiError` 404 when there is none."""
        return self.request("GET", f"/v1/jobs/{int(job_id)}")

    def retry_job(self, job_id: int) -> int:
        """Run a failed or cancelled job again with fresh attempts (and the chain steps
        cancelled after it); the jobs revived. :class:`ApiError` 400 for a job in
        another state (the message says which), 404 for none."""
        return self.request("POST", f"/v1/jobs/{int(job_id)}/retry")["count"]

    def cancel_job(self, job_id: int, reason: Optional[str] = None) -> int:
        """Cancel a job that has not ended, and the chain steps after it; the jobs
        cancelled (0 when it had already ended). :class:`ApiError` 404 for none."""
        body = {"reason": reason} if reason is not None else None
        return self.request("POST", f"/v1/jobs/{int(job_id)}/cancel", body)["count"]

    def delete_job(self, job_id: int) -> int:
        """Delete an ended job and its attempts; 1. :class:`ApiError` 400 for a job
        that has not ended (cancel it first), 404 for none."""
        return self.request("DELETE", f"/v1/jobs/{int(job_id)}")["count"]

    def pause_queue(self, queue: str) -> bool:
        """Stop every worker taking the queue's jobs (running ones finish); False when
        it was already paused."""
        return self.request("POST", f"/v1/queues/{_segment(queue)}/pause")["changed"]

    def resume_queue(self, queue: str) -> bool:
        """Let workers take the queue's jobs again; False when it was not paused."""
        return self.request("POST", f"/v1/queues/{_segment(queue)}/resume")["changed"]

    def queues(self) -> list:
        """Each queue with jobs, statistics or a pause: its depth and counters, and
        ``paused: True`` when paused."""
        return self.request("GET", "/v1/queues")["queues"]

    def schedules(self) -> list:
        """Every schedule, by name: its declaration (``schedule``), ``next_due`` and
        ``last_fired`` (microseconds since the epoch, or None)."""
        return self.request("GET", "/v1/schedules")["schedules"]

    def put_schedule(
        self,
        name: str,
        kind: str,
        cron: Optional[str] = None,
        at: Optional[str] = None,
        zone: Optional[str] = None,
        queue: Optional[str] = None,
        args: Any = None,
        max_attempts: Optional[int] = None,
        priority: Optional[int] = None,
        run: Optional[str] = None,
        skip_missed: bool = False,
    ) -> bool:
        """Declare a schedule (exactly one of ``cron`` and ``at``), replacing one of the
        same name; True when it starts afresh (new, or its timing changed).
        :class:`ApiError` 400 names a field that is not acceptable (``.field``)."""
        fields = {
            "kind": kind, "cron": cron, "at": at, "zone": zone, "queue": queue, "args": args,
            "max_attempts": max_attempts, "priority": priority, "run": run,
        }
        body = {k: v for k, v in fields.items() if v is not None}
        body["skip_missed"] = skip_missed
        return self.request("PUT", f"/v1/schedules/{_segment(name)}", body)["fresh"]

    def delete_schedule(self, name: str) -> None:
        """Remove a schedule (the jobs it enqueued stay). :class:`ApiError` 404 for none."""
        self.request("DELETE", f"/v1/schedules/{_segment(name)}")

    def prune(
        self, before: Union[int, datetime], limit: int = 100, dry_run: bool = False
    ) -> dict:
        """Remove up to ``limit`` runs that finished before ``before`` (a past time:
        microseconds since the epoch or an aware datetime), with their jobs: ``runs``,
        ``jobs`` and ``more`` (call again). ``dry_run`` counts every due run and
        removes nothing."""
        body = {"before": _micros(before), "limit": limit, "dry_run": dry_run}
        return self.request("POST", "/v1/prune", body)
