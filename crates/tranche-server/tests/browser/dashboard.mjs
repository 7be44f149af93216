// Loads the dashboard during a run, watches progress change as jobs complete, clicks
// "retry" on a failed run and waits for its jobs to be re-queued; saves a screenshot.
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
const waitText = async (page, run, cls, want) => {
  const deadline = Date.now() + 30000;
  for (;;) {
    const got = (await cell(page, run, cls).textContent().catch(() => null))?.trim();
    if (got === want) return;
    if (Date.now() > deadline) throw new Error(`${run} ${cls}: expected ${want}, got ${got}`);
    await page.waitForTimeout(50);
  }
};

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on("pageerror", (e) => { console.error("page error:", e.message); process.exitCode = 1; });
  await page.goto(base + "/");
  await waitText(page, "dash/progress", "done", "0");
  await waitText(page, "dash/failing", "failed", "3");

  // Work happens while the page is open: it must show the progress.
  const jobs = (await api("/v1/workers/poll", { queue: "dq", max: 120 })).jobs;
  await api("/v1/workers/complete", { results: jobs.map((j) => ({ job: j.id, attempt: j.attempt })) });
  await waitText(page, "dash/progress", "done", "120");

  // Open the failing run, see its errors, retry it from the page.
  await page.locator('tr.run[data-run="dash/failing"] td').first().click();
  await page.locator("#failures tr.failure").first().waitFor();
  const err = await page.locator("#failures td.err").first().textContent();
  if (!err.includes("bad PAN")) throw new Error("failure error not shown: " + err);
  await page.locator('button.retry[data-run="dash/failing"]').click();
  await waitText(page, "dash/failing", "failed", "0");
  const run = await api("/v1/runs/" + encodeURIComponent("dash/failing"));
  if (run.available !== 3) throw new Error("expected 3 re-queued jobs, got " + JSON.stringify(run));
  await page.screenshot({ path: shot, fullPage: true });
  console.log("dashboard ok");
} finally {
  await browser.close();
}
