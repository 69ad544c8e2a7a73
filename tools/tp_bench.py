#!/usr/bin/env python3
"""Tensor parallel against one process (issue 38), through `kvserve serve`:
prefill of a P-token prompt (time to first token of max_tokens 1) and decode
of N tokens (streamed; tokens/s from the first token to the last) for

  * one process with T threads (`kvserve serve --threads T`), and
  * `mpirun -np TxP kvserve serve --tensor-parallel T --pipeline-parallel P
    --threads threads/(TxP)` for each layout TxP of --layouts (default 2x1),

on the same GGUF, alternating the two servers per repetition. Prompts are
random token ids below 1,000 (distinct per request, so the prefix cache never helps).
For the parallel server it also reads rank 0's /metrics: each rank's share of
forward time spent in all-reduces, and all-reduce bytes per token.

Usage:
  tools/tp_bench.py --kvserve build/release/src/cli/kvserve \
      --model ~/kvserve-ref/models/rand-llama-S-Q8_0.gguf [--layouts 2x1,1x2] [--threads 2] \
      [--prompt 512] [--decode 128] [--reps 3] [--json FILE]
Prints a Markdown table (medians over the repetitions).
"""
import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return r.read().decode()


def wait_ready(port, proc, seconds=600):
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server on {port} exited with {proc.returncode}")
        try:
            get(port, "/ready")
            return
        except Exception:
            time.sleep(0.3)
    raise RuntimeError(f"server on {port} not ready in {seconds} s")


def post_stream(port, body):
    """Streams a completion; returns the arrival times of its tokens' chunks."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    times = []
    with urllib.request.urlopen(req, timeout=3600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("choices") and chunk["choices"][0].get("text") is not None:
                times.append(time.perf_counter())
    return times


def metrics(port):
    out = {}
    for line in get(port, "/metrics").splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def measure(port, model, vocab, prompt, decode, rng):
    ids = [rng.randrange(3, vocab) for _ in range(prompt)]
    t0 = time.perf_counter()
    post_stream(port, {"model": model, "prompt": ids, "max_tokens": 1, "temperature": 0})
    prefill = time.perf_counter() - t0
    ids = [rng.randrange(3, vocab) for _ in range(16)]
    times = post_stream(port, {"model": model, "prompt": ids, "max_tokens": decode, "temperature": 0,
                               "ignore_eos": True, "stream": True})
    tg = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0
    return prompt / prefill, tg


def measure_concurrent(port, model, vocab, n, decode, rng):
    """n streams of `decode` tokens at once: total generated tokens per second."""
    import threading
    prompts = [[rng.randrange(3, vocab) for _ in range(16)] for _ in range(n)]
    t0 = time.perf_counter()
    threads = [threading.Thread(target=post_stream, args=(port, {"model": model, "prompt": p, "max_tokens": decode,
                                                                   "temperature": 0, "ignore_eos": True,
                                                                   "stream": True})) for p in prompts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return n * decode / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kvserve", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--layouts", default="2x1", help="tensor x pipeline layouts, comma-separated")
    ap.add_argument("--threads", type=int, default=2, help="threads of the single process; each rank gets its share")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--concurrent", type=int, default=8, help="streams at once for the throughput column (0: off)")
    ap.add_argument("--json")
    a = ap.parse_args()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_btl_vader_single_copy_mechanism="none")
    common = ["serve", "--host", "127.0.0.1", "--model", a.model, "--access-log", "off", "--max-context-length",
              str(a.prompt + a.decode + 64), "--max-num-batched-tokens", str(max(2048, a.prompt))]
    log = tempfile.mkdtemp(prefix="tp-bench-")
    servers = {}
    procs = []
    try:
        p1 = free_port()
        procs.append(subprocess.Popen([a.kvserve, *common, "--port", str(p1), "--threads", str(a.threads)],
                                      stdout=subprocess.DEVNULL, stderr=open(f"{log}/single.log", "w")))
        servers[f"1 process x {a.threads} threads"] = p1
        wait_ready(p1, procs[-1])
        layouts = [tuple(int(x) for x in l.split("x")) for l in a.layouts.split(",")]
        for tp, pp in layouts:
            port = free_port()
            per = max(1, a.threads // (tp * pp))
            procs.append(subprocess.Popen(["mpirun", "-np", str(tp * pp), "--bind-to", "none", a.kvserve, *common,
                                           "--port", str(port), "--threads", str(per), "--tensor-parallel", str(tp),
                                           "--pipeline-parallel", str(pp)],
                                          stdout=subprocess.DEVNULL, stderr=open(f"{log}/{tp}x{pp}.log", "w"),
                                          env=env))
            servers[f"TP={tp} x PP={pp}, {per} thread(s) a rank"] = port
            wait_ready(port, procs[-1])
        model = json.loads(get(p1, "/v1/models"))["data"][0]["id"]
        vocab = 1000  # token ids below it: valid in any model this is run on (the bundled one has 1,285)
        rng = random.Random(2026)
        # Warm-up: pages in, thread pools spun.
        for port in servers.values():
            measure(port, model, vocab, 64, 8, rng)
        parallel = {n: p for n, p in servers.items() if p != p1}
        m0 = {n: metrics(p) for n, p in parallel.items()}
        res = {name: {"pp": [], "tg": [], "conc": []} for name in servers}
        for _ in range(a.reps):
            for name, port in servers.items():
                pp, tg = measure(port, model, vocab, a.prompt, a.decode, rng)
                res[name]["pp"].append(pp)
                res[name]["tg"].append(tg)
                if a.concurrent > 0:
                    res[name]["conc"].append(measure_concurrent(port, model, vocab, a.concurrent, a.decode, rng))
        ranks = {}
        for name, port in parallel.items():
            m1 = metrics(port)
            for r in range(64):
                key = lambda k: f'kvserve:tensor_parallel_{k}{{rank="{r}"}}'
                if key("steps_total") not in m1:
                    break
                d = lambda k: m1.get(key(k), 0) - m0[name].get(key(k), 0)
                fwd, ar, nbytes = d("forward_seconds_total"), d("allreduce_seconds_total"), d("allreduce_bytes_total")
                ranks[f"{name}, rank {r}"] = {"allreduce_share": ar / fwd if fwd else 0.0, "allreduce_seconds": ar,
                                              "allreduce_bytes": nbytes, "forward_seconds": fwd}
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    base = list(servers)[0]
    med = {n: {k: statistics.median(v) if v else 0.0 for k, v in r.items()} for n, r in res.items()}
    print(f"model {os.path.basename(a.model)}, pp{a.prompt} and tg{a.decode} through kvserve serve, "
          f"median of {a.reps}")
    print()
    print(f"| server | pp{a.prompt} t/s | tg{a.decode} t/s | {a.concurrent} streams, total t/s | pp vs 1 process | "
          f"tg vs 1 process | {a.concurrent} streams vs 1 process |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for n, m in med.items():
        conc = m['conc'] / med[base]['conc'] if med[base]['conc'] else 0.0
        print(f"| {n} | {m['pp']:.1f} | {m['tg']:.2f} | {m['conc']:.1f} | {m['pp'] / med[base]['pp']:.2f}x | "
              f"{m['tg'] / med[base]['tg']:.2f}x | {conc:.2f}x |")
    print()
    for r, v in ranks.items():
        print(f"{r}: forward {v['forward_seconds']:.2f} s, all-reduces {100 * v['allreduce_share']:.1f} % of it "
              f"({v['allreduce_seconds']:.2f} s, {v['allreduce_bytes'] / 2**20:.1f} MiB)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "runs": res, "median": med, "ranks": ranks}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
