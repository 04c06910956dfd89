#!/usr/bin/env bash
# The warmup sweep of docs/BENCHMARKS.md: cold / from disk / from memory for the default
# manifest and the union of all configurations, with 1..N jobs, compiling in threads of the
# process and in forked worker processes. One process per measurement. Then, since a single
# cold run varies by ~20 % on a shared host, REPEATS alternating runs of 1 job and 8 jobs
# (worker processes) per manifest, for the parallel efficiency at 8 jobs.
#   bench/warmup_sweep.sh BUILD_DIR [max-jobs] [--compile-only]
set -euo pipefail
build=$1
max_jobs=${2:-$(nproc)}
extra=()  # --compile-only, when given
[ -n "${3:-}" ] && extra=("$3")
repeats=${REPEATS:-5}
bench=$build/bench/zerojit_bench_warmup
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
run() {  # run LABEL ARGS...: one measurement in a fresh cache directory
  local label=$1
  shift
  echo -n "$label "
  "$bench" --cache-dir "$(mktemp -d -p "$scratch")" "${extra[@]}" "$@"
}
for manifest in default union; do
  jobs=1
  while ((jobs <= max_jobs)); do
    run threads --mode cold --jobs "$jobs" --manifest "$manifest"
    ((jobs > 1)) && run processes --mode cold --jobs "$jobs" --manifest "$manifest" --processes
    if ((jobs == max_jobs)); then
      dir=$scratch/$manifest-disk
      "$bench" --mode cold --jobs "$jobs" --manifest "$manifest" --cache-dir "$dir" "${extra[@]}" \
        --processes >/dev/null
      echo -n "disk "
      "$bench" --mode disk --jobs "$jobs" --manifest "$manifest" --cache-dir "$dir" "${extra[@]}"
      echo -n "memory "
      "$bench" --mode memory --jobs "$jobs" --manifest "$manifest" "${extra[@]}"
    fi
    jobs=$((jobs * 2))
    if ((jobs > max_jobs && jobs / 2 < max_jobs)); then jobs=$max_jobs; fi
  done
done
for manifest in default union; do
  for ((r = 0; r < repeats; ++r)); do
    run repeat-1 --mode cold --jobs 1 --manifest "$manifest"
    run repeat-8 --mode cold --jobs 8 --manifest "$manifest" --processes
  done
done
