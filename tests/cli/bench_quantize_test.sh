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
gen=$("$KVSERVE_BIN" run -m "$dir/q8.gguf" -p "Once upon a time" -n 16 --temp 0 2>/dev/null)
case "$gen" in "Once upon a time"?*) ;; *) echo "FAIL: quantized model generated nothing"; exit 1 ;; esac
echo "1 passed, 0 failed"
