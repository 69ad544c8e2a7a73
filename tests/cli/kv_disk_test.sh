#!/usr/bin/env bash
# The disk tier of the prefix cache (kv_cache.disk), end to end: real
# `kvserve serve` processes (bundled model) over HTTP, one behind a real
# `kvserve gateway`:
#   1. a long prompt is answered; its blocks are written to the disk tier;
#      other prompts then fill the small RAM pool (evicting its blocks) and
#      the prompt again, through the gateway, is answered the same
#      (temperature 0) with tokens restored from disk (hits by tier);
#   2. a restart on the same directory: the first request of the prompt
#      restores it from disk, same answer;
#   3. namespaces: the identical prompt under another cache_salt (a
#      tenant's namespace, as another API key's) gets nothing from disk;
#   4. a flipped byte in every block file: each is dropped as corrupt, never
#      served; the same answer (recomputed), no crash;
#   5. another layout (block size 32) on the same directory: every file is
#      dropped as foreign;
#   6. a full disk (a file size limit): every write fails and is counted;
#      requests are answered as before;
#   7. max_bytes: the files' bytes stay under it, evictions counted;
#   8. cache-aware routing sees the disk: replica g (disk tier) and h (none)
#      in one cache_aware pool; five prompts went to g (the first ones are
#      out of its RAM by then, on its disk); a fresh gateway (no routing
#      record) routes all five to g again, the evicted ones on g's disk
#      index (/v1/cache/blocks: "disk_blocks"), and g restores them;
#   9. read-ahead: g restarted on its directory, the five prompts at once:
#      those that wait in its queue find their blocks read ahead
#      (kv_disk_prefetched_blocks_total{outcome="used"}), same answers.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/serve_util.sh"
bundled_model_test
disk="$dir/kvdisk"

metric() {  # URL NAME -> the sample's value (0 when absent)
  curl -fsS "$1/metrics" | awk -v k="$2" '$1 == k { v = $2 } END { print v + 0 }'
}
complete() {  # URL PROMPT_FILE [CACHE_SALT] -> the completion's text
  local body="$dir/body.$BASHPID.json"  # one per caller: step 9 sends five at once
  /usr/bin/python3 -c 'import json,sys; b = {"model": "kvserve-tiny", "prompt": open(sys.argv[1]).read(),
    "max_tokens": 12, "temperature": 0}
if sys.argv[2]: b["cache_salt"] = sys.argv[2]
print(json.dumps(b))' "$2" "${3:-}" >"$body"
  curl -fsS -H 'content-type: application/json' --data-binary @"$body" "$1/v1/completions" |
    /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])'
}
# Prompts of ~700 tokens (44 blocks of 16); "other" ones share no block with it.
/usr/bin/python3 - "$dir" <<'PY'
import sys
d = sys.argv[1]
names = ["Lily", "Tom", "Sue", "Max", "Ben", "Mia", "Sam", "Zoe", "Tim"]
def story(who, n):
    return " ".join(f"{who} saw a {c} bird in the park and said hello to it number {i}." for i, c in
                    zip(range(n), ["red", "blue", "big", "small", "happy"] * 40)) + f" Then {who}"
open(f"{d}/long.txt", "w").write(story("Lily", 45))
for k, who in enumerate(names[1:]):
    open(f"{d}/other{k}.txt", "w").write(story(who, 45))
PY
# A RAM pool of 128 blocks (2 requests x 1,024 tokens), ~2.9 prompts: the
# other prompts evict the long one's blocks.
ram=(--max-context-length 1024 --max-concurrent-requests 2)
start_server a --model "$model" "${ram[@]}" --kv-disk-path "$disk" --kv-disk-max-bytes 268435456
wait_ready "$a_URL" 60 || fail "server a not ready"
blocks=$(metric "$a_URL" kvserve:kv_cache_blocks)
[ "$blocks" -ge 44 ] && [ "$blocks" -lt 130 ] || fail "the RAM pool has $blocks blocks: the test wants room for 1-2.5 prompts"
one_replica_gateway gw "$a_URL" 1024
# Step 1 goes through the gateway (its requests are in the gateway's
# namespace on the replica); the rest talks to replicas directly.
want=$(complete "$gw_URL" "$dir/long.txt")
[ -n "$want" ] || fail "no completion"
for k in 0 1 2 3; do complete "$gw_URL" "$dir/other$k.txt" >/dev/null; done
for _ in $(seq 50); do [ "$(metric "$a_URL" kvserve:kv_disk_blocks)" -ge 200 ] && break; sleep 0.1; done
[ "$(metric "$a_URL" kvserve:kv_disk_blocks)" -ge 200 ] || fail "the disk tier holds $(metric "$a_URL" kvserve:kv_disk_blocks) blocks after 5 prompts"
disk0=$(metric "$a_URL" 'kvserve:prefix_cache_hit_tokens_by_tier_total{tier="disk"}')
got=$(complete "$gw_URL" "$dir/long.txt")
[ "$got" = "$want" ] || fail "restored from disk: '$got', computed: '$want'"
disk1=$(metric "$a_URL" 'kvserve:prefix_cache_hit_tokens_by_tier_total{tier="disk"}')
[ $((disk1 - disk0)) -ge 600 ] || fail "the evicted prompt got $((disk1 - disk0)) tokens from disk (want >= 600)"
[ "$(metric "$a_URL" kvserve:kv_disk_restored_blocks_total)" -ge 38 ] || fail "restored blocks not counted"
echo "1. evicted from RAM, restored from disk (through the gateway): $((disk1 - disk0)) tokens, same answer"

