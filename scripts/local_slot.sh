#!/usr/bin/env bash
# A stand-in for systemd's kvserve@SLOT unit on a machine (or in a test)
# without systemd: what bluegreen.sh's KVSERVE_SLOT_START_CMD,
# KVSERVE_SLOT_STOP_CMD and KVSERVE_SLOT_STATUS_CMD run.
#
#   scripts/local_slot.sh start|stop|alive
#
# With KVSERVE_SLOT (blue|green) and KVSERVE_SLOT_CONFIG set by bluegreen.sh,
# and KVSERVE_LOCAL_DIR (where SLOT.pid and SLOT.log go) and KVSERVE_BIN by
# the caller. start: stops a running one, then `kvserve serve --config
# KVSERVE_SLOT_CONFIG` in the background; stop: SIGTERM and wait until the
# process has exited (it drains its open requests first); alive: whether it
# runs. Used by scripts/drill.sh and tests/ops/bluegreen_test.sh.
set -euo pipefail
: "${KVSERVE_SLOT:?}" "${KVSERVE_LOCAL_DIR:?}"
pidfile=$KVSERVE_LOCAL_DIR/$KVSERVE_SLOT.pid
case "${1:-}" in
  alive) [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; exit ;;
  start | stop) ;;
  *) echo "usage: local_slot.sh start|stop|alive" >&2; exit 2 ;;
esac
if [ -f "$pidfile" ]; then
  pid=$(cat "$pidfile")
  kill -TERM "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  rm -f "$pidfile"
fi
[ "$1" = stop ] && exit 0
: "${KVSERVE_BIN:?}" "${KVSERVE_SLOT_CONFIG:?}"
nohup "$KVSERVE_BIN" serve --config "$KVSERVE_SLOT_CONFIG" >>"$KVSERVE_LOCAL_DIR/$KVSERVE_SLOT.log" 2>&1 &
echo $! >"$pidfile"
