"""The client's retries against a stub server that answers 429 and 5xx on cue: fault
injection a real Tranche server cannot be made to give on demand. Run with
`PYTHONPATH=sdk/python/src python3 sdk/python/tests/test_client_retry.py`
(crates/tranche/tests/python_sdk.rs does)."""

from __future__ import annotations

import http.server
import json
import threading
import unittest
from typing import List, Tuple

from tranche_worker.client import ApiError, Client


class Stub(http.server.ThreadingHTTPServer):
    """Answers each POST with the next (status, headers, body) of its script, then 200."""

    def __init__(self, script: List[Tuple[int, dict, dict]]) -> None:
        self.script = list(script)
        self.seen: List[dict] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        server: Stub = self.server  # type: ignore[assignment]
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"null")
        with server.lock:
            server.seen.append(body)
            status, headers, answer = server.script.pop(0) if server.script else (200, {}, {"acks": ["applied"]})
        data = json.dumps(answer).encode()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def serve(script: List[Tuple[int, dict, dict]]) -> Stub:
    stub = Stub(script)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    return stub


BUSY = {"error": {"message": "busy"}}
RESULT = [{"job": 1, "attempt": 1, "result": None}]


class Retries(unittest.TestCase):
    def test_429_and_5xx_are_retried_until_the_request_lands(self) -> None:
        stub = serve([(429, {"Retry-After": "0"}, BUSY), (503, {}, BUSY), (500, {}, BUSY)])
        try:
            acks = Client(stub.url, max_tries=5).complete(RESULT)
            self.assertEqual(acks, ["applied"])
            # The same report, sent four times: three refused, the fourth applied.
            self.assertEqual(len(stub.seen), 4)
            self.assertTrue(all(b == {"results": RESULT} for b in stub.seen))
        finally:
            stub.shutdown()
            stub.server_close()

    def test_a_client_error_is_not_retried(self) -> None:
        stub = serve([(400, {}, {"error": {"message": "results[0].job: expected an integer"}})])
        try:
            with self.assertRaises(ApiError) as caught:
                Client(stub.url, max_tries=5).complete(RESULT)
            self.assertEqual(caught.exception.status, 400)
            self.assertIn("results[0].job", str(caught.exception))
            self.assertEqual(len(stub.seen), 1)
        finally:
            stub.shutdown()
            stub.server_close()

    def test_giving_up_after_max_tries_reports_the_last_answer(self) -> None:
        stub = serve([(503, {}, BUSY)] * 3)
        try:
            with self.assertRaises(ApiError) as caught:
                Client(stub.url, max_tries=3).complete(RESULT)
            self.assertEqual(caught.exception.status, 503)
            self.assertEqual(len(stub.seen), 3)
        finally:
            stub.shutdown()
            stub.server_close()


if __name__ == "__main__":
    unittest.main()
