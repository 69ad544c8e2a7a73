#!/usr/bin/python3
"""Checks the reports of `kvserve bench --url` and `kvserve needle` from the
outside: JSON content and internal consistency (figures recomputed from the
per-request / per-case records), the printed PASS/FAIL lines against the
JSON, the exit code against the checks, and every SVG of the HTML report
parsed by Python's XML parser (an independent one).

  check_reports.py bench  REPORT.json REPORT.html STDOUT.txt EXIT_CODE [MIN_RUNS]
  check_reports.py needle REPORT.json REPORT.html STDOUT.txt EXIT_CODE [EXPECT_MIN_RECALL]
"""
import json
import math
import re
import statistics
import sys
import xml.etree.ElementTree as ET

SVG_NS = "{http://www.w3.org/2000/svg}"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def svgs_of(html):
    blocks = re.findall(r"<svg\b.*?</svg>", html, flags=re.S)
    parsed = []
    for i, b in enumerate(blocks):
        try:
            parsed.append(ET.fromstring(b))
        except ET.ParseError as e:
            failures.append(f"SVG #{i} is not well-formed XML: {e}")
    return parsed


def common_html(html):
    check(html.startswith("<!DOCTYPE html>"), "HTML: no doctype")
    check("<script" not in html.lower(), "HTML: has a script")
    # Self-contained: nothing loaded from elsewhere.
    for attr in re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', html):
        check(not re.match(r"(https?:)?//", attr), f"HTML loads {attr}")
    check("<link" not in html.lower(), "HTML: has a <link>")
    check("@import" not in html, "HTML: CSS @import")


def wilson(hits, n, z=1.96):
    """The Wilson score interval of hits/n (independent of the C++ one)."""
    if n == 0:
        return 0.0, 1.0
    p, z2 = hits / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def check_lines(stdout, checks):
    for c in checks:
        line = f"{c['status']} {c['name']}:"
        check(any(l.startswith(line) for l in stdout.splitlines()), f"stdout lacks '{line}'")


