#!/usr/bin/env python3
"""Turns the output of scripts/bench.sh into an SVG bar chart for docs/benchmarks.md:
kvserve's pp512/tg128 per weight type against the issue's llama.cpp reference
figures (and 0.8x targets), and the engine's aggregate decode per concurrency.

  bash scripts/bench.sh build/release | tee bench.txt
  python3 tools/bench_svg.py bench.txt docs/img/bench-model.svg
"""
import re
import sys

# llama.cpp's llama-bench, 2 threads, same 125M shape, as quoted by issue #2.
REFERENCE = {"Q8_0": (520, 113), "F16": (720, 84), "Q4_K_M": (560, 185)}


def parse(text):
    model, conc, section = {}, {}, None
    for line in text.splitlines():
        m = re.match(r"## (Q8_0|F16|Q4_K_M): ", line)
        if m:
            section = m.group(1)
            continue
        if line.startswith("##"):
            section = None
        m = re.match(r"(pp|tg)\d+: ([\d.]+)$", line)
        if m and section:
            model.setdefault(section, {})[m.group(1)] = float(m.group(2))
        m = re.match(r"tg\d+ x(\d+): ([\d.]+)$", line)
        if m:
            conc[int(m.group(1))] = float(m.group(2))
    return model, conc


def bars(x0, y0, height, groups, series, colors, vmax, title, legend=True):
    """groups: [(label, [values per series])]."""
    out = [f'<text x="{x0}" y="{y0 - 12}" font-size="14">{title}</text>']
    bw, gap = 26, 24
    x = x0
    for label, values in groups:
        for k, v in enumerate(values):
            if v is None:
                continue
            h = height * v / vmax
            out.append(f'<rect x="{x + k * bw}" y="{y0 + height - h:.1f}" width="{bw - 4}" height="{h:.1f}" '
                       f'fill="{colors[k]}"/>')
            out.append(f'<text x="{x + k * bw + (bw - 4) / 2}" y="{y0 + height - h - 4:.1f}" font-size="10" '
                       f'text-anchor="middle">{v:.0f}</text>')
        out.append(f'<text x="{x + len(values) * bw / 2}" y="{y0 + height + 16}" font-size="12" '
                   f'text-anchor="middle">{label}</text>')
        x += len(values) * bw + gap
    out.append(f'<line x1="{x0 - 4}" y1="{y0 + height}" x2="{x}" y2="{y0 + height}" stroke="black"/>')
    ly = y0 + height + 40
    for k, name in enumerate(series if legend else []):
        out.append(f'<rect x="{x0 + k * 170}" y="{ly - 10}" width="12" height="12" fill="{colors[k]}"/>')
        out.append(f'<text x="{x0 + k * 170 + 16}" y="{ly}" font-size="12">{name}</text>')
    return out, x


def main():
    text = open(sys.argv[1]).read()
    model, conc = parse(text)
    colors = ["#2b6cb0", "#a0aec0", "#e53e3e"]
    series = ["kvserve", "llama.cpp (issue #2)", "target 0.8x"]
    parts = []
    for i, (metric, name) in enumerate((("pp", "pp512 t/s"), ("tg", "tg128 t/s"))):
        groups = []
        for t in ("Q8_0", "F16", "Q4_K_M"):
            if t in model and metric in model[t]:
                ref = REFERENCE[t][0 if metric == "pp" else 1]
                groups.append((t, [model[t][metric], ref, 0.8 * ref]))
        vmax = max(max(v) for _, v in groups) * 1.15
        p, _ = bars(40 + i * 330, 60, 200, groups, series, colors, vmax, f"{name}, 125M random Llama, 2 threads",
                    legend=i == 0)
        parts += p
    if conc:
        groups = [(f"x{n}", [v]) for n, v in sorted(conc.items())]
        p, _ = bars(700, 60, 200, groups, ["kvserve engine, aggregate tg"], colors, max(conc.values()) * 1.15,
                    "engine: aggregate decode t/s", legend=False)
        parts += p
    cpu = re.search(r"## cpu: (.*)", text)
    w, h = 960, 330
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif">',
           f'<text x="{w / 2}" y="24" font-size="16" text-anchor="middle">kvserve bench '
           f'({cpu.group(1).strip() if cpu else "this machine"})</text>'] + parts + ["</svg>"]
    open(sys.argv[2], "w").write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
