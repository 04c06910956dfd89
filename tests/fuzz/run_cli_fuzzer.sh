#!/usr/bin/env bash
# Builds the command-line fuzzer (fuzz_cli_options.cpp) with clang (libFuzzer, address and
# undefined-behaviour sanitizers) and runs it for a bounded time from a seed corpus of real
# command lines (cli_options_seeds.txt, one command line a line).
#   tests/fuzz/run_cli_fuzzer.sh BUILD_DIR [SECONDS]      (default 25 s)
# Exit 0: no crash; 77 (ctest SKIP_RETURN_CODE): no clang or no libFuzzer runtime here;
# anything else: a build failure or a crash (its input is left in BUILD_DIR/crash-*).
# Environment: ZEROJIT_FUZZ_CXX names the clang++ to use.
set -euo pipefail
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build_dir=${1:?usage: run_cli_fuzzer.sh BUILD_DIR [SECONDS]}
seconds=${2:-25}

clang=$("$source_dir/find_fuzz_clang.sh")  # or exits 77, saying why
mkdir -p "$build_dir"

cmake -S "$source_dir/cli" -B "$build_dir" -DCMAKE_CXX_COMPILER="$clang" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" -j "${ZEROJIT_JOBS:-2}"

# One seed file per command line, its words separated by NUL bytes (the fuzzer's input form).
seeds="$build_dir/seeds"
corpus="$build_dir/corpus"
rm -rf "$seeds"
mkdir -p "$seeds" "$corpus"
n=0
while IFS= read -r line; do
  n=$((n + 1))
  printf '%s' "$line" | tr ' ' '\0' >"$seeds/seed-$n"
done <"$source_dir/cli_options_seeds.txt"
# New inputs go to the first directory; the seeds are only read. libFuzzer's own failure
# exit code is 77 by default, which ctest would take for "skipped": make it 1.
exec "$build_dir/fuzz_cli_options" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -error_exitcode=1 -timeout_exitcode=1 -max_len=4096 -print_final_stats=1 \
  -artifact_prefix="$build_dir/" "$corpus" "$seeds"
