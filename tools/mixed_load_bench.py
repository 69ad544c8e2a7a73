#!/usr/bin/env python3
"""Steady latency under mixed load (issue 39 part 3), side by side: streaming
chats arrive at a steady rate and decode while long prompts arrive now and
then; the chats' inter-token latency (ITL) with and without the long prompts,
and the long prompts' time to first token, for kvserve serve (with and
without a cap on prefill tokens per step while others decode) and for
llama-server, on the same GGUF.

The workload is a timed trace replayed by `kvserve bench --url URL --dataset
trace.jsonl` (each request sent at its own time, exact prompt lengths counted
with the model's tokenizer, streamed, ignore_eos):
  chats: one every --chat-every seconds for --seconds, --chat-input prompt
         tokens, --chat-output generated tokens;
  long:  --longs prompts of --long-input tokens, the first at --long-start s,
         then every --long-every s, each generating --long-output tokens.
The run "without" sends the same chats and no long prompts.

Usage:
  tools/mixed_load_bench.py --kvserve build/release/src/cli/kvserve \
      --llama-server ~/kvserve-ref/llama.cpp/build/bin/llama-server \
      --model ~/kvserve-ref/models/rand-llama-S-Q8_0.gguf --caps 0,256
Prints a Markdown table; --json FILE writes the numbers.
"""
import argparse
import json
import os
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


def wait_ready(port, proc, seconds=300):
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server on {port} exited with {proc.returncode}")
        for path in ("/v1/models",):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
                    if r.status == 200:
                        return
            except Exception:
                pass
        time.sleep(0.3)
    raise RuntimeError(f"server on {port} not ready in {seconds} s")


def pct(values, p):
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def write_trace(path, a, with_long):
    rows = []
    t = 0.0
    while t < a.seconds:
        rows.append({"timestamp": round(t, 3), "input_length": a.chat_input, "output_length": a.chat_output})
        t += a.chat_every
    if with_long:
        for i in range(a.longs):
            rows.append({"timestamp": a.long_start + i * a.long_every, "input_length": a.long_input,
                         "output_length": a.long_output})
    rows.sort(key=lambda r: r["timestamp"])
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def run_bench(a, port, trace, out_json):
    cmd = [a.kvserve, "bench", "--url", f"http://127.0.0.1:{port}", "--dataset", trace, "--tokenizer", a.model,
           "--api", "completions", "--warmup", "0", "--seed", "7", "--request-timeout", "900", "--metrics-interval",
           "0", "--no-progress", "--json", out_json]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode not in (0, 1):
        raise RuntimeError(f"kvserve bench exited {r.returncode}: {r.stderr[-2000:]}")
    return json.load(open(out_json))["runs"][0]["requests"]


