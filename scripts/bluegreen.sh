#!/usr/bin/env bash
# Zero-downtime rollout and rollback of `kvserve serve` on one machine: two
# server slots, blue and green, each on its own port and running its own
# release, are the two replicas of one `kvserve gateway` pool, and the
# gateway's traffic split moves clients from one to the other.
#
#   scripts/bluegreen.sh [--root DIR] deploy VERSION MODEL.gguf CONFIG.yaml
#   scripts/bluegreen.sh [--root DIR] rollback
#   scripts/bluegreen.sh [--root DIR] status
#
# Layout under the root (default /var/lib/kvserve), releases as rollout.sh
# makes them (release_lib.sh), each frozen with its slot's port:
#   releases/VERSION/            model.gguf + serve.yaml
#   slots/blue -> ../releases/V  what the blue slot runs (or ran last)
#   slots/green -> ../releases/W
#   live -> slots/SLOT           the slot the gateway sends traffic to; the
#                                other slot keeps the previous release
#
# The gateway pool (KVSERVE_GATEWAY_CONFIG) holds both slots, labelled with
# their slot as version, and two marked lines this script rewrites (then it
# sends SIGHUP, which applies them to the next request; requests in flight
# stay where they are): the slot that gets canary_weight percent of the
# traffic (the one being deployed during a canary step, then the live one
# at 100), so the gateway's own automatic rollback
# (canary_max_error_rate_margin) always judges the new release:
#     canary_version: blue   # bluegreen: the slot given canary_weight
#     canary_weight: 100     # bluegreen: percent of traffic on it
#     replicas:
#       - {url: http://127.0.0.1:8001, version: blue}
#       - {url: http://127.0.0.1:8002, version: green}
#
# deploy: checks the release (the config must load, as rollout.sh), starts
# it on the idle slot, waits until the slot is ready, serves the new model's
# SHA-256 (kvserve:model_info) and the gateway sees it healthy; optionally
# sends it KVSERVE_CANARY_PERCENT of the traffic for KVSERVE_CANARY_SECONDS
# (longer, up to KVSERVE_CANARY_MAX_SECONDS, until the gateway counted
# KVSERVE_CANARY_MIN_ATTEMPTS attempts on it: a window without canary
# traffic proves nothing) and goes back if any attempt on it failed, or it
# never got enough traffic to judge; then moves
# all traffic (waiting until the gateway's canary_weight_percent shows it)
# and stops the old slot, which drains (SIGTERM: its open requests and
# streams finish). A release that does not start within
# KVSERVE_ROLLOUT_TIMEOUT seconds (300) is stopped and the slot set back:
# traffic never left the live slot. rollback: starts the other slot again
# (its release, model and config are kept), moves traffic back the same
# way and stops the slot that was live. status: slots, releases, split.
# One deploy or rollback at a time ($root/.bluegreen.lock).
#
# Environment (defaults for systemd: deploy/systemd/kvserve@.service):
#   KVSERVE_SLOT_START_CMD  'systemctl enable -q kvserve@$KVSERVE_SLOT &&
#                            systemctl restart kvserve@$KVSERVE_SLOT'
#   KVSERVE_SLOT_STOP_CMD   'systemctl disable -q --now kvserve@$KVSERVE_SLOT'
#   KVSERVE_SLOT_STATUS_CMD 'systemctl is-active --quiet kvserve@$KVSERVE_SLOT'
#                           (is the slot's process up? down for 2 s in a row
#                           while starting: it died or crash-loops, given up
#                           at once instead of after KVSERVE_ROLLOUT_TIMEOUT)
#                           (must return once the process has exited:
#                           drained; enabled = the live slot after a reboot)
#     both run by bash with KVSERVE_SLOT (blue|green) and KVSERVE_SLOT_CONFIG
#     ($root/slots/SLOT/serve.yaml) exported
#   KVSERVE_BLUE_PORT 8001, KVSERVE_GREEN_PORT 8002, KVSERVE_SLOT_HOST 127.0.0.1
#   KVSERVE_GATEWAY_CONFIG  /etc/kvserve/gateway.yaml
#   KVSERVE_GATEWAY_RELOAD_CMD 'systemctl reload kvserve-gateway' (deploy/systemd/kvserve-gateway.service)
#   KVSERVE_GATEWAY_ADMIN_URL http://127.0.0.1:9180 (the gateway's admin listener: its /metrics)
#   KVSERVE_GATEWAY_POOL    main
#   KVSERVE_PROMETHEUS_TARGETS  "" (off), or a Prometheus file_sd file this
#                           script keeps listing the running slots ({pool:
#                           KVSERVE_GATEWAY_POOL, slot} labels), so the idle
#                           slot is not scraped as a replica that is down
#   KVSERVE_CANARY_PERCENT  0 (no canary step), KVSERVE_CANARY_SECONDS 30,
#   KVSERVE_CANARY_MIN_ATTEMPTS 20, KVSERVE_CANARY_MAX_SECONDS 300 (the
#   split is per tenant, or per the pool's sticky_header: with few tenants,
#   set sticky_header to a per-session header so the canary gets traffic)
set -euo pipefail

