#!/usr/bin/env bash
# random-model -> quantize -> bench/run round trip on a small shape; bench
# prints llama-bench style lines.
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
model="$KVSERVE_SHARED_DIR/models/stories260K.gguf"
if [ ! -f "$model" ]; then echo "SKIP: $model is absent"; exit 77; fi
"$KVSERVE_BIN" quantize "$model" "$dir/q8.gguf" Q8_0 2>/dev/null
"$KVSERVE_BIN" inspect "$dir/q8.gguf" > "$dir/inspect.txt"
grep -q "Q8_0" "$dir/inspect.txt" || { echo "FAIL: quantized file has no Q8_0 tensors"; exit 1; }
out=$("$KVSERVE_BIN" bench --offline -m "$dir/q8.gguf" -p 32 -n 8 -t 2 -r 2 2>/dev/null)
echo "$out"
echo "$out" | grep -Eq '^pp32: [0-9.]+$' || { echo "FAIL: no pp32 line"; exit 1; }
echo "$out" | grep -Eq '^tg8: [0-9.]+$' || { echo "FAIL: no tg8 line"; exit 1; }
echo "$out" | grep -Eq '^peak_rss_mib: [0-9.]+$' || { echo "FAIL: no peak memory line"; exit 1; }
# Without the warm-up runs, and at a depth.
out=$("$KVSERVE_BIN" bench --offline -m "$dir/q8.gguf" -p 32 -n 4 -d 48 -t 2 -r 1 --no-warmup 2>/dev/null)
echo "$out" | grep -Eq '^pp32 @ d48: [0-9.]+$' || { echo "FAIL: no pp32 @ d48 line: $out"; exit 1; }
echo "$out" | grep -Eq '^tg4 @ d48: [0-9.]+$' || { echo "FAIL: no tg4 @ d48 line: $out"; exit 1; }
gen=$("$KVSERVE_BIN" run -m "$dir/q8.gguf" -p "Once upon a time" -n 16 --temp 0 2>/dev/null)
case "$gen" in "Once upon a time"?*) ;; *) echo "FAIL: quantized model generated nothing"; exit 1 ;; esac
# A mixture-of-experts model (qwen3moe, 4 experts of 256, 2 a token, 2 of
# the preset's 12 layers: the 12-layer file took 24 s to write under ASan):
# quantize converts the 3-D expert tensors and keeps the router as it is;
# bench runs it.
"$KVSERVE_BIN" random-model --arch qwen3moe --experts 4 --experts-used 2 --expert-ffn 256 --layers 2 --type Q8_0 \
  -o "$dir/moe.gguf" 2>/dev/null
"$KVSERVE_BIN" quantize "$dir/moe.gguf" "$dir/moe4.gguf" Q4_0 2>"$dir/quantize.txt"
grep -Eq '^blk.0.ffn_gate_exps.weight +Q8_0 +-> Q4_0' "$dir/quantize.txt" || { echo "FAIL: expert tensor not quantized"; cat "$dir/quantize.txt"; exit 1; }
grep -Eq '^blk.0.ffn_gate_inp.weight +F32 +-> F32' "$dir/quantize.txt" || { echo "FAIL: router converted"; exit 1; }
out=$("$KVSERVE_BIN" bench --offline -m "$dir/moe4.gguf" -p 16 -n 4 -t 2 -r 1 2>/dev/null)
echo "$out" | grep -Eq '^tg4: [0-9.]+$' || { echo "FAIL: MoE model did not run: $out"; exit 1; }
echo "2 passed, 0 failed"
