#!/usr/bin/env bash
# Soak test (issue 10): `kvserve serve` on the bundled model at saturation for
# SECONDS (default 60) with a mix of normal, streaming, cancelled,
# disconnecting, over-length and malformed requests; fails on a crash, KV
# blocks still in use once idle, RSS growth >= 5 % (from minute 5, or 20 % of
# a shorter run, to the end) or an answer a request must never get.
#   bash scripts/soak.sh [SECONDS] [extra scripts/soak.mjs options, e.g. --report out.json]
# Needs a Release build (build/release/src/cli/kvserve; KVSERVE_BIN overrides)
# and node. The server runs with one compute thread (the machine is shared).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-60}
shift || true
BIN=${KVSERVE_BIN:-build/release/src/cli/kvserve}
if [ ! -x "$BIN" ]; then
  echo "soak: $BIN is missing; build it: cmake --build build/release --target kvserve" >&2
  exit 2
fi
exec node scripts/soak.mjs --bin "$BIN" --seconds "$SECONDS_TO_RUN" "$@"
