// The built-in status page (GET / of `kvserve serve`, the bundled model)
// in headless Chromium (Debian's chromium, driven by playwright-core from
// tests/oracles): after a few requests the page loads and renders without
// console errors, page errors or any request leaving the server (it is
// self-contained); every number it shows for a Prometheus series
// (data-metric / data-value) equals that series on /metrics; the model
// hash matches /v1/models; the recent-requests table lists the requests;
// the history charts have points. Its screenshot goes to
// $KVSERVE_SCREENSHOT_DIR (docs/img/status-page.png was made so).
// The same page on `kvserve gateway` in front of that server: its numbers
// (single series, or sum(...) / count(...) - sum(...) over a family) equal
// the gateway's /metrics, the replicas table lists the replica, and the
// screenshot is gateway-status-page.png.
// Skips (77) under sanitizers and without chromium, playwright-core or the binary.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";

import { startGateway } from "../gateway/common.mjs";
import { metrics, request, requireBinary, skipFile, sourceDir, startServer } from "../server/common.mjs";

const chromiumPath = process.env.KVSERVE_CHROMIUM || "/usr/bin/chromium";
const pwPath = path.join(sourceDir, "tests/oracles/node_modules/playwright-core/index.mjs");
if (process.env.KVSERVE_SANITIZED) skipFile("a browser against a sanitized server checks nothing more (ops label)");
requireBinary();
if (!existsSync(chromiumPath)) skipFile(`${chromiumPath} is missing (scripts/setup.sh installs Debian's chromium)`);
if (!existsSync(pwPath)) skipFile(`${pwPath} is missing (run scripts/setup.sh to install the npm test oracles)`);
const { chromium } = await import(pwPath);

const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];

let server;
let gateway;
const profile = mkdtempSync(path.join(tmpdir(), "kvserve-chromium-"));
before(async () => {
  server = await startServer({ fake: false, args: ["--threads", "1", "--max-context-length", "1024"] });
  gateway = await startGateway({
    pools: [{ name: "main", max_context: 1024, replicas: [server.baseURL] }],
    gateway: { allow_anonymous: true }, model: path.join(sourceDir, "models/kvserve-tiny.gguf"), dir: profile,
  });
});
after(async () => {
  if (gateway) assert.equal((await gateway.stop()).code, 0);
  if (server) assert.equal((await server.stop()).code, 0);
  rmSync(profile, { recursive: true, force: true });
});

