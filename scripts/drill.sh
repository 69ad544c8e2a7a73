#!/usr/bin/env bash
# Operations drill: the shipped deployment on this machine, taken through a
# release cycle and a failure while clients keep sending traffic, with a real
# Prometheus running the shipped alert rules.
#
#   scripts/drill.sh [--short] [--keep] [--dir DIR]
#
# What runs (all on 127.0.0.1, free ports, under DIR or a temporary folder):
#   * `kvserve gateway` from configs/gateway.yaml, its two pools made concrete:
#     short = two blue/green slots moved by scripts/bluegreen.sh, with the
#     gateway's automatic canary rollback on; long = two replicas (as the
#     Kubernetes manifests run it: the long pool keeps a replica when one dies);
#     tenants from a key file (`kvserve gateway keys add`), the replicas'
#     key from a key file on both sides (as a mounted Secret would be);
#   * `kvserve serve` replicas from configs/default.yaml (one thread each,
#     a small KV pool, model id pinned), the bundled model as v1 and its Q8_0
#     quantization as v2;
#   * Prometheus (Debian's) with deploy/prometheus/prometheus.yml's jobs and
#     deploy/prometheus/alerts.yaml (every `for:` shortened to seconds: the
#     expressions are the shipped ones); the slots come from the file_sd file
#     bluegreen.sh keeps (KVSERVE_PROMETHEUS_TARGETS);
#   * clients through the gateway the whole time: short and long requests,
#     streamed and not, each with its own session (X-Session-Id).
#
# Steps:
#   1. canary: v2 onto green, 50 % of the sessions for a while, then all;
#   2. bad release: a truncated model onto blue; its process dies at once and
#      bluegreen.sh gives it up within seconds (traffic never leaves green);
#   3. manual rollback to v1 on blue (`bluegreen.sh rollback`), timed;
#   4. automatic rollback: a release whose replicas expect another API key
#      (every attempt on it is a 401 the gateway retries elsewhere) onto
#      green as a 50 % canary; the gateway rolls the canary back by itself
#      (kvserve_gateway:canary_rollbacks_total) and bluegreen.sh goes back;
#   5. replica killed: SIGKILL to one long replica; the gateway ejects it and
#      retries elsewhere, Prometheus sees it down; it is started again and
#      readmitted.
# Asserted, exit 1 otherwise:
#   * every client request answered 200, except the documented failure: a
#     stream already under way on the killed replica ends with an error event
#     ("the upstream replica failed mid-stream") and [DONE] (step 5 only,
#     though the stream may have started a moment before it);
#   * the manual rollback (command start to all traffic on blue) and the
#     gateway's automatic rollback (canary step start to weight 0) each take
#     under KVSERVE_DRILL_MAX_ROLLBACK_SECONDS (5);
#   * the bad release is given up within 30 s (not the 300 s timeout);
#   * KvserveReplicaDown, KvserveGatewayEjections and KvserveCanaryRolledBack
#     fire in Prometheus, and no alert of a client-visible failure
#     (KvserveGateway5xxHigh, KvserveGatewayPoolUnavailable) does.
# --short: shorter canary windows (CI: ctest -R ops_drill); --keep: leave DIR
# (logs, configs, client outcomes, Prometheus data) for inspection; it is
# kept anyway when the drill fails. docs/operations.md walks through it.
# Environment: KVSERVE_BIN (default build/release/src/cli/kvserve),
# KVSERVE_PROMETHEUS (/usr/bin/prometheus), KVSERVE_DRILL_MAX_ROLLBACK_SECONDS.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
short=0 keep=0 dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --short) short=1; shift ;;
    --keep) keep=1; shift ;;
    --dir) dir=$2; shift 2 ;;
    *) echo "usage: scripts/drill.sh [--short] [--keep] [--dir DIR]" >&2; exit 2 ;;
  esac
