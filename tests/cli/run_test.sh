#!/usr/bin/env bash
# `kvserve run` on stories260K: greedy output must equal llama.cpp's greedy
# output token for token (its text, which tokenizes back to the same ids).
set -euo pipefail
model="$KVSERVE_SHARED_DIR/models/stories260K.gguf"
if [ ! -f "$model" ]; then echo "SKIP: $model is absent"; exit 77; fi
expected="Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it,"
for kv in f32 f16; do
  out=$("$KVSERVE_BIN" run -m "$model" -p "Once upon a time" -n 60 --temp 0 -t 2 --kv-dtype $kv 2>/tmp/kvserve_run_err.$$)
  case "$out" in
    "$expected"*) echo "ok: kv $kv greedy output matches llama.cpp" ;;
    *) echo "FAIL: kv $kv"; echo "got:      $out"; echo "expected: $expected..."; cat /tmp/kvserve_run_err.$$; exit 1 ;;
  esac
  grep -q "generated" /tmp/kvserve_run_err.$$ || { echo "FAIL: no speed figures on stderr"; exit 1; }
done
rm -f /tmp/kvserve_run_err.$$
# Errors are clear and do not crash.
if "$KVSERVE_BIN" run -m /nonexistent.gguf -p hi -n 2 2>/tmp/kvserve_run_err.$$; then echo "FAIL: missing model accepted"; exit 1; fi
grep -qi "nonexistent.gguf" /tmp/kvserve_run_err.$$ || { echo "FAIL: error does not name the file"; cat /tmp/kvserve_run_err.$$; exit 1; }
rm -f /tmp/kvserve_run_err.$$
echo "1 passed, 0 failed"
