// Drives the feed's dashboard in headless Chromium for tests/dashboard.rs: the page
// asks for a reader's token, then, while this script posts batches and reads them
// back (and one long poll times out empty), shows the shard's seq and rec, a write
// rate, delivered rows, the share of empty answers, lag and batch-size percentiles,
// and the replica's lag. Saves a screenshot.
// Usage: node feed_dashboard.mjs BASE_URL SCREENSHOT_PATH PLAYWRIGHT_CORE_DIR
// (playwright-core is the one tranche-server's browser test installs.)
import { join } from "node:path";
import { pathToFileURL } from "node:url";
// The dashboards' one wait, tranche-server's.
import { until } from "../../../tranche-server/tests/browser/until.mjs";

const [base, shot, playwrightDir] = process.argv.slice(2);
const { chromium } = await import(pathToFileURL(join(playwrightDir, "index.mjs")).href);

const CORE = "core-1", READER = "read-1";
const call = async (path, token, body) => {
  const r = await fetch(base + path, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: "Bearer " + token, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status} ${await r.text()}`);
  return r.json();
};
let seq = 0;
const post = (n) => {
  const now = Date.now() * 1e6;
  const events = [];
  for (let i = 0; i < n; i++) {
    seq += 1;
    events.push({ type: "insert", seq, rec: seq, id: seq, firm: 1 + (seq % 3), broker: 10, instrument: 7,
      side: "buy", price: 10125, quantity: 500, created_at: now });
  }
  return call("/v1/feed/events", CORE, { events });
};
const text = async (locator) => (await locator.textContent({ timeout: 1000 }))?.trim();
const is = (locator, want) => async () => {
  const got = await text(locator);
  return (typeof want === "function" ? want(got) : got === want) || got;
};

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on("pageerror", (e) => { console.error("page error:", e.message); process.exitCode = 1; });
  const elsewhere = [];
  page.on("request", (r) => { if (!r.url().startsWith(base)) elsewhere.push(r.url()); });
  await page.goto(base + "/");
  // The server has tokens: the page asks for one, and a reader's lets it in.
  await until("the token form", async () => (await page.locator("#token").isVisible()) || "hidden");
  await page.locator('#token input[name="t"]').fill(READER);
  await page.locator("#token button").click();
  const shard = (cls) => page.locator(`#shards tr[data-shard="0"] td.${cls}`);
  const http = (cls) => page.locator(`#reads tr[data-protocol="http"] td.${cls}`);
  await until("shard 0 before any write", is(shard("seq"), "0"));

  // Traffic over a few of the page's scrapes: 20 batches of 10, each read back.
  let reads = 0;
  for (let i = 0; i < 20; i++) {
    await post(10);
    const got = await call("/v1/feed/orders?wait_ms=0&limit=10000", READER);
    if (got.count !== seq) throw new Error(`read ${got.count} orders, expected ${seq}`);
    reads += 1;
    await new Promise((r) => setTimeout(r, 100));
  }
  const end = (await call("/v1/feed/orders?wait_ms=0&limit=10000", READER)).next_cursor;
  reads += 1;
  const empty = await call(`/v1/feed/orders?cursor=${end}&wait_ms=50`, READER);
  if (empty.count !== 0) throw new Error("the last poll was not empty");
  reads += 1;

  const positive = (v) => v != null && Number(v) > 0;
  await until("seq", is(shard("seq"), String(seq)));
  await until("rec", is(shard("rec"), String(seq)));
  await until("orders", is(shard("orders"), String(seq)));
  await until("events written", is(shard("events"), String(seq)));
  await until("a write rate", is(shard("write-rate"), positive));
  await until("batch p50 of 10 events", is(shard("batch-p50"), (v) => v != null && Number(v) > 5 && Number(v) <= 10));
  await until("commit times", is(shard("commit-p99"), (v) => /^(> )?[\d.]+ (µs|ms|s)$/.test(v ?? "")));
  await until("answers", is(http("reads"), String(reads)));
  await until("empty answers", is(http("empty"), "1"));
  await until("a read rate", is(http("read-rate"), positive));
  await until("rows delivered per second", is(http("row-rate"), positive));
  await until("the empty share", is(http("empty-share"), (v) => /^\d+ %$/.test(v ?? "")));
  await until("lag p50", is(http("lag-p50"), (v) => /^(> )?[\d.]+ (µs|ms|s)$/.test(v ?? "")));
  await until("lag p99", is(http("lag-p99"), (v) => /^(> )?[\d.]+ (µs|ms|s)$/.test(v ?? "")));
  await until("rows per answer", is(http("rows-p99"), positive));
  await until("tcp listed, idle", is(page.locator('#reads tr[data-protocol="tcp"] td.reads'), "0"));
  // The replica figures the test registered.
  await until("replica lag", is(page.locator('#replica tr[data-shard="0"] td.behind'), "42"));
  await until("replica lag in time", is(page.locator('#replica tr[data-shard="0"] td.lag'), (v) => /s$/.test(v ?? "")));
  await until("replica following", is(page.locator('#replica tr[data-shard="0"] td.connected'), "yes"));
  await until("replica resyncs", is(page.locator('#replica tr[data-shard="0"] td.resyncs'), "1"));
  if (await page.locator("#no-replica").isVisible()) throw new Error("'not a replica' shows beside a replica's lag");
  await until("live", is(page.locator("#live"), (v) => (v ?? "").startsWith("live")));
  if (elsewhere.length) throw new Error("the page loaded from elsewhere: " + elsewhere.join(", "));
  await page.screenshot({ path: shot, fullPage: true });
  console.log("dashboard ok");
} finally {
  await browser.close();
}