done
bin=${KVSERVE_BIN:-$src/build/release/src/cli/kvserve}
prom_bin=${KVSERVE_PROMETHEUS:-/usr/bin/prometheus}
max_rollback=${KVSERVE_DRILL_MAX_ROLLBACK_SECONDS:-5}
py=/usr/bin/python3
[ -x "$bin" ] || { echo "drill: no kvserve binary at $bin (build it, or set KVSERVE_BIN)" >&2; exit 2; }
[ -x "$prom_bin" ] || { echo "drill: no Prometheus at $prom_bin (scripts/setup.sh installs it)" >&2; exit 2; }
command -v curl >/dev/null || { echo "drill: curl is missing" >&2; exit 2; }
$py -c 'import yaml' 2>/dev/null || { echo "drill: $py lacks yaml (apt-get install python3-yaml)" >&2; exit 2; }
[ -f "$src/models/kvserve-tiny.gguf" ] || { echo "drill: models/kvserve-tiny.gguf is missing" >&2; exit 2; }
if [ "$short" = 1 ]; then canary_s=2 canary_min=6 for_s=2; else canary_s=10 canary_min=20 for_s=5; fi

[ -n "$dir" ] || dir=$(mktemp -d "${TMPDIR:-/tmp}/kvserve-drill-XXXXXX")
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
ok=0
t_start=$(date +%s)
say() { echo "drill: $(date +%T) $*"; }
fail() {
  echo "drill: FAILED: $*" >&2
  local f
  for f in "$dir"/*.log; do [ -s "$f" ] && { echo "--- $f" >&2; tail -12 "$f" >&2; }; done
  exit 1
}
cleanup() {
  touch "$dir/stop-traffic"
  [ -z "${clients:-}" ] || wait $clients 2>/dev/null || true
  local f pids=""
  for f in "$dir"/*.pid; do [ -e "$f" ] && pids="$pids $(cat "$f")"; done
  for f in $pids; do kill -TERM "$f" 2>/dev/null || true; done
  for f in $pids; do for _ in $(seq 200); do kill -0 "$f" 2>/dev/null || break; sleep 0.05; done; done
  for f in $pids; do kill -KILL "$f" 2>/dev/null || true; done
  if [ "$ok" = 1 ] && [ "$keep" = 0 ]; then rm -rf "$dir"; else echo "drill: files kept in $dir" >&2; fi
}
trap cleanup EXIT
free_port() { $py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
blue_port=$(free_port) green_port=$(free_port) long_a=$(free_port) long_b=$(free_port)
gw_port=$(free_port) gw_admin=$(free_port) prom_port=$(free_port)
gw=http://127.0.0.1:$gw_port
admin=http://127.0.0.1:$gw_admin
promurl=http://127.0.0.1:$prom_port

# --- releases, keys and configurations, from the shipped files
v1=$src/models/kvserve-tiny.gguf
"$bin" quantize "$v1" "$dir/v2.gguf" Q8_0 >/dev/null 2>&1 || fail "kvserve quantize"
head -c 100000 "$v1" >"$dir/truncated.gguf"
replica_key=sk-drill-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
echo "$replica_key" >"$dir/replica-keys.txt"
echo "sk-drill-another-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')" >"$dir/other-keys.txt"
chmod 600 "$dir"/*-keys.txt
tenant_key=$("$bin" gateway keys add --file "$dir/keys.yaml" --tenant drill 2>/dev/null | head -1)
[ -n "$tenant_key" ] || fail "kvserve gateway keys add"

DIR=$dir SRC=$src BLUE=$blue_port GREEN=$green_port LONG_A=$long_a LONG_B=$long_b GW=$gw_port GW_ADMIN=$gw_admin \
  FOR_S=$for_s $py - <<'PY' || fail "writing the configurations"
import os, re, yaml
e = os.environ
d, src = e["DIR"], e["SRC"]
def load(p):
    with open(os.path.join(src, p)) as f:
        return yaml.safe_load(f)
def dump(p, doc):
    with open(os.path.join(d, p), "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)

# Replicas: configs/default.yaml, made small for one machine.
serve = load("configs/default.yaml")
serve["server"].update(host="127.0.0.1", api_key_file=f"{d}/replica-keys.txt", drain_timeout_seconds=10)
serve["model"].update(name="kvserve-tiny", max_context_length=2048)
serve["kv_cache"].update(memory_limit_bytes=1 << 30, memory_fraction=1.0)  # the pool commits lazily
serve["runtime"].update(threads=1, max_concurrent_requests=16)
serve["logging"].update(access_log="off")
dump("serve.yaml", serve)
serve["server"]["api_key_file"] = f"{d}/other-keys.txt"
dump("serve-other-key.yaml", serve)

# The gateway: configs/gateway.yaml's pools with this machine's replicas.
g = load("configs/gateway.yaml")
g["gateway"].update(port=int(e["GW"]), admin_port=int(e["GW_ADMIN"]), key_file=f"{d}/keys.yaml",
                    state_file=f"{d}/gateway-state.json")
g["model"]["path"] = f"{src}/models/kvserve-tiny.gguf"
g["logging"].update(audit_log=f"{d}/audit.jsonl")
short, long_ = g["pools"]
for pool in (short, long_):
    pool.pop("api_key", None)
    pool.pop("api_key_env", None)
short.update(max_context=512, default_max_tokens=64, api_key_file=f"{d}/replica-keys.txt",
             sticky_header="X-Session-Id", canary_version="BLUEGREEN_VERSION", canary_weight=0,
             canary_max_error_rate_margin=0.2, canary_min_requests=3, canary_window_seconds=30,
             replicas=[{"url": f"http://127.0.0.1:{e['BLUE']}", "weight": 1, "version": "blue"},
                       {"url": f"http://127.0.0.1:{e['GREEN']}", "weight": 1, "version": "green"}])
long_.update(max_context=2048, api_key_file=f"{d}/replica-keys.txt",
             replicas=[{"url": f"http://127.0.0.1:{e['LONG_A']}", "weight": 1},
                       {"url": f"http://127.0.0.1:{e['LONG_B']}", "weight": 1}])
text = yaml.safe_dump(g, sort_keys=False)
text = text.replace("canary_version: BLUEGREEN_VERSION", "canary_version: green  # bluegreen: the slot given canary_weight")
lines = text.split("\n")
i = next(i for i, l in enumerate(lines) if "# bluegreen" in l)
j = next(j for j in range(i, len(lines)) if lines[j].strip() == "canary_weight: 0")
lines[j] += "  # bluegreen: percent of traffic on it"
text = "\n".join(lines)
assert text.count("# bluegreen") == 2, text
with open(f"{d}/gateway.yaml", "w") as f:
    f.write(text)

# Prometheus: the shipped jobs, this machine's targets, the shipped rules
# with short `for:` (the expressions untouched).
p = load("deploy/prometheus/prometheus.yml")
p["global"].update(scrape_interval="1s", scrape_timeout="1s", evaluation_interval="1s")
p["rule_files"] = [f"{d}/alerts.yaml"]
for job in p["scrape_configs"]:
    if job["job_name"] == "kvserve":
        job["static_configs"] = [{"targets": [f"127.0.0.1:{e['LONG_A']}", f"127.0.0.1:{e['LONG_B']}"],
                                  "labels": {"pool": "long"}}]
        job["file_sd_configs"] = [{"files": [f"{d}/slots.json"], "refresh_interval": "1s"}]
    elif job["job_name"] == "kvserve-gateway":
        job["static_configs"] = [{"targets": [f"127.0.0.1:{e['GW_ADMIN']}"]}]
dump("prometheus.yml", p)
with open(os.path.join(src, "deploy/prometheus/alerts.yaml")) as f:
    rules = f.read()
short_rules = re.sub(r"\bfor: \d+[smh]\b", f"for: {e['FOR_S']}s", rules)
short_rules = re.sub(r"\binterval: \d+s\b", "interval: 1s", short_rules)
assert short_rules != rules
with open(f"{d}/alerts.yaml", "w") as f:
    f.write(short_rules)
PY
echo "[]" >"$dir/slots.json"

# --- processes. The slots run under scripts/local_slot.sh, the stand-in for
# systemd's kvserve@SLOT (start, stop = SIGTERM and wait for the drain, alive).
start_long() {  # NAME PORT
  nohup "$bin" serve --config "$dir/serve.yaml" --port "$2" >>"$dir/$1.log" 2>&1 &
  echo $! >"$dir/$1.pid"
  disown  # its SIGKILL in step 5 is the drill's, not news
}
wait_url() {  # URL SECONDS
  for _ in $(seq $(( $2 * 10 ))); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}
gw_metric() {  # NAME{LABELS} as printed
  { curl -fsS "$admin/metrics" 2>/dev/null || true; } | awk -v k="$1" '$1 == k { v = $2 } END { print v }'
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }  # FROM TO
less() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
# Whether an alert (with a label matcher, e.g. ',instance="..."') fired at
# any time since EPOCH.
alert_fired() {  # NAME MATCHER SINCE
  local range=$(( $(date +%s) - ${3%.*} + 2 ))
  curl -fsS "$promurl/api/v1/query" --data-urlencode \
    "query=max_over_time(ALERTS{alertname=\"$1\",alertstate=\"firing\"$2}[${range}s])" |
    $py -c 'import json,sys; print(len(json.load(sys.stdin)["data"]["result"]))'
}

say "starting the gateway, two long replicas and Prometheus in $dir"
nohup "$bin" gateway --config "$dir/gateway.yaml" >>"$dir/gateway.log" 2>&1 &
echo $! >"$dir/gateway.pid"
start_long long-a "$long_a"
start_long long-b "$long_b"
nohup "$prom_bin" --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/prometheus-data" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >>"$dir/prometheus.log" 2>&1 &
echo $! >"$dir/prometheus.pid"
wait_url "$admin/health" 30 || fail "the gateway did not start"
wait_url "http://127.0.0.1:$long_a/ready" 60 && wait_url "http://127.0.0.1:$long_b/ready" 60 || fail "the long replicas did not start"
wait_url "$promurl/-/ready" 30 || fail "Prometheus did not start"

export KVSERVE_BIN=$bin KVSERVE_ROLLOUT_TIMEOUT=300
export KVSERVE_LOCAL_DIR=$dir
export KVSERVE_SLOT_START_CMD="$src/scripts/local_slot.sh start" KVSERVE_SLOT_STOP_CMD="$src/scripts/local_slot.sh stop"
export KVSERVE_SLOT_STATUS_CMD="$src/scripts/local_slot.sh alive"
export KVSERVE_BLUE_PORT=$blue_port KVSERVE_GREEN_PORT=$green_port
export KVSERVE_GATEWAY_CONFIG=$dir/gateway.yaml KVSERVE_GATEWAY_ADMIN_URL=$admin KVSERVE_GATEWAY_POOL=short
export KVSERVE_GATEWAY_RELOAD_CMD="kill -HUP $(cat "$dir/gateway.pid")"
export KVSERVE_PROMETHEUS_TARGETS=$dir/slots.json
bluegreen() { bash "$src/scripts/bluegreen.sh" --root "$dir/root" "$@" 2>>"$dir/bluegreen.log"; }
phase() { echo "$(date +%s.%N) $1" >>"$dir/phases.txt"; say "$1"; }

phase "deploy v1 on blue"
bluegreen deploy v1 "$v1" "$dir/serve.yaml" || fail "deploy v1"

# --- clients: one line per request: "START END KIND OUTCOME [DETAIL]" (epochs).
client() {  # short|long plain|stream
  local i=0 body out code tokens=24 t
  [ "$1" = long ] && tokens=600  # prompt + 600 > 512: the long pool
  while [ ! -e "$dir/stop-traffic" ]; do
    i=$((i + 1))
    body='{"model":"kvserve-tiny","prompt":"Once upon a time","max_tokens":'$tokens',"stream":'$([ "$2" = stream ] && echo true || echo false)'}'
    t=$(date +%s.%N)
    out=$(curl -sS -N --max-time 60 -H 'content-type: application/json' -H "authorization: Bearer $tenant_key" \
      -H "x-session-id: $1-$2-$i" -w '\n%{http_code}' -d "$body" "$gw/v1/completions" 2>&1) || true
    code=${out##*$'\n'}
    if [ "$code" != 200 ]; then
      echo "$t $(date +%s.%N) $1-$2 $code $(head -c 300 <<<"$out" | tr '\n' ' ')"
    elif [ "$2" = stream ] && grep -q '^event: error' <<<"$out"; then
      if grep -q 'the upstream replica failed mid-stream' <<<"$out" && grep -q '^data: \[DONE\]' <<<"$out"; then
        echo "$t $(date +%s.%N) $1-$2 cut-stream"
      else
        echo "$t $(date +%s.%N) $1-$2 stream-error $(tr '\n' ' ' <<<"$out" | tail -c 300)"
      fi
    elif [ "$2" = stream ] && ! grep -q '^data: \[DONE\]' <<<"$out"; then
      echo "$t $(date +%s.%N) $1-$2 unfinished-stream $(tr '\n' ' ' <<<"$out" | tail -c 300)"
    else
      echo "$t $(date +%s.%N) $1-$2 200"
    fi
  done
}
clients=""
for k in "short plain" "short stream" "long plain" "long stream"; do
  # shellcheck disable=SC2086
  client $k >>"$dir/clients.txt" &
  clients="$clients $!"
done
served() { [ -f "$dir/clients.txt" ] && wc -l <"$dir/clients.txt" || echo 0; }
for _ in $(seq 300); do [ "$(served)" -ge 8 ] && break; sleep 0.1; done
[ "$(served)" -ge 8 ] || fail "no client traffic through the gateway"
t_traffic=$(now)
# The gateway's canary state every 50 ms: EPOCH BLUE_IS_CANARY
# GREEN_IS_CANARY WEIGHT ROLLBACKS (what the rollback times are read from).
(
  while [ ! -e "$dir/stop-traffic" ]; do
    m=$(curl -fsS "$admin/metrics" 2>/dev/null || true)
    echo "$(now) $(awk '
      $1 == "kvserve_gateway:canary_version_info{pool=\"short\",version=\"blue\"}" { b = $2 }
      $1 == "kvserve_gateway:canary_version_info{pool=\"short\",version=\"green\"}" { g = $2 }
      $1 == "kvserve_gateway:canary_weight_percent{pool=\"short\"}" { w = $2 }
      $1 == "kvserve_gateway:canary_rollbacks_total{pool=\"short\"}" { r = $2 }
      END { print b + 0, g + 0, w + 0, r + 0 }' <<<"$m")"
    sleep 0.05
  done
) >"$dir/canary-watch.txt" &
clients="$clients $!"
# First time at or after EPOCH the watch line matches an awk CONDITION
# ($2 blue, $3 green, $4 weight, $5 rollbacks), as seconds after EPOCH.
watch_first() {  # EPOCH CONDITION
  awk -v t0="$1" '$1 >= t0 && ('"$2"') { printf "%.2f", $1 - t0; found = 1; exit } END { if (!found) print "" }' \
    "$dir/canary-watch.txt"
}

# --- 1. canary
phase "1 canary: v2 on green, ${canary_s}s at 50 %"
KVSERVE_CANARY_PERCENT=50 KVSERVE_CANARY_SECONDS=$canary_s KVSERVE_CANARY_MIN_ATTEMPTS=$canary_min \
  bluegreen deploy v2 "$dir/v2.gguf" "$dir/serve.yaml" || fail "the canary of v2 did not pass"
[ "$(readlink "$dir/root/live")" = slots/green ] || fail "v2 is not live on green"

# --- 2. bad release: a truncated model
phase "2 bad release: truncated model on blue"
t0=$(now)
if bluegreen deploy v3 "$dir/truncated.gguf" "$dir/serve.yaml"; then fail "a truncated model was deployed"; fi
bad_s=$(elapsed "$t0" "$(now)")
grep -q "the server process is not running" "$dir/bluegreen.log" || fail "the dead process was not noticed"
[ "$(readlink "$dir/root/live")" = slots/green ] || fail "live moved off green"
less "$bad_s" 30 || fail "the bad release took ${bad_s}s to give up"

# --- 3. manual rollback
phase "3 manual rollback to v1 on blue"
t0=$(now)
bluegreen rollback || fail "rollback"
command_s=$(elapsed "$t0" "$(now)")
[ "$(readlink "$dir/root/live")" = slots/blue ] || fail "rollback: blue is not live"
# The traffic moved when the gateway applied 100 % on blue; the rest of the
# command is green draining its open requests.
sleep 0.2
rollback_s=$(watch_first "$t0" '$2 == 1 && $4 == 100')
[ -n "$rollback_s" ] || fail "the rollback's traffic shift was not seen in $dir/canary-watch.txt"

# --- 4. a release that serves with the wrong key: the gateway rolls it back
phase "4 automatic rollback: a release expecting another API key on green"
before=$(gw_metric 'kvserve_gateway:canary_rollbacks_total{pool="short"}')
t0=$(now)
if KVSERVE_CANARY_PERCENT=50 KVSERVE_CANARY_SECONDS=$canary_s KVSERVE_CANARY_MIN_ATTEMPTS=$canary_min \
  bluegreen deploy v4 "$v1" "$dir/serve-other-key.yaml"; then
  fail "a release that refuses the gateway's key was deployed"
fi
after=$(gw_metric 'kvserve_gateway:canary_rollbacks_total{pool="short"}')
[ "${after%.*}" -gt "${before%.*}" ] || fail "the gateway did not roll the canary back (canary_rollbacks_total $before -> $after)"
[ "$(readlink "$dir/root/live")" = slots/blue ] || fail "live moved off blue"
grep -q "failed attempts on green: traffic back to blue" "$dir/bluegreen.log" || fail "bluegreen.sh did not go back"
# From the canary step taking effect (green the canary at 50 %) to the
# gateway's rollback (its counter moving).
sleep 0.2
step=$(watch_first "$t0" '$3 == 1 && $4 == 50')
[ -n "$step" ] || fail "the canary step was not seen in $dir/canary-watch.txt"
auto_s=$(watch_first "$(awk -v a="$t0" -v b="$step" 'BEGIN { printf "%.3f", a + b }')" '$5 > '"${before%.*}")
[ -n "$auto_s" ] || fail "the automatic rollback was not seen in $dir/canary-watch.txt"

# --- 5. a replica killed
phase "5 replica killed: SIGKILL to long-a"
kill -KILL "$(cat "$dir/long-a.pid")"
t_kill=$(now)
down=",instance=\"127.0.0.1:$long_a\""
for _ in $(seq 120); do [ "$(alert_fired KvserveReplicaDown "$down" "$t_kill")" != 0 ] && break; sleep 0.5; done
down_s=$(elapsed "$t_kill" "$(now)")
start_long long-a "$long_a"
wait_url "http://127.0.0.1:$long_a/ready" 60 || fail "long-a did not come back"
for _ in $(seq 100); do
  [ "$(gw_metric "kvserve_gateway:replica_healthy{pool=\"long\",replica=\"http://127.0.0.1:$long_a\"}")" = 1 ] && break
  sleep 0.2
done
phase "long-a is back (readmitted)"

# --- alerts and client outcomes
declare -A expect=(
  [KvserveReplicaDown]=$down
  [KvserveGatewayEjections]=""
  [KvserveCanaryRolledBack]=",pool=\"short\""
)
for _ in $(seq 120); do
  missing=""
  for a in "${!expect[@]}"; do [ "$(alert_fired "$a" "${expect[$a]}" "$t_traffic")" != 0 ] || missing="$missing $a"; done
  [ -z "$missing" ] && break
  sleep 0.5
done
touch "$dir/stop-traffic"
wait $clients 2>/dev/null || true
clients=""
range=$(( $(date +%s) - ${t_traffic%.*} + 2 ))
curl -fsS "$promurl/api/v1/query" --data-urlencode "query=max_over_time(ALERTS{alertstate=\"firing\"}[${range}s])" \
  >"$dir/alerts.json"
fired=$($py -c 'import json,sys; print(" ".join(sorted({r["metric"]["alertname"] for r in json.load(open(sys.argv[1]))["data"]["result"]})))' "$dir/alerts.json")
phase "end"

# Outcomes by step (the phase each request started in). A cut stream is the
# documented case when it ended after the kill: it may have started in step 4
# a moment before it.
PHASES=$dir/phases.txt CLIENTS=$dir/clients.txt $py - <<'PY' >"$dir/outcomes.txt"
import os, bisect, collections
ph = [l.split(" ", 1) for l in open(os.environ["PHASES"]).read().splitlines()]
starts = [float(t) for t, _ in ph]
by = collections.OrderedDict((name, collections.Counter()) for _, name in ph)
bad = []
for line in open(os.environ["CLIENTS"]).read().splitlines():
    t, end, kind, outcome = (line.split(" ", 4) + [""])[:4]
    i = max(0, bisect.bisect_right(starts, float(t)) - 1)
    name = ph[i][1]
    by[name][outcome] += 1
    kill = next((float(k) for k, n in ph if n.startswith("5 ")), None)
    documented = (outcome == "cut-stream" and kind == "long-stream" and kill is not None
                  and float(end) >= kill)
    if outcome != "200" and not documented:
        bad.append(f"{name}: {line}")
for name, c in by.items():
    print(f"{name}: " + ", ".join(f"{k} x{v}" for k, v in sorted(c.items())) if c else f"{name}: -")
for b in bad[:10]:
    print("UNEXPECTED " + b)
PY

echo
echo "drill summary ($(( $(date +%s) - t_start )) s, $(served) client requests)"
echo "  client outcomes by step (200 = answered; cut-stream = the documented mid-stream error):"
grep -v '^UNEXPECTED' "$dir/outcomes.txt" | sed 's/^/    /'
echo "  bad release given up after       ${bad_s} s (limit 30; KVSERVE_ROLLOUT_TIMEOUT 300)"
echo "  manual rollback: traffic moved   ${rollback_s} s (limit $max_rollback); command done after ${command_s} s (green drained)"
echo "  automatic canary rollback after  ${auto_s} s (limit $max_rollback)"
echo "  KvserveReplicaDown firing        ${down_s} s after the kill (for: ${for_s}s, scrape and evaluation 1s)"
echo "  alerts that fired: ${fired:-none}"
grep -q '^UNEXPECTED' "$dir/outcomes.txt" && fail "client requests failed outside the documented case: $(grep '^UNEXPECTED' "$dir/outcomes.txt" | head -5)"
[ -z "$missing" ] || fail "expected alerts did not fire:$missing"
for a in KvserveGateway5xxHigh KvserveGatewayPoolUnavailable; do
  case " $fired " in *" $a "*) fail "$a fired: clients saw failures" ;; esac
done
less "$rollback_s" "$max_rollback" || fail "the manual rollback took ${rollback_s}s (limit $max_rollback)"
less "$auto_s" "$max_rollback" || fail "the automatic rollback took ${auto_s}s (limit $max_rollback)"
ok=1
echo "drill: PASSED"