test("status page renders in headless Chromium and its numbers match /metrics", async () => {
  const N = 5;
  for (let i = 0; i < N; i++) {
    const r = await request(server, "POST", "/v1/completions",
      { model: "kvserve-tiny", prompt: `Once upon a time ${i}`, max_tokens: 24, temperature: 0 });
    assert.equal(r.status, 200, r.text);
  }
  await request(server, "POST", "/v1/completions", { model: "kvserve-tiny", prompt: "x", max_tokens: 5000 });  // 400
  // Two history samples (one every 2 s) after the requests.
  await new Promise((r) => setTimeout(r, 4500));

  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath, headless: true, args: FLAGS, viewport: { width: 1280, height: 1000 },
  });
  try {
    const page = await context.newPage();
    const problems = [];
    page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()}`); });
    page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
    page.on("request", (r) => { if (!r.url().startsWith(server.baseURL + "/")) problems.push(`request to ${r.url()}`); });
    page.on("requestfailed", (r) => problems.push(`failed request ${r.url()}`));
    await page.goto(server.baseURL + "/", { waitUntil: "load" });
    await page.waitForSelector("body[data-rendered]", { timeout: 15000 });
    const shown = await page.evaluate(() => ({
      values: [...document.querySelectorAll("[data-metric]")].map((e) => [e.dataset.metric, Number(e.dataset.value), e.textContent]),
      facts: [...document.querySelectorAll("#facts tr")].map((tr) => [...tr.children].map((td) => td.textContent)),
      rows: document.querySelectorAll("#table tr").length - 1,
      state: document.getElementById("state").textContent,
      charts: [...document.querySelectorAll("#charts svg")].map((s) => s.querySelectorAll("polyline").length),
      axes: [...document.querySelectorAll("#charts .axis")].map((a) => a.textContent),
      titles: [...document.querySelectorAll("#charts .t")].map((t) => t.textContent),
      scroll: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
      updated: document.getElementById("updated").textContent,
      firstCell: document.querySelector("#table tr:nth-child(2) td")?.textContent,
      header: document.querySelector("#table th")?.textContent,
    }));
    const m = await metrics(server);
    assert.ok(shown.scroll[0] <= shown.scroll[1], `horizontal scroll at 1280 px: ${shown.scroll}`);
    assert.ok(shown.axes.length >= 6 && shown.axes.every((a) => /\d:\d\d:\d\d.*\d:\d\d:\d\d/.test(a)), `time axes: ${shown.axes}`);
    assert.ok(shown.titles.some((t) => /\(peak /.test(t)), `chart titles: ${shown.titles}`);
    assert.match(shown.updated, /^updated \d/);
    assert.equal(shown.header, "ended");
    assert.match(shown.firstCell, /\d:\d\d:\d\d/, `the end time is a local time: ${shown.firstCell}`);
    assert.deepEqual(problems, [], problems.join("; "));
    assert.equal(shown.state, "ready");
    assert.ok(shown.values.length >= 12, `${shown.values.length} numbers tied to series`);
    for (const [metric, value, text] of shown.values) {
      assert.equal(value, evaluate(metric, m), `${metric}: page ${value} (${text})`);
    }
    const stat = Object.fromEntries(shown.values.map(([metric, value]) => [metric, value]));
    assert.equal(stat['sum(kvserve:http_requests_total{path=~"/v1/.+",status=~"4.."})'], 1, "the request refused as too long");
    assert.equal(stat['sum(kvserve:http_requests_total{path=~"/v1/.+",status=~"5.."})'], 0, "the /ready 503s of the start are not failures");
    const models = (await request(server, "GET", "/v1/models")).json;
    const facts = Object.fromEntries(shown.facts);
    assert.equal(facts["SHA-256"], models.data[0].sha256);
    assert.equal(facts.Model, "kvserve-tiny");
    assert.equal(shown.rows, N + 1, "the recent-requests table lists every generation request");
    assert.ok(shown.charts.length >= 6 && shown.charts.filter((n) => n > 0).length >= 4, `charts with lines: ${shown.charts}`);
    const dir = process.env.KVSERVE_SCREENSHOT_DIR || profile;
    const shot = path.join(dir, "status-page.png");
    await page.screenshot({ path: shot, fullPage: true });
    assert.ok(statSync(shot).size > 20000, "the screenshot has content");
    console.log(`status page: ${shown.values.length} numbers equal /metrics, ${shown.rows} recent requests, ` +
      `${shown.charts.length} charts; screenshot ${shot}`);
  } finally {
    await context.close();
  }
});

// A stat's `metric` evaluated on an exposition: one series, sum(family) or
// count(family) - sum(family).
function evaluate(metric, m) {
  const family = (name) => [...m.entries()].filter(([k]) => k.split("{")[0] === name).map(([, v]) => v);
  let g = /^count\((\S+)\) - sum\((\S+)\)$/.exec(metric);
  if (g) {
    assert.equal(g[1], g[2]);
    const v = family(g[1]);
    return v.length - v.reduce((a, b) => a + b, 0);
  }
  // sum(NAME{[path=~"PREFIX.+",]status=~"D.."}): one status class, optionally of the API paths only.
  g = /^sum\(([^{}\s]+)\{(?:path=~"([^"]+)\.\+",)?status=~"(\d)\.\."\}\)$/.exec(metric);
  if (g) {
    return [...m.entries()].filter(([k]) => k.split("{")[0] === g[1] && new RegExp(`status="${g[3]}\\d\\d"`).test(k) &&
      (!g[2] || k.includes(`path="${g[2]}`))).reduce((a, [, v]) => a + v, 0);
  }
  g = /^sum\((\S+)\)$/.exec(metric);
  if (g) return family(g[1]).reduce((a, b) => a + b, 0);
  assert.ok(m.has(metric), `the page shows ${metric}, which /metrics does not have`);
  return m.get(metric);
}

