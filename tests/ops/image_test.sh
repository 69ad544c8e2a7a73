#!/usr/bin/env bash
# The container image's recipe (Dockerfile), checked without a container
# engine (CI has none):
#   1. every COPY source exists in the repository and is not excluded by
#      .dockerignore; the stages are a Debian 12 build and a slim runtime;
#   2. the build stage's commands run in a fresh root holding only what the
#      Dockerfile copies: cmake configures there with the same options (a
#      file the build needs but the image does not copy fails here);
#   3. the runtime stage's packages provide every shared library the built
#      kvserve links (its ldd, mapped to Debian packages with dpkg -S), and
#      exist in Debian's archive;
#   4. it runs as a non-root user; the CMD parses (`kvserve serve ...
#      --print-config`, the model path mapped to the repository's), its
#      port is EXPOSEd and the HEALTHCHECK probes that port's /health;
#   5. the Kubernetes manifests use the tag scripts/image.sh builds.
# Skips (77) without dpkg, and under sanitizers (the Release stage runs it).
set -euo pipefail
src=${KVSERVE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=${KVSERVE_BIN:-}
if [ -n "${KVSERVE_SANITIZED:-}" ]; then echo "SKIP: the image recipe checks nothing more under sanitizers (ops label)"; exit 77; fi
command -v dpkg >/dev/null || { echo "SKIP: dpkg not found"; exit 77; }
[ -x "$bin" ] || { echo "FAIL: KVSERVE_BIN (${bin:-not set}) is not a kvserve binary (run through ctest)"; exit 1; }
df=$src/Dockerfile
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Logical lines (continuations joined).
sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$df" | grep -v '^\s*#' >"$tmp/lines"

# 1. Stages and COPY sources.
grep -qE '^FROM debian:12 AS build$' "$tmp/lines" || fail "the build stage is not FROM debian:12 AS build"
grep -qE '^FROM debian:12-slim$' "$tmp/lines" || fail "the runtime stage is not FROM debian:12-slim"
copies=0
while read -r _ a b; do
  [[ "$a" == --from=* ]] && continue
  [ -e "$src/$a" ] || fail "COPY $a: no such path in the repository"
  while read -r pat; do
    [[ -z "$pat" || "$pat" == \#* ]] && continue
    [[ "$a" == "$pat" || "$a" == "$pat"/* ]] && fail "COPY $a is excluded by .dockerignore ($pat)"
  done <"$src/.dockerignore"
  copies=$((copies + 1))
done < <(grep -E '^COPY ' "$tmp/lines")
echo "ok: $copies COPY sources exist and are in the build context"

# 2. The build stage's configure, in a fresh root with only the copied paths.
root=$tmp/root
mkdir -p "$root"
# What the build context leaves out (.dockerignore) is left out here too: the
# npm oracles' node_modules alone is ~95 MB under tests/.
excludes=()
while read -r pat; do
  [[ -z "$pat" || "$pat" == \#* ]] && continue
  excludes+=("--exclude=${pat#\*\*/}")
done <"$src/.dockerignore"
awk '/^FROM debian:12 AS build/{b=1} /^FROM debian:12-slim/{b=0} b && /^COPY /' "$tmp/lines" | while read -r _ a b; do
  tar -C "$src" "${excludes[@]}" -cf - "$a" | tar -C "$root" -xf -
done
configure=$(awk '/^FROM debian:12 AS build/{b=1} /^FROM debian:12-slim/{b=0} b && /^RUN cmake /' "$tmp/lines" |
  sed -E 's/^RUN //; s/ && cmake --build .*//')
[ -n "$configure" ] || fail "no cmake configure in the build stage"
grep -q -- '--target kvserve' "$tmp/lines" || fail "the build stage does not build the kvserve target"
(cd "$root" && eval "${configure/cmake /cmake -DCMAKE_CXX_COMPILER_LAUNCHER= }" >"$tmp/configure.log" 2>&1) ||
  { tail -20 "$tmp/configure.log"; fail "the build stage's configure fails on the copied files alone"; }
# Listed into a file first: `grep -q` on the pipe would exit at the first
# match and, under pipefail, ninja's SIGPIPE would fail the check.
ninja -C "$root/build" -t targets all >"$tmp/targets.txt" 2>&1 || fail "ninja cannot list the targets: $(tail -5 "$tmp/targets.txt")"
grep -q '^kvserve:' "$tmp/targets.txt" || fail "no kvserve target after the build stage's configure"
echo "ok: the build stage configures from the copied files ($configure)"

# 3. Runtime packages cover kvserve's shared libraries.
runtime_pkgs=$(awk '/^FROM debian:12-slim/{r=1} r && /apt-get install/' "$tmp/lines" |
  sed -E 's/.*--no-install-recommends//; s/&&.*//' | tr ' ' '\n' | grep -E '^[a-z0-9][a-z0-9.+-]+$' | sort -u)
[ -n "$runtime_pkgs" ] || fail "no apt-get install in the runtime stage"
# dpkg knows a file by the path its package ships (/lib or /usr/lib: merged
# /usr), so each library is looked up under every name it has, all in one
# dpkg call (one call per name took ~15 s of the test).
declare -A names=()
mapfile -t linked < <(ldd "$bin" | awk '/=>/ {print $3}')
for lib in "${linked[@]}"; do
  real=$(readlink -f "$lib")
  names[$lib]="$lib $real ${lib/#\/lib\//\/usr\/lib\/} ${lib/#\/usr\/lib\//\/lib\/} ${real/#\/usr\/lib\//\/lib\/} ${real/#\/lib\//\/usr\/lib\/}"
done
# shellcheck disable=SC2046  # word splitting intended: every name is a path without spaces
dpkg -S $(printf '%s\n' "${names[@]}" | tr ' ' '\n' | sort -u) >"$tmp/owners.txt" 2>/dev/null || true
# Lines "pkg[:arch][, pkg2...]: /path": the first package owns the path.
declare -A owner=()
while read -r pkgs path; do
  owner[$path]=${pkgs%%[:,]*}
done <"$tmp/owners.txt"
libs=0
for lib in "${linked[@]}"; do
  pkg=""
  for f in ${names[$lib]}; do
    pkg=${owner[$f]:-}
    [ -n "$pkg" ] && break
  done
  [ -n "$pkg" ] || fail "$lib belongs to no Debian package"
  case "$pkg" in libc6|libstdc++6|libgcc-s1) continue ;; esac  # in every Debian image
  grep -qx "$pkg" <<<"$runtime_pkgs" || fail "kvserve links $lib ($pkg), which the runtime stage does not install"
  libs=$((libs + 1))
done
# One apt-cache call for all (each call parses the whole cache: ~1 s). It
# skips an unknown name without an error when others are found, so the
# records it prints are matched against the list.
# shellcheck disable=SC2086
apt-cache show $runtime_pkgs 2>/dev/null | awk '/^Package: /{print $2}' | sort -u >"$tmp/known.txt"
for p in $runtime_pkgs; do
  grep -qx "$p" "$tmp/known.txt" || fail "runtime package $p is not in Debian's archive"
done
echo "ok: the runtime stage installs the packages of kvserve's $libs non-base libraries"

# 4. User, command, port, health check.
grep -qE '^USER kvserve$' "$tmp/lines" || fail "the image does not run as the kvserve user"
grep -qE 'useradd .*kvserve' "$tmp/lines" || fail "the kvserve user is not created"
cmd=$(grep -E '^CMD ' "$tmp/lines" | sed -E 's/^CMD //')
mapfile -t argv < <(/usr/bin/python3 -c 'import json,sys; print("\n".join(json.loads(sys.argv[1])))' "$cmd")
[ "${argv[0]}" = serve ] || fail "CMD does not run kvserve serve"
args=()
for a in "${argv[@]}"; do args+=("${a/\/models\/kvserve-tiny.gguf/$src/models/kvserve-tiny.gguf}"); done
"$bin" "${args[@]}" --print-config >"$tmp/config.json" || fail "the image's CMD does not parse: ${argv[*]}"
port=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["server"]["port"])' "$tmp/config.json")
grep -qE "^EXPOSE $port$" "$tmp/lines" || fail "the CMD's port $port is not EXPOSEd"
grep -qE "^HEALTHCHECK .*http://127\.0\.0\.1:$port/health" "$tmp/lines" || fail "the HEALTHCHECK does not probe :$port/health"
grep -qE '^COPY models/kvserve-tiny.gguf /models/kvserve-tiny.gguf$' "$tmp/lines" || fail "the bundled model is not in the image"
echo "ok: non-root user, CMD parses (port $port), EXPOSE and HEALTHCHECK agree"

# 5. The manifests run the image scripts/image.sh builds.
tag=$(sed -n 's/^tag=\${1:-\(.*\)}$/\1/p' "$src/scripts/image.sh")
[ -n "$tag" ] || fail "scripts/image.sh names no default tag"
images=$(grep -hE '^\s+image: kvserve' "$src"/deploy/kubernetes/*.yaml | sed -E 's/.*image: //' | sort -u)
[ "$images" = "$tag" ] || fail "deploy/kubernetes uses $images, scripts/image.sh builds $tag"
echo "image: Dockerfile checked; tag $tag"
