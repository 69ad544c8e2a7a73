#!/usr/bin/env bash
# Installs everything kvserve needs to build, run and test on Debian 12.
# Idempotent: installs only what is missing. Run as root (or with sudo).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libboost-dev libboost-system-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev
  libspdlog-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev libxxhash-dev libssl-dev libvalijson-dev
  clang libclang-rt-14-dev lld
  python3 python3-numpy python3-yaml
  redis-server
  nodejs npm curl
  chromium
  prometheus systemd
  libnss-wrapper
  libopenmpi-dev openmpi-bin
)
if [ "${KVSERVE_WITH_TORCH:-0}" = 1 ]; then
  APT_PACKAGES+=(python3-torch libopenblas0-pthread)
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  # nodejs/npm may come from elsewhere (a newer node on PATH is fine).
  if [ "$p" = nodejs ] && command -v node >/dev/null 2>&1; then continue; fi
  if [ "$p" = npm ] && command -v npm >/dev/null 2>&1; then continue; fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# npm packages used as test oracles (openai client, HF jinja/tokenizers,
# playwright-core driving Debian's chromium for the HTML report test).
if [ -f tests/oracles/package.json ]; then
  if [ ! -d tests/oracles/node_modules ] || [ tests/oracles/package.json -nt tests/oracles/node_modules ]; then
    echo "setup: installing npm test oracles" >&2
    (cd tests/oracles && npm install --no-audit --no-fund --loglevel=error >/dev/null)
    touch tests/oracles/node_modules
  fi
fi
echo "setup: ok" >&2
