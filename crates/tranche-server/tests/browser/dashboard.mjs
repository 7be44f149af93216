// Loads the dashboard during a run, watches progress, queue depth and throughput
// change as jobs complete, opens a failed job's attempts and a finished job's artifact link, clicks
// "retry" on a failed run and "cancel" on the other, pauses and resumes a queue, shows a queue's limit
// and its use, and
// checks the page followed the change feed. Then the job list: pages through a queue's
// jobs, filters by state, opens a failed job's page (its error masked) and retries
// it, cancels and deletes an available job from its page; and the schedules panel
// shows declared schedules with their next due time. The ACH panel opens on today
// and, given the scenario's day, shows its entries by state and its windows' times,
// files and totals; a server without a ledger says it has none. Saves a screenshot.
// Usage: node dashboard.mjs BASE_URL SCREENSHOT_PATH NO_LEDGER_BASE_URL ACH_DAY
import { chromium } from "playwright-core";
import { until } from "./until.mjs";

const [base, shot, noLedgerBase, achDay] = process.argv.slice(2);
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
// A job as the API has it, or its HTTP status when there is none.
const jobNow = async (id) => {
  const r = await fetch(`${base}/v1/jobs/${id}`);
  return r.ok ? r.json() : { status: r.status };
};
// The same time format as the page's: microseconds since the epoch, UTC, to the ms.
const utc = (v) => new Date(v / 1000).toISOString().replace("T", " ").slice(0, 23);
const listed = (page) => page.locator("#job-list tr.job").evaluateAll((rows) =>
  rows.map((r) => ({ id: Number(r.dataset.job), state: r.dataset.state })));
