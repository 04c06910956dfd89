#!/usr/bin/env bash
# Builds zerojit_bench_kernels_before: the bandwidth benchmark of BUILD_DIR relinked with the
# DSv4 device sources (kernels/dsv4 and zerojit's device headers) of git revision REV embedded
# instead of today's. Host code, plans and argument blocks stay today's, so the two binaries
# time the same launches of two versions of the kernels side by side in one run ("no kernel
# slower in isolation", docs/BENCHMARKS.md section 11). Needs zerojit_bench_kernels built, and
# argument blocks (the *_params.h files) that REV shares with today.
#   bench/dsv4/chain/before_kernels.sh BUILD_DIR REV
set -euo pipefail
build=$(cd "$1" && pwd)
rev=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
work=$build/bench/before-kernels
rm -rf "$work" && mkdir -p "$work/src"
git -C "$root" archive "$rev" kernels/dsv4 include/zerojit/device | tar -x -C "$work/src"
# Comment lines may differ; the blocks' layout may not.
if ! git -C "$root" diff --quiet -I '^[[:space:]]*//' "$rev" -- 'kernels/dsv4/*_params.h' \
  'kernels/dsv4/*/*_params.h'; then
  echo "before_kernels.sh: the argument blocks differ from $rev; the host code cannot launch them" >&2
  exit 2
fi
entries=()
while IFS= read -r file; do
  case $file in
    */compressor/reference*|*/config/*|*/battery/*) continue ;;
  esac
  entries+=("${file#"$work/src/kernels/"}=$file")
done < <(find "$work/src/kernels/dsv4" -name '*.cu' -o -name '*.cuh' -o -name '*_params.h' | sort)
for file in "$work"/src/include/zerojit/device/*.cuh; do
  entries+=("zerojit/device/$(basename "$file")=$file")
done
joined=$(IFS='|'; echo "${entries[*]}")
cmake "-DENTRIES=$joined" "-DOUTPUT=$work/embedded.cpp" -DNAMESPACE=zerojit::dsv4 \
  -DFUNCTION=embedded_files -P "$root/cmake/zerojit_embed_generate.cmake"
flags=$(sed -n 's/^CXX_FLAGS = //p' "$build/kernels/CMakeFiles/zerojit_dsv4_sources.dir/flags.make")
includes=$(sed -n 's/^CXX_INCLUDES = //p' "$build/kernels/CMakeFiles/zerojit_dsv4_sources.dir/flags.make")
# shellcheck disable=SC2086
c++ $flags $includes -c "$work/embedded.cpp" -o "$work/embedded.o"
ar qc "$work/libzerojit_dsv4_sources.a" "$work/embedded.o"
link=$(cat "$build/bench/CMakeFiles/zerojit_bench_kernels.dir/link.txt")
link=${link//..\/kernels\/libzerojit_dsv4_sources.a/$work/libzerojit_dsv4_sources.a}
link=${link//-o zerojit_bench_kernels /-o zerojit_bench_kernels_before }
(cd "$build/bench" && eval "$link")
echo "$build/bench/zerojit_bench_kernels_before: the DSv4 kernels of $rev"
