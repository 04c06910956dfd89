#!/usr/bin/env bash
# Builds examples/consumer, an outside project, the three ways a project takes zerojit, and runs it:
#   1. installs a zerojit build into a temporary prefix and builds the consumer against it with
#      find_package(zerojit CONFIG REQUIRED);
#   2. builds it again without CMake, from the same prefix through pkg-config (its Makefile: the
#      demo and the GPU check), which also checks that zerojit.pc follows the install prefix;
#   3. builds it once more with FetchContent from this source tree (the core and the tool library
#      only: zerojit's defaults as a subproject, DSv4 off).
# The project's own code is compiled with -Wall -Wextra as errors (the documented style must not
# warn). Each time it runs the consumer's demo (compile-only warmup for sm_90a, the monitor
# refusing an unwarmed key) and its GPU check (which skips, exit 77, without a GPU); the CMake
# builds also run its own tool: `warmup --compile-only`, `keys --json`, `run` through dispatch
# (and one that must fail: a battery outside the manifest, with its keys on disk), and the tool's
# words (its own name, its family's help). The installed `zerojit --version` runs too. Needs
# NVRTC (the CUDA toolkit), no GPU.
#   scripts/test_consumer.sh BUILD_DIR [WORK_DIR]
# BUILD_DIR is a configured and fully built zerojit build (ctest's test consumer_package passes
# its own); WORK_DIR (default: a temporary directory, removed afterwards) holds everything else.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:?usage: test_consumer.sh BUILD_DIR [WORK_DIR]}" && pwd)
if [ -n "${2:-}" ]; then
  mkdir -p "$2"
  work=$(cd "$2" && pwd)
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
jobs=${ZEROJIT_JOBS:-$(nproc)}
# The same compiler launcher as the zerojit build (ccache), so the FetchContent build reuses it.
launcher=$(sed -n 's/^CMAKE_CXX_COMPILER_LAUNCHER:[A-Z]*=//p' "$build/CMakeCache.txt")
common=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
# The kernels' compile cache of the runs below stays in the work folder.
export ZEROJIT_CACHE_DIR=$work/cache

say() { printf '\n== %s\n' "$*"; }

# The GPU check: passes on a GPU, or says why it cannot run and exits 77.
run_gpu_check() {  # the consumer's build folder
  say "consumer GPU check"
  local code=0
  "$1/consumer_gpu_check" >"$1/gpu_check.txt" || code=$?
  cat "$1/gpu_check.txt"
  if [ "$code" -eq 77 ]; then
    grep -q "^skipped: ." "$1/gpu_check.txt"
  elif [ "$code" -ne 0 ]; then
    echo "the GPU check failed (exit $code)" >&2
    exit 1
  fi
}

# Expects the command to fail with the exit code given; its standard error goes to $1/error.txt.
expect_exit() {  # folder code command...
  local folder=$1 want=$2 code=0
  shift 2
  "$@" >"$folder/out.txt" 2>"$folder/error.txt" || code=$?
  cat "$folder/error.txt"
  if [ "$code" -ne "$want" ]; then
    echo "expected exit $want, got $code: $*" >&2
    exit 1
  fi
}

