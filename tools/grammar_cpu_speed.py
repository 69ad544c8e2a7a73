#!/usr/bin/env python3
"""Constrained vs free decoding cost, measured as process CPU time per token
(less sensitive to a shared machine than wall time). For each binary and mode
a fresh `kvserve serve` (1 compute thread): one warm-up request, then REQS
chat requests (temperature 1, seeds 0..REQS-1), json_schema first, then free
text (ignore_eos) of the same lengths; CPU seconds from /proc/PID/stat.
  /usr/bin/python3 tools/grammar_cpu_speed.py MODEL before=BIN1,after=BIN2 REQS MAX_TOKENS REPS
"""
import json, os, re, subprocess, sys, threading, time, urllib.request
model = os.path.expanduser(sys.argv[1]); bins = dict(a.split("=",1) for a in sys.argv[2].split(","))
reqs = int(sys.argv[3]); maxtok = int(sys.argv[4]); reps = int(sys.argv[5])
SCHEMA = {"type":"object","properties":{"people":{"type":"array","minItems":6,"maxItems":8,"items":{"type":"object","properties":{"name":{"type":"string","maxLength":24},"age":{"type":"integer","minimum":0,"maximum":120}},"required":["name","age"],"additionalProperties":False}}},"required":["people"],"additionalProperties":False}
tck = os.sysconf("SC_CLK_TCK")
def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")",1)[1].split()
    return (int(f[11]) + int(f[12])) / tck
def post(port, body):
    r = urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(), {"content-type":"application/json"}), timeout=600)
    return json.load(r)
res = {}
for rep in range(reps):
    for name, b in bins.items():
        for mode in ("schema", "free"):
            p = subprocess.Popen([b, "serve", "--model", model, "--port", "0", "--threads", "1", "--log-level", "info"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            port = None
            for line in p.stderr:
                m = re.search(r"listening on http://[^:]+:(\d+)", line)
                if m: port = int(m.group(1)); break
            threading.Thread(target=lambda f=p.stderr: [None for _ in f], daemon=True).start()  # keep the pipe drained
            while True:
                try:
                    if urllib.request.urlopen(f"http://127.0.0.1:{port}/ready").status == 200: break
                except Exception: time.sleep(0.2)
            mid = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models"))["data"][0]["id"]
            def body(seed, constrained):
                b = {"model": mid, "messages":[{"role":"user","content":"List some people with their ages as JSON."}], "max_tokens": maxtok, "temperature": 1, "seed": seed}
                if constrained: b["response_format"] = {"type":"json_schema","json_schema":{"name":"people","schema":SCHEMA}}
                else: b["ignore_eos"] = True
                return b
            post(port, body(999, mode=="schema"))  # warm: compile + first masks
            c0 = cpu(p.pid); t0 = time.time(); toks = 0
            lens = []
            for i in range(reqs):
                n = lens_schema[i] if mode == "free" else maxtok
                bb = body(i, mode=="schema")
                if mode == "free": bb["max_tokens"] = n
                r = post(port, bb); k = r["usage"]["completion_tokens"]; toks += k; lens.append(k)
            if mode == "schema": lens_schema = lens
            c1 = cpu(p.pid); t1 = time.time()
            p.terminate(); p.wait()
            res.setdefault((name, mode), []).append((c1-c0, t1-t0, toks))
            print(f"rep {rep} {name:7s} {mode:6s} tokens {toks:5d} cpu {1000*(c1-c0)/toks:7.3f} ms/tok wall {1000*(t1-t0)/toks:7.3f} ms/tok", flush=True)
print("--- pooled")
for (name, mode), v in sorted(res.items()):
    c = sum(x[0] for x in v); w = sum(x[1] for x in v); t = sum(x[2] for x in v)
    print(f"{name:7s} {mode:6s} tokens {t:6d} cpu {1000*c/t:7.3f} ms/tok  wall {1000*w/t:7.3f} ms/tok")
