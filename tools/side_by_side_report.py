#!/usr/bin/env python3
"""Table (Markdown) and plot (SVG) of a scripts/bench_side_by_side.sh run.

  python3 tools/side_by_side_report.py OUT_DIR
  python3 tools/side_by_side_report.py OUT_DIR --merge RUN_DIR[:SET,...] [RUN_DIR[:SET,...] ...]

Reads OUT_DIR/<set>-<peer>.json (written by ../shared/tools/perf_side_by_side.py: one row per model and
test with kvserve's and the peer's median t/s, measured alternately in one run) and OUT_DIR/meta.txt;
writes OUT_DIR/report.md and OUT_DIR/side_by_side.svg. Ratios are kvserve / peer from the same pair of
runs; "ik best" is the better of ik_llama.cpp's default and -rtr 1. Goals (issue 18): pp >= 1.3x
llama.cpp and >= 1.0x ik best; tg128 >= 1.1x llama.cpp and >= 1.0x ik best; tg128 at depth >= 1.3x
llama.cpp; the forced AVX2 path >= 1.0x llama.cpp built for AVX2.

With --merge, the table and plot are made from several runs (oldest first): each (set, peer, model, test)
row is taken from the last run that has it (of the sets named after its colon, if any), the table gains a column naming the runs of each row, and
OUT_DIR/meta.txt lists the runs (date and kvserve commit of each). A status picture, not one run: the ratio
in each row still comes from one run, where kvserve and the peer ran in turn.
"""
import glob
import html
import json
import os
import statistics
import sys

PEERS = ["llama.cpp", "ik", "ik-rtr"]
LABEL = {"llama.cpp": "llama.cpp", "ik": "ik_llama.cpp", "ik-rtr": "ik -rtr 1", "llama.cpp-avx2": "llama.cpp AVX2"}


def load(out, run=None, data=None, sets=None):
    """(set, peer) -> {(model, test): row} of OUT's JSON files (of `sets` only, if given), added to (and
    overriding rows of) data; each row records `run` (its run's number in a merge) as "run"."""
    data = {} if data is None else data
    for path in sorted(glob.glob(os.path.join(out, "*.json"))):
        name = os.path.basename(path)[:-5]
        for peer in sorted(list(LABEL), key=len, reverse=True):
            if name.endswith("-" + peer):
                if sets is not None and name[: -len(peer) - 1] not in sets:
                    break
                rows = data.setdefault((name[: -len(peer) - 1], peer), {})
                for r in json.load(open(path)):
                    rows[(r["model"], r["test"])] = dict(r, run=run)
                break
    return data


def goals(test, avx2):
    """(min ratio vs llama.cpp, min ratio vs ik best) for a test."""
    if avx2:
        return 1.0, None
    if "@d" in test:
        return 1.3, None
    if test.startswith("pp"):
        return 1.3, 1.0
    return 1.1, 1.0


def fmt(v, nd=1):
    return "" if v is None else f"{v:,.{nd}f}"


def mark(ratio, goal):
    if ratio is None or goal is None:
        return fmt(ratio, 2)
    return f"{ratio:.2f}" + ("" if ratio >= goal else " ✗")


def rows_of(data, bf16=False):
    """Native rows: (model, test) -> dict(kv, llama.cpp, ik, ik-rtr, r_llama, r_ik); bf16: the rows of
    the "bf16" set (kvserve --dtype bf16) instead."""
    out = {}
    for (set_, peer), rows in data.items():
        if set_ == "avx2" or (set_ == "bf16") != bf16:
            continue
        for key, r in rows.items():
            e = out.setdefault(key, {"kv": [], "runs": set()})
            e["kv"].append(r["kvserve"])
            if r.get("run") is not None:
                e["runs"].add(r["run"])
            e[peer] = r["llamacpp"]
            e["r_" + peer] = r["ratio"]
    for e in out.values():
        e["kv"] = statistics.median(e["kv"])
        ik = [e.get("r_ik"), e.get("r_ik-rtr")]
        ik = [x for x in ik if x is not None]
        e["r_ik"] = min(ik) if ik else None  # against the faster ik configuration
    return out


