// The dashboard's workflows panel: lists the two workflows, opens the completed one
// (every step it ran green, the switch's other case not reached), shows a step's
// input and output on a click, then the failed one (its failed step red, the reason
// shown). Saves a screenshot.
// Usage: node workflows.mjs BASE_URL SCREENSHOT_PATH GOOD_ID BAD_ID
import { chromium } from "playwright-core";
import { until } from "./until.mjs";

const [base, shot, good, bad] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1400 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(base + "/");
  const row = (id) => page.locator(`#wf-list tr.wf[data-wf="${id}"]`);
  await until("both workflows listed with their status", async () => {
    const g = await row(good).getAttribute("data-status", { timeout: 500 });
    const b = await row(bad).getAttribute("data-status", { timeout: 500 });
    return (g === "COMPLETED" && b === "FAILED") || `${g} ${b}`;
  });
  const stepState = (ref) => page.locator(`#wf-graph .wf-step[data-ref="${ref}"]`).getAttribute("data-status", { timeout: 500 });
  await row(good).click();
  await until("the completed workflow drawn", async () => {
    const states = await Promise.all(["first", "fork", "left", "right", "join", "pick", "case_a", "case_b"].map(stepState));
    const want = ["COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED", "NOT_REACHED"];
    return JSON.stringify(states) === JSON.stringify(want) || states.join(",");
  });
  // The fork's branches side by side, inside the fork's box.
  const lanes = await page.locator('#wf-graph .wf-box:has(> .wf-step[data-ref="fork"]) .wf-lane').count();
  if (lanes !== 2) throw new Error(`expected the fork's 2 branches drawn, got ${lanes}`);
  await page.locator('#wf-graph .wf-step[data-ref="left"]').click();
  await until("the step's input and output", async () => {
    const text = await page.locator("#wf-step-body").textContent({ timeout: 500 });
    return (text.includes('"who": "left"') && text.includes('"done": "left done"')) || text;
  });
  await row(bad).click();
  await until("the failed workflow's failed step", async () => {
    const st = await stepState("case_b");
    const status = await page.locator("#wf-status").textContent({ timeout: 500 });
    return (st === "FAILED" && status.includes("FAILED") && status.includes("the bank refused it")) || `${st} ${status}`;
  });
  await page.screenshot({ path: shot, fullPage: true });
  if (errors.length) throw new Error("page errors: " + errors.join("; "));
  console.log("workflows ok");
} finally {
  await browser.close();
}
