# shellcheck shell=bash
# Versioned releases of `kvserve serve`, shared by scripts/rollout.sh (one
# server, restarted) and scripts/bluegreen.sh (two slots behind the gateway).
# Sourced, not run. The caller sets $root (the release root), $kvserve (the
# binary), $serving_release (the directory of the release serving now, or
# "") and defines die() and log().
#
# A release is a directory $root/releases/VERSION holding
#   model.gguf   the weights (hard link, or a copy)
#   serve.yaml   the effective configuration, frozen: CONFIG with
#                model.path = this release's model and model.sha256 = its
#                hash (kvserve refuses to start on a different file)
# and is never modified once made: rolling back to it restarts exactly it.

# The name of the release a link under $root points to ("" when none).
release_of() { [ -L "$root/$1" ] && basename "$(readlink "$root/$1")" || true; }

# A field of an effective configuration (`kvserve serve --print-config` on
# stdin): host, port, sha256, or a dotted key such as model.name.
config_field() {  # FIELD
  /usr/bin/python3 -c 'import json,sys; c=json.load(sys.stdin); f=sys.argv[1]
path={"host":"server.host","port":"server.port","sha256":"model.sha256"}.get(f,f)
for k in path.split("."): c=c[k]
print(c)' "$1"
}

# A field of a release's effective configuration.
release_field() {  # DIR FIELD
  "$kvserve" serve --config "$1/serve.yaml" --print-config | config_field "$2"
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
  # Readable by the service user (kvserve.service runs as User=kvserve, the
  # script as root): directories 0755, files 0644, whatever the umask.
  chmod 0755 "$root" "$root/releases" 2>/dev/null || true
  tmp=$(mktemp -d "$root/releases/.new-$version.XXXX")
  # Removed on any failure below (die exits the script).
  trap 'rm -rf "'"$tmp"'"' EXIT
  chmod 0755 "$tmp"
  ln "$model" "$tmp/model.gguf" 2>/dev/null || true
  if [ ! -f "$tmp/model.gguf" ] || [ "$(stat -L -c %A "$tmp/model.gguf" | cut -c8)" != r ]; then
    # No hard link, or the file is not readable by others: a copy of our own.
    rm -f "$tmp/model.gguf"
    cp --reflink=auto "$model" "$tmp/model.gguf"
    chmod 0644 "$tmp/model.gguf"
  fi
  sha=$(sha256sum "$tmp/model.gguf" | cut -d' ' -f1)
  effective=$("$kvserve" serve --config "$config" "$@" --model.path "$dir/model.gguf" --model.sha256 "$sha" --print-config) ||
    die "the configuration does not load (see above); nothing changed"
  # The served model id is what clients send: it must not change with the
  # release's file name (model.path is now .../model.gguf, whose default id
  # would be "model"). Pinned to the configuration's model.name, else the
  # serving release's ($serving_release: a release directory the caller
  # names), else the given file's name.
  name=$(config_field model.name <<<"$effective")
  if [ -z "$name" ]; then
    if [ -n "${serving_release:-}" ] && [ -f "$serving_release/serve.yaml" ]; then
      name=$(release_field "$serving_release" model.name)
    fi
    [ -n "$name" ] || name=$(basename "$model" .gguf)
    effective=$("$kvserve" serve --config "$config" "$@" --model.path "$dir/model.gguf" --model.sha256 "$sha" \
      --model.name "$name" --print-config) || die "the configuration does not load (see above); nothing changed"
  fi
  # --print-config redacts keys ("<N keys>"): inline keys cannot be frozen.
  grep -q '"api_keys": "<[1-9]' <<<"$effective" && die "inline server.api_keys would not survive; use server.api_key_file"
  effective=${effective/\"api_keys\": \"<0 keys>\"/\"api_keys\": []}
  printf '# release %s, made %s from %s\n%s\n' "$version" "$(date -u +%FT%TZ)" "$config" "$effective" >"$tmp/serve.yaml"
  chmod 0644 "$tmp/serve.yaml"
  mv -T "$tmp" "$dir"
  trap - EXIT
  log "release $version: model sha256 $sha, served as \"$name\""
}

# 0 once the server at HOST:PORT is ready and serves the model SHA256
# (kvserve:model_info on /metrics); 1 after TIMEOUT seconds, or as soon as
# ALIVE (a command: is the process up? e.g. `systemctl is-active --quiet
# kvserve`) has failed for 2 seconds in a row: a process that died at start
# or is crash-looping is noticed in seconds, not after the whole timeout.
wait_for_server() {  # HOST PORT SHA256 TIMEOUT [ALIVE]
  local host=$1 port=$2 sha=$3 alive=${5:-} deadline down=0
  [ "$host" = 0.0.0.0 ] && host=127.0.0.1
  deadline=$(( $(date +%s) + $4 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if curl -fsS -o /dev/null "http://$host:$port/ready" 2>/dev/null &&
       curl -fsS "http://$host:$port/metrics" 2>/dev/null | grep "^kvserve:model_info{.*sha256=\"$sha\"} 1$" >/dev/null; then
      return 0
    fi
    if [ -n "$alive" ] && ! bash -c "$alive" >/dev/null 2>&1; then
      down=$((down + 1))
      if [ "$down" -ge 10 ]; then
        log "the server process is not running (\`$alive\` failed for 2 s): it exited or is restarting in a loop"
        return 1
      fi
    else
      down=0
    fi
    sleep 0.2
  done
  return 1
}

# wait_for_server for the address and model a release's configuration names.
wait_for_release() {  # DIR TIMEOUT [ALIVE]
  wait_for_server "$(release_field "$1" host)" "$(release_field "$1" port)" "$(release_field "$1" sha256)" "$2" "${3:-}"
}