# 2. A restart (SIGTERM: the writer's queue is written first). The prompt
# once more directly, so its blocks are on disk in the replica's own namespace.
[ "$(complete "$a_URL" "$dir/long.txt")" = "$want" ] || fail "directly and through the gateway, two answers"
sleep 0.5
kill "$a_PID"; wait "$a_PID" 2>/dev/null || true
files=$(find "$disk" -name '*.kvb' | wc -l)
[ "$files" -ge 200 ] || fail "$files block files after the restart"
start_server b --model "$model" "${ram[@]}" --kv-disk-path "$disk" --kv-disk-max-bytes 268435456
wait_ready "$b_URL" 60 || fail "server b not ready"
[ "$(metric "$b_URL" kvserve:kv_disk_blocks)" = "$files" ] || fail "the restarted server indexes $(metric "$b_URL" kvserve:kv_disk_blocks) of $files files"
# 3. The identical prompt in another namespace: nothing from disk.
complete "$b_URL" "$dir/long.txt" tenant-b >/dev/null
[ "$(metric "$b_URL" 'kvserve:prefix_cache_hit_tokens_by_tier_total{tier="disk"}')" = 0 ] ||
  fail "another namespace's prompt was served from the shared namespace's blocks"
got=$(complete "$b_URL" "$dir/long.txt")
[ "$got" = "$want" ] || fail "after a restart: '$got', before: '$want'"
hits=$(metric "$b_URL" 'kvserve:prefix_cache_hit_tokens_by_tier_total{tier="disk"}')
[ "$hits" -ge 600 ] || fail "after a restart the prompt got $hits tokens from disk"
echo "2./3. after a restart: $hits tokens from disk, 0 under another cache_salt"
kill "$b_PID"; wait "$b_PID" 2>/dev/null || true

# 4. Every block file with a flipped byte.
/usr/bin/python3 - "$disk" <<'PY'
import os, sys
for f in os.listdir(sys.argv[1]):
    if f.endswith(".kvb"):
        p = os.path.join(sys.argv[1], f)
        b = bytearray(open(p, "rb").read())
        b[-7] ^= 0x40
        open(p, "wb").write(bytes(b))
PY
start_server c --model "$model" "${ram[@]}" --kv-disk-path "$disk" --kv-disk-max-bytes 268435456
wait_ready "$c_URL" 60 || fail "server c not ready"
got=$(complete "$c_URL" "$dir/long.txt")
[ "$got" = "$want" ] || fail "with corrupt files: '$got', computed: '$want'"
[ "$(metric "$c_URL" 'kvserve:prefix_cache_hit_tokens_by_tier_total{tier="disk"}')" = 0 ] || fail "a corrupt block was served"
[ "$(metric "$c_URL" 'kvserve:kv_disk_dropped_blocks_total{reason="corrupt"}')" -ge 1 ] || fail "the corrupt block was not counted"
echo "4. corrupt files: dropped ($(metric "$c_URL" 'kvserve:kv_disk_dropped_blocks_total{reason="corrupt"}')), recomputed, same answer"
kill "$c_PID"; wait "$c_PID" 2>/dev/null || true

# 5. Another layout on the same directory: every file is foreign.
files=$(find "$disk" -name '*.kvb' | wc -l)
[ "$files" -ge 1 ] || fail "no block files left for the foreign check"
start_server d --model "$model" "${ram[@]}" --block-size 32 --kv-disk-path "$disk" --kv-disk-max-bytes 268435456
wait_ready "$d_URL" 60 || fail "server d not ready"
[ "$(metric "$d_URL" 'kvserve:kv_disk_dropped_blocks_total{reason="foreign"}')" = "$files" ] ||
  fail "$(metric "$d_URL" 'kvserve:kv_disk_dropped_blocks_total{reason="foreign"}') of $files foreign files dropped"
