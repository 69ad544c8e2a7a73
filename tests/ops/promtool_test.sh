#!/usr/bin/env bash
# The alert rules and the example Prometheus configuration, checked by the
# tool that consumes them (Debian's promtool): syntax (check rules / check
# config), behaviour (test rules: deploy/prometheus/alerts_test.yaml), and
# every alert's runbook_url points at a heading of docs/operations.md.
# Exits 77 (skipped) without promtool.
set -euo pipefail
src=${KVSERVE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
if ! command -v promtool >/dev/null; then
  echo "SKIP: promtool not found (scripts/setup.sh installs Debian's prometheus)"
  exit 77
fi
cd "$src/deploy/prometheus"
promtool check rules alerts.yaml
promtool check config prometheus.yml
promtool test rules alerts_test.yaml

# Runbook anchors: GitHub's heading ids (lower case, spaces to '-', other
# punctuation dropped).
anchors=$(grep -E '^#{1,6} ' "$src/docs/operations.md" | sed -E 's/^#+ +//' | tr 'A-Z' 'a-z' |
  sed -E 's/[^a-z0-9 _-]//g; s/ /-/g')
alerts=$(grep -cE '^ *- alert:' alerts.yaml)
urls=$(grep -E 'runbook_url:' alerts.yaml | sed -E 's/.*runbook_url: *//' | sort -u)
missing=0
for u in $urls; do
  case "$u" in
    docs/operations.md#*) ;;
    *) echo "FAIL: runbook_url $u does not point into docs/operations.md"; missing=1; continue ;;
  esac
  if ! grep -qx "${u#docs/operations.md#}" <<<"$anchors"; then
    echo "FAIL: docs/operations.md has no heading for $u"
    missing=1
  fi
done
# Each alert rule has a runbook (the TTFT rules share theirs through a YAML anchor).
with_runbook=$(awk '/^ *- alert:/{a=1} a&&/runbook_url:|annotations: \*/{n++; a=0} END{print n}' alerts.yaml)
if [ "$with_runbook" != "$alerts" ]; then
  echo "FAIL: $alerts alert rules but $with_runbook with a runbook_url"
  missing=1
fi
[ "$missing" = 0 ] || exit 1
echo "promtool: $alerts alert rules checked and unit-tested; runbooks: $(wc -w <<<"$urls") anchors found"
