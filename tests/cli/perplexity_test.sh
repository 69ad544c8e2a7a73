#!/usr/bin/env bash
# `kvserve perplexity` on stories260K: the llama-perplexity output format, the
# same estimate whatever the batch size, the estimate equal (1e-3 relative) to
# the independent NumPy reference tools/perplexity_ref.py on the same token
# ids, and bad input (missing files, short text, context out of range, bad
# flags) rejected with a clear message and exit code 1.
set -euo pipefail
model="$KVSERVE_SHARED_DIR/models/stories260K.gguf"
if [ ! -f "$model" ]; then echo "SKIP: $model is absent"; exit 77; fi
text="$KVSERVE_SOURCE_DIR/tests/cli/data/ppl_stories.txt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Prints "PPL ERR" from the final line of a run's stdout.
final_of() { sed -n 's/^Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\)$/\1 \2/p' <<<"$1"; }
# rel_close A B TOL: |A - B| <= TOL * |B|
rel_close() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; exit !(d <= t * m) }'; }

run_ppl() { "$KVSERVE_BIN" perplexity -m "$model" -f "$text" -c 64 --chunks 4 -t 2 "$@" 2>"$tmp/err" || { cat "$tmp/err"; fail "perplexity $* exited $?"; }; }

out=$(run_ppl --kv-dtype f32)
grep -Eq '^\[1\][0-9]+\.[0-9]{4},\[2\][0-9]+\.[0-9]{4},\[3\][0-9]+\.[0-9]{4},\[4\][0-9]+\.[0-9]{4},$' <<<"$out" ||
  fail "per-chunk line missing or malformed: $out"
read -r ppl err <<<"$(final_of "$out")"
[ -n "${ppl:-}" ] && [ -n "${err:-}" ] || fail "no final estimate line: $out"
awk -v p="$ppl" -v e="$err" 'BEGIN { exit !(p > 1 && p < 512 && e > 0) }' ||
  fail "implausible estimate $ppl +/- $err (vocabulary of 512)"
echo "ok: kvserve PPL = $ppl +/- $err (c 64, 4 chunks, kv f32)"

# Windows split over several forward calls give the same estimate.
read -r ppl_b16 err_b16 <<<"$(final_of "$(run_ppl --kv-dtype f32 -b 16)")"
rel_close "$ppl_b16" "$ppl" 1e-4 && rel_close "$err_b16" "$err" 1e-3 || fail "-b 16 gives $ppl_b16 +/- $err_b16, not $ppl"
# Fewer chunks: a prefix of the same running estimates.
out2=$("$KVSERVE_BIN" perplexity -m "$model" -f "$text" -c 64 --chunks 2 -t 2 --kv-dtype f32 2>"$tmp/err")
[[ "$(head -1 <<<"$out")" == "$(head -1 <<<"$out2")"* ]] || fail "--chunks 2 does not repeat the first two chunks: $out2"
# An f16 cache moves the estimate a little, not much.
read -r ppl_f16 _ <<<"$(final_of "$(run_ppl)")"
rel_close "$ppl_f16" "$ppl" 1e-2 || fail "kv f16 gives $ppl_f16, f32 $ppl"
echo "ok: -b 16 ($ppl_b16), --chunks 2, kv f16 ($ppl_f16) agree"

# The independent reference on the same ids (kvserve tokenize is checked
# against llama.cpp's tokenizer elsewhere).
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  # Without the final newline, as kvserve perplexity (and llama-perplexity) read -f.
  printf '%s' "$(cat "$text")" | "$KVSERVE_BIN" tokenize -m "$model" --add-special >"$tmp/ids.txt"
  ref=$(/usr/bin/python3 "$KVSERVE_SOURCE_DIR/tools/perplexity_ref.py" --model "$model" --tokens "@$tmp/ids.txt" --ctx 64 --chunks 4)
  read -r ref_ppl ref_err ref_count < <(/usr/bin/python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(r["ppl"], r["ppl_err"], r["count"])' "$ref")
  [ "$ref_count" = 124 ] || fail "reference scored $ref_count tokens, not 4 * 31"
  rel_close "$ppl" "$ref_ppl" 1e-3 || fail "kvserve PPL $ppl, reference $ref_ppl"
  rel_close "$err" "$ref_err" 1e-2 || fail "kvserve error $err, reference $ref_err"
  echo "ok: reference PPL = $ref_ppl +/- $ref_err"
else
  echo "note: /usr/bin/python3 without numpy; reference comparison not run"
fi

# Bad input: exit 1 with a message that says what is wrong.
expect_error() {
  local pattern="$1"; shift
  set +e
  "$KVSERVE_BIN" perplexity "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  set -e
  [ "$rc" = 1 ] || { cat "$tmp/err"; fail "perplexity $* exited $rc, not 1"; }
  grep -q -- "$pattern" "$tmp/err" || { cat "$tmp/err"; fail "perplexity $*: no '$pattern' in the error"; }
  echo "ok: $* -> $(head -1 "$tmp/err")"
}
printf 'Once upon a time, there was a cat.' >"$tmp/short.txt"
: >"$tmp/empty.txt"
expect_error "cannot open the text file '/nonexistent/text.txt'" -m "$model" -f /nonexistent/text.txt
expect_error "needs at least 128" -m "$model" -f "$tmp/short.txt" -c 64
expect_error "needs at least 128" -m "$model" -f "$tmp/empty.txt" -c 64
expect_error "above the model's trained context (2048)" -m "$model" -f "$text" -c 4096
expect_error "too small" -m "$model" -f "$text" -c 4
expect_error "unknown --kv-dtype 'q9'" -m "$model" -f "$text" -c 64 --kv-dtype q9
expect_error "/nonexistent/model.gguf" -m /nonexistent/model.gguf -f "$text"
expect_error "-f TEXT is required" -m "$model"
echo "1 passed, 0 failed"