const filterJobs = async (page, { run = "", state = "", queue = "", kind = "" }) => {
  const form = page.locator("#job-filter");
  await form.locator('input[name="run"]').fill(run);
  await form.locator('select[name="state"]').selectOption(state);
  await form.locator('input[name="queue"]').fill(queue);
  await form.locator('input[name="kind"]').fill(kind);
  await form.locator("button").click();
};
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
  const achReads = [];
  page.on("request", (r) => { if (r.url().includes("/v1/ach/status")) achReads.push(r.url()); });
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

  // The job list, a page at a time: the queue dq's 200 jobs in pages of at most 50,
  // "next page" continuing after the last, "previous page" going back.
  await filterJobs(page, { queue: "dq" });
  let first = [];
  await until("the first page of queue dq", async () => {
    first = await listed(page);
    return first.length > 0 && (await page.locator("#jobs-next").isVisible()) || first;
  });
  if (first.length > 50) throw new Error("a page of more than 50: " + first.length);
  const firstMax = Math.max(...first.map((j) => j.id));
  await page.locator("#jobs-next").click();
  await until("the second page of queue dq", async () => {
    const second = await listed(page);
    return second.length > 0 && second.every((j) => j.id > firstMax) || second;
  });
  await page.locator("#jobs-prev").click();
  await until("the first page again", async () => JSON.stringify(await listed(page)) === JSON.stringify(first) || await listed(page));

  // Filtered by state: the failed job of queue jf (every other failure was retried
  // above), its error masked in the list.
  const failed = (await api("/v1/jobs?state=failed&queue=jf")).jobs[0];
  await filterJobs(page, { state: "failed" });
  const failedRow = page.locator(`#job-list tr.job[data-job="${failed.id}"]`);
  await failedRow.waitFor();
  await until("only failed jobs listed", async () => (await listed(page)).every((j) => j.state === "failed") || await listed(page));
  const rowText = await failedRow.textContent();
  if (!rowText.includes("ABXXXXXX4F") || rowText.includes("ABCDE1234F")) throw new Error("list error not masked: " + rowText);

  // Its page: its attempt's error (masked), and only the actions a failed job allows.
  await failedRow.click();
  await waitFor("the failed job's page", page.locator("#job-title"), (t) => t.startsWith(`job ${failed.id} ·`) && t.endsWith("failed"));
  const attempt = await page.locator("#attempts td.err").first().textContent();
  if (attempt !== "no contract note for ABXXXXXX4F") throw new Error("attempt error: " + attempt);
  const enabled = async () => Object.fromEntries(await Promise.all(["retry", "cancel", "delete"].map(async (a) =>
    [a, await page.locator(`#job button.job-${a}`).isEnabled()])));
  const buttons = JSON.stringify(await enabled());
  if (buttons !== JSON.stringify({ retry: true, cancel: false, delete: true })) throw new Error("a failed job's actions: " + buttons);
  await page.locator("#job button.job-retry").click();
  await until("the job revived", async () => (await jobNow(failed.id)).state === "available" || await jobNow(failed.id));
  await waitFor("the retry's answer", page.locator("#job-msg"), "retried: 1 job revived");
  await waitFor("the page's state", page.locator("#job-body .state"), "available");

  // An available job: cancelled from its page (after the confirmation), then deleted.
  const ja = (await api("/v1/jobs?queue=ja")).jobs.map((j) => j.id);
  await filterJobs(page, { state: "available", queue: "ja" });
  await page.locator(`#job-list tr.job[data-job="${ja[0]}"]`).click();
  await waitFor("the available job's page", page.locator("#job-title"), (t) => t.startsWith(`job ${ja[0]} ·`) && t.endsWith("available"));
  if (!(await page.locator("#job button.job-cancel").isEnabled()) || await page.locator("#job button.job-delete").isEnabled()) {
    throw new Error("an available job's actions: " + JSON.stringify(await enabled()));
  }
  page.once("dialog", (d) => d.accept());
  await page.locator("#job button.job-cancel").click();
  await until("the job cancelled", async () => (await jobNow(ja[0])).state === "cancelled" || await jobNow(ja[0]));
  await waitFor("the cancel's answer", page.locator("#job-msg"), "cancelled 1 job");
  await until("delete enabled", async () => await page.locator("#job button.job-delete").isEnabled());
  page.once("dialog", (d) => d.accept());
  await page.locator("#job button.job-delete").click();
  await until("the job deleted", async () => (await jobNow(ja[0])).status === 404 || await jobNow(ja[0]));
  await waitFor("the page after delete", page.locator("#job-title"), `job ${ja[0]} deleted`);
  // Opened by id now, it is gone: the page says what the API answered, and offers
  // no action.
  await page.locator("#find input").fill(String(ja[0]));
  await page.locator("#find button").click();
  await waitFor("a deleted job's page", page.locator("#job-title"), `job ${ja[0]}: job ${ja[0]} not found`);
  const none = JSON.stringify(await enabled());
  if (none !== JSON.stringify({ retry: false, cancel: false, delete: false })) throw new Error("a missing job's actions: " + none);
  if ((await jobNow(ja[1])).state !== "available") throw new Error("the other job changed: " + JSON.stringify(await jobNow(ja[1])));

  // The schedules panel: each declared schedule's timing and next due time.
  const schedules = Object.fromEntries((await api("/v1/schedules")).schedules.map((s) => [s.name, s]));
  const scheduleCell = (name, cls) => page.locator(`#schedules tr[data-schedule="${name}"] td.${cls}`);
  await waitFor("dash-eod's timing", scheduleCell("dash-eod", "when"), "cron 0 18 * * MON-FRI (Asia/Kolkata)");
  await waitFor("dash-eod's next due time", scheduleCell("dash-eod", "next-due"), utc(schedules["dash-eod"].next_due));
  await waitFor("dash-once's timing", scheduleCell("dash-once", "when"), "once at 2099-01-01 09:00:00.000 UTC");
  await waitFor("dash-once's next due time", scheduleCell("dash-once", "next-due"), "2099-01-01 09:00:00.000");

  // The ACH panel: on today (the API's today, UTC) first, then the scenario's day,
  // picked, as tests/api/ach_status.rs sets it up.
  const achDate = page.locator('#ach-form input[name="date"]');
  await until("the ACH date is today", async () => {
    const [shown, today] = [await achDate.inputValue(), (await api("/v1/ach/status")).date];
    return shown === today || { shown, today };
  });
  await achDate.fill(achDay);
  const achBank = (bank) => page.locator(`#ach .ach-bank[data-bank="${bank}"]`);
  const achEntries = (bank, row, state) => achBank(bank).locator(`.ach-entries tr.${row} td[data-state="${state}"]`);
  const achWindow = (bank, w, cls) => achBank(bank).locator(`.ach-windows tr[data-window="${w}"] td.${cls}`);
  await waitFor("first's submitted entries", achEntries("first", "count", "submitted"), "3");
  await waitFor("first's submitted amount", achEntries("first", "amount", "submitted"), "$39.00");
  await waitFor("first's cancelled amount", achEntries("first", "amount", "cancelled"), "$7.10");
  await waitFor("nd-night opens", achWindow("first", "nd-night", "opens"), "2026-03-03 02:00");
  await waitFor("nd-night closes", achWindow("first", "nd-night", "closes"), "2026-03-03 07:15");
  await waitFor("nd-night's submitted files", achWindow("first", "nd-night", 'files[data-state="submitted"]'), "1");
  await waitFor("nd-night's released files", achWindow("first", "nd-night", 'files[data-state="released"]'), "1");
  await waitFor("nd-night's entries", achWindow("first", "nd-night", "entries"), "3");
  await waitFor("nd-night's debits", achWindow("first", "nd-night", "debits"), "$4.00");
  await waitFor("nd-night's credits", achWindow("first", "nd-night", "credits"), "$35.00");
  await waitFor("late, in no rules, has no times", achWindow("first", "late", "opens"), "–");
  await waitFor("second's accepted amount", achEntries("second", "amount", "accepted"), "$9.00");
  const banks = await page.locator("#ach .ach-bank").evaluateAll((els) => els.map((e) => e.dataset.bank));
  if (JSON.stringify(banks) !== JSON.stringify(["first", "second"])) throw new Error("ACH banks: " + JSON.stringify(banks));
  await waitFor("first's modifiers", achBank("first").locator(".ach-modifiers"), "file ID modifiers: 1 sent, 1 waiting, 34 free");
  if (await achBank("first").locator(".ach-problem").count() !== 0) throw new Error("a problem shown on a day without one");
  // Where an operator looks first on a payment day: above the runs and the job list.
  const firstPanel = await page.evaluate(() => document.querySelector("main > section").id);
  if (firstPanel !== "ach") throw new Error("the first panel is " + firstPanel + ", not the ACH files");
  // The figures stay on the picked day through the page's refreshes.
  const reads = achReads.length;
  await until("two refreshes of the picked day", async () =>
    achReads.slice(reads).filter((u) => u.endsWith("?date=" + achDay)).length >= 2 || achReads.slice(reads));
  if ((await achDate.inputValue()) !== achDay) throw new Error("the picked day was replaced: " + await achDate.inputValue());
  await waitFor("first's submitted entries after a refresh", achEntries("first", "count", "submitted"), "3");

  await page.screenshot({ path: shot, fullPage: true });

  // A server without a ledger: the panel says so and asks for no date.
  const bare = await browser.newPage();
  bare.on("pageerror", (e) => { console.error("page error:", e.message); process.exitCode = 1; });
  await bare.goto(noLedgerBase + "/");
  await waitFor("no ledger", bare.locator("#ach-msg"), "no ACH ledger on this server");
  if (await bare.locator("#ach-form").isVisible()) throw new Error("the date picker shows without a ledger");
  const last = await bare.evaluate(() => [...document.querySelectorAll("main > section")].pop().id);
  if (last !== "ach") throw new Error("without a ledger the ACH panel should be last, not before " + last);
  await bare.close();
  console.log("dashboard ok");
} finally {
  await browser.close();
}
