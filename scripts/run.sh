#!/usr/bin/env bash
# Sets up, builds Release and serves the bundled default model over the
# OpenAI-compatible HTTP API (configs/default.yaml: http://127.0.0.1:8000).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVSERVE_BENCH=OFF >/dev/null
cmake --build build/release --target kvserve
if [ ! -f models/kvserve-tiny.gguf ]; then
  echo "error: the bundled model models/kvserve-tiny.gguf is missing from this checkout" >&2
  exit 1
fi
# Extra arguments go to `kvserve serve` (e.g. --port 8080); `kvserve` alone
# with a subcommand can be run as build/release/src/cli/kvserve.
exec build/release/src/cli/kvserve serve --config configs/default.yaml "$@"
