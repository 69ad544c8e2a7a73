#!/usr/bin/env bash
# Routing policies side by side (round_robin, least_load, cache_aware) on
# three local replicas of the bundled model: tools/route_bench.mjs.
#   bash scripts/route_bench.sh --quick            # minutes on 2 cores
#   bash scripts/route_bench.sh [--json out.json]  # the full multi-tenant run
# Needs build/release/src/cli/kvserve (cmake --build build/release --target kvserve) and node.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -x build/release/src/cli/kvserve ]]; then
  echo "route_bench: build/release/src/cli/kvserve is missing; build the kvserve target first" >&2
  exit 1
fi
exec node tools/route_bench.mjs "$@"
