"""The client's operator methods against a real `tranche server` whose URL is in
TRANCHE_URL (crates/tranche/tests/python_sdk.rs starts one and runs this file): jobs
listed page by page, one job read, retried, cancelled and deleted, queues paused and
resumed, schedules declared, listed and removed, finished runs pruned; and the
server's refusals raised as ApiError with its message, code and field. Each test uses
runs and queues of its own."""

from __future__ import annotations

import os
import time
import unittest
from datetime import datetime, timezone
from typing import List

from tranche_worker.client import ApiError, Client

PAN = "ABCDE1234F"
MASKED_PAN = "ABXXXXXX4F"


def client(test: unittest.TestCase) -> Client:
    c = Client(os.environ["TRANCHE_URL"], max_tries=3)
    test.addCleanup(c.close)
    return c


def submit(c: Client, run: str, queue: str, n: int, **job: object) -> List[int]:
    """`n` jobs on `queue` in `run`; their ids."""
    items = [{"job": {"kind": "py.op", "queue": queue, **job}} for _ in range(n)]
    out = c.request("POST", "/v1/batches", {"run": run, "items": items})
    return [item["ids"][0] for item in out["items"]]


def fail_for_good(c: Client, queue: str, error: str) -> int:
    """Leases the queue's one job and reports it failed for good; its id."""
    (job,) = c.poll(queue, 1, 0, 30_000)
    acks = c.fail([{"job": job["id"], "attempt": job["attempt"], "error": error, "discard": True}])
    assert acks == ["applied"], acks
    return job["id"]


class Jobs(unittest.TestCase):
    def test_jobs_are_listed_a_page_at_a_time_without_skipping_or_repeating(self) -> None:
        c = client(self)
        ids = submit(c, "py/pages", "py-pages", 120)
        pages = list(c.list_jobs(queue="py-pages", limit=50))
        self.assertGreaterEqual(len(pages), 3)
        self.assertTrue(all(0 < len(p) <= 50 for p in pages), [len(p) for p in pages])
        self.assertEqual([j["id"] for p in pages for j in p], ids)
        self.assertEqual([j["id"] for j in c.iter_jobs(run="py/pages", after=ids[99])], ids[100:])
        self.assertEqual(list(c.list_jobs(queue="py-pages", state="failed")), [])
        first = pages[0][0]
        self.assertEqual(
            (first["run"], first["queue"], first["kind"], first["state"]),
            ("py/pages", "py-pages", "py.op", "available"),
        )

    def test_a_failed_job_is_read_masked_and_retried_once(self) -> None:
        c = client(self)
        submit(c, "py/failed", "py-failed", 1, max_attempts=1, args={"pan": PAN})
        job_id = fail_for_good(c, "py-failed", f"no contract note for {PAN}")

        (page,) = c.list_jobs(run="py/failed", state="failed")
        self.assertEqual([j["id"] for j in page], [job_id])
        self.assertEqual(page[0]["error"], f"no contract note for {MASKED_PAN}")
        job = c.job(job_id)
        self.assertEqual((job["state"], job["args"]), ("failed", {"pan": MASKED_PAN}))
        self.assertEqual(job["errors"][0]["error"], f"no contract note for {MASKED_PAN}")

        self.assertEqual(c.retry_job(job_id), 1)
        self.assertEqual(c.job(job_id)["state"], "available")
        with self.assertRaises(ApiError) as refused:
            c.retry_job(job_id)
        self.assertEqual(refused.exception.status, 400)
        self.assertIn("available", str(refused.exception))

    def test_a_job_is_cancelled_with_a_reason_then_deleted(self) -> None:
        c = client(self)
        first, second = submit(c, "py/cancel", "py-cancel", 2)
        with self.assertRaises(ApiError) as refused:
            c.delete_job(first)
        self.assertEqual(refused.exception.status, 400)

        self.assertEqual(c.cancel_job(first, reason="not needed today"), 1)
        job = c.job(first)
        self.assertEqual((job["state"], job["error"]), ("cancelled", "not needed today"))
        self.assertEqual(c.cancel_job(first), 0, "an ended job has nothing to cancel")
        self.assertEqual(c.delete_job(first), 1)
        with self.assertRaises(ApiError) as gone:
            c.job(first)
        self.assertEqual((gone.exception.status, gone.exception.code), (404, "not_found"))
        self.assertEqual(c.job(second)["state"], "available")
        with self.assertRaises(ApiError) as none:
            c.cancel_job(first)
        self.assertEqual(none.exception.status, 404)


