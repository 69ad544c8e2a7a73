#!/usr/bin/env python3
"""Serving load for an OpenAI-compatible server (kvserve serve, llama-server): N concurrent streaming clients, each
with a prompt of token ids whose first S tokens are shared by all, M output tokens (ignore_eos); the same prompts
twice: cold, then warm (prefix caches filled). Measures wall time, output tokens/s, TTFT p50/p90 and the server's
resident memory (idle before, peak under load, idle after).

usage: serve_load.py --url http://127.0.0.1:8000 [--pid PID] [--clients 32] [--prompt-tokens 1000]
                     [--shared-tokens 500] [--max-tokens 64] [--vocab 32000] [--passes 2] [--idle-after 8]
                     [--label NAME] [--json OUT]
Python standard library only. Token-id prompts keep lengths exact and identical for every server."""
import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
import urllib.parse

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--url", required=True)
ap.add_argument("--pid", type=int, help="server process, for its RSS (/proc/PID/status)")
ap.add_argument("--clients", type=int, default=32)
ap.add_argument("--prompt-tokens", type=int, default=1000)
ap.add_argument("--shared-tokens", type=int, default=500)
ap.add_argument("--max-tokens", type=int, default=64)
ap.add_argument("--vocab", type=int, default=32000)
ap.add_argument("--passes", type=int, default=2, help="1: cold only; 2: cold then warm")
ap.add_argument("--idle-after", type=float, default=8.0, help="seconds idle after the run before the last RSS reading")
ap.add_argument("--model", default="", help="model name to send (default: the first of /v1/models)")
ap.add_argument("--label", default="")
ap.add_argument("--json")
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()
url = urllib.parse.urlparse(a.url)


def rss_mib(pid):
    """Current resident set of the server, MiB (None without --pid)."""
    if not pid:
        return None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return None


class RssSampler(threading.Thread):
    """Samples the server's RSS every 20 ms; .peak is the largest seen."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0.0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            r = rss_mib(self.pid)
            if r is not None:
                self.peak = max(self.peak, r)
            time.sleep(0.02)


def model_name():
    if a.model:
        return a.model
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    c.request("GET", "/v1/models")
    data = json.loads(c.getresponse().read())
    return data["data"][0]["id"]


def one_request(model, prompt, out):
    """One streaming completion; fills out with ttft_s, end_s, tokens, error."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": a.max_tokens, "temperature": 0,
                       "stream": True, "ignore_eos": True, "stream_options": {"include_usage": True}})
    t0 = time.monotonic()
    out.update(start=t0, ttft_s=None, tokens=0, usage=None, error=None)
    try:
        c = http.client.HTTPConnection(url.hostname, url.port, timeout=3600)
        c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            out["error"] = f"HTTP {r.status}: {r.read()[:200]!r}"
            return
        chunks = 0
        for raw in r:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                break
            ev = json.loads(payload)
            if ev.get("usage"):
                out["usage"] = ev["usage"].get("completion_tokens")
            for ch in ev.get("choices", []):
                if ch.get("text") or ch.get("finish_reason") is None:
                    chunks += 1
                    if out["ttft_s"] is None:
                        out["ttft_s"] = time.monotonic() - t0
        out["tokens"] = out["usage"] if out["usage"] else chunks
    except Exception as e:  # a failed request is reported, not fatal to the run
        out["error"] = repr(e)
    finally:
        out["end"] = time.monotonic()


def prompts():
    rng = random.Random(a.seed)
    lo, hi = 100, a.vocab - 100  # clear of special tokens at either end of the vocabulary
    shared = [rng.randrange(lo, hi) for _ in range(a.shared_tokens)]
    return [shared + [rng.randrange(lo, hi) for _ in range(a.prompt_tokens - a.shared_tokens)]
            for _ in range(a.clients)]


def run_pass(model, ps):
    results = [dict() for _ in ps]
    sampler = RssSampler(a.pid)
    sampler.start()
    t0 = time.monotonic()
    threads = [threading.Thread(target=one_request, args=(model, p, r)) for p, r in zip(ps, results)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    sampler.stop.set()
    sampler.join()
    errors = [r["error"] for r in results if r["error"]]
    ttfts = sorted(r["ttft_s"] for r in results if r["ttft_s"] is not None)
    tokens = sum(r["tokens"] for r in results)
    q = statistics.quantiles(ttfts, n=10) if len(ttfts) >= 2 else ttfts * 9
    return dict(wall_s=wall, output_tokens=tokens, output_tok_s=tokens / wall, ttft_p50_s=statistics.median(ttfts),
                ttft_p90_s=q[8], peak_rss_mib=sampler.peak or None, errors=len(errors), first_error=errors[:1])


def main():
    model = model_name()
    ps = prompts()
    report = dict(label=a.label, url=a.url, clients=a.clients, prompt_tokens=a.prompt_tokens,
                  shared_tokens=a.shared_tokens, max_tokens=a.max_tokens, rss_idle_before_mib=rss_mib(a.pid),
                  passes=[])
    for i in range(a.passes):
        res = run_pass(model, ps)
        res["pass"] = "cold" if i == 0 else "warm"
        res["rss_after_mib"] = rss_mib(a.pid)
        report["passes"].append(res)
        print(f"{a.label:12s} {res['pass']:5s} wall {res['wall_s']:7.2f} s  out {res['output_tok_s']:7.1f} tok/s  "
              f"TTFT p50 {res['ttft_p50_s']:6.2f} s p90 {res['ttft_p90_s']:6.2f} s  peak RSS "
              f"{res['peak_rss_mib'] or 0:7.1f} MiB  errors {res['errors']} {res['first_error']}", flush=True)
    if a.idle_after > 0:
        time.sleep(a.idle_after)
    report["rss_idle_after_mib"] = rss_mib(a.pid)
    print(f"{a.label:12s} RSS idle before {report['rss_idle_before_mib'] or 0:.1f} MiB, idle {a.idle_after:.0f} s "
          f"after {report['rss_idle_after_mib'] or 0:.1f} MiB", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 1 if any(p["errors"] for p in report["passes"]) else 0


if __name__ == "__main__":
    sys.exit(main())
