#!/usr/bin/env bash
# scripts/bluegreen.sh end to end on one machine: two real `kvserve serve`
# slots (blue, green; started and stopped by a stand-in for systemd's
# kvserve@.service: background processes with pid files, stop = SIGTERM and
# wait for the drain) behind a real `kvserve gateway`, with clients sending
# completions and streams through the gateway all the time:
#   deploy v1 (stories260K) on blue, deploy v2 (its Q8_0 quantization:
#   another file and hash) on green through a canary step (50 % for 1 s),
#   rollback to v1 on blue in one command;
#   a release whose config does not load is refused, one whose model is
#   truncated is stopped and its slot set back, and one whose canary step
#   fails (the gateway fails every attempt on it) goes back by itself.
# Asserted: not one client request fails (all 200, every stream ends with
# [DONE] and no error event), and after each step the gateway's audit log
# puts every new request on the expected slot, whose /metrics reports the
# expected model hash (kvserve:model_info).
# Skips (77) under sanitizers and without ../shared or curl; fails without the binary.
set -euo pipefail
src=${KVSERVE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=${KVSERVE_BIN:-}  # the build tree's kvserve, from ctest: never a guessed path
shared=${KVSERVE_SHARED_DIR:-$src/../shared}
if [ -n "${KVSERVE_SANITIZED:-}" ]; then echo "SKIP: the blue/green script checks nothing more under sanitizers (ops label)"; exit 77; fi
[ -x "$bin" ] || { echo "FAIL: KVSERVE_BIN (${bin:-not set}) is not a kvserve binary (run through ctest)"; exit 1; }
[ -f "$shared/models/stories260K.gguf" ] || { echo "SKIP: $shared/models/stories260K.gguf missing"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: curl missing"; exit 77; }

tmp=$(mktemp -d)
root=$tmp/root
cleanup() {
  touch "$tmp/stop-traffic"
  [ -z "${clients:-}" ] || wait $clients 2>/dev/null || true
  local f pids=""
  for f in "$tmp"/*.pid; do [ -e "$f" ] && pids="$pids $(cat "$f")"; done
  # All at once (each takes a second or so to exit after its drain).
  for f in $pids; do kill -TERM "$f" 2>/dev/null || true; done
  for f in $pids; do while kill -0 "$f" 2>/dev/null; do sleep 0.05; done; done
  rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
blue_port=$(free_port) green_port=$(free_port) gw_port=$(free_port) gw_admin_port=$(free_port)

cat >"$tmp/serve.yaml" <<YAML
server:
  host: 127.0.0.1
  drain_timeout_seconds: 10
runtime:
  threads: 1
  max_concurrent_requests: 8
model:
  max_context_length: 256
logging:
  access_log: "off"
YAML
# The slots run under scripts/local_slot.sh (kvserve@SLOT's stand-in).

model=$shared/models/stories260K.gguf
write_gateway_config() {  # GREEN_FAULT_RATE [CANARY_VERSION CANARY_WEIGHT]
  cat >"$tmp/gateway.yaml" <<YAML
gateway:
  host: 127.0.0.1
  port: $gw_port
  admin_port: $gw_admin_port
  allow_anonymous: true
  health_interval_seconds: 0.1
model:
  path: $model
logging:
  audit_log: $tmp/audit.jsonl
pools:
  - name: main
    max_context: 256
    sticky_header: X-Session-Id
    canary_version: ${2:-green}  # bluegreen: the slot given canary_weight
    canary_weight: ${3:-0}  # bluegreen: percent of traffic on it
    replicas:
      - {url: http://127.0.0.1:$blue_port, version: blue}
      - {url: http://127.0.0.1:$green_port, version: green, fault_rate: $1}
YAML
}
write_gateway_config 0
nohup "$bin" gateway --config "$tmp/gateway.yaml" >>"$tmp/gateway.log" 2>&1 &
echo $! >"$tmp/gateway.pid"
for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$gw_port/health" 2>/dev/null && break; sleep 0.1; done

export KVSERVE_BIN=$bin KVSERVE_ROLLOUT_TIMEOUT=20
export KVSERVE_LOCAL_DIR=$tmp
export KVSERVE_SLOT_START_CMD="$src/scripts/local_slot.sh start" KVSERVE_SLOT_STOP_CMD="$src/scripts/local_slot.sh stop"
# systemctl is-active's stand-in.
export KVSERVE_SLOT_STATUS_CMD="$src/scripts/local_slot.sh alive"
export KVSERVE_BLUE_PORT=$blue_port KVSERVE_GREEN_PORT=$green_port
export KVSERVE_GATEWAY_CONFIG=$tmp/gateway.yaml KVSERVE_GATEWAY_ADMIN_URL=http://127.0.0.1:$gw_admin_port KVSERVE_GATEWAY_POOL=main
export KVSERVE_GATEWAY_RELOAD_CMD="kill -HUP $(cat "$tmp/gateway.pid")"
bluegreen() { bash "$src/scripts/bluegreen.sh" --root "$root" "$@"; }
fail() { echo "FAIL: $*"; for f in "$tmp"/*.log; do echo "--- $f"; tail -15 "$f"; done; exit 1; }

sha1=$(sha256sum "$model" | cut -d' ' -f1)
"$bin" quantize "$model" "$tmp/v2.gguf" Q8_0 >/dev/null 2>&1
sha2=$(sha256sum "$tmp/v2.gguf" | cut -d' ' -f1)
[ "$sha1" != "$sha2" ]

bluegreen deploy v1 "$model" "$tmp/serve.yaml" || fail "deploy v1"
[ "$(readlink "$root/live")" = slots/blue ] || fail "v1 is not live on blue"

# Clients: one loop of completions, one of streams, each request with its own
# session (so a canary split takes a share of them), until stop-traffic.
# One line per request: 200, or what went wrong.
client() {  # stream|plain
  local i=0 body out code
  while [ ! -e "$tmp/stop-traffic" ]; do
    i=$((i + 1))
    body='{"model":"stories260K","prompt":"Once upon a time","max_tokens":6,"stream":'$([ "$1" = stream ] && echo true || echo false)'}'
    out=$(curl -sS -N --max-time 30 -H 'content-type: application/json' -H "x-session-id: $1-$i" -w '\n%{http_code}' \
      -d "$body" "http://127.0.0.1:$gw_port/v1/completions" 2>&1) || true
    code=${out##*$'\n'}
    if [ "$code" != 200 ]; then echo "$code $(head -c 300 <<<"$out" | tr '\n' ' ')"
    elif [ "$1" = stream ] && { ! grep -q '^data: \[DONE\]' <<<"$out" || grep -q '^event: error' <<<"$out"; }; then
      echo "broken stream: $(tr '\n' ' ' <<<"$out" | tail -c 300)"
    else echo 200; fi
    sleep 0.02
  done
}
client plain >"$tmp/plain.out" &
clients=$!
client stream >"$tmp/stream.out" &
clients="$clients $!"
served() { cat "$tmp/plain.out" "$tmp/stream.out" | wc -l; }
no_failures() {  # WHAT
  local bad; bad=$(cat "$tmp/plain.out" "$tmp/stream.out" | grep -v '^200$' | head -3 || true)
  [ -z "$bad" ] || fail "$1: client requests failed: $bad"
}
audit_lines() { [ -f "$tmp/audit.jsonl" ] && wc -l <"$tmp/audit.jsonl" || echo 0; }
slot_port() { [ "$1" = green ] && echo "$green_port" || echo "$blue_port"; }
# Every request the gateway answered after audit line FROM ran on SLOT.
only_on() {  # SLOT FROM WHAT
  local got; got=$(tail -n +"$(( $2 + 1 ))" "$tmp/audit.jsonl" | /usr/bin/python3 -c '
import json, sys
print(" ".join(sorted({"%s@%s:%s" % (l.get("version"), l.get("replica"), l.get("status")) for l in map(json.loads, sys.stdin)})))')
  [ "$got" = "$1@http://127.0.0.1:$(slot_port "$1"):200" ] || fail "$3: requests ran on: $got (expected $1, port $(slot_port "$1"))"
}
# The requests after audit line FROM (default: from now on; at least 4) ran
# on SLOT, which serves SHA.
expect_on() {  # SLOT SHA WHAT [FROM]
  local from=${4:-$(audit_lines)}
  for _ in $(seq 100); do [ "$(( $(audit_lines) - from ))" -ge 4 ] && break; sleep 0.05; done
  only_on "$1" "$from" "$3"
  curl -fsS "http://127.0.0.1:$(slot_port "$1")/metrics" | grep "^kvserve:model_info{.*sha256=\"$2\"} 1$" >/dev/null ||
    fail "$3: slot $1 does not serve sha256 $2"
  echo "ok: $3: $(( $(audit_lines) - from )) requests ran on slot $1 (sha256 ${2:0:12}...); no request failed so far"
}
step() {  # WHAT, then the bluegreen arguments: runs it under traffic
  local what=$1 n0; shift
  n0=$(served)
  bluegreen "$@" 2>>"$tmp/bluegreen.log" || return 1
  [ "$(( $(served) - n0 ))" -gt 0 ] || fail "$what: no client request completed while it ran"
}
for _ in $(seq 100); do [ "$(served)" -ge 2 ] && break; sleep 0.05; done
no_failures "traffic on v1"

# A canary that cannot get enough traffic to be judged (1 % of the sessions,
# 1000 attempts required within 2 s) is not passed: it goes back by itself.
if KVSERVE_CANARY_PERCENT=1 KVSERVE_CANARY_SECONDS=1 KVSERVE_CANARY_MIN_ATTEMPTS=1000 KVSERVE_CANARY_MAX_SECONDS=2 \
  bluegreen deploy v2a "$tmp/v2.gguf" "$tmp/serve.yaml" 2>"$tmp/v2a.log"; then
  fail "a canary without enough traffic was passed"
fi
grep -q "attempts reached green in 2s: not enough traffic to judge it" "$tmp/v2a.log" || fail "v2a: $(cat "$tmp/v2a.log")"
[ "$(readlink "$root/live")" = slots/blue ] && [ ! -e "$tmp/green.pid" ] || fail "v2a: blue live, green stopped"
no_failures "canary without enough traffic"

KVSERVE_CANARY_PERCENT=50 KVSERVE_CANARY_SECONDS=1 KVSERVE_CANARY_MIN_ATTEMPTS=5 step "deploy v2 (canary step 50 % for 1 s, 5 attempts)" \
  deploy v2 "$tmp/v2.gguf" "$tmp/serve.yaml" || fail "deploy v2"
[ "$(readlink "$root/live")" = slots/green ] && [ ! -e "$tmp/blue.pid" ] || fail "deploy v2: green live, blue stopped"
grep -q "canary: 50% on green for 1s" "$tmp/bluegreen.log" || fail "deploy v2: no canary step"
grep -qE "canary: [0-9]+ attempts on green, none failed" "$tmp/bluegreen.log" || fail "deploy v2: the canary's attempts were not counted"
no_failures "deploy v2"
expect_on green "$sha2" "deploy v2"

step "rollback" rollback || fail "rollback"
[ "$(readlink "$root/live")" = slots/blue ] && [ ! -e "$tmp/green.pid" ] || fail "rollback: blue live, green stopped"
[ "$(readlink "$root/slots/green")" = ../releases/v2 ] || fail "rollback: green keeps v2"
no_failures "rollback"
expect_on blue "$sha1" "rollback to v1 (one command)"
bluegreen status >"$tmp/status.txt"
grep -q "^live: blue" "$tmp/status.txt" && grep -q "slot green: .* release v2 (stopped)" "$tmp/status.txt" &&
  grep -q "gateway pool main: 100% of traffic on blue" "$tmp/status.txt" || fail "status: $(cat "$tmp/status.txt")"

# One deploy or rollback at a time.
if (flock 9 && bluegreen rollback 2>"$tmp/locked.log") 9>"$root/.bluegreen.lock"; then fail "a second rollback ran"; fi
grep -q "another deploy or rollback is running" "$tmp/locked.log" || fail "lock: $(cat "$tmp/locked.log")"
[ "$(readlink "$root/live")" = slots/blue ] || fail "lock: live changed"

# A configuration that does not load: refused before anything starts.
printf 'runtime:\n  max_batch_sise: 4\n' >"$tmp/bad.yaml"
a=$(audit_lines)
if bluegreen deploy v3 "$model" "$tmp/bad.yaml" 2>"$tmp/bad.log"; then fail "a bad config was deployed"; fi
grep -q "max_batch_sise" "$tmp/bad.log" || fail "the refusal does not name the bad key"
[ ! -e "$root/releases/v3" ] && [ ! -e "$tmp/green.pid" ] || fail "bad config: something changed"
expect_on blue "$sha1" "a release whose config does not load is refused" "$a"

# A model that cannot be loaded: the slot never gets ready, traffic stays.
head -c 100000 "$model" >"$tmp/truncated.gguf"
a=$(audit_lines)
# The dead process is noticed (the timeout is 120 s).
if KVSERVE_ROLLOUT_TIMEOUT=120 bluegreen deploy v4 "$tmp/truncated.gguf" "$tmp/serve.yaml" 2>"$tmp/v4.log"; then
  fail "a broken model was reported as deployed"
fi
grep -q "traffic stayed on blue" "$tmp/v4.log" || fail "v4: $(cat "$tmp/v4.log")"
grep -q "the server process is not running" "$tmp/v4.log" || fail "v4: the dead slot was not noticed: $(cat "$tmp/v4.log")"
[ "$(readlink "$root/live")" = slots/blue ] && [ "$(readlink "$root/slots/green")" = ../releases/v2 ] ||
  fail "v4: live or the kept release changed"
no_failures "broken model"
expect_on blue "$sha1" "a release whose model does not load is stopped; green keeps v2 for rollback" "$a"

# A canary step that fails: the gateway fails every attempt on green
# (fault_rate 1, retried on blue, so clients see nothing) while the canary
# step sends it 90 % of the sessions; deploy goes back by itself.
write_gateway_config 1 blue 100 && kill -HUP "$(cat "$tmp/gateway.pid")"
a=$(audit_lines)
if KVSERVE_CANARY_PERCENT=90 KVSERVE_CANARY_SECONDS=1 bluegreen deploy v5 "$tmp/v2.gguf" "$tmp/serve.yaml" 2>"$tmp/v5.log"; then
  fail "a failing canary was deployed"
fi
grep -q "failed attempts on green: traffic back to blue" "$tmp/v5.log" || fail "v5: $(cat "$tmp/v5.log")"
[ "$(readlink "$root/live")" = slots/blue ] && [ ! -e "$tmp/green.pid" ] || fail "v5: blue live, green stopped"
no_failures "failing canary"
expect_on blue "$sha1" "a failing canary goes back to blue by itself"

touch "$tmp/stop-traffic"
wait $clients
no_failures "the end"
echo "bluegreen: $(served) client requests, all 200; 7 steps passed"