run_consumer() {  # the consumer's build folder
  say "consumer demo"
  "$1/consumer_demo"
  run_gpu_check "$1"
  say "axpy-tool warmup --compile-only"
  "$1/axpy-tool" warmup --compile-only --cache-dir "$work/pack-$(basename "$1")" 2>&1 |
    tee "$1/warmup.txt"
  # The tool's own name, not zerojit's, also on the library's progress lines.
  grep -q "^axpy-tool warmup:" "$1/warmup.txt"
  if grep -q "^zerojit" "$1/warmup.txt"; then
    echo "axpy-tool printed zerojit's name" >&2
    exit 1
  fi
  say "axpy-tool keys --json"
  "$1/axpy-tool" keys --json --dtype f32 >"$1/keys.json"
  cat "$1/keys.json"
  # One f32 key, for the consumer's own kernel.
  grep -q '"kernel": *"consumer.axpy"' "$1/keys.json"
  grep -q '"count": *1' "$1/keys.json"
  say "a bad option is named"
  expect_exit "$1" 2 "$1/axpy-tool" keys --dtype f16
  grep -q -- "--dtype" "$1/error.txt"
  say "a run-only option is named as such"
  expect_exit "$1" 2 "$1/axpy-tool" keys --battery-length 5
  grep -q "only \`run\` takes it" "$1/error.txt"
  say "axpy-tool run --help: the family's words"
  "$1/axpy-tool" run --help >"$1/help.txt"
  grep -q "call axpy as serving would" "$1/help.txt"
  if grep -qi "attention\|forward pass\|docs/TOOL.md" "$1/help.txt"; then
    echo "axpy-tool run --help speaks of zerojit's own kernels" >&2
    exit 1
  fi
  say "axpy-tool run (on each GPU; through dispatch without one)"
  "$1/axpy-tool" run --steps 50 --json >"$1/run.json"
  grep -q '"ok": *true' "$1/run.json"
  # 50 calls a device, or 50 through dispatch.
  grep -Eq '"calls": *[1-9][0-9]*0,' "$1/run.json"
  "$1/axpy-tool" run --steps 50 --dispatch-only --json >"$1/run.json"
  grep -q '"mode": *"dispatch-only"' "$1/run.json"
  grep -q '"calls": *50,' "$1/run.json"
  say "axpy-tool run: a battery outside the manifest fails, though its key is on disk"
  # Length 1023 is the unrolled-by-1 key: put it on disk, then run a configuration that warms
  # only length 1024. Nothing compiles or loads without a GPU, so only the manifest check sees it.
  "$1/axpy-tool" warmup --compile-only --length 1023 --cache-dir "$work/run-cache" >/dev/null 2>&1
  expect_exit "$1" 1 "$1/axpy-tool" run --steps 5 --dispatch-only --length 1024 \
    --battery-length 1023 --cache-dir "$work/run-cache"
  grep -q "not in the warmup manifest" "$1/error.txt"
}

say "install $build into $work/prefix"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
"$work/prefix/bin/zerojit" --version
test -f "$work/prefix/include/zerojit/testing.hpp"
test -f "$work/prefix/include/zerojit/device/types.cuh"

say "consumer with find_package"
cmake -S "$root/examples/consumer" -B "$work/installed" "${common[@]}" \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_COMPILE_WARNING_AS_ERROR=ON >/dev/null
cmake --build "$work/installed" -j "$jobs" >/dev/null
run_consumer "$work/installed"
say "the consumer's own ctest (its GPU check)"
(cd "$work/installed" && ctest --output-on-failure)

say "consumer with pkg-config (no CMake build)"
export PKG_CONFIG_PATH=$work/prefix/lib/pkgconfig
# The installed file points into the prefix it was installed to, not the build's own.
includedir=$(pkg-config --variable=includedir zerojit)
test "$(cd "$includedir" && pwd -P)" = "$(cd "$work/prefix/include" && pwd -P)"
make -s -C "$root/examples/consumer" BUILD="$work/pkg-config" CXXFLAGS="-O2 -Wall -Wextra -Werror"
"$work/pkg-config/consumer_demo"
run_gpu_check "$work/pkg-config"

say "consumer with FetchContent"
cmake -S "$root/examples/consumer" -B "$work/fetched" "${common[@]}" -DCONSUMER_FETCH_ZEROJIT=ON \
  -DFETCHCONTENT_SOURCE_DIR_ZEROJIT="$root" -DZEROJIT_WERROR=ON \
  -DCMAKE_COMPILE_WARNING_AS_ERROR=ON >/dev/null
cmake --build "$work/fetched" -j "$jobs" >/dev/null
# Only the core and the tool library were built for it.
test -f "$work/fetched/_deps/zerojit-build/libzerojit.a"
test -f "$work/fetched/_deps/zerojit-build/tools/libzerojit_cli.a"
if [ -e "$work/fetched/_deps/zerojit-build/kernels/libzerojit_dsv4.a" ]; then
  echo "the FetchContent build built DSv4, which the consumer does not use" >&2
  exit 1
fi
run_consumer "$work/fetched"
say "ok"
