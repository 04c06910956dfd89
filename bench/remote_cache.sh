#!/usr/bin/env bash
# The remote-cache benchmark of docs/BENCHMARKS.md: warming the default manifest (compile only)
# from NVRTC, from the disk cache and from Redis (a redis-server this script starts on
# 127.0.0.1), then 16 processes (separate disk caches: 16 simulated hosts) against one remote,
# cold and warm. One tool process per measurement; REPEATS of each (default 3), the median
# printed with the range.
#   bench/remote_cache.sh BUILD_DIR [--arch sm_90a] [--examples]
set -euo pipefail
build=$1
shift
tool=$build/tools/zerojit
repeats=${REPEATS:-3}
hosts=${HOSTS:-16}
scratch=$(mktemp -d)
server=$(command -v redis-server) || { echo "redis-server is not installed" >&2; exit 2; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$scratch" \
  --logfile "$scratch/redis.log" --daemonize no &
redis_pid=$!
trap 'kill $redis_pid 2>/dev/null; wait $redis_pid 2>/dev/null; rm -rf "$scratch"' EXIT
url=redis://127.0.0.1:$port/0
for _ in $(seq 100); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.05
done
flush() { redis-cli -p "$port" flushall >/dev/null; }

# warm DIR [ARGS...]: one warmup; prints "<process wall s> <warmup wall s> <compiled> <hits>"
warm() {
  local dir=$1
  shift
  local start end
  start=$(date +%s.%N)
  "$tool" warmup --compile-only --json --cache-dir "$dir" "$@" >"$scratch/out.json" 2>/dev/null
  end=$(date +%s.%N)
  python3 - "$start" "$end" "$scratch/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[3]))["result"]
r = d.get("remote_cache", {})
print(f"{float(sys.argv[2]) - float(sys.argv[1]):.3f} {d['wall_seconds']:.3f} "
      f"{d['totals']['compiled']} {r.get('hits', 0)}")
PY
}
# summary LABEL: the median and range of the lines read (process wall, warmup wall)
summary() {
  python3 -c '
import sys, statistics
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
label = sys.argv[1]
p = sorted(r[0] for r in rows); w = sorted(r[1] for r in rows)
c = {int(r[2]) for r in rows}; h = {int(r[3]) for r in rows}
print(f"| {label} | {statistics.median(p):.3f} s ({p[0]:.3f}-{p[-1]:.3f}) | "
      f"{statistics.median(w):.3f} s ({w[0]:.3f}-{w[-1]:.3f}) | {sorted(c)} | {sorted(h)} |")' "$1"
}

echo "| source | process wall, median (range) | warmup wall | compiled | remote hits |"
echo "|---|---|---|---|---|"
for i in $(seq "$repeats"); do warm "$scratch/cold$i" "$@"; done | summary "NVRTC (cold disk, no remote)"
warm "$scratch/disk" "$@" >/dev/null
for i in $(seq "$repeats"); do warm "$scratch/disk" "$@"; done | summary "disk cache"
flush
warm "$scratch/seed" --remote-cache "$url" "$@" >/dev/null
for i in $(seq "$repeats"); do
  warm "$scratch/fromredis$i" --remote-cache "$url" "$@"
done | summary "Redis (empty disk)"

# hosts processes at once against one remote; prints the wall until the last one ended and the
# compiles summed over them.
fleet() {
  local label=$1 start end
  shift
  start=$(date +%s.%N)
  for i in $(seq "$hosts"); do
    "$tool" warmup --compile-only --json --cache-dir "$scratch/$label-$i" --remote-cache "$url" \
      "$@" >"$scratch/$label-$i.json" 2>/dev/null &
  done
  mapfile -t started < <(jobs -p | grep -v "^$redis_pid\$")
  wait "${started[@]}" 2>/dev/null || true
  end=$(date +%s.%N)
  python3 - "$label" "$start" "$end" "$scratch" "$hosts" <<'PY'
import json, sys
label, start, end, scratch, hosts = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], int(sys.argv[5])
runs = [json.load(open(f"{scratch}/{label}-{i}.json")) for i in range(1, hosts + 1)]
ok = sum(r["ok"] for r in runs)
compiled = sum(r["result"]["totals"]["compiled"] for r in runs)
hits = sum(r["result"]["remote_cache"]["hits"] for r in runs)
waits = sum(r["result"]["remote_cache"]["lock_waits"] for r in runs)
walls = sorted(r["result"]["wall_seconds"] for r in runs)
print(f"| {hosts} processes, {label} remote | {end - start:.3f} s | {walls[0]:.3f}-{walls[-1]:.3f} s "
      f"| {compiled} | {hits} | {waits} | {ok}/{hosts} |")
PY
}
echo
echo "| run | wall until the last ended | each warmup's wall | compiled (sum) | remote hits (sum) | lock waits (sum) | ok |"
echo "|---|---|---|---|---|---|---|"
flush
fleet cold "$@"
fleet warm "$@"
