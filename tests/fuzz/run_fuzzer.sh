#!/usr/bin/env bash
# Builds a fuzzer with clang (libFuzzer, address and undefined-behaviour sanitizers) and runs
# it for a bounded time from a seed corpus.
#   tests/fuzz/run_fuzzer.sh BUILD_DIR [SECONDS] [TARGET]      (default 30 s, cache_entry)
# TARGET: cache_entry (the disk cache's entry reader, from valid entries) or dsv4_config (the
# DSv4 configuration from config.json text and serving options, from tests/data/dsv4 and
# tests/fuzz/dsv4_config_seeds; it builds the project's libraries instrumented, so it needs the
# project's dependencies). Use one BUILD_DIR per target: two runs must not share one.
# Exit 0: no crash; 77 (ctest SKIP_RETURN_CODE): no clang or no libFuzzer runtime here;
# anything else: a build failure or a crash (its input is left in BUILD_DIR/crash-*).
# Environment: ZEROJIT_FUZZ_CXX names the clang++ to use.
set -euo pipefail
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build_dir=${1:?usage: run_fuzzer.sh BUILD_DIR [SECONDS] [TARGET]}
seconds=${2:-30}
target=${3:-cache_entry}
case "$target" in
  cache_entry | dsv4_config) ;;
  *) echo "run_fuzzer.sh: unknown target '$target' (cache_entry or dsv4_config)" >&2; exit 2 ;;
esac

clang=$("$source_dir/find_fuzz_clang.sh")  # or exits 77, saying why
mkdir -p "$build_dir"

launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
dsv4=OFF
[ "$target" = dsv4_config ] && dsv4=ON
cmake -S "$source_dir" -B "$build_dir" -DCMAKE_CXX_COMPILER="$clang" "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZEROJIT_FUZZ_DSV4="$dsv4" >/dev/null
seeds="$build_dir/seeds"
corpus="$build_dir/corpus"
rm -rf "$seeds"
mkdir -p "$seeds" "$corpus"
# New inputs go to the first directory; the seeds are only read. libFuzzer's own failure
# exit code is 77 by default, which ctest would take for "skipped": make it 1.
common=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -error_exitcode=1
  -timeout_exitcode=1 -print_final_stats=1 -artifact_prefix="$build_dir/")
if [ "$target" = cache_entry ]; then
  cmake --build "$build_dir" -j "${ZEROJIT_JOBS:-2}" --target zerojit_fuzz_cache_entry \
    zerojit_make_cache_entry_seeds
  "$build_dir/make_cache_entry_seeds" "$seeds"
  exec "$build_dir/fuzz_cache_entry" "${common[@]}" -max_len=65536 "$corpus" "$seeds"
fi
cmake --build "$build_dir" -j "${ZEROJIT_JOBS:-2}" --target zerojit_fuzz_dsv4_config
cp "$source_dir"/../data/dsv4/*.json "$source_dir"/dsv4_config_seeds/* "$seeds"/
# Inputs past 16 KiB only repeat what the reader's size and depth bounds refuse.
exec "$build_dir/fuzz_dsv4_config" "${common[@]}" -max_len=16384 \
  -dict="$source_dir/dsv4_config.dict" "$corpus" "$seeds"
