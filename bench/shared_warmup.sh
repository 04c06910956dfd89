#!/usr/bin/env bash
# Ranks sharing a cold warmup (docs/BENCHMARKS.md, "Processes sharing a cold warmup"): the wall
# time, from the first start to the last exit, of 1 process with 1 job against N processes with
# 1 job each, all warming the same keys into one fresh cache directory (compile only, so no GPU
# is needed). Runs alternate, each in a fresh cache; prints every run and the medians.
#   bench/shared_warmup.sh BUILD_DIR [processes=2] [repeats=3] [manifest=union]
# SEPARATE_SESSIONS=1 starts each process in a session of its own (setsid), as ranks started by
# separate launchers are: on a machine shared with other users' work, Linux's autogroup
# scheduler gives the processes of one session one share of the CPUs together, so N processes
# of this script's session would get no more CPU than one.
set -euo pipefail
build=$1
processes=${2:-2}
repeats=${3:-3}
manifest=${4:-union}
bench=$build/bench/zerojit_bench_warmup
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# run N: N processes at once against one fresh cache; prints the wall seconds and their reports.
run() {
  local n=$1 cache pids=() start end
  cache=$(mktemp -d -p "$scratch")
  start=$(date +%s.%N)
  local launch=()
  [ "${SEPARATE_SESSIONS:-0}" = 1 ] && launch=(setsid --wait)
  for ((p = 0; p < n; ++p)); do
    "${launch[@]}" "$bench" --mode cold --jobs 1 --manifest "$manifest" --compile-only --cache-dir "$cache" \
      >"$cache.$p.json" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f\n", b - a }'
  for ((p = 0; p < n; ++p)); do echo "  process $p: $(cat "$cache.$p.json")" >&2; done
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

one=() many=()
for ((r = 0; r < repeats; ++r)); do
  t=$(run 1)
  echo "1 process: $t s" >&2
  one+=("$t")
  t=$(run "$processes")
  echo "$processes processes: $t s" >&2
  many+=("$t")
done
m1=$(printf '%s\n' "${one[@]}" | median)
mn=$(printf '%s\n' "${many[@]}" | median)
echo "median of $repeats: 1 process $m1 s, $processes processes $mn s, speed-up" \
  "$(awk -v a="$m1" -v b="$mn" 'BEGIN { printf "%.2f", a / b }')x"
