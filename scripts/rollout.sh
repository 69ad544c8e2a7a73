#!/usr/bin/env bash
# Versioned rollout and rollback of `kvserve serve` on one machine.
#
#   scripts/rollout.sh [--root DIR] deploy VERSION MODEL.gguf CONFIG.yaml
#   scripts/rollout.sh [--root DIR] rollback
#   scripts/rollout.sh [--root DIR] status
#
# Layout under the root (default /var/lib/kvserve):
#   releases/VERSION/model.gguf   the weights (hard link, or a copy)
#   releases/VERSION/serve.yaml   the effective configuration, frozen: CONFIG
#                                 with model.path = this release's model and
#                                 model.sha256 = its hash (kvserve refuses to
#                                 start on a different file)
#   current -> releases/VERSION   what the server runs (kvserve.service reads
#   previous -> releases/OLD      current/serve.yaml); previous is kept for rollback
#
# deploy: checks the new release before touching anything (the config must
# load: `kvserve serve --print-config`; inline server.api_keys are refused,
# use server.api_key_file), switches `current`, restarts the server
# ($KVSERVE_RESTART_CMD, default `systemctl restart kvserve`: SIGTERM drains
# the old process) and waits until the server is ready and reports the new
# model's SHA-256 (kvserve:model_info on /metrics). If it does not within
# $KVSERVE_ROLLOUT_TIMEOUT seconds (default 300), it rolls back by itself and
# exits 1. rollback: swaps current and previous and restarts the same way.
# With several replicas behind the gateway, roll them one at a time: the
# gateway takes a draining replica out and re-admits it when /ready passes.
set -euo pipefail

root=/var/lib/kvserve
if [ "${1:-}" = --root ]; then root=$2; shift 2; fi
kvserve=${KVSERVE_BIN:-$(command -v kvserve || echo /usr/local/bin/kvserve)}
restart_cmd=${KVSERVE_RESTART_CMD:-systemctl restart kvserve}
timeout_s=${KVSERVE_ROLLOUT_TIMEOUT:-300}

die() { echo "rollout: $*" >&2; exit 1; }
log() { echo "rollout: $*" >&2; }

release_of() { [ -L "$root/$1" ] && basename "$(readlink "$root/$1")" || true; }

# The server's address and the model hash a release expects, from its config.
release_field() {  # DIR FIELD(host|port|sha256)
  "$kvserve" serve --config "$1/serve.yaml" --print-config |
    /usr/bin/python3 -c 'import json,sys; c=json.load(sys.stdin); f=sys.argv[1]
print(c["model"]["sha256"] if f=="sha256" else c["server"][f])' "$2"
}

wait_for_release() {  # DIR -> 0 when the server runs it
  local dir=$1 host port sha deadline
  host=$(release_field "$dir" host)
  port=$(release_field "$dir" port)
  sha=$(release_field "$dir" sha256)
  [ "$host" = 0.0.0.0 ] && host=127.0.0.1
  deadline=$(( $(date +%s) + timeout_s ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if curl -fsS -o /dev/null "http://$host:$port/ready" 2>/dev/null &&
       curl -fsS "http://$host:$port/metrics" 2>/dev/null | grep -q "^kvserve:model_info{.*sha256=\"$sha\"} 1$"; then
      return 0
    fi
    sleep 0.5
  done
  return 1
}

switch_to() {  # NEW_CURRENT NEW_PREVIOUS (release names; previous may be empty)
  ln -sfn "releases/$1" "$root/current.tmp" && mv -T "$root/current.tmp" "$root/current"
  if [ -n "$2" ]; then ln -sfn "releases/$2" "$root/previous.tmp" && mv -T "$root/previous.tmp" "$root/previous"; fi
}

restart_and_wait() {  # RELEASE
  log "restarting: $restart_cmd"
  bash -c "$restart_cmd"
  wait_for_release "$root/releases/$1"
}

cmd=${1:-}
case "$cmd" in
  deploy)
    [ $# -eq 4 ] || die "usage: rollout.sh [--root DIR] deploy VERSION MODEL.gguf CONFIG.yaml"
    version=$2 model=$3 config=$4
    [[ "$version" =~ ^[A-Za-z0-9._-]+$ ]] || die "version '$version': use letters, digits, '.', '_', '-'"
    [ -f "$model" ] || die "no such model file: $model"
    [ -f "$config" ] || die "no such config file: $config"
    dir=$root/releases/$version
    [ -e "$dir" ] && die "release $version exists ($dir); pick a new version"
    mkdir -p "$root/releases"
    tmp=$(mktemp -d "$root/releases/.new-$version.XXXX")
    trap 'rm -rf "$tmp"' EXIT
    ln "$model" "$tmp/model.gguf" 2>/dev/null || cp --reflink=auto "$model" "$tmp/model.gguf"
    sha=$(sha256sum "$tmp/model.gguf" | cut -d' ' -f1)
    effective=$("$kvserve" serve --config "$config" --model.path "$dir/model.gguf" --model.sha256 "$sha" --print-config) ||
      die "the configuration does not load (see above); nothing changed"
    # --print-config redacts keys ("<N keys>"): inline keys cannot be frozen.
    grep -q '"api_keys": "<[1-9]' <<<"$effective" && die "inline server.api_keys would not survive; use server.api_key_file"
    effective=${effective/\"api_keys\": \"<0 keys>\"/\"api_keys\": []}
    printf '# release %s, made %s from %s\n%s\n' "$version" "$(date -u +%FT%TZ)" "$config" "$effective" >"$tmp/serve.yaml"
    mv -T "$tmp" "$dir"
    trap - EXIT
    old=$(release_of current)
    log "release $version: model sha256 $sha; current ${old:-none} -> $version"
    switch_to "$version" "$old"
    if restart_and_wait "$version"; then
      log "release $version is serving"
      exit 0
    fi
    if [ -n "$old" ]; then
      log "release $version did not become ready within ${timeout_s}s: rolling back to $old"
      switch_to "$old" "$version"
      restart_and_wait "$old" || die "rollback to $old did not become ready either"
      die "release $version failed; $old is serving again"
    fi
    die "release $version did not become ready within ${timeout_s}s (no previous release to go back to)"
    ;;
  rollback)
    cur=$(release_of current) prev=$(release_of previous)
    [ -n "$prev" ] || die "no previous release to roll back to"
    log "rollback: $cur -> $prev"
    switch_to "$prev" "$cur"
    restart_and_wait "$prev" || die "release $prev did not become ready within ${timeout_s}s"
    log "release $prev is serving"
    ;;
  status)
    echo "current:  $(release_of current)"
    echo "previous: $(release_of previous)"
    for d in "$root"/releases/*/; do
      [ -d "$d" ] && echo "release $(basename "$d"): sha256 $(release_field "$d" sha256)"
    done
    ;;
  *)
    die "usage: rollout.sh [--root DIR] deploy VERSION MODEL.gguf CONFIG.yaml | rollback | status"
    ;;
esac
