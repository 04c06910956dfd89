#!/usr/bin/env bash
# The warmup sweep of docs/BENCHMARKS.md: cold / from disk / from memory for the default
# manifest and the union of all configurations, with 1..N jobs. One process per measurement.
#   bench/warmup_sweep.sh BUILD_DIR [max-jobs] [--compile-only]
set -euo pipefail
build=$1
max_jobs=${2:-$(nproc)}
extra=${3:-}
bench=$build/bench/zerojit_bench_warmup
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for manifest in default union; do
  jobs=1
  while ((jobs <= max_jobs)); do
    dir=$scratch/$manifest-$jobs
    "$bench" --mode cold --jobs "$jobs" --manifest "$manifest" --cache-dir "$dir" $extra
    if ((jobs == max_jobs)); then
      "$bench" --mode disk --jobs "$jobs" --manifest "$manifest" --cache-dir "$dir" $extra
      "$bench" --mode memory --jobs "$jobs" --manifest "$manifest" $extra
    fi
    jobs=$((jobs * 2))
    if ((jobs > max_jobs && jobs / 2 < max_jobs)); then jobs=$max_jobs; fi
  done
done
