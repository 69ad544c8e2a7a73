#!/usr/bin/env bash
# Long-context recall of the bundled model measured through kvserve itself:
# pass keys planted at 10/50/90 % depth of 1K, 2K and 4K-token plain-text
# contexts (models/kvserve-tiny.recall.jsonl), greedy decoding.
set -euo pipefail
root="$KVSERVE_SOURCE_DIR"
model="$root/models/kvserve-tiny.gguf"
[ -f "$model" ] || { echo "FAIL: bundled model $model is missing"; exit 1; }
/usr/bin/python3 - "$KVSERVE_BIN" "$model" "$root/models/kvserve-tiny.recall.jsonl" <<'PY'
import json, subprocess, sys
binary, model, cases = sys.argv[1:4]
ok = total = 0
for line in open(cases):
    r = json.loads(line)
    if r["format"] != "plain":
        continue
    out = subprocess.run([binary, "run", "-m", model, "-p", r["prompt"], "-n", "8", "--temp", "0", "-t", "2"],
                         capture_output=True, text=True, check=True).stdout
    got = out[len(r["prompt"]):]
    hit = got.startswith(r["expected"])
    ok += hit
    total += 1
    print(f"{r['tokens']:>5} tokens, depth {r['depth']:.0%}: {'ok' if hit else 'MISS'} ({got[:12]!r} vs {r['expected']!r})")
print(f"recall {ok}/{total}")
# The model card reports >= 95 % per cell on 40 prompts; on these 9 allow one miss.
if ok < total - 1:
    print(f"{ok} passed, {total - ok} failed")
    sys.exit(1)
print("1 passed, 0 failed")
PY
