#!/usr/bin/env bash
# Versioned rollout and rollback of `kvserve serve` on one machine.
#
#   scripts/rollout.sh [--root DIR] deploy VERSION MODEL.gguf CONFIG.yaml
#   scripts/rollout.sh [--root DIR] rollback
#   scripts/rollout.sh [--root DIR] status
#
# Layout under the root (default /var/lib/kvserve):
#   releases/VERSION/             model.gguf + frozen serve.yaml (release_lib.sh)
#   current -> releases/VERSION   what the server runs (kvserve.service reads
#   previous -> releases/OLD      current/serve.yaml); previous is kept for rollback
#
# deploy: checks the new release before touching anything (the config must
# load: `kvserve serve --print-config`; inline server.api_keys are refused,
# use server.api_key_file; the served model id is pinned to the current
# release's), switches `current` (atomically: a rename), restarts the server
# ($KVSERVE_RESTART_CMD, default `systemctl restart kvserve`: SIGTERM drains
# the old process) and waits until the server is ready and reports the new
# model's SHA-256 (kvserve:model_info on /metrics). If it does not within
# $KVSERVE_ROLLOUT_TIMEOUT seconds (default 300), or the process is down for
# 2 s in a row ($KVSERVE_STATUS_CMD, default `systemctl is-active --quiet
# kvserve`: a model that cannot load exits at once, then crash-loops), it
# rolls back by itself and exits 1. `previous` only ever names a release that
# served: after a failed deploy it still names the one before, never the
# broken release. rollback: swaps current and previous and restarts the
# same way.
# With several replicas behind the gateway, roll them one at a time: the
# gateway takes a draining replica out and re-admits it when /ready passes.
# Without a restart's outage on one machine: scripts/bluegreen.sh.
set -euo pipefail

root=/var/lib/kvserve
if [ "${1:-}" = --root ]; then root=$2; shift 2; fi
kvserve=${KVSERVE_BIN:-$(command -v kvserve || echo /usr/local/bin/kvserve)}
restart_cmd=${KVSERVE_RESTART_CMD:-systemctl restart kvserve}
status_cmd=${KVSERVE_STATUS_CMD:-systemctl is-active --quiet kvserve}
timeout_s=${KVSERVE_ROLLOUT_TIMEOUT:-300}

die() { echo "rollout: $*" >&2; exit 1; }
log() { echo "rollout: $*" >&2; }

# shellcheck source-path=SCRIPTDIR source=release_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/release_lib.sh"

switch_to() {  # NEW_CURRENT NEW_PREVIOUS (release names; previous may be empty)
  ln -sfn "releases/$1" "$root/current.tmp" && mv -T "$root/current.tmp" "$root/current"
  if [ -n "$2" ]; then ln -sfn "releases/$2" "$root/previous.tmp" && mv -T "$root/previous.tmp" "$root/previous"; fi
}

restart_and_wait() {  # RELEASE
  log "restarting: $restart_cmd"
  if ! bash -c "$restart_cmd"; then
    log "the restart command failed"
    return 1
  fi
  wait_for_release "$root/releases/$1" "$timeout_s" "$status_cmd"
}

cmd=${1:-}
case "$cmd" in
  deploy)
    [ $# -eq 4 ] || die "usage: rollout.sh [--root DIR] deploy VERSION MODEL.gguf CONFIG.yaml"
    version=$2
    old=$(release_of current)
    serving_release=${old:+$root/releases/$old}
    make_release "$2" "$3" "$4"
    log "current ${old:-none} -> $version"
    t0=$(date +%s)
    # previous changes only once the new release serves.
    switch_to "$version" ""
    if restart_and_wait "$version"; then
      [ -n "$old" ] && switch_to "$version" "$old"
      log "release $version is serving"
      exit 0
    fi
    if [ -n "$old" ]; then
      log "release $version did not become ready: rolling back to $old"
      switch_to "$old" ""
      restart_and_wait "$old" || die "rollback to $old did not become ready either"
      prev=$(release_of previous)
      die "release $version failed; $old is serving again, $(( $(date +%s) - t0 )) s after the deploy began (previous: ${prev:-none})"
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
