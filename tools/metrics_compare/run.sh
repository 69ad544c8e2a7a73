#!/usr/bin/env bash
# Builds and runs the registry comparison (docs/metrics.md, "Why a
# hand-written registry"). Needs Debian's prometheus-cpp-dev; 2 threads max.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
g++ -std=c++20 -O2 -DNDEBUG -Isrc tools/metrics_compare/compare.cc src/metrics/metrics.cc src/base/status.cc \
  -lprometheus-cpp-core -lfmt -lspdlog -lpthread -o "$out/compare"
"$out/compare"
# Binary cost: a minimal program exposing one counter with each library.
cat > "$out/mine.cc" <<'CC'
#include "metrics/metrics.h"
#include <cstdio>
int main() { kvs::metrics::Registry r; r.Counter0("c", "h").Inc(); std::puts(r.Render().c_str()); }
CC
cat > "$out/theirs.cc" <<'CC'
#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <cstdio>
int main() { prometheus::Registry r; prometheus::BuildCounter().Name("c").Help("h").Register(r).Add({}).Increment();
  std::puts(prometheus::TextSerializer().Serialize(r.Collect()).c_str()); }
CC
g++ -std=c++20 -O2 -Isrc "$out/mine.cc" src/metrics/metrics.cc src/base/status.cc -lfmt -lspdlog -o "$out/mine"
g++ -std=c++20 -O2 "$out/theirs.cc" -lprometheus-cpp-core -o "$out/theirs"
strip "$out/mine" "$out/theirs"
echo "stripped binary, one counter: kvserve registry $(stat -c %s "$out/mine") bytes (+ fmt, already linked by kvserve);" \
  "prometheus-cpp $(stat -c %s "$out/theirs") bytes + libprometheus-cpp-core.so $(stat -L -c %s /usr/lib/x86_64-linux-gnu/libprometheus-cpp-core.so) bytes"
rm -rf "$out"