[ "$(metric "$d_URL" kvserve:kv_disk_blocks)" = 0 ] || fail "foreign blocks indexed"
echo "5. another layout: $files foreign files dropped"
kill "$d_PID"; wait "$d_PID" 2>/dev/null || true

# 6. A full disk: a 1 KiB file size limit fails every block write (its log
# goes through a pipe, not a file, so only the store's writes hit it).
rm -rf "$disk"
( ulimit -f 1; exec "$KVSERVE_BIN" serve --host 127.0.0.1 --port 0 --access-log off --threads 2 --model "$model" \
    "${ram[@]}" --kv-disk-path "$disk" --kv-disk-max-bytes 268435456 ) 2> >(cat >"$dir/e.log") >/dev/null &
e_PID=$!
started_pids+=("$e_PID")
e_URL=""
for _ in $(seq 300); do
  e_URL=$(sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$dir/e.log" | head -1)
  [ -n "$e_URL" ] && break
  sleep 0.1
done
[ -n "$e_URL" ] && wait_ready "$e_URL" 60 || fail "server e not ready"
got=$(complete "$e_URL" "$dir/long.txt")
[ "$got" = "$want" ] || fail "with a full disk: '$got', want '$want'"
for _ in $(seq 50); do [ "$(metric "$e_URL" kvserve:kv_disk_write_errors_total)" -ge 40 ] && break; sleep 0.1; done
[ "$(metric "$e_URL" kvserve:kv_disk_write_errors_total)" -ge 40 ] || fail "failed writes not counted"
[ "$(metric "$e_URL" kvserve:kv_disk_blocks)" = 0 ] || fail "a failed write was indexed"
[ -z "$(find "$disk" -name '*.tmp')" ] || fail "a failed write left its temporary file"
kill -0 "$e_PID" || fail "the server died of a full disk"
echo "6. full disk: $(metric "$e_URL" kvserve:kv_disk_write_errors_total) writes refused, requests answered"
kill "$e_PID"; wait "$e_PID" 2>/dev/null || true

# 7. A bound of 1 MiB (~90 blocks of this model).
rm -rf "$disk"
start_server f --model "$model" "${ram[@]}" --kv-disk-path "$disk" --kv-disk-max-bytes 1048576
wait_ready "$f_URL" 60 || fail "server f not ready"
for k in 0 1 2 3; do complete "$f_URL" "$dir/other$k.txt" >/dev/null; done
for _ in $(seq 50); do [ "$(metric "$f_URL" kvserve:kv_disk_evicted_blocks_total)" -ge 1 ] && break; sleep 0.1; done
bytes=$(du -sb --apparent-size "$disk" | awk '{print $1}')
[ "$(metric "$f_URL" kvserve:kv_disk_evicted_blocks_total)" -ge 1 ] || fail "no eviction under a 1 MiB bound"
[ "$(metric "$f_URL" kvserve:kv_disk_bytes)" -le 1048576 ] || fail "the disk tier holds $(metric "$f_URL" kvserve:kv_disk_bytes) bytes"
echo "7. bound 1 MiB: $(metric "$f_URL" kvserve:kv_disk_bytes) bytes held ($bytes in the directory), $(metric "$f_URL" kvserve:kv_disk_evicted_blocks_total) evicted"
kill "$f_PID"; wait "$f_PID" 2>/dev/null || true

# 8. Cache-aware routing across a replica with a disk tier and one without.
rm -rf "$disk"
start_server g --model "$model" "${ram[@]}" --kv-disk-path "$disk" --kv-disk-max-bytes 268435456
start_server h --model "$model" "${ram[@]}"
wait_ready "$g_URL" 60 && wait_ready "$h_URL" 60 || fail "servers g, h not ready"
aware_gateway() {  # NAME REPLICA_URL... : one cache_aware pool
  local name=$1 reps="" u
  shift
  for u in "$@"; do reps="$reps{url: \"$u\"}, "; done
  cat >"$dir/$name.yaml" <<YAML
gateway: {host: 127.0.0.1, port: 0, admin_port: 0, allow_anonymous: true, health_interval_seconds: 0.2}
model: {path: "$model"}
logging: {audit_log: "off"}
pools:
  - {name: main, max_context: 1024, routing: cache_aware, replicas: [${reps%, }]}
YAML
  start_gateway "$name" "$dir/$name.yaml"
}
prompts=(long other0 other1 other2 other3)
aware_gateway seed "$g_URL"
seed_pid=${started_pids[-1]}
for p in "${prompts[@]}"; do complete "$seed_URL" "$dir/$p.txt" >/dev/null; done
for _ in $(seq 50); do [ "$(metric "$g_URL" kvserve:kv_disk_blocks)" -ge 200 ] && break; sleep 0.1; done
kill "$seed_pid"; wait "$seed_pid" 2>/dev/null || true
# The replica's index: a reset page carries its disk set.
curl -fsS "$g_URL/v1/cache/blocks?epoch=0&since=0" >"$dir/blocks.json"
read -r on_disk in_ram < <(/usr/bin/python3 -c 'import json,sys; p = json.load(open(sys.argv[1]))
assert p["disk"] is True and p["reset"] is True, p.keys()
print(len(p["disk_blocks"]), len(p["blocks"]))' "$dir/blocks.json") || fail "no disk set in /v1/cache/blocks"
[ "$on_disk" -ge 200 ] && [ "$in_ram" -lt "$on_disk" ] || fail "/v1/cache/blocks: $on_disk blocks on disk, $in_ram in RAM"
aware_gateway both "$g_URL" "$h_URL"
admin=$(sed -n 's/.*admin listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$dir/both.log" | head -1)
[ -n "$admin" ] || fail "no admin listener in the gateway's log"
gw_disk() { metric "$admin" "kvserve_gateway:prefix_index_disk_blocks{pool=\"main\",replica=\"$g_URL\"}"; }
for _ in $(seq 50); do [ "$(gw_disk)" -ge 200 ] && break; sleep 0.1; done
[ "$(gw_disk)" -ge 200 ] || fail "the gateway's index of g holds $(gw_disk) disk blocks"
h0=$(metric "$h_URL" kvserve:prompt_tokens_total)
d0=$(metric "$g_URL" 'kvserve:prefix_cache_hit_tokens_by_tier_total{tier="disk"}')
for p in "${prompts[@]}"; do complete "$both_URL" "$dir/$p.txt" >/dev/null; done
[ "$(metric "$h_URL" kvserve:prompt_tokens_total)" = "$h0" ] ||
  fail "replica h (nothing cached) got $(( $(metric "$h_URL" kvserve:prompt_tokens_total) - h0 )) prompt tokens"
d1=$(metric "$g_URL" 'kvserve:prefix_cache_hit_tokens_by_tier_total{tier="disk"}')
[ $((d1 - d0)) -ge 600 ] || fail "g restored $((d1 - d0)) tokens from disk"
predicted=$(metric "$admin" 'kvserve_gateway:prefix_predicted_cached_tokens_total{pool="main",source="replica_disk"}')
[ "$predicted" -ge 600 ] || fail "the gateway predicted $predicted tokens on g's disk"
echo "8. cache-aware routing: $on_disk blocks on g's disk in its index, 5 of 5 prompts to g, $((d1 - d0)) tokens restored ($predicted predicted on disk)"
kill "$g_PID"; wait "$g_PID" 2>/dev/null || true

# 9. Read-ahead for queued requests: five prompts at once on a replica that
# admits eight and runs two at a time; the RAM is empty after the restart, so
# every prompt is restored from disk, and the three that wait in the engine's
# queue are read ahead meanwhile.
start_server g2 --model "$model" --max-context-length 1024 --max-concurrent-requests 8 --max-batch-size 2 \
  --kv-disk-path "$disk" --kv-disk-max-bytes 268435456
wait_ready "$g2_URL" 60 || fail "server g2 not ready"
aware_gateway solo "$g2_URL"
clients=()
for p in "${prompts[@]}"; do
  complete "$solo_URL" "$dir/$p.txt" >"$dir/$p.answer" &
  clients+=("$!")
done
for j in "${clients[@]}"; do wait "$j" || fail "a concurrent request failed"; done
[ "$(cat "$dir/long.answer")" = "$want" ] || fail "read ahead and restored: '$(cat "$dir/long.answer")', computed: '$want'"
used=$(metric "$g2_URL" 'kvserve:kv_disk_prefetched_blocks_total{outcome="used"}')
restored=$(metric "$g2_URL" 'kvserve:prefix_cache_hit_tokens_by_tier_total{tier="disk"}')
[ "$restored" -ge 3000 ] || fail "g2 restored $restored tokens from disk for five prompts"
[ "$used" -ge 44 ] || fail "$used blocks were read ahead and used (want at least one prompt's 44)"
echo "9. five at once after a restart: $restored tokens restored, $used blocks of them read ahead"
echo "9 passed, 0 failed"
