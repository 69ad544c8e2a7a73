#!/usr/bin/env bash
# Writes deploy/prometheus/alerts.yaml with its runbook links pointing at
# another copy of docs/operations.md (an internal wiki, a mirror, a fork):
#   scripts/alerts.sh https://wiki.example.com/kvserve/operations > alerts.yaml
# BASE replaces everything before the '#' of each runbook_url. The output is
# what `promtool check rules` and Prometheus load.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 1 ] || [[ "$1" != http://* && "$1" != https://* ]]; then
  echo "usage: scripts/alerts.sh BASE_URL   (e.g. https://wiki.example.com/kvserve/operations)" >&2
  exit 2
fi
base=${1%/}
sed -E "s|^( *runbook_url: *)[^#]*#|\\1${base//|/\\|}#|" deploy/prometheus/alerts.yaml
