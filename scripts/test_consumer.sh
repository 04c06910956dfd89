#!/usr/bin/env bash
# Builds examples/consumer, an outside project, the two ways a project takes zerojit, and runs it:
#   1. installs a zerojit build into a temporary prefix and builds the consumer against it with
#      find_package(zerojit CONFIG REQUIRED);
#   2. builds the consumer once more with FetchContent from this source tree (the core and the
#      tool library only: zerojit's defaults as a subproject, DSv4 off).
# Each time it runs the consumer's demo (compile-only warmup for sm_90a, the monitor refusing an
# unwarmed key) and its own tool's `warmup --compile-only` and `keys --json`; the installed
# `zerojit --version` runs too. Needs NVRTC (the CUDA toolkit), no GPU.
#   scripts/test_consumer.sh BUILD_DIR [WORK_DIR]
# BUILD_DIR is a configured and fully built zerojit build (ctest's test consumer_package passes
# its own); WORK_DIR (default: a temporary directory, removed afterwards) holds everything else.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:?usage: test_consumer.sh BUILD_DIR [WORK_DIR]}" && pwd)
if [ -n "${2:-}" ]; then
  work=$2
  mkdir -p "$work"
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

run_consumer() {  # the consumer's build folder
  say "consumer demo"
  "$1/consumer_demo"
  say "axpy-tool warmup --compile-only"
  "$1/axpy-tool" warmup --compile-only --cache-dir "$work/pack-$(basename "$1")"
  say "axpy-tool keys --json"
  "$1/axpy-tool" keys --json --dtype f32 >"$1/keys.json"
  cat "$1/keys.json"
  # One f32 key, for the consumer's own kernel.
  grep -q '"kernel": *"consumer.axpy"' "$1/keys.json"
  grep -q '"count": *1' "$1/keys.json"
  say "a bad option is named"
  if "$1/axpy-tool" keys --dtype f16 2>"$1/error.txt"; then
    echo "axpy-tool accepted --dtype f16" >&2
    exit 1
  fi
  cat "$1/error.txt"
  grep -q -- "--dtype" "$1/error.txt"
}

say "install $build into $work/prefix"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
"$work/prefix/bin/zerojit" --version
test -f "$work/prefix/lib/pkgconfig/zerojit.pc"

say "consumer with find_package"
cmake -S "$root/examples/consumer" -B "$work/installed" "${common[@]}" \
  -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/installed" -j "$jobs" >/dev/null
run_consumer "$work/installed"

say "consumer with FetchContent"
cmake -S "$root/examples/consumer" -B "$work/fetched" "${common[@]}" -DCONSUMER_FETCH_ZEROJIT=ON \
  -DFETCHCONTENT_SOURCE_DIR_ZEROJIT="$root" -DZEROJIT_WERROR=ON >/dev/null
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