test("the gateway's status page renders and its numbers match the gateway's /metrics", async () => {
  for (let i = 0; i < 3; i++) {
    const r = await request(gateway, "POST", "/v1/completions",
      { model: "kvserve-tiny", prompt: `Once upon a time ${i}`, max_tokens: 16, temperature: 0 });
    assert.equal(r.status, 200, r.text);
  }
  assert.equal((await request(gateway, "POST", "/v1/completions", { model: "kvserve-tiny", prompt: "x", max_tokens: 5000 })).status, 400);
  await new Promise((r) => setTimeout(r, 4500));  // history samples after the requests

  const context = await chromium.launchPersistentContext(path.join(profile, "gw"), {
    executablePath: chromiumPath, headless: true, args: FLAGS, viewport: { width: 1280, height: 1000 },
  });
  try {
    const page = await context.newPage();
    const problems = [];
    page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()}`); });
    page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
    page.on("request", (r) => { if (!r.url().startsWith(gateway.admin.baseURL + "/")) problems.push(`request to ${r.url()}`); });
    page.on("requestfailed", (r) => problems.push(`failed request ${r.url()}`));
    await page.goto(gateway.admin.baseURL + "/", { waitUntil: "load" });
    await page.waitForSelector("body[data-rendered]", { timeout: 15000 });
    const shown = await page.evaluate(() => ({
      title: document.getElementById("title").textContent,
      values: [...document.querySelectorAll("[data-metric]")].map((e) => [e.dataset.metric, Number(e.dataset.value), e.textContent]),
      facts: [...document.querySelectorAll("#facts tr")].map((tr) => [...tr.children].map((td) => td.textContent)),
      rows: [...document.querySelectorAll("#table tr")].slice(1).map((tr) => [...tr.children].map((td) => td.textContent)),
      state: document.getElementById("state").textContent,
      charts: [...document.querySelectorAll("#charts svg")].map((s) => s.querySelectorAll("polyline").length),
      titles: [...document.querySelectorAll("#charts .t")].map((t) => t.textContent),
    }));
    const m = await metrics(gateway);
    assert.deepEqual(problems, [], problems.join("; "));
    assert.equal(shown.title, "kvserve gateway");
    assert.equal(shown.state, "ready");
    assert.ok(shown.values.length >= 12, `${shown.values.length} numbers tied to series`);
    for (const [metric, value, text] of shown.values) {
      assert.equal(value, evaluate(metric, m), `${metric}: page ${value} (${text})`);
    }
    const stat = Object.fromEntries(shown.values.map(([metric, value]) => [metric, value]));
    assert.equal(stat["sum(kvserve_gateway:requests_total)"], 4, "3 answered, 1 refused as too long");
    assert.equal(stat['sum(kvserve_gateway:requests_total{status=~"4.."})'], 1, "the refusal is split out");
    assert.equal(stat['sum(kvserve_gateway:requests_total{status=~"5.."})'], 0);
    assert.equal(Object.fromEntries(shown.facts).Pools, "main (up to 1024 tokens, 1 replica)");
    assert.equal(Object.fromEntries(shown.facts).Releases, "main: stable");
    assert.equal(shown.rows.length, 1);
    assert.deepEqual(shown.rows[0].slice(0, 3), ["main", server.baseURL, "healthy"]);
    assert.ok(shown.charts.length === 8 && shown.charts.filter((n) => n > 0).length >= 4, `charts with lines: ${shown.charts}`);
    // Requests over time by status class.
    for (const t of ["Requests/s", "Failed (5xx)/s", "Refused (4xx)/s"]) {
      assert.ok(shown.titles.some((x) => x.startsWith(t)), `a chart "${t}" in ${shown.titles}`);
    }
    const dir = process.env.KVSERVE_SCREENSHOT_DIR || profile;
    const shot = path.join(dir, "gateway-status-page.png");
    await page.screenshot({ path: shot, fullPage: true });
    assert.ok(statSync(shot).size > 20000, "the screenshot has content");
    console.log(`gateway status page: ${shown.values.length} numbers equal /metrics; screenshot ${shot}`);
  } finally {
    await context.close();
  }
});

// A page whose server is gone says so: a red "unreachable" badge instead of
// the last state, the numbers greyed, the time of the last update.
test("the status page turns stale when its server stops answering", async () => {
  const fake = await startServer({ fake: true });
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath, headless: true, args: FLAGS, viewport: { width: 1280, height: 1000 },
  });
  try {
    const page = await context.newPage();
    await page.goto(fake.baseURL + "/", { waitUntil: "load" });
    await page.waitForSelector("body[data-rendered]", { timeout: 15000 });
    assert.equal(await page.textContent("#state"), "ready");
    assert.equal(await page.getAttribute("body", "data-stale"), null);
    await fake.stop();
    await page.waitForSelector("body[data-stale]", { timeout: 15000 });
    const stale = await page.evaluate(() => ({
      state: document.getElementById("state").textContent,
      cls: document.getElementById("state").className,
      error: document.getElementById("error").textContent,
      opacity: Number(getComputedStyle(document.querySelector("main")).opacity),
    }));
    assert.equal(stale.state, "unreachable");
    assert.match(stale.cls, /stale/);
    assert.match(stale.error, /cannot reach the server .*numbers as of \d/);
    assert.ok(stale.opacity < 1, `main opacity ${stale.opacity}`);
  } finally {
    await context.close();
    await fake.stop();
  }
});
