#!/usr/bin/env python3
"""Recall of the bundled model measured through kvserve itself.

Writes fresh pass-key prompts with the training script's own generator
(write_recall_cases: half plain text, half ChatML conversations; seed
--seed, never used in training), starts `kvserve serve` on the model and
sends them over the HTTP API at temperature 0: plain prompts to
/v1/completions, chat ones (messages) to /v1/chat/completions, where the
server applies the model's chat template. A reply counts when it is exactly
the expected answer. Prints the table for docs/models.md.

  /usr/bin/python3 tools/train/recall_kvserve.py --kvserve build/release/src/cli/kvserve --per-cell 40 \
      --svg docs/img/recall-kvserve.svg
"""
import argparse
import collections
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train  # noqa: E402


def post(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def heatmap_svg(cells, lengths, depths, title):
    """A small self-contained SVG heatmap of exact recall per (length, depth) cell."""
    cw, ch, left, top = 120, 44, 110, 56
    w, h = left + cw * len(depths) + 20, top + ch * len(lengths) + 50
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="13">',
           f'<text x="{w / 2}" y="22" text-anchor="middle" font-size="15">{title}</text>']
    for j, d in enumerate(depths):
        out.append(f'<text x="{left + cw * j + cw / 2}" y="{top - 8}" text-anchor="middle">depth {int(d * 100)} %</text>')
    for i, L in enumerate(lengths):
        y = top + ch * i
        out.append(f'<text x="{left - 10}" y="{y + ch / 2 + 4}" text-anchor="end">{L} tokens</text>')
        for j, d in enumerate(depths):
            ok, n = cells[(L, d)]
            frac = ok / n if n else 0.0
            # red (<= 80 %) to green (100 %)
            t = max(0.0, min(1.0, (frac - 0.8) / 0.2))
            r, g = int(220 - 170 * t), int(80 + 120 * t)
            x = left + cw * j
            out.append(f'<rect x="{x}" y="{y}" width="{cw - 2}" height="{ch - 2}" fill="rgb({r},{g},90)"/>')
            out.append(f'<text x="{x + cw / 2}" y="{y + ch / 2 + 4}" text-anchor="middle" fill="white">'
                       f'{100 * frac:.0f} % ({ok}/{n})</text>')
    out.append(f'<text x="{w / 2}" y="{h - 14}" text-anchor="middle" font-size="11">exact pass-key recall, '
               f'greedy, through kvserve serve</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvserve", required=True)
    ap.add_argument("--model", default=os.path.join(HERE, "..", "..", "models", "kvserve-tiny.gguf"))
    ap.add_argument("--per-cell", type=int, default=20)
    ap.add_argument("--seed", type=int, default=99173)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--tokenizer-seed", type=int, default=1234)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--kv-dtype", default="f16")
    ap.add_argument("--svg", help="also write the table as an SVG heatmap to this path")
    ap.add_argument("--lengths", default="1024,2048,4096", help="context lengths (tokens) of the prompts")
    args = ap.parse_args()

    lengths, depths = [int(x) for x in args.lengths.split(",")], [0.1, 0.5, 0.9]
    context = max(lengths)
    tok = train.build_tokenizer(args.tokenizer_seed, args.vocab)
    cases_path = os.path.join(tempfile.mkdtemp(), "cases.jsonl")
    train.write_recall_cases(tok, cases_path, args.seed, lengths, depths, per_cell=args.per_cell)
    cases = [json.loads(l) for l in open(cases_path)]

    srv = subprocess.Popen([args.kvserve, "serve", "--model", args.model, "--port", "0", "--access-log", "off",
                            "--max-context-length", str(context), "--threads", "2", "--max-concurrent-requests", "64",
                            "--kv-dtype", args.kv_dtype],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    port = None
    for line in srv.stderr:
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if urllib.request.urlopen(base + "/ready").status == 200:
                break
        except Exception:
            time.sleep(0.1)
    model_id = os.path.splitext(os.path.basename(args.model))[0]

    def run(c):
        if c["format"] == "plain":
            r = post(base, "/v1/completions", {"model": model_id, "prompt": c["prompt"], "max_tokens": min(8, context - c["prompt_tokens"]),
                                               "temperature": 0})
            got = r["choices"][0]["text"]
            return got.startswith(c["expected"])
        r = post(base, "/v1/chat/completions", {"model": model_id, "messages": c["messages"], "max_tokens": min(16, context - c["prompt_tokens"]),
                                                "temperature": 0})
        return r["choices"][0]["message"]["content"] == c["expected"].removesuffix("<|im_end|>")

    t0 = time.time()
    try:
        with concurrent.futures.ThreadPoolExecutor(args.parallel) as ex:
            results = list(ex.map(run, cases))
    finally:
        srv.terminate()
        srv.wait()
    cells = collections.defaultdict(lambda: [0, 0])
    fmt_cells = collections.defaultdict(lambda: [0, 0])
    for c, ok in zip(cases, results):
        cells[(c["tokens"], c["depth"])][0] += ok
        cells[(c["tokens"], c["depth"])][1] += 1
        fmt_cells[c["format"]][0] += ok
        fmt_cells[c["format"]][1] += 1
    print(f"{len(cases)} prompts in {time.time() - t0:.0f} s through kvserve serve (temperature 0, "
          f"{args.kv_dtype} KV cache)")
    for c, ok in zip(cases, results):
        if not ok:
            print(f"miss: {c['format']} {c['tokens']} tokens depth {c['depth']}: key {c['pass_key']}")
    print("| context tokens | " + " | ".join(f"depth {int(d * 100)} %" for d in depths) + " |")
    print("|---|" + "---|" * len(depths))
    for L in lengths:
        row = []
        for d in depths:
            ok, n = cells[(L, d)]
            row.append(f"{100 * ok / n:.0f} % ({ok}/{n})")
        print(f"| {L} | " + " | ".join(row) + " |")
    for f, (ok, n) in sorted(fmt_cells.items()):
        print(f"{f}: {ok}/{n}")
    print(f"overall: {sum(results)}/{len(results)}")
    if args.svg:
        with open(args.svg, "w") as f:
            f.write(heatmap_svg(cells, lengths, depths,
                                f"{model_id} recall, {args.kv_dtype} KV, {args.per_cell} prompts per cell"))
        print(f"wrote {args.svg}")


if __name__ == "__main__":
    main()
