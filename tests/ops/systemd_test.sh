#!/usr/bin/env bash
# deploy/systemd/kvserve.service and the blue/green slot template
# kvserve@.service (as the instance kvserve@blue) checked by
# `systemd-analyze verify` (as
# installed: a copy whose ExecStart names the built binary, since verify
# requires the executable to exist, and whose EnvironmentFile is the shipped
# kvserve.env), then run the same check on a unit with a deliberate error
# (verify must fail), and check that the environment file names a config the
# unit's ExecStart uses and that TimeoutStopSec exceeds the drain timeout
# the shipped replica configs use. Exits 77 without systemd-analyze.
set -euo pipefail
src=${KVSERVE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=${KVSERVE_BIN:-}  # the build tree's kvserve, from ctest: never a guessed path
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze not found (Debian's systemd package)"
  exit 77
fi
[ -x "$bin" ] || { echo "FAIL: KVSERVE_BIN (${bin:-not set}) is not a kvserve binary (run through ctest)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# verify_installed UNIT_FILE AS ENV_PATH ENV_FILE: the unit as installed
# (the binary and environment file paths pointed at this tree's) must pass
# `systemd-analyze verify` without a word: warnings count as failures too
# (verify exits 0 on some of them).
verify_installed() {
  local out
  sed -e "s|/usr/local/bin/kvserve|$bin|" -e "s|$3|$4|" "$1" >"$tmp/$2"
  out=$(SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --man=no "$tmp/$2" 2>&1) || { echo "$out"; echo "FAIL: verify $2"; exit 1; }
  if grep -v -E "^$" <<<"$out" | grep -q .; then echo "$out"; echo "FAIL: systemd-analyze verify printed warnings ($2)"; exit 1; fi
}
unit=$src/deploy/systemd/kvserve.service
verify_installed "$unit" kvserve.service /etc/default/kvserve "$src/deploy/systemd/kvserve.env"
echo "systemd-analyze verify: kvserve.service clean"

# A unit with a typo'd directive and a relative ExecStart must be refused.
sed -e 's/^Restart=on-failure/Restart=sometimes/' -e "s|^ExecStart=$bin|ExecStart=kvserve-relative|" "$tmp/kvserve.service" >"$tmp/broken.service"
if SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --man=no "$tmp/broken.service" >"$tmp/broken.log" 2>&1 &&
   ! grep -q -i -E "failed|invalid|not executable|no such" "$tmp/broken.log"; then
  cat "$tmp/broken.log"; echo "FAIL: a broken unit passed verify"; exit 1
fi
echo "systemd-analyze verify: a broken unit is refused ($(head -1 "$tmp/broken.log"))"

# Coherence with the rest of the deployment.
grep -q '^KVSERVE_CONFIG=/var/lib/kvserve/current/serve.yaml$' "$src/deploy/systemd/kvserve.env"
grep -q 'ExecStart=.* --config \${KVSERVE_CONFIG}' "$unit"
stop=$(sed -n 's/^TimeoutStopSec=//p' "$unit")
drain=$(sed -n 's/^ *drain_timeout_seconds: *//p' "$src/configs/default.yaml" | head -1)
awk -v s="$stop" -v d="$drain" 'BEGIN { exit !(s > d + 5) }' || { echo "FAIL: TimeoutStopSec $stop <= drain $drain + 5"; exit 1; }
echo "unit: TimeoutStopSec $stop s > drain_timeout_seconds $drain s"

# The blue/green slot template, as the instance bluegreen.sh starts.
slot_unit=$src/deploy/systemd/kvserve@.service
verify_installed "$slot_unit" kvserve@blue.service /etc/default/kvserve "$src/deploy/systemd/kvserve.env"
# Coherence with scripts/bluegreen.sh: the slot's release link and unit name.
grep -q 'ExecStart=.* --config /var/lib/kvserve/slots/%i/serve.yaml' "$slot_unit"
grep -q 'relink "slots/$idle"' "$src/scripts/bluegreen.sh"
grep -q "kvserve@\$KVSERVE_SLOT" "$src/scripts/bluegreen.sh"
stop=$(sed -n 's/^TimeoutStopSec=//p' "$slot_unit")
awk -v s="$stop" -v d="$drain" 'BEGIN { exit !(s > d + 5) }' || { echo "FAIL: kvserve@: TimeoutStopSec $stop <= drain $drain + 5"; exit 1; }
echo "systemd-analyze verify: kvserve@blue.service clean; TimeoutStopSec $stop s"

# The gateway's unit (bluegreen.sh reloads it), as installed.
gw_unit=$src/deploy/systemd/kvserve-gateway.service
verify_installed "$gw_unit" kvserve-gateway.service /etc/default/kvserve-gateway "$src/deploy/systemd/kvserve-gateway.env"
grep -q '^ExecReload=/bin/kill -HUP \$MAINPID$' "$gw_unit"
grep -q 'ExecStart=.* gateway --config \${KVSERVE_GATEWAY_CONFIG}' "$gw_unit"
grep -q "systemctl reload kvserve-gateway" "$src/scripts/bluegreen.sh"
# The environment file's config and arguments are what `kvserve gateway` accepts.
cfg=$(sed -n 's/^KVSERVE_GATEWAY_CONFIG=//p' "$src/deploy/systemd/kvserve-gateway.env")
args=$(sed -n 's/^KVSERVE_GATEWAY_ARGS=//p' "$src/deploy/systemd/kvserve-gateway.env")
[ "$cfg" = /etc/kvserve/gateway.yaml ] || { echo "FAIL: KVSERVE_GATEWAY_CONFIG is $cfg"; exit 1; }
# shellcheck disable=SC2086
"$bin" gateway --config "$src/configs/gateway.yaml" $args --print-config >/dev/null ||
  { echo "FAIL: kvserve gateway refuses the unit's arguments ($args)"; exit 1; }
stop=$(sed -n 's/^TimeoutStopSec=//p' "$gw_unit")
gdrain=$(sed -n 's/^ *drain_timeout_seconds: *//p' "$src/configs/gateway.yaml" | head -1)
awk -v s="$stop" -v d="$gdrain" 'BEGIN { exit !(s > d + 5) }' || { echo "FAIL: kvserve-gateway: TimeoutStopSec $stop <= drain $gdrain + 5"; exit 1; }
echo "systemd-analyze verify: kvserve-gateway.service clean; TimeoutStopSec $stop s"
