#!/usr/bin/env bash
# Builds kvserve's container image (Dockerfile) with docker or podman:
#   scripts/image.sh [TAG]     # default kvserve:0.1.0 (deploy/kubernetes uses it)
# KVSERVE_CONTAINER_ENGINE=podman|docker picks one; otherwise the first found.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-kvserve:0.1.0}
engine=${KVSERVE_CONTAINER_ENGINE:-}
if [ -z "$engine" ]; then
  for e in docker podman; do
    if command -v "$e" >/dev/null; then engine=$e; break; fi
  done
fi
[ -n "$engine" ] || { echo "image: neither docker nor podman is installed (apt-get install podman)" >&2; exit 1; }
[ -f models/kvserve-tiny.gguf ] || { echo "image: models/kvserve-tiny.gguf is missing from this checkout" >&2; exit 1; }
echo "image: building $tag with $engine" >&2
"$engine" build -t "$tag" -f Dockerfile .
echo "image: $tag built; run it with: $engine run --rm -p 8000:8000 $tag" >&2