def order(key):
    model, test = key
    size, wt = model.split("-", 1)
    tests = ["pp512", "tg128", "pp4096", "pp16384", "tg128@d4096", "tg128@d16384"]
    types = ["F16", "Q8_0", "Q4_0", "Q4_K_M"]
    return (size, tests.index(test) if test in tests else 99, types.index(wt) if wt in types else 99, wt)


def runs_cell(runs):
    return ", ".join(str(r) for r in sorted(runs))


def peer_table(rows, kv_label, merged=False):
    """Markdown lines of the table of native-style rows (rows_of)."""
    extra, extra_rule = (" runs |", "---|") if merged else ("", "")
    lines = [f"| model | test | {kv_label} | llama.cpp t/s | ik_llama.cpp t/s | ik -rtr 1 t/s | vs llama.cpp | vs ik best |"
             + extra, "|---|---|---:|---:|---:|---:|---:|---:|" + extra_rule]
    for key in sorted(rows, key=order):
        e = rows[key]
        gl, gi = goals(key[1], False)
        lines.append(f"| {key[0]} | {key[1]} | {fmt(e['kv'])} | {fmt(e.get('llama.cpp'))} | {fmt(e.get('ik'))} | "
                     f"{fmt(e.get('ik-rtr'))} | {mark(e.get('r_llama.cpp'), gl)} | {mark(e.get('r_ik'), gi)} |"
                     + (f" {runs_cell(e['runs'])} |" if merged else ""))
    return lines + [""]


def markdown(data, meta, merged=False):
    lines = ["# kvserve side by side", "", "```", meta.strip(), "```", ""]
    native = rows_of(data)
    if native:
        lines += peer_table(native, "kvserve t/s", merged)
    converted = rows_of(data, bf16=True)
    if converted:
        lines += ["F16 models with `kvserve bench --dtype bf16` (F16 matrices converted to BF16 at load, bf16 dot "
                  "products; ik_llama.cpp's -rtr 1 does the same):", ""]
        lines += peer_table(converted, "kvserve bf16 t/s", merged)
    avx2 = data.get(("avx2", "llama.cpp-avx2"))
    if avx2:
        lines += ["Forced AVX2 path (`KVSERVE_ISA=avx2`) against llama.cpp built with `-DGGML_NATIVE=OFF -DGGML_AVX2=ON "
                  "-DGGML_FMA=ON -DGGML_F16C=ON`:", "",
                  "| model | test | kvserve AVX2 t/s | llama.cpp AVX2 t/s | ratio |" + (" run |" if merged else ""),
                  "|---|---|---:|---:|---:|" + ("---|" if merged else "")]
        for key in sorted(avx2, key=order):
            r = avx2[key]
            lines.append(f"| {key[0]} | {key[1]} | {fmt(r['kvserve'])} | {fmt(r['llamacpp'])} | {mark(r['ratio'], 1.0)} |"
                         + (f" {r.get('run')} |" if merged else ""))
        lines.append("")
    lines.append("✗: below the issue's goal for that row.")
    return "\n".join(lines) + "\n"


