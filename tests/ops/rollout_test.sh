#!/usr/bin/env bash
# scripts/rollout.sh end to end on one machine: a real `kvserve serve`
# started by a stand-in for systemd (restart = SIGTERM, wait for the drain
# to end, start again from current/serve.yaml) and checked through
# /metrics (kvserve:model_info carries the served model's SHA-256):
#   deploy v1 (the bundled model), deploy v2 (its Q8_0 quantization: another
#   file and hash; the served model id stays v1's), rollback (v1 again, in
#   one command), a release whose configuration does not load is refused
#   before anything changes, and a release whose model cannot be loaded (the
#   process exits at start) is noticed within seconds, not the timeout, and
#   rolled back by itself with `previous` still naming a release that served.
#   Release files are readable by another user whatever the umask.
# Skips (77) under sanitizers and without the bundled model; fails without the binary.
set -euo pipefail
src=${KVSERVE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=${KVSERVE_BIN:-}  # the build tree's kvserve, from ctest: never a guessed path
if [ -n "${KVSERVE_SANITIZED:-}" ]; then echo "SKIP: the rollout script checks nothing more under sanitizers (ops label)"; exit 77; fi
[ -x "$bin" ] || { echo "FAIL: KVSERVE_BIN (${bin:-not set}) is not a kvserve binary (run through ctest)"; exit 1; }
[ -f "$src/models/kvserve-tiny.gguf" ] || { echo "SKIP: models/kvserve-tiny.gguf missing"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: curl missing"; exit 77; }

tmp=$(mktemp -d)
root=$tmp/root
cleanup() {
  if [ -f "$tmp/pid" ] && kill -0 "$(cat "$tmp/pid")" 2>/dev/null; then kill -TERM "$(cat "$tmp/pid")"; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$tmp/serve.yaml" <<YAML
server:
  host: 127.0.0.1
  port: $port
  drain_timeout_seconds: 5
runtime:
  threads: 1
  max_concurrent_requests: 4
model:
  max_context_length: 1024
logging:
  access_log: "off"
YAML
# The process manager stand-in: stop (SIGTERM: kvserve drains) and start.
cat >"$tmp/restart.sh" <<SH
#!/usr/bin/env bash
if [ -f "$tmp/pid" ]; then
  pid=\$(cat "$tmp/pid")
  kill -TERM "\$pid" 2>/dev/null || true
  while kill -0 "\$pid" 2>/dev/null; do sleep 0.1; done
fi
nohup "$bin" serve --config "$root/current/serve.yaml" >>"$tmp/server.log" 2>&1 &
echo \$! >"$tmp/pid"
SH
# systemctl is-active's stand-in: is the process alive?
cat >"$tmp/alive.sh" <<SH
#!/usr/bin/env bash
[ -f "$tmp/pid" ] && kill -0 "\$(cat "$tmp/pid")" 2>/dev/null
SH
chmod +x "$tmp/restart.sh" "$tmp/alive.sh"
export KVSERVE_BIN=$bin KVSERVE_RESTART_CMD="$tmp/restart.sh" KVSERVE_STATUS_CMD="$tmp/alive.sh" KVSERVE_ROLLOUT_TIMEOUT=30
umask 077  # as root's may be: the release must still be readable by the service user
rollout() { bash "$src/scripts/rollout.sh" --root "$root" "$@"; }
serving_sha() { curl -fsS "http://127.0.0.1:$port/metrics" | sed -n 's/^kvserve:model_info{.*sha256="\([0-9a-f]*\)"} 1$/\1/p'; }
expect_serving() {  # SHA WHAT
  local got; got=$(serving_sha)
  [ "$got" = "$1" ] || { echo "FAIL: $2: serving ${got:-nothing}, expected $1"; tail -20 "$tmp/server.log"; exit 1; }
  echo "ok: $2 (sha256 ${1:0:12}...)"
}

v1_model=$src/models/kvserve-tiny.gguf
v2_model=$tmp/kvserve-tiny-q8.gguf
"$bin" quantize "$v1_model" "$v2_model" Q8_0 >/dev/null 2>&1
sha1=$(sha256sum "$v1_model" | cut -d' ' -f1)
sha2=$(sha256sum "$v2_model" | cut -d' ' -f1)
[ "$sha1" != "$sha2" ]

rollout deploy v1 "$v1_model" "$tmp/serve.yaml"
expect_serving "$sha1" "deploy v1"
grep -q "\"sha256\": \"$sha1\"" "$root/releases/v1/serve.yaml"
for f in "$root" "$root/releases" "$root/releases/v1" "$root/releases/v1/serve.yaml" "$root/releases/v1/model.gguf"; do
  [ "$(stat -L -c %A "$f" | cut -c8)" = r ] || { echo "FAIL: $f is not readable by others: $(stat -L -c %A "$f")"; exit 1; }
done
echo "ok: the release is readable by the service user (umask 077)"
rollout deploy v2 "$v2_model" "$tmp/serve.yaml"
expect_serving "$sha2" "deploy v2"
[ "$(readlink "$root/current")" = releases/v2 ] && [ "$(readlink "$root/previous")" = releases/v1 ]
# The id clients send survives the new file name (v2's is kvserve-tiny-q8.gguf).
curl -fsS "http://127.0.0.1:$port/v1/models" | grep '"id":"kvserve-tiny"' >/dev/null
curl -fsS "http://127.0.0.1:$port/v1/completions" -H 'content-type: application/json' \
  -d '{"model":"kvserve-tiny","prompt":"Once upon a time","max_tokens":4}' | grep '"text"' >/dev/null
echo "ok: v2 answers as kvserve-tiny, the id v1 served"

rollout rollback
expect_serving "$sha1" "rollback to v1 (one command)"
[ "$(readlink "$root/current")" = releases/v1 ] && [ "$(readlink "$root/previous")" = releases/v2 ]
rollout status >"$tmp/status.txt"
grep -q "current:  v1" "$tmp/status.txt"

# A configuration that does not load: refused, nothing switched or restarted.
printf 'runtime:\n  max_batch_sise: 4\n' >"$tmp/bad.yaml"
pid_before=$(cat "$tmp/pid")
if rollout deploy v3 "$v1_model" "$tmp/bad.yaml" 2>"$tmp/bad.log"; then echo "FAIL: a bad config was deployed"; exit 1; fi
grep -q "max_batch_sise" "$tmp/bad.log"
[ "$(readlink "$root/current")" = releases/v1 ] && [ "$(cat "$tmp/pid")" = "$pid_before" ] && [ ! -e "$root/releases/v3" ]
echo "ok: a release whose config does not load is refused before anything changes"

# A model file that cannot be loaded: the server exits at start; the script
# notices the dead process (not the 120 s timeout) and rolls back; previous
# still names v2 (a release that served), not the broken v4.
head -c 100000 "$v1_model" >"$tmp/truncated.gguf"
t0=$(date +%s)
if KVSERVE_ROLLOUT_TIMEOUT=120 rollout deploy v4 "$tmp/truncated.gguf" "$tmp/serve.yaml" 2>"$tmp/v4.log"; then
  echo "FAIL: a broken model was reported as deployed"; exit 1
fi
took=$(( $(date +%s) - t0 ))
cat "$tmp/v4.log"
grep -q "the server process is not running" "$tmp/v4.log"
grep -q "rolling back to v1" "$tmp/v4.log"
[ "$took" -lt 60 ] || { echo "FAIL: the failed deploy took ${took}s: the dead process was not noticed"; exit 1; }
expect_serving "$sha1" "automatic rollback after a failed deploy (${took}s)"
[ "$(readlink "$root/current")" = releases/v1 ] && [ "$(readlink "$root/previous")" = releases/v2 ] ||
  { echo "FAIL: after the failed deploy current=$(readlink "$root/current") previous=$(readlink "$root/previous")"; exit 1; }
rollout rollback
expect_serving "$sha2" "rollback after the failed deploy goes to v2, never the broken v4"
echo "rollout: 7 steps passed"
