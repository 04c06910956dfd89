#!/usr/bin/env bash
# Copies what the GPU suite needs (test and benchmark binaries, the tool, the Python module,
# scripts) into one small folder, to run on a GPU host without building there. With a Python
# that has the CuTeDSL (the test environment scripts/setup.sh makes), also the CuTeDSL tests'
# pack and reference objects, built here without a GPU, and the DSL's runtime library
# (compressed): the GPU host needs no DSL.
#   scripts/stage_gpu.sh BUILD_DIR STAGE_DIR [PYTHON_MODULE_DIR [CUTEDSL_PYTHON]]
set -euo pipefail
build=$1
stage=$2
python_module=${3:-}
cute_python=${4:-}
rm -rf "$stage"
mkdir -p "$stage/tests" "$stage/bench" "$stage/tools" "$stage/python"
for test in tests/zerojit_core_gpu_tests tests/zerojit_dsv4_gpu_tests tests/cli/zerojit_cli_gpu_tests; do
  if [ -x "$build/$test" ]; then strip -o "$stage/tests/$(basename "$test")" "$build/$test"; fi
done
for bench in zerojit_bench_launch zerojit_bench_dispatch zerojit_bench_warmup zerojit_bench_kernels \
  zerojit_bench_kernels_before zerojit_bench_chain zerojit_bench_fallback; do
  if [ -x "$build/bench/$bench" ]; then strip -o "$stage/bench/$bench" "$build/bench/$bench"; fi
done
cp -L "$build"/bench/libbenchmark.so.* "$stage/bench/" 2>/dev/null || true
strip -o "$stage/tools/zerojit" "$build/tools/zerojit"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cp "$root"/bench/*.sh "$root"/bench/*.py "$stage/bench/" 2>/dev/null || true
if [ -n "$python_module" ]; then cp -r "$python_module/zerojit" "$stage/python/"; fi
if [ -n "$cute_python" ]; then
  PYTHONPATH="$build/python" "$cute_python" "$root/python/tests/cute_reference_exports.py" \
    "$stage/cute" sm_90a
  runtime=$(PYTHONPATH="$build/python" "$cute_python" -c \
    'import zerojit.cute_kernels as c; print(c._runtime_library())')
  xz -T0 -9 -c "$runtime" >"$stage/cute/libcute_dsl_runtime.so.xz"
fi
du -sh "$stage"
