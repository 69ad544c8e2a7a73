#!/usr/bin/env python3
"""Speculative decoding side by side: decode speed of kvserve serve with and
without `--speculative ngram` (and, with --draft-model, `--speculative draft
--model-draft FILE`), and of llama-server with and without its n-gram
speculation (`--spec-type ngram-simple`) and its draft model (`-md FILE`), on
the same GGUF files, the same prompts, temperature 0, over HTTP.

Prompts (the same text for every server):
  copy:    a document (the model's own greedy continuation of an opening,
           written once by the plain kvserve) followed by the opening again,
           so a reply that quotes the document is the likely one;
  no-gain: the opening alone (nothing earlier to copy).
Decode speed = (tokens - 1) / (time of a request for all tokens - time of
one for a single token), not streamed, the median over --repeats runs after
one warm-up (the prompt is then in each server's prefix cache, so prefill
does not count). Greedy replies of a
server with and without speculation are compared (identical expected).

Usage:
  tools/spec_decode_bench.py --kvserve build/release/src/cli/kvserve \
      --llama-server ~/kvserve-ref/llama.cpp/build/bin/llama-server --model M.gguf
Prints a Markdown table; --json FILE writes the numbers.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, path, body, stream=False, timeout=600):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=timeout)


def wait_ready(port, proc, paths, seconds=300):
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server on {port} exited with {proc.returncode}")
        for p in paths:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{p}", timeout=2) as r:
                    if r.status == 200:
                        return
            except Exception:
                pass
        time.sleep(0.2)
    raise RuntimeError(f"server on {port} not ready in {seconds} s")


def timed_completion(port, model, prompt, n, native=False):
    """(text, seconds, usage) of one non-streamed request. native: llama-server's
    own /completion (its /v1/completions refuses some outputs of a random
    model: "does not match the expected Content-only format")."""
    if native:
        path, body = "/completion", {"prompt": prompt, "n_predict": n, "temperature": 0, "ignore_eos": True}
    else:
        path, body = "/v1/completions", {"model": model, "prompt": prompt, "max_tokens": n, "temperature": 0,
                                         "ignore_eos": True}
    t0 = time.perf_counter()
    try:
        with post(port, path, body) as r:
            out = json.load(r)
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"HTTP {e.code} from port {port}: {e.read()[:300]!r}") from None
    dt = time.perf_counter() - t0
    if native:
        return out["content"], dt, {"completion_tokens": out["tokens_predicted"]}
    return out["choices"][0]["text"], dt, out.get("usage")


def stream_completion(port, model, prompt, n):
    """(text, n_tokens_seen_as_chunks, t_first, t_last, usage)"""
    body = {"model": model, "prompt": prompt, "max_tokens": n, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    first = last = None
    text = []
    usage = None
    with post(port, "/v1/completions", body, stream=True) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            ev = json.loads(data)
            if ev.get("usage"):
                usage = ev["usage"]
            for c in ev.get("choices", []):
                if c.get("text"):
                    now = time.perf_counter()
                    first = first or now
                    last = now
                    text.append(c["text"])
    return "".join(text), first - t0, last - first, usage


class Server:
    def __init__(self, name, argv, env=None):
        ready = "/health" if "llama" in name else "/ready"  # kvserve's /health is liveness only
        self.name = name
        self.port = free_port()
        argv = [a.replace("{PORT}", str(self.port)) for a in argv]
        self.log = open(f"/tmp/spec_bench_{name}.log", "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
        wait_ready(self.port, self.proc, (ready,))
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/models") as r:
            self.model = json.load(r)["data"][0]["id"]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def kv_metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kvserve", required=True)
    ap.add_argument("--llama-server", default="")
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", type=int, default=256, help="generated tokens per request")
    ap.add_argument("--doc-tokens", type=int, default=384, help="length of the document to copy")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--spec-tokens", type=int, default=5)
    ap.add_argument("--draft-model", default="", help="a GGUF of the same vocabulary: adds both servers' draft rows")
    ap.add_argument("--methods", default="ngram,draft", help="speculative rows to run: ngram, draft (with --draft-model)")
    ap.add_argument("--opening", default="Once upon a time, there was a little girl named Lily. She loved to play "
                                         "outside in the park with her friends.")
    ap.add_argument("--stream", action="store_true",
                    help="time streamed tokens (first to last) instead of n tokens less one: for slow models, where "
                         "the client's event parsing is negligible (llama-server's non-streamed replies refuse some "
                         "random-model outputs)")
    ap.add_argument("--json", default="")
    a = ap.parse_args()

    kv = [a.kvserve, "serve", "--model", a.model, "--port", "{PORT}", "--threads", str(a.threads),
          "--max-context-length", str(a.ctx), "--log-level", "warn", "--access-log", "off"]
    methods = set(a.methods.split(","))
    drafting = bool(a.draft_model) and "draft" in methods
    configs = [("kvserve", kv, None)]
    if "ngram" in methods:
        configs.append(("kvserve ngram", kv + ["--speculative", "ngram", "--speculative-tokens", str(a.spec_tokens)], None))
    if drafting:
        configs.append(("kvserve draft", kv + ["--speculative", "draft", "--model-draft", a.draft_model,
                                               "--speculative-tokens", str(a.spec_tokens)], None))
    if a.llama_server:
        env = {"LD_LIBRARY_PATH": os.path.dirname(os.path.abspath(a.llama_server))}
        ls = [a.llama_server, "-m", a.model, "--port", "{PORT}", "-t", str(a.threads), "-c", str(a.ctx), "-np", "1",
              "--log-disable"]
        configs.append(("llama-server", ls, env))
        if "ngram" in methods:
            configs.append(("llama-server ngram-simple", ls + ["--spec-type", "ngram-simple"], env))
        if drafting:
            # Its draft length cap as ours; its other draft defaults (minimum length, probability cut-off) as
            # shipped. (The llama.cpp of 3f545be names these --spec-*; older ones --draft-max.)
            configs.append(("llama-server draft", ls + ["--spec-type", "draft-simple", "-md", a.draft_model,
                                                        "--spec-draft-n-max", str(a.spec_tokens), "-td",
                                                        str(a.threads)], env))

    # The document: the plain kvserve's greedy continuation of the opening.
    s = Server("doc", kv)
    doc, _, _, _ = stream_completion(s.port, s.model, a.opening, a.doc_tokens)
    s.stop()
    prompts = {"copy": f"{a.opening}{doc}\n\n{a.opening}", "no-gain": a.opening}

    results = []
    for name, argv, env in configs:
        srv = Server(name.replace(" ", "_"), argv, env)
        try:
            for pname, prompt in prompts.items():
                stream_completion(srv.port, srv.model, prompt, a.tokens)  # warm-up, prompt cached
                d0 = kv_metric(srv.port, "kvserve:spec_decode_num_draft_tokens_total") if name.startswith("kvserve") else 0
                a0 = kv_metric(srv.port, "kvserve:spec_decode_num_accepted_tokens_total") if name.startswith("kvserve") else 0
                rates, texts, ttfts = [], [], []
                for _ in range(a.repeats):
                    if a.stream:
                        text, t1, dt, usage = stream_completion(srv.port, srv.model, prompt, a.tokens)
                        n = usage["completion_tokens"] if usage else a.tokens
                        rates.append((n - 1) / dt if dt > 0 else float("nan"))
                        texts.append(text)
                        ttfts.append(t1)
                        continue
                    # Not streamed (a client parsing thousands of events a
                    # second would be what is measured): the time of n
                    # tokens less that of one, the prompt cached for both.
                    native = name.startswith("llama")
                    _, t1, _ = timed_completion(srv.port, srv.model, prompt, 1, native)
                    text, tn, usage = timed_completion(srv.port, srv.model, prompt, a.tokens, native)
                    n = usage["completion_tokens"] if usage else a.tokens
                    rates.append((n - 1) / (tn - t1) if tn > t1 else float("nan"))
                    texts.append(text)
                    ttfts.append(t1)
                row = {"server": name, "prompt": pname, "tok_per_s": statistics.median(rates),
                       "ttft_s": statistics.median(ttfts), "text": texts[0], "runs": rates}
                if name.startswith("kvserve"):
                    d1 = kv_metric(srv.port, "kvserve:spec_decode_num_draft_tokens_total")
                    a1 = kv_metric(srv.port, "kvserve:spec_decode_num_accepted_tokens_total")
                    row["drafted"], row["accepted"] = d1 - d0, a1 - a0
                results.append(row)
                print(f"{name:28s} {pname:8s} {row['tok_per_s']:8.1f} tok/s", file=sys.stderr)
        finally:
            srv.stop()

    base = {(r["server"].split(" ")[0], r["prompt"]): r for r in results if " " not in r["server"]}
    print(f"\nModel {os.path.basename(a.model)}, {a.threads} threads, {a.tokens} tokens at temperature 0, "
          f"document {a.doc_tokens} tokens, median of {a.repeats}.\n")
    print("| server | prompt | decode tok/s | vs same server without | accepted / drafted | same text as without |")
    print("|---|---|---:|---:|---:|---|")
    for r in results:
        b = base[(r["server"].split(" ")[0], r["prompt"])]
        ratio = r["tok_per_s"] / b["tok_per_s"]
        acc = f"{int(r['accepted'])} / {int(r['drafted'])}" if "drafted" in r and r["drafted"] else "-"
        same = "yes" if r["text"] == b["text"] else "NO"
        print(f"| {r['server']} | {r['prompt']} | {r['tok_per_s']:.1f} | {ratio:.2f}x | {acc} | {same} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