def svg(data):
    """Horizontal bars of kvserve / peer per row, with the goal marked on each bar's scale."""
    native = rows_of(data)
    items = []  # (label, [(series, ratio, goal)])
    for key in sorted(native, key=order):
        e = native[key]
        gl, gi = goals(key[1], False)
        items.append((f"{key[0]} {key[1]}", [("vs llama.cpp", e.get("r_llama.cpp"), gl), ("vs ik best", e.get("r_ik"), gi)]))
    converted = rows_of(data, bf16=True)
    for key in sorted(converted, key=order):
        e = converted[key]
        gl, gi = goals(key[1], False)
        items.append((f"{key[0]} {key[1]} (bf16)", [("vs llama.cpp", e.get("r_llama.cpp"), gl), ("vs ik best", e.get("r_ik"), gi)]))
    avx2 = data.get(("avx2", "llama.cpp-avx2"), {})
    for key in sorted(avx2, key=order):
        items.append((f"{key[0]} {key[1]} (AVX2)", [("AVX2 vs llama.cpp AVX2", avx2[key]["ratio"], 1.0)]))
    colors = {"vs llama.cpp": "#4a7ebb", "vs ik best": "#d9822b", "AVX2 vs llama.cpp AVX2": "#5a9e5a"}
    vmax = 3.0  # the axis ends at 3x; longer bars are cut (their value is printed)
    left, width, bar, gap = 210, 520, 9, 8
    height = 70 + sum(len(s) * bar + gap for _, s in items) + 40
    x = lambda v: left + width * v / vmax
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 40}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="20" font-size="14">kvserve t/s / peer t/s (same run; | = goal, dashed = 1.0)</text>']
    lx = 10
    for name, c in colors.items():
        out.append(f'<rect x="{lx}" y="32" width="12" height="10" fill="{c}"/><text x="{lx + 16}" y="41">{html.escape(name)}</text>')
        lx += 30 + 7 * len(name)
    y = 60
    for label, series in items:
        out.append(f'<text x="{left - 6}" y="{y + len(series) * bar / 2 + 4}" text-anchor="end">{html.escape(label)}</text>')
        for name, r, goal in series:
            if r is not None:
                rc = min(r, vmax)
                out.append(f'<rect x="{left}" y="{y}" width="{x(rc) - left:.1f}" height="{bar - 1}" fill="{colors[name]}"/>'
                           f'<text x="{x(rc) + 3:.1f}" y="{y + bar - 1}" font-size="9">{r:.2f}{" &#8250;" if r > vmax else ""}</text>')
            if goal is not None:
                out.append(f'<line x1="{x(goal):.1f}" x2="{x(goal):.1f}" y1="{y - 1}" y2="{y + bar}" stroke="black" stroke-width="2"/>')
            y += bar
        y += gap
    out.append(f'<line x1="{x(1.0):.1f}" x2="{x(1.0):.1f}" y1="55" y2="{y}" stroke="#888" stroke-dasharray="4,3"/>')
    for t in range(0, int(vmax * 2) + 1):
        v = t / 2
        out.append(f'<text x="{x(v):.1f}" y="{y + 14}" text-anchor="middle" font-size="9">{v:.1f}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def read_meta(run_dir):
    path = os.path.join(run_dir, "meta.txt")
    return open(path).read() if os.path.exists(path) else ""


def meta_field(meta, name):
    for line in meta.splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    return "?"


def main(argv):
    if len(argv) == 2:
        out, merged = argv[1], False
        data = load(out)
        meta = read_meta(out)
    elif len(argv) >= 4 and argv[2] == "--merge":
        out, merged = argv[1], True
        data, lines = {}, ["merged from these runs (a row comes from the last run that has it):"]
        run_dirs = [arg.split(":")[0] for arg in argv[3:]]
        for i, arg in enumerate(argv[3:], 1):
            run_dir, _, sets = arg.partition(":")
            if not glob.glob(os.path.join(run_dir, "*.json")):
                sys.exit(f"no <set>-<peer>.json files in {run_dir}")
            load(run_dir, i, data, sets.split(",") if sets else None)
            m = read_meta(run_dir)
            lines.append(f"run {i}: {os.path.basename(os.path.normpath(run_dir))}{' (sets ' + sets + ')' if sets else ''}, "
                         f"{meta_field(m, 'date')}, kvserve {meta_field(m, 'kvserve')}, threads {meta_field(m, 'threads')}")
        first = read_meta(run_dirs[0])
        lines += [f"cpu: {meta_field(first, 'cpu')}", f"llama.cpp: {meta_field(first, 'llama.cpp')}",
                  f"ik_llama.cpp: {meta_field(first, 'ik_llama.cpp')}"]
        meta = "\n".join(lines) + "\n"
        os.makedirs(out, exist_ok=True)
        open(os.path.join(out, "meta.txt"), "w").write(meta)
    else:
        sys.exit(__doc__)
    if not data:
        sys.exit(f"no <set>-<peer>.json files in {out}")
    open(os.path.join(out, "report.md"), "w").write(markdown(data, meta, merged))
    open(os.path.join(out, "side_by_side.svg"), "w").write(svg(data))


if __name__ == "__main__":
    main(sys.argv)
