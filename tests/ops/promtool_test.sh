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
  # Absolute (an alert in a pager or a chat message has no base to resolve a
  # relative link against), into docs/operations.md.
  case "$u" in
    https://*/docs/operations.md#*) ;;
    *) echo "FAIL: runbook_url $u is not an absolute link into docs/operations.md"; missing=1; continue ;;
  esac
  if ! grep -qx "${u#*/docs/operations.md#}" <<<"$anchors"; then
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
# scripts/alerts.sh: the same rules with the links on another base.
moved=$(mktemp)
trap 'rm -f "$moved"' EXIT
bash "$src/scripts/alerts.sh" https://wiki.example.com/kvserve/ops > "$moved"
promtool check rules "$moved" >/dev/null
if grep -E 'runbook_url:' "$moved" | grep -vqE 'runbook_url: https://wiki\.example\.com/kvserve/ops#[a-z0-9-]+$'; then
  echo "FAIL: scripts/alerts.sh left a runbook_url on the old base"
  missing=1
fi
if [ "$(grep -c runbook_url: "$moved")" != "$(grep -c runbook_url: alerts.yaml)" ]; then
  echo "FAIL: scripts/alerts.sh lost runbook links"
  missing=1
fi
if bash "$src/scripts/alerts.sh" not-a-url >/dev/null 2>&1; then
  echo "FAIL: scripts/alerts.sh accepted a base that is not a URL"
  missing=1
fi
[ "$missing" = 0 ] || exit 1
echo "promtool: $alerts alert rules checked and unit-tested; runbooks: $(wc -w <<<"$urls") anchors found"
