#!/usr/bin/env bash
# Soak test of the bundled model on this machine: starts `kvserve serve`
# (context 1024, so over-length prompts are cheap to send) and runs
# `kvserve soak --url` against it for SECONDS (default 60): ordinary
# requests at saturation with recall and JSON answers checked, over-length
# and malformed inputs, and clients that hang up after the first chunk.
# Fails on a crash, a 5xx, a wrong answer share, KV not back to 0 when
# idle, RSS growth >= 5 % (from minute 5, or 20 % of a shorter run, to the
# end), or an unclean exit on SIGTERM.
#   bash scripts/soak.sh [SECONDS] [extra `kvserve soak` options, e.g. --json out.json]
# Against a deployed endpoint, run `kvserve soak --url URL` itself
# (docs/validation.md). Needs a Release build (build/release/src/cli/kvserve;
# KVSERVE_BIN overrides). The server runs with one compute thread (the
# machine is shared).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-60}
shift || true
BIN=${KVSERVE_BIN:-build/release/src/cli/kvserve}
if [ ! -x "$BIN" ]; then
  echo "soak: $BIN is missing; build it: cmake --build build/release --target kvserve" >&2
  exit 2
fi
dir=$(mktemp -d)
"$BIN" serve --config configs/default.yaml --model models/kvserve-tiny.gguf --host 127.0.0.1 --port 0 \
  --threads 1 --io-threads 1 --prep-threads 1 --max-context-length 1024 --max-concurrent-requests 32 \
  --max-batch-size 8 --access-log off --request-timeout 60 >"$dir/serve.out" 2>"$dir/serve.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
url=""
for _ in $(seq 600); do
  url=$(sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$dir/serve.log" | head -1)
  [ -n "$url" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/ready")" = 200 ] && break
  kill -0 $pid 2>/dev/null || { echo "soak: the server exited:"; tail -20 "$dir/serve.log"; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { echo "soak: the server did not start"; tail -20 "$dir/serve.log"; exit 1; }
code=0
"$BIN" soak --url "$url" --duration "$SECONDS_TO_RUN" -c 12 "$@" || code=$?
if ! kill -0 $pid 2>/dev/null; then
  echo "FAIL: the server died during the soak:"
  tail -40 "$dir/serve.log"
  exit 1
fi
kill -TERM $pid
stop=0
for _ in $(seq 600); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
wait $pid || stop=$?
if [ "$stop" != 0 ]; then
  echo "FAIL: the server exited with status $stop on SIGTERM"
  tail -20 "$dir/serve.log"
  exit 1
fi
echo "server exited cleanly on SIGTERM"
exit "$code"