class Queues(unittest.TestCase):
    def test_a_paused_queue_hands_out_nothing_until_resumed(self) -> None:
        c = client(self)
        (job_id,) = submit(c, "py/pause", "py/pause queue", 1)
        self.assertTrue(c.pause_queue("py/pause queue"))
        self.assertFalse(c.pause_queue("py/pause queue"), "already paused")
        (listed,) = [q for q in c.queues() if q["queue"] == "py/pause queue"]
        self.assertIs(listed.get("paused"), True)
        self.assertEqual(c.poll("py/pause queue", 1, 0, 30_000), [])
        self.assertTrue(c.resume_queue("py/pause queue"))
        self.assertFalse(c.resume_queue("py/pause queue"), "not paused")
        self.assertEqual([j["id"] for j in c.poll("py/pause queue", 1, 0, 30_000)], [job_id])


class Schedules(unittest.TestCase):
    def test_a_schedule_is_declared_listed_with_its_next_due_time_and_removed(self) -> None:
        c = client(self)
        fresh = c.put_schedule(
            "py-eod", kind="report", cron="0 18 * * MON-FRI", zone="Asia/Kolkata",
            queue="reports", args={"pan": PAN}, max_attempts=3,
        )
        self.assertTrue(fresh)
        self.assertFalse(
            c.put_schedule(
                "py-eod", kind="report", cron="0 18 * * MON-FRI", zone="Asia/Kolkata",
                queue="reports", args={"pan": PAN}, max_attempts=5,
            ),
            "the same timing keeps what was fired",
        )
        (listed,) = [s for s in c.schedules() if s["name"] == "py-eod"]
        declared = listed["schedule"]
        self.assertEqual(
            (declared["cron"], declared["zone"], declared["queue"], declared["max_attempts"]),
            ("0 18 * * MON-FRI", "Asia/Kolkata", "reports", 5),
        )
        self.assertEqual(declared["args"], {"pan": MASKED_PAN})
        now = time.time() * 1_000_000
        # 18:00 on a weekday in Kolkata: within the next 4 days (a Friday evening's
        # next is Monday's), and at 12:30 UTC.
        self.assertTrue(now < listed["next_due"] <= now + 4 * 86_400_000_000, listed)
        due = datetime.fromtimestamp(listed["next_due"] / 1_000_000, timezone.utc)
        self.assertEqual((due.hour, due.minute), (12, 30))
        self.assertIsNone(listed["last_fired"])

        c.delete_schedule("py-eod")
        self.assertEqual([s for s in c.schedules() if s["name"] == "py-eod"], [])
        with self.assertRaises(ApiError) as gone:
            c.delete_schedule("py-eod")
        self.assertEqual(gone.exception.status, 404)

    def test_a_bad_declaration_names_its_field(self) -> None:
        c = client(self)
        with self.assertRaises(ApiError) as refused:
            c.put_schedule("py-bad", kind="report", cron="61 * * * *")
        self.assertEqual((refused.exception.status, refused.exception.field), (400, "cron"))
        with self.assertRaises(ApiError) as both:
            c.put_schedule("py-bad", kind="report", cron="* * * * *", at="2099-01-01T00:00:00Z")
        self.assertEqual(both.exception.field, "cron")


class Prune(unittest.TestCase):
    def test_a_finished_run_is_counted_then_pruned(self) -> None:
        c = client(self)
        (job_id,) = submit(c, "py/prune", "py-prune", 1)
        (job,) = c.poll("py-prune", 1, 0, 30_000)
        self.assertEqual(c.complete([{"job": job_id, "attempt": job["attempt"], "result": 1}]), ["applied"])
        # The server must see the run's end as past: wait until it is, by its own
        # clock, rather than for a fixed time.
        finished = c.job(job_id)["finished_at"]
        deadline = time.monotonic() + 10
        while time.time() * 1_000_000 <= finished:
            self.assertLess(time.monotonic(), deadline, "the clock did not pass the run's end")
            time.sleep(0.001)
        before = datetime.now(timezone.utc)

        counted = c.prune(before, dry_run=True)
        self.assertTrue(counted["dry_run"])
        self.assertGreaterEqual((counted["runs"], counted["jobs"]), (1, 1))
        self.assertEqual(c.job(job_id)["state"], "succeeded", "a dry run removes nothing")
        pruned = c.prune(before, limit=1000)
        self.assertGreaterEqual(pruned["runs"], 1)
        self.assertFalse(pruned["more"])
        with self.assertRaises(ApiError) as gone:
            c.job(job_id)
        self.assertEqual(gone.exception.status, 404)

    def test_a_future_time_is_refused_naming_the_field(self) -> None:
        c = client(self)
        with self.assertRaises(ApiError) as refused:
            c.prune(int(time.time() * 1_000_000) + 3_600_000_000)
        self.assertEqual((refused.exception.status, refused.exception.field), (400, "before"))
        with self.assertRaises(ValueError):
            c.prune(datetime(2020, 1, 1))


if __name__ == "__main__":
    unittest.main()