root=/var/lib/kvserve
if [ "${1:-}" = --root ]; then root=$2; shift 2; fi
kvserve=${KVSERVE_BIN:-$(command -v kvserve || echo /usr/local/bin/kvserve)}
timeout_s=${KVSERVE_ROLLOUT_TIMEOUT:-300}
# Single quotes: $KVSERVE_SLOT expands when the command runs (slot_do).
# shellcheck disable=SC2016
start_cmd=${KVSERVE_SLOT_START_CMD:-'systemctl enable -q kvserve@$KVSERVE_SLOT && systemctl restart kvserve@$KVSERVE_SLOT'}
# shellcheck disable=SC2016
stop_cmd=${KVSERVE_SLOT_STOP_CMD:-'systemctl disable -q --now kvserve@$KVSERVE_SLOT'}
status_cmd=${KVSERVE_SLOT_STATUS_CMD:-'systemctl is-active --quiet kvserve@$KVSERVE_SLOT'}
slot_host=${KVSERVE_SLOT_HOST:-127.0.0.1}
gw_config=${KVSERVE_GATEWAY_CONFIG:-/etc/kvserve/gateway.yaml}
gw_reload=${KVSERVE_GATEWAY_RELOAD_CMD:-systemctl reload kvserve-gateway}
gw_url=${KVSERVE_GATEWAY_ADMIN_URL:-http://127.0.0.1:9180}
gw_pool=${KVSERVE_GATEWAY_POOL:-main}
canary_percent=${KVSERVE_CANARY_PERCENT:-0}
canary_seconds=${KVSERVE_CANARY_SECONDS:-30}
canary_min_attempts=${KVSERVE_CANARY_MIN_ATTEMPTS:-20}
canary_max_seconds=${KVSERVE_CANARY_MAX_SECONDS:-300}
targets_file=${KVSERVE_PROMETHEUS_TARGETS:-}

die() { echo "bluegreen: $*" >&2; exit 1; }
log() { echo "bluegreen: $(date +%T.%N | cut -c1-12) $*" >&2; }

# shellcheck source-path=SCRIPTDIR source=release_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/release_lib.sh"

other() { [ "$1" = blue ] && echo green || echo blue; }
slot_port() { [ "$1" = blue ] && echo "${KVSERVE_BLUE_PORT:-8001}" || echo "${KVSERVE_GREEN_PORT:-8002}"; }
slot_url() { echo "http://$slot_host:$(slot_port "$1")"; }
live_slot() { [ -L "$root/live" ] && basename "$(readlink "$root/live")" || true; }
slot_release() { release_of "slots/$1"; }

relink() {  # LINK TARGET: atomic
  ln -sfn "$2" "$root/$1.tmp" && mv -T "$root/$1.tmp" "$root/$1"
}

slot_do() {  # start|stop SLOT
  local cmd=$start_cmd rc=0
  [ "$1" = stop ] && cmd=$stop_cmd
  log "$1 slot $2: $cmd"
  KVSERVE_SLOT=$2 KVSERVE_SLOT_CONFIG=$root/slots/$2/serve.yaml bash -c "$cmd" 9>&- || rc=$?  # a server must not hold the lock
  write_targets
  return $rc
}

# Prometheus file_sd targets (KVSERVE_PROMETHEUS_TARGETS): the slots whose
# process runs, so a stopped slot is neither scraped nor alerted on as down
# (KvserveReplicaDown); written whole and renamed (Prometheus re-reads it).
write_targets() {
  [ -n "$targets_file" ] || return 0
  local s list=""
  for s in blue green; do
    if KVSERVE_SLOT=$s bash -c "$status_cmd" 9>&- 2>/dev/null; then
      list="$list${list:+, }{\"targets\": [\"$slot_host:$(slot_port $s)\"], \"labels\": {\"pool\": \"$gw_pool\", \"slot\": \"$s\"}}"
    fi
  done
  echo "[$list]" >"$targets_file.tmp" && mv -f "$targets_file.tmp" "$targets_file"
}

# The value of one gateway metric series, "" when absent.
gw_metric() {  # NAME LABELS (as printed, e.g. pool="main")
  { curl -fsS "$gw_url/metrics" 2>/dev/null || true; } | awk -v k="$1{$2}" '$1 == k { v = $2 } END { print v }'
}

# The gateway sees a slot as ready for traffic (probed ready, re-admitted).
wait_gateway_healthy() {  # SLOT
  local deadline=$(( $(date +%s) + timeout_s ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    [ "$(gw_metric kvserve_gateway:replica_healthy "pool=\"$gw_pool\",replica=\"$(slot_url "$1")\"")" = 1 ] && return 0
    sleep 0.2
  done
  return 1
}

# Sends PERCENT of the traffic to SLOT (the rest to the other): rewrites the
# marked canary_version and canary_weight lines, reloads the gateway and
# waits until it applies the split. Returns 3 when the gateway rolled that
# canary back instead (canary_max_error_rate_margin: its first attempts
# failed), 1 when it did not apply it.
shift_to() {  # SLOT PERCENT
  local tmp deadline
  # Rewritten in place (owner, mode and links stay): the gateway reads it
  # only at start and on SIGHUP, which comes after.
  tmp=$(mktemp)
  sed -E -e "s/^([[:space:]]*canary_version:)[[:space:]]*[A-Za-z\"]*([[:space:]]*# bluegreen.*)$/\1 $1\2/" \
    -e "s/^([[:space:]]*canary_weight:)[[:space:]]*[0-9.]+([[:space:]]*# bluegreen.*)$/\1 $2\2/" "$gw_config" >"$tmp"
  cat "$tmp" >"$gw_config"
  rm -f "$tmp"
  log "gateway pool $gw_pool: $2% on $1 (canary_version $1, canary_weight $2); $gw_reload"
  bash -c "$gw_reload" 9>&-
  deadline=$(( $(date +%s) + 30 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if [ "$(gw_metric kvserve_gateway:canary_version_info "pool=\"$gw_pool\",version=\"$1\"")" = 1 ]; then
      [ "$(gw_metric kvserve_gateway:canary_weight_percent "pool=\"$gw_pool\"")" = "$2" ] && return 0
      if [ "$(gw_metric kvserve_gateway:canary_rolled_back "pool=\"$gw_pool\"")" = 1 ]; then
        log "the gateway rolled the canary $1 back (its attempts failed)"
        return 3
      fi
    fi
    sleep 0.1
  done
  log "the gateway did not apply canary_version $1 at $2% within 30 s (its log says why)"
  return 1
}

check_gateway_config() {
  [ -f "$gw_config" ] || die "no gateway config $gw_config (KVSERVE_GATEWAY_CONFIG)"
  [ "$(grep -c -E '^[[:space:]]*canary_weight:[[:space:]]*[0-9.]+[[:space:]]*# bluegreen' "$gw_config")" = 1 ] &&
    [ "$(grep -c -E '^[[:space:]]*canary_version:[[:space:]]*[A-Za-z"]*[[:space:]]*# bluegreen' "$gw_config")" = 1 ] ||
    die "$gw_config needs exactly one line 'canary_version: SLOT  # bluegreen' and one 'canary_weight: N  # bluegreen'" \
      "in pool $gw_pool (see the header of $0)"
  local s
  for s in blue green; do
    grep -q -F "$(slot_url $s)" "$gw_config" || die "$gw_config does not list the $s slot $(slot_url $s)"
  done
  curl -fsS -o /dev/null "$gw_url/metrics" || die "the gateway's admin listener does not answer at $gw_url (KVSERVE_GATEWAY_ADMIN_URL)"
}

# Starts SLOT on the release it links to and waits until it serves that
# release's model and the gateway has admitted it.
start_and_wait() {  # SLOT
  slot_do start "$1" || return 1
  wait_for_release "$root/slots/$1" "$timeout_s" "export KVSERVE_SLOT=$1; $status_cmd" ||
    { log "slot $1 did not become ready"; return 1; }
  wait_gateway_healthy "$1" || { log "the gateway did not admit slot $1 within ${timeout_s}s"; return 1; }
}

# Failed attempts the gateway counted on a slot so far, and all attempts.
slot_errors() { gw_metric kvserve_gateway:version_attempts_total "pool=\"$gw_pool\",version=\"$1\",outcome=\"error\"" | sed 's/^$/0/'; }
slot_attempts() {
  local ok
  ok=$(gw_metric kvserve_gateway:version_attempts_total "pool=\"$gw_pool\",version=\"$1\",outcome=\"ok\"" | sed 's/^$/0/')
  echo $(( ${ok%.*} + $(slot_errors "$1" | sed 's/\..*//') ))
}

# Moves all traffic from LIVE (may be "") to NEW, which is running, through
# the optional canary step; stops LIVE once nothing new reaches it.
cut_over() {  # NEW LIVE
  local new=$1 old=$2 before after tries0 tries t0
  if [ -n "$old" ] && [ "$canary_percent" != 0 ]; then
    before=$(slot_errors "$new")
    tries0=$(slot_attempts "$new")
    local rc=0
    shift_to "$new" "$canary_percent" || rc=$?
    if [ "$rc" = 3 ]; then log "canary: failed attempts on $new: traffic back to $old"; return 1; fi
    [ "$rc" = 0 ] || return 1
    log "canary: $canary_percent% on $new for ${canary_seconds}s (at least $canary_min_attempts attempts)"
    t0=$(date +%s)
    sleep "$canary_seconds"
    while :; do
      after=$(slot_errors "$new")
      tries=$(( $(slot_attempts "$new") - tries0 ))
      if [ "$after" != "$before" ]; then
        log "canary: $((${after%.*} - ${before%.*})) failed attempts on $new: traffic back to $old"
        return 1
      fi
      [ "$tries" -ge "$canary_min_attempts" ] && break
      if [ $(( $(date +%s) - t0 )) -ge "$canary_max_seconds" ]; then
        log "canary: only $tries of $canary_min_attempts attempts reached $new in ${canary_max_seconds}s: not enough" \
          "traffic to judge it (one tenant? set the pool's sticky_header); traffic back to $old"
        return 1
      fi
      sleep 0.5
    done
    log "canary: $tries attempts on $new, none failed"
  fi
  shift_to "$new" 100 || return 1
  relink live "slots/$new"
  # Past the point of no return: the new slot has all the traffic.
  if [ -n "$old" ]; then slot_do stop "$old" || log "stopping slot $old failed: stop it by hand"; fi
  return 0
}

cmd=${1:-}
if [ "$cmd" = deploy ] || [ "$cmd" = rollback ]; then
  mkdir -p "$root"
  exec 9>"$root/.bluegreen.lock"
  flock -n 9 || die "another deploy or rollback is running (lock $root/.bluegreen.lock)"
fi
case "$cmd" in
  deploy)
    [ $# -eq 4 ] || die "usage: bluegreen.sh [--root DIR] deploy VERSION MODEL.gguf CONFIG.yaml"
    check_gateway_config
    live=$(live_slot)
    idle=$(other "${live:-green}")
    serving_release=""
    [ -n "$live" ] && [ -n "$(slot_release "$live")" ] && serving_release=$root/releases/$(slot_release "$live")
    make_release "$2" "$3" "$4" --server.port "$(slot_port "$idle")"
    kept=$(slot_release "$idle")
    mkdir -p "$root/slots"
    relink "slots/$idle" "../releases/$2"
    log "release $2 on slot $idle; live: ${live:-none} ($(slot_release "${live:-none}"))"
    if start_and_wait "$idle" && cut_over "$idle" "$live"; then
      log "release $2 is serving on slot $idle; the previous release stays on slot ${live:-none} (rollback)"
      exit 0
    fi
    # All traffic back on the live slot (the gateway's file too) before the
    # new one stops; with no slot of a version up, the gateway sends its
    # share to the other one anyway.
    if [ -n "$live" ]; then shift_to "$live" 100 || log "the gateway still has to be set back: $gw_config"; fi
    slot_do stop "$idle" || true
    if [ -n "$kept" ]; then relink "slots/$idle" "../releases/$kept"; else rm -f "$root/slots/$idle"; fi
    die "release $2 failed on slot $idle; traffic stayed on ${live:-no slot}${live:+ ($(slot_release "$live"))}"
    ;;
  rollback)
    [ $# -eq 1 ] || die "usage: bluegreen.sh [--root DIR] rollback"
    check_gateway_config
    live=$(live_slot)
    [ -n "$live" ] || die "nothing deployed"
    prev=$(other "$live")
    rel=$(slot_release "$prev")
    [ -n "$rel" ] || die "no previous release to roll back to (slot $prev is empty)"
    log "rollback: slot $live ($(slot_release "$live")) -> slot $prev ($rel)"
    canary_percent=0  # going back to what served before: no canary step
    if start_and_wait "$prev" && cut_over "$prev" "$live"; then
      log "release $rel is serving on slot $prev"
      exit 0
    fi
    shift_to "$live" 100 || log "the gateway still has to be set back: $gw_config"
    slot_do stop "$prev" || true
    die "slot $prev ($rel) did not come back; traffic stayed on $live"
    ;;
  status)
    live=$(live_slot)
    echo "live: ${live:-none}"
    for s in blue green; do
      rel=$(slot_release "$s")
      state=stopped
      if curl -fsS -o /dev/null "$(slot_url "$s")/ready" 2>/dev/null; then state=ready; fi
      echo "slot $s: $(slot_url "$s") release ${rel:-none} ($state)"
    done
    weight=$(gw_metric kvserve_gateway:canary_weight_percent "pool=\"$gw_pool\"")
    on=""
    for s in blue green; do
      [ "$(gw_metric kvserve_gateway:canary_version_info "pool=\"$gw_pool\",version=\"$s\"")" = 1 ] && on=$s
    done
    if [ -n "$weight" ]; then echo "gateway pool $gw_pool: $weight% of traffic on ${on:-no slot}"
    else echo "gateway pool $gw_pool: no answer from $gw_url"; fi
    for d in "$root"/releases/*/; do
      [ -d "$d" ] && echo "release $(basename "$d"): sha256 $(release_field "$d" sha256)"
    done
    ;;
  *)
    die "usage: bluegreen.sh [--root DIR] deploy VERSION MODEL.gguf CONFIG.yaml | rollback | status"
    ;;
esac
