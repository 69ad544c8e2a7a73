# shellcheck shell=bash
# Versioned releases of `kvserve serve`, shared by scripts/rollout.sh (one
# server, restarted) and scripts/bluegreen.sh (two slots behind the gateway).
# Sourced, not run. The caller sets $root (the release root), $kvserve (the
# binary) and defines die() and log().
#
# A release is a directory $root/releases/VERSION holding
#   model.gguf   the weights (hard link, or a copy)
#   serve.yaml   the effective configuration, frozen: CONFIG with
#                model.path = this release's model and model.sha256 = its
#                hash (kvserve refuses to start on a different file)
# and is never modified once made: rolling back to it restarts exactly it.

# The name of the release a link under $root points to ("" when none).
release_of() { [ -L "$root/$1" ] && basename "$(readlink "$root/$1")" || true; }

# A field of a release's effective configuration: host, port or sha256.
release_field() {  # DIR FIELD
  "$kvserve" serve --config "$1/serve.yaml" --print-config |
    /usr/bin/python3 -c 'import json,sys; c=json.load(sys.stdin); f=sys.argv[1]
print(c["model"]["sha256"] if f=="sha256" else c["server"][f])' "$2"
}

# Makes $root/releases/VERSION from MODEL and CONFIG (plus `kvserve serve`
# overrides such as --server.port 8001), or dies without leaving anything
# behind when the version is taken or the configuration does not load.
make_release() {  # VERSION MODEL CONFIG [--section.key VALUE ...]
  local version=$1 model=$2 config=$3 dir tmp sha effective
  shift 3
  [[ "$version" =~ ^[A-Za-z0-9._-]+$ ]] || die "version '$version': use letters, digits, '.', '_', '-'"
  [ -f "$model" ] || die "no such model file: $model"
  [ -f "$config" ] || die "no such config file: $config"
  dir=$root/releases/$version
  [ -e "$dir" ] && die "release $version exists ($dir); pick a new version"
  mkdir -p "$root/releases"
  tmp=$(mktemp -d "$root/releases/.new-$version.XXXX")
  # Removed on any failure below (die exits the script).
  trap 'rm -rf "'"$tmp"'"' EXIT
  ln "$model" "$tmp/model.gguf" 2>/dev/null || cp --reflink=auto "$model" "$tmp/model.gguf"
  sha=$(sha256sum "$tmp/model.gguf" | cut -d' ' -f1)
  effective=$("$kvserve" serve --config "$config" "$@" --model.path "$dir/model.gguf" --model.sha256 "$sha" --print-config) ||
    die "the configuration does not load (see above); nothing changed"
  # --print-config redacts keys ("<N keys>"): inline keys cannot be frozen.
  grep -q '"api_keys": "<[1-9]' <<<"$effective" && die "inline server.api_keys would not survive; use server.api_key_file"
  effective=${effective/\"api_keys\": \"<0 keys>\"/\"api_keys\": []}
  printf '# release %s, made %s from %s\n%s\n' "$version" "$(date -u +%FT%TZ)" "$config" "$effective" >"$tmp/serve.yaml"
  mv -T "$tmp" "$dir"
  trap - EXIT
  log "release $version: model sha256 $sha"
}

# 0 once the server at HOST:PORT is ready and serves the model SHA256
# (kvserve:model_info on /metrics); 1 after TIMEOUT seconds.
wait_for_server() {  # HOST PORT SHA256 TIMEOUT
  local host=$1 port=$2 sha=$3 deadline
  [ "$host" = 0.0.0.0 ] && host=127.0.0.1
  deadline=$(( $(date +%s) + $4 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if curl -fsS -o /dev/null "http://$host:$port/ready" 2>/dev/null &&
       curl -fsS "http://$host:$port/metrics" 2>/dev/null | grep -q "^kvserve:model_info{.*sha256=\"$sha\"} 1$"; then
      return 0
    fi
    sleep 0.2
  done
  return 1
}

# wait_for_server for the address and model a release's configuration names.
wait_for_release() {  # DIR TIMEOUT
  wait_for_server "$(release_field "$1" host)" "$(release_field "$1" port)" "$(release_field "$1" sha256)" "$2"
}
