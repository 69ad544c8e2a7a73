# Sourced by the end-to-end tests: start `kvserve serve` on a free loopback
# port and wait until /ready answers (or until it fails), stop it on exit.
#   start_server NAME ARGS...   sets ${NAME}_URL and ${NAME}_PID; its log is $dir/NAME.log
#   wait_ready URL [SECONDS]    returns 0 once GET URL/ready is 200
# Needs $KVSERVE_BIN and $dir (a temporary directory the test owns).

started_pids=()
stop_servers() {
  for p in "${started_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${started_pids[@]}"; do wait "$p" 2>/dev/null || true; done
}

start_server() {
  local name=$1
  shift
  "$KVSERVE_BIN" serve --host 127.0.0.1 --port 0 --access-log off --threads 2 "$@" >"$dir/$name.out" 2>"$dir/$name.log" &
  local pid=$!
  started_pids+=("$pid")
  local port=""
  for _ in $(seq 1 300); do
    port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$dir/$name.log" | head -1)
    [ -n "$port" ] && break
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "FAIL: server $name exited before listening:"
      cat "$dir/$name.log"
      exit 1
    fi
    sleep 0.1
  done
  [ -n "$port" ] || { echo "FAIL: server $name did not listen"; cat "$dir/$name.log"; exit 1; }
  printf -v "${name}_URL" 'http://127.0.0.1:%s' "$port"
  printf -v "${name}_PID" '%s' "$pid"
}

http_status() { curl -s -o /dev/null -w '%{http_code}' "$1$2" || true; }
http_body() { curl -s "$1$2"; }

wait_ready() {
  local url=$1 secs=${2:-60}
  for _ in $(seq 1 $((secs * 10))); do
    [ "$(http_status "$url" /ready)" = 200 ] && return 0
    sleep 0.1
  done
  return 1
}

# start_gateway NAME CONFIG_YAML: `kvserve gateway` from CONFIG_YAML (it must
# listen on port 0); sets ${NAME}_URL once /ready answers 200.
start_gateway() {
  local name=$1 config=$2 url=""
  "$KVSERVE_BIN" gateway --config "$config" >"$dir/$name.out" 2>"$dir/$name.log" &
  started_pids+=("$!")
  for _ in $(seq 1 100); do
    url=$(sed -n 's/.*\] listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$dir/$name.log" | head -1)
    [ -n "$url" ] && [ "$(http_status "$url" /ready)" = 200 ] && break
    sleep 0.1
  done
  if [ -z "$url" ] || [ "$(http_status "$url" /ready)" != 200 ]; then
    echo "FAIL: gateway $name did not start:"
    cat "$dir/$name.log"
    exit 1
  fi
  printf -v "${name}_URL" '%s' "$url"
}

# one_replica_gateway NAME REPLICA_URL CONTEXT [AUTH]: a gateway with one
# pool of one replica for the bundled model ($model), anonymous unless AUTH
# gives the gateway's auth keys (e.g. 'key_file: "/path/keys.yaml"'); sets
# ${NAME}_URL like start_gateway.
one_replica_gateway() {
  local name=$1 replica=$2 context=$3 auth=${4:-"allow_anonymous: true"}
  cat >"$dir/$name.yaml" <<YAML
gateway: {host: 127.0.0.1, port: 0, admin_port: 0, $auth, health_interval_seconds: 0.2}
model: {path: "$model"}
logging: {audit_log: "off"}
pools:
  - {name: main, max_context: $context, replicas: [{url: "$replica"}]}
YAML
  start_gateway "$name" "$dir/$name.yaml"
}

# bundled_model_test: the start the bench tests share: a temporary $dir
# removed (with the servers) on exit, $model the bundled model (FAIL when it
# is absent), and fail MESSAGE, which prints the tail of every .out, .err and
# .log file of $dir and exits 1.
bundled_model_test() {
  dir=$(mktemp -d)
  trap 'stop_servers; rm -rf "$dir"' EXIT
  model="$KVSERVE_SOURCE_DIR/models/kvserve-tiny.gguf"
  [ -f "$model" ] || { echo "FAIL: bundled model $model is missing"; exit 1; }
}
fail() {
  echo "FAIL: $*"
  for f in "$dir"/*.out "$dir"/*.err "$dir"/*.log; do [ -s "$f" ] && { echo "--- $f"; tail -20 "$f"; }; done
  exit 1
}