def figures(reqs, a):
    chats = [q for q in reqs if q["max_tokens"] == a.chat_output]
    longs = [q for q in reqs if q not in chats]
    bad = [q for q in reqs if not q["ok"]]
    itls = []
    for q in chats:
        ts = q["chunk_times"]
        itls += [(ts[i + 1] - ts[i]) * 1000 for i in range(len(ts) - 1)]
    return {
        "requests": len(reqs),
        "errors": len(bad),
        "chats": len(chats),
        "itl_p50_ms": pct(itls, 50),
        "itl_p99_ms": pct(itls, 99),
        "itl_max_ms": max(itls) if itls else float("nan"),
        "long_ttft_s": [q["ttft"] for q in longs],
        "long_ttft_median_s": statistics.median([q["ttft"] for q in longs if q["ttft"] is not None])
        if longs else None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kvserve", required=True)
    ap.add_argument("--llama-server", default="")
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--caps", default="0,256", help="kvserve max_prefill_tokens_while_decoding values")
    ap.add_argument("--budget", type=int, default=2048, help="kvserve max_num_batched_tokens (llama-server -b/-ub)")
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--chat-every", type=float, default=0.5)
    ap.add_argument("--chat-input", type=int, default=64)
    ap.add_argument("--chat-output", type=int, default=128)
    ap.add_argument("--longs", type=int, default=3)
    ap.add_argument("--long-start", type=float, default=5)
    ap.add_argument("--long-every", type=float, default=12)
    ap.add_argument("--long-input", type=int, default=8192)
    ap.add_argument("--long-output", type=int, default=4)
    ap.add_argument("--slots", type=int, default=16, help="llama-server -np")
    ap.add_argument("--json", default="")
    a = ap.parse_args()

    ctx = a.long_input + 256
    work = tempfile.mkdtemp(prefix="mixed-load-")
    traces = {}
    for name, with_long in (("without", False), ("with", True)):
        traces[name] = os.path.join(work, f"{name}.jsonl")
        write_trace(traces[name], a, with_long)

    servers = []
    for cap in [int(c) for c in a.caps.split(",") if c != ""]:
        servers.append((f"kvserve cap {cap}" if cap else "kvserve", [
            a.kvserve, "serve", "-m", a.model, "--threads", str(a.threads), "--max-context-length", str(ctx),
            "--max-batch-size", "32", "--max-num-batched-tokens", str(a.budget),
            "--max-prefill-tokens-while-decoding", str(cap), "--max-concurrent-requests", "256"]))
    if a.llama_server:
        servers.append(("llama-server", [
            a.llama_server, "-m", a.model, "-t", str(a.threads), "-c", str(ctx * a.slots), "-np", str(a.slots),
            "-b", str(a.budget), "-ub", str(min(a.budget, 512)), "-fa", "on", "--no-warmup"]))

    results = []
    env = dict(os.environ)
    if a.llama_server:
        env["LD_LIBRARY_PATH"] = os.path.dirname(os.path.abspath(a.llama_server)) + ":" + env.get("LD_LIBRARY_PATH", "")
    for name, base in servers:
        port = free_port()
        cmd = base + (["--port", str(port), "--host", "127.0.0.1"])
        log = open(os.path.join(work, name.replace(" ", "_") + ".log"), "w")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_ready(port, proc)
            for run in ("without", "with"):
                t0 = time.time()
                reqs = run_bench(a, port, traces[run], os.path.join(work, f"{name.replace(' ', '_')}-{run}.json"))
                f = figures(reqs, a)
                f.update({"server": name, "run": run, "wall_s": time.time() - t0})
                print(f"{name:18} {run:8} chats {f['chats']:3}  ITL p50 {f['itl_p50_ms']:7.1f} ms  p99 "
                      f"{f['itl_p99_ms']:7.1f} ms  max {f['itl_max_ms']:7.1f} ms  long TTFT {f['long_ttft_s']}  "
                      f"errors {f['errors']}", file=sys.stderr, flush=True)
                results.append(f)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()

    print(f"\nchats: one every {a.chat_every} s for {a.seconds} s, {a.chat_input} prompt + {a.chat_output} generated "
          f"tokens; long: {a.longs} x {a.long_input} tokens from {a.long_start} s every {a.long_every} s; "
          f"{a.threads} threads; {os.path.basename(a.model)}\n")
    print("| server | chats' ITL p50 without / with long (ms) | ITL p99 without / with (ms) | p99 with / without "
          "| long prompts' TTFT (s) |")
    print("|---|---:|---:|---:|---|")
    by = {(r["server"], r["run"]): r for r in results}
    for name, _ in servers:
        wo, w = by[(name, "without")], by[(name, "with")]
        ttft = ", ".join(f"{t:.1f}" for t in w["long_ttft_s"] if t is not None)
        print(f"| {name} | {wo['itl_p50_ms']:.1f} / {w['itl_p50_ms']:.1f} | {wo['itl_p99_ms']:.1f} / "
              f"{w['itl_p99_ms']:.1f} | {w['itl_p99_ms'] / wo['itl_p99_ms']:.2f} | {ttft} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"settings": vars(a), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