def pct(values, p):
    values = sorted(values)
    if not values:
        return None
    k = (len(values) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def bench(j, html, stdout, code, min_runs):
    check(j.get("tool") == "kvserve bench", "JSON: tool")
    runs = j.get("runs", [])
    check(len(runs) >= min_runs, f"JSON: {len(runs)} runs < {min_runs}")
    for r in runs:
        s, f, reqs = r["settings"], r["figures"], r["requests"]
        name = s["name"]
        check(len(reqs) == s["num_requests"], f"{name}: {len(reqs)} request records for {s['num_requests']} planned")
        # Probes are scored, not timed: their tallies recomputed from the
        # records, the figures from the other requests.
        probes = [q for q in reqs if "probe" in q]
        tallies = {}
        for q in probes:
            t = tallies.setdefault(q["probe"]["kind"], {"sent": 0, "right": 0, "misses": {}})
            if q["sent"] is None:
                continue
            t["sent"] += 1
            v = q["probe"]["verdict"]
            t["right"] += v["ok"]
            check(v["ok"] == (v["miss"] is None), f"{name}: request {q['index']}: verdict {v}")
            if not v["ok"]:
                t["misses"][v["miss"]] = t["misses"].get(v["miss"], 0) + 1
        got = {t["kind"]: {"sent": t["sent"], "right": t["right"], "misses": t["misses"]} for t in r["probes"]}
        check(got == {k: v for k, v in tallies.items() if v["sent"]}, f"{name}: probe tallies {got} != {tallies}")
        if probes:
            check("Answers under load" in html and all(k in html for k in got), f"{name}: HTML lacks the probes")
            check(all(f"probes: {k} " in stdout for k in got), f"{name}: stdout lacks the probes")
        reqs = [q for q in reqs if "probe" not in q]
        check(f["planned"] == len(reqs), f"{name}: figures.planned {f['planned']} != {len(reqs)} ordinary requests")
        ok = [q for q in reqs if q["ok"]]
        check(f["ok"] == len(ok), f"{name}: figures.ok {f['ok']} != {len(ok)} ok records")
        check(len(ok) > 0, f"{name}: no request succeeded")
        for q in ok:
            check(q["ttft"] is not None and q["ttft"] > 0, f"{name}: request {q['index']} has no TTFT")
            check(q["ttft"] <= q["e2e"] + 1e-9, f"{name}: request {q['index']} TTFT > E2E")
            check(q["completion_tokens"] == s["output_len"] or not s["ignore_eos"],
                  f"{name}: request {q['index']} generated {q['completion_tokens']} != {s['output_len']} tokens")
            if s["multi_turn"]["conversations"] == 0:
                check(q["prompt_tokens"] == q["input_tokens"],
                      f"{name}: request {q['index']} prompt {q['prompt_tokens']} != target {q['input_tokens']}")
        ttfts = [q["ttft"] for q in ok]
        p50 = pct(ttfts, 50)
        check(abs(f["ttft"]["p50"] - p50) < 1e-9, f"{name}: TTFT p50 {f['ttft']['p50']} != recomputed {p50}")
        check(abs(f["ttft"]["max"] - max(ttfts)) < 1e-9, f"{name}: TTFT max")
        e2e = [q["e2e"] for q in ok]
        check(abs(f["e2e"]["p99"] - pct(e2e, 99)) < 1e-9, f"{name}: E2E p99")
        tokens = sum(q["completion_tokens"] for q in ok)
        check(abs(f["output_token_throughput"] * f["duration_seconds"] - tokens) < 1e-6 * max(tokens, 1),
              f"{name}: output throughput x duration != tokens")
        check(name in html, f"HTML lacks run {name}")
        check(f"run " in stdout and name in stdout, f"stdout lacks run {name}")
    checks = j.get("checks", [])
    names = {c["name"] for c in checks}
    check(names == {"ttft_growth", "kv_watermark", "memory", "server_errors", "preemptions", "answers",
                    "expected_errors"}, f"JSON: checks {names}")
    for c in checks:
        check(c["status"] in ("PASS", "FAIL", "SKIP"), f"check {c['name']}: status {c['status']}")
        check(c["name"] in html, f"HTML lacks check {c['name']}")
    passed = all(c["status"] != "FAIL" for c in checks)
    check(j.get("passed") == passed, "JSON: passed disagrees with the checks")
    check((code == 0) == passed, f"exit code {code} but checks passed={passed}")
    check_lines(stdout, checks)
    common_html(html)
    svgs = svgs_of(html)
    titles = [s.findtext(f"{SVG_NS}title") for s in svgs]
    for want in ("Time to first token vs input length", "TTFT distribution (CDF)", "KV cache use over time",
                 "Queue and running requests over time"):
        check(want in titles, f"HTML lacks the chart '{want}' (has {titles})")
    for s in svgs:
        check(len(list(s.iter(f"{SVG_NS}path"))) + len(list(s.iter(f"{SVG_NS}circle"))) > 0 or
              "no data" in ET.tostring(s, encoding="unicode"), f"chart '{s.findtext(f'{SVG_NS}title')}' draws nothing")


def needle(j, html, stdout, code, min_recall):
    check(j.get("tool") == "kvserve needle", "JSON: tool")
    s = j["summary"]
    grid = s["grid"]
    spec = j["spec"]
    check([r["length"] for r in grid] == spec["lengths"], "JSON: grid lengths != spec")
    cases = j["cases"]
    check(len(cases) == len(spec["lengths"]) * len(spec["depths"]) * spec["trials"], "JSON: number of cases")
    check(sum(c["hit"] for c in cases) == s["hits"], "JSON: hits != cases")
    # Misses by kind, recomputed: another needle's value, some values, none.
    def contains(answer, v):
        return re.search(r"(?<![0-9A-Za-z])" + re.escape(v) + r"(?![0-9A-Za-z])", answer) is not None
    kinds = {}
    for c in cases:
        if c["hit"]:
            want = ""
        elif c["error"]:
            want = "error"
        elif any(contains(c["answer"], v) for v in c["others"]):
            want = "distractor"
        else:
            want = "partial" if any(contains(c["answer"], v) for v in c["expected"]) else "none"
        check(c["miss"] == want, f"case {c['length']}/{c['depth']}: miss {c['miss']!r} != {want!r}")
        if want:
            kinds[want] = kinds.get(want, 0) + 1
    check(s["misses"] == kinds, f"JSON: misses {s['misses']} != {kinds}")
    # Hits recomputed from the answers: every expected value as a whole token.
    for c in cases:
        found = all(re.search(r"(?<![0-9A-Za-z])" + re.escape(v) + r"(?![0-9A-Za-z])", c["answer"])
                    for v in c["expected"])
        check(bool(found) == c["hit"] or c["error"], f"case {c['length']}/{c['depth']}: hit flag vs answer")
        if not c["error"]:
            check(c["prompt_tokens"] == c["length"], f"case {c['length']}/{c['depth']}: {c['prompt_tokens']} tokens")
    threshold = s["threshold"]
    passing = []
    for row in grid:
        check(len(row["cells"]) == len(spec["depths"]), "JSON: cells per row")
        for cell in row["cells"]:
            n = [c for c in cases if c["length"] == row["length"] and abs(c["depth"] - cell["depth"]) < 1e-9]
            check(cell["trials"] == len(n) and cell["hits"] == sum(c["hit"] for c in n),
                  f"cell {row['length']}/{cell['depth']} disagrees with its cases")
        # A length passes when no depth is below the threshold at 95 %:
        # every cell's Wilson upper bound reaches it.
        if all(c["trials"] > 0 and wilson(c["hits"], c["trials"])[1] >= threshold - 1e-12 for c in row["cells"]):
            passing.append(row["length"])
        for cell in row["cells"]:
            lo, hi = wilson(cell["hits"], cell["trials"])
            check(abs(cell["recall_interval"][0] - lo) < 1e-9 and abs(cell["recall_interval"][1] - hi) < 1e-9,
                  f"cell {row['length']}/{cell['depth']}: interval {cell['recall_interval']} != Wilson {lo, hi}")
    eff = max(passing) if passing else None
    check(s["effective_context_length"] == eff, f"effective length {s['effective_context_length']} != recomputed {eff}")
    want = f"effective context length: {eff} tokens" if eff else "effective context length: none"
    check(want in stdout, f"stdout lacks '{want}'")
    check(s["overall_recall"] >= min_recall, f"overall recall {s['overall_recall']:.3f} < {min_recall}")
    if "expect_length" in j:
        ok = eff is not None and eff >= j["expect_length"]
        check(("PASS effective_length:" in stdout) == ok, "stdout PASS/FAIL line vs the effective length")
        check((code == 0) == ok, f"exit code {code} vs effective length {eff} >= {j['expect_length']}")
    else:
        check(code == 0, f"exit code {code}")
    common_html(html)
    svgs = svgs_of(html)
    heat = [x for x in svgs if (x.findtext(f"{SVG_NS}title") or "").startswith("Needle recall")]
    check(len(heat) == 1, "HTML: one heatmap")
    if heat:
        cells = [r for r in heat[0].iter(f"{SVG_NS}rect") if r.find(f"{SVG_NS}title") is not None]
        check(len(cells) == len(spec["lengths"]) * len(spec["depths"]), f"heatmap has {len(cells)} cells")
    check(str(eff) in html if eff else "None" in html, "HTML: effective length")


def main():
    kind, jpath, hpath, opath, code = sys.argv[1:6]
    extra = sys.argv[6] if len(sys.argv) > 6 else None
    j = json.load(open(jpath))
    html = open(hpath, encoding="utf-8").read()
    stdout = open(opath, encoding="utf-8").read()
    if kind == "bench":
        bench(j, html, stdout, int(code), int(extra or 1))
    else:
        needle(j, html, stdout, int(code), float(extra or 0))
    if failures:
        for f in failures:
            print("FAIL:", f)
        sys.exit(1)
    print(f"{kind} report ok: {jpath}")


if __name__ == "__main__":
    main()
