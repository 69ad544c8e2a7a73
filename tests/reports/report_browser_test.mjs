// The HTML reports of `kvserve bench --url` and `kvserve needle` opened in
// headless Chromium (Debian's `chromium`, driven by playwright-core from
// tests/oracles): each page loads without console errors, page errors or any
// request leaving the file (the reports are self-contained), every chart has
// a size, and the full-page screenshot is not blank (decoded here and its
// pixels counted). The reports come from `kvserve bench` and `kvserve
// needle` against kvserve_fake (`kvserve serve` over the fake backend: no
// model needed).
// Exits 77 (ctest: skipped) when chromium, playwright-core or the binary is
// absent.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import assert from "node:assert/strict";
import zlib from "node:zlib";

import { binary, requireBinary, skipFile, sourceDir, startServer } from "../server/common.mjs";

const chromiumPath = process.env.KVSERVE_CHROMIUM || "/usr/bin/chromium";
const pwPath = path.join(sourceDir, "tests/oracles/node_modules/playwright-core/index.mjs");
requireBinary();
// Under the sanitizers: skipped, run in the Release tree. Chromium's view of
// the same HTML does not change there, and the code that writes the reports
// runs under ASan in cli_bench_url_test and cli_needle_test, which check them.
if (process.env.KVSERVE_SANITIZED) skipFile("Chromium renders the same reports: run in the Release tree");
if (!existsSync(chromiumPath)) skipFile(`${chromiumPath} is missing (scripts/setup.sh installs Debian's chromium)`);
if (!existsSync(pwPath)) skipFile(`${pwPath} is missing (run scripts/setup.sh to install the npm test oracles)`);
const { chromium } = await import(pwPath);

// The flags a sandboxless CI container needs, and nothing that phones home.
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];

// Minimal PNG decoder (8-bit RGB/RGBA, non-interlaced, as Chromium writes
// screenshots): returns {width, height, channels, pixels}.
function decodePng(buf) {
  assert.equal(buf.subarray(0, 8).toString("hex"), "89504e470d0a1a0a", "not a PNG");
  let pos = 8, width = 0, height = 0, colorType = 0, depth = 0, interlace = 0;
  const idat = [];
  while (pos < buf.length) {
    const len = buf.readUInt32BE(pos);
    const type = buf.subarray(pos + 4, pos + 8).toString("ascii");
    const data = buf.subarray(pos + 8, pos + 8 + len);
    if (type === "IHDR") {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      depth = data[8];
      colorType = data[9];
      interlace = data[12];
    } else if (type === "IDAT") {
      idat.push(data);
    } else if (type === "IEND") {
      break;
    }
    pos += 12 + len;
  }
  assert.equal(depth, 8, "8-bit PNG expected");
  assert.equal(interlace, 0, "non-interlaced PNG expected");
  const channels = { 2: 3, 6: 4 }[colorType];
  assert.ok(channels, `colour type ${colorType}`);
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const out = Buffer.alloc(stride * height);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let x = 0; x < stride; x++) {
      const a = x >= channels ? out[y * stride + x - channels] : 0;
      const b = y > 0 ? out[(y - 1) * stride + x] : 0;
      const c = x >= channels && y > 0 ? out[(y - 1) * stride + x - channels] : 0;
      let v = line[x];
      if (filter === 1) v += a;
      else if (filter === 2) v += b;
      else if (filter === 3) v += (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
        v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      out[y * stride + x] = v & 0xff;
    }
  }
  return { width, height, channels, pixels: out };
}

// Fraction of pixels that are not (near) white, and how many distinct
// coarse colours there are.
function inkStats(png) {
  let ink = 0;
  const colours = new Set();
  const n = png.width * png.height;
  for (let i = 0; i < n; i++) {
    const r = png.pixels[i * png.channels], g = png.pixels[i * png.channels + 1], b = png.pixels[i * png.channels + 2];
    if (r < 235 || g < 235 || b < 235) ink++;
    colours.add(((r >> 5) << 6) | ((g >> 5) << 3) | (b >> 5));
  }
  return { ink: ink / n, colours: colours.size };
}

function run(args) {
  const r = spawnSync(binary, args, { encoding: "utf8", timeout: 120000 });
  assert.ok(r.status === 0 || r.status === 1, `kvserve ${args.join(" ")} exited ${r.status}:\n${r.stderr}`);
}

async function checkPage(file, minCharts, texts = []) {
  const profile = mkdtempSync(path.join(tmpdir(), "kvserve-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath, headless: true, args: FLAGS, viewport: { width: 1200, height: 900 },
  });
  try {
    const page = await context.newPage();
    const problems = [];
    page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()}`); });
    page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
    page.on("request", (r) => { if (!r.url().startsWith("file://")) problems.push(`request to ${r.url()}`); });
    page.on("requestfailed", (r) => problems.push(`failed request ${r.url()}`));
    await page.goto("file://" + file, { waitUntil: "load" });
    const charts = await page.evaluate(() =>
      [...document.querySelectorAll("svg")].map((s) => { const b = s.getBoundingClientRect(); return [b.width, b.height]; }));
    assert.ok(charts.length >= minCharts, `${file}: ${charts.length} charts < ${minCharts}`);
    for (const [w, h] of charts) assert.ok(w > 100 && h > 100, `${file}: a chart renders at ${w}x${h}`);
    // Sections that must be on the page, visible (not only in the markup).
    const visible = await page.evaluate(() => document.body.innerText);
    for (const t of texts) assert.ok(visible.includes(t), `${file}: "${t}" is not visible`);
    const shot = path.join(profile, "shot.png");
    await page.screenshot({ path: shot, fullPage: true });
    const stats = inkStats(decodePng(readFileSync(shot)));
    assert.deepEqual(problems, [], `${file}: ${problems.join("; ")}`);
    assert.ok(stats.ink > 0.02, `${file}: screenshot is blank (${(stats.ink * 100).toFixed(2)} % ink)`);
    assert.ok(stats.colours >= 6, `${file}: screenshot has ${stats.colours} colours`);
    console.log(`${path.basename(file)}: ${charts.length} charts, ${(stats.ink * 100).toFixed(1)} % ink, ${stats.colours} colours`);
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

test("bench and needle HTML reports render in headless Chromium", async () => {
  const server = await startServer({ args: ["--fake-step-ms", "1"] });
  const dir = mkdtempSync(path.join(tmpdir(), "kvserve-reports-"));
  try {
    const bench = path.join(dir, "bench.html");
    const needle = path.join(dir, "needle.html");
    // With probes: the fake backend's story is no answer to a recall
    // question, so the report's probe table has misses to show.
    run(["bench", "--url", server.baseURL, "-c", "2", "--input-lengths", "32,64", "--output-len", "8",
      "--num-requests", "8", "--metrics-interval", "0.05", "--no-progress", "--probes", "recall:0.3,malformed:0.2",
      "--seed", "3", "--html", bench]);
    run(["needle", "--url", server.baseURL, "--lengths", "64,128", "--depths", "0,50,100", "--trials", "1",
      "--no-progress", "--html", needle]);
    await checkPage(bench, 5, ["Answers under load (probes)", "recall", "malformed", "FAIL"]);
    await checkPage(needle, 2);
    const suite = path.join(dir, "suite.html");
    run(["needle", "--url", server.baseURL, "--tasks", "single,vt,cwe", "--lengths", "96,160", "--depths", "0,100",
      "--trials", "1", "--no-progress", "--html", suite]);
    await checkPage(suite, 3, ["Scores by task and length", "aggregate", "Task vt", "Task cwe"]);
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
