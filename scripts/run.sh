#!/usr/bin/env bash
# Sets up, builds Release and runs kvserve on the bundled default model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVSERVE_BENCH=OFF >/dev/null
cmake --build build/release --target kvserve
MODEL=""
for m in models/kvserve-tiny.gguf ../shared/models/stories260K.gguf; do
  if [ -f "$m" ]; then MODEL="$m"; break; fi
done
if [ -z "$MODEL" ]; then
  echo "error: no model found: expected models/kvserve-tiny.gguf or ../shared/models/stories260K.gguf" >&2
  exit 1
fi
if [ $# -gt 0 ]; then exec build/release/src/cli/kvserve "$@"; fi
exec build/release/src/cli/kvserve run -m "$MODEL" -p "Once upon a time" -n 64 --temp 0
