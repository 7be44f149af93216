// Loads the dashboard during a run, watches progress, queue depth and throughput
// change as jobs complete, opens a failed job's attempts and a finished job's artifact link, clicks
// "retry" on a failed run and "cancel" on the other, pauses and resumes a queue, shows a
// queue's limit and its use, and
// checks the page followed the change feed; saves a screenshot.
// Usage: node dashboard.mjs BASE_URL SCREENSHOT_PATH
import { chromium } from "playwright-core";

const [base, shot] = process.argv.slice(2);
const api = async (path, body) => {
  const r = await fetch(base + path, body === undefined ? {} : {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status} ${await r.text()}`);
  return r.json();
};
const cell = (page, run, cls) => page.locator(`tr.run[data-run="${run}"] td.${cls}`);
// Waits until the locator's text is `want` (or passes it, when it is a function).
const waitFor = async (what, locator, want) => {
  const deadline = Date.now() + 30000;
  for (;;) {
    const got = (await locator.textContent({ timeout: 1000 }).catch(() => null))?.trim();
    if (typeof want === "function" ? got != null && want(got) : got === want) return;
    if (Date.now() > deadline) throw new Error(`${what}: expected ${want}, got ${got}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};
const waitText = (page, run, cls, want) => waitFor(`${run} ${cls}`, cell(page, run, cls), want);
const waiting = (page, queue) => page.locator(`#queues tr[data-queue="${queue}"] td.waiting`);
const doneRate = (page, queue) => page.locator(`#queues tr[data-queue="${queue}"] td.done-rate`);
const artifact = "https://artifacts.example.invalid/notes/2026-11-20/C1.pdf";

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on("pageerror", (e) => { console.error("page error:", e.message); process.exitCode = 1; });
  const feedReads = [];
  page.on("request", (r) => { if (r.url().includes("/v1/events?")) feedReads.push(r.url()); });
  await page.goto(base + "/");
  await waitText(page, "dash/progress", "done", "0");
  await waitText(page, "dash/failing", "failed", "3");
  await waitFor("queue dq", waiting(page, "dq"), "200");

  // Work happens while the page is open: it must show the progress. The first job
  // names an artifact in its result.
  const jobs = (await api("/v1/workers/poll", { queue: "dq", max: 120 })).jobs;
  await api("/v1/workers/complete", {
    results: jobs.map((j, i) => ({ job: j.id, attempt: j.attempt, result: i ? null : { pdf: artifact } })),
  });
  await waitText(page, "dash/progress", "done", "120");
  await waitFor("queue dq", waiting(page, "dq"), "80");
  // The queue's throughput: jobs it finished per second over the last 10 s, from the
  // backend's statistics.
  await waitFor("queue dq done/s", doneRate(page, "dq"), (t) => Number(t) > 0);

  // Open the failing run, see its errors, retry it from the page.
  await page.locator('tr.run[data-run="dash/failing"] td').first().click();
  await page.locator("#failures tr.failure").first().waitFor();
  const err = await page.locator("#failures td.err").first().textContent();
  if (!err.includes("bad PAN")) throw new Error("failure error not shown: " + err);
  // The failed job's detail: its attempt with the error, and its timings.
  await page.locator("#failures tr.failure a[data-job]").first().click();
  await page.locator("#attempts td.err").first().waitFor();
  const attempts = await page.locator("#attempts").textContent();
  if (!attempts.includes("bad PAN")) throw new Error("attempt error not shown: " + attempts);
  const body = await page.locator("#job-body").textContent();
  if (!/started\s*\d{4}-\d\d-\d\d/.test(body) || !/finished\s*\d{4}-/.test(body)) throw new Error("timings not shown: " + body);
  // Its client's PAN and e-mail address are masked (a server without tokens).
  if (!body.includes("ABXXXXXX4F") || !body.includes("r***@example.com") || body.includes("ABCDE1234F") || body.includes("r.sharma@")) {
    throw new Error("personal data not masked: " + body);
  }
  await page.locator('button.retry[data-run="dash/failing"]').click();
  await waitText(page, "dash/failing", "failed", "0");
  const run = await api("/v1/runs/" + encodeURIComponent("dash/failing"));
  if (run.available !== 3) throw new Error("expected 3 re-queued jobs, got " + JSON.stringify(run));

  // A finished job, opened by id: its artifact is a link.
  await page.locator("#find input").fill(String(jobs[0].id));
  await page.locator("#find button").click();
  await page.locator("#job a.artifact").waitFor();
  const href = await page.locator("#job a.artifact").getAttribute("href");
  if (href !== artifact) throw new Error("artifact link: " + href);

  // Pause a queue from the page (after its confirmation): it shows a badge and workers
  // get nothing from it; resume it and they do again.
  const badge = page.locator('#queues tr[data-queue="dq"] .badge.paused');
  page.once("dialog", (d) => d.accept());
  await page.locator('button.pause[data-queue="dq"]').click();
  await badge.waitFor();
  const heldBack = (await api("/v1/workers/poll", { queue: "dq", max: 1 })).jobs;
  if (heldBack.length !== 0) throw new Error("a paused queue handed out " + JSON.stringify(heldBack));
  await page.locator('button.resume[data-queue="dq"]').click();
  await badge.waitFor({ state: "detached" });
  const queues = (await api("/v1/queues")).queues;
  if (queues.some((q) => q.paused)) throw new Error("still paused: " + JSON.stringify(queues));

  // A limit on the queue shows with its use: the cap holds for a remote worker too.
  const limitUrl = base + "/v1/limits/queue/dq";
  const put = await fetch(limitUrl, {
    method: "PUT", headers: { "content-type": "application/json" },
    body: JSON.stringify({ starts: { count: 100, per_ms: 1000 }, running: 5 }),
  });
  if (!put.ok) throw new Error("PUT limit: HTTP " + put.status);
  const limitRow = (cls) => page.locator(`#limits tr[data-scope="queue dq"] td.${cls}`);
  await waitFor("limit of dq", limitRow("limit"), "100 per 1 s, 5 running");
  const capped = (await api("/v1/workers/poll", { queue: "dq", max: 20 })).jobs;
  if (capped.length !== 5) throw new Error("the running cap of 5 handed out " + capped.length);
  await waitFor("dq running", limitRow("running"), "5 / 5");
  await waitFor("dq started", limitRow("started"), "5 / 100");
  const del = await fetch(limitUrl, { method: "DELETE" });
  if (!del.ok) throw new Error("DELETE limit: HTTP " + del.status);
  await page.locator("#no-limits").waitFor();

  // Cancel the unfinished rest of a run from the page (after its confirmation).
  page.once("dialog", (d) => d.accept());
  await page.locator('button.cancel[data-run="dash/progress"]').click();
  await waitText(page, "dash/progress", "done", "200");
  const cancelled = await api("/v1/runs/" + encodeURIComponent("dash/progress"));
  if (cancelled.cancelled !== 80) throw new Error("expected 80 cancelled jobs, got " + JSON.stringify(cancelled));
  // Live updates come from the change feed: it read from `latest`, then on by cursor.
  if (!feedReads.some((u) => u.includes("after=latest")) || !feedReads.some((u) => /after=\d+/.test(u))) {
    throw new Error("the page did not follow the change feed: " + JSON.stringify(feedReads));
  }
  await page.screenshot({ path: shot, fullPage: true });
  console.log("dashboard ok");
} finally {
  await browser.close();
}
