"""The HTTP client: JSON over keep-alive connections (standard library only), with
retries and exponential backoff for connection failures, 429 and 5xx answers."""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
import urllib.parse
from typing import Any, Optional


class ApiError(Exception):
    """An answer the server refused (4xx other than 429): retrying will not help."""

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body
        message = body.get("error", {}).get("message") if isinstance(body, dict) else body
        super().__init__(f"HTTP {status}: {message}")


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
